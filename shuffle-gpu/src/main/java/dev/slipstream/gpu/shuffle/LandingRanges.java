package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.RangeAllocator;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * The ranges of one landing region, without the memory itself: which are free (a
 * {@link RangeAllocator}, as the host landing pool's), reserved by a request, being zeroed after a
 * release, or retained for a holder that may still write. The device
 * landing region ({@link DeviceLanding}) keeps its ranges here; tests drive it with a fake zeroer
 * and clock.
 *
 * <p>A range's life: free, then reserved by one request ({@link #reserve}); then either released
 * ({@link #release}: zeroed, free once the zeroing ended), or, when its request ended without the
 * holder's completion (a timeout, a failed task), <em>retained</em> ({@link #retain}) until the
 * first of: the holder reported that request finished ({@link #finished}: its answer, which a
 * holder gives only once its push can store nothing more), the holder was lost
 * ({@link #holderLost}), or the retention bound passed ({@link #releaseDue}). Only then is it
 * zeroed and handed out again, so a late push lands in a range no other request holds. Retained
 * bytes are part of {@link #used()}: at most the region's capacity, each range for at most its
 * bound.
 *
 * <p>Threading: thread-safe; {@link #reserve} waits on this object's monitor. Ownership: owns the
 * zeroing tickets; {@link #close} closes them and returns the bytes still reserved.
 */
final class LandingRanges {
  /** Zeroes a range in the background. */
  interface Zeroer {
    Ticket zero(long offset, long length);
  }

  /** One queued zeroing. */
  interface Ticket {
    boolean done();

    void await();

    void close();
  }

  /** Why a retained range was released. */
  enum Release {
    /** The holder answered the request (refused, failed or pushed; its push has ended). */
    ANSWERED,
    /** The holder left the cluster. */
    HOLDER_LOST,
    /** The retention bound passed without either. */
    BOUND,
    /** The landing region closed. */
    CLOSED
  }

  /** A range retained for request {@code requestId} of {@code holder} until {@code releaseBy} (nanoTime). */
  record Retained(long requestId, String holder, long offset, long length, long retainedAt, long releaseBy) {}

  private record Zeroing(long offset, long length, Ticket ticket) {}

  private final long capacity;
  private final Zeroer zeroer;
  private final LongSupplier clock;
  private final RangeAllocator free;
  /** Released ranges being zeroed, oldest first; free once their zeroing ended. */
  private final Deque<Zeroing> zeroing = new ArrayDeque<>();
  private final Map<Long, Retained> retained = new LinkedHashMap<>();
  private final long[] releases = new long[Release.values().length];
  private long used;
  private long retainedBytes;
  private long peakRetainedBytes;
  private boolean closed;

  LandingRanges(long capacity, Zeroer zeroer, LongSupplier clock) {
    if (capacity <= 0) {
      throw new IllegalArgumentException("landing ranges over " + capacity + " bytes, expected > 0");
    }
    this.capacity = capacity;
    this.zeroer = zeroer;
    this.clock = clock;
    this.free = new RangeAllocator(capacity, 1);
  }

  long capacity() {
    return capacity;
  }

  /** Bytes reserved by requests, the retained ones included. */
  synchronized long used() {
    return used;
  }

  /** Bytes retained for holders that may still write, and how many ranges. */
  synchronized long retainedBytes() {
    return retainedBytes;
  }

  synchronized int retainedRanges() {
    return retained.size();
  }

  synchronized long peakRetainedBytes() {
    return peakRetainedBytes;
  }

  /** Retained ranges released for {@code why} since start. */
  synchronized long released(Release why) {
    return releases[why.ordinal()];
  }

  /** The retained ranges now, oldest first. */
  synchronized List<Retained> retained() {
    return new ArrayList<>(retained.values());
  }

  /**
   * A free range of {@code bytes}, waiting for other requests to release space until
   * {@code deadlineNanos}; throws {@link IllegalStateException} naming the space in use (and how much
   * of it is retained) when none came.
   */
  synchronized long reserve(long bytes, long deadlineNanos) {
    if (bytes > capacity) {
      throw new IllegalStateException("device landing region: " + bytes + " bytes asked, more than the region's "
          + capacity + " (spark.slipstream.gpu.landing.bytes)");
    }
    for (;;) {
      long at = tryReserve(bytes);
      if (at >= 0) {
        return at;
      }
      long left = deadlineNanos - clock.getAsLong();
      if (left <= 0) {
        throw new IllegalStateException("device landing region: no free range of " + bytes + " bytes (" + used
            + " of " + capacity + " in use, " + retainedBytes + " of them retained for " + retained.size()
            + " requests whose holders may still write; spark.slipstream.gpu.landing.bytes)");
      }
      try {
        wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for device landing space", e);
      }
    }
  }

  /**
   * A free range of {@code bytes}, or -1 without waiting for other requests: ranges whose zeroing
   * ended are taken first, then those still being zeroed are waited for.
   */
  synchronized long tryReserve(long bytes) {
    if (closed) {
      throw new IllegalStateException("device landing region is closed");
    }
    if (bytes <= 0 || bytes > capacity) {
      return -1;
    }
    reapZeroed();
    long at = takeFree(bytes);
    while (at < 0 && !zeroing.isEmpty()) {
      Zeroing z = zeroing.pollFirst();
      z.ticket().await();
      freeZeroed(z);
      at = takeFree(bytes);
    }
    return at;
  }

  /** Gives a reserved range back: zeroed in the background, free once that ended. */
  synchronized void release(long offset, long length) {
    used -= length;
    if (closed) {
      return;
    }
    zeroing.addLast(new Zeroing(offset, length, zeroer.zero(offset, length)));
    notifyAll(); // a reserve waiting for space takes it once its zeroing ended
  }

  /**
   * Keeps a reserved range of request {@code requestId}, sent to {@code holder}, out of reach of other
   * requests until the holder finished it, was lost, or {@code releaseByNanos} passed.
   */
  synchronized Retained retain(long requestId, String holder, long offset, long length, long releaseByNanos) {
    Retained r = new Retained(requestId, holder, offset, length, clock.getAsLong(), releaseByNanos);
    if (closed) {
      used -= length;
      return r;
    }
    if (retained.putIfAbsent(requestId, r) != null) {
      throw new IllegalStateException("device write request " + requestId + " is retained already");
    }
    retainedBytes += length;
    peakRetainedBytes = Math.max(peakRetainedBytes, retainedBytes);
    return r;
  }

  /** The holder reported request {@code requestId} finished: its range, if retained, is released. */
  synchronized Retained finished(long requestId) {
    Retained r = retained.remove(requestId);
    if (r != null) {
      drop(r, Release.ANSWERED);
    }
    return r;
  }

  /** Releases every range retained for {@code holder}; returns them. */
  synchronized List<Retained> holderLost(String holder) {
    List<Retained> out = new ArrayList<>();
    for (var it = retained.values().iterator(); it.hasNext(); ) {
      Retained r = it.next();
      if (r.holder().equals(holder)) {
        it.remove();
        out.add(r);
        drop(r, Release.HOLDER_LOST);
      }
    }
    return out;
  }

  /** Releases the retained ranges whose bound has passed; returns them. */
  synchronized List<Retained> releaseDue() {
    long now = clock.getAsLong();
    List<Retained> out = new ArrayList<>();
    for (var it = retained.values().iterator(); it.hasNext(); ) {
      Retained r = it.next();
      if (now - r.releaseBy() >= 0) {
        it.remove();
        out.add(r);
        drop(r, Release.BOUND);
      }
    }
    return out;
  }

  private void drop(Retained r, Release why) {
    retainedBytes -= r.length();
    releases[why.ordinal()]++;
    release(r.offset(), r.length());
  }

  /** Moves released ranges whose zeroing ended into the free list, oldest first. */
  private void reapZeroed() {
    while (!zeroing.isEmpty() && zeroing.peekFirst().ticket().done()) {
      freeZeroed(zeroing.pollFirst());
    }
  }

  private void freeZeroed(Zeroing z) {
    z.ticket().close();
    free.give(z.offset(), z.length());
    notifyAll();
  }

  private long takeFree(long bytes) {
    long at = free.take(bytes);
    if (at >= 0) {
      used += bytes;
    }
    return at;
  }

  /**
   * Stops handing out and zeroing ranges, runs {@code drain} (the owner waits there for the zeroings
   * queued; no new one can be queued meanwhile), closes their tickets and forgets the retained ranges
   * (the memory goes with the region); returns the bytes reserved by requests that never released
   * them (retained ones not counted: they were released by the close).
   */
  synchronized long close(Runnable drain) {
    if (closed) {
      return 0;
    }
    closed = true;
    long outstanding;
    try {
      drain.run();
    } finally {
      outstanding = forgetAll();
    }
    return outstanding;
  }

  private long forgetAll() {
    for (Retained r : retained.values()) {
      used -= r.length();
      releases[Release.CLOSED.ordinal()]++;
    }
    retained.clear();
    retainedBytes = 0;
    zeroing.forEach(z -> z.ticket().close());
    zeroing.clear();
    long outstanding = used;
    used = 0;
    notifyAll();
    return outstanding;
  }
}
