package dev.slipstream.spark;

import dev.slipstream.core.shuffle.MapOutputStore;
import dev.slipstream.core.shuffle.MapOutputWriter;
import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Map;
import java.util.Optional;
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
import org.apache.spark.shuffle.api.SingleSpillShuffleMapOutputWriter;
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
 * <p>Shuffle bytes written: Spark's sorter counts its last sorted run as written when nothing was
 * spilled before it (one run, already the map output's bytes in partition order), and counts
 * nothing for runs spilled under memory pressure; merging counts what the merge writes. The one
 * run goes through {@link StoreComponents#createSingleFileMapOutputWriter}, which copies it into the
 * store without counting it again, as Spark's own single-spill writer moves its file; only several
 * runs are merged through the map-output writer, and counted there. So the bytes written are the
 * bytes the map output holds, as under Spark's sort shuffle.
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
          new SerializedShuffleHandle<>(handle.shuffleId(), dep), mapId, context, conf, metrics,
          new StoreComponents(store, metrics, store.removalMark()));
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

  /**
   * Spark's map-output writer API over the store, as Spark's shuffle plugin API defines it.
   * Threading: the task thread.
   */
  private static final class StoreComponents implements ShuffleExecutorComponents {
    private final MapOutputStore store;
    private final ShuffleWriteMetricsReporter metrics;
    /** The store's removal mark when the task began: see {@link MapOutputStore#newOutput(int, long, int, long)}. */
    private final long begun;

    StoreComponents(MapOutputStore store, ShuffleWriteMetricsReporter metrics, long begun) {
      this.store = store;
      this.metrics = metrics;
      this.begun = begun;
    }

    @Override
    public void initializeExecutor(String appId, String execId, Map<String, String> extraConfigs) {}

    @Override
    public ShuffleMapOutputWriter createMapOutputWriter(int shuffleId, long mapTaskId, int numPartitions) {
      return new StoreMapOutputWriter(store.newOutput(shuffleId, mapTaskId, numPartitions, begun));
    }

    /**
     * The sorter's one sorted run, a local file already in the map output's layout (partitions in
     * order, lengths given), copied into the store as it is. Its bytes were counted as written when
     * the sorter wrote the file (see the class comment), so they are not counted here; the copy's
     * time is write time, as a merge's is.
     */
    @Override
    public Optional<SingleSpillShuffleMapOutputWriter> createSingleFileMapOutputWriter(int shuffleId, long mapId) {
      return Optional.of((file, partitionLengths, checksums) -> {
        long t0 = System.nanoTime();
        MapOutputWriter out = store.newOutput(shuffleId, mapId, partitionLengths.length, begun);
        try (InputStream in = new BufferedInputStream(new FileInputStream(file), 64 * 1024)) {
          byte[] buf = new byte[64 * 1024];
          for (int p = 0; p < partitionLengths.length; p++) {
            long left = partitionLengths[p];
            if (left == 0) {
              continue;
            }
            try (OutputStream o = out.openPartition(p)) {
              while (left > 0) {
                int n = in.read(buf, 0, (int) Math.min(buf.length, left));
                if (n < 0) {
                  throw new EOFException("sorted run " + file + " of map " + mapId + " ended " + left
                      + " bytes short of partition " + p + "'s " + partitionLengths[p] + " bytes");
                }
                o.write(buf, 0, n);
                left -= n;
              }
            }
          }
          out.commit();
        } catch (IOException | RuntimeException | Error e) {
          out.abort();
          throw e;
        }
        metrics.incWriteTime(System.nanoTime() - t0);
      });
    }
  }
}
