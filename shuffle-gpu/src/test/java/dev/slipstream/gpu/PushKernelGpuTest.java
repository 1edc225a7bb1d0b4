package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The project's push and wait kernels launched through JCuda from the shipped fatbin, on one GPU:
 * two queues (nvlink, and proxy through the native executor thread) write into an alias of a local
 * region, each adds its signal after the data; a bad request gets an error completion and writes
 * nothing.
 */
class PushKernelGpuTest {
  private static final int SRC = 0; // table index: locals first
  private static final int DST = 1; // then remotes

  @ParameterizedTest
  @EnumSource(value = Backend.class, names = {"NVLINK", "PROXY"})
  void pushesByteExactWithSignalsAfterTheData(Backend backend) {
    GpuTestSupport.assumeGpu();
    long len = 4L << 20;
    // proxy: the native executor thread runs the copies and signals while this thread polls.
    int depth = backend == Backend.PROXY ? 64 : 0;
    try (GpuContext ctx = GpuContext.open(0);
        GpuRegion src = GpuRegion.create(ctx, MemoryKind.DEVICE, len, 1);
        GpuRegion dst = GpuRegion.create(ctx, MemoryKind.DEVICE, len, 2);
        RemoteRegion dstView = RemoteRegion.alias(dst);
        QueueSet qs = QueueSet.create(ctx, backend, 2, depth, List.of(src), List.of(dstView));
        PushKernel k = PushKernel.load(ctx)) {
      src.write(0, GpuTestSupport.pattern(0, (int) len));
      dst.fill((byte) 0);
      long sig0 = len - 16;
      long sig1 = len - 8;
      List<PushKernel.Item> q0 = List.of(new PushKernel.Item(0, 0, 1), new PushKernel.Item(100, 4096, 4097),
          new PushKernel.Item(8192, 65536, 65536));
      List<PushKernel.Item> q1 = List.of(new PushKernel.Item(200_000, 1 << 20, (1 << 20) + 3),
          new PushKernel.Item(3, 3 << 20, 16));
      SlipStatus[] st = k.push(qs, List.of(new PushKernel.Queue(SRC, DST, DST, sig0),
          new PushKernel.Queue(SRC, DST, DST, sig1)), List.of(q0, q1), 2, 256, 30_000);
      assertArrayEquals(new SlipStatus[] {SlipStatus.SLIP_OK, SlipStatus.SLIP_OK}, st);
      qs.check(false);
      for (List<PushKernel.Item> items : List.of(q0, q1)) {
        for (PushKernel.Item it : items) {
          assertArrayEquals(GpuTestSupport.pattern(it.srcOffset(), (int) it.length()),
              dst.read(it.dstOffset(), (int) it.length()), "item " + it);
        }
      }
      assertEquals(0, dst.read(1, 1)[0], "nothing written outside the items");
      ByteBuffer sigs = ByteBuffer.wrap(dst.read(sig0, 16)).order(ByteOrder.LITTLE_ENDIAN);
      assertEquals(GpuTestSupport.signal(3, 1 + 4097 + 65536), sigs.getLong(0));
      assertEquals(GpuTestSupport.signal(2, (1 << 20) + 3 + 16), sigs.getLong(8));

      // The receive kernel sees both signals; a value not reached times out.
      SlipStatus[] w = k.waitSignals(dst.devicePointer() + sig0,
          new long[] {sigs.getLong(0), sigs.getLong(8) + 1}, 1_000_000L, 30_000);
      assertArrayEquals(new SlipStatus[] {SlipStatus.SLIP_OK, SlipStatus.SLIP_ERR_TIMEOUT}, w);
    }
  }

  @Test
  void outOfRangeItemGetsAnErrorCompletionAndWritesNothing() {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0);
        GpuRegion src = GpuRegion.create(ctx, MemoryKind.DEVICE, 1 << 16, 21);
        GpuRegion dst = GpuRegion.create(ctx, MemoryKind.DEVICE, 4096, 22);
        RemoteRegion dstView = RemoteRegion.alias(dst);
        QueueSet qs = QueueSet.create(ctx, Backend.NVLINK, 1, 0, List.of(src), List.of(dstView));
        PushKernel k = PushKernel.load(ctx)) {
      src.write(0, GpuTestSupport.pattern(0, 1 << 16));
      dst.fill((byte) 0);
      SlipStatus[] st = k.push(qs, List.of(new PushKernel.Queue(SRC, DST, DST, 4088)),
          List.of(List.of(new PushKernel.Item(0, 3584, 1024))), 1, 64, 30_000);
      assertEquals(SlipStatus.SLIP_ERR_OUT_OF_RANGE, st[0]);
      GpuException e = assertThrows(GpuException.class, () -> qs.check(true));
      assertEquals(SlipStatus.SLIP_ERR_OUT_OF_RANGE, e.status());
      assertTrue(e.getMessage().contains("offset 3584 + length 1024 outside region 22 (length 4096)"), e.getMessage());
      assertArrayEquals(new byte[4096], dst.read(0, 4096), "no byte and no signal written");
      qs.check(false); // cleared
    }
  }

  @Test
  void badQueueSetArgumentsAreRefusedWithTheReason() {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0); GpuRegion src = GpuRegion.create(ctx, MemoryKind.DEVICE, 4096, 31)) {
      IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
          () -> QueueSet.create(ctx, Backend.NVLINK, 0, 0, List.of(src), List.of()));
      assertEquals("queue set: 0 queues of depth 0, expected > 0 queues and depth >= 0", bad.getMessage());
      GpuException e = assertThrows(GpuException.class,
          () -> QueueSet.create(ctx, Backend.PROXY, 1, 3, List.of(src), List.of()));
      assertEquals(SlipStatus.SLIP_ERR_INVALID_ARG, e.status());
      assertTrue(e.getMessage().contains("proxy ring depth 3, expected a power of two >= 2"), e.getMessage());
    }
  }
}
