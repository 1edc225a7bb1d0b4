package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.MemoryKind;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Device memory through JCuda and regions through JNI, on one GPU. Skips with the reason without one. */
class DeviceMemoryGpuTest {

  @Test
  void allocatesAndCopiesByteExact() {
    GpuTestSupport.assumeGpu();
    byte[] data = new byte[(8 << 20) + 13];
    new Random(1).nextBytes(data);
    try (GpuContext ctx = GpuContext.open(0); DeviceBuffer buf = ctx.allocate(data.length + 3)) {
      buf.fill((byte) 0x5a);
      buf.write(3, data);
      assertArrayEquals(data, buf.read(3, data.length));
      assertEquals(0x5a, buf.read(0, 3)[2]);
      IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, () -> buf.read(buf.length() - 1, 2));
      assertEquals("offset " + (buf.length() - 1) + " + length 2 outside device buffer (length " + buf.length() + ")",
          e.getMessage());
    }
  }

  @Test
  void deviceAndHostRegionsExportTheirDescriptors() {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0);
        GpuRegion dev = GpuRegion.create(ctx, MemoryKind.DEVICE, 1 << 20, 11);
        GpuRegion host = GpuRegion.create(ctx, MemoryKind.HOST_SHARED, 1 << 16, 12)) {
      byte[] data = GpuTestSupport.pattern(0, 1 << 20);
      dev.write(0, data);
      assertArrayEquals(data, dev.read(0, data.length), "JCuda copies into a region the native library allocated");
      RegionExport d = dev.export();
      assertEquals(MemoryKind.DEVICE, d.kind());
      assertEquals(11, d.id());
      assertEquals(0, d.device());
      assertEquals(1 << 20, d.length());
      assertEquals(dev.key(), d.key());
      assertEquals(ProcessHandle.current().pid(), d.ownerPid());
      RegionExport h = host.export();
      assertEquals(MemoryKind.HOST_SHARED, h.kind());
      assertEquals(-1, h.device());
      assertTrue(h.shmName().startsWith("/slip-" + ProcessHandle.current().pid() + "-12-"), h.shmName());
      assertTrue(host.hostPointer() != 0);
      host.write(100, new byte[] {1, 2, 3});
      assertArrayEquals(new byte[] {1, 2, 3}, host.read(100, 3), "host region through its device alias");
      // A descriptor of this process cannot be imported here: the library says to alias instead.
      GpuException self = assertThrows(GpuException.class, () -> RemoteRegion.importFrom(ctx, d));
      assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, self.status());
      assertTrue(self.getMessage().contains("was exported by this process"), self.getMessage());
    }
  }
}
