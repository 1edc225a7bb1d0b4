package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.shuffle.DeviceBatch;
import dev.slipstream.gpu.shuffle.DeviceMapOutputWriter;
import dev.slipstream.spark.shim.SparkShim;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Map side of a GPU shuffle: the task's device batches are partitioned on this executor's GPU
 * into its device map-output store ({@link DeviceMapOutputWriter}); the {@link MapStatus} carries
 * each partition's real size in bytes. Consumes (closes) the batches.
 *
 * <p>Threading: the task thread.
 */
public final class GpuShuffleWriter<K, V, C> extends DeviceStoreWriter<K, V> {
  private final GpuShuffleHandle<K, V, C> handle;
  private final ShuffleWriteMetricsReporter metrics;

  public GpuShuffleWriter(GpuShuffleHandle<K, V, C> handle, long mapId, TaskContext context,
                   ShuffleWriteMetricsReporter metrics, ExecutorGpu runtime) {
    super(handle.shuffleId(), mapId, runtime);
    this.handle = handle;
    this.metrics = metrics;
  }

  @Override
  public void write(Iterator<Product2<K, V>> records) {
    GpuExecutor gpu = runtime.require();
    List<DeviceBatch> batches = new ArrayList<>();
    try {
      while (records.hasNext()) {
        Object v = records.next()._2();
        if (!(v instanceof DeviceBatch b)) {
          throw new IllegalArgumentException("GPU shuffle " + handle.shuffleId() + ": got a record of "
              + (v == null ? "null" : v.getClass().getName()) + ", expected a " + DeviceBatch.class.getName());
        }
        batches.add(b);
      }
      long t0 = System.nanoTime();
      int n = handle.partitioner().numPartitions();
      long[][] r = DeviceMapOutputWriter.write(gpu.context(), gpu.store(), handle.shuffleId(), mapId, batches, n,
          handle.partitioner().widths(), runtime.executor().node().config().fetchTimeout().toMillis());
      partitionLengths = r[0];
      long bytes = 0;
      long rows = 0;
      for (int p = 0; p < n; p++) {
        bytes += r[0][p];
        rows += r[1][p];
      }
      metrics.incBytesWritten(bytes);
      metrics.incRecordsWritten(rows);
      metrics.incWriteTime(System.nanoTime() - t0);
      status = SparkShim.mapStatus(SparkEnv.get().blockManager().shuffleServerId(), partitionLengths, mapId);
    } finally {
      for (DeviceBatch b : batches) {
        b.close();
      }
    }
  }
}
