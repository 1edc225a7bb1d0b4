package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.DeviceCopyBatch;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import java.util.ArrayList;
import dev.slipstream.spark.adapter.Scala;
import java.util.Collections;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import scala.Product2;
import scala.Tuple2;

/**
 * Reduce side of a device-table shuffle ({@link DeviceTableDependency}): the blocks come as on
 * every GPU shuffle ({@link GpuShuffleReader}: local views into the device map-output store,
 * remote blocks pushed into this executor's landing region or staged), and the blocks' tables
 * ({@link DeviceTableBlock}) are handed to the engine's codec in groups as the caller iterates
 * (consecutive tables up to {@link DeviceTableCodec#groupBytes} bytes once assembled), each group becoming one
 * record {@code (0, value)}. Records read counts the tables' rows.
 *
 * <p>Threading: one task thread. Ownership: as {@link GpuShuffleReader}'s: the landed memory is
 * released when the task completes; the codec's values are the caller's.
 */
public final class DeviceTableReader<K, C> implements ShuffleReader<K, C> {
  /** Pinned staging for block prefixes: the first 512 bytes of each of up to 8,192 blocks per wait. */
  private static final int PREFIX_STAGING = 4 << 20;

  private final GpuShuffleReader<K, DeviceBatch> blocks;
  private final DeviceTableCodec codec;
  private final ShuffleReadMetricsReporter metrics;
  private final ExecutorGpu runtime;

  @SuppressWarnings("unchecked")
  public DeviceTableReader(GpuShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex, int startPartition,
                           int endPartition, TaskContext context, ShuffleReadMetricsReporter metrics,
                           ExecutorGpu runtime) {
    this.codec = handle.deviceTables().orElseThrow();
    this.metrics = metrics;
    this.runtime = runtime;
    this.blocks = new GpuShuffleReader<>((GpuShuffleHandle<K, ?, DeviceBatch>) (GpuShuffleHandle<K, ?, ?>) handle,
        startMapIndex, endMapIndex, startPartition, endPartition, context, new BlocksOnly(metrics), runtime);
  }

  @Override
  public scala.collection.Iterator<Product2<K, C>> read() {
    scala.collection.Iterator<Product2<K, DeviceBatch>> in = blocks.read();
    GpuExecutor gpu = runtime.require();
    DeviceTableBlock.DeviceBytes device = gpu.context()::copyToHost;
    // Every block has landed: their prefixes come back in one batch of copies, waited for once.
    List<DeviceBatch> landed = new ArrayList<>();
    while (in.hasNext()) {
      landed.add(in.next()._2());
    }
    List<byte[]> firsts = new ArrayList<>(landed.size());
    try (DeviceCopyBatch prefixes = gpu.copies().acquire()) {
      prefixes.ensureCapacity(PREFIX_STAGING);
      int from = 0;
      while (from < landed.size()) {
        // As many blocks' first bytes as the staging holds, then one wait.
        int to = from;
        int[] at = new int[landed.size() - from];
        while (to < landed.size()) {
          DeviceBatch b = landed.get(to);
          int len = DeviceTableBlock.firstRead(b.layout().bufferBytes());
          if (!prefixes.fits(len)) {
            break;
          }
          at[to - from] = prefixes.toHost(b.address(), len);
          to++;
        }
        prefixes.finish();
        for (int i = from; i < to; i++) {
          byte[] f = new byte[DeviceTableBlock.firstRead(landed.get(i).layout().bufferBytes())];
          prefixes.read(at[i - from], f, 0, f.length);
          firsts.add(f);
        }
        prefixes.reset();
        from = to;
      }
    }
    java.util.Iterator<DeviceTableCodec.LandedTable> all = new java.util.Iterator<>() {
      private java.util.Iterator<DeviceTableCodec.LandedTable> tables = Collections.emptyIterator();
      private int next;

      @Override
      public boolean hasNext() {
        while (!tables.hasNext() && next < landed.size()) {
          DeviceBatch b = landed.get(next);
          tables = DeviceTableBlock.parse(b.address(), b.layout().bufferBytes(), firsts.get(next), device).iterator();
          next++;
        }
        return tables.hasNext();
      }

      @Override
      public DeviceTableCodec.LandedTable next() {
        if (!hasNext()) {
          throw new NoSuchElementException("no more device tables");
        }
        return tables.next();
      }
    };
    TableGroups groups = new TableGroups(all, codec.groupBytes(), DeviceTableCodec.MAX_GROUP_ROWS,
        codec::assembledBytes);
    return Scala.toScala(new java.util.Iterator<Product2<K, C>>() {
      @Override
      public boolean hasNext() {
        return groups.hasNext();
      }

      @Override
      @SuppressWarnings("unchecked")
      public Product2<K, C> next() {
        List<DeviceTableCodec.LandedTable> group = groups.next();
        C value = (C) codec.assemble(group);
        metrics.incRecordsRead(group.stream().mapToLong(DeviceTableCodec.LandedTable::rows).sum());
        return (Product2<K, C>) (Product2<?, ?>) new Tuple2<>(0, value);
      }
    });
  }

  /** The task's read metrics without the record count, which the blocks' 8-byte words would be. */
  private static final class BlocksOnly implements ShuffleReadMetricsReporter {
    private final ShuffleReadMetricsReporter m;

    BlocksOnly(ShuffleReadMetricsReporter m) {
      this.m = m;
    }

    @Override public void incRemoteBlocksFetched(long v) { m.incRemoteBlocksFetched(v); }
    @Override public void incLocalBlocksFetched(long v) { m.incLocalBlocksFetched(v); }
    @Override public void incRemoteBytesRead(long v) { m.incRemoteBytesRead(v); }
    @Override public void incRemoteBytesReadToDisk(long v) { m.incRemoteBytesReadToDisk(v); }
    @Override public void incLocalBytesRead(long v) { m.incLocalBytesRead(v); }
    @Override public void incFetchWaitTime(long v) { m.incFetchWaitTime(v); }
    @Override public void incRecordsRead(long v) {}
    @Override public void incCorruptMergedBlockChunks(long v) { m.incCorruptMergedBlockChunks(v); }
    @Override public void incMergedFetchFallbackCount(long v) { m.incMergedFetchFallbackCount(v); }
    @Override public void incRemoteMergedBlocksFetched(long v) { m.incRemoteMergedBlocksFetched(v); }
    @Override public void incLocalMergedBlocksFetched(long v) { m.incLocalMergedBlocksFetched(v); }
    @Override public void incRemoteMergedChunksFetched(long v) { m.incRemoteMergedChunksFetched(v); }
    @Override public void incLocalMergedChunksFetched(long v) { m.incLocalMergedChunksFetched(v); }
    @Override public void incRemoteMergedBytesRead(long v) { m.incRemoteMergedBytesRead(v); }
    @Override public void incLocalMergedBytesRead(long v) { m.incLocalMergedBytesRead(v); }
    @Override public void incRemoteReqsDuration(long v) { m.incRemoteReqsDuration(v); }
    @Override public void incRemoteMergedReqsDuration(long v) { m.incRemoteMergedReqsDuration(v); }
  }
}
