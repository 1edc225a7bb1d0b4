package dev.slipstream.core.shuffle;

import dev.slipstream.core.memory.RangeAllocator;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The executor's landing memory, handed out in ranges of whole units by a {@link RangeAllocator}
 * (first fit, coalescing on free). The memory as a whole is registered with no transport: each write request registers
 * its own range under a fresh region id and key and revokes that registration when the request
 * ends ({@link ShuffleNode}), so a range is writable only by the request it was reserved for, and
 * only while that request is open.
 *
 * <p>Threading: thread-safe; {@link #allocate} may wait, always with a deadline. Ownership: the
 * caller frees each range exactly once, and only once no registration of it is open.
 */
public final class LandingPool {
  /** Allocation granularity; also keeps signal slots 8-byte aligned. */
  public static final int UNIT = 4096;

  /** A range of landing memory. Freed exactly once. */
  public final class Range {
    private final long offset;
    private final long length;
    private boolean freed;

    private Range(long offset, long length) {
      this.offset = offset;
      this.length = length;
    }

    public long offset() { return offset; }
    public long length() { return length; }

    /** A view of {@code [offset + at, offset + at + len)}. */
    public ByteBuffer view(long at, long len) {
      if (at < 0 || len < 0 || at > length || len > length - at) {
        throw new IndexOutOfBoundsException("view " + at + "+" + len + " outside landing range of length " + length);
      }
      ByteBuffer b = memory.duplicate().clear();
      b.position((int) (offset + at)).limit((int) (offset + at + len));
      return b.slice();
    }

    /** The whole range, position 0, for registering it with a transport. */
    ByteBuffer memory() {
      return view(0, length);
    }

    public void free() {
      LandingPool.this.free(this);
    }
  }

  private final ByteBuffer memory;
  private final RangeAllocator ranges;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition freed = lock.newCondition();

  /** @param memory a direct buffer; the pool covers {@code [position, limit)} rounded down to whole units */
  public LandingPool(ByteBuffer memory) {
    if (!memory.isDirect()) {
      throw new IllegalArgumentException("landing memory must be a direct buffer, got a heap buffer");
    }
    this.memory = memory.slice();
    this.ranges = new RangeAllocator(this.memory.capacity(), UNIT); // refuses memory without one whole unit
  }

  public long capacity() {
    return ranges.capacity();
  }

  /** A range of at least {@code bytes}, or null when none is free now. */
  public Range tryAllocate(long bytes) {
    long want = ranges.rounded(bytes);
    long at = ranges.take(want);
    return at < 0 ? null : new Range(at, want);
  }

  /**
   * Waits up to {@code timeoutNanos} for a range of at least {@code bytes}.
   *
   * @return the range, or null when the deadline passed
   * @throws IllegalArgumentException when {@code bytes} exceeds the whole pool
   */
  public Range allocate(long bytes, long timeoutNanos) throws InterruptedException {
    long want = ranges.rounded(bytes);
    if (want > ranges.capacity()) {
      throw new IllegalArgumentException("landing request of " + bytes + " bytes exceeds the landing pool ("
          + ranges.capacity() + " bytes)");
    }
    long remaining = timeoutNanos;
    lock.lock();
    try {
      while (true) {
        Range r = tryAllocate(want);
        if (r != null) {
          return r;
        }
        if (remaining <= 0) {
          return null;
        }
        remaining = freed.awaitNanos(remaining);
      }
    } finally {
      lock.unlock();
    }
  }

  private void free(Range r) {
    lock.lock();
    try {
      if (r.freed) {
        return;
      }
      r.freed = true;
      ranges.give(r.offset, r.length);
      freed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  public long used() {
    return ranges.used();
  }

  public long peak() {
    return ranges.peak();
  }
}
