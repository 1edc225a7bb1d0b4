package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChartFromJsonTest {
  @TempDir
  Path tmp;

  @Test
  void aGpuModeReportReadsBackIntoTheSameRunsAndChart() throws Exception {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "rapids.jar", "--queries", "3,18", "--reps", "2",
        "--warmups", "1", "--out", tmp.toString(), "--conf", "spark.rapids.sql.concurrentGpuTasks=2", "--rapids-gpu",
        "g.jar", "--gpu-compression", "none,lz4"});
    BenchResults r = new BenchResults(o);
    r.sparkVersion("4.2.0");
    long t = 1_000;
    for (int round = 0; round < 3; round++) {
      for (String m : o.managers()) {
        if (!o.runs(m, round)) {
          continue;
        }
        for (String q : o.queries()) {
          t += 17;
          r.add(new BenchResults.Run(q, m, round, round == 0, t, t % 997, 5,
              new QueryMetrics(9, 1 << 20, t * 3, t * 3, t, t * 1000, t % 7, 1 << 16, 1 << 28, 1 << 24, 3, t % 11, 2, t % 13),
              BenchOptions.gpuPath(m) ? Map.of("mapOutput.count", t, TpchBenchmark.GPU_BYTES, t)
                  : BenchOptions.slipstream(m) ? Map.of("mapOutput.count", t) : Map.of()));
        }
      }
    }
    Path json = tmp.resolve("tpch.json");
    Files.writeString(json, ReportWriter.json(r, Machine.probe(), Machine.load(), Machine.load(), tmp, "now"));
    BenchResults back = ChartFromJson.read(json);

    assertEquals(r.runs(), back.runs());
    assertEquals(o.rapidsGpuJar(), back.options().rapidsGpuJar());
    assertEquals(List.of("none", "lz4"), back.options().gpuCompressions());
    String md = ReportWriter.markdown(r, Machine.probe(), Machine.load(), Machine.load(), "now");
    // The GPU path's bytes are a third of those written in every run, so is the median share.
    assertTrue(md.contains("Share of shuffle bytes on Slipstream's GPU path under rapids-slipstream-gpu "), md);
    assertTrue(md.contains("Share of shuffle bytes on Slipstream's GPU path under rapids-slipstream-gpu-lz4 "), md);
    assertTrue(md.matches("(?s).*\\| q03 \\| [0-9.]+ \\| [0-9.]+ \\| 33% \\|.*"), md);
    assertEquals(o.managers(), back.managers());
    assertEquals("rapids-default", back.baseline());
    assertEquals(List.of("spark.rapids.sql.concurrentGpuTasks=2"), back.options().confs());
    for (String q : o.queries()) {
      for (String m : o.managers()) {
        assertEquals(r.stat(q, m), back.stat(q, m), q + " " + m);
      }
    }
    ChartWriter.write(r, tmp.resolve("a.png"));
    ChartWriter.write(back, tmp.resolve("b.png"));
    assertArrayEquals(Files.readAllBytes(tmp.resolve("a.png")), Files.readAllBytes(tmp.resolve("b.png")));
  }
  @Test
  void storedCpuFiguresTellShuffleHeavyQueriesWhenCpuSparkDidNotRun() throws Exception {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "rapids.jar", "--queries", "3,18", "--reps", "1",
        "--warmups", "0", "--out", tmp.toString(), "--transports", "none", "--rapids-gpu", "g.jar"});
    BenchResults r = new BenchResults(o);
    r.sparkVersion("4.2.0");
    // q03 wrote half its input as shuffle bytes under CPU Spark, q18 a hundredth.
    r.storedCpu("q03", new BenchResults.CpuFigures(1000, 500));
    r.storedCpu("q18", new BenchResults.CpuFigures(1000, 10));
    long t = 1_000;
    for (String m : List.of("rapids-default", "rapids-slipstream-gpu")) {
      for (String q : o.queries()) {
        t += 17;
        r.add(new BenchResults.Run(q, m, 0, false, t, t, 5,
            new QueryMetrics(9, 1 << 20, t * 3, t * 3, t, t * 1000, t % 7, 1 << 16, 1 << 28, 1 << 24, 3, t % 11, 2, t % 13),
            Map.of()));
      }
    }
    assertEquals(List.of("q03"), r.heavyQueries());
    Path json = tmp.resolve("tpch.json");
    Files.writeString(json, ReportWriter.json(r, Machine.probe(), Machine.load(), Machine.load(), tmp, "now"));
    BenchResults back = ChartFromJson.read(json);

    assertEquals(List.of("q03"), back.heavyQueries(), "read back from the stored figures, not from CPU Spark's runs");
    assertEquals(List.of("q03", "q18"), back.storedCpuQueries());
    assertEquals(r.totalRatio("rapids-slipstream-gpu", r.heavyQueries()),
        back.totalRatio("rapids-slipstream-gpu", back.heavyQueries()));
    assertTrue(Double.isFinite(back.totalRatio("rapids-slipstream-gpu", back.heavyQueries())));
  }
}
