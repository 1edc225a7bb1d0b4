package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class PoolFloorTest {
  @Test
  void floorIsHalfOfWhatTheLastExecutorOnASharedGpuGets() {
    // Two executors, 35% each: the second sees 65% free and takes 35% of that, 22.75% of the GPU.
    assertEquals(0.35 * 0.65 / 2, TpchBenchmark.minPoolFraction(0.35, 2), 1e-12);
    double last = 0.35 * 0.65;
    assertTrue(TpchBenchmark.minPoolFraction(0.35, 2) < last);
    // Four executors at 20%: the last sees 0.8^3 free.
    assertEquals(0.2 * Math.pow(0.8, 3) / 2, TpchBenchmark.minPoolFraction(0.2, 4), 1e-12);
  }

  @Test
  void floorNeverExceedsRapidsDefaultMinimum() {
    assertEquals(0.2, TpchBenchmark.minPoolFraction(0.4, 1), 1e-12);
    assertEquals(0.25, TpchBenchmark.minPoolFraction(0.9, 1), 1e-12);
  }
}
