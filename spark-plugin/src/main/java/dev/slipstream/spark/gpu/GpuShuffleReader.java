package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.shuffle.BatchLayout;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import dev.slipstream.gpu.shuffle.DeviceMapOutputStore;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.gpu.shuffle.GpuPath;
import dev.slipstream.spark.MapBlock;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.rpc.PeerInfo;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import scala.Product2;
import scala.Tuple2;

/**
 * Reduce side of a GPU shuffle: for partitions {@code [startPartition, endPartition)} of map outputs
 * {@code [startMapIndex, endMapIndex)}, local blocks are handed out as views into this executor's
 * device map-output store (pinned until the task completes), or as copies when the store's budget
 * is crowded or the output was spilled ({@code readLocal}); remote blocks of holders on this
 * machine, or reached over a connected NIC link, come over a push path ({@link PushFetch}: pushed
 * by the holder's GPU into this executor's device landing region, through CUDA IPC or as GPUNetIO
 * RDMA writes), those of other holders (another machine without a NIC link, or
 * {@code spark.slipstream.gpu.path=staged}) over the staging path ({@link StagedFetch}): started first,
 * drained after the pushed requests. Returns one device batch per block (key {@code 0}), valid until
 * the task completes, when the pins and landing ranges are released (also when the task fails). What
 * the read moved and the span of its remote data path go to {@link GpuExecutor#recordRead}
 * ({@link GpuReadStats}) until the task completes.
 *
 * <p>A holder that is not in the peer table, has no GPU endpoint, refuses, or misses the deadline
 * becomes a {@link FetchFailedException}. Threading: one task thread. Ownership: the task's
 * completion listeners close the returned batches and release the pins, the landed ranges and the
 * staged fetch's host landing space; the caller closes nothing.
 */
public final class GpuShuffleReader<K, C> implements ShuffleReader<K, C> {
  private final GpuShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final ExecutorGpu runtime;
  private long localBytes;
  /** Local map outputs, pinned while their blocks are handed out as views. */
  private final Map<Long, DeviceMapOutputStore.Pinned> pins = new LinkedHashMap<>();

  public GpuShuffleReader(GpuShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex, int startPartition,
                   int endPartition, TaskContext context, ShuffleReadMetricsReporter metrics, ExecutorGpu runtime) {
    this.handle = handle;
    this.startMapIndex = startMapIndex;
    this.endMapIndex = endMapIndex;
    this.startPartition = startPartition;
    this.endPartition = endPartition;
    this.context = context;
    this.metrics = metrics;
    this.runtime = runtime;
  }

