package dev.slipstream.spark.gpu;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.shuffle.BatchLayout;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import dev.slipstream.gpu.shuffle.DeviceLanding;
import dev.slipstream.spark.MapBlock;
import dev.slipstream.spark.adapter.Scala;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;

/**
 * The reduce side of a GPU shuffle's push paths, for one task: the remote blocks of holders are
 * pushed by their GPUs into this executor's device landing region, through CUDA IPC (nvlink:
 * holders on this machine; the request names the landing region's IPC export) or over the NIC link
 * between the two executors (gpunetio: the request names the landing region's NIC registration,
 * {@link #holder(String, List, boolean)}). The task
 * reserves landing space per request (whole blocks; a holder's blocks spread over up to
 * {@code spark.slipstream.gpu.serve.inFlight} requests of at least
 * {@code spark.slipstream.gpu.request.minBytes}, each at most landing / (2 x inFlight); holders
 * interleaved), keeps up to {@code serve.inFlight} requests in flight (sent through the holder's
 * request ring or over the transport, {@link ExecutorGpu#send}), and waits for each one's signal
 * with the fetch deadline (a refusing or failed answer fails it earlier); {@link RequestPhases}
 * records where each request's time went. Landed blocks are handed out as views into the landed
 * ranges of the landing region (copies where the task would hold more than a quarter of the
 * region). A request that ends before its holder finished it (its deadline passed, the holder
 * refused, the task failed or was killed) has its range retained ({@link LandingRetention}): handed
 * out again only once the holder answered that request, was lost, or the fetch deadline plus
 * {@code spark.slipstream.gpu.landing.retainGrace} passed (docs/gpu.md, "Landing ranges belong to
 * one request").
 *
 * <p>A holder that refuses or misses the deadline becomes a {@link FetchFailedException}.
 * Threading: the task thread (a request's phases are added when its answer comes). Ownership: holds
 * the landed ranges behind the views it handed out until {@link #close} (when the task completes:
 * a landed range takes no more writes); the copies it handed out own their device memory.
 */
final class PushFetch implements AutoCloseable {
  /** How long after sending a request its signal is polled back to back before polls pause. */
  private static final long SPIN_NANOS = 5_000_000;
  private final ExecutorGpu runtime;
  private final GpuExecutor gpu;
  private final int shuffleId;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final RequestPhases phases = new RequestPhases();
  /** Holders whose requests name the landing region's NIC registration. */
  private final java.util.Set<String> nicHolders = new java.util.HashSet<>();
  /** Landed requests whose blocks are handed out as views into the landing region. */
  private final List<Held> held = new ArrayList<>();
  private long heldBytes;
  private long copiedBlocks;
  private long landedBlocks;
  private long landedBytes;
  private int requests;
  private int peakInFlight;
  private long firstSent;
  private long lastLanded;

  /** The remote blocks of one holder on the nvlink path, checked: each fits half the landing region. */
  record Holder(String executorId, List<MapBlock> blocks) {}

  /** One request: blocks of one holder. */
  record Chunk(String holder, List<MapBlock> blocks) {}

  /** A landed request and where its views stand in the task's output. */
  private record Held(DeviceLanding.Fetch fetch, int from, int to) {}

  /** A request sent and not yet landed: when its preparation began and when it was sent. */
  private record InFlight(Chunk chunk, DeviceLanding.Fetch fetch, CompletableFuture<WriteResult> answer,
                          long startNanos, long sentNanos) {}

  PushFetch(ExecutorGpu runtime, GpuExecutor gpu, int shuffleId, TaskContext context,
      ShuffleReadMetricsReporter metrics) {
    this.runtime = runtime;
    this.gpu = gpu;
    this.shuffleId = shuffleId;
    this.context = context;
    this.metrics = metrics;
  }

  /**
   * {@code blocks} of {@code holder} for the nvlink path; throws {@link IllegalStateException}
   * naming {@code spark.slipstream.gpu.landing.bytes} when one does not fit half the landing region.
   */
  Holder holder(String holder, List<MapBlock> blocks) {
    return holder(holder, blocks, false);
  }

