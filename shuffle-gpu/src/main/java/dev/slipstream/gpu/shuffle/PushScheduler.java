package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RemoteRegion;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Schedules the pushes of the block writer into device memory ({@link PushWriter}): serves a
 * {@link WriteRequest} the block server admitted by launching the push kernel from the map outputs in the {@link DeviceMapOutputStore} into the reader's device landing
 * region (imported through CUDA IPC by {@code landings}), over an nvlink queue set: each block in
 * pieces of {@link WriteRequest#CHUNK_BYTES}, the pieces of a map output spread over several
 * queues (a queue has one source region; {@link PushLane}), and one queue for the block table;
 * every queue adds its (pieces, bytes) to the request's signal word after its data, so the reader,
 * once the count reaches {@link WriteRequest#expectedPieces()}, has every byte.
 *
 * <p>Serving a request, in the classes that do it: {@link PushAdmission} checks it and pins its map
 * outputs; this class gives it one of {@code maxInFlight} permits, or keeps it waiting, checked and
 * pinned, until one frees or its deadline passes; {@link PushLanes} gives it a lane into its
 * reader's landing region (queue set, table region, stream and argument buffer, made on the first
 * request into that region and reused, so a request costs a table copy, a rewrite of the set's
 * source slots, one kernel launch and a status copy); {@link PushCompletion}'s thread sees the push
 * end and reports the outcome, so no thread waits per push. {@link #start} does the checks and the
 * launch on the caller's thread and returns; a request that waited for a permit is launched from a
 * launch thread of the server's own. Each push is on a lane of its own, so on its own stream.
 * {@link #forget} closes a lost reader's lanes, {@link #close} all of them.
 *
 * <p>A request's deadline is the earlier of the server's timeout and the reader's budget
 * ({@link WriteRequest#budgetMillis()}) from when it was received; a request not launched by
 * then is dropped, writing nothing. A push still running at its deadline cannot be stopped: its lane
 * is set aside ({@link AsideLanes}) and its answer and pins wait until the lane's stream is idle,
 * so every answer means the push stores nothing more (the reader's landing range depends on it).
 * Everything is checked before anything is written; the device checks the addresses again.
 *
 * <p>Threading: thread-safe; outcomes are reported on the completion thread
 * ({@code slipstream-gpu-push-completion}, started with the first request), or on the thread whose
 * launch failed or that closed the server. Ownership: owns its lanes and its threads; closes
 * nothing it was given.
 */
public final class PushScheduler implements AutoCloseable {
  /** WQEs per gpunetio queue pair (push lanes and NIC links alike). */
  public static final int GPUNETIO_QUEUE_DEPTH = PushLane.GPUNETIO_DEPTH;
  private static final Logger LOG = LoggerFactory.getLogger(PushScheduler.class);
  /** How long {@link #close} waits for pushes in flight to end. */
  private static final long CLOSE_WAIT_MS = 5_000;
  /** The most CUDA blocks a push may spread over (queue sets are sized by doubling up to this). */
  public static final int MAX_PUSH_QUEUES = 1024;

  /**
   * Instants ({@link System#nanoTime()}) of serving one request, filled in by
   * {@link #serve(WriteRequest, long, long[])} as it gets there (0: not reached): checks and
   * pins done, lane ready (table copied, source slots rewritten), kernel launched, kernel end seen.
   */
  public static final int MARK_CHECKED = 0;
  public static final int MARK_LANE_READY = 1;
  public static final int MARK_LAUNCHED = 2;
  public static final int MARK_ENDED = 3;
  public static final int MARKS = 4;

  private final PushAdmission admission;
  private final PushLanes lanes;
  private final PushCompletion completion;
  private final int maxInFlight;
  /** Requests holding a permit (launching or pushing), at most {@code maxInFlight}. */
  private int active;
  /** Checked and pinned requests waiting for a permit, oldest first. */
  private final Deque<PushJob> waiting = new ArrayDeque<>();
  /** Launches requests that waited for a permit; made with the first one. */
  private ExecutorService launcher;
  private final AtomicLong served = new AtomicLong();
  private final AtomicLong bytesServed = new AtomicLong();
  private boolean closed;

  /**
   * What serving a started request came to: {@code error} null and the block bytes pushed, or the
   * reason it was refused or failed. Called exactly once: on the server's completion thread, or, when
   * the launch itself fails or the server closes first, on the thread that launched it or closed the
   * server; it must not wait on other requests.
   */
  @FunctionalInterface
  public interface Served {
    void done(long bytes, TransportException error);
  }

  /**
   * @param landings maps a reader's landing descriptor to the imported region (cached by the caller;
   *     an alias for this process's own landing region)
   * @param firstTableId region ids for the lanes' block-table staging regions
   * @param maxInFlight requests that may push at once (at least 1)
   */
  public PushScheduler(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store,
      Function<RegionDescriptor, RemoteRegion> landings, int firstTableId, int maxInFlight) {
    this(ctx, kernel, store, landings, firstTableId, maxInFlight, Lanes.nvlink());
  }

  /**
   * How the lanes push: over queues of {@code backend} ({@link Backend#NVLINK} stores, or
   * {@link Backend#GPUNETIO} WQEs), a request's pieces spread over at most {@code queues} CUDA blocks
   * of {@code threads} threads (a multiple of 32 in 32..1024); the lanes' block-table staging
   * regions (device memory) are reserved from {@code tables}, and released once every lane closed.
   */
  public record Lanes(Backend backend, int queues, int threads, MemoryPool tables) {
    /** nvlink lanes with the default grid and a pool of their own. */
    public static Lanes nvlink() {
      return of(Backend.NVLINK);
    }

    /** Lanes of {@code backend} with the default grid and a pool of their own. */
    public static Lanes of(Backend backend) {
      return new Lanes(backend, PushLane.MAX_DATA_QUEUES, PushLane.THREADS, MemoryPool.root("push-tables",
          Long.MAX_VALUE));
    }
  }

  /** As above, with the lanes' backend, grid and accounting. */
  public PushScheduler(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store,
      Function<RegionDescriptor, RemoteRegion> landings, int firstTableId, int maxInFlight, Lanes config) {
    this(ctx, kernel, store, firstTableId, maxInFlight, config,
        req -> LaneTarget.imported(landings.apply(req.landing())));
  }

  /**
   * As above, with what each new lane pushes into given by {@code targets} (a reader's landing
   * region imported, or over a NIC link), which may throw when there is nothing to push into.
   */
  public PushScheduler(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store, int firstTableId,
      int maxInFlight, Lanes config, Function<WriteRequest, LaneTarget> targets) {
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("push scheduler: " + maxInFlight + " requests in flight, expected >= 1");
    }
    int pushQueues = config.queues();
    int pushThreads = config.threads();
    if (pushQueues < 1 || pushQueues > MAX_PUSH_QUEUES || pushThreads < 32 || pushThreads > 1024
        || pushThreads % 32 != 0) {
      throw new IllegalArgumentException("push scheduler: push grid of " + pushQueues + " CUDA blocks x "
          + pushThreads + " threads, expected 1.." + MAX_PUSH_QUEUES + " blocks and a multiple of 32 in 32..1024"
          + " threads");
    }
    if (config.backend() != Backend.NVLINK && config.backend() != Backend.GPUNETIO) {
      throw new IllegalArgumentException("push scheduler: lanes over " + config.backend() + " queues, expected NVLINK"
          + " or GPUNETIO");
    }
    this.admission = new PushAdmission(store);
    this.lanes = new PushLanes(ctx, kernel, targets, firstTableId, config);
    this.completion = new PushCompletion(ctx, lanes, new PushCompletion.Rounds() {
      @Override
      public void finish(PushJob job, boolean keep, TransportException error) {
        PushScheduler.this.finish(job, keep, error);
      }

      @Override
      public boolean schedule(long now, BooleanSupplier drained) {
        return PushScheduler.this.schedule(now, drained);
      }
    });
    this.maxInFlight = maxInFlight;
  }

  /** Serves {@code req} and returns the block bytes pushed; throws with the reason, writing nothing, if it is refused. */
  public long serve(WriteRequest req, long timeoutMs) throws TransportException {
    return serve(req, timeoutMs, new long[MARKS]);
  }

  /** As {@link #serve(WriteRequest, long)}, filling {@code marks} ({@link #MARKS} long) as it goes. */
  public long serve(WriteRequest req, long timeoutMs, long[] marks) throws TransportException {
    CompletableFuture<Long> done = new CompletableFuture<>();
    start(req, timeoutMs, marks, (bytes, error) -> {
      if (error == null) {
        done.complete(bytes);
      } else {
        done.completeExceptionally(error);
      }
    });
    try {
      // The push's own deadline ends it; the margin only guards against a completion thread that died.
      return done.get(timeoutMs + 10_000, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof TransportException t) {
        throw t;
      }
      throw new TransportException(TransportError.INTERNAL, "device write request " + req.requestId() + ": "
          + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      throw new TransportException(TransportError.TIMEOUT, "device write request " + req.requestId()
          + ": no outcome within " + (timeoutMs + 10_000) + " ms");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TransportException(TransportError.INTERNAL, "interrupted while serving device write request "
          + req.requestId());
    }
  }

  /**
   * Starts serving {@code req} on the calling thread up to the kernel launch, without waiting: checks
   * the request and pins its map outputs, then, while fewer than {@code maxInFlight} requests push,
   * takes a lane and launches (table copy, source slots, arguments, launch); otherwise the request
   * waits, pins held, until a lane frees (the server's launch thread launches it then) or its
   * timeout passes. The completion thread watches the kernel's end and calls {@code done}. Throws, having
   * launched nothing and holding nothing, when the request is refused by the checks; otherwise
   * {@code done} is called exactly once. {@code marks} ({@link #MARKS} long) fills in as it goes and
   * is complete when {@code done} runs.
   */
  public void start(WriteRequest req, long timeoutMs, long[] marks, Served done) throws TransportException {
    start(req, System.nanoTime(), timeoutMs, marks, done);
  }

  /**
   * As {@link #start(WriteRequest, long, long[], Served)} for a request received at
   * {@code receivedNanos} (System.nanoTime()): its deadline is the earlier of {@code timeoutMs} and
   * its budget from then, and a request already past it is refused, launching nothing.
   */
  public void start(WriteRequest req, long receivedNanos, long timeoutMs, long[] marks, Served done)
      throws TransportException {
    if (marks.length < MARKS) {
      throw new IllegalArgumentException("serve marks: " + marks.length + " slots, expected >= " + MARKS);
    }
    long limitMs = Math.min(timeoutMs, req.budgetMillis());
    long deadline = receivedNanos + limitMs * 1_000_000L;
    if (System.nanoTime() - deadline > 0) {
      throw new TransportException(TransportError.TIMEOUT, "device write request " + req.requestId() + ": its"
          + " deadline (" + limitMs + " ms from its arrival) passed before it was served; dropped, nothing written");
    }
    PushJob job = admission.admit(req, deadline, limitMs, marks, done);
    boolean launchNow;
    synchronized (this) {
      if (closed) {
        job.unpin();
        throw new TransportException(TransportError.UNAVAILABLE, "push scheduler is closed");
      }
      launchNow = active < maxInFlight;
      job.holdsPermit = launchNow;
      if (launchNow) {
        active++;
      } else {
        waiting.addLast(job);
      }
      completion.start();
    }
    if (launchNow) {
      launch(job);
    } else {
      completion.wake(); // it watches the waiting request's deadline
    }
  }

  /** Takes a lane and launches the job's push (the caller holds one of the {@code maxInFlight} permits). */
  private void launch(PushJob job) {
    if (System.nanoTime() - job.deadline > 0) {
      finish(job, true, new TransportException(TransportError.TIMEOUT, "device write request " + job.req.requestId()
          + ": its deadline (" + job.timeoutMs + " ms) passed before its push was launched; dropped, nothing written"));
      return;
    }
    try {
      job.lane = lanes.take(job.req);
      job.lane.start(job.outputs, job.items, job.table, job.req.tableOffset(), job.req.signalOffset());
      job.marks[MARK_LANE_READY] = job.lane.readyNanos();
      job.marks[MARK_LAUNCHED] = job.lane.launchedNanos();
    } catch (TransportException e) {
      finish(job, false, e);
      return;
    } catch (RuntimeException e) {
      // A launch that failed may have left work on the lane's stream: the lane is set aside.
      finish(job, false, new TransportException(TransportError.INTERNAL, "device write request "
          + job.req.requestId() + ": push failed: " + e.getMessage(), e));
      return;
    }
    completion.add(job);
  }

  /**
   * Ends a job: its lane back to the idle lanes ({@code keep}) and its permit released, then its
   * pins released and its outcome reported; or, when its push failed or passed its deadline (its
   * kernel may still run), its lane set aside and the pins and the outcome held back until the
   * lane's stream is idle ({@link AsideLanes}).
   */
  private void finish(PushJob job, boolean keep, TransportException error) {
    PushLane close = null;
    boolean deferred = false;
    if (job.lane != null) {
      deferred = !keep;
      close = lanes.giveBack(job.lane, job.req.landing(), keep, () -> report(job, error));
    }
    synchronized (this) {
      if (job.holdsPermit) {
        active--;
        job.holdsPermit = false;
      }
    }
    if (close != null) {
      close.close();
    }
    if (!deferred) {
      report(job, error);
    }
  }

  /** Releases the job's pins and reports its outcome. */
  private void report(PushJob job, TransportException error) {
    job.unpin();
    if (error == null) {
      served.incrementAndGet();
      bytesServed.addAndGet(job.total);
    }
    try {
      job.done.done(error == null ? job.total : 0, error);
    } catch (RuntimeException e) {
      LOG.warn("Answering device write request {} failed", job.req.requestId(), e);
    }
  }

  /**
   * A round of the completion thread: fails waiting requests whose deadline passed and hands
   * waiting ones to the launch thread as permits free; false once the server is closed and nothing
   * is left.
   */
  private boolean schedule(long now, BooleanSupplier drained) {
    List<PushJob> expired = new ArrayList<>();
    List<PushJob> launchable = new ArrayList<>();
    synchronized (this) {
      for (Iterator<PushJob> it = waiting.iterator(); it.hasNext(); ) {
        PushJob j = it.next();
        if (now - j.deadline > 0) {
          it.remove();
          expired.add(j);
        }
      }
      while (active < maxInFlight && !waiting.isEmpty()) {
        active++;
        PushJob j = waiting.pollFirst();
        j.holdsPermit = true;
        launchable.add(j);
      }
      // active == 0: no request is launching either (a launch in progress holds a permit).
      if (closed && active == 0 && drained.getAsBoolean() && waiting.isEmpty()) {
        return false;
      }
    }
    for (PushJob j : expired) {
      finish(j, true, new TransportException(TransportError.TIMEOUT, "device write request " + j.req.requestId()
          + ": " + maxInFlight + " requests still pushing after " + j.timeoutMs + " ms; dropped, nothing written"));
    }
    for (PushJob j : launchable) {
      // On a thread of their own, so that launching (a few hundred microseconds each) never delays
      // seeing the end of the pushes in flight.
      try {
        launcher().execute(() -> launch(j));
      } catch (RejectedExecutionException e) {
        finish(j, true, new TransportException(TransportError.UNAVAILABLE, "device write request "
            + j.req.requestId() + ": push scheduler is closed"));
      }
    }
    return true;
  }

  private synchronized Executor launcher() {
    if (launcher == null) {
      launcher = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "slipstream-gpu-push-launch");
        t.setDaemon(true);
        return t;
      });
    }
    return launcher;
  }

  /**
   * Closes the lanes that push into {@code landing} (a lost reader's region): idle ones now, busy
   * ones when their push ends; requests still waiting for a lane into it are refused when their
   * turn comes. Call before the imported region is closed.
   */
  public void forget(RegionDescriptor landing) {
    lanes.forget(landing);
  }

  public long requestsServed() {
    return served.get();
  }

  public long bytesServed() {
    return bytesServed.get();
  }

  /** Lanes made since start (one per reader landing region while requests come one at a time). */
  public int lanesMade() {
    return lanes.made();
  }

  /** Idle lanes kept now, over all reader landing regions. */
  public int lanesIdle() {
    return lanes.idle();
  }

  /** Lanes set aside now (after failed or timed-out pushes, until their stream is idle), and those closed since. */
  public int lanesAside() {
    return lanes.aside();
  }

  public long lanesReclaimed() {
    return lanes.reclaimed();
  }

  /** The most requests that pushed at once since start. */
  public int peakInFlight() {
    return lanes.peakBusy();
  }

  /**
   * Fails the waiting requests, closes every idle lane and those set aside after a failed push, and
   * waits up to {@value #CLOSE_WAIT_MS} ms for the pushes in flight to end (their lanes close as
   * they do; a push still running then is left to the completion thread).
   */
  @Override
  public void close() {
    List<PushJob> failed;
    synchronized (this) {
      closed = true;
      failed = new ArrayList<>(waiting);
      waiting.clear();
    }
    for (PushJob j : failed) {
      finish(j, true, new TransportException(TransportError.UNAVAILABLE, "device write request "
          + j.req.requestId() + ": push scheduler is closed"));
    }
    lanes.close(); // the requests of lanes set aside are answered now: the context goes with the server's owner
    completion.wake();
    if (!completion.awaitEnd(CLOSE_WAIT_MS)) {
      LOG.warn("Push scheduler closed with pushes still in flight after {} ms", CLOSE_WAIT_MS);
    }
    synchronized (this) {
      if (launcher != null) {
        launcher.shutdown(); // a launch still queued there finds the server closed and reports it
      }
    }
  }
}
