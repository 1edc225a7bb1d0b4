package dev.slipstream.spark;

import dev.slipstream.core.shuffle.MapOutputStore;
import java.io.IOException;
import java.util.Map;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkException;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.sort.SerializedShuffleHandle;
import org.apache.spark.shuffle.sort.UnsafeShuffleWriter;
import scala.Option;
import scala.collection.Iterator;
import scala.Product2;

/**
 * Map side above {@code spark.slipstream.writer.directPartitionsMax} partitions, without map-side
 * combine and with a serializer that can relocate records (Spark SQL's always can): Spark's own
 * serialized sort ({@link UnsafeShuffleWriter}: each record serialized at once into sorter pages,
 * sorted by partition, spilled under memory pressure), whose merged output goes through Spark's
 * map-output writer API into this executor's map-output store. Unlike {@code ExternalSorter} it
 * never holds a record object, which Spark SQL relies on to skip copying its rows.
 *
 * <p>Threading: one task thread.
 */
final class SerializedWriter<K, V> extends ShuffleWriter<K, V> {
  private final UnsafeShuffleWriter<K, V> delegate;
  private final MapOutputStore store;
  private final int shuffleId;
  private final long mapId;

  private SerializedWriter(UnsafeShuffleWriter<K, V> delegate, MapOutputStore store, int shuffleId, long mapId) {
    this.delegate = delegate;
    this.store = store;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
  }

  @SuppressWarnings("unchecked")
  static <K, V> ShuffleWriter<K, V> create(SlipstreamShuffleHandle<K, V, ?> handle, long mapId, TaskContext context,
                                           ShuffleWriteMetricsReporter metrics, ExecutorRuntime runtime, SparkConf conf) {
    MapOutputStore store = runtime.node().store();
    ShuffleDependency<K, V, V> dep = (ShuffleDependency<K, V, V>) handle.dependency();
    try {
      UnsafeShuffleWriter<K, V> w = new UnsafeShuffleWriter<>(SparkEnv.get().blockManager(), context.taskMemoryManager(),
          new SerializedShuffleHandle<>(handle.shuffleId(), dep), mapId, context, conf, metrics, new StoreComponents(store));
      return new SerializedWriter<>(w, store, handle.shuffleId(), mapId);
    } catch (SparkException e) {
      throw new IllegalStateException("Spark's serialized shuffle writer refused shuffle " + handle.shuffleId() + ": "
          + e.getMessage(), e);
    }
  }

  @Override
  public void write(Iterator<Product2<K, V>> records) throws IOException {
    delegate.write(records);
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    try {
      return delegate.stop(success);
    } finally {
      if (!success) {
        store.removeMapOutput(shuffleId, mapId); // a failed attempt's committed output, if it got that far
      }
    }
  }

  @Override
  public long[] getPartitionLengths() {
    return delegate.getPartitionLengths();
  }

  /** Spark's map-output writer API over the store, as Spark's shuffle plugin API defines it. */
  private static final class StoreComponents implements ShuffleExecutorComponents {
    private final MapOutputStore store;

    StoreComponents(MapOutputStore store) {
      this.store = store;
    }

    @Override
    public void initializeExecutor(String appId, String execId, Map<String, String> extraConfigs) {}

    @Override
    public ShuffleMapOutputWriter createMapOutputWriter(int shuffleId, long mapTaskId, int numPartitions) {
      return new StoreMapOutputWriter(store.newOutput(shuffleId, mapTaskId, numPartitions));
    }
  }
}
