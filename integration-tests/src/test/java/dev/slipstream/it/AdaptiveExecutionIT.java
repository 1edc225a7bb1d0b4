package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.LocalCluster;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * AQE forced into each of its shuffle-read shapes under Slipstream: coalesced partition ranges,
 * skew-join splits (map-index ranges), and the local shuffle reader. Each query's rows must equal
 * the same query with AQE off, and the plan must show that the shape was really used.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AdaptiveExecutionIT {
  private SparkSession spark;

  @BeforeAll
  void start() {
    spark = LocalCluster.start(LocalCluster.builder("aqe", LocalCluster.SLIPSTREAM, 2), 2);
    // 90% of the facts share key 7: one skewed partition.
    spark.range(0, 400_000, 1, 4).selectExpr("id", "case when id % 10 = 0 then id % 1000 else 7 end as k",
        "cast(id % 101 as decimal(12,2)) as v").createOrReplaceTempView("facts");
    spark.range(0, 1000, 1, 2).selectExpr("id as k", "concat('d', id % 13) as name").createOrReplaceTempView("dims");
  }

  @AfterAll
  void stop() {
    if (spark != null) {
      spark.stop();
    }
  }

  private void set(Map<String, String> conf) {
    conf.forEach((k, v) -> spark.conf().set(k, v));
  }

  private List<String> rows(Dataset<Row> df) {
    return df.collectAsList().stream().map(Row::mkString).sorted().collect(Collectors.toList());
  }

  /** Runs {@code sql} with AQE off, then on with {@code aqe}; returns the AQE plan after checking equal rows. */
  private String compare(String sql, Map<String, String> aqe) {
    spark.conf().set("spark.sql.adaptive.enabled", "false");
    List<String> want = rows(spark.sql(sql));
    spark.conf().set("spark.sql.adaptive.enabled", "true");
    set(aqe);
    Dataset<Row> df = spark.sql(sql);
    List<String> got = rows(df);
    assertEquals(want, got, sql);
    String plan = df.queryExecution().executedPlan().toString();
    aqe.keySet().forEach(k -> spark.conf().unset(k));
    return plan;
  }

  @Test
  void coalescedPartitionRanges() {
    String plan = compare("select k % 50 as g, count(*), sum(v) from facts group by k % 50", Map.of(
        "spark.sql.shuffle.partitions", "64",
        "spark.sql.adaptive.coalescePartitions.enabled", "true",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes", "1m",
        "spark.sql.autoBroadcastJoinThreshold", "-1"));
    assertTrue(plan.contains("coalesced"), plan);
  }

  @Test
  void skewJoinSplitsReadMapIndexRanges() {
    String plan = compare("select f.k, d.name, count(*), sum(f.v) from facts f join dims d on f.k = d.k group by f.k, d.name",
        Map.of(
            "spark.sql.shuffle.partitions", "8",
            "spark.sql.autoBroadcastJoinThreshold", "-1",
            "spark.sql.adaptive.coalescePartitions.enabled", "false",
            "spark.sql.adaptive.skewJoin.enabled", "true",
            // the aggregate after the join needs its own shuffle once the join is split
            "spark.sql.adaptive.forceOptimizeSkewedJoin", "true",
            "spark.sql.adaptive.skewJoin.skewedPartitionFactor", "1",
            "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "1k",
            "spark.sql.adaptive.advisoryPartitionSizeInBytes", "16k"));
    assertTrue(plan.contains("skewed"), plan);
  }

  @Test
  void localShuffleReaderAfterARuntimeBroadcast() {
    // Statically too big to broadcast; after the shuffle, the filtered side is tiny, so AQE
    // turns the sort-merge join into a broadcast join and reads the other side locally.
    String plan = compare("select f.k, d.name, f.v from facts f join (select * from dims where k < 3) d on f.k = d.k "
        + "where f.id % 1000 = 0", Map.of(
            "spark.sql.shuffle.partitions", "8",
            "spark.sql.autoBroadcastJoinThreshold", "-1",
            "spark.sql.adaptive.autoBroadcastJoinThreshold", "10m",
            "spark.sql.adaptive.localShuffleReader.enabled", "true"));
    assertTrue(plan.contains("local"), plan);
  }
}
