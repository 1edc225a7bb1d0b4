package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.spark.SlipstreamShuffleManager;
import java.io.File;
import java.net.URL;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.logging.log4j.Level;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.MutableURLClassLoader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * The RAPIDS Accelerator's SQL plugin in explain-only mode on a local cluster whose shuffle
 * manager is Slipstream's (tcp transport): RAPIDS plans each query as if for the GPU and logs which
 * operators would run there, and Spark runs the query on the CPU. For a grouped aggregate, a
 * sort-merge join, a repartition by a column and a global sort (adaptive execution on), the rows must equal those of the same
 * queries under Spark's sort shuffle without RAPIDS (in local mode), RAPIDS must have explained the
 * query with its shuffle exchanges on the GPU, and the shuffles must have gone through Slipstream's
 * map-output stores.
 *
 * <p>Spark 4 line only: the build passes the RAPIDS jar in {@code slipstream.rapids.jar}
 * (docs/rapids.md). The driver loads it the way {@code spark-submit --jars} does, through a
 * {@link MutableURLClassLoader} as the context class loader; executors get it on their class path.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 10, unit = TimeUnit.MINUTES) // a cluster whose executors never come up fails the test, not CI

@EnabledIfSystemProperty(named = "slipstream.rapids.jar", matches = ".+", disabledReason = "no RAPIDS build for "
    + "Spark 3.5.9 / Scala 2.12 (RAPIDS for Scala 2.12 ends at 25.04, whose shims stop at Spark 3.5.5); this test runs "
    + "on the Spark 4 line")
class RapidsExplainIT {
  private static final int EXECUTORS = 2;
  /** The line RAPIDS' explain output has for an exchange it would run on the GPU. */
  private static final Pattern SHUFFLE_ON_GPU = Pattern.compile("(?m)^\\s*\\*Exec <ShuffleExchangeExec> will run on GPU");
  private static final Pattern SHUFFLE_NOT_ON_GPU = Pattern.compile("(?m)^\\s*!Exec <ShuffleExchangeExec> cannot run on GPU.*$");

  private static final Map<String, String> QUERIES = new LinkedHashMap<>();

  static {
    QUERIES.put("aggregate", "select k % 97 as g, count(*) as n, sum(id) as s, min(name) as lo, max(v) as hi "
        + "from facts group by k % 97");
    QUERIES.put("join", "select f.k, d.name, count(*) as n, sum(f.v) as s from facts f join dims d on f.k = d.k "
        + "group by f.k, d.name");
    QUERIES.put("repartition", "select /*+ REPARTITION(6, name) */ id, name, v from facts where id % 11 = 0");
    QUERIES.put("sort", "select id, k, name from facts where id % 7 = 0 order by k desc, id");
  }

  private final Map<String, List<String>> expected = new LinkedHashMap<>();
  private ClassLoader previousLoader;
  private SparkSession spark;
  private LogCapture explain;

  @BeforeAll
  void start() throws Exception {
    File rapids = new File(System.getProperty("slipstream.rapids.jar"));
    assertTrue(rapids.isFile(), "RAPIDS jar not found at " + rapids + " (the spark-4 profile downloads it before the "
        + "integration tests)");

    // The expected rows: Spark alone in this JVM (sort shuffle, no RAPIDS), which starts in a fraction of a cluster's time.
    SparkSession sort = config(SparkSession.builder().appName("rapids-baseline").master("local[2]")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "8")).getOrCreate();
    try {
      views(sort);
      QUERIES.forEach((name, sql) -> expected.put(name, rows(sort.sql(sql), name.equals("sort"))));
    } finally {
      sort.stop();
    }