  /** As {@link #holder(String, List)}; {@code overNic}: the holder writes over its NIC link to this executor. */
  Holder holder(String holder, List<MapBlock> blocks, boolean overNic) {
    if (overNic) {
      nicHolders.add(holder);
    }
    long budget = gpu.landing().capacity() / 2;
    for (MapBlock b : blocks) {
      if (b.size() > budget) {
        throw new IllegalStateException("GPU shuffle " + shuffleId + ": block " + b.id() + " of " + b.size()
            + " bytes does not fit half the device landing region (" + gpu.landing().capacity()
            + " bytes, spark.slipstream.gpu.landing.bytes); use more partitions or a larger landing region");
      }
    }
    return new Holder(holder, blocks);
  }

  /**
   * Splits each holder's blocks into requests, holders interleaved: of at most {@code maxBytes}, and
   * into up to {@code spread} requests of at least {@code minBytes} each (whole blocks; a larger
   * block goes alone), so a holder's requests push side by side.
   */
  static List<Chunk> chunks(List<Holder> holders, long maxBytes, long minBytes, int spread) {
    List<List<Chunk>> per = new ArrayList<>();
    for (Holder h : holders) {
      long all = h.blocks().stream().mapToLong(MapBlock::size).sum();
      long budget = Math.min(maxBytes, Math.max(minBytes, (all + spread - 1) / spread));
      List<Chunk> cs = new ArrayList<>();
      List<MapBlock> cur = new ArrayList<>();
      long bytes = 0;
      for (MapBlock b : h.blocks()) {
        if (!cur.isEmpty() && bytes + b.size() > budget) {
          cs.add(new Chunk(h.executorId(), cur));
          cur = new ArrayList<>();
          bytes = 0;
        }
        cur.add(b);
        bytes += b.size();
      }
      cs.add(new Chunk(h.executorId(), cur));
      per.add(cs);
    }
    List<Chunk> out = new ArrayList<>();
    for (int i = 0; out.size() < per.stream().mapToInt(List::size).sum(); i++) {
      for (List<Chunk> cs : per) {
        if (i < cs.size()) {
          out.add(cs.get(i));
        }
      }
    }
    return out;
  }

  /**
   * Fetches every remote block: up to {@code spark.slipstream.gpu.serve.inFlight} requests in flight
   * (holders interleaved, so different holders push at once), a new one sent while landing space is
   * free, else the oldest awaited first. A request that failed, or is still in flight when the task
   * fails, has its range retained until its holder answers ({@link #retain}); a landed one is kept
   * for its views ({@link #keep}). Before waiting for other tasks' landing space, the task copies its own
   * views out and releases their ranges, so tasks waiting for space hold none.
   */
  void fetch(List<Holder> holders, int[] widths, List<DeviceBatch> out) {
    int maxInFlight = runtime.conf().serveInFlight();
    Deque<Chunk> pending = new ArrayDeque<>(chunks(holders, gpu.landing().capacity() / (2L * maxInFlight),
        runtime.conf().requestMinBytes(), maxInFlight));
    Deque<InFlight> flying = new ArrayDeque<>();
    long timeoutMs = runtime.executor().node().config().fetchTimeout().toMillis();
    java.time.Duration answerWithin = java.time.Duration.ofMillis(timeoutMs).plus(runtime.conf().retainGrace());
    boolean done = false;
    try {
      while (!pending.isEmpty() || !flying.isEmpty()) {
        long start = System.nanoTime();
        List<Chunk> next = new ArrayList<>();
        List<DeviceLanding.Fetch> fs = List.of();
        if (!pending.isEmpty() && flying.size() < maxInFlight) {
          // Every request that may go now is laid out first (in zeroed ranges: no signal reset), then
          // they are sent back to back.
          for (Chunk c : pending) {
            if (next.size() == maxInFlight - flying.size()) {
              break;
            }
            next.add(c);
          }
          fs = prepareAll(next, widths);
          if (fs.isEmpty() && flying.isEmpty()) {
            copyOutHeld(widths, out); // free this task's own ranges before waiting for other tasks'
            fs = List.of(prepare(next.get(0), widths));
          }
        }
        if (!fs.isEmpty()) {
          int handed = 0; // fetches in `flying` (sent; the finally below retains them on a failure)
          try {
            for (DeviceLanding.Fetch f : fs) {
              Chunk c = pending.pollFirst();
              long now = System.nanoTime();
              if (firstSent == 0) {
                firstSent = now;
              }
              // The budget is the time left until this reader gives the request up (its deadline below).
              WriteRequest req = f.request().from(runtime.executor().node().identity(), timeoutMs);
              if (nicHolders.contains(c.holder())) {
                req = req.onLanding(gpu.endpoint().nic().orElseThrow().descriptor(gpu.endpoint().device()));
              }
              CompletableFuture<WriteResult> answer = runtime.send(c.holder(), req, answerWithin);
              flying.addLast(new InFlight(c, f, answer, start, now));
              handed++;
              f.begin(); // its signal is watched from now on
            }
          } catch (RuntimeException e) {
            fs.subList(handed, fs.size()).forEach(DeviceLanding.Fetch::close); // not sent: nothing can land there
            throw e;
          }
          peakInFlight = Math.max(peakInFlight, flying.size());
        } else {
          List<DeviceBatch> views = land(flying.peekFirst());
          keep(flying.pollFirst().fetch(), views, widths, out);
        }
      }
      done = true;
    } finally {
      if (!done) {
        flying.forEach(x -> retain(gpu.landing(), x, answerWithin)); // their holders may still write
      }
    }
  }

