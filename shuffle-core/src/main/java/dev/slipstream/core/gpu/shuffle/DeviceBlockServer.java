package dev.slipstream.core.gpu.shuffle;

import dev.slipstream.core.gpu.GpuContext;
import dev.slipstream.core.gpu.GpuRegion;
import dev.slipstream.core.gpu.PushKernel;
import dev.slipstream.core.gpu.RegionDescriptor;
import dev.slipstream.core.gpu.RemoteRegion;
import dev.slipstream.core.gpu.SlipStatus;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

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
 * rewrite of the set's source slots, one kernel launch and a status copy. At most
 * {@code maxInFlight} requests push at once (each on a lane of its own, so on its own stream); more
 * wait for a lane until their timeout. {@link #forget} closes a lost reader's lanes, {@link #close}
 * all of them.
 *
 * <p>Everything is checked before anything is written: the request's ranges against the landing
 * region ({@link DeviceWriteRequest#check()}), each output is here, has the requested partition and
 * the requested column widths, and each block fits its capacity. The device checks the addresses
 * again. Threading: thread-safe. Ownership: owns its lanes; closes nothing it was given.
 */
public final class DeviceBlockServer implements AutoCloseable {
  private final GpuContext ctx;
  private final PushKernel kernel;
  private final DeviceMapOutputStore store;
  private final Function<RegionDescriptor, RemoteRegion> landings;
  private final AtomicInteger tableIds;
  private final int maxInFlight;
  private final int pushQueues;
  private final int pushThreads;
  private final Semaphore inFlight;
  private final Map<RegionDescriptor, Deque<PushLane>> idle = new HashMap<>();
  private final Map<PushLane, RegionDescriptor> busy = new IdentityHashMap<>();
  private final Set<RegionDescriptor> forgotten = new HashSet<>();
  private final List<PushLane> stuck = new ArrayList<>();
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
    this.inFlight = new Semaphore(maxInFlight);
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

  /** Serves {@code req} and returns the block bytes pushed; throws with the reason, writing nothing, if it is refused. */
  public long serve(DeviceWriteRequest req, long timeoutMs) throws TransportException {
    return serve(req, timeoutMs, new long[MARKS]);
  }

  /** As {@link #serve(DeviceWriteRequest, long)}, filling {@code marks} ({@link #MARKS} long) as it goes. */
  public long serve(DeviceWriteRequest req, long timeoutMs, long[] marks) throws TransportException {
    if (marks.length < MARKS) {
      throw new IllegalArgumentException("serve marks: " + marks.length + " slots, expected >= " + MARKS);
    }
    req.check();
    Map<Long, DeviceMapOutputStore.Pinned> pins = new LinkedHashMap<>();
    try {
      int[] widths = req.widths();
      ByteBuffer table = ByteBuffer.allocate(DeviceWriteRequest.TABLE_ENTRY * req.entries().size())
          .order(ByteOrder.LITTLE_ENDIAN);
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
        table.putLong(bytes).putLong(p.rows(e.partition()));
        total += bytes;
      }
      marks[MARK_CHECKED] = System.nanoTime();
      push(req, pins, table.array(), timeoutMs, marks);
      served.incrementAndGet();
      bytesServed.addAndGet(total);
      return total;
    } finally {
      pins.values().forEach(DeviceMapOutputStore.Pinned::close);
    }
  }

  private void push(DeviceWriteRequest req, Map<Long, DeviceMapOutputStore.Pinned> pins, byte[] table, long timeoutMs,
      long[] marks) throws TransportException {
    List<GpuRegion> outputs = new ArrayList<>();
    Map<Long, Integer> sourceIndex = new LinkedHashMap<>();
    for (Map.Entry<Long, DeviceMapOutputStore.Pinned> e : pins.entrySet()) {
      sourceIndex.put(e.getKey(), outputs.size());
      outputs.add(((GpuOutputSpace.RegionBlock) e.getValue().block()).region());
    }
    List<List<PushKernel.Item>> items = new ArrayList<>();
    outputs.forEach(o -> items.add(new ArrayList<>()));
    for (DeviceWriteRequest.Entry e : req.entries()) {
      DeviceMapOutputStore.Pinned p = pins.get(e.mapAttemptId());
      List<PushKernel.Item> out = items.get(sourceIndex.get(e.mapAttemptId()));
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
    PushLane lane = acquire(req, timeoutMs);
    boolean keep = false;
    try {
      SlipStatus[] st = lane.push(outputs, items, table, req.tableOffset(), req.signalOffset(), timeoutMs);
      marks[MARK_LANE_READY] = lane.readyNanos();
      marks[MARK_LAUNCHED] = lane.launchedNanos();
      marks[MARK_ENDED] = lane.endedNanos();
      for (int q = 0; q < st.length; q++) {
        if (st[q] != SlipStatus.SLIP_OK) {
          try {
            lane.error();
          } catch (RuntimeException ex) {
            keep = true;
            throw refused(req, "push queue " + q + ": " + st[q] + ": " + ex.getMessage());
          }
          keep = true;
          throw refused(req, "push queue " + q + " ended with " + st[q]);
        }
      }
      keep = true;
    } catch (RuntimeException e) {
      // A push that failed or timed out may leave its kernel running: the lane is set aside, not
      // reused, and closed only with the server.
      throw new TransportException(TransportError.INTERNAL, "device write request " + req.requestId() + ": push failed: "
          + e.getMessage(), e);
    } finally {
      release(req.landing(), lane, keep);
    }
  }

  /** An idle lane for the request's landing region, or a new one; waits for a permit until the timeout. */
  private PushLane acquire(DeviceWriteRequest req, long timeoutMs) throws TransportException {
    try {
      if (!inFlight.tryAcquire(timeoutMs, TimeUnit.MILLISECONDS)) {
        throw new TransportException(TransportError.TIMEOUT, "device write request " + req.requestId() + ": "
            + maxInFlight + " requests still pushing after " + timeoutMs + " ms");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TransportException(TransportError.INTERNAL, "interrupted while waiting to push device write request "
          + req.requestId());
    }
    try {
      PushLane lane;
      synchronized (this) {
        if (closed) {
          throw new TransportException(TransportError.UNAVAILABLE, "device block server is closed");
        }
        forgotten.remove(req.landing());
        Deque<PushLane> q = idle.get(req.landing());
        lane = q == null ? null : q.pollFirst();
        if (lane == null) {
          lane = new PushLane(ctx, kernel, landings.apply(req.landing()), tableIds::getAndIncrement, pushQueues,
              pushThreads);
          lanesMade++;
        }
        busy.put(lane, req.landing());
        peakInFlight = Math.max(peakInFlight, busy.size());
      }
      return lane;
    } catch (TransportException | RuntimeException e) {
      inFlight.release();
      throw e;
    }
  }

  private void release(RegionDescriptor landing, PushLane lane, boolean keep) {
    boolean close = false;
    synchronized (this) {
      busy.remove(lane);
      if (!keep) {
        stuck.add(lane);
      } else if (closed || forgotten.contains(landing)) {
        close = true;
      } else {
        idle.computeIfAbsent(landing, k -> new ArrayDeque<>()).addFirst(lane);
      }
    }
    if (close) {
      lane.close();
    }
    inFlight.release();
  }

  /**
   * Closes the lanes that push into {@code landing} (a lost reader's region): idle ones now, busy
   * ones when their push ends. Call before the imported region is closed.
   */
  public void forget(RegionDescriptor landing) {
    Deque<PushLane> q;
    synchronized (this) {
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

  /** Closes every idle lane and those set aside after a failed push; busy ones close when their push ends. */
  @Override
  public void close() {
    List<PushLane> all = new ArrayList<>();
    synchronized (this) {
      closed = true;
      idle.values().forEach(all::addAll);
      idle.clear();
      all.addAll(stuck);
      stuck.clear();
    }
    all.forEach(PushLane::close);
  }
}
