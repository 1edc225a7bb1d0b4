package dev.slipstream.bench.tpch;

import dev.slipstream.bench.LocalCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.spark.ExecutorLostFailure;
import org.apache.spark.FetchFailed;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * What RAPIDS' shuffles on Slipstream's GPU path must keep doing beyond the TPC-H queries, checked
 * on a GPU machine over the benchmark's generated tables: adaptive execution's coalesced partition
 * ranges, skew-join splits and local (map-side) reads; an executor killed while a reduce stage reads
 * its outputs and one killed as a map stage ends (fetch failures and lost executors: Spark reruns the
 * lost map outputs); map outputs that overflow small device and host budgets onto disk; and an
 * exchange Slipstream does not serve (round-robin), which stays RAPIDS'; pieces compressed on the GPU
 * (LZ4: fewer bytes than the same shuffle stored as it is, and the same rows). Each check runs its query
 * under CPU Spark (sort shuffle, the reference rows) and under RAPIDS on Slipstream's GPU path, and
 * passes when the rows are equal and the run shows what the check is about (the partition specs in
 * the final plan, the faults Spark saw, the spills). Writes {@code checks.md} into the report folder
 * and exits non-zero when a check fails.
 *
 * <p>Usage: the benchmark's options in GPU mode with {@code --rapids-gpu} ({@code --sf 1 --executors 2
 * --cores 4 ...}); {@code dev/slipstream-gpu-spark receive NN checks ARGS} runs it on the GPU machine.
 */
public final class GpuPathChecks {
  /** Where a check kills an executor (kill -9 of its JVM, as a dying machine would). */
  enum Fault {
    NONE,
    /** When the first task of a stage that reads a shuffle starts: its reducers are fetching. */
    KILL_IN_REDUCE,
    /** When the first shuffle map stage completes, before its reducers read: an executor holding its outputs. */
    KILL_AT_MAP_END
  }

  /**
   * One check: a query, the SQL settings it runs with, its fault, and what its GPU run must show
   * (given its outcome and that of the check named {@code against}, which runs before it; null: none).
   */
  record Check(String name, String sql, Map<String, String> sqlConf, Fault fault, boolean smallStore,
      String against, BiFunction<Outcome, Outcome, String> expect) {
    Check(String name, String sql, Map<String, String> sqlConf, Fault fault, boolean smallStore,
        Function<Outcome, String> expect) {
      this(name, sql, sqlConf, fault, smallStore, null, (o, b) -> expect.apply(o));
    }
  }

  /** What one run of a check showed. */
  record Outcome(List<String> rows, Map<String, Integer> specs, List<String> nodes, long gpuBytes, long spills,
      long diskSpills, int fetchFailures, int lostTasks, int mapReruns, String killed, String plan, String error) {
    /** A run whose query failed: the failure is the check's verdict, and the next checks still run. */
    static Outcome failed(Throwable e, String killed) {
      Throwable root = e;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      return new Outcome(List.of(), Map.of(), List.of(), 0, 0, 0, 0, 0, 0, killed, "(no plan: the query failed)\n",
          "the query failed: " + e + (root == e ? "" : "; caused by " + root));
    }

    int spec(String name) {
      return specs.getOrDefault(name, 0);
    }

    boolean hasNode(String name) {
      return nodes.contains(name);
    }
  }

  /** Cluster settings of the small-store check: outputs overflow the device and host budgets. */
  static final Map<String, String> SMALL_STORE = Map.of(
      "spark.slipstream.gpu.mapOutput.memoryBytes", "64m",
      "spark.slipstream.gpu.mapOutput.hostBytes", "32m");

