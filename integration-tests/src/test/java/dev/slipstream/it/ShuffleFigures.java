package dev.slipstream.it;

import dev.slipstream.bench.LocalCluster;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The shuffle figures Spark reports for a piece of work (the UI, event logs and metrics sinks show
 * these task metrics), under whichever shuffle manager the session runs, and the workloads whose
 * figures the two managers must agree on: an aggregation read through adaptive execution's
 * coalesced partition ranges, with and without {@code spark.sql.adaptive.fetchShuffleBlocksInBatch};
 * and repartitions to either side of {@code spark.slipstream.writer.directPartitionsMax}, which use
 * different writers.
 *
 * <p>Threading: the listener bus thread adds task metrics; {@link #measure} runs on the test
 * thread, one piece of work at a time, and reads them once the bus is drained.
 */
final class ShuffleFigures extends SparkListener {
  /** Shuffle figures summed over every task of a piece of work; the tasks that fetched any block. */
  record Figures(long bytesWritten, long recordsWritten, long remoteBlocks, long localBlocks, long bytesRead,
                 long recordsRead, long readingTasks) {
    long blocks() {
      return remoteBlocks + localBlocks;
    }
  }

  /** A piece of work's result and its figures. */
  record Measured<T>(T result, Figures figures) {}

  private final SparkSession spark;
  private final AtomicLong bytesWritten = new AtomicLong();
  private final AtomicLong recordsWritten = new AtomicLong();
  private final AtomicLong remoteBlocks = new AtomicLong();
  private final AtomicLong localBlocks = new AtomicLong();
  private final AtomicLong bytesRead = new AtomicLong();
  private final AtomicLong recordsRead = new AtomicLong();
  private final AtomicLong readingTasks = new AtomicLong();

  private ShuffleFigures(SparkSession spark) {
    this.spark = spark;
  }

  /** Figures of {@code spark}'s tasks from now on. */
  static ShuffleFigures on(SparkSession spark) {
    ShuffleFigures f = new ShuffleFigures(spark);
    spark.sparkContext().addSparkListener(f);
    return f;
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    if (end.taskMetrics() == null) {
      return;
    }
    ShuffleWriteMetrics w = end.taskMetrics().shuffleWriteMetrics();
    ShuffleReadMetrics r = end.taskMetrics().shuffleReadMetrics();
    bytesWritten.addAndGet(w.bytesWritten());
    recordsWritten.addAndGet(w.recordsWritten());
    remoteBlocks.addAndGet(r.remoteBlocksFetched());
    localBlocks.addAndGet(r.localBlocksFetched());
    bytesRead.addAndGet(r.remoteBytesRead() + r.localBytesRead());
    recordsRead.addAndGet(r.recordsRead());
    if (r.remoteBlocksFetched() + r.localBlocksFetched() > 0) {
      readingTasks.incrementAndGet();
    }
  }

  /** Runs {@code work} and sums the shuffle figures of every task that ran for it. */
  <T> Measured<T> measure(Supplier<T> work) {
    drain();
    for (AtomicLong a : List.of(bytesWritten, recordsWritten, remoteBlocks, localBlocks, bytesRead, recordsRead,
        readingTasks)) {
      a.set(0);
    }
    T result = work.get();
    drain();
    return new Measured<>(result, new Figures(bytesWritten.get(), recordsWritten.get(), remoteBlocks.get(),
        localBlocks.get(), bytesRead.get(), recordsRead.get(), readingTasks.get()));
  }

  /** Waits until the listener bus has delivered every event posted so far (task ends come after the job's end). */
  private void drain() {
    LocalCluster.drainListenerBus(spark);
  }

  /** The coalesced-read aggregation's settings; the batch fetch setting comes on top. */
  private static final Map<String, String> COALESCING = Map.of(
      "spark.sql.adaptive.enabled", "true",
      "spark.sql.adaptive.coalescePartitions.enabled", "true",
      "spark.sql.adaptive.coalescePartitions.parallelismFirst", "false",
      "spark.sql.adaptive.coalescePartitions.minPartitionSize", "1k",
      "spark.sql.adaptive.advisoryPartitionSizeInBytes", "48k",
      "spark.sql.shuffle.partitions", "40",
      "spark.sql.autoBroadcastJoinThreshold", "-1");

  /**
   * An aggregation of 6 map outputs over 40 shuffle partitions that adaptive execution coalesces
   * into ranges of several partitions per reduce task; its rows and the coalesced read's plan.
   * With {@code batch} each reduce task may fetch a map output's partitions of its range as one
   * block. The session's settings are as before afterwards.
   */
  static Measured<List<String>> coalescedAggregation(ShuffleFigures figures, boolean batch) {
    Map<String, String> conf = new HashMap<>(COALESCING);
    conf.put("spark.sql.adaptive.fetchShuffleBlocksInBatch", Boolean.toString(batch));
    return withConf(figures.spark, conf, () -> figures.measure(() -> {
      var df = figures.spark.range(0, 200_000, 1, 6).selectExpr("id % 4000 as k", "id")
          .groupBy("k").agg(org.apache.spark.sql.functions.sum("id"), org.apache.spark.sql.functions.count("id"));
      List<String> rows = df.collectAsList().stream().map(Row::mkString).sorted().collect(Collectors.toList());
      String plan = df.queryExecution().executedPlan().toString();
      if (!plan.contains("coalesced")) {
        throw new AssertionError("adaptive execution did not coalesce the shuffle partitions: " + plan);
      }
      return rows;
    }));
  }

  /** {@code spark.range(200000).repartition(partitions)} summed: a round-robin shuffle of SQL rows. */
  static Measured<Long> sqlRepartition(ShuffleFigures figures, int partitions) {
    return figures.measure(() -> figures.spark.range(0, 200_000, 1, 4).repartition(partitions)
        .selectExpr("sum(id)").first().getLong(0));
  }

  /** The RDD equivalent: 200000 integers repartitioned (Java serialization) and counted. */
  static Measured<Long> rddRepartition(ShuffleFigures figures, int partitions) {
    List<Integer> ints = new ArrayList<>(200_000);
    for (int i = 0; i < 200_000; i++) {
      ints.add(i);
    }
    return figures.measure(() -> JavaSparkContext.fromSparkContext(figures.spark.sparkContext())
        .parallelize(ints, 4).repartition(partitions).count());
  }

  private static <T> T withConf(SparkSession spark, Map<String, String> conf, Supplier<T> work) {
    Map<String, String> before = new HashMap<>();
    conf.keySet().forEach(k -> {
      if (spark.conf().contains(k)) {
        before.put(k, spark.conf().get(k));
      }
    });
    conf.forEach((k, v) -> spark.conf().set(k, v));
    try {
      return work.get();
    } finally {
      conf.keySet().forEach(k -> {
        if (before.containsKey(k)) {
          spark.conf().set(k, before.get(k));
        } else {
          spark.conf().unset(k);
        }
      });
    }
  }
}
