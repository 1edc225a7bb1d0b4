package dev.slipstream.rapids;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.Property;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.util.MutableURLClassLoader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * RAPIDS' planner with Slipstream's session extension, on a machine without a GPU: the physical
 * plans (AQE off, so the whole plan is planned up front; nothing runs) must put each shuffle that
 * Slipstream's GPU path can serve on it, with GPU coalescing after the read and RAPIDS' sized joins
 * told their shuffles are on the GPU, and leave the rest on RAPIDS' exchange with one log line.
 *
 * <p>Loaded as a deployment loads them: RAPIDS' jar and this module's jar (passed in
 * {@code slipstream.rapids.jar} and {@code slipstream.rapids.gpu.jar}) on a
 * {@link MutableURLClassLoader} as the context class loader, as {@code spark-submit --jars} does; RAPIDS
 * joins its SQL extension to Slipstream's through {@code spark.sql.extensions} itself only with its
 * plugin, which needs a GPU, so the test names both.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class DeviceShufflePlanIT {
  private ClassLoader previousLoader;
  private SparkSession spark;
  private Capture log;

  @BeforeAll
  void start() throws Exception {
    File rapids = new File(System.getProperty("slipstream.rapids.jar", "rapids.jar"));
    File ours = new File(System.getProperty("slipstream.rapids.gpu.jar", "slipstream-rapids-gpu.jar"));
    assertTrue(rapids.isFile(), "RAPIDS jar not found at " + rapids);
    assertTrue(ours.isFile(), "this module's jar not found at " + ours + " (failsafe runs after package)");
    previousLoader = Thread.currentThread().getContextClassLoader();
    Thread.currentThread().setContextClassLoader(new MutableURLClassLoader(
        new URL[] {rapids.toURI().toURL(), ours.toURI().toURL()}, previousLoader));
    spark = SparkSession.builder().master("local[2]").appName("device-shuffle-plan")
        .config("spark.ui.enabled", "false")
        .config("spark.shuffle.manager", "dev.slipstream.spark.SlipstreamShuffleManager")
        .config("spark.slipstream.transport", "loopback")
        .config("spark.plugins", "dev.slipstream.spark.gpu.SlipstreamGpuPlugin")
        .config("spark.sql.extensions", "dev.slipstream.rapids.SlipstreamRapidsExtensions,"
            + "com.nvidia.spark.rapids.SQLExecPlugin")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate();
    spark.range(0, 20_000, 1, 4).selectExpr("id", "id % 1009 as k", "concat('n', id % 31) as name",
        "cast(id % 101 as decimal(12,2)) as v").createOrReplaceTempView("facts");
    spark.range(0, 1009, 1, 2).selectExpr("id as k", "concat('d', id % 13) as name").createOrReplaceTempView("dims");
    log = Capture.install("dev.slipstream.rapids");
  }

  @AfterAll
  void stop() {
    if (log != null) {
      log.close();
    }
    if (spark != null) {
      spark.stop();
    }
    if (previousLoader != null) {
      Thread.currentThread().setContextClassLoader(previousLoader);
    }
  }

  private SparkPlan plan(String sql) {
    return spark.sql(sql).queryExecution().executedPlan();
  }

  private static List<SparkPlan> nodes(SparkPlan p) {
    List<SparkPlan> out = new ArrayList<>();
    out.add(p);
    for (SparkPlan c : scala.jdk.javaapi.CollectionConverters.asJava(p.children())) {
      out.addAll(nodes(c));
    }
    return out;
  }

  private static List<SparkPlan> named(SparkPlan p, String nodeName) {
    return nodes(p).stream().filter(n -> n.nodeName().equals(nodeName)).toList();
  }

  /** Every Slipstream exchange is read through a GPU coalesce (or a sized join), and none of RAPIDS' remains. */
  private static void allOnTheGpuPath(SparkPlan p, int exchanges) {
    String tree = p.treeString();
    assertEquals(exchanges, named(p, "SlipstreamGpuExchange").size(), tree);
    assertEquals(0, named(p, "GpuColumnarExchange").size(), tree);
    assertEquals(0, named(p, "GpuShuffleCoalesce").size(), "host coalescing of serialized tables is gone:\n" + tree);
    for (SparkPlan n : nodes(p)) {
      for (SparkPlan c : scala.jdk.javaapi.CollectionConverters.asJava(n.children())) {
        if (c.nodeName().equals("SlipstreamGpuExchange")) {
          assertEquals("GpuCoalesceBatches", n.nodeName(), "the reader of a Slipstream exchange:\n" + tree);
        }
      }
    }
  }

  @Test
  void anAggregateShufflesOnTheGpuPath() {
    SparkPlan p = plan("select k % 97 as g, count(*) as n, sum(id) as s, min(name) as lo, max(v) as hi "
        + "from facts group by k % 97");
    allOnTheGpuPath(p, 1);
    assertTrue(p.treeString().contains("SlipstreamGpuExchange gpuhashpartitioning("), p.treeString());
  }

  @Test
  void aShuffledJoinIsToldItsShufflesAreOnTheGpu() throws Exception {
    SparkPlan p = plan("select f.k, d.name, count(*) as n, sum(f.v) as s from facts f join dims d on f.k = d.k "
        + "group by f.k, d.name");
    allOnTheGpuPath(p, 2);
    List<SparkPlan> joins = nodes(p).stream().filter(n -> n.nodeName().startsWith("GpuShuffled")).toList();
    assertEquals(1, joins.size(), p.treeString());
    assertEquals(Boolean.TRUE, joins.get(0).getClass().getMethod("isGpuShuffle").invoke(joins.get(0)),
        "the join reads device batches, not host-serialized tables:\n" + p.treeString());
  }

  /** The outer join's left side is the inner join, already partitioned by k: no shuffle read on that side. */
  @Test
  void aJoinWithOneSideAlreadyPartitionedReadsTheOtherFromTheGpuPath() throws Exception {
    SparkPlan p = plan("select x.k, count(*) as n from (select f.k, f.v from facts f join dims d on f.k = d.k) x "
        + "join dims e on x.k = e.k group by x.k");
    // dims' exchange is reused for e: two Slipstream exchanges, one read twice
    allOnTheGpuPath(p, 2);
    assertEquals(1, named(p, "ReusedExchange").size(), p.treeString());
    List<SparkPlan> joins = nodes(p).stream().filter(n -> n.nodeName().startsWith("GpuShuffled")).toList();
    assertEquals(2, joins.size(), p.treeString());
    for (SparkPlan j : joins) {
      assertEquals(Boolean.TRUE, j.getClass().getMethod("isGpuShuffle").invoke(j), p.treeString());
    }
  }

  @Test
  void aGlobalSortShufflesByRangeOnTheGpuPath() {
    SparkPlan p = plan("select id, k, name from facts where id % 7 = 0 order by k desc, id");
    allOnTheGpuPath(p, 1);
    assertTrue(p.treeString().contains("SlipstreamGpuExchange gpurangepartitioning("), p.treeString());
  }

  @Test
  void roundRobinStaysOnRapidsExchangeWithOneLogLine() {
    log.drain();
    SparkPlan p = plan("select /*+ REPARTITION(6) */ id, name from facts");
    assertEquals(0, named(p, "SlipstreamGpuExchange").size(), p.treeString());
    assertEquals(1, named(p, "GpuColumnarExchange").size(), p.treeString());
    assertEquals(1, named(p, "GpuShuffleCoalesce").size(), p.treeString());
    plan("select /*+ REPARTITION(5) */ id from facts");
    String logged = log.drain();
    assertTrue(logged.contains("stays on Slipstream's host path: an exchange with GpuRoundRobinPartitioning"), logged);
    assertEquals(logged.indexOf("GpuRoundRobinPartitioning"), logged.lastIndexOf("GpuRoundRobinPartitioning"),
        "one line per reason: " + logged);
  }

  @Test
  void theHostModeLeavesRapidsExchangesAndAnUnknownModeIsRefused() {
    String sql = "select k % 97 as g, count(*) as n from facts group by k % 97";
    try {
      spark.conf().set("spark.slipstream.rapids.shuffle", "host");
      SparkPlan p = plan(sql);
      assertEquals(0, named(p, "SlipstreamGpuExchange").size(), p.treeString());
      assertEquals(1, named(p, "GpuColumnarExchange").size(), p.treeString());
      spark.conf().set("spark.slipstream.rapids.shuffle", "nvlink");
      Exception e = assertThrows(Exception.class, () -> plan(sql));
      Throwable root = e;
      while (root.getCause() != null && !(root instanceof IllegalArgumentException)) {
        root = root.getCause();
      }
      assertEquals("spark.slipstream.rapids.shuffle is 'nvlink', expected 'device' or 'host'", root.getMessage());
    } finally {
      spark.conf().unset("spark.slipstream.rapids.shuffle");
    }
    allOnTheGpuPath(plan(sql), 1);
  }

  @Test
  void compressionIsAPlanningSettingAndAnUnknownValueIsRefused() {
    String sql = "select k % 97 as g, count(*) as n from facts group by k % 97";
    try {
      spark.conf().set("spark.slipstream.rapids.compression", "lz4");
      allOnTheGpuPath(plan(sql), 1);
      spark.conf().set("spark.slipstream.rapids.compression", "zstd");
      Exception e = assertThrows(Exception.class, () -> plan(sql));
      Throwable root = e;
      while (root.getCause() != null && !(root instanceof IllegalArgumentException)) {
        root = root.getCause();
      }
      assertEquals("spark.slipstream.rapids.compression is 'zstd', expected 'none' or 'lz4'", root.getMessage());
      // With every exchange on RAPIDS' host path the setting is not read.
      spark.conf().set("spark.slipstream.rapids.shuffle", "host");
      assertEquals(0, named(plan(sql), "SlipstreamGpuExchange").size());
    } finally {
      spark.conf().unset("spark.slipstream.rapids.compression");
      spark.conf().unset("spark.slipstream.rapids.shuffle");
    }
  }

  @Test
  void theExchangeKeepsRapidsSchemaAndPartitioning() {
    SparkPlan p = plan("select name, count(*) as n from facts group by name");
    SparkPlan e = named(p, "SlipstreamGpuExchange").get(0);
    assertEquals(8, e.outputPartitioning().numPartitions(), p.treeString());
    assertFalse(e.output().isEmpty());
    assertTrue(e.supportsColumnar(), "the exchange yields columnar batches");
  }

  /** Keeps what loggers under a name write (Spark logs through log4j 2). */
  static final class Capture extends AbstractAppender implements AutoCloseable {
    private final String loggerName;
    private final List<String> messages = new ArrayList<>();

    private Capture(String loggerName) {
      super("capture-" + loggerName, null, null, true, Property.EMPTY_ARRAY);
      this.loggerName = loggerName;
    }

    static Capture install(String loggerName) {
      Capture c = new Capture(loggerName);
      c.start();
      LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
      LoggerConfig lc = new LoggerConfig(loggerName, Level.INFO, true);
      lc.addAppender(c, Level.INFO, null);
      ctx.getConfiguration().addLogger(loggerName, lc);
      ctx.updateLoggers();
      return c;
    }

    @Override
    public synchronized void append(LogEvent event) {
      messages.add(event.getMessage().getFormattedMessage());
    }

    synchronized String drain() {
      String all = String.join("\n", messages);
      messages.clear();
      return all;
    }

    @Override
    public void close() {
      LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
      ctx.getConfiguration().removeLogger(loggerName);
      ctx.updateLoggers();
      stop();
    }
  }
}
