package dev.slipstream.spark.gpu;

import dev.slipstream.spark.MapBlock;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.shuffle.BatchLayout;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import dev.slipstream.gpu.shuffle.StagedBlocks;
import dev.slipstream.core.shuffle.BlockFetchException;
import dev.slipstream.core.shuffle.BlockFetcher;
import dev.slipstream.core.shuffle.FetchedBlock;
import dev.slipstream.core.shuffle.BlockId;
import dev.slipstream.core.shuffle.FetchMetrics;
import dev.slipstream.spark.rpc.PeerInfo;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;

/**
 * The reduce side of a GPU shuffle's staging path ({@link StagedBlocks}): the blocks of holders that
 * this executor has no direct device path to are fetched by the host path's {@link BlockFetcher}
 * (pull-driven writes into this executor's host landing region, within
 * {@code spark.slipstream.reader.maxBytesInFlight}), and each is then copied into a device buffer of
 * its own, returned as a device batch that owns it.
 *
 * <p>Threading: the task thread. Ownership: {@link #close} releases the fetcher's landing space;
 * the batches handed out own their device memory.
 */
final class StagedFetch implements AutoCloseable {
  /** A failed fetch of {@code block} (the first block when a whole request failed). */
  static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;
    final transient MapBlock block;

    Failure(MapBlock block, String message, Throwable cause) {
      super(message, cause);
      this.block = block;
    }
  }

  /** The blocks to read from one holder. */
  record From(PeerInfo peer, List<MapBlock> blocks) {}

  private final BlockFetcher fetcher;
  private final Map<BlockId, MapBlock> blocks = new HashMap<>();
  private long bytes;
  private int landed;

  StagedFetch(ExecutorGpu runtime, int shuffleId, List<From> holders, ShuffleReadMetricsReporter metrics) {
    List<BlockFetcher.HolderPlan> plan = new ArrayList<>();
    for (From h : holders) {
      List<BlockFetcher.RemoteBlock> rbs = new ArrayList<>(h.blocks().size());
      for (MapBlock b : h.blocks()) {
        BlockId id = new BlockId(shuffleId, b.id().mapId(), b.id().reduceId());
        blocks.put(id, b);
        rbs.add(new BlockFetcher.RemoteBlock(id, StagedBlocks.servedLength(b.size())));
      }
      plan.add(new BlockFetcher.HolderPlan(h.peer().executorId(), h.peer().endpoint(), rbs));
    }
    this.fetcher = runtime.executor().node().newFetcher(shuffleId, plan, new FetchMetrics() {
      @Override
      public void remoteBlockFetched(long bytes) {
        // counted as device blocks in drain(), without the trailers
      }

      @Override
      public void localBlockRead(long bytes) {}

      @Override
      public void fetchWaitNanos(long nanos) {
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(nanos));
      }
    });
  }

  /** Sends the first requests, so holders write while the task pushes over nvlink meanwhile. */
  void start() throws Failure {
    try {
      fetcher.start();
    } catch (BlockFetcher.FetchFailure e) {
      throw failure(e.getCause());
    }
  }

  /**
   * Takes every block as it lands and copies it into device memory of {@code gpu}, checking its
   * trailer against {@code widths}; adds the batches to {@code out}. A failed fetch, a short stream
   * or a damaged trailer is a {@link Failure} (the holder's output); a failure of this GPU (no device
   * memory left, a driver error) is thrown as it is, failing the task rather than the map output.
   */
  void drain(GpuExecutor gpu, int[] widths, ShuffleReadMetricsReporter metrics, List<DeviceBatch> out)
      throws Failure {
    while (fetcher.hasNext()) {
      FetchedBlock b;
      try {
        b = fetcher.next();
      } catch (BlockFetcher.FetchFailure e) {
        throw failure(e.getCause());
      }
      MapBlock mb = blocks.get(b.id());
      DeviceBuffer buf = null;
      try (InputStream in = b.stream()) {
        // A block that landed whole goes to the device straight from the landing region; a streamed
        // one (larger than a request, or than its map status said) through the stream.
        java.nio.ByteBuffer view = b.landedView();
        long served = b.exactSize();
        buf = gpu.context().allocate(Math.max(16, served - StagedBlocks.TRAILER));
        String what = "GPU block " + b.id() + " from executor " + b.holderId() + " (staging path)";
        DeviceBuffer d = buf;
        long n = view != null ? StagedBlocks.land(view, widths, d::write, what)
            : StagedBlocks.land(in, served, widths, d::write, what);
        BatchLayout layout = BatchLayout.packed(n, widths);
        out.add(DeviceBatch.owning(gpu.context().device(), buf.address(), layout, buf));
        buf = null;
        bytes += layout.bufferBytes();
        landed++;
        metrics.incRemoteBlocksFetched(1);
        metrics.incRemoteBytesRead(layout.bufferBytes());
        metrics.incRecordsRead(n);
      } catch (IOException | RuntimeException e) {
        // The rest of a block longer than its map status said streams in later: its fetch may fail.
        if (e instanceof BlockFetchException f) {
          throw failure(f);
        }
        if (e instanceof BlockFetcher.FetchFailure f) {
          throw failure(f.getCause());
        }
        if (e instanceof dev.slipstream.gpu.GpuException g) {
          throw g; // this GPU's trouble (its memory, its driver), not the holder's: the task fails with it
        }
        throw new Failure(mb, e.getMessage(), e);
      } finally {
        if (buf != null) {
          buf.close();
        }
      }
    }
  }

  private Failure failure(BlockFetchException e) {
    MapBlock b = blocks.get(e.block());
    if (b == null) {
      b = blocks.values().iterator().next();
    }
    return new Failure(b, "staged fetch from executor " + e.holderId() + ": " + e.getMessage(), e);
  }

  /** Blocks copied to the device so far, their packed bytes, and the requests sent. */
  int landed() {
    return landed;
  }

  long bytes() {
    return bytes;
  }

  int requests() {
    return fetcher.requestsSent();
  }

  @Override
  public void close() {
    fetcher.close();
  }
}
