package dev.slipstream.bench;

import dev.slipstream.spark.SlipstreamShuffleManager;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * Starts Spark in local-cluster mode (several executor JVMs) with a chosen shuffle manager,
 * waiting for the executors with a deadline and pointing at their logs when they do not come.
 */
public final class LocalCluster {
  public static final String SORT = "sort";
  public static final String SLIPSTREAM = SlipstreamShuffleManager.class.getName();

  private LocalCluster() {}

  /**
   * The class path executors need: the self-contained plugin jar (system property
   * {@code slipstream.plugin.jar}) plus the application's classes ({@code slipstream.app.classpath}),
   * so the jobs' functions load there.
   */
  public static String executorClassPath() {
    String jar = System.getProperty("slipstream.plugin.jar");
    String app = System.getProperty("slipstream.app.classpath", "");
    if (jar == null || !new File(jar).isFile()) {
      throw new IllegalStateException("plugin jar not found at " + jar
          + " (set -Dslipstream.plugin.jar; bin/slipstream-bench and mvn verify do)");
    }
    return app.isEmpty() ? jar : jar + File.pathSeparator + app;
  }

  /** A builder for a local cluster; {@code shuffleManager} null leaves {@code spark.shuffle.manager} unset. */
  public static SparkSession.Builder builder(String name, String shuffleManager, int executors) {
    SparkSession.Builder b = SparkSession.builder();
    if (shuffleManager != null) {
      b.config("spark.shuffle.manager", shuffleManager);
    }
    return b.appName(name)
        .master("local-cluster[" + executors + ",1,1024]")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.extraClassPath", executorClassPath())
        .config("spark.driver.extraClassPath", executorClassPath())
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.default.parallelism", "4")
        .config("spark.network.timeout", "60s");
  }

  public static SparkSession start(SparkSession.Builder b, int executors) {
    SparkSession spark = b.getOrCreate();
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (spark.sparkContext().statusTracker().getExecutorInfos().length < executors + 1) {
      if (System.nanoTime() > deadline) {
        String logs = executorLogs();
        spark.stop();
        throw new IllegalStateException(executors + " executors did not register within 120 s; executor logs:\n" + logs);
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    return spark;
  }

  /**
   * Waits until each of {@code executors} executors has run a task, with short probe jobs of
   * {@code 2 * executors * cores} tasks. A registered executor gets no task until its start has
   * finished, plugins included: an executor whose plugin failed (RAPIDS' executor plugin logs the
   * error and halts the JVM 40 s later) or hangs would otherwise leave every task to the others, and
   * a benchmark would quietly measure fewer executors. Stops Spark and throws, with the executors'
   * logs, when some executor ran nothing within 90 s.
   */
  public static Map<String, Long> awaitRunning(SparkSession spark, int executors, int cores) {
    Map<String, Long> ran = executorPids(spark, executors, cores, 90);
    if (ran.size() < executors) {
      String logs = executorLogs();
      spark.stop();
      throw new IllegalStateException("only executors " + ran.keySet() + " of " + executors + " ran tasks within 90 s;"
          + " the others registered but their start failed or hangs (a plugin's init: RAPIDS' GPU pool,"
          + " a GPU that cannot be opened); executor logs:\n" + logs);
    }
    return ran;
  }

  /** Waits up to {@code seconds} for the processes {@code pids} to exit; returns those still alive then. */
  public static List<Long> awaitExit(java.util.Collection<Long> pids, int seconds) {
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    List<Long> alive = new java.util.ArrayList<>();
    for (long pid : pids) {
      java.util.Optional<ProcessHandle> h = ProcessHandle.of(pid);
      if (h.isEmpty()) {
        continue;
      }
      try {
        h.get().onExit().get(Math.max(0, deadline - System.nanoTime()), java.util.concurrent.TimeUnit.NANOSECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        alive.add(pid);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        alive.add(pid);
        break;
      } catch (java.util.concurrent.ExecutionException e) {
        // onExit() does not fail; nothing to wait for
      }
    }
    return alive;
  }

  /**
   * The pid of each executor's JVM by executor id, from probe jobs of {@code 2 * executors * cores}
   * short tasks run until {@code executors} executors answered or {@code seconds} passed (then
   * fewer). The probes' task ends are drained from the listener bus before it returns, so no query
   * counts them.
   */
  public static Map<String, Long> executorPids(SparkSession spark, int executors, int cores, int seconds) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    int tasks = 2 * executors * cores;
    List<Integer> slots = java.util.stream.IntStream.range(0, tasks).boxed().toList();
    Map<String, Long> pids = new java.util.TreeMap<>();
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    while (pids.size() < executors && System.nanoTime() < deadline) {
      jsc.setJobDescription("executor start check");
      for (String s : jsc.parallelize(slots, tasks).map(i -> {
        Thread.sleep(100);
        return SparkEnv.get().executorId() + "=" + ProcessHandle.current().pid();
      }).collect()) {
        int eq = s.indexOf('=');
        pids.put(s.substring(0, eq), Long.parseLong(s.substring(eq + 1)));
      }
    }
    jsc.setJobDescription(null);
    drainListenerBus(spark);
    return pids;
  }

  /**
   * Waits until Spark's listener bus has delivered every event posted so far (task ends arrive after
   * their job has ended); throws after 60 s. The bus is {@code private[spark]} in Scala, public in
   * the bytecode: the only way to know it is drained.
   */
  public static void drainListenerBus(SparkSession spark) {
    try {
      spark.sparkContext().listenerBus().waitUntilEmpty(60_000);
    } catch (java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("Spark's listener bus did not drain within 60 s", e);
    }
  }

  public static SlipstreamShuffleManager manager() {
    return (SlipstreamShuffleManager) SparkEnv.get().shuffleManager();
  }

  /** Sum of one Slipstream counter over every executor, read back over RPC. */
  public static long executorSum(String metric) {
    return manager().executorMetrics().values().stream().mapToLong(m -> m.getOrDefault(metric, 0L)).sum();
  }

  /** Slipstream's counters whose names {@code keep} accepts, each summed over every executor, by name. */
  public static Map<String, Long> executorSums(java.util.function.Predicate<String> keep) {
    Map<String, Long> sum = new java.util.TreeMap<>();
    for (Map<String, Long> e : executorMetrics().values()) {
      e.forEach((k, v) -> {
        if (keep.test(k)) {
          sum.merge(k, v, Long::sum);
        }
      });
    }
    return sum;
  }

  public static Map<String, Map<String, Long>> executorMetrics() {
    return manager().executorMetrics();
  }

  private static String executorLogs() {
    Path work = Path.of(System.getenv().getOrDefault("SPARK_HOME", "."), "work");
    if (!Files.isDirectory(work)) {
      return "(no " + work + ")";
    }
    try (Stream<Path> s = Files.walk(work)) {
      return s.filter(p -> p.getFileName().toString().equals("stderr")).map(p -> {
        try {
          String t = Files.readString(p);
          return p + ":\n" + t.substring(Math.max(0, t.length() - 3000));
        } catch (Exception e) {
          return p + ": " + e;
        }
      }).collect(Collectors.joining("\n"));
    } catch (Exception e) {
      return e.toString();
    }
  }
}
