package dev.slipstream.bench.tpch;

import dev.slipstream.bench.LocalCluster;
import java.io.File;
import java.io.IOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.MutableURLClassLoader;

/**
 * The TPC-H benchmark runner: generates (or reuses) the data, then runs the selected queries on a
 * local cluster under Spark's sort shuffle and under Slipstream with each transport, checks that
 * every run of a query returns the same rows as the first one (or as CPU Spark's rows stored by an
 * earlier run on the same data, {@link ReferenceRows}), and writes a console table, JSON, markdown
 * and a PNG chart.
 *
 * <p>GPU mode ({@code --rapids JAR}, Spark 4 line): CPU Spark with sort shuffle runs the queries
 * once, in the first round, for the reference rows (not at all when every query's rows are stored);
 * then the RAPIDS Accelerator runs them with its own shuffle manager ({@code rapids-default}:
 * {@code spark.shuffle.manager} unset, RAPIDS sets its {@code RapidsShuffleManager}) and with
 * Slipstream's ({@code rapids-slipstream-<transport>}).
 * The driver loads the jar as {@code spark-submit --jars} does (a {@link MutableURLClassLoader} as
 * the context class loader); executors get it on their class path. Executors share the machine's
 * GPUs, each with {@link BenchOptions#gpuAllocFraction()} of the GPU memory free when it starts for
 * RAPIDS' pool ({@link #minPoolFraction}); every cluster waits until each executor has run a task
 * ({@link LocalCluster#awaitRunning}).
 *
 * <p>Order: {@code warmups + reps} rounds; each round starts a fresh local cluster per manager
 * (a SparkContext's shuffle manager is fixed, and one JVM holds one SparkContext) and runs every
 * query once. Managers alternate their order from round to round (A B, B A, ...) so slow drift
 * of the machine does not favour one. Warm-up rounds are run and checked but not measured.
 *
 * <p>Threading: one thread drives everything; {@link Progress} redraws a status line from its own.
 */
public final class TpchBenchmark {
  private final BenchOptions options;
  private final BenchResults results;
  private final Progress progress;
  private final Map<String, List<String>> reference = new LinkedHashMap<>();
  /** Queries whose reference rows came from {@link #stored}, with the file they came from. */
  private final Map<String, Path> fromStore = new LinkedHashMap<>();
  private ReferenceRows stored;
  /** The GPU mode with every query's reference rows stored: CPU Spark does not run. */
  private boolean cpuSkipped;
  private final Map<String, String> sql;
  private Path data;
  /** The executor processes of the cluster {@link #start} started last, by executor id. */
  private Map<String, Long> executorPids = Map.of();

  public TpchBenchmark(BenchOptions options, Progress progress) {
    this.options = options;
    this.results = new BenchResults(options);
    this.progress = progress;
    this.sql = TpchQueries.all(options.scaleFactor());
  }

  public static void main(String[] args) throws Exception {
    BenchOptions o;
    try {
      o = BenchOptions.parse(args);
    } catch (IllegalArgumentException e) {
      if (!e.getMessage().isEmpty()) {
        System.err.println(e.getMessage());
      }
      System.err.print(BenchOptions.USAGE);
      System.exit(2);
      return;
    }
    BenchResults r;
    try (Progress p = new Progress(System.out)) {
      r = new TpchBenchmark(o, p).run();
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
      return;
    }
    System.out.println();
    System.out.print(ReportWriter.consoleTable(r));
    System.out.println("Reports: " + o.outDir().toAbsolutePath());
    if (!r.mismatches().isEmpty()) {
      System.out.println();
      System.out.println("!!! RESULT MISMATCH: shuffle managers returned different rows. FAILED.");
      r.mismatches().forEach(m -> System.out.println("!!! " + m));
      System.exit(1);
    }
  }

