package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The signal watch on one GPU: polled with copies, the range is copied after the word was seen
 * reached, a missed deadline or a cancel reports the value seen then and leaves the word alone.
 * Skips with the reason without a GPU.
 */
class SignalWatcherGpuTest {
  private static byte[] le(long v) {
    return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v).array();
  }

  private static long word(DeviceBuffer b, long off) {
    return ByteBuffer.wrap(b.read(off, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
  }

  @Test
  void waitsOnTheDeviceReadsTheRangeAfterTheSignalAndReportsAMissedDeadline() throws Exception {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0)) {
      try (DeviceBuffer buf = ctx.allocate(64); SignalWatcher w = SignalWatcher.create(ctx)) {
        long table = buf.address();
        long signal = table + 32;
        buf.fill((byte) 0);
        buf.write(32, le((1L << 40) | 5));
        SignalWatcher.Seen missed = w.await(table, 40, signal, 2L << 40, System.nanoTime() + 50_000_000L);
        assertFalse(missed.reached());
        assertEquals((1L << 40) | 5, missed.signal(), "the value seen at the deadline");
        assertEquals((1L << 40) | 5, word(buf, 32), "a missed deadline leaves the word as it is");

        buf.write(32, le(0));

        byte[] pattern = GpuTestSupport.pattern(7, 32);
        Thread writer = new Thread(() -> {
          try {
            Thread.sleep(30);
            ctx.makeCurrent();
            buf.write(0, pattern); // the table first, then the signal, as a push does
            buf.write(32, le((3L << 40) | 77));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
        writer.start();
        SignalWatcher.Seen seen = w.await(table, 40, signal, 3L << 40, System.nanoTime() + 10_000_000_000L);
        writer.join();
        assertTrue(seen.reached());
        assertEquals((3L << 40) | 77, seen.signal());
        byte[] got = new byte[40];
        seen.range().get(0, got);
        assertArrayEquals(pattern, Arrays.copyOf(got, 32), "the range as copied after the signal was reached");

        assertEquals("signal wait: range at 0x" + Long.toHexString(table) + " of 40 bytes, signal at 0x"
            + Long.toHexString(table + 24) + "; expected a non-null range of >= 8 bytes that ends with the 8-byte"
            + " aligned signal word",
            assertThrows(IllegalArgumentException.class, () -> w.await(table, 40, table + 24, 1, 0)).getMessage());
      }
    }
  }

  @Test
  void aBegunWaitIsPolledWithoutBlockingAndCanBeCancelled() throws Exception {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0)) {
      try (DeviceBuffer buf = ctx.allocate(64); SignalWatcher w = SignalWatcher.create(ctx)) {
        long table = buf.address();
        long signal = table + 32;
        buf.fill((byte) 0);
        w.begin(table, 40, signal, 2L << 40);
        assertTrue(w.waiting());
        assertEquals(null, w.poll(), "nothing written yet");
        assertEquals("signal watcher already waits for the word at 0x" + Long.toHexString(signal),
            assertThrows(IllegalStateException.class, () -> w.begin(table, 40, signal, 1)).getMessage());
        byte[] pattern = GpuTestSupport.pattern(3, 32);
        buf.write(0, pattern);
        buf.write(32, le((2L << 40) | 9));
        SignalWatcher.Seen seen = null;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (seen == null && System.nanoTime() < deadline) {
          seen = w.poll();
        }
        assertTrue(seen != null && seen.reached(), "the wait ended once the word reached the value");
        assertFalse(w.waiting());
        byte[] got = new byte[32];
        seen.range().get(0, got);
        assertArrayEquals(pattern, got);

        // A wait nobody will satisfy is cancelled; the watcher takes the next one.
        buf.write(32, le(0));
        w.begin(table, 40, signal, 5L << 40);
        assertEquals(null, w.poll());
        SignalWatcher.Seen cancelled = w.cancel();
        assertFalse(cancelled.reached());
        assertEquals(0, cancelled.signal());
        assertEquals(0, word(buf, 32), "a cancel leaves the word as it is");
        assertThrows(IllegalStateException.class, w::poll);
        buf.write(32, le(0));
        buf.write(32, le(1L << 40));
        SignalWatcher.Seen next = w.await(table, 40, signal, 1L << 40, System.nanoTime() + 10_000_000_000L);
        assertTrue(next.reached(), "the watcher serves the next wait after a cancel");
        assertEquals(1L << 40, next.signal());
      }
    }
  }
}
