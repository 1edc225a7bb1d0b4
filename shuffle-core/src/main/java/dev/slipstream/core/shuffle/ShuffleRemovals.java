package dev.slipstream.core.shuffle;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Which shuffles a map-output store removed, and when, counted in removals. A map task of a stage
 * Spark was cancelling as it removed the shuffle (adaptive execution stops the stages a finished
 * query no longer needs) can still commit afterwards: a task notes {@link #mark()} when it begins,
 * and its output is dropped at commit when its shuffle was {@linkplain #removedSince removed since}
 * instead of held until the executor ends. An output of a task begun after the removal is kept:
 * Spark registers a removed shuffle again under the same id when a plan whose shuffles were cleaned
 * up runs again (SQL's shuffle cleanup, then a second action on the same Dataset).
 *
 * <p>Threading: thread-safe. A store makes {@link #removed} atomic with its commits of the same
 * shuffle. One entry per removed shuffle, for the executor's life.
 */
public final class ShuffleRemovals {
  private final AtomicLong removals = new AtomicLong();
  /** The removal count at each removed shuffle's last removal. */
  private final Map<Integer, Long> removedAt = new ConcurrentHashMap<>();

  /** The count of removals so far, which a map task notes when it begins. */
  public long mark() {
    return removals.get();
  }

  /** Records the removal of {@code shuffleId}. */
  public void removed(int shuffleId) {
    removedAt.put(shuffleId, removals.incrementAndGet());
  }

  /** Whether {@code shuffleId} was removed after a task began at mark {@code begun}. */
  public boolean removedSince(int shuffleId, long begun) {
    Long at = removedAt.get(shuffleId);
    return at != null && begun < at;
  }
}