  /** Runs the benchmark and writes the reports; on a result mismatch stops after that cluster. */
  public BenchResults run() throws IOException {
    Machine machine = Machine.probe();
    progress.println(String.format(Locale.ROOT,
        "Slipstream TPC-H: SF%s, %d queries, %d executors x %d core(s), managers %s, %d warm-up + %d measured rounds",
        fmt(options.scaleFactor()), options.queries().size(), options.executors(), options.cores(),
        options.managers(), options.warmups(), options.reps()));
    progress.println("Machine: " + machine.summary());
    if (options.gpu()) {
      progress.println("GPU mode: RAPIDS Accelerator " + options.rapidsJar() + (options.rapidsNatives() == null ? ""
          : ", cudf natives from " + options.rapidsNatives()) + ", GPU memory fraction per executor "
          + options.gpuAllocFraction() + "; CPU Spark (sort) runs in the first round only, for the reference rows");
    }
    prepare();
    List<String> managers = options.managers();
    int rounds = options.warmups() + options.reps();
    int clusters = 0;
    for (int round = 0; round < rounds; round++) {
      for (String m : managers) {
        clusters += runs(m, round) ? 1 : 0;
      }
    }
    progress.total(clusters * options.queries().size());
    Machine.Load before = Machine.load();
    for (int round = 0; round < rounds && results.mismatches().isEmpty(); round++) {
      List<String> order = new ArrayList<>(managers);
      if (round % 2 == 1) {
        Collections.reverse(order);
      }
      final int r = round;
      order.removeIf(m -> !runs(m, r));
      for (String manager : order) {
        runRound(round, round < options.warmups(), manager);
        // Reports so far, so that an interrupted long run still leaves its numbers.
        ReportWriter.writeAll(results, machine, before, Machine.load(), data);
        if (!results.mismatches().isEmpty()) {
          break;
        }
      }
    }
    Machine.Load after = Machine.load();
    progress.done();
    ReportWriter.writeAll(results, machine, before, after, data);
    return results;
  }

  /**
   * What every cluster of a run needs before it starts: in the GPU mode RAPIDS on the driver's class
   * loader, the generated data, and CPU Spark's rows stored by earlier runs ({@link ReferenceRows},
   * under {@code <data>/reference}). Returns the data folder.
   */
  Path prepare() throws IOException {
    if (options.gpu()) {
      useRapids();
    }
    data = TpchGenerator.ensure(options.dataDir(), options.scaleFactor(),
        Math.max(2, Runtime.getRuntime().availableProcessors()), progress::println);
    stored = new ReferenceRows(options.dataDir().resolve("reference"), options.scaleFactor(), sparkVersion());
    for (String q : options.queries()) {
      stored.load(q, sql.get(q), progress::println).ifPresent(s -> {
        reference.put(q, s.rows());
        fromStore.put(q, stored.file(q));
        if (options.gpu()) {
          results.storedCpu(q, s.cpu());
        }
      });
    }
    cpuSkipped = options.gpu() && fromStore.size() == options.queries().size();
    if (cpuSkipped) {
      progress.println("Reference rows: CPU Spark's, stored for every query in "
          + stored.file(options.queries().get(0)).getParent() + "; CPU Spark does not run");
    } else if (!fromStore.isEmpty()) {
      progress.println("Reference rows: stored for " + fromStore.keySet() + "; CPU Spark runs every query and is "
          + "checked against them");
    }
    return data;
  }

  /** Whether {@code manager} runs in {@code round}: as {@link BenchOptions#runs}, and CPU Spark not when {@link #cpuSkipped}. */
  private boolean runs(String manager, int round) {
    return options.runs(manager, round) && !(cpuSkipped && manager.equals("sort"));
  }

  /** The Spark version on the class path (Scala's {@code org.apache.spark.SPARK_VERSION}), before any cluster starts. */
  private static String sparkVersion() {
    try {
      Object pkg = Class.forName("org.apache.spark.package$").getField("MODULE$").get(null);
      return (String) pkg.getClass().getMethod("SPARK_VERSION").invoke(pkg);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read Spark's version from org.apache.spark.package$", e);
    }
  }

