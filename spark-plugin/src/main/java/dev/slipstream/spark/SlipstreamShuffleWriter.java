package dev.slipstream.spark;

import dev.slipstream.core.shuffle.EncodeLanes;
import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.MapOutputStore;
import dev.slipstream.core.shuffle.PartitionedOutputWriter;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.shim.SparkShim;
import java.io.IOException;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Map side. Without map-side combine and with at most
 * {@code spark.slipstream.writer.directPartitionsMax} partitions, each record is serialized and
 * compressed at once into its partition's chain of registered pages. Otherwise Spark's
 * {@code ExternalSorter} partitions the records (combining map-side when the dependency asks),
 * serializes and compresses them, and writes each partition into this executor's map-output store. The task returns a {@link MapStatus} with
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
  private PartitionedOutputWriter direct;
  private final int directPartitionsMax;
  private MapStatus status;
  private long[] partitionLengths = new long[0];
  private boolean stopping;
  /** The store's removal mark when the task began: see {@link MapOutputStore#newOutput(int, long, int, long)}. */
  private final long begun;

  SlipstreamShuffleWriter(SlipstreamShuffleHandle<K, V, C> handle, long mapId, TaskContext context,
                          ShuffleWriteMetricsReporter metrics, ExecutorRuntime runtime, int directPartitionsMax) {
    this.handle = handle;
    this.mapId = mapId;
    this.context = context;
    this.metrics = metrics;
    this.runtime = runtime;
    this.directPartitionsMax = directPartitionsMax;
    this.begun = runtime.node().store().removalMark();
  }

  @Override
  public void write(Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    if (!dep.mapSideCombine() && dep.partitioner().numPartitions() <= directPartitionsMax) {
      writeDirect(dep, records);
    } else {
      writeSorted(dep, records);
    }
    status = SparkShim.mapStatus(SparkEnv.get().blockManager().shuffleServerId(), partitionLengths, mapId);
  }

  /**
   * Serializes each record at once into its partition's stream (compressed with Spark's codec),
   * which fills that partition's registered pages: no buffering of records, no sort, no merge.
   * With the executor's codec pool on (and a codec that does work), the task only serializes: each
   * partition's serialized bytes go over to an encode lane ({@link EncodeLanes}), which runs them
   * through the codec into the pages while the task goes on.
   */
  private void writeDirect(ShuffleDependency<K, V, C> dep, Iterator<Product2<K, V>> records) throws IOException {
    int n = dep.partitioner().numPartitions();
    int shuffleId = handle.shuffleId();
    direct = runtime.node().store().newPartitionedOutput(shuffleId, mapId, n, begun);
    SerializerInstance ser = dep.serializer().newInstance();
    SerializerManager sm = SparkEnv.get().serializerManager();
    Partitioner partitioner = dep.partitioner();
    SerializationStream[] streams = new SerializationStream[n];
    ClassTag<Object> any = ClassTag$.MODULE$.Any();
    EncodeLanes.Encoder codec = (p, sink) -> sm.wrapStream(new ShuffleBlockId(shuffleId, mapId, p), sink);
    EncodeLanes lanes = runtime.codecPool() == null ? null
        : new EncodeLanes(runtime.codecPool(), codec, direct::partition, n, runtime.conf().encodeChunkBytes(),
            runtime.conf().encodeAheadBytes());
    try {
      while (records.hasNext()) {
        Product2<K, V> r = records.next();
        K key = r._1();
        int p = partitioner.getPartition(key);
        SerializationStream s = streams[p];
        if (s == null) {
          s = ser.serializeStream(lanes != null ? lanes.partition(p) : codec.encode(p, direct.partition(p)));
          streams[p] = s;
        }
        s.writeKey(key, any);
        s.writeValue(r._2(), any);
        metrics.incRecordsWritten(1);
      }
      long t0 = System.nanoTime();
      for (SerializationStream s : streams) {
        if (s != null) {
          s.close(); // flushes serializer (and codec, without lanes) into the pages
        }
      }
      if (lanes != null) {
        lanes.finish(); // the last chunks, each partition's codec flushed into its pages
      }
      MapOutput committed = direct.commit();
      metrics.incWriteTime(System.nanoTime() - t0);
      partitionLengths = committed.partitionLengths();
      metrics.incBytesWritten(committed.totalBytes());
    } catch (IOException | RuntimeException | Error e) {
      if (lanes != null) {
        lanes.abort(); // no lane writes into the pages once they are freed
      }
      direct.abort();
      throw e;
    } finally {
      if (lanes != null) {
        runtime.encoded(lanes.bytesEncodedOnPool(), lanes.bytesEncodedOnTask());
      }
    }
  }

  private void writeSorted(ShuffleDependency<K, V, C> dep, Iterator<Product2<K, V>> records) throws IOException {
    if (dep.mapSideCombine()) {
      sorter = SparkShim.sorter(context, dep.aggregator(), Scala.some(dep.partitioner()), Scala.none(), dep.serializer());
    } else {
      sorter = SparkShim.<K, V, V>sorter(context, Scala.none(), Scala.some(dep.partitioner()), Scala.none(),
          dep.serializer());
    }
    sorter.insertAll(records);
    output = new StoreMapOutputWriter(runtime.node().store().newOutput(handle.shuffleId(), mapId,
        dep.partitioner().numPartitions(), begun));
    long t0 = System.nanoTime();
    sorter.writePartitionedMapOutput(handle.shuffleId(), mapId, output, metrics);
    output.commitAllPartitions(sorter.getChecksums());
    metrics.incWriteTime(System.nanoTime() - t0);
    MapOutput committed = output.committed();
    partitionLengths = committed.partitionLengths();
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
      }
      if (direct != null) {
        direct.abort(); // no-op once committed
      }
      if (!success) {
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
