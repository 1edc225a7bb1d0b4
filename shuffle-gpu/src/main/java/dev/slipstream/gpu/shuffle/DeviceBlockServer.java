package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RegionDescriptor;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.SlipStatus;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder's side of the GPU path: serves a {@link DeviceWriteRequest} by launching the push
 * kernel from the map outputs in the {@link DeviceMapOutputStore} into the reader's device landing
 * region (imported through CUDA IPC by {@code landings}), over an nvlink queue set: each block in
 * pieces of {@link DeviceWriteRequest#CHUNK_BYTES}, the pieces of a map output spread over several
 * queues (a queue has one source region; {@link PushLane}), and one queue for the block table;
 * every queue adds its (pieces, bytes) to the request's signal word after its data, so the reader,
 * once the count reaches {@link DeviceWriteRequest#expectedBlocks()}, has every byte.
 *
 * <p>Per reader landing region it keeps {@link PushLane}s (queue set, table region, stream and
 * argument buffer), made on the first request and reused, so a request costs a table copy, a
 * rewrite of the set's source slots, one kernel launch and a status copy. {@link #start} does the
 * checks and the launch on the caller's thread and returns; one completion thread per server polls
 * the pushes in flight and reports each outcome, so no thread waits per push; a request that waited
 * for a lane is launched from a launch thread of the server's own. At most
 * {@code maxInFlight} requests push at once (each on a lane of its own, so on its own stream); more
 * wait, checked and pinned, for a lane until their deadline. {@link #forget} closes a lost reader's
 * lanes, {@link #close} all of them.
 *
 * <p>A request's deadline is the earlier of the server's timeout and the reader's budget
 * ({@link DeviceWriteRequest#budgetMillis()}) from when it was received; a request not launched by
 * then is dropped, writing nothing. A push still running at its deadline cannot be stopped: its lane
 * is set aside ({@link AsideLanes}) and its answer and pins wait until the lane's stream is idle,
 * so every answer means the push stores nothing more (the reader's landing range depends on it).
 *
 * <p>Everything is checked before anything is written: the request's ranges against the landing
 * region ({@link DeviceWriteRequest#check()}), each output is here, has the requested partition and
 * the requested column widths, and each block fits its capacity. The device checks the addresses
 * again. Threading: thread-safe; outcomes are reported on the completion thread
 * ({@code slipstream-gpu-push-completion}, started with the first request). Ownership: owns its
 * lanes and that thread; closes nothing it was given.
 */
public final class DeviceBlockServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DeviceBlockServer.class);
  /** How long {@link #close} waits for pushes in flight to end. */
  private static final long CLOSE_WAIT_MS = 5_000;
  private final GpuContext ctx;
  private final PushKernel kernel;
  private final DeviceMapOutputStore store;
  private final Function<RegionDescriptor, RemoteRegion> landings;
  private final AtomicInteger tableIds;
  private final int maxInFlight;
  private final int pushQueues;
  private final int pushThreads;
  /** Requests holding a permit (launching or pushing), at most {@code maxInFlight}. */
  private int active;
  /** Checked and pinned requests waiting for a permit, oldest first. */
  private final Deque<PushJob> waiting = new ArrayDeque<>();
  /** Launched pushes handed to the completion thread. */
  private final java.util.concurrent.ConcurrentLinkedQueue<PushJob> launched = new java.util.concurrent.ConcurrentLinkedQueue<>();
  private volatile Thread completer;
  /** Launches requests that waited for a permit; made with the first one. */
  private java.util.concurrent.ExecutorService launcher;
  private final Map<RegionDescriptor, Deque<PushLane>> idle = new HashMap<>();
  private final Map<PushLane, RegionDescriptor> busy = new IdentityHashMap<>();
  private final Set<RegionDescriptor> forgotten = new HashSet<>();
  /** Landing regions of lost readers: never pushed into again (a new reader process has another descriptor). */
  private final Set<RegionDescriptor> revoked = new HashSet<>();
  /** Lanes set aside after a failed or timed-out push, closed once their stream is idle (their requests answered then). */
  private final AsideLanes<PushLane> aside = new AsideLanes<>(new AsideLanes.Lanes<>() {
    @Override
    public boolean idle(PushLane lane) {
      return lane.idle();
    }

    @Override
    public void close(PushLane lane) {
      lane.close();
    }
  });
  /** How often the completion thread looks whether lanes set aside became idle. */
  static final long RECLAIM_EVERY_NANOS = 100_000_000L;
  private long lastReclaim = System.nanoTime();
  private final AtomicLong served = new AtomicLong();
  private final AtomicLong bytesServed = new AtomicLong();
  private int lanesMade;
  private int peakInFlight;
  private boolean closed;

  /**
   * @param landings maps a reader's landing descriptor to the imported region (cached by the caller;
   *     an alias for this process's own landing region)
   * @param firstTableId region ids for the lanes' block-table staging regions
   * @param maxInFlight requests that may push at once (at least 1)
   */
  public DeviceBlockServer(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store,
      Function<RegionDescriptor, RemoteRegion> landings, int firstTableId, int maxInFlight) {
    this(ctx, kernel, store, landings, firstTableId, maxInFlight, PushLane.MAX_DATA_QUEUES, PushLane.THREADS);
  }

  /**
   * As above, with the push kernel's grid: a request's pieces spread over at most {@code pushQueues}
   * CUDA blocks of {@code pushThreads} threads (a multiple of 32 in 32..1024).
   */
  public DeviceBlockServer(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store,
      Function<RegionDescriptor, RemoteRegion> landings, int firstTableId, int maxInFlight, int pushQueues,
      int pushThreads) {
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("device block server: " + maxInFlight + " requests in flight, expected >= 1");
    }
    if (pushQueues < 1 || pushQueues > MAX_PUSH_QUEUES || pushThreads < 32 || pushThreads > 1024
        || pushThreads % 32 != 0) {
      throw new IllegalArgumentException("device block server: push grid of " + pushQueues + " CUDA blocks x "
          + pushThreads + " threads, expected 1.." + MAX_PUSH_QUEUES + " blocks and a multiple of 32 in 32..1024"
          + " threads");
    }
    this.pushQueues = pushQueues;
    this.pushThreads = pushThreads;
    this.ctx = ctx;
    this.kernel = kernel;
    this.store = store;
    this.landings = landings;
    this.tableIds = new AtomicInteger(firstTableId);
    this.maxInFlight = maxInFlight;
  }

  /** The most CUDA blocks a push may spread over (queue sets are sized by doubling up to this). */
  public static final int MAX_PUSH_QUEUES = 1024;

  /**
   * Instants ({@link System#nanoTime()}) of serving one request, filled in by
   * {@link #serve(DeviceWriteRequest, long, long[])} as it gets there (0: not reached): checks and
   * pins done, lane ready (table copied, source slots rewritten), kernel launched, kernel end seen.
   */
  public static final int MARK_CHECKED = 0;
  public static final int MARK_LANE_READY = 1;
  public static final int MARK_LAUNCHED = 2;
  public static final int MARK_ENDED = 3;
  public static final int MARKS = 4;

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

  /** Serves {@code req} and returns the block bytes pushed; throws with the reason, writing nothing, if it is refused. */
  public long serve(DeviceWriteRequest req, long timeoutMs) throws TransportException {
    return serve(req, timeoutMs, new long[MARKS]);
  }

  /** As {@link #serve(DeviceWriteRequest, long)}, filling {@code marks} ({@link #MARKS} long) as it goes. */
  public long serve(DeviceWriteRequest req, long timeoutMs, long[] marks) throws TransportException {
    java.util.concurrent.CompletableFuture<Long> done = new java.util.concurrent.CompletableFuture<>();
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
    } catch (java.util.concurrent.ExecutionException e) {
      if (e.getCause() instanceof TransportException t) {
        throw t;
      }
      throw new TransportException(TransportError.INTERNAL, "device write request " + req.requestId() + ": "
          + e.getCause(), e.getCause());
    } catch (java.util.concurrent.TimeoutException e) {
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
  public void start(DeviceWriteRequest req, long timeoutMs, long[] marks, Served done) throws TransportException {
    start(req, System.nanoTime(), timeoutMs, marks, done);
  }

  /**
   * As {@link #start(DeviceWriteRequest, long, long[], Served)} for a request received at
   * {@code receivedNanos} (System.nanoTime()): its deadline is the earlier of {@code timeoutMs} and
   * its budget from then, and a request already past it is refused, launching nothing.
   */
  public void start(DeviceWriteRequest req, long receivedNanos, long timeoutMs, long[] marks, Served done)
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
    PushJob job = prepare(req, deadline, limitMs, marks, done);
    boolean launchNow;
    synchronized (this) {
      if (closed) {
        job.unpin();
        throw new TransportException(TransportError.UNAVAILABLE, "device block server is closed");
      }
      launchNow = active < maxInFlight;
      job.holdsPermit = launchNow;
      if (launchNow) {
        active++;
      } else {
        waiting.addLast(job);
      }
      ensureCompleter();
    }
    if (launchNow) {
      launch(job);
    } else {
      LockSupport.unpark(completer); // it watches the waiting request's deadline
    }
  }

  /** Checks {@code req} against the store and pins its map outputs; throws, holding nothing, if refused. */
  private PushJob prepare(DeviceWriteRequest req, long deadline, long timeoutMs, long[] marks, Served done)
      throws TransportException {
    req.check();
    Map<Long, DeviceMapOutputStore.Pinned> pins = new LinkedHashMap<>();
    boolean ok = false;
    try {
      int[] widths = req.widths();
      List<BlockTable.Landed> table = new ArrayList<>(req.entries().size());
      long total = 0;
      for (DeviceWriteRequest.Entry e : req.entries()) {
        DeviceMapOutputStore.Pinned p = pins.get(e.mapAttemptId());
        if (p == null) {
          try {
            p = store.pin(req.shuffleId(), e.mapAttemptId());
          } catch (IllegalStateException ex) {
            throw new TransportException(TransportError.UNAVAILABLE, ex.getMessage());
          }
          pins.put(e.mapAttemptId(), p);
          if (!java.util.Arrays.equals(p.widths(), widths)) {
            throw refused(req, "map attempt " + e.mapAttemptId() + " has payload widths "
                + java.util.Arrays.toString(p.widths()) + ", the request expects " + java.util.Arrays.toString(widths));
          }
        }
        if (e.partition() >= p.partitions()) {
          throw refused(req, "partition " + e.partition() + " of map attempt " + e.mapAttemptId() + ", expected < "
              + p.partitions());
        }
        long bytes = p.bytes(e.partition());
        if (bytes > e.capacity()) {
          throw refused(req, "block (" + e.mapAttemptId() + ", " + e.partition() + ") has " + bytes
              + " bytes, more than its capacity " + e.capacity());
        }
        table.add(new BlockTable.Landed(bytes, p.rows(e.partition())));
        total += bytes;
      }
      PushJob job = new PushJob(req, pins, BlockTable.encode(req.requestId(), table), total, deadline, timeoutMs,
          marks, done);
      plan(job);
      marks[MARK_CHECKED] = System.nanoTime();
      ok = true;
      return job;
    } finally {
      if (!ok) {
        pins.values().forEach(DeviceMapOutputStore.Pinned::close);
      }
    }
  }

  /** The job's source regions and pieces: each block in pieces of {@link DeviceWriteRequest#CHUNK_BYTES}. */
  private static void plan(PushJob job) {
    Map<Long, Integer> sourceIndex = new LinkedHashMap<>();
    for (Map.Entry<Long, DeviceMapOutputStore.Pinned> e : job.pins.entrySet()) {
      sourceIndex.put(e.getKey(), job.outputs.size());
      job.outputs.add(((GpuOutputSpace.RegionBlock) e.getValue().block()).region());
      job.items.add(new ArrayList<>());
    }
    for (DeviceWriteRequest.Entry e : job.req.entries()) {
      DeviceMapOutputStore.Pinned p = job.pins.get(e.mapAttemptId());
      List<PushKernel.Item> out = job.items.get(sourceIndex.get(e.mapAttemptId()));
      long src = p.offset(e.partition());
      long bytes = p.bytes(e.partition());
      long n = DeviceWriteRequest.chunks(e.capacity());
      for (long i = 0; i < n; i++) {
        long at = i * DeviceWriteRequest.CHUNK_BYTES;
        long len = Math.max(0, Math.min(DeviceWriteRequest.CHUNK_BYTES, bytes - at));
        // A piece past the block's real bytes is empty; it still counts, at an offset inside both regions.
        out.add(len == 0 ? new PushKernel.Item(src, e.landingOffset(), 0)
            : new PushKernel.Item(src + at, e.landingOffset() + at, len));
      }
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
      job.lane = takeLane(job.req);
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
    launched.add(job);
    LockSupport.unpark(completer);
  }

  /** An idle lane for the request's landing region, or a new one. */
  private PushLane takeLane(DeviceWriteRequest req) throws TransportException {
    synchronized (this) {
      if (closed) {
        throw new TransportException(TransportError.UNAVAILABLE, "device block server is closed");
      }
      if (revoked.contains(req.landing())) {
        throw new TransportException(TransportError.UNAVAILABLE, "device write request " + req.requestId()
            + ": its reader's landing region was revoked (the reader was lost); nothing written");
      }
      Deque<PushLane> q = idle.get(req.landing());
      PushLane lane = q == null ? null : q.pollFirst();
      if (lane == null) {
        lane = new PushLane(ctx, kernel, landings.apply(req.landing()), tableIds::getAndIncrement, pushQueues,
            pushThreads);
        lanesMade++;
      }
      busy.put(lane, req.landing());
      peakInFlight = Math.max(peakInFlight, busy.size());
      return lane;
    }
  }

  /**
   * Ends a job: its permit released and its lane back to the idle lanes ({@code keep}), then its
   * pins released and its outcome reported; or, when its push failed or passed its deadline (its
   * kernel may still run), its lane set aside and the pins and the outcome held back until the
   * lane's stream is idle ({@link AsideLanes}).
   */
  private void finish(PushJob job, boolean keep, TransportException error) {
    PushLane close = null;
    boolean deferred = false;
    synchronized (this) {
      if (job.lane != null) {
        busy.remove(job.lane);
        if (!keep) {
          aside.add(job.lane, () -> report(job, error));
          deferred = true;
        } else if (closed || forgotten.contains(job.req.landing())) {
          close = job.lane;
        } else {
          idle.computeIfAbsent(job.req.landing(), k -> new ArrayDeque<>()).addFirst(job.lane);
        }
      }
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

  private synchronized java.util.concurrent.Executor launcher() {
    if (launcher == null) {
      launcher = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "slipstream-gpu-push-launch");
        t.setDaemon(true);
        return t;
      });
    }
    return launcher;
  }

  private void ensureCompleter() {
    if (completer == null) {
      completer = new Thread(this::complete, "slipstream-gpu-push-completion");
      completer.setDaemon(true);
      completer.start();
    }
  }

  /**
   * The completion thread: polls the streams of the pushes in flight (one {@code cuStreamQuery}
   * each, back to back while any is in flight), ends each one that finished or passed its deadline,
   * fails waiting requests whose deadline passed and launches waiting ones as permits free; parks
   * while there is nothing in flight. Ends once the server is closed and nothing is left.
   */
  private void complete() {
    List<PushJob> running = new ArrayList<>();
    ctx.makeCurrent();
    for (;;) {
      try {
        if (!completeOnce(running)) {
          return;
        }
      } catch (RuntimeException e) {
        LOG.error("Device block server completion round failed", e);
      }
      if (running.isEmpty() && launched.isEmpty()) {
        LockSupport.parkNanos(this, 50_000_000L); // woken by a launch, a waiting request or close
      } else {
        Thread.onSpinWait();
      }
    }
  }

  /** One round of the completion thread over {@code running}; false once the thread is to end. */
  private boolean completeOnce(List<PushJob> running) {
    for (PushJob j = launched.poll(); j != null; j = launched.poll()) {
      running.add(j);
    }
    long now = System.nanoTime();
    if (now - lastReclaim > RECLAIM_EVERY_NANOS) {
      lastReclaim = now;
      reclaim();
    }
    for (java.util.Iterator<PushJob> it = running.iterator(); it.hasNext(); ) {
      PushJob j = it.next();
      boolean ended;
      try {
        ended = j.lane.finished();
      } catch (RuntimeException e) {
        it.remove();
        finish(j, false, new TransportException(TransportError.INTERNAL, "device write request "
            + j.req.requestId() + ": push failed: " + e.getMessage(), e));
        continue;
      }
      if (ended) {
        it.remove();
        j.marks[MARK_ENDED] = j.lane.endedNanos();
        ended(j);
      } else if (now - j.deadline > 0) {
        it.remove();
        finish(j, false, new TransportException(TransportError.TIMEOUT, "device write request "
            + j.req.requestId() + ": push failed: still running after " + j.timeoutMs + " ms (answered once it"
            + " ended)"));
      }
    }
    List<PushJob> expired = new ArrayList<>();
    List<PushJob> launchable = new ArrayList<>();
    synchronized (this) {
      for (java.util.Iterator<PushJob> it = waiting.iterator(); it.hasNext(); ) {
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
      if (closed && active == 0 && running.isEmpty() && launched.isEmpty() && waiting.isEmpty()) {
        completer = null;
        notifyAll();
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
      } catch (java.util.concurrent.RejectedExecutionException e) {
        finish(j, true, new TransportException(TransportError.UNAVAILABLE, "device write request "
            + j.req.requestId() + ": device block server is closed"));
      }
    }
    return true;
  }

  /**
   * Closes the lanes set aside whose stream has become idle (a push that passed its deadline and
   * ended later, or a launch that failed after queuing copies) and answers their requests. A lane
   * whose stream reports a CUDA error stays aside (until {@link #close}). Runs on the completion
   * thread.
   */
  private void reclaim() {
    aside.reclaim();
  }

  /** Lanes set aside now (after failed or timed-out pushes, until their stream is idle), and those closed since. */
  public int lanesAside() {
    return aside.size();
  }

  public long lanesReclaimed() {
    return aside.reclaimed();
  }

  /** A push that ended: every queue's status checked; a failing queue's text makes the refusal. */
  private void ended(PushJob j) {
    SlipStatus[] st;
    try {
      st = j.lane.statuses();
    } catch (RuntimeException e) {
      finish(j, false, new TransportException(TransportError.INTERNAL, "device write request " + j.req.requestId()
          + ": push failed: " + e.getMessage(), e));
      return;
    }
    for (int q = 0; q < st.length; q++) {
      if (st[q] != SlipStatus.SLIP_OK) {
        String why;
        try {
          j.lane.error();
          why = "push queue " + q + " ended with " + st[q];
        } catch (RuntimeException ex) {
          why = "push queue " + q + ": " + st[q] + ": " + ex.getMessage();
        }
        finish(j, true, refused(j.req, why));
        return;
      }
    }
    finish(j, true, null);
  }

  /**
   * Closes the lanes that push into {@code landing} (a lost reader's region): idle ones now, busy
   * ones when their push ends; requests still waiting for a lane into it are refused when their
   * turn comes. Call before the imported region is closed.
   */
  public void forget(RegionDescriptor landing) {
    Deque<PushLane> q;
    synchronized (this) {
      revoked.add(landing);
      q = idle.remove(landing);
      if (busy.containsValue(landing)) {
        forgotten.add(landing);
      }
    }
    if (q != null) {
      q.forEach(PushLane::close);
    }
  }

  private static TransportException refused(DeviceWriteRequest req, String why) {
    return new TransportException(TransportError.OUT_OF_RANGE, "device write request " + req.requestId()
        + " (shuffle " + req.shuffleId() + "): " + why);
  }

  public long requestsServed() {
    return served.get();
  }

  public long bytesServed() {
    return bytesServed.get();
  }

  /** Lanes made since start (one per reader landing region while requests come one at a time). */
  public synchronized int lanesMade() {
    return lanesMade;
  }

  /** Idle lanes kept now, over all reader landing regions. */
  public synchronized int lanesIdle() {
    return idle.values().stream().mapToInt(Deque::size).sum();
  }

  /** The most requests that pushed at once since start. */
  public synchronized int peakInFlight() {
    return peakInFlight;
  }

  /**
   * Fails the waiting requests, closes every idle lane and those set aside after a failed push, and
   * waits up to {@value #CLOSE_WAIT_MS} ms for the pushes in flight to end (their lanes close as
   * they do; a push still running then is left to the completion thread).
   */
  @Override
  public void close() {
    List<PushLane> all = new ArrayList<>();
    List<PushJob> failed;
    Thread c;
    synchronized (this) {
      closed = true;
      idle.values().forEach(all::addAll);
      idle.clear();
      failed = new ArrayList<>(waiting);
      waiting.clear();
      c = completer;
    }
    for (PushJob j : failed) {
      finish(j, true, new TransportException(TransportError.UNAVAILABLE, "device write request "
          + j.req.requestId() + ": device block server is closed"));
    }
    all.forEach(PushLane::close);
    aside.closeAll(); // their requests are answered now: the context goes with the server's owner
    if (c != null) {
      LockSupport.unpark(c);
      long deadline = System.nanoTime() + CLOSE_WAIT_MS * 1_000_000L;
      synchronized (this) {
        while (completer != null && deadline - System.nanoTime() > 0) {
          try {
            wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000L));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
        if (completer != null) {
          LOG.warn("Device block server closed with pushes still in flight after {} ms", CLOSE_WAIT_MS);
        }
      }
    }
    synchronized (this) {
      if (launcher != null) {
        launcher.shutdown(); // a launch still queued there finds the server closed and reports it
      }
    }
  }
}
