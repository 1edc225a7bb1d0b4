package dev.slipstream.core.shuffle;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * A fixed thread pool whose idle threads keep polling for work, back to back, for a while after
 * their last task before they park. A task handed over while a thread polls starts within
 * microseconds; waking a parked thread costs tens to hundreds of microseconds on a GPU host (more
 * when its core went to sleep), which a device write request's path would pay on every hand-off
 * (docs/gpu.md, runs 11 to 14: 70 to 200 us between a request's arrival and a serving thread).
 * For bursts of latency-bound work; the price is up to {@code threads} busy cores for
 * {@code spinNanos} after each burst.
 *
 * <p>Threading: as {@link ThreadPoolExecutor}; {@code shutdownNow} interrupts polling threads too.
 */
public final class SpinningPool {
  private SpinningPool() {}

  /** A pool of {@code threads} threads from {@code factory} whose idle threads poll for {@code spinNanos} before parking. */
  public static ExecutorService fixed(int threads, long spinNanos, ThreadFactory factory) {
    if (threads < 1 || spinNanos < 0) {
      throw new IllegalArgumentException("spinning pool: " + threads + " threads, " + spinNanos
          + " ns of polling; expected at least 1 thread and a polling time >= 0");
    }
    return new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new SpinningQueue(spinNanos), factory);
  }

  /** A task queue whose blocking takes poll back to back for {@code spinNanos} first. */
  static final class SpinningQueue extends LinkedBlockingQueue<Runnable> {
    private static final long serialVersionUID = 1L;
    private final long spinNanos;

    SpinningQueue(long spinNanos) {
      this.spinNanos = spinNanos;
    }

    @Override
    public Runnable take() throws InterruptedException {
      Runnable r = spin(spinNanos);
      return r != null ? r : super.take();
    }

    @Override
    public Runnable poll(long timeout, TimeUnit unit) throws InterruptedException {
      long wait = unit.toNanos(timeout);
      long spun = Math.min(wait, spinNanos);
      Runnable r = spin(spun);
      return r != null ? r : super.poll(wait - spun, TimeUnit.NANOSECONDS);
    }

    private Runnable spin(long nanos) throws InterruptedException {
      long end = System.nanoTime() + nanos;
      do {
        Runnable r = poll();
        if (r != null) {
          return r;
        }
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
        Thread.onSpinWait();
      } while (System.nanoTime() - end < 0);
      return null;
    }
  }
}
