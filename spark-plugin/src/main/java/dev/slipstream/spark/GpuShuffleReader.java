package dev.slipstream.spark;

import dev.slipstream.core.gpu.DeviceBuffer;
import dev.slipstream.core.gpu.shuffle.BatchLayout;
import dev.slipstream.core.gpu.shuffle.DeviceBatch;
import dev.slipstream.core.gpu.shuffle.DeviceLanding;
import dev.slipstream.core.gpu.shuffle.DeviceMapOutputStore;
import dev.slipstream.core.gpu.shuffle.GpuPath;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.gpu.GpuExecutor;
import dev.slipstream.spark.rpc.PeerInfo;
import dev.slipstream.spark.rpc.RpcMessages;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import scala.Product2;
import scala.Tuple2;

/**
 * Reduce side of a GPU shuffle: for partitions {@code [startPartition, endPartition)} of map outputs
 * {@code [startMapIndex, endMapIndex)}, local blocks are copied on the device out of this
 * executor's device map-output store; for each holder it reserves device landing space, sends the
 * device write request (through the driver), waits for the signal with the fetch deadline, and
 * copies each landed block out of the landing region. Returns one device batch per block
 * (key {@code 0}); they are closed when the task completes.
 *
 * <p>A holder that is not in the peer table, has no GPU endpoint, refuses, or misses the deadline
 * becomes a {@link FetchFailedException}. Threading: one task thread.
 */
final class GpuShuffleReader<K, C> implements ShuffleReader<K, C> {
  private final GpuShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final ExecutorRuntime runtime;