    previousLoader = Thread.currentThread().getContextClassLoader();
    Thread.currentThread().setContextClassLoader(new MutableURLClassLoader(new URL[] {rapids.toURI().toURL()},
        previousLoader));
    spark = LocalCluster.start(config(LocalCluster.builder("rapids-explain", LocalCluster.SLIPSTREAM, EXECUTORS))
        .config("spark.executor.extraClassPath", LocalCluster.executorClassPath() + File.pathSeparator + rapids)
        // RAPIDS' executor plugin stops an executor whose JVM time zone differs from the driver's (and
        // Spark then starts another, without end); the driver's may have been set by an earlier test
        // of this JVM
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=" + java.util.TimeZone.getDefault().getID())
        .config("spark.plugins", "com.nvidia.spark.SQLPlugin")
        .config("spark.rapids.sql.mode", "explainOnly")
        .config("spark.rapids.sql.explain", "ALL")
        // explain-only mode runs nothing on a GPU: no pinned host pool for copies to one either
        .config("spark.rapids.memory.pinnedPool.size", "0")
        .config("spark.slipstream.transport", "tcp")
        // no cleaning of finished shuffles, so the count of map outputs the stores hold only grows
        .config("spark.cleaner.referenceTracking", "false"), EXECUTORS);
    views(spark);
    explain = LogCapture.install("com.nvidia.spark.rapids", Level.WARN);
  }

  /** Both sessions: adaptive execution on, joins through shuffles rather than broadcasts. */
  private static SparkSession.Builder config(SparkSession.Builder b) {
    return b.config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.autoBroadcastJoinThreshold", "-1");
  }

  @AfterAll
  void stop() {
    if (explain != null) {
      explain.close();
    }
    if (spark != null) {
      spark.stop();
    }
    if (previousLoader != null) {
      Thread.currentThread().setContextClassLoader(previousLoader);
    }
  }

  private static void views(SparkSession s) {
    s.range(0, 200_000, 1, 4).selectExpr("id", "id % 1009 as k", "concat('n', id % 31) as name",
        "cast(id % 101 as decimal(12,2)) as v").createOrReplaceTempView("facts");
    s.range(0, 1009, 1, 2).selectExpr("id as k", "concat('d', id % 13) as name").createOrReplaceTempView("dims");
  }

  private static List<String> rows(Dataset<Row> df, boolean ordered) {
    List<String> rows = df.collectAsList().stream().map(r -> r.mkString("|")).collect(Collectors.toList());
    return ordered ? rows : rows.stream().sorted().collect(Collectors.toList());
  }

  @Test
  void queriesReturnSortShuffleRowsWithTheirExchangesExplainedOnTheGpu() {
    SlipstreamShuffleManager manager = assertSlipstream();
    for (Map.Entry<String, String> q : QUERIES.entrySet()) {
      String name = q.getKey();
      long outputsBefore = LocalCluster.executorSum("mapOutput.count");
      explain.drain();
      List<String> got = rows(spark.sql(q.getValue()), name.equals("sort"));
      String log = explain.drain();

      List<String> want = expected.get(name);
      assertFalse(want.isEmpty(), name + ": the sort-shuffle baseline is empty");
      assertEquals(want.size(), got.size(), name + ": row count under Slipstream with RAPIDS against sort shuffle");
      assertEquals(want, got, name + ": rows under Slipstream with RAPIDS against sort shuffle");

      assertTrue(SHUFFLE_ON_GPU.matcher(log).find(), name + ": RAPIDS' explain output has no line '*Exec "
          + "<ShuffleExchangeExec> will run on GPU'; it logged:\n" + log);
      Matcher notOnGpu = SHUFFLE_NOT_ON_GPU.matcher(log);
      if (notOnGpu.find()) {
        fail(name + ": RAPIDS would keep a shuffle exchange on the CPU: " + notOnGpu.group() + "\nit logged:\n" + log);
      }

      long outputsAfter = LocalCluster.executorSum("mapOutput.count");
      assertTrue(outputsAfter > outputsBefore, name + ": Slipstream's map-output stores held " + outputsBefore
          + " outputs before the query and " + outputsAfter + " after; the query's shuffles did not write there");
    }
    assertFalse(manager.isFallback(), "Slipstream fell back to Spark's sort shuffle during the queries");
    // executors register with Slipstream's driver endpoint once their start-up is done, by their first task
    assertEquals(EXECUTORS, LocalCluster.executorMetrics().size(), "executors answering Slipstream's metrics: "
        + LocalCluster.executorMetrics().keySet());
    assertTrue(LocalCluster.executorSum("bytes.fetched") > 0, "no reduce task fetched a block from the other "
        + "executor through Slipstream: " + LocalCluster.executorMetrics());
    // spark.slipstream.codec.threads is left at auto: executors running RAPIDS' plugin start codec threads
    assertTrue(LocalCluster.executorSum("writer.bytesEncodedAhead") > 0, "no codec thread encoded map output in"
        + " executors running RAPIDS' plugin: " + LocalCluster.executorMetrics());
    assertTrue(LocalCluster.executorSum("reader.bytesDecodedAhead") > 0, "no codec thread decoded a block ahead in"
        + " executors running RAPIDS' plugin: " + LocalCluster.executorMetrics());
  }

  private static SlipstreamShuffleManager assertSlipstream() {
    Object m = SparkEnv.get().shuffleManager();
    assertTrue(m instanceof SlipstreamShuffleManager, "the driver's shuffle manager is " + m.getClass().getName()
        + ", expected " + SlipstreamShuffleManager.class.getName());
    SlipstreamShuffleManager s = (SlipstreamShuffleManager) m;
    assertFalse(s.isFallback(), "Slipstream is using Spark's sort shuffle for this configuration");
    return s;
  }

  /** RAPIDS' explain API on a query of this session names the exchange as one for the GPU too. */
  @Test
  void explainApiPutsTheExchangeOnTheGpu() throws Exception {
    Class<?> api = Class.forName("com.nvidia.spark.rapids.ExplainPlan", true,
        Thread.currentThread().getContextClassLoader());
    String plan = (String) api.getMethod("explainPotentialGpuPlan", Dataset.class, String.class)
        .invoke(null, spark.sql(QUERIES.get("aggregate")), "ALL");
    assertTrue(SHUFFLE_ON_GPU.matcher(plan).find(), "ExplainPlan.explainPotentialGpuPlan has no line '*Exec "
        + "<ShuffleExchangeExec> will run on GPU':\n" + plan);
  }
}
