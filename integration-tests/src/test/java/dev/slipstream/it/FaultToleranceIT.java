package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.LocalCluster;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import scala.Tuple2;

/**
 * Runs on a standalone cluster of two hosts (see {@link TwoHostCluster}) so speculation can launch.
 * Speculative and retried attempts never duplicate or lose rows, and a SIGKILLed executor (during
 * the map stage, between stages, during the reduce stage) costs a recomputation, not the job:
 * every job finishes with exact results within a bounded time, and survivors keep no map output,
 * landing space or spill files once the shuffles are cleaned.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class FaultToleranceIT {
  private static final int N = 200_000;
  private static final int KEYS = 500;
  private static final Duration BOUND = Duration.ofSeconds(240);
  private SparkSession spark;
  private TwoHostCluster cluster;
  private final AtomicInteger speculativeLaunches = new AtomicInteger();
  private final List<Integer> shuffles = new ArrayList<>();

  @BeforeAll
  void start() {
    cluster = new TwoHostCluster(2, 1024);
    spark = LocalCluster.start(LocalCluster.builder("faults", LocalCluster.SLIPSTREAM, 2)
        .master(cluster.masterUrl())
        .config("spark.executor.cores", "1")
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "100ms")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.minTaskRuntime", "500ms")
        .config("spark.task.maxFailures", "8")
        .config("spark.stage.maxConsecutiveAttempts", "8")
        .config("spark.slipstream.reader.fetchTimeout", "5s"), 2);
    spark.sparkContext().addSparkListener(new SparkListener() {
      @Override
      public void onTaskStart(SparkListenerTaskStart e) {
        if (e.taskInfo().speculative()) {
          speculativeLaunches.incrementAndGet();
        }
      }
    });
  }

  @AfterAll
  void stop() {
    if (spark != null) {
      spark.stop();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  /** key -> sum of values, computed without Spark. */
  private static Map<Integer, Long> expected() {
    Map<Integer, Long> m = new TreeMap<>();
    for (int i = 0; i < N; i++) {
      m.merge(i % KEYS, (long) i, Long::sum);
    }
    return m;
  }

  private static Map<Integer, Long> asMap(List<Tuple2<Integer, Long>> rows) {
    Map<Integer, Long> m = new TreeMap<>();
    for (Tuple2<Integer, Long> t : rows) {
      Long old = m.put(t._1(), t._2());
      assertEquals(null, old, "key " + t._1() + " appears twice");
    }
    return m;
  }

  /** What a map task's action does to its own attempt. */
  interface Sabotage extends java.io.Serializable {
    void at(int partition, int attempt, int record) throws Exception;
  }

  private JavaPairRDD<Integer, Long> sums(Sabotage mapSide) {
    List<Integer> slices = List.of(0, 1, 2, 3);
    JavaRDD<Integer> seeds = JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(slices, 4);
    JavaPairRDD<Integer, Long> r = seeds.mapPartitionsWithIndex((idx, it) -> {
      int attempt = TaskContext.get().attemptNumber();
      List<Tuple2<Integer, Long>> out = new ArrayList<>();
      int k = 0;
      for (int i = idx; i < N; i += 4) {
        mapSide.at(idx, attempt, k++);
        out.add(new Tuple2<>(i % KEYS, (long) i));
      }
      return out.iterator();
    }, true).mapToPair(t -> t).reduceByKey(Long::sum, 3);
    shuffles.add(((ShuffleDependency<?, ?, ?>) r.rdd().dependencies().head()).shuffleId());
    return r;
  }

  /** Kills this JVM with SIGKILL (no shutdown hooks, no goodbye to the driver). */
  static void sigkillSelf() throws IOException, InterruptedException {
    new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
    Thread.sleep(60_000); // the signal arrives first
  }

  @Test
  @Order(1)
  void speculativeMapAttemptsNeitherDuplicateNorLoseRows() {
    Map<Integer, Long> got = assertTimeoutPreemptively(BOUND, () -> asMap(sums((p, attempt, rec) -> {
      if (p == 0 && attempt == 0 && rec == 0) { // a speculative copy is a later attempt number
        Thread.sleep(6000); // a straggler: the scheduler launches a speculative copy
      }
    }).collect()));
    assertEquals(expected(), got);
    assertTrue(speculativeLaunches.get() > 0, "a speculative attempt ran");
  }

  @Test
  @Order(2)
  void failedMapAndReduceAttemptsAreRetriedExactlyOnce() {
    JavaPairRDD<Integer, Long> sums = sums((p, attempt, rec) -> {
      if (p == 1 && attempt == 0 && rec == 20_000) {
        throw new IllegalStateException("injected map failure after 20000 records");
      }
    });
    JavaPairRDD<Integer, Long> checked = sums.mapPartitionsWithIndex((idx, it) -> {
      List<Tuple2<Integer, Long>> seen = new ArrayList<>();
      while (it.hasNext()) {
        seen.add(it.next());
        if (idx == 0 && TaskContext.get().attemptNumber() == 0 && seen.size() == 50) {
          throw new IllegalStateException("injected reduce failure after 50 records");
        }
      }
      return seen.iterator();
    }, true).mapToPair(t -> t);
    Map<Integer, Long> got = assertTimeoutPreemptively(BOUND, () -> asMap(checked.collect()));
    assertEquals(expected(), got);
  }

  @Test
  @Order(3)
  void executorKilledDuringTheMapStage() {
    Map<Integer, Long> got = assertTimeoutPreemptively(BOUND, () -> asMap(sums((p, attempt, rec) -> {
      if (p == 2 && attempt == 0 && rec == 10_000) {
        sigkillSelf();
      }
    }).collect()));
    assertEquals(expected(), got);
  }

  @Test
  @Order(4)
  void executorKilledBetweenStages() throws Exception {
    JavaPairRDD<Integer, Long> sums = sums((p, attempt, rec) -> { });
    assertEquals(KEYS, sums.count()); // map outputs now live on both executors
    long pid = LocalCluster.executorMetrics().values().iterator().next().get("process.pid");
    new ProcessBuilder("kill", "-9", Long.toString(pid)).start().waitFor();
    Map<Integer, Long> got = assertTimeoutPreemptively(BOUND, () -> asMap(sums.collect()));
    assertEquals(expected(), got);
  }

  @Test
  @Order(5)
  void executorKilledDuringTheReduceStage() {
    JavaPairRDD<Integer, Long> sums = sums((p, attempt, rec) -> { });
    JavaPairRDD<Integer, Long> killing = sums.mapPartitionsWithIndex((idx, it) -> {
      List<Tuple2<Integer, Long>> seen = new ArrayList<>();
      while (it.hasNext()) {
        seen.add(it.next());
        if (idx == 1 && TaskContext.get().stageAttemptNumber() == 0 && TaskContext.get().attemptNumber() == 0
            && seen.size() == 10) {
          sigkillSelf();
        }
      }
      return seen.iterator();
    }, true).mapToPair(t -> t);
    Map<Integer, Long> got = assertTimeoutPreemptively(BOUND, () -> asMap(killing.collect()));
    assertEquals(expected(), got);
  }

  @Test
  @Order(6)
  void survivorsHoldNothingOnceTheShufflesAreCleaned() throws Exception {
    for (int id : shuffles) {
      spark.sparkContext().cleaner().get().doCleanupShuffle(id, true);
    }
    // Outputs are freed once the writes still reading them complete (or miss the write timeout).
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    Map<String, Map<String, Long>> m;
    while (true) {
      m = LocalCluster.executorMetrics();
      boolean clean = !m.isEmpty() && m.values().stream().allMatch(v -> v.get("mapOutput.count") == 0
          && v.get("memory.mapOutputInUse") == 0 && v.get("memory.landingInUse") == 0
          && v.get("mapOutput.spillFiles") == 0);
      if (clean || System.nanoTime() > deadline) {
        break;
      }
      Thread.sleep(250);
    }
    m.forEach((id, v) -> {
      assertEquals(0L, v.get("mapOutput.count"), "executor " + id + ": " + v);
      assertEquals(0L, v.get("memory.mapOutputInUse"), "executor " + id + ": " + v);
      assertEquals(0L, v.get("memory.landingInUse"), "executor " + id + ": " + v);
      assertEquals(0L, v.get("mapOutput.spillFiles"), "executor " + id + ": " + v);
    });
  }
}
