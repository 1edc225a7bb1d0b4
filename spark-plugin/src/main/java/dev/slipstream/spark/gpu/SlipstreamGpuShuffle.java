package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.shuffle.DeviceBatch;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.ShuffledRDD;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * The GPU shuffle API: shuffles device-resident batches by their int64 key
 * column with the batches staying in GPU memory end to end.
 *
 * <p>Map tasks hand their {@link DeviceBatch}es (one contiguous device buffer plus a
 * {@code BatchLayout}, the shape of cudf's contiguous split) to the Slipstream GPU writer, which
 * partitions them on the device into the executor's device map-output store; reduce tasks receive
 * their partition's blocks into their device landing region, pushed by the holders' push kernel
 * (CUDA IPC), and get one device batch per map output back. A job can mix this with ordinary host
 * shuffles.
 *
 * <p>Needs {@code spark.shuffle.manager=dev.slipstream.spark.SlipstreamShuffleManager}, and
 * executors with a GPU ({@code spark.executor.resource.gpu.amount=1}, a discovery script,
 * {@code spark.plugins=dev.slipstream.spark.gpu.SlipstreamGpuPlugin}). On an executor without a
 * usable GPU the map or reduce task fails with the reason (no host fallback: the batches are
 * device memory that only a GPU executor can have produced).
 *
 * <p>Ownership: the writer consumes (closes) the batches a map task gives it; the batches a reduce
 * task gets are closed when the task completes.
 */
public final class SlipstreamGpuShuffle {
  private SlipstreamGpuShuffle() {}

  /**
   * Shuffles {@code batches} (each with payload columns of {@code widths} bytes) into
   * {@code numPartitions} partitions by key: row r goes to {@code slip_partition_of(key, n)}.
   */
  public static JavaRDD<DeviceBatch> shuffleByKey(JavaRDD<DeviceBatch> batches, int numPartitions, int... widths) {
    GpuPartitioner partitioner = new GpuPartitioner(numPartitions, widths);
    JavaPairRDD<Integer, DeviceBatch> keyed = batches.mapToPair(b -> new Tuple2<>(0, b));
    ClassTag<Integer> kt = ClassTag$.MODULE$.apply(Integer.class);
    ClassTag<DeviceBatch> vt = ClassTag$.MODULE$.apply(DeviceBatch.class);
    ShuffledRDD<Integer, DeviceBatch, DeviceBatch> shuffled = new ShuffledRDD<>(keyed.rdd(), partitioner, kt, vt, vt);
    return JavaPairRDD.fromRDD(shuffled, kt, vt).values();
  }

  /**
   * Inside a reduce task, after its GPU shuffle read: what the read moved and the span of its
   * remote data path ({@link GpuReadStats}); empty outside a task or before a GPU shuffle read.
   */
  public static java.util.Optional<GpuReadStats> taskReadStats() {
    org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
    if (task == null || !(org.apache.spark.SparkEnv.get().shuffleManager()
        instanceof dev.slipstream.spark.SlipstreamShuffleManager m)) {
      return java.util.Optional.empty();
    }
    return m.requireGpu().readStats(task.taskAttemptId());
  }
}
