package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PushKernel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * The {@link PushLane}s of a {@link PushScheduler}, per reader landing region: idle ones kept
 * for the next request into the same region (made on the first, reused after, while their
 * {@link LaneTarget} is current), busy ones, and those set aside after a failed or timed-out push
 * ({@link AsideLanes}; their target is told, so a NIC link in the error state is replaced) until
 * their stream is idle. The
 * landing regions of lost readers are revoked: never pushed into again (a new reader process has
 * another descriptor); their lanes close, idle ones at once and busy ones when their push ends.
 *
 * <p>Threading: thread-safe; lanes are closed outside its lock. Ownership: owns every lane it made
 * and closes them ({@link #close}); closes nothing it was given.
 */
final class PushLanes {
  private final GpuContext ctx;
  private final PushScheduler.Lanes config;
  private final PushKernel kernel;
  private final Function<WriteRequest, LaneTarget> targets;
  private final AtomicInteger tableIds;
  private final Map<RegionDescriptor, Deque<PushLane>> idle = new HashMap<>();
  private final Map<PushLane, RegionDescriptor> busy = new IdentityHashMap<>();
  /** Revoked landing regions with a lane busy when they were: that lane closes once its push ends. */
  private final Set<RegionDescriptor> forgotten = new HashSet<>();
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
  private int made;
  private int peakBusy;
  private boolean closed;

  /**
   * @param targets what a new lane for a request pushes into (its reader's landing region, imported
   *     or over a NIC link); may throw when there is none (no connected link)
   * @param firstTableId region ids for the lanes' block-table staging regions
   * @param config the lanes' backend, grid and table pool
   */
  PushLanes(GpuContext ctx, PushKernel kernel, Function<WriteRequest, LaneTarget> targets, int firstTableId,
      PushScheduler.Lanes config) {
    this.config = config;
    this.ctx = ctx;
    this.kernel = kernel;
    this.targets = targets;
    this.tableIds = new AtomicInteger(firstTableId);
  }

  /**
   * An idle lane into the request's landing region whose target is current, or a new one; busy
   * until {@link #giveBack}. Idle lanes whose target is not current any more (a replaced NIC link)
   * are closed.
   */
  PushLane take(WriteRequest req) throws TransportException {
    List<PushLane> stale = new ArrayList<>();
    try {
      synchronized (this) {
        if (closed) {
          throw new TransportException(TransportError.UNAVAILABLE, "push scheduler is closed");
        }
        if (revoked.contains(req.landing())) {
          throw new TransportException(TransportError.UNAVAILABLE, "device write request " + req.requestId()
              + ": its reader's landing region was revoked (the reader was lost); nothing written");
        }
        Deque<PushLane> q = idle.get(req.landing());
        PushLane lane = null;
        while (lane == null && q != null && !q.isEmpty()) {
          PushLane l = q.pollFirst();
          if (l.current()) {
            lane = l;
          } else {
            stale.add(l);
          }
        }
        if (lane == null) {
          LaneTarget target;
          try {
            target = targets.apply(req);
          } catch (RuntimeException e) {
            throw new TransportException(TransportError.UNAVAILABLE, "device write request " + req.requestId() + ": "
                + e.getMessage() + "; nothing written", e);
          }
          try {
            lane = new PushLane(ctx, kernel, target, tableIds::getAndIncrement, config);
          } catch (RuntimeException e) {
            target.close();
            throw e;
          }
          made++;
        }
        busy.put(lane, req.landing());
        peakBusy = Math.max(peakBusy, busy.size());
        return lane;
      }
    } finally {
      stale.forEach(PushLane::close);
    }
  }

  /**
   * Ends {@code lane}'s push into {@code landing}. {@code keep}: back to the idle lanes, or, when the
   * region was revoked or the lanes are closed, returned for the caller to close (outside its
   * locks). Otherwise (the push failed or passed its deadline: its kernel may still run) the lane is
   * set aside and {@code whenIdle} runs once its stream is idle, or when the lanes close; null is
   * returned then.
   */
  PushLane giveBack(PushLane lane, RegionDescriptor landing, boolean keep, Runnable whenIdle) {
    synchronized (this) {
      busy.remove(lane);
      if (!keep) {
        lane.failed();
        aside.add(lane, whenIdle);
        return null;
      }
      if (closed || forgotten.contains(landing) || !lane.current()) {
        return lane;
      }
      idle.computeIfAbsent(landing, k -> new ArrayDeque<>()).addFirst(lane);
      return null;
    }
  }

  /**
   * Revokes {@code landing} (a lost reader's region): its idle lanes close now, busy ones when their
   * push ends, and no lane into it is made again. Call before the imported region is closed.
   */
  void forget(RegionDescriptor landing) {
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

  /**
   * Closes the lanes set aside whose stream has become idle (a push that passed its deadline and
   * ended later, or a launch that failed after queuing copies) and runs what waited for them. A lane
   * whose stream reports a CUDA error stays aside (until {@link #close}).
   */
  void reclaim() {
    aside.reclaim();
  }

  /** Lanes made since start (one per reader landing region while requests come one at a time). */
  synchronized int made() {
    return made;
  }

  /** Idle lanes kept now, over all reader landing regions. */
  synchronized int idle() {
    return idle.values().stream().mapToInt(Deque::size).sum();
  }

  /** The most lanes busy at once since start. */
  synchronized int peakBusy() {
    return peakBusy;
  }

  /** Lanes set aside now, and those closed since start once their stream was idle. */
  int aside() {
    return aside.size();
  }

  long reclaimed() {
    return aside.reclaimed();
  }

  /**
   * Closes every idle lane and those set aside (running what waited for them); a busy lane is
   * returned to the caller by {@link #giveBack} to close when its push ends, and no lane is taken
   * any more.
   */
  void close() {
    List<PushLane> all = new ArrayList<>();
    synchronized (this) {
      closed = true;
      idle.values().forEach(all::addAll);
      idle.clear();
    }
    all.forEach(PushLane::close);
    aside.closeAll();
  }
}