  /** Per query run: bytes of device-table blocks map tasks stored (Slipstream's GPU path), from the executors' counter. */
  static final String GPU_BYTES = "gpu.tableBytesByQuery";
  /** Per query run: the codec threads' bytes decoded ahead, encoded ahead, and encoded on the tasks meanwhile. */
  static final String DECODED_AHEAD = "reader.bytesDecodedAhead.byQuery";
  static final String ENCODED_AHEAD = "writer.bytesEncodedAhead.byQuery";
  static final String ENCODED_ON_TASK = "writer.bytesEncodedOnTask.byQuery";
  /** Cumulative executor counters, each with the key under which a run records its query's share. */
  static final Map<String, String> BY_QUERY = Map.of("gpu.tableBytesWritten", GPU_BYTES,
      "reader.bytesDecodedAhead", DECODED_AHEAD, "writer.bytesEncodedAhead", ENCODED_AHEAD,
      "writer.bytesEncodedOnTask", ENCODED_ON_TASK);

  private void runRound(int round, boolean warmup, String manager) {
    SparkSession spark = start(manager);
    Map<String, Long> before = new java.util.HashMap<>(); // the counters of a new cluster's executors start at 0
    QueryMetricsListener listener = new QueryMetricsListener();
    spark.sparkContext().addSparkListener(listener);
    try {
      ExecutorLog.drain().forEach(e -> progress.println("  " + manager + ": " + e));
      for (String table : TpchGenerator.TABLES) {
        spark.read().parquet(data.resolve(table).toString()).createOrReplaceTempView(table);
      }
      for (String query : options.queries()) {
        progress.start(round, warmup, manager, query);
        listener.begin();
        long start = System.currentTimeMillis();
        long t0 = System.nanoTime();
        org.apache.spark.sql.Dataset<Row> ds = spark.sql(sql.get(query));
        List<Row> rows = ds.collectAsList();
        long wall = (System.nanoTime() - t0) / 1_000_000;
        if (!warmup) {
          writePlan(manager, query, ds);
        }
        QueryMetrics m = listener.end(spark);
        List<String> got = rows.stream().map(Row::toString).collect(Collectors.toList());
        Map<String, Long> counters = BenchOptions.slipstream(manager) ? slipstreamCounters() : Map.of();
        BY_QUERY.forEach((cumulative, share) -> {
          Long now = counters.get(cumulative);
          if (now != null) {
            counters.put(share, now - before.getOrDefault(cumulative, 0L));
            before.put(cumulative, now);
          }
        });
        long r0 = System.nanoTime();
        List<Integer> shuffles = listener.shuffles();
        settle(spark, listener, query);
        removeShuffles(spark, shuffles);
        long removalMillis = (System.nanoTime() - r0) / 1_000_000;
        if (!counters.isEmpty()) {
          Map<String, Long> left = slipstreamCounters();
          counters.put(OUTPUTS_LEFT, left.getOrDefault("mapOutput.count", 0L));
          counters.put(GPU_BYTES_LEFT, left.getOrDefault("gpu.mapOutputDeviceBytes", 0L)
              + left.getOrDefault("gpu.mapOutputHostBytes", 0L) + left.getOrDefault("gpu.mapOutputDiskBytes", 0L));
        }
        results.add(new BenchResults.Run(query, manager, round, warmup, start, wall, got.size(), m, counters));
        String verdict = check(query, manager, round, got);
        if (manager.equals("sort") && !fromStore.containsKey(query) && results.mismatches().isEmpty()) {
          stored.store(query, sql.get(query), got, new BenchResults.CpuFigures(m.inputBytes(), m.shuffleBytesWritten()));
          fromStore.put(query, stored.file(query));
          verdict += " (stored)";
        }
        if (counters.containsKey(GPU_BYTES)) {
          verdict += String.format(Locale.ROOT,
              "  (GPU path %d MiB; device store %d MiB, %d spills to host so far; %d MiB left after removal)",
              counters.get(GPU_BYTES) >> 20, counters.getOrDefault("gpu.mapOutputDeviceBytes", 0L) >> 20,
              counters.getOrDefault("gpu.mapOutputSpills", 0L), counters.getOrDefault(GPU_BYTES_LEFT, 0L) >> 20);
        } else if (!counters.isEmpty()) {
          verdict += String.format(Locale.ROOT, "  (store %d MiB in %d outputs, %d spills so far; %d outputs left after removal)",
              counters.getOrDefault("memory.mapOutputInUse", 0L) >> 20, counters.getOrDefault("mapOutput.count", 0L),
              counters.getOrDefault("mapOutput.spills", 0L), counters.getOrDefault(OUTPUTS_LEFT, 0L));
        }
        if (java.util.stream.Stream.of(DECODED_AHEAD, ENCODED_AHEAD, ENCODED_ON_TASK)
            .anyMatch(k -> counters.getOrDefault(k, 0L) > 0)) {
          verdict += String.format(Locale.ROOT, "  (codec threads: %d MiB decoded ahead, %d MiB encoded ahead, %d MiB"
                  + " encoded on the tasks)", counters.get(DECODED_AHEAD) >> 20, counters.get(ENCODED_AHEAD) >> 20,
              counters.get(ENCODED_ON_TASK) >> 20);
        }
        if (m.tasks() >= options.executors() && m.executorsUsed() < options.executors()) {
          // A query whose tasks all ran on fewer executors than the cluster has compares unlike clusters.
          verdict += String.format(Locale.ROOT, "  (WARNING: its %d tasks ran on %d of %d executors)", m.tasks(),
              m.executorsUsed(), options.executors());
        }
        verdict += String.format(Locale.ROOT, "  (%d shuffles removed in %d ms)", shuffles.size(), removalMillis);
        progress.finish(round, warmup, manager, query, wall, got.size(), verdict);
        ExecutorLog.drain().forEach(e -> progress.println("  " + manager + ": " + e));
        if (!results.mismatches().isEmpty()) {
          return;
        }
      }
    } finally {
      stop(spark);
    }
  }

