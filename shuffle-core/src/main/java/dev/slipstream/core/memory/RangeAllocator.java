package dev.slipstream.core.memory;

import java.util.Map;
import java.util.TreeMap;

/**
 * Ranges of one region {@code [0, capacity)}, handed out first fit in whole units and coalesced
 * with their free neighbours when given back. It keeps only offsets: the memory is the owner's
 * (host landing memory, a device landing region), and so is what happens to a range between its
 * release and its return here (the device side zeroes it first, or keeps it retained while a
 * holder may still write into it).
 *
 * <p>Threading: thread-safe; nothing waits here (owners that wait for space do so on their own
 * monitor, and call {@link #take} again when something was given back). Ownership: the caller
 * gives each range back exactly once, with the offset and length it got.
 */
public final class RangeAllocator {
  private final long capacity;
  private final long unit;
  private final TreeMap<Long, Long> free = new TreeMap<>(); // offset -> length
  private long used;
  private long peak;

  /**
   * @param capacity bytes of the region, rounded down to whole units
   * @param unit the allocation granularity in bytes (1: exact sizes)
   */
  public RangeAllocator(long capacity, long unit) {
    if (unit <= 0) {
      throw new IllegalArgumentException("allocation unit of " + unit + " bytes, expected > 0");
    }
    this.unit = unit;
    this.capacity = capacity / unit * unit;
    if (this.capacity <= 0) {
      throw new IllegalArgumentException("a region of " + capacity + " bytes holds no unit of " + unit + " bytes");
    }
    free.put(0L, this.capacity);
  }

  public long capacity() {
    return capacity;
  }

  public long unit() {
    return unit;
  }

  /** {@code bytes} (at least 1) rounded up to whole units: the length {@link #take} hands out. */
  public long rounded(long bytes) {
    long b = Math.max(1, bytes);
    if (b > capacity) {
      return b;
    }
    return (b + unit - 1) / unit * unit;
  }

  /**
   * The offset of a free range of {@link #rounded rounded(bytes)} bytes, lowest first fit, or -1
   * when no free range is that long (or {@code bytes} exceeds the capacity).
   */
  public synchronized long take(long bytes) {
    long want = rounded(bytes);
    if (want > capacity) {
      return -1;
    }
    for (Map.Entry<Long, Long> e : free.entrySet()) {
      if (e.getValue() >= want) {
        long off = e.getKey();
        long len = e.getValue();
        free.remove(off);
        if (len > want) {
          free.put(off + want, len - want);
        }
        used += want;
        peak = Math.max(peak, used);
        return off;
      }
    }
    return -1;
  }

  /**
   * Gives back the range {@code [offset, offset + length)} that {@link #take} handed out, merged
   * with its free neighbours.
   *
   * @throws IllegalArgumentException when the range is not unit-aligned, lies outside the region
   *     or overlaps free space (given back twice, or never taken), naming the range; nothing changes
   */
  public synchronized void give(long offset, long length) {
    if (offset < 0 || length <= 0 || offset % unit != 0 || length % unit != 0 || offset > capacity - length) {
      throw new IllegalArgumentException("range " + offset + "+" + length + " is not a range of whole " + unit
          + "-byte units inside [0, " + capacity + ")");
    }
    Map.Entry<Long, Long> below = free.floorEntry(offset);
    Map.Entry<Long, Long> above = free.ceilingEntry(offset);
    if ((below != null && below.getKey() + below.getValue() > offset)
        || (above != null && above.getKey() < offset + length)) {
      throw new IllegalArgumentException("range " + offset + "+" + length + " overlaps free space (given back"
          + " twice, or never taken)");
    }
    long off = offset;
    long len = length;
    if (below != null && below.getKey() + below.getValue() == off) {
      off = below.getKey();
      len += below.getValue();
      free.remove(below.getKey());
    }
    Long aboveLen = free.remove(offset + length);
    if (aboveLen != null) {
      len += aboveLen;
    }
    free.put(off, len);
    used -= length;
  }

  /** Bytes handed out and not given back. */
  public synchronized long used() {
    return used;
  }

  /** The most bytes ever handed out at once. */
  public synchronized long peak() {
    return peak;
  }

  /** The length of the longest free range. */
  public synchronized long largestFree() {
    long max = 0;
    for (long len : free.values()) {
      max = Math.max(max, len);
    }
    return max;
  }
}
