package dev.slipstream.core.memory;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A named node in the accounting tree of registered memory. Reservations count against this
 * pool's limit and every ancestor's. {@link #close()} fails loudly when anything is still
 * reserved, so leaks show in tests.
 *
 * <p>Threading: thread-safe (reservations synchronise on the root).
 */
public final class MemoryPool implements AutoCloseable {
  private final String name;
  private final long limit;
  private final MemoryPool parent;
  private final Object lock;
  private final List<MemoryPool> children = new CopyOnWriteArrayList<>();
  private long used;
  private long peak;
  private boolean closed;

  private MemoryPool(String name, long limit, MemoryPool parent) {
    this.name = name;
    this.limit = limit;
    this.parent = parent;
    this.lock = parent == null ? new Object() : parent.lock;
  }

  public static MemoryPool root(String name, long limit) {
    return new MemoryPool(name, limit, null);
  }

  public MemoryPool child(String childName, long childLimit) {
    synchronized (lock) {
      if (closed) {
        throw new IllegalStateException("pool " + path() + " is closed");
      }
      MemoryPool c = new MemoryPool(childName, childLimit, this);
      children.add(c);
      return c;
    }
  }

  public String path() {
    return parent == null ? name : parent.path() + "/" + name;
  }

  /** Reserves {@code bytes} if this pool and every ancestor have room; false otherwise. */
  public boolean tryReserve(long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException("reserve " + bytes + " bytes: negative");
    }
    synchronized (lock) {
      for (MemoryPool p = this; p != null; p = p.parent) {
        if (p.closed) {
          throw new IllegalStateException("pool " + p.path() + " is closed");
        }
        if (p.used + bytes > p.limit) {
          return false;
        }
      }
      for (MemoryPool p = this; p != null; p = p.parent) {
        p.used += bytes;
        p.peak = Math.max(p.peak, p.used);
      }
      return true;
    }
  }

  public void release(long bytes) {
    synchronized (lock) {
      if (bytes < 0 || bytes > used) {
        throw new IllegalStateException("pool " + path() + ": release of " + bytes + " bytes, but " + used + " reserved");
      }
      for (MemoryPool p = this; p != null; p = p.parent) {
        p.used -= bytes;
      }
    }
  }

  public long used() {
    synchronized (lock) {
      return used;
    }
  }

  public long peak() {
    synchronized (lock) {
      return peak;
    }
  }

  public long limit() {
    return limit;
  }

  /**
   * Closes this pool and its children.
   *
   * @throws IllegalStateException naming every pool that still has bytes reserved
   */
  @Override
  public void close() {
    List<String> leaks = new ArrayList<>();
    synchronized (lock) {
      closeLocked(leaks);
      if (parent != null) {
        parent.children.remove(this);
      }
    }
    if (!leaks.isEmpty()) {
      throw new IllegalStateException("memory still reserved at close: " + String.join(", ", leaks));
    }
  }

  private void closeLocked(List<String> leaks) {
    for (MemoryPool c : children) {
      c.closeLocked(leaks);
    }
    children.clear();
    if (!closed && used != 0 && leaks.stream().noneMatch(l -> l.startsWith(path() + "/"))) {
      leaks.add(path() + "=" + used + " bytes");
    }
    closed = true;
  }

  @Override
  public String toString() {
    return path() + " " + used() + "/" + limit;
  }
}