  /** The executor processes of the running cluster after some were replaced (a check killed one). */
  void executorsStarted(Map<String, Long> pids) {
    executorPids = pids;
  }

  /**
   * Stops a cluster and waits for its executor processes to exit ({@code stop()} returns while they
   * still shut down), so that the next cluster starts on a machine (and a GPU, whose memory the next
   * executors size RAPIDS' pool from) this one has left.
   */
  void stop(SparkSession spark) {
    spark.stop();
    List<Long> alive = LocalCluster.awaitExit(executorPids.values(), 60);
    if (!alive.isEmpty()) {
      progress.println("  WARNING: executor processes " + alive + " had not exited 60 s after the cluster stopped");
    }
  }

  /**
   * The query's final physical plan (adaptive execution's, with the exchanges and joins it chose at
   * run time) and its operators' metrics ({@link PlanMetrics}) into {@code plans/<manager>/<query>.txt}
   * of the report folder, from the first measured round: what tells two managers' plans and
   * operator times apart when their query times differ.
   */
  private void writePlan(String manager, String query, org.apache.spark.sql.Dataset<Row> ds) {
    Path f = options.outDir().resolve("plans").resolve(manager).resolve(query + ".txt");
    if (Files.exists(f)) {
      return;
    }
    try {
      Files.createDirectories(f.getParent());
      org.apache.spark.sql.execution.SparkPlan plan = ds.queryExecution().executedPlan();
      Files.writeString(f, plan + "\nOperators and their metrics:\n" + PlanMetrics.of(plan));
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot write " + f, e);
    }
  }

  /** Per query run: host-path map outputs Slipstream's executors held once the query's shuffles were removed. */
  static final String OUTPUTS_LEFT = "mapOutput.countAfterRemoval";
  /** Per query run: bytes the GPU path's stores held (device, host, disk) once the query's shuffles were removed. */
  static final String GPU_BYTES_LEFT = "gpu.mapOutputBytesAfterRemoval";

