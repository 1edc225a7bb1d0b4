package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class GpuReadStatsTest {
  @Test
  void throughputIsRemoteBytesOverTheSpanFromFirstSentToLastLanded() {
    GpuReadStats s = new GpuReadStats(2, 100, 4, 3_000_000_000L, 1, 2, 2, 1_000, 1_000 + 1_500_000_000L);
    assertEquals(1_500_000_000L, s.remoteNanos());
    assertEquals(2e9, s.remoteBytesPerSecond(), 1e-3);
    GpuReadStats localOnly = new GpuReadStats(3, 300, 0, 0, 0, 0, 0, 0, 0);
    assertEquals(0, localOnly.remoteNanos());
    assertEquals(0, localOnly.remoteBytesPerSecond());
  }

  @Test
  void inconsistentStatsAreRejectedNamingWhatWasGot() {
    assertEquals("GPU read stats: last block landed at 5 ns, before the first request was sent at 9 ns",
        assertThrows(IllegalArgumentException.class, () -> new GpuReadStats(0, 0, 1, 16, 0, 1, 1, 9, 5)).getMessage());
    assertEquals("GPU read stats: negative count (0 local blocks, 0 bytes, -1 remote blocks, 16 bytes, 0 copied,"
        + " 1 requests, 1 in flight), expected >= 0",
        assertThrows(IllegalArgumentException.class, () -> new GpuReadStats(0, 0, -1, 16, 0, 1, 1, 1, 5)).getMessage());
    assertEquals("GPU read stats: 3 blocks copied out of the landing region, expected at most the 2 remote blocks",
        assertThrows(IllegalArgumentException.class, () -> new GpuReadStats(0, 0, 2, 16, 3, 1, 1, 1, 5)).getMessage());
  }
}