  @Override
  @SuppressWarnings("unchecked")
  public scala.collection.Iterator<Product2<K, C>> read() {
    GpuExecutor gpu = runtime.require();
    int shuffleId = handle.shuffleId();
    int[] widths = handle.widths();
    List<DeviceBatch> out = new ArrayList<>();
    PushFetch pushed = new PushFetch(runtime, gpu, shuffleId, context, metrics);
    // Views go with their ranges and pins when the task ends (failed or not): a held range has
    // landed completely (its signal counted every block), so no holder writes into it any more.
    context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> {
      out.forEach(DeviceBatch::close);
      pushed.close();
      pins.values().forEach(DeviceMapOutputStore.Pinned::close);
      copies.forEach(dev.slipstream.gpu.DeviceBuffer::close);
      // The reporter Spark hands readers is a temporary one: folded into the task's metrics (it
      // sets from the temporaries, so also the records a device-table read counts after this read).
      ctx.taskMetrics().mergeShuffleReadMetrics();
    });
    List<MapBlock> local = new ArrayList<>();
    Map<String, List<MapBlock>> remote = new LinkedHashMap<>();
    for (MapBlock blk : MapBlock.nonEmpty(shuffleId, startMapIndex, endMapIndex, startPartition, endPartition,
        "GPU shuffles read single shuffle blocks only")) {
      if (blk.location().executorId().equals(runtime.executor().executorId())) {
        local.add(blk);
      } else {
        remote.computeIfAbsent(blk.location().executorId(), k -> new ArrayList<>()).add(blk);
      }
    }
    Map<Long, List<MapBlock>> byOutput = new LinkedHashMap<>();
    for (MapBlock b : local) {
      byOutput.computeIfAbsent(b.id().mapId(), m -> new ArrayList<>()).add(b);
    }
    for (Map.Entry<Long, List<MapBlock>> e : byOutput.entrySet()) {
      try {
        readLocal(gpu, shuffleId, e.getKey(), e.getValue(), widths, out);
      } catch (IllegalStateException | java.io.UncheckedIOException ex) {
        throw Scala.sneaky(e.getValue().get(0).fetchFailed("local device map output: " + ex.getMessage(), ex));
      }
    }
    List<PushFetch.Holder> holders = new ArrayList<>();
    List<StagedFetch.From> stagedFrom = new ArrayList<>();
    for (Map.Entry<String, List<MapBlock>> e : remote.entrySet()) {
      PeerInfo peer = peerWithGpu(e.getKey(), e.getValue().get(0));
      switch (route(gpu, e.getKey(), peer)) {
        case NVLINK -> holders.add(pushed.holder(e.getKey(), e.getValue()));
        case GPUNETIO -> holders.add(pushed.holder(e.getKey(), e.getValue(), true));
        default -> stagedFrom.add(new StagedFetch.From(peer, e.getValue()));
      }
    }
    StagedFetch staged = null;
    long firstSent = 0;
    if (!stagedFrom.isEmpty()) {
      // Its holders copy and write while this task's pushed requests land; drained after them.
      StagedFetch p = new StagedFetch(runtime, shuffleId, stagedFrom, metrics);
      context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> p.close());
      firstSent = System.nanoTime();
      try {
        p.start();
      } catch (StagedFetch.Failure f) {
        throw Scala.sneaky(f.block.fetchFailed(f.getMessage(), f));
      }
      staged = p;
    }
    pushed.fetch(holders, widths, out);
    long remoteBlocks = pushed.landed();
    long remoteBytes = pushed.bytes();
    int requests = pushed.requests();
    long lastLanded = pushed.lastLanded();
    if (firstSent == 0) {
      firstSent = pushed.firstSent();
    }
    if (staged != null) {
      try {
        staged.drain(gpu, widths, metrics, out);
      } catch (StagedFetch.Failure f) {
        throw Scala.sneaky(f.block.fetchFailed(f.getMessage(), f));
      }
      lastLanded = System.nanoTime();
      remoteBlocks += staged.landed();
      remoteBytes += staged.bytes();
      requests += staged.requests();
    }
    long task = context.taskAttemptId();
    gpu.recordRead(task, new GpuReadStats(local.size(), localBytes, remoteBlocks, remoteBytes, pushed.copied(),
        requests, pushed.peakInFlight(), firstSent, lastLanded, pushed.phases()));
    context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> gpu.forgetRead(task));
    List<Product2<K, C>> records = new ArrayList<>(out.size());
    for (DeviceBatch b : out) {
      records.add((Product2<K, C>) (Product2<?, ?>) new Tuple2<>(0, b));
    }
    return Scala.toScala(records.iterator());
  }

  /** Device memory of the task's own holding copies of local blocks, freed when the task completes. */
  private final List<dev.slipstream.gpu.DeviceBuffer> copies = new ArrayList<>();

  /**
   * The blocks of one local map output. While pinned outputs hold at most half the store's device
   * budget they are handed out as views into the store, the output pinned until the task completes;
   * beyond that, or when the output was spilled, the blocks are copied into device memory of the
   * task's own (one allocation per output, from the store's device memory or from host memory or
   * disk) and the output is not held: readers' pins cannot fill the budget that map tasks and
   * pushes need room in.
   */
  private void readLocal(GpuExecutor gpu, int shuffleId, long mapId, List<MapBlock> blocks, int[] widths,
      List<DeviceBatch> out) {
    DeviceMapOutputStore store = gpu.store();
    DeviceMapOutputStore.Pinned p = store.pinIfOnDevice(shuffleId, mapId);
    if (p != null && store.pinnedBytes() <= store.deviceBudget() / 2) {
      pins.put(mapId, p);
      for (MapBlock b : blocks) {
        int part = b.id().reduceId();
        out.add(DeviceBatch.view(gpu.context().device(), p.block().address() + p.offset(part),
            BatchLayout.packed(p.rows(part), widths)));
        counted(p.bytes(part), p.rows(part));
      }
      return;
    }
    try {
      long[] at = new long[blocks.size()];
      long[] len = new long[blocks.size()];
      long[] rows = new long[blocks.size()];
      DeviceMapOutputStore.PartitionCopy[] host = p == null ? new DeviceMapOutputStore.PartitionCopy[blocks.size()]
          : null;
      long total = 0;
      for (int i = 0; i < blocks.size(); i++) {
        int part = blocks.get(i).id().reduceId();
        if (p != null) {
          len[i] = p.bytes(part);
          rows[i] = p.rows(part);
        } else {
          host[i] = store.readPartition(shuffleId, mapId, part);
          if (!java.util.Arrays.equals(host[i].widths(), widths)) {
            throw new IllegalStateException("map attempt " + mapId + " has payload widths "
                + java.util.Arrays.toString(host[i].widths()) + ", the shuffle's are " + java.util.Arrays.toString(widths));
          }
          len[i] = host[i].bytes().length;
          rows[i] = host[i].rows();
        }
        at[i] = total;
        total += (len[i] + 255) & ~255L; // each block where the store would put it: 256-byte aligned
      }
      dev.slipstream.gpu.DeviceBuffer buf = gpu.context().allocate(Math.max(16, total));
      copies.add(buf);
      if (p != null) {
        try (dev.slipstream.gpu.DeviceCopyBatch c = gpu.copies().acquire()) {
          for (int i = 0; i < blocks.size(); i++) {
            c.withinDevice(buf.address() + at[i], p.block().address() + p.offset(blocks.get(i).id().reduceId()), len[i]);
          }
          c.finish();
        }
      } else {
        for (int i = 0; i < blocks.size(); i++) {
          buf.write(at[i], host[i].bytes());
        }
      }
      for (int i = 0; i < blocks.size(); i++) {
        out.add(DeviceBatch.view(gpu.context().device(), buf.address() + at[i], BatchLayout.packed(rows[i], widths)));
        counted(len[i], rows[i]);
      }
    } finally {
      if (p != null) {
        p.close();
      }
    }
  }

  private void counted(long bytes, long rows) {
    metrics.incLocalBlocksFetched(1);
    metrics.incLocalBytesRead(bytes);
    localBytes += bytes;
    metrics.incRecordsRead(rows);
  }

  /** The holder's peer entry with its GPU endpoint (asked of the driver once when the entry has none yet). */
  private PeerInfo peerWithGpu(String holder, MapBlock first) {
    Optional<PeerInfo> peer = runtime.executor().peer(holder);
    if (peer.isEmpty()) {
      throw Scala.sneaky(first.fetchFailed("executor " + holder
          + " is not in Slipstream's peer table (lost or never registered)", null));
    }
    if (peer.get().gpu().isEmpty()) {
      Optional<PeerInfo> fresh = runtime.executor().peerFromDriver(holder);
      if (fresh.isPresent()) {
        peer = fresh;
      }
    }
    if (peer.get().gpu().isEmpty()) {
      throw Scala.sneaky(first.fetchFailed("executor " + holder + " registered no GPU endpoint", null));
    }
    return peer.get();
  }

  /**
   * How the holder's blocks come: {@link GpuPath#NVLINK}, pushed by its GPU into this one's landing
   * region through CUDA IPC (one machine); {@link GpuPath#GPUNETIO}, pushed over the NIC link
   * between the two (other machines with NICs on both sides, or with
   * {@code spark.slipstream.gpu.path=gpunetio} any pair with NICs), once that link is connected;
   * otherwise {@link GpuPath#STAGED} (also every holder with {@code spark.slipstream.gpu.path=staged}).
   * A pair of one machine whose link is not connected (yet) is read over nvlink.
   */
  private GpuPath route(GpuExecutor gpu, String holder, PeerInfo peer) {
    if (runtime.conf().stagedOnly()) {
      return GpuPath.STAGED;
    }
    GpuEndpoint theirs = peer.gpu().get();
    GpuPath p = GpuPath.between(gpu.endpoint(), theirs, runtime.conf().gpunetio());
    if (p == GpuPath.GPUNETIO && !gpu.nicLinked(holder)) {
      return gpu.endpoint().hostId().equals(theirs.hostId()) ? GpuPath.NVLINK : GpuPath.STAGED;
    }
    return p;
  }
}