  /**
   * Lets tasks of stages that adaptive execution cancelled end before their shuffles go: Spark 3.5's
   * scheduler stops the SparkContext when such a task's map output arrives for a shuffle already
   * removed (Spark 4 aborts the stage instead). After the last task ended, a one-task job passes
   * through the scheduler's event loop behind those tasks' completions.
   */
  private static void settle(SparkSession spark, QueryMetricsListener listener, String query) {
    try {
      if (!listener.awaitStragglers(60_000)) {
        return;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(query + ": interrupted while tasks of its cancelled stages ran", e);
    }
    if (listener.running() > 0) {
      System.err.printf(Locale.ROOT, "slipstream-bench: %s: %d tasks of cancelled stages still run after 60 s; removing"
          + " its shuffles anyway%n", query, listener.running());
    }
    org.apache.spark.api.java.JavaSparkContext.fromSparkContext(spark.sparkContext())
        .parallelize(List.of(0), 1).count();
  }

  /**
   * Removes a finished query's shuffles on the driver and every executor, waiting until they are
   * gone, as Spark's {@code ContextCleaner} would once the driver's garbage collector let it find
   * them. So every query starts with the map-output stores (and shuffle files) of the queries before
   * it removed, under every manager. On Spark 4.2 {@code
   * spark.sql.classic.shuffleDependency.fileCleanup.enabled} does not cover these runs: {@code
   * spark.sql(text)} plans with cleanup off whatever the setting says. Outside the query's measured
   * time.
   */
  static void removeShuffles(SparkSession spark, List<Integer> shuffles) {
    scala.Option<org.apache.spark.ContextCleaner> cleaner = spark.sparkContext().cleaner();
    if (cleaner.isEmpty()) {
      return; // spark.cleaner.referenceTracking=false: the user took removal into their own hands
    }
    for (int id : shuffles) {
      cleaner.get().doCleanupShuffle(id, true);
    }
  }

  /**
   * Slipstream's own executor counters, summed over executors, read after the query (outside its
   * time): the map-output stores' use and spills while the query's own outputs are in them (earlier
   * queries' shuffles were removed after each).
   */
  private static Map<String, Long> slipstreamCounters() {
    return LocalCluster.executorSums(java.util.Set.of("memory.mapOutputInUse", "mapOutput.count", "mapOutput.spills",
        "mapOutput.evictions", "memory.landingPeak", "requests.served", "bytes.fetched", "reader.bytesDecodedAhead",
        "writer.bytesEncodedAhead", "writer.bytesEncodedOnTask",
        "gpu.tableBytesWritten",
        "gpu.mapOutputDeviceBytes", "gpu.mapOutputHostBytes", "gpu.mapOutputDiskBytes", "gpu.mapOutputSpills")::contains);
  }

  /** Compares with the first result of the query, in order (every query's ORDER BY is total). */
  private String check(String query, String manager, int round, List<String> got) {
    List<String> want = reference.putIfAbsent(query, got);
    if (want == null) {
      return "reference";
    }
    if (want.equals(got)) {
      return "equal";
    }
    int i = 0;
    while (i < Math.min(want.size(), got.size()) && want.get(i).equals(got.get(i))) {
      i++;
    }
    String first = i < Math.min(want.size(), got.size())
        ? "row " + i + ": expected " + want.get(i) + ", got " + got.get(i)
        : "row counts " + want.size() + " vs " + got.size();
    String from = fromStore.containsKey(query) ? "CPU Spark's rows stored in " + fromStore.get(query) : "the first run";
    results.mismatch(query + " under " + manager + " (round " + round + ") differs from " + from + " ("
        + want.size() + " rows): " + first);
    return "MISMATCH";
  }

  /**
   * The GPU mode's driver side: RAPIDS' jar on the context class loader, as {@code spark-submit
   * --jars} puts it, and cudf's native folder for any cudf class the driver loads.
   */
  private void useRapids() throws IOException {
    String scalaVersion = scala.util.Properties$.MODULE$.versionNumberString();
    if (!scalaVersion.startsWith("2.13")) {
      throw new IllegalArgumentException("--rapids: this is the Spark line of Scala " + scalaVersion
          + "; the RAPIDS Accelerator 26.08 runs on the Spark 4 line (Scala 2.13: SPARK_LINE=spark4 bin/slipstream-bench)");
    }
    File jar = options.rapidsJar().toFile();
    if (!jar.isFile()) {
      throw new IllegalArgumentException("--rapids: no file at " + jar.getAbsolutePath()
          + " (expected the RAPIDS Accelerator jar, e.g. rapids-4-spark_2.13-26.08.1.jar)");
    }
    if (options.rapidsNatives() != null) {
      File lib = options.rapidsNatives().resolve("libcudf.so").toFile();
      if (!lib.isFile()) {
        throw new IllegalArgumentException("--rapids-natives: no libcudf.so in "
            + options.rapidsNatives().toAbsolutePath() + " (expected the folder of cudf's native libraries)");
      }
      System.setProperty("ai.rapids.cudf.lib-native-dir", options.rapidsNatives().toAbsolutePath().toString());
    }
    List<URL> urls = new ArrayList<>(List.of(jar.toURI().toURL()));
    if (options.rapidsGpuJar() != null) {
      File gpuJar = options.rapidsGpuJar().toFile();
      if (!gpuJar.isFile()) {
        throw new IllegalArgumentException("--rapids-gpu: no file at " + gpuJar.getAbsolutePath()
            + " (expected Slipstream's RAPIDS integration jar, rapids-gpu/target/spark4/slipstream-rapids-gpu-*.jar)");
      }
      if (!DISCOVER.toFile().canExecute()) {
        throw new IllegalArgumentException("--rapids-gpu: no executable " + DISCOVER.toAbsolutePath()
            + " (the GPU discovery script; run from the repository root)");
      }
      // Its classes refer to RAPIDS' shimmed classes, which only the loader that holds RAPIDS' jar can see.
      urls.add(gpuJar.toURI().toURL());
    }
    Thread.currentThread().setContextClassLoader(new MutableURLClassLoader(urls.toArray(new URL[0]),
        Thread.currentThread().getContextClassLoader()));
  }

  /**
   * Spark's GPU discovery script for rapids-slipstream-gpu's workers (system property {@code
   * slipstream.gpu.discover}, else {@code bin/slipstream-gpu-discover}). Every cluster of a run
   * starts its workers in this JVM, so with the script's claims they would claim a GPU each time:
   * run it with {@code SLIPSTREAM_GPU_DISCOVER=all}, each worker then lists every GPU of the
   * machine (on one GPU, the executors share it).
   */
  private static final Path DISCOVER = Path.of(System.getProperty("slipstream.gpu.discover",
      "bin/slipstream-gpu-discover"));

  private SparkSession start(String manager) {
    return start(manager, Map.of());
  }

  /**
   * A fresh local cluster for {@code manager}, with {@code extra} Spark settings after the run's own
   * ({@link GpuPathChecks} gives one cluster smaller store budgets).
   */
  SparkSession start(String manager, Map<String, String> extra) {
    boolean slip = BenchOptions.slipstream(manager);
    boolean rapids = options.gpu() && !manager.equals("sort");
    int workerMb = options.executorMemoryMb();
    // RAPIDS' own manager: spark.shuffle.manager unset, so RAPIDS (Spark 4) sets its RapidsShuffleManager.
    String shuffleManager = slip ? LocalCluster.SLIPSTREAM : manager.equals(BenchOptions.RAPIDS_DEFAULT) ? null
        : LocalCluster.SORT;
    SparkSession.Builder b = LocalCluster.builder("tpch-" + manager, shuffleManager, options.executors())
        .master("local-cluster[" + options.executors() + "," + options.cores() + "," + workerMb + "]")
        .config("spark.executor.memory", options.executorMemory())
        .config("spark.sql.shuffle.partitions", Integer.toString(options.shufflePartitions()))
        .config("spark.default.parallelism", Integer.toString(options.executors() * options.cores()))
        // Executors report heap and direct-buffer peaks with each finished task.
        .config("spark.executor.metrics.pollingInterval", "100ms");
    if (slip) {
      b.config("spark.slipstream.transport", BenchOptions.transport(manager));
    }
    List<String> javaOptions = new ArrayList<>();
    if (rapids) {
      String f = Double.toString(options.gpuAllocFraction());
      b.config("spark.plugins", "com.nvidia.spark.SQLPlugin")
          .config("spark.executor.extraClassPath",
              LocalCluster.executorClassPath() + File.pathSeparator + options.rapidsJar().toAbsolutePath())
          .config("spark.rapids.sql.enabled", "true")
          .config("spark.rapids.sql.explain", "NONE")
          .config("spark.rapids.memory.gpu.allocFraction", f)
          .config("spark.rapids.memory.gpu.maxAllocFraction", f)
          .config("spark.rapids.memory.gpu.minAllocFraction", Double.toString(minPoolFraction(
              options.gpuAllocFraction(), options.executors())))
          .config("spark.rapids.memory.pinnedPool.size", "1g");
      // RAPIDS' executor plugin stops an executor whose JVM time zone differs from the driver's.
      javaOptions.add("-Duser.timezone=" + java.util.TimeZone.getDefault().getID());
      if (options.rapidsNatives() != null) {
        javaOptions.add("-Dai.rapids.cudf.lib-native-dir=" + options.rapidsNatives().toAbsolutePath());
      }
    }
    if (BenchOptions.gpuPath(manager)) {
      String discover = DISCOVER.toAbsolutePath().toString();
      // Executors on Spark's GPU resources (RAPIDS and Slipstream then use the same device), Slipstream's
      // GPU runtime beside RAPIDS' plugin, and the session extension that moves RAPIDS' exchanges onto
      // it; the integration jar goes to executors as --jars does, into the loader that sees RAPIDS.
      b.config("spark.plugins", "com.nvidia.spark.SQLPlugin,dev.slipstream.spark.gpu.SlipstreamGpuPlugin")
          .config("spark.sql.extensions", "dev.slipstream.rapids.SlipstreamRapidsExtensions")
          .config("spark.jars", options.rapidsGpuJar().toAbsolutePath().toString())
          .config("spark.slipstream.gpu.mode", "require")
          .config("spark.slipstream.gpu.landing.bytes", "2g")
          .config("spark.slipstream.gpu.mapOutput.memoryBytes", "8g")
          .config("spark.worker.resource.gpu.amount", "1")
          .config("spark.worker.resource.gpu.discoveryScript", discover)
          .config("spark.executor.resource.gpu.amount", "1")
          .config("spark.executor.resource.gpu.discoveryScript", discover)
          .config("spark.task.resource.gpu.amount", Double.toString(1.0 / options.cores()))
          .config("spark.slipstream.rapids.compression", BenchOptions.gpuCompression(manager));
    }
    if (options.jfrDir() != null) {
      Path dir = options.jfrDir().resolve(manager).toAbsolutePath();
      try {
        Files.createDirectories(dir);
      } catch (IOException e) {
        throw new IllegalStateException("cannot create " + dir, e);
      }
      javaOptions.add("-XX:StartFlightRecording=settings=default,dumponexit=true,filename=" + dir + "/");
    }
    if (!javaOptions.isEmpty()) {
      b.config("spark.executor.extraJavaOptions", String.join(" ", javaOptions));
    }
    b.config("spark.extraListeners", ExecutorLog.class.getName()); // a --conf of its own replaces it
    for (String kv : options.confs()) {
      int eq = kv.indexOf('=');
      b.config(kv.substring(0, eq), kv.substring(eq + 1));
    }
    extra.forEach(b::config);
    ExecutorLog.drain(); // a stopped cluster's last events are not this one's
    SparkSession spark = LocalCluster.start(b, options.executors());
    executorPids = LocalCluster.awaitRunning(spark, options.executors(), options.cores());
    spark.sparkContext().setLogLevel("WARN");
    results.sparkVersion(spark.version());
    return spark;
  }

  /**
   * RAPIDS sizes an executor's pool as {@code allocFraction} of the GPU memory free when the executor
   * starts, and fails the executor when that is under {@code minAllocFraction} of the total. Executors
   * sharing a GPU start one after another as often as together, so a later one sees the earlier
   * pools gone from free memory: with {@code n} executors on one GPU the last may see only {@code
   * (1 - f)^(n-1)} of it free. The floor is half of what that last executor gets, so a shared GPU
   * never stops an executor (which would leave its tasks to the others); pools then differ by start
   * order, alike for every manager.
   */
  static double minPoolFraction(double allocFraction, int executors) {
    return Math.min(0.25, allocFraction * Math.pow(1 - allocFraction, Math.max(0, executors - 1)) / 2);
  }

  static String fmt(double sf) {
    return new java.math.BigDecimal(Double.toString(sf)).stripTrailingZeros().toPlainString();
  }
}
