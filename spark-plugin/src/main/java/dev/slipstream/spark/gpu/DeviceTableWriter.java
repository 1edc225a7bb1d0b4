package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.DeviceCopyBatch;
import dev.slipstream.gpu.shuffle.OutputSpace;
import dev.slipstream.spark.shim.SparkShim;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Map side of a device-table shuffle ({@link DeviceTableDependency}): the task's tables, already
 * split by reduce partition on the GPU by the engine, are copied into one block of this executor's
 * device map-output store, each partition's tables as one {@link DeviceTableBlock}; the
 * {@link MapStatus} carries each block's length. A map task without rows stores nothing.
 *
 * <p>Threading: the task thread. Ownership: closes every table it was given, also when it fails.
 */
public final class DeviceTableWriter<K, V, C> extends DeviceStoreWriter<K, V> {
  private final GpuShuffleHandle<K, V, C> handle;
  private final DeviceTableCodec codec;
  private final ShuffleWriteMetricsReporter metrics;

  public DeviceTableWriter(GpuShuffleHandle<K, V, C> handle, long mapId, ShuffleWriteMetricsReporter metrics,
                           ExecutorGpu runtime) {
    super(handle.shuffleId(), mapId, runtime);
    this.handle = handle;
    this.codec = handle.deviceTables().orElseThrow();
    this.metrics = metrics;
  }

  @Override
  public void write(Iterator<Product2<K, V>> records) {
    GpuExecutor gpu = runtime.require();
    int n = handle.dependency().partitioner().numPartitions();
    List<List<DeviceTableCodec.DeviceTable>> parts = new ArrayList<>(n);
    for (int p = 0; p < n; p++) {
      parts.add(new ArrayList<>(1));
    }
    try {
      long rows = 0;
      while (records.hasNext()) {
        Product2<K, V> r = records.next();
        int p = partitionOf(r._1(), n);
        DeviceTableCodec.DeviceTable t = codec.table(r._2());
        parts.get(p).add(t);
        rows += t.rows();
      }
      long t0 = System.nanoTime();
      DeviceTableBlock.Layout[] layouts = new DeviceTableBlock.Layout[n];
      long[] offsets = new long[n + 1];
      long[] words = new long[n];
      partitionLengths = new long[n];
      for (int p = 0; p < n; p++) {
        long len = 0;
        if (!parts.get(p).isEmpty()) {
          layouts[p] = DeviceTableBlock.layout(parts.get(p));
          len = layouts[p].length();
        }
        partitionLengths[p] = len;
        words[p] = len / 8;
        offsets[p + 1] = offsets[p] + len;
      }
      long total = offsets[n];
      if (total > 0) {
        store(gpu, parts, layouts, offsets, words);
        gpu.tableBytesWritten(total);
      }
      metrics.incBytesWritten(total);
      metrics.incRecordsWritten(rows);
      metrics.incWriteTime(System.nanoTime() - t0);
      status = SparkShim.mapStatus(SparkEnv.get().blockManager().shuffleServerId(), partitionLengths, mapId);
    } finally {
      for (List<DeviceTableCodec.DeviceTable> ts : parts) {
        ts.forEach(DeviceTableCodec.DeviceTable::close);
      }
    }
  }

  private int partitionOf(Object key, int n) {
    if (!(key instanceof Integer p) || p < 0 || p >= n) {
      throw new IllegalArgumentException("device-table shuffle " + handle.shuffleId() + ": record key " + key
          + (key == null ? "" : " (" + key.getClass().getName() + ")") + ", expected a partition in [0, " + n + ")");
    }
    return p;
  }

  private void store(GpuExecutor gpu, List<List<DeviceTableCodec.DeviceTable>> parts,
                     DeviceTableBlock.Layout[] layouts, long[] offsets, long[] words) {
    // While other map tasks' blocks fill the budget, wait for them (committed outputs can move) as a
    // fetch would wait for its holder.
    OutputSpace.Block block = gpu.store().allocate(offsets[offsets.length - 1],
        System.nanoTime() + gpu.fetchTimeoutMs() * 1_000_000L);
    try {
      // Every prefix and table copy of the map task on one stream, waited for once.
      try (DeviceCopyBatch copies = gpu.copies().acquire()) {
        for (int p = 0; p < layouts.length; p++) {
          DeviceTableBlock.Layout l = layouts[p];
          if (l == null) {
            continue;
          }
          long at = block.address() + offsets[p];
          copies.toDevice(at, l.prefix());
          List<DeviceTableCodec.DeviceTable> ts = parts.get(p);
          for (int i = 0; i < ts.size(); i++) {
            DeviceTableCodec.DeviceTable t = ts.get(i);
            copies.withinDevice(at + l.dataOffsets()[i], t.address(), t.bytes());
          }
        }
        copies.finish();
      }
      gpu.store().commit(handle.shuffleId(), mapId, block, new int[0], offsets, words, begun);
    } catch (RuntimeException | Error e) {
      block.close();
      throw e;
    }
  }
}
