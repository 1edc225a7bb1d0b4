package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Queued copies to, within and back from one GPU, waited for once. Skips with the reason without a GPU. */
class DeviceCopyBatchGpuTest {

  @Test
  void manySmallCopiesArriveWhereTheyWereQueued() {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0); DeviceBuffer a = ctx.allocate(16 << 20);
        DeviceBuffer b = ctx.allocate(8 << 20); DeviceCopyBatch.Pool pool = new DeviceCopyBatch.Pool(ctx)) {
      a.fill((byte) 0);
      b.fill((byte) 0);
      byte[] all = GpuTestSupport.pattern(3, 4000 * 300);
      try (DeviceCopyBatch c = pool.acquire()) {
        // 4,000 prefixes of 300 bytes to a, each then copied within the device to b: 1.2 MB staged,
        // more than the first staging buffer holds: it is drained and reused for copies to the device.
        for (int i = 0; i < 4000; i++) {
          c.toDevice(a.address() + i * 4096L, Arrays.copyOfRange(all, i * 300, (i + 1) * 300));
          c.withinDevice(b.address() + i * 300L, a.address() + i * 4096L, 300);
        }
        c.finish();
      }
      assertArrayEquals(all, b.read(0, all.length));
      assertArrayEquals(Arrays.copyOfRange(all, 3999 * 300, 4000 * 300), a.read(3999 * 4096L, 300));

      try (DeviceCopyBatch c = pool.acquire()) {
        c.ensureCapacity(4 << 20);
        int at0 = c.toHost(b.address(), 300);
        int at1 = c.toHost(b.address() + 3999 * 300L, 300);
        byte[] x = new byte[300];
        assertThrows(IllegalStateException.class, () -> c.read(at0, x, 0, 300), "no read before finish");
        c.finish();
        c.read(at0, x, 0, 300);
        assertArrayEquals(Arrays.copyOfRange(all, 0, 300), x);
        c.read(at1, x, 0, 300);
        assertArrayEquals(Arrays.copyOfRange(all, 3999 * 300, 4000 * 300), x);
        IllegalStateException full = assertThrows(IllegalStateException.class, () -> c.toHost(b.address(), 5 << 20));
        assertEquals(true, full.getMessage().contains("do not fit"), full.getMessage());
      }
      DeviceCopyBatch first = pool.acquire();
      first.close();
      assertSame(first, pool.acquire(), "a closed batch goes back to the pool");
    }
  }
}
