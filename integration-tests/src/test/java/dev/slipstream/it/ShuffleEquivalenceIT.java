package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import dev.slipstream.bench.BlockManagerReads;
import dev.slipstream.bench.LocalCluster;
import dev.slipstream.bench.Workloads;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;
import java.util.stream.Stream;

/**
 * Every workload of {@link Workloads} runs on a local cluster of two executor JVMs under
 * Spark's sort shuffle, then under Slipstream over the tcp transport, and the results must be
 * equal row for row. The Slipstream run uses small landing limits so that chunking,
 * back-pressure and records larger than one request are exercised, and codec threads with small
 * budgets. The workloads of
 * {@link ShuffleFigures} run under both too, and Slipstream must report the shuffle figures Spark's
 * sort shuffle reports for them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ShuffleEquivalenceIT {
  private static final int EXECUTORS = 2;
  private static final int[] REPARTITIONS = {150, 300}; // either side of directPartitionsMax (200)
  private final Map<String, List<String>> expected = new LinkedHashMap<>();
  private final Map<String, ShuffleFigures.Measured<?>> sortFigures = new LinkedHashMap<>();
  private SparkSession spark;
  private ShuffleFigures figures;

  @BeforeAll
  void runUnderSortShuffle() {
    SparkSession sort = LocalCluster.start(LocalCluster.builder("sort-baseline", LocalCluster.SORT, EXECUTORS), EXECUTORS);
    try {
      Workloads.all().forEach((name, w) -> expected.put(name, w.apply(sort)));
      ShuffleFigures f = ShuffleFigures.on(sort);
      sortFigures.put("batch", ShuffleFigures.coalescedAggregation(f, true));
      sortFigures.put("single", ShuffleFigures.coalescedAggregation(f, false));
      for (int n : REPARTITIONS) {
        sortFigures.put("sql" + n, ShuffleFigures.sqlRepartition(f, n));
        sortFigures.put("rdd" + n, ShuffleFigures.rddRepartition(f, n));
      }
    } finally {
      sort.stop();
    }
    spark = LocalCluster.start(LocalCluster.builder("slipstream", LocalCluster.SLIPSTREAM, EXECUTORS)
        .config("spark.slipstream.transport", "tcp")
        .config("spark.slipstream.landing.bytes", "8m")
        .config("spark.slipstream.reader.maxRequestBytes", "256k")
        .config("spark.slipstream.reader.maxBytesInFlight", "2m")
        // Codec threads with small budgets: map tasks encode on lanes and by themselves when the
        // lanes fall behind; readers decode ahead, park and take blocks over.
        .config("spark.slipstream.codec.threads", "2")
        .config("spark.slipstream.writer.encodeAheadBytes", "128k")
        .config("spark.slipstream.reader.decodeAheadBytes", "256k"), EXECUTORS);
    figures = ShuffleFigures.on(spark);
  }

  @AfterAll
  void stop() {
    if (spark != null) {
      spark.stop();
    }
  }

  @TestFactory
  Stream<DynamicTest> sameRowsAsSortShuffle() {
    return Workloads.all().entrySet().stream().map(e -> DynamicTest.dynamicTest(e.getKey(), () -> {
      Function<SparkSession, List<String>> w = e.getValue();
      List<String> got = w.apply(spark);
      List<String> want = expected.get(e.getKey());
      assertFalse(want.isEmpty(), "the sort-shuffle baseline of " + e.getKey() + " is empty");
      assertEquals(want.size(), got.size(), e.getKey() + ": row count");
      assertEquals(want, got, e.getKey() + ": rows");
    }));
  }

  @Test
  void executorsReallyMovedBytesThroughTheTcpTransport() {
    Map<String, Map<String, Long>> before = LocalCluster.executorMetrics();
    // Both executors run map tasks, so every reduce task reads across the transport.
    long keys = Workloads.spreadShuffle(spark);
    assertEquals(997, keys);
    // A holder counts a write when its ack returns, which can trail the job's end a little.
    Map<String, Map<String, Long>> m = LocalCluster.executorMetrics();
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (delta(before, m, "transport.bytesWritten") != delta(before, m, "transport.bytesReceived")
        && System.nanoTime() < deadline) {
      m = LocalCluster.executorMetrics();
    }
    assertEquals(EXECUTORS, m.size(), "both executors answered: " + m.keySet());
    long written = delta(before, m, "transport.bytesWritten");
    long received = delta(before, m, "transport.bytesReceived");
    assertTrue(written > 0, "executors wrote one-sided through tcp: " + m);
    assertEquals(written, received, "every byte written one-sided arrived in a landing region: " + m);
    assertTrue(delta(before, m, "requests.served") > 0, "executors served write requests: " + m);
  }

  /**
   * Code that sees a {@code SortShuffleManager} may read shuffle blocks through Spark's block
   * manager instead of the manager's reader (Delta Lake's optimized write does). Every block of a
   * Slipstream shuffle must then come back from its holder's map-output store: local blocks
   * through {@code getLocalBlockData}, the other executor's through Spark's block transfer service.
   */
  @Test
  void blocksAreServedThroughSparksBlockManager() {
    BlockManagerReads.Result r = BlockManagerReads.run(spark);
    assertEquals(r.viaReader(), r.viaBlockManager());
    assertTrue(r.localBlocks() > 0 && r.remoteBlocks() > 0,
        "blocks were read both locally and from the other executor: local " + r.localBlocks() + ", remote "
            + r.remoteBlocks());
  }

  /**
   * Adaptive execution reading coalesced partition ranges with
   * {@code spark.sql.adaptive.fetchShuffleBlocksInBatch}: each reduce task fetches a map output's
   * partitions of its range as one block, and the read metrics count blocks as Spark's own reader
   * does: under both managers, one block per map output and reduce task with the setting on, one
   * per non-empty partition of each map output with it off. Rows and bytes read are the same.
   */
  @Test
  void coalescedReadsFetchBatchBlocksCountedAsSortShuffleCountsThem() {
    ShuffleFigures.Measured<List<String>> batch = ShuffleFigures.coalescedAggregation(figures, true);
    ShuffleFigures.Measured<List<String>> single = ShuffleFigures.coalescedAggregation(figures, false);
    ShuffleFigures.Figures sortBatch = sortFigures.get("batch").figures();
    ShuffleFigures.Figures sortSingle = sortFigures.get("single").figures();
    String all = "Slipstream batch " + batch.figures() + ", single " + single.figures() + "; sort shuffle batch "
        + sortBatch + ", single " + sortSingle;
    assertEquals(sortFigures.get("single").result(), batch.result(), "rows with batch fetch");
    assertEquals(sortFigures.get("single").result(), single.result(), "rows without batch fetch");
    assertEquals(sortFigures.get("batch").result(), single.result(), "rows under sort shuffle with batch fetch");

    // 6 map outputs, 40 partitions, 4000 keys: every block is non-empty.
    assertEquals(6 * 40, sortSingle.blocks(), "sort shuffle without batch fetch: a block per map and partition; " + all);
    assertEquals(6 * sortBatch.readingTasks(), sortBatch.blocks(),
        "sort shuffle with batch fetch: a block per map and reduce task; " + all);
    assertTrue(sortBatch.readingTasks() > 1 && sortBatch.readingTasks() < 40,
        "partitions were coalesced into several ranges; " + all);

    assertEquals(sortSingle.blocks(), single.figures().blocks(), "blocks without batch fetch; " + all);
    assertEquals(sortBatch.blocks(), batch.figures().blocks(), "blocks with batch fetch; " + all);
    assertEquals(sortBatch.readingTasks(), batch.figures().readingTasks(), "the same coalesced ranges; " + all);
    assertTrue(batch.figures().remoteBlocks() > 0 && batch.figures().localBlocks() > 0,
        "batch blocks were fetched from the other executor and read locally; " + all);
    assertEquals(sortSingle.bytesRead(), single.figures().bytesRead(), "bytes read without batch fetch; " + all);
    assertEquals(sortBatch.bytesRead(), batch.figures().bytesRead(), "bytes read with batch fetch; " + all);
    assertEquals(single.figures().bytesRead(), batch.figures().bytesRead(), all);
    assertEquals(single.figures().recordsRead(), batch.figures().recordsRead(), all);
  }

  /**
   * Shuffle bytes written are the bytes of the map outputs, whichever writer made them: each
   * partition is read exactly once, so the bytes the reduce tasks read (each block's real length,
   * as its holder reports it) add up to the map outputs' bytes, and the bytes written must equal
   * them, and equal what Spark's sort shuffle reports for the same job. 150 partitions use the
   * direct writer; 300 Spark's serialized sort for SQL rows and {@code ExternalSorter} for the
   * Java-serialized RDD.
   */
  @Test
  void bytesWrittenAreTheMapOutputsBytesAsUnderSortShuffle() {
    for (int n : REPARTITIONS) {
      assertSameFigures("sql" + n, ShuffleFigures.sqlRepartition(figures, n));
      assertSameFigures("rdd" + n, ShuffleFigures.rddRepartition(figures, n));
    }
  }

  private void assertSameFigures(String name, ShuffleFigures.Measured<Long> got) {
    ShuffleFigures.Measured<?> want = sortFigures.get(name);
    ShuffleFigures.Figures g = got.figures();
    ShuffleFigures.Figures w = want.figures();
    String both = name + ": Slipstream " + g + ", sort shuffle " + w;
    assertEquals(want.result(), got.result(), both);
    assertEquals(w.bytesWritten(), w.bytesRead(), "sort shuffle reads what it wrote; " + both);
    assertEquals(g.bytesRead(), g.bytesWritten(), "bytes written are the bytes the map outputs hold; " + both);
    assertEquals(w.bytesWritten(), g.bytesWritten(), "bytes written as under sort shuffle; " + both);
    assertEquals(w.bytesRead(), g.bytesRead(), "bytes read as under sort shuffle; " + both);
    assertEquals(w.recordsWritten(), g.recordsWritten(), both);
    assertEquals(g.recordsWritten(), g.recordsRead(), both);
  }

  private static long delta(Map<String, Map<String, Long>> before, Map<String, Map<String, Long>> after, String key) {
    long b = before.values().stream().mapToLong(v -> v.getOrDefault(key, 0L)).sum();
    long a = after.values().stream().mapToLong(v -> v.getOrDefault(key, 0L)).sum();
    return a - b;
  }
}
