package dev.slipstream.gpu.shuffle;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Push lanes set aside by a {@link PushScheduler} after a push that failed or passed its
 * deadline: its kernel may still be running, so the lane is not reused, and what its request waits
 * for (the answer to the reader, the map outputs' pins) is held back until the lane's stream is
 * idle. A holder's answer therefore always means that the push can store nothing more into the
 * reader's landing range, which is what lets the reader hand that range out again
 * ({@link DeviceLanding#finished}).
 *
 * <p>Generic over the lane so that tests drive it with fakes. Threading: thread-safe; the actions
 * run on the calling thread, outside the lock. Ownership: closes the lanes it was given.
 */
final class AsideLanes<L> {
  private static final Logger LOG = LoggerFactory.getLogger(AsideLanes.class);

  /** What this needs of a lane. */
  interface Lanes<L> {
    /** Whether nothing is queued or running on the lane's stream; throws on a device error. */
    boolean idle(L lane);

    void close(L lane);
  }

  private final Lanes<L> lanes;
  /** Lane -> what runs once it is idle (or closed), in the order set aside. */
  private final Map<L, List<Runnable>> aside = new LinkedHashMap<>();
  private long reclaimed;

  AsideLanes(Lanes<L> lanes) {
    this.lanes = lanes;
  }

  /** Sets {@code lane} aside; {@code whenIdle} runs once its stream is idle or the lanes are closed. */
  synchronized void add(L lane, Runnable whenIdle) {
    aside.computeIfAbsent(lane, k -> new ArrayList<>()).add(whenIdle);
  }

  synchronized int size() {
    return aside.size();
  }

  /** Lanes closed since start because their stream became idle. */
  synchronized long reclaimed() {
    return reclaimed;
  }

  /**
   * Closes the lanes whose stream became idle and runs what waited for them; a lane whose stream
   * reports a device error stays aside (nothing is known of its kernel). Returns how many were closed.
   */
  int reclaim() {
    List<L> candidates;
    synchronized (this) {
      if (aside.isEmpty()) {
        return 0;
      }
      candidates = new ArrayList<>(aside.keySet());
    }
    List<L> idle = new ArrayList<>();
    for (L lane : candidates) {
      try {
        if (lanes.idle(lane)) {
          idle.add(lane);
        }
      } catch (RuntimeException e) {
        // A device error on its stream: it stays aside until the server closes.
      }
    }
    List<Runnable> run = new ArrayList<>();
    List<L> closing = new ArrayList<>();
    synchronized (this) {
      for (L lane : idle) {
        List<Runnable> r = aside.remove(lane);
        if (r != null) {
          closing.add(lane);
          run.addAll(r);
          reclaimed++;
        }
      }
    }
    finish(closing, run);
    return closing.size();
  }

  /** Closes every lane set aside and runs what waited for them (the server is closing). */
  void closeAll() {
    List<L> closing;
    List<Runnable> run = new ArrayList<>();
    synchronized (this) {
      closing = new ArrayList<>(aside.keySet());
      aside.values().forEach(run::addAll);
      aside.clear();
    }
    finish(closing, run);
  }

  private void finish(List<L> closing, List<Runnable> run) {
    for (L lane : closing) {
      try {
        lanes.close(lane);
      } catch (RuntimeException e) {
        LOG.warn("Closing a push lane set aside failed: {}", e.toString());
      }
    }
    for (Runnable r : run) {
      try {
        r.run();
      } catch (RuntimeException e) {
        LOG.warn("Finishing a request whose push lane was set aside failed", e);
      }
    }
  }
}
