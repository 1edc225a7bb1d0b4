package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class ReportWriterTest {
  /** One measured round of q06 (light) and, when {@code withHeavy}, q03 (heavy), at the given times. */
  private static BenchResults results(boolean withHeavy, long q06Default, long q06Gpu) {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "rapids.jar", "--queries", withHeavy ? "3,6" : "6",
        "--reps", "1", "--warmups", "0", "--transports", "none", "--rapids-gpu", "g.jar"});
    BenchResults r = new BenchResults(o);
    r.storedCpu("q03", new BenchResults.CpuFigures(1000, 500));
    r.storedCpu("q06", new BenchResults.CpuFigures(1000, 0));
    long[][] ms = {{q06Default, q06Gpu}, {1000, 700}};
    String[] managers = {"rapids-default", "rapids-slipstream-gpu"};
    for (int m = 0; m < 2; m++) {
      r.add(run("q06", managers[m], ms[0][m]));
      if (withHeavy) {
        r.add(run("q03", managers[m], ms[1][m]));
      }
    }
    return r;
  }

  private static BenchResults.Run run(String q, String manager, long ms) {
    return new BenchResults.Run(q, manager, 0, false, 1, ms, 1,
        new QueryMetrics(1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0), Map.of());
  }

  @Test
  void aRunWithoutShuffleHeavyQueriesIsJudgedOnItsSlowestQueryAlone() {
    assertEquals("rapids-slipstream-gpu / rapids-default: no shuffle-heavy query in this run, so no total;"
        + " slowest query q06 at 0.94 (target <= 1.05): per-query target met",
        ReportWriter.verdict(results(false, 1000, 940), "rapids-slipstream-gpu"));
    assertEquals("rapids-slipstream-gpu / rapids-default: no shuffle-heavy query in this run, so no total;"
        + " slowest query q06 at 1.10 (target <= 1.05): per-query target NOT met",
        ReportWriter.verdict(results(false, 1000, 1100), "rapids-slipstream-gpu"));
  }

  @Test
  void bothTargetsDecideARunWithShuffleHeavyQueries() {
    assertEquals("rapids-slipstream-gpu / rapids-default over shuffle-heavy queries: 0.70 (per round: 0.70;"
        + " target <= 0.77); slowest query q06 at 1.00 (target <= 1.05): target met",
        ReportWriter.verdict(results(true, 1000, 1000), "rapids-slipstream-gpu"));
    assertEquals("rapids-slipstream-gpu / rapids-default over shuffle-heavy queries: 0.70 (per round: 0.70;"
        + " target <= 0.77); slowest query q06 at 1.08 (target <= 1.05): target NOT met",
        ReportWriter.verdict(results(true, 1000, 1080), "rapids-slipstream-gpu"));
  }

  /** q08 and q12 once under each manager, each with the given shuffle bytes written (MiB). */
  private static BenchResults plans(long q08Default, long q08Other, String other, String... extra) {
    String[] base = {"--rapids", "rapids.jar", "--queries", "8,12", "--reps", "1", "--warmups", "0",
        "--transports", "tcp"};
    String[] args = java.util.stream.Stream.concat(java.util.Arrays.stream(base), java.util.Arrays.stream(extra))
        .toArray(String[]::new);
    BenchResults r = new BenchResults(BenchOptions.parse(args));
    r.storedCpu("q08", new BenchResults.CpuFigures(1000, 500));
    r.storedCpu("q12", new BenchResults.CpuFigures(1000, 500));
    for (String m : new String[] {"rapids-default", other}) {
      long q08 = (m.equals(other) ? q08Other : q08Default) << 20;
      r.add(new BenchResults.Run("q08", m, 0, false, 1, 2000, 1,
          new QueryMetrics(1, 1, q08, q08, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0), Map.of()));
      r.add(new BenchResults.Run("q12", m, 0, false, 1, 1000, 1,
          new QueryMetrics(1, 1, 500L << 20, 500L << 20, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0), Map.of()));
    }
    return r;
  }

  @Test
  void aQueryWhoseShuffleBytesDifferIsReportedAsAnotherPlan() {
    BenchResults r = plans(370, 3846, "rapids-slipstream-tcp");
    assertEquals(Map.of("q08", "q08 under rapids-slipstream-tcp shuffled 3846.0 MiB against 370.0 MiB under"
        + " rapids-default (medians): adaptive execution chose another plan, so its ratio compares two plans"),
        ReportWriter.otherPlans(r, "rapids-slipstream-tcp"));
    Machine.Load load = new Machine.Load(0, 0, 0);
    String md = ReportWriter.markdown(r, Machine.probe(), load, load, "now");
    assertTrue(md.contains("| q08 | yes | - | 2000 (2000-2000) | 2000 (2000-2000) | 1.00 * |"), md);
    assertTrue(md.contains("| q12 | yes | - | 1000 (1000-1000) | 1000 (1000-1000) | 1.00 |"), md);
    assertTrue(md.contains("- \\* q08 under rapids-slipstream-tcp shuffled 3846.0 MiB"), md);

    assertEquals(Map.of(), ReportWriter.otherPlans(plans(370, 420, "rapids-slipstream-tcp"),
        "rapids-slipstream-tcp"), "within a fifth (and a MiB) is the same plan");
    assertEquals(Map.of(), ReportWriter.otherPlans(plans(370, 800, "rapids-slipstream-gpu",
        "--rapids-gpu", "g.jar"), "rapids-slipstream-gpu"), "the GPU path's device tables are another format");
  }
}