  /** Keeps a request's range out of reach until its holder answered it, was lost, or {@code answerWithin} passed. */
  private static void retain(DeviceLanding landing, InFlight x, java.time.Duration answerWithin) {
    LandingRetention.retain(landing, x.fetch(), x.chunk().holder(), x.sentNanos() + answerWithin.toNanos(),
        x.answer());
  }

  /** Landing space (zeroed) for the first of {@code chunks} that fit now; possibly none. */
  private List<DeviceLanding.Fetch> prepareAll(List<Chunk> chunks, int[] widths) {
    List<List<DeviceLanding.Want>> all = new ArrayList<>(chunks.size());
    for (Chunk c : chunks) {
      all.add(wants(c));
    }
    try {
      return gpu.landing().tryPrepareAll(shuffleId, widths, all);
    } catch (TransportException e) {
      throw new IllegalStateException("GPU shuffle " + shuffleId + ": device write request to executor "
          + chunks.get(0).holder() + ": " + e.getMessage(), e);
    }
  }

  /** Landing space for chunk {@code c}, waiting for other tasks to release some up to the fetch deadline. */
  private DeviceLanding.Fetch prepare(Chunk c, int[] widths) {
    try {
      long deadline = System.nanoTime() + runtime.executor().node().config().fetchTimeout().toNanos();
      return gpu.landing().prepare(shuffleId, widths, wants(c), deadline);
    } catch (TransportException e) {
      throw new IllegalStateException("GPU shuffle " + shuffleId + ": device write request to executor "
          + c.holder() + ": " + e.getMessage(), e);
    }
  }

  private static List<DeviceLanding.Want> wants(Chunk c) {
    List<DeviceLanding.Want> wants = new ArrayList<>(c.blocks().size());
    for (MapBlock b : c.blocks()) {
      wants.add(new DeviceLanding.Want(b.id().mapId(), b.id().reduceId(), b.size()));
    }
    return wants;
  }

