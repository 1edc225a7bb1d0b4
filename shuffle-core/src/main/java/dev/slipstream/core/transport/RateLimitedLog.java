package dev.slipstream.core.transport;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;
import org.slf4j.Logger;

/**
 * A WARN log that writes at most one line per key (a peer's address) per interval; lines
 * suppressed meanwhile are counted and the next line written for that key says how many there
 * were. A peer that repeats what gets it refused cannot flood the log.
 *
 * <p>At most {@link #MAX_KEYS} keys are remembered (the oldest is forgotten first), so many peers
 * cost bounded memory; a forgotten key logs again at once.
 *
 * <p>Threading: thread-safe (one lock, held only to update the key's entry).
 */
public final class RateLimitedLog {
  /** Keys remembered at most. */
  public static final int MAX_KEYS = 1024;

  private static final class Entry {
    long lastNanos;
    long suppressed;
  }

  private final Logger log;
  private final long intervalNanos;
  private final LongSupplier clock;
  private final Map<String, Entry> entries = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
      return size() > MAX_KEYS;
    }
  };

  public RateLimitedLog(Logger log, long intervalNanos) {
    this(log, intervalNanos, System::nanoTime);
  }

  /** @param clock nanoseconds, as {@link System#nanoTime} */
  public RateLimitedLog(Logger log, long intervalNanos, LongSupplier clock) {
    if (intervalNanos <= 0) {
      throw new IllegalArgumentException("rate-limited log: interval " + intervalNanos + " ns, expected > 0");
    }
    this.log = log;
    this.intervalNanos = intervalNanos;
    this.clock = clock;
  }

  /**
   * Logs {@code message} at WARN unless a line for {@code key} was written less than the interval
   * ago; returns whether it was written. The message should already be escaped ({@link PeerText}).
   */
  public boolean warn(String key, String message) {
    return warn(key, message, null);
  }

  /** As {@link #warn(String, String)}, with {@code cause}'s stack trace when the line is written (null: none). */
  public boolean warn(String key, String message, Throwable cause) {
    long suppressed;
    long now = clock.getAsLong();
    synchronized (entries) {
      Entry e = entries.get(key);
      if (e == null) {
        e = new Entry();
        entries.put(key, e);
      } else if (now - e.lastNanos < intervalNanos) {
        e.suppressed++;
        return false;
      }
      e.lastNanos = now;
      suppressed = e.suppressed;
      e.suppressed = 0;
    }
    String line = suppressed == 0 ? message : message + " (" + suppressed + " similar lines for " + key
        + " suppressed in the last " + intervalNanos / 1_000_000_000L + " s)";
    if (cause == null) {
      log.warn(line);
    } else {
      log.warn(line, cause);
    }
    return true;
  }

  /** Lines not written since the last one written for {@code key}. */
  public long suppressed(String key) {
    synchronized (entries) {
      Entry e = entries.get(key);
      return e == null ? 0 : e.suppressed;
    }
  }
}