  static List<Check> checks() {
    Map<String, String> shuffled = Map.of("spark.sql.autoBroadcastJoinThreshold", "-1");
    List<Check> c = new ArrayList<>();
    c.add(new Check("aqe-coalesce",
        "SELECT count(*) AS groups, sum(q) AS quantity, sum(n) AS lines FROM (SELECT l_suppkey, sum(l_quantity) AS q,"
            + " count(*) AS n FROM lineitem GROUP BY l_suppkey)",
        Map.of(), Fault.NONE, false,
        o -> o.spec("CoalescedPartitionSpec") > 0 && o.gpuBytes() > 0 ? null
            : "expected coalesced partition ranges over GPU-path bytes"));
    c.add(new Check("aqe-skew-join",
        "SELECT count(*) AS n, sum(l.p) AS price, sum(o.t) AS total FROM (SELECT CASE WHEN l_orderkey % 8 <> 0 THEN 1"
            + " ELSE l_orderkey END AS k, l_extendedprice AS p FROM lineitem) l JOIN (SELECT o_orderkey AS k,"
            + " o_totalprice AS t FROM orders) o ON l.k = o.k",
        Map.of("spark.sql.autoBroadcastJoinThreshold", "-1",
            "spark.sql.files.maxPartitionBytes", "16m",
            "spark.sql.adaptive.skewJoin.enabled", "true",
            "spark.sql.adaptive.skewJoin.skewedPartitionFactor", "2",
            "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "2m",
            "spark.sql.adaptive.advisoryPartitionSizeInBytes", "2m"),
        Fault.NONE, false,
        o -> o.spec("PartialReducerPartitionSpec") > 0 ? null : "expected skew splits (PartialReducerPartitionSpec)"));
    c.add(new Check("aqe-local-read",
        "SELECT o_orderpriority, count(*) AS n, sum(l_quantity) AS q FROM lineitem JOIN (SELECT o_orderkey,"
            + " o_orderpriority FROM orders WHERE o_totalprice > 450000) o ON l_orderkey = o_orderkey"
            + " GROUP BY o_orderpriority ORDER BY o_orderpriority",
        Map.of("spark.sql.autoBroadcastJoinThreshold", "1m",
            "spark.sql.adaptive.autoBroadcastJoinThreshold", "64m"),
        Fault.NONE, false,
        o -> o.spec("PartialMapperPartitionSpec") + o.spec("CoalescedMapperPartitionSpec") > 0 ? null
            : "expected local reads (PartialMapperPartitionSpec or CoalescedMapperPartitionSpec)"));
    String join = "SELECT count(*) AS n, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem JOIN orders"
        + " ON l_orderkey = o_orderkey WHERE o_orderdate < date '1995-03-15'";
    c.add(new Check("executor-killed-in-reduce", join, shuffled, Fault.KILL_IN_REDUCE, false,
        o -> o.killed() != null && o.fetchFailures() > 0 && o.mapReruns() > 0 ? null
            : "expected a killed executor, fetch failures and a rerun of its map outputs"));
    c.add(new Check("executor-killed-at-map-end", join, shuffled, Fault.KILL_AT_MAP_END, false,
        o -> o.killed() != null && o.mapReruns() > 0 ? null
            : "expected a killed executor and a rerun of its map outputs"));
    c.add(new Check("round-robin-falls-back",
        "SELECT count(*) AS n, sum(o_totalprice) AS total FROM (SELECT /*+ REPARTITION(7) */ o_orderkey, o_totalprice"
            + " FROM orders)",
        Map.of(), Fault.NONE, false,
        o -> o.hasNode("GpuColumnarExchange") ? null : "expected RAPIDS' own exchange for the round-robin shuffle"));
    // Every column type of lineitem through one hash exchange, with nulls put in before it.
    String mixed = "SELECT count(*) AS n, sum(q) AS quantity, sum(p) AS price, count(p) AS priced, sum(length(c)) AS"
        + " comments, max(s) AS instruct, min(d) AS shipped FROM (SELECT /*+ REPARTITION(64, l_orderkey) */"
        + " l_orderkey, l_quantity AS q, CASE WHEN l_linenumber = 1 THEN NULL ELSE l_extendedprice END AS p,"
        + " l_comment AS c, l_shipinstruct AS s, l_shipdate AS d FROM lineitem)";
    c.add(new Check("pieces-stored-as-written", mixed, Map.of("spark.slipstream.rapids.compression", "none"),
        Fault.NONE, false, o -> o.gpuBytes() > 0 ? null : "expected GPU-path bytes"));
    c.add(new Check("pieces-compressed-lz4", mixed, Map.of("spark.slipstream.rapids.compression", "lz4"),
        Fault.NONE, false, "pieces-stored-as-written",
        (o, as) -> as == null || as.error() != null ? "no run of pieces-stored-as-written to compare with"
            : o.gpuBytes() > 0 && o.gpuBytes() < 0.9 * as.gpuBytes() ? null
            : String.format(Locale.ROOT, "expected under 0.9 of the %d GPU-path bytes stored as written, got %d",
                as.gpuBytes(), o.gpuBytes())));
    c.add(new Check("store-spills-to-host-and-disk",
        "SELECT count(*) AS groups, sum(s) AS price FROM (SELECT l_orderkey, l_partkey, sum(l_extendedprice) AS s"
            + " FROM lineitem GROUP BY l_orderkey, l_partkey)",
        Map.of("spark.sql.files.maxPartitionBytes", "8m"), Fault.NONE, true,
        o -> o.spills() > 0 && o.diskSpills() > 0 ? null : "expected spills to host memory and on to disk"));
    return c;
  }

