package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.tpch.BenchOptions;
import dev.slipstream.bench.tpch.BenchResults;
import dev.slipstream.bench.tpch.Progress;
import dev.slipstream.bench.tpch.TpchBenchmark;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A CI-sized run of the TPC-H benchmark runner: scale factor 0.01, three queries that are
 * shuffle-heavy at this scale (Q16, Q17, Q18), sort shuffle against Slipstream over tcp on a
 * local cluster of two executor JVMs, one round.
 * Every run of a query must return the same rows, no query's map outputs may outlive it, and the JSON,
 * markdown and PNG reports must be written. Times are not asserted (they belong to the benchmark itself).
 */
class TpchSmokeIT {
  @TempDir
  Path tmp;

  @Test
  void sortAndSlipstreamReturnIdenticalRowsAndReportsAreWritten() throws Exception {
    Path out = tmp.resolve("out");
    BenchOptions o = BenchOptions.parse(new String[] {"--sf", "0.01", "--queries", "16,17,18", "--reps", "1",
        "--warmups", "0", "--transports", "tcp", "--shuffle-partitions", "16",
        "--data", tmp.resolve("data").toString(), "--out", out.toString()});
    BenchResults r;
    try (Progress p = new Progress(System.out, false)) {
      r = new TpchBenchmark(o, p).run();
    }
    String progress = "(progress in the test's output file)";
    assertEquals(List.of(), r.mismatches(), "rows differ between shuffle managers:\n" + progress);
    assertEquals(6, r.runs().size(), "3 queries x 2 managers:\n" + progress);
    for (BenchResults.Run run : r.runs()) {
      assertTrue(run.rows() > 0, run + " returned no rows");
      assertTrue(run.metrics().shuffleBytesWritten() > 0, run + " wrote no shuffle bytes");
      assertTrue(run.metrics().inputBytes() > 0, run + " read no input");
      if (run.manager().equals("slipstream-tcp")) {
        // The runner removes each query's shuffles once its figures are taken: the next query starts clean.
        assertTrue(run.slipstream().getOrDefault("mapOutput.count", 0L) > 0, run + ": outputs while it ran");
        assertEquals(0L, run.slipstream().get("mapOutput.countAfterRemoval"), run + ": outputs left after removal");
      }
    }
    for (String f : List.of("tpch.json", "tpch.md", "tpch.png")) {
      assertTrue(Files.size(out.resolve(f)) > 0, f + " written");
    }
    String json = Files.readString(out.resolve("tpch.json"));
    assertTrue(json.contains("\"slipstream-tcp\"") && json.contains("\"ratioShuffleHeavy\""), json);
    byte[] png = Files.readAllBytes(out.resolve("tpch.png"));
    assertEquals((byte) 0x89, png[0], "PNG signature");
    assertEquals('P', png[1], "PNG signature");
  }
}