  /**
   * Waits for the request's signal (fetch deadline from the send) and returns the landed blocks'
   * views. A request served by a holder's resident kernel ({@link ResidentRequests.RingAnswer}) is
   * waited on through its answer in the ring (host memory: the kernel answers once the bytes, the
   * table and the signal are visible), and its signal and table are then read once. Otherwise the
   * data path does not wait for the holder's answer (the signal alone says everything landed, and
   * it is watched with copies from the moment the request was sent); an answer that comes first
   * matters when it is a refusal or a failed send, which fail the fetch at once.
   */
  private List<DeviceBatch> land(InFlight x) {
    long deadline = x.sentNanos() + runtime.executor().node().config().fetchTimeout().toNanos();
    String holder = x.chunk().holder();
    long id = x.fetch().request().requestId();
    try {
      List<DeviceBatch> batches;
      long pause = 1;
      for (;;) {
        boolean ringWait = x.answer() instanceof ResidentRequests.RingAnswer ra && ra.fromRing()
            && !x.answer().isDone();
        batches = ringWait ? null : x.fetch().poll();
        if (batches != null) {
          break;
        }
        if (x.answer().isDone()) {
          WriteResult r;
          try {
            r = x.answer().getNow(null);
          } catch (java.util.concurrent.CompletionException | java.util.concurrent.CancellationException e) {
            Throwable c = e.getCause() != null ? e.getCause() : e;
            throw new TransportException(TransportError.UNAVAILABLE, String.valueOf(c.getMessage()), c);
          }
          if (!r.served()) {
            throw Scala.sneaky(x.chunk().blocks().get(0).fetchFailed("executor " + holder
                + " refused device write request " + id + ": " + r.reason(), null));
          }
          // Pushed: the signal is due.
        }
        if (context.isInterrupted()) {
          throw new org.apache.spark.TaskKilledException("killed while waiting for device write request " + id
              + " to executor " + holder);
        }
        if (System.nanoTime() - deadline > 0) {
          long sig = x.fetch().abandon();
          throw new TransportException(TransportError.TIMEOUT, "device write request " + id + ": "
              + (x.answer().isDone() ? "answered, but" : "no answer, and") + " the signal at " + (sig >>> 40) + " of "
              + x.fetch().expectedPieces() + " pieces by the fetch deadline");
        }
        // Each poll reads the signal once (a copy of microseconds) or the ring's answer (host
        // memory): the first few milliseconds are polled back to back, a push that takes longer is
        // looked at every 50 us.
        if (System.nanoTime() - x.sentNanos() > SPIN_NANOS) {
          java.util.concurrent.locks.LockSupport.parkNanos(pause * 1000);
          pause = Math.min(50, pause * 2);
        }
      }
      long landed = System.nanoTime();
      lastLanded = landed;
      // The holder's timeline comes with its answer, which may follow the data.
      x.answer().thenAccept(r -> phases.add(x.startNanos(), x.sentNanos(), r.timeline(), landed));
      metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(lastLanded - x.sentNanos()));
      for (DeviceBatch b : batches) {
        landedBlocks++;
        landedBytes += b.layout().bufferBytes();
        metrics.incRemoteBlocksFetched(1);
        metrics.incRemoteBytesRead(b.layout().bufferBytes());
        metrics.incRecordsRead(b.rows());
      }
      requests++;
      return batches;
    } catch (org.apache.spark.TaskKilledException e) {
      throw e; // the finally of fetch retains the range; a killed task is no fetch failure
    } catch (TransportException | RuntimeException e) {
      // A FetchFailedException thrown above is checked (sneaky-thrown) and passes through here.
      throw Scala.sneaky(x.chunk().blocks().get(0).fetchFailed("device fetch from executor " + holder + ": "
          + e.getMessage(), e));
    }
  }

  /**
   * Hands a landed request's blocks out as views into its range while this task holds at most a
   * quarter of the landing region in views (other tasks' requests need room too); beyond that the
   * blocks are copied into buffers of their own and the range is released at once.
   */
  private void keep(DeviceLanding.Fetch f, List<DeviceBatch> views, int[] widths, List<DeviceBatch> out) {
    if (heldBytes + f.length() <= gpu.landing().capacity() / 4) {
      held.add(new Held(f, out.size(), out.size() + views.size()));
      heldBytes += f.length();
      out.addAll(views);
      return;
    }
    try {
      for (DeviceBatch v : views) {
        out.add(copy(gpu, v.address(), v.rows(), widths));
        copiedBlocks++;
      }
    } finally {
      f.close(); // landed: no holder writes into it any more
    }
  }

  /** Replaces this task's views into the landing region by copies and releases their ranges. */
  private void copyOutHeld(int[] widths, List<DeviceBatch> out) {
    while (!held.isEmpty()) {
      Held h = held.get(held.size() - 1);
      for (int i = h.from(); i < h.to(); i++) {
        DeviceBatch v = out.get(i);
        out.set(i, copy(gpu, v.address(), v.rows(), widths));
      }
      held.remove(held.size() - 1);
      heldBytes -= h.fetch().length();
      h.fetch().close();
      copiedBlocks += h.to() - h.from();
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

  /** Blocks and packed bytes landed over nvlink, requests sent, blocks copied out of the landing region. */
  long landed() {
    return landedBlocks;
  }

  long bytes() {
    return landedBytes;
  }

  int requests() {
    return requests;
  }

  long copied() {
    return copiedBlocks;
  }

  /** The most requests in flight at once. */
  int peakInFlight() {
    return peakInFlight;
  }

  /** {@link System#nanoTime()} when the first request was sent and the last one landed (0: none). */
  long firstSent() {
    return firstSent;
  }

  long lastLanded() {
    return lastLanded;
  }

  RequestPhases phases() {
    return phases;
  }

  /** Releases the landed ranges behind the views handed out (the task completed: nothing writes there any more). */
  @Override
  public void close() {
    held.forEach(h -> h.fetch().close());
  }
}
