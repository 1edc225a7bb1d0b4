package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.spark.SlipstreamShuffleManager;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/** Memory and files are released: by unregisterShuffle on every executor, and by stop(). */
class ShuffleLifecycleIT {

  private static JavaPairRDD<Integer, Long> shuffled(SparkSession s, int n) {
    List<Integer> seeds = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      seeds.add(i);
    }
    return JavaSparkContext.fromSparkContext(s.sparkContext()).parallelize(seeds, 4)
        .flatMapToPair(slice -> {
          List<Tuple2<Integer, Long>> out = new ArrayList<>();
          for (int i = slice; i < n; i += 4) {
            out.add(new Tuple2<>(i % 1000, (long) i));
          }
          return out.iterator();
        }).reduceByKey(Long::sum, 6);
  }

  @Test
  void unregisterShuffleFreesMapOutputOnEveryExecutor() throws Exception {
    // A map-output budget of one segment: part of the output spills to files, which must go too.
    SparkSession spark = LocalCluster.start(LocalCluster.builder("lifecycle", LocalCluster.SLIPSTREAM, 2)
        .config("spark.slipstream.mapOutput.memoryBytes", "8m"), 2);
    java.util.concurrent.atomic.AtomicLong written = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong recordsWritten = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong writeTime = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong bytesRead = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong recordsRead = new java.util.concurrent.atomic.AtomicLong();
    spark.sparkContext().addSparkListener(new org.apache.spark.scheduler.SparkListener() {
      @Override
      public void onTaskEnd(org.apache.spark.scheduler.SparkListenerTaskEnd end) {
        if (end.taskMetrics() != null) {
          written.addAndGet(end.taskMetrics().shuffleWriteMetrics().bytesWritten());
          recordsWritten.addAndGet(end.taskMetrics().shuffleWriteMetrics().recordsWritten());
          writeTime.addAndGet(end.taskMetrics().shuffleWriteMetrics().writeTime());
          // local + remote: where blocks are read from depends on where the scheduler ran the tasks
          bytesRead.addAndGet(end.taskMetrics().shuffleReadMetrics().remoteBytesRead()
              + end.taskMetrics().shuffleReadMetrics().localBytesRead());
          recordsRead.addAndGet(end.taskMetrics().shuffleReadMetrics().recordsRead());
        }
      }
    });
    try {
      // Each executor connects to the other as soon as it learns of it (its registration, or the
      // driver's word that the other joined), before any shuffle.
      long deadline = System.nanoTime() + 30_000_000_000L;
      Map<String, Map<String, Long>> early = LocalCluster.executorMetrics();
      while (early.values().stream().anyMatch(m -> m.get("peers.known") < 2) && System.nanoTime() < deadline) {
        Thread.sleep(50);
        early = LocalCluster.executorMetrics();
      }
      early.forEach((id, m) ->
          assertEquals(1L, m.get("peers.connectedEarly"), "executor " + id + " connections opened early: " + m));
      JavaPairRDD<Integer, Long> r = shuffled(spark, 200_000);
      assertEquals(1000, r.count());
      spark.sparkContext().listenerBus().waitUntilEmpty();
      assertTrue(written.get() > 0 && recordsWritten.get() > 0 && writeTime.get() > 0,
          "shuffle write metrics: bytes " + written + ", records " + recordsWritten + ", time " + writeTime);
      assertEquals(recordsWritten.get(), recordsRead.get(), "every record written was read once");
      assertEquals(written.get(), bytesRead.get(), "every byte written was read once (local + remote)");
      Map<String, Map<String, Long>> before = LocalCluster.executorMetrics();
      assertEquals(2, before.size());
      long outputs = before.values().stream().mapToLong(m -> m.get("mapOutput.count")).sum();
      assertEquals(4, outputs, "one map output per map task: " + before);

      int shuffleId = ((org.apache.spark.ShuffleDependency<?, ?, ?>) r.rdd().dependencies().head()).shuffleId();
      spark.sparkContext().cleaner().get().doCleanupShuffle(shuffleId, true);

      Map<String, Map<String, Long>> after = LocalCluster.executorMetrics();
      after.forEach((id, m) -> {
        assertEquals(0L, m.get("mapOutput.count"), "executor " + id + " still holds map output: " + m);
        assertEquals(0L, m.get("memory.mapOutputInUse"), "executor " + id + " still holds pages: " + m);
        assertEquals(0L, m.get("memory.landingInUse"), "executor " + id + " still holds landing space: " + m);
      });

      // The RDD runs again: Spark registers the removed shuffle under the same id and reruns its map
      // stage (as for a Dataset whose shuffles SQL's cleanup removed); those outputs are kept and read.
      long want = 0;
      for (long i = 0; i < 200_000; i++) {
        want += i;
      }
      assertEquals(want, (long) r.values().reduce(Long::sum), "the rerun reads every record once");
      assertEquals(4L, LocalCluster.executorMetrics().values().stream().mapToLong(m -> m.get("mapOutput.count")).sum(),
          "the rerun's map outputs are held again");
    } finally {
      spark.stop();
    }
  }

  @Test
  void stopReleasesEveryRegisteredRegionInLocalMode() {
    SparkSession spark = SparkSession.builder().appName("lifecycle-local").master("local[2]")
        .config("spark.shuffle.manager", LocalCluster.SLIPSTREAM)
        .config("spark.slipstream.transport", "loopback")
        .config("spark.ui.enabled", "false").getOrCreate();
    ShuffleNode node;
    try {
      assertEquals(1000, shuffled(spark, 50_000).count());
      SlipstreamShuffleManager m = (SlipstreamShuffleManager) SparkEnv.get().shuffleManager();
      node = m.nodeForTesting();
      assertTrue(node.transport().registeredRegionCount() > 0, "landing and map-output memory are registered");
      assertTrue(m.localMetrics().get("mapOutput.count") > 0);
      var sources = SparkEnv.get().metricsSystem().getSourcesByName("slipstream");
      assertEquals(1, sources.size(), "Slipstream registers one metrics source");
      com.codahale.metrics.Gauge<?> g = sources.head().metricRegistry().getGauges().get("memory.registered");
      assertTrue(((Long) g.getValue()) > 0, "registered memory is reported through Spark's metrics system");
    } finally {
      spark.stop();
    }
    assertEquals(0, node.transport().registeredRegionCount(), "stop() deregisters every region");
    assertEquals(0, node.store().memoryRegistered(), "stop() releases map-output segments");
    assertEquals(0, node.store().outputCount());
  }
}