  private final BenchOptions options;
  private final TpchBenchmark bench;
  private final Progress progress;

  GpuPathChecks(BenchOptions options, Progress progress) {
    this.options = options;
    this.progress = progress;
    this.bench = new TpchBenchmark(options, progress);
  }

  public static void main(String[] args) {
    BenchOptions o;
    try {
      o = BenchOptions.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.err.print(BenchOptions.USAGE);
      System.exit(2);
      return;
    }
    if (o.rapidsGpuJar() == null) {
      System.err.println("GPU path checks need --rapids JAR and --rapids-gpu JAR (RAPIDS and Slipstream's integration)");
      System.exit(2);
    }
    int failed;
    try (Progress p = new Progress(System.out)) {
      failed = new GpuPathChecks(o, p).run();
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
      return;
    }
    System.exit(failed == 0 ? 0 : 1);
  }

  /** Runs every check; returns how many failed. */
  int run() throws IOException {
    Path data = bench.prepare();
    List<Check> all = checks();
    Map<String, Outcome> cpu = new LinkedHashMap<>();
    Map<String, Outcome> gpu = new LinkedHashMap<>();
    progress.println("GPU path checks, SF" + TpchBenchmark.fmt(options.scaleFactor()) + ": CPU Spark for the"
        + " reference rows, then RAPIDS on Slipstream's GPU path");
    runAll("sort", Map.of(), all, data, cpu, false);
    runAll(BenchOptions.RAPIDS_SLIPSTREAM_GPU, Map.of(), all.stream().filter(c -> !c.smallStore()).toList(), data,
        gpu, true);
    runAll(BenchOptions.RAPIDS_SLIPSTREAM_GPU, SMALL_STORE, all.stream().filter(Check::smallStore).toList(), data,
        gpu, true);
    StringBuilder md = new StringBuilder("# GPU path checks\n\nSF").append(TpchBenchmark.fmt(options.scaleFactor()))
        .append(", ").append(options.executors()).append(" executors x ").append(options.cores())
        .append(" cores; small-store cluster: ").append(new TreeMap<>(SMALL_STORE)).append("\n\n")
        .append("| check | rows | partition specs (final plan) | killed | fetch failures | lost tasks | map stage reruns"
            + " | GPU-path MiB | spills (to disk) | verdict |\n|---|---|---|---|---:|---:|---:|---:|---|---|\n");
    int failed = 0;
    for (Check c : all) {
      Outcome want = cpu.get(c.name());
      Outcome got = gpu.get(c.name());
      String why = got == null ? "did not run" : got.error() != null ? got.error() : !want.rows().equals(got.rows())
          ? "rows differ: CPU " + want.rows() + ", GPU " + got.rows()
          : c.expect().apply(got, c.against() == null ? null : gpu.get(c.against()));
      failed += why == null ? 0 : 1;
      String verdict = why == null ? "pass" : "FAIL: " + why;
      progress.println(String.format(Locale.ROOT, "%-30s %s", c.name(), verdict));
      if (got != null) {
        // A killed executor's counters leave the sums: its check's bytes and spills are not comparable.
        String mib = got.killed() == null ? String.format(Locale.ROOT, "%.1f", got.gpuBytes() / 1048576.0) : "-";
        String spills = got.killed() == null ? got.spills() + " (" + got.diskSpills() + ")" : "-";
        md.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %d | %d | %d | %s | %s | %s |\n", c.name(),
            got.error() != null ? "-" : got.rows().size() + (want.rows().equals(got.rows()) ? " equal" : " DIFFER"),
            got.specs(),
            got.killed() == null ? "" : got.killed(), got.fetchFailures(), got.lostTasks(), got.mapReruns(), mib,
            spills, verdict));
      } else {
        md.append("| ").append(c.name()).append(" | | | | | | | | | ").append(verdict).append(" |\n");
      }
    }
    md.append("\n## Final plans (GPU path)\n");
    gpu.forEach((name, o) -> md.append("\n### ").append(name).append("\n\n```\n").append(o.plan()).append("```\n"));
    Files.createDirectories(options.outDir());
    Files.writeString(options.outDir().resolve("checks.md"), md);
    progress.println((all.size() - failed) + " of " + all.size() + " checks passed; " + options.outDir().resolve("checks.md"));
    return failed;
  }

  private void runAll(String manager, Map<String, String> extra, List<Check> list, Path data, Map<String, Outcome> into,
      boolean gpuRun) {
    if (list.isEmpty()) {
      return;
    }
    SparkSession spark = bench.start(manager, extra);
    Faults faults = new Faults();
    spark.sparkContext().addSparkListener(faults);
    try {
      for (String table : TpchGenerator.TABLES) {
        spark.read().parquet(data.resolve(table).toString()).createOrReplaceTempView(table);
      }
      for (Check c : list) {
        Map<String, String> before = new LinkedHashMap<>();
        c.sqlConf().forEach((k, v) -> {
          before.put(k, spark.conf().getOption(k).isDefined() ? spark.conf().get(k) : null);
          spark.conf().set(k, v);
        });
        Map<String, Long> counters0 = gpuRun ? counters() : Map.of();
        Fault fault = gpuRun ? c.fault() : Fault.NONE;
        faults.arm(fault, fault == Fault.NONE ? Map.of()
            : LocalCluster.executorPids(spark, options.executors(), options.cores(), 60));
        long t0 = System.nanoTime();
        Dataset<Row> ds = spark.sql(c.sql());
        List<String> rows;
        try {
          rows = ds.collectAsList().stream().map(Row::toString).collect(Collectors.toList());
        } catch (RuntimeException e) {
          if (!gpuRun) {
            throw e; // no reference rows: nothing to check against
          }
          LocalCluster.drainListenerBus(spark);
          Outcome o = Outcome.failed(e, faults.killed);
          faults.arm(Fault.NONE, Map.of());
          into.put(c.name(), o);
          progress.println("  " + manager + " " + c.name() + ": " + o.error());
          restore(spark, before);
          bench.executorsStarted(LocalCluster.awaitRunning(spark, options.executors(), options.cores()));
          continue;
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        LocalCluster.drainListenerBus(spark);
        Map<String, Long> counters1 = gpuRun ? counters() : Map.of();
        SparkPlan plan = ds.queryExecution().executedPlan();
        Map<String, Integer> specs = new TreeMap<>();
        List<String> nodes = new ArrayList<>();
        walk(plan, specs, nodes);
        Outcome o = new Outcome(rows, specs, nodes, delta(counters0, counters1, "gpu.tableBytesWritten"),
            delta(counters0, counters1, "gpu.mapOutputSpills"), delta(counters0, counters1, "gpu.mapOutputDiskSpills"),
            faults.fetchFailures.get(), faults.lostTasks.get(), faults.reruns.get(), faults.killed,
            PlanMetrics.of(plan), null);
        faults.arm(Fault.NONE, Map.of());
        into.put(c.name(), o);
        progress.println(String.format(Locale.ROOT, "  %s %s: %d rows in %d ms, specs %s%s", manager, c.name(),
            rows.size(), ms, specs, o.killed() == null ? "" : ", killed " + o.killed() + " (fetch failures "
                + o.fetchFailures() + ", lost tasks " + o.lostTasks() + ", map stage reruns " + o.mapReruns() + ")"));
        restore(spark, before);
        if (o.killed() != null) {
          // The worker starts a new executor for the killed one; the next check runs on a full cluster.
          bench.executorsStarted(LocalCluster.awaitRunning(spark, options.executors(), options.cores()));
        }
      }
    } finally {
      bench.stop(spark);
    }
  }

  /** Puts the session's SQL settings back as they were before a check. */
  private static void restore(SparkSession spark, Map<String, String> before) {
    before.forEach((k, v) -> {
      if (v == null) {
        spark.conf().unset(k);
      } else {
        spark.conf().set(k, v);
      }
    });
  }

  private static long delta(Map<String, Long> a, Map<String, Long> b, String key) {
    return b.getOrDefault(key, 0L) - a.getOrDefault(key, 0L);
  }

  /**
   * Slipstream's GPU counters summed over the live executors. A killed executor's counts leave the
   * sum, so a check with a fault reads its spills and bytes only as far as the survivors saw them.
   */
  private static Map<String, Long> counters() {
    return LocalCluster.executorSums(k -> k.startsWith("gpu."));
  }

  /** Counts partition specs of the shuffle reads (Spark's and RAPIDS' readers) and names every node. */
  private static void walk(SparkPlan plan, Map<String, Integer> specs, List<String> nodes) {
    PlanMetrics.visit(plan, (p, depth) -> {
      nodes.add(p.nodeName());
      try {
        Object seq = p.getClass().getMethod("partitionSpecs").invoke(p);
        scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) seq).iterator();
        while (it.hasNext()) {
          Object spec = it.next();
          String name = spec.getClass().getSimpleName();
          if (!name.equals("CoalescedPartitionSpec") || coalescesSeveral(spec)) {
            specs.merge(name, 1, Integer::sum);
          }
        }
      } catch (NoSuchMethodException e) {
        // not a shuffle read
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("cannot read the partition specs of " + p.nodeName(), e);
      }
    });
  }

  /** A coalesced spec counts only when it joins several reduce partitions (one is a plain read). */
  private static boolean coalescesSeveral(Object spec) {
    if (spec instanceof org.apache.spark.sql.execution.CoalescedPartitionSpec c) {
      return c.endReducerIndex() - c.startReducerIndex() > 1;
    }
    return false;
  }

  /** Kills an executor at the armed moment and counts the failures Spark's tasks report. */
  private final class Faults extends SparkListener {
    private volatile Fault fault = Fault.NONE;
    private volatile Map<String, Long> pids = Map.of();
    private final AtomicBoolean fired = new AtomicBoolean();
    volatile String killed;
    final AtomicInteger fetchFailures = new AtomicInteger();
    final AtomicInteger lostTasks = new AtomicInteger();
    /**
     * Submissions of a shuffle's map stage after its first: a retry of the stage, or (adaptive
     * execution runs each map stage as a job of its own) a new stage for lost outputs.
     */
    final AtomicInteger reruns = new AtomicInteger();
    private final java.util.Set<Object> mapShuffles = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Stages that read a shuffle, seen at submission. */
    private final java.util.Set<Integer> reading = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Executors that finished a task of each stage (the holders of a map stage's outputs). */
    private final Map<Integer, java.util.Set<String>> ranTasks = new java.util.concurrent.ConcurrentHashMap<>();

    void arm(Fault f, Map<String, Long> executorPids) {
      fault = f;
      pids = executorPids;
      fired.set(false);
      killed = null;
      fetchFailures.set(0);
      lostTasks.set(0);
      reruns.set(0);
      mapShuffles.clear();
      reading.clear();
      ranTasks.clear();
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted e) {
      if (e.stageInfo().shuffleDepId().isDefined() && !mapShuffles.add(e.stageInfo().shuffleDepId().get())) {
        reruns.incrementAndGet();
      }
      if (!e.stageInfo().parentIds().isEmpty()) {
        reading.add(e.stageInfo().stageId());
      }
    }

    @Override
    public void onTaskStart(SparkListenerTaskStart e) {
      if (fault == Fault.KILL_IN_REDUCE && reading.contains(e.stageId())) {
        kill(pids.keySet());
      }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted e) {
      if (fault == Fault.KILL_AT_MAP_END && e.stageInfo().shuffleDepId().isDefined()
          && e.stageInfo().failureReason().isEmpty()) {
        kill(ranTasks.getOrDefault(e.stageInfo().stageId(), java.util.Set.of()));
      }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if (e.reason() instanceof org.apache.spark.Success$) {
        ranTasks.computeIfAbsent(e.stageId(), k -> java.util.concurrent.ConcurrentHashMap.newKeySet())
            .add(e.taskInfo().executorId());
      } else if (e.reason() instanceof FetchFailed) {
        fetchFailures.incrementAndGet();
      } else if (e.reason() instanceof ExecutorLostFailure) {
        lostTasks.incrementAndGet();
      }
    }

    /** kill -9 of the executor with the highest id among {@code candidates}, once per armed check. */
    private void kill(java.util.Set<String> candidates) {
      java.util.Optional<String> victim = candidates.stream().filter(pids::containsKey).max(String::compareTo);
      if (victim.isEmpty() || !fired.compareAndSet(false, true)) {
        return;
      }
      String id = victim.get();
      long pid = pids.get(id);
      ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
      killed = "executor " + id + " (pid " + pid + ")";
    }
  }
}
