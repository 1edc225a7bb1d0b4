package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
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
 * back-pressure and records larger than one request are exercised.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ShuffleEquivalenceIT {
  private static final int EXECUTORS = 2;
  private final Map<String, List<String>> expected = new LinkedHashMap<>();
  private SparkSession spark;

  @BeforeAll
  void runUnderSortShuffle() {
    SparkSession sort = LocalCluster.start(LocalCluster.builder("sort-baseline", LocalCluster.SORT, EXECUTORS), EXECUTORS);
    try {
      Workloads.all().forEach((name, w) -> expected.put(name, w.apply(sort)));
    } finally {
      sort.stop();
    }
    spark = LocalCluster.start(LocalCluster.builder("slipstream", LocalCluster.SLIPSTREAM, EXECUTORS)
        .config("spark.slipstream.transport", "tcp")
        .config("spark.slipstream.landing.bytes", "8m")
        .config("spark.slipstream.reader.maxRequestBytes", "256k")
        .config("spark.slipstream.reader.maxBytesInFlight", "2m"), EXECUTORS);
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
    Workloads.reduceByKey(spark);
    Map<String, Map<String, Long>> m = LocalCluster.executorMetrics();
    assertEquals(EXECUTORS, m.size(), "both executors answered: " + m.keySet());
    m.forEach((id, values) -> {
      assertTrue(values.get("transport.bytesWritten") > 0, "executor " + id + " wrote one-sided: " + values);
      assertTrue(values.get("transport.bytesReceived") > 0, "executor " + id + " received writes: " + values);
      assertTrue(values.get("requests.served") > 0, "executor " + id + " served write requests: " + values);
    });
  }
}
