package dev.slipstream.bench.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.spark.gpu.GpuReadStats;
import dev.slipstream.spark.gpu.RequestPhases;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class DataPathReportTest {
  @Test
  void perReducerAndAggregateRatesAreRemoteBytesOverTheirSpans() {
    // Reducer 1: 2 GB in 10 ms from t = 0; reducer 0: 1 GB in 5 ms from t = 10 ms; a local-only reducer 2.
    // Reducer 1's one timed request: 10 us prepare, 20 to the holder, 5 queued, 30 check, 40 lane,
    // 15 launch, 1000 kernel, 60 land (the answer, at 1_146_000, is not on the data path).
    RequestPhases p1 = new RequestPhases();
    p1.add(1_000, 11_000, new ServeTimeline(31_000, 36_000, 66_000, 106_000, 121_000, 1_121_000, 1_146_000),
        1_181_000);
    var r1 = DataPathReport.Read.of(1, "1", 100, Optional.of(
        new GpuReadStats(1, 50, 3, 2_000_000_000L, 0, 2, 2, 0, 10_000_000, p1)));
    var r0 = DataPathReport.Read.of(0, "0", 50, Optional.of(
        new GpuReadStats(0, 0, 2, 1_000_000_000L, 1, 1, 1, 10_000_000, 15_000_000)));
    var r2 = DataPathReport.Read.of(2, "0", 7, Optional.of(new GpuReadStats(1, 70, 0, 0, 0, 0, 0, 0, 0)));
    List<String> lines = DataPathReport.lines(List.of(r1, r2, r0));
    assertEquals(5, lines.size());
    assertEquals("  reducer 0 (executor 0): 50 rows, local 0.0 MB, remote 1000.0 MB in 2 blocks (1 copied out),"
        + " 1 requests (peak 1 in flight), 5.000 ms: 200.00 GB/s", lines.get(0));
    assertEquals("  reducer 1 (executor 1): 100 rows, local 0.0 MB, remote 2000.0 MB in 3 blocks (0 copied out),"
        + " 2 requests (peak 2 in flight), 10.000 ms: 200.00 GB/s", lines.get(1));
    assertEquals("  reducer 2 (executor 0): 7 rows, local 0.0 MB, remote 0.0 MB in 0 blocks (0 copied out),"
        + " 0 requests (peak 0 in flight), 0.000 ms: n/a (no remote request)", lines.get(2));
    assertEquals("  aggregate: remote 3000.0 MB, local 0.0 MB; over the union span 15.000 ms: 200.00 GB/s;"
        + " over the sum of spans 15.000 ms: 200.00 GB/s", lines.get(3));
    assertEquals("  requests: 1 requests, mean us per request: prepare 10, to holder 20, queued 5, check 30, lane 40,"
        + " launch 15, kernel 1000, land 60; total 1180; software (sent to landed, less the kernel phase) median"
        + " 170.0 us, p90 170.0, of 1", lines.get(4));
  }

  @Test
  void aReducerWithoutStatsIsAnErrorNamingIt() {
    assertEquals("reduce task of partition 3 on executor 1: no GPU read stats (the task did not read through the GPU"
        + " path)", assertThrows(IllegalStateException.class,
            () -> DataPathReport.Read.of(3, "1", 0, Optional.empty())).getMessage());
  }
}