  GpuShuffleReader(GpuShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex, int startPartition,
                   int endPartition, TaskContext context, ShuffleReadMetricsReporter metrics, ExecutorRuntime runtime) {
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
    GpuExecutor gpu = runtime.requireGpu();
    int shuffleId = handle.shuffleId();
    int[] widths = handle.partitioner().widths();
    List<DeviceBatch> out = new ArrayList<>();
    context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> out.forEach(DeviceBatch::close));
    List<MapBlock> local = new ArrayList<>();
    Map<String, List<MapBlock>> remote = new LinkedHashMap<>();
    for (MapBlock blk : MapBlock.nonEmpty(shuffleId, startMapIndex, endMapIndex, startPartition, endPartition,
        "GPU shuffles read single shuffle blocks only")) {
      if (blk.location().executorId().equals(runtime.executorId())) {
        local.add(blk);
      } else {
        remote.computeIfAbsent(blk.location().executorId(), k -> new ArrayList<>()).add(blk);
      }
    }
    for (MapBlock b : local) {
      try (DeviceMapOutputStore.Pinned p = gpu.store().pin(shuffleId, b.id().mapId())) {
        out.add(copy(gpu, p.block().address() + p.offset(b.id().reduceId()), p.rows(b.id().reduceId()), widths));
        metrics.incLocalBlocksFetched(1);
        metrics.incLocalBytesRead(p.bytes(b.id().reduceId()));
        metrics.incRecordsRead(p.rows(b.id().reduceId()));
      } catch (IllegalStateException e) {
        throw Scala.sneaky(fetchFailed(b, "local device map output: " + e.getMessage(), e));
      }
    }
    for (Map.Entry<String, List<MapBlock>> e : remote.entrySet()) {
      fetchFrom(gpu, e.getKey(), e.getValue(), widths, out);
    }
    List<Product2<K, C>> records = new ArrayList<>(out.size());
    for (DeviceBatch b : out) {
      records.add((Product2<K, C>) (Product2<?, ?>) new Tuple2<>(0, b));
    }
    return Scala.toScala(records.iterator());
  }

  private void fetchFrom(GpuExecutor gpu, String holder, List<MapBlock> blocks, int[] widths, List<DeviceBatch> out) {
    Optional<PeerInfo> peer = runtime.peer(holder);
    if (peer.isEmpty()) {
      throw Scala.sneaky(fetchFailed(blocks.get(0), "executor " + holder
          + " is not in Slipstream's peer table (lost or never registered)", null));
    }
    if (peer.get().gpu().isEmpty()) {
      Optional<PeerInfo> fresh = runtime.peerFromDriver(holder);
      if (fresh.isPresent()) {
        peer = fresh;
      }
    }
    if (peer.get().gpu().isEmpty()) {
      throw Scala.sneaky(fetchFailed(blocks.get(0), "executor " + holder + " registered no GPU endpoint", null));
    }
    GpuPath path = GpuPath.between(gpu.endpoint(), peer.get().gpu().get());
    if (path != GpuPath.NVLINK) {
      throw Scala.sneaky(fetchFailed(blocks.get(0), "executor " + holder + " is reached by the " + path
          + " path (host " + peer.get().gpu().get().hostId() + ", here " + gpu.endpoint().hostId()
          + "); GPU shuffles are served over nvlink (one machine) only so far", null));
    }
    DeviceLanding landing = gpu.landing();
    long budget = landing.capacity() / 2;
    for (MapBlock b : blocks) {
      if (b.size() > budget) {
        throw new IllegalStateException("GPU shuffle " + handle.shuffleId() + ": block " + b.id() + " of " + b.size()
            + " bytes does not fit half the device landing region (" + landing.capacity()
            + " bytes, spark.slipstream.gpu.landing.bytes); use more partitions or a larger landing region");
      }
    }
    int i = 0;
    while (i < blocks.size()) {
      List<MapBlock> chunk = new ArrayList<>();
      List<DeviceLanding.Want> wants = new ArrayList<>();
      long bytes = 0;
      while (i < blocks.size() && (chunk.isEmpty() || bytes + blocks.get(i).size() <= budget)) {
        MapBlock b = blocks.get(i++);
        chunk.add(b);
        wants.add(new DeviceLanding.Want(b.id().mapId(), b.id().reduceId(), b.size()));
        bytes += b.size();
      }
      long t0 = System.nanoTime();
      long deadline = t0 + runtime.node().config().fetchTimeout().toNanos();
      DeviceLanding.Fetch f;
      try {
        f = landing.prepare(handle.shuffleId(), widths, wants, deadline); // waits for other tasks' space
      } catch (TransportException e) {
        throw new IllegalStateException("GPU shuffle " + handle.shuffleId() + ": device write request to executor "
            + holder + ": " + e.getMessage(), e);
      }
      boolean landed = false;
      try {
        RpcMessages.DeviceWriteResult r = runtime.sendDeviceWrite(holder, f.request().encode());
        if (!r.ok()) {
          throw Scala.sneaky(fetchFailed(chunk.get(0), "executor " + holder + " refused device write request "
              + f.request().requestId() + ": " + r.reason(), null));
        }
        List<DeviceBatch> batches = f.await(deadline);
        landed = true;
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
        for (DeviceBatch b : batches) {
          out.add(copy(gpu, b.address(), b.rows(), widths));
          metrics.incRemoteBlocksFetched(1);
          metrics.incRemoteBytesRead(b.layout().bufferBytes());
          metrics.incRecordsRead(b.rows());
        }
      } catch (TransportException | RuntimeException e) {
        // A FetchFailedException thrown above is checked (sneaky-thrown) and passes through here.
        throw Scala.sneaky(fetchFailed(chunk.get(0), "device fetch from executor " + holder + ": " + e.getMessage(), e));
      } finally {
        if (landed) {
          f.close();
        } else {
          f.quarantine(runtime.node().config().fetchTimeout().toMillis()); // the holder may still write
        }
      }
    }
  }

  /** A device copy of a packed block, owned by the returned batch. */
  private static DeviceBatch copy(GpuExecutor gpu, long src, long rows, int[] widths) {
    BatchLayout l = BatchLayout.packed(rows, widths);
    DeviceBuffer buf = gpu.context().allocate(Math.max(16, l.bufferBytes()));
    try {
      buf.copyFromDevice(0, src, l.bufferBytes());
      return DeviceBatch.owning(gpu.context().device(), buf.address(), l, buf);
    } catch (RuntimeException e) {
      buf.close();
      throw e;
    }
  }

  private FetchFailedException fetchFailed(MapBlock b, String message, Throwable cause) {
    return new FetchFailedException(b.location(), handle.shuffleId(), b.id().mapId(), b.mapIndex(), b.id().reduceId(),
        message, cause);
  }
}
