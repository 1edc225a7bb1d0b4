package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.it.StreamOnlySerializer.Reads;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.ShuffledRDD;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Shuffles through Slipstream (tcp, two executors) with {@link StreamOnlySerializer}, a serializer
 * that, like the RAPIDS Accelerator's, only writes through {@code serializeStream} with
 * {@code writeKey}/{@code writeValue} and reads through {@code deserializeStream}. Each of the
 * writers Slipstream can pick for it runs: the direct writer, Spark's {@code ExternalSorter}
 * (not relocatable, above {@code spark.slipstream.writer.directPartitionsMax}) and Spark's
 * serialized sort (relocatable), the sorters spilling; and the reader, one partition per task or
 * partition ranges fetched in batches. Every record must arrive exactly once, in its partition.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class StreamOnlySerializerIT {
  private static final int EXECUTORS = 2;
  private static final int MAPS = 4;
  private static final int RECORDS = 20_000;
  private static final int SPILL_EVERY = 1000; // records a map task's sorter holds before it spills
  private static final ClassTag<Integer> INT = ClassTag$.MODULE$.apply(Integer.class);
  private static final ClassTag<String> STRING = ClassTag$.MODULE$.apply(String.class);

  private SparkSession spark;
  private JavaSparkContext jsc;
  private final TaskTotals totals = new TaskTotals();

  @BeforeAll
  void start() {
    spark = LocalCluster.start(LocalCluster.builder("stream-only-serializer", LocalCluster.SLIPSTREAM, EXECUTORS)
        .config("spark.slipstream.transport", "tcp")
        .config("spark.shuffle.spill.numElementsForceSpillThreshold", String.valueOf(SPILL_EVERY))
        // no cleaning of finished shuffles, so the count of map outputs the stores hold only grows
        .config("spark.cleaner.referenceTracking", "false"), EXECUTORS);
    jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    spark.sparkContext().addSparkListener(totals);
  }

  @AfterAll
  void stop() {
    if (spark != null) {
      spark.stop();
    }
  }

  static String value(int key) {
    return "v" + key + "-" + "x".repeat(key % 53);
  }

  /** Sums of the finished tasks' figures since the last {@link #reset}. */
  static final class TaskTotals extends SparkListener {
    final AtomicLong diskBytesSpilled = new AtomicLong();
    final AtomicLong blocksFetched = new AtomicLong();

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
      if (end.taskMetrics() != null) {
        diskBytesSpilled.addAndGet(end.taskMetrics().diskBytesSpilled());
        blocksFetched.addAndGet(end.taskMetrics().shuffleReadMetrics().totalBlocksFetched());
      }
    }

    void reset() {
      diskBytesSpilled.set(0);
      blocksFetched.set(0);
    }
  }

  /** What one shuffle did: the (reader partition, key, value) rows and the job's figures. */
  record Run(List<Tuple3<Integer, Integer, String>> rows, long written, long read, long spilled, long blocks,
             long outputsAdded) {}

  /**
   * Shuffles {@link #RECORDS} records from {@link #MAPS} map tasks into {@code partitions}
   * partitions with the serializer; {@code rangeWidth > 0} reads them in ranges of that many
   * partitions with batch fetches allowed.
   */
  private Run shuffle(int partitions, boolean relocatable, Reads reads, int rangeWidth) throws TimeoutException {
    LongAccumulator written = spark.sparkContext().longAccumulator("values written");
    LongAccumulator valuesRead = spark.sparkContext().longAccumulator("values read");
    RDD<Tuple2<Integer, String>> source = jsc.parallelize(IntStream.range(0, RECORDS).boxed().collect(Collectors.toList()),
        MAPS).map(k -> new Tuple2<>(k, value(k))).rdd();
    ShuffledRDD<Integer, String, String> shuffled = new ShuffledRDD<>(source, new HashPartitioner(partitions), INT,
        STRING, STRING);
    shuffled.setSerializer(new StreamOnlySerializer(relocatable, reads, written, valuesRead));
    RDD<Product2<Integer, String>> read;
    if (rangeWidth > 0) {
      read = new PartitionRangeRDD<>(shuffled, rangeWidth);
      jsc.setLocalProperty("__fetch_continuous_blocks_in_batch_enabled", "true");
    } else {
      read = cast(shuffled);
    }
    JavaRDD<Product2<Integer, String>> out = JavaRDD.fromRDD(read, ClassTag$.MODULE$.apply(Product2.class));
    long outputsBefore = LocalCluster.executorSum("mapOutput.count");
    spark.sparkContext().listenerBus().waitUntilEmpty();
    totals.reset();
    List<Tuple3<Integer, Integer, String>> rows;
    try {
      rows = out.mapPartitionsWithIndex((index, it) -> {
        List<Tuple3<Integer, Integer, String>> l = new ArrayList<>();
        it.forEachRemaining(r -> l.add(new Tuple3<>(index, r._1(), r._2())));
        return l.iterator();
      }, false).collect();
    } finally {
      jsc.setLocalProperty("__fetch_continuous_blocks_in_batch_enabled", null);
    }
    spark.sparkContext().listenerBus().waitUntilEmpty();
    return new Run(rows, written.value(), valuesRead.value(), totals.diskBytesSpilled.get(), totals.blocksFetched.get(),
        LocalCluster.executorSum("mapOutput.count") - outputsBefore);
  }

  /** A shuffled RDD's (key, value) pairs as the {@code Product2}s they are. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static RDD<Product2<Integer, String>> cast(ShuffledRDD<Integer, String, String> rdd) {
    return (RDD) rdd;
  }

  /** Every key once, with its value, read by the task of its partition (or of the range holding it). */
  private static void assertExactlyOnce(String name, Run run, int partitions, int rangeWidth) {
    int[] seen = new int[RECORDS];
    List<String> problems = new ArrayList<>();
    for (Tuple3<Integer, Integer, String> r : run.rows()) {
      int key = r._2();
      if (key < 0 || key >= RECORDS) {
        problems.add("key " + key + " was never written");
        continue;
      }
      seen[key]++;
      if (!value(key).equals(r._3())) {
        problems.add("key " + key + " arrived with value " + r._3() + ", expected " + value(key));
      }
      int partition = key % partitions; // HashPartitioner of a non-negative Integer
      int reader = rangeWidth > 0 ? partition / rangeWidth : partition;
      if (r._1() != reader) {
        problems.add("key " + key + " (partition " + partition + ") was read by task " + r._1() + ", expected " + reader);
      }
    }
    for (int k = 0; k < RECORDS; k++) {
      if (seen[k] != 1) {
        problems.add("key " + k + " arrived " + seen[k] + " times");
      }
    }
    assertTrue(problems.isEmpty(), name + ": " + problems.size() + " problems, the first: "
        + problems.subList(0, Math.min(10, problems.size())));
    assertEquals(RECORDS, run.rows().size(), name + ": rows read");
    assertTrue(run.written() >= RECORDS, name + ": the serializer wrote " + run.written() + " values, expected at least "
        + RECORDS + " (was it used?)");
    assertTrue(run.read() >= RECORDS, name + ": the serializer read " + run.read() + " values, expected at least "
        + RECORDS);
    assertTrue(run.outputsAdded() >= MAPS, name + ": Slipstream's stores gained " + run.outputsAdded()
        + " map outputs, expected " + MAPS);
  }

  @Test
  void directWriter() throws TimeoutException {
    for (Reads reads : Reads.values()) {
      for (boolean relocatable : new boolean[] {false, true}) {
        String name = "direct writer, 50 partitions, relocatable " + relocatable + ", reads " + reads;
        Run run = shuffle(50, relocatable, reads, 0);
        assertExactlyOnce(name, run, 50, 0);
        assertEquals(RECORDS, run.written(), name + ": values written (the direct writer writes each record once)");
        assertEquals(RECORDS, run.read(), name + ": values read");
      }
    }
  }

  /** Not relocatable, above directPartitionsMax: Spark's ExternalSorter, which reads its spills with readKey/readValue. */
  @Test
  void externalSorterSpillingAboveDirectPartitionsMax() throws TimeoutException {
    String name = "ExternalSorter, 300 partitions";
    Run run = shuffle(300, false, Reads.KEY_VALUE, 0);
    assertExactlyOnce(name, run, 300, 0);
    assertTrue(run.spilled() > 0, name + ": the map tasks' sorters spilled nothing; expected spills every "
        + SPILL_EVERY + " records");
  }

  /** Relocatable, above directPartitionsMax: Spark's serialized sort, as RAPIDS' serializer gets it. */
  @Test
  void serializedSortSpillingAboveDirectPartitionsMax() throws TimeoutException {
    String name = "serialized sort, 300 partitions";
    Run run = shuffle(300, true, Reads.ITERATOR, 0);
    assertExactlyOnce(name, run, 300, 0);
    assertEquals(RECORDS, run.written(), name + ": values written (serialized once, then moved as bytes)");
    assertEquals(RECORDS, run.read(), name + ": values read");
    assertTrue(run.spilled() > 0, name + ": the map tasks' sorters spilled nothing; expected spills every "
        + SPILL_EVERY + " records");
  }

  /**
   * Ranges of 10 of 50 partitions per task. Relocatable: one block per map output and range
   * (the partitions' streams read as one); not relocatable: one block per partition.
   */
  @Test
  void partitionRangesFetchInBatchesOnlyWhenRelocatable() throws TimeoutException {
    int width = 10;
    int tasks = 50 / width;
    Run batched = shuffle(50, true, Reads.ITERATOR, width);
    assertExactlyOnce("ranges, relocatable", batched, 50, width);
    assertTrue(batched.blocks() <= (long) MAPS * tasks, "ranges, relocatable: " + batched.blocks()
        + " blocks fetched, expected at most one per map output and range (" + MAPS * tasks + ")");
    Run single = shuffle(50, false, Reads.ITERATOR, width);
    assertExactlyOnce("ranges, not relocatable", single, 50, width);
    assertEquals((long) MAPS * 50, single.blocks(), "ranges, not relocatable: blocks fetched, expected one per map "
        + "output and partition");
  }
}
