package dev.slipstream.spark;

import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.shim.SparkShim;
import java.io.IOException;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Map side: Spark's {@code ExternalSorter} partitions the records (combining map-side when the
 * dependency asks), serializes and compresses them with the job's settings, and writes each
 * partition into this executor's map-output store. The task returns a {@link MapStatus} with
 * exact sizes; the blocks stay in registered memory until a reader asks for them.
 *
 * <p>Threading: one task thread.
 */
final class SlipstreamShuffleWriter<K, V, C> extends ShuffleWriter<K, V> {
  private final SlipstreamShuffleHandle<K, V, C> handle;
  private final long mapId;
  private final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  private final ExecutorRuntime runtime;
  private ExternalSorter<K, V, ?> sorter;
  private StoreMapOutputWriter output;
  private MapStatus status;
  private long[] partitionLengths = new long[0];
  private boolean stopping;

  SlipstreamShuffleWriter(SlipstreamShuffleHandle<K, V, C> handle, long mapId, TaskContext context,
                          ShuffleWriteMetricsReporter metrics, ExecutorRuntime runtime) {
    this.handle = handle;
    this.mapId = mapId;
    this.context = context;
    this.metrics = metrics;
    this.runtime = runtime;
  }

  @Override
  public void write(Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    if (dep.mapSideCombine()) {
      sorter = SparkShim.sorter(context, dep.aggregator(), Scala.some(dep.partitioner()), Scala.none(), dep.serializer());
    } else {
      sorter = SparkShim.<K, V, V>sorter(context, Scala.none(), Scala.some(dep.partitioner()), Scala.none(),
          dep.serializer());
    }
    sorter.insertAll(records);
    output = new StoreMapOutputWriter(runtime.node().store().newOutput(handle.shuffleId(), mapId,
        dep.partitioner().numPartitions()));
    long t0 = System.nanoTime();
    sorter.writePartitionedMapOutput(handle.shuffleId(), mapId, output, metrics);
    output.commitAllPartitions(sorter.getChecksums());
    metrics.incWriteTime(System.nanoTime() - t0);
    MapOutput committed = output.committed();
    partitionLengths = committed.partitionLengths();
    status = SparkShim.mapStatus(SparkEnv.get().blockManager().shuffleServerId(), partitionLengths, mapId);
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    try {
      if (stopping) {
        return Scala.none();
      }
      stopping = true;
      if (success && status != null) {
        return Scala.some(status);
      }
      if (output != null && output.committed() == null) {
        output.abort(null);
      } else if (!success && output != null) {
        runtime.node().store().removeMapOutput(handle.shuffleId(), mapId);
      }
      return Scala.none();
    } finally {
      if (sorter != null) {
        long t0 = System.nanoTime();
        sorter.stop();
        metrics.incWriteTime(System.nanoTime() - t0);
        sorter = null;
      }
    }
  }

  @Override
  public long[] getPartitionLengths() {
    return partitionLengths;
  }
}
