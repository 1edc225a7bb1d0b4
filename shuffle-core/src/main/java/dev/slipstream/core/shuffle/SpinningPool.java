package dev.slipstream.core.shuffle;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * A fixed pool whose idle threads keep polling a lock-free queue, back to back, for a while after
 * their last task before they park. A task handed over while a thread polls starts within
 * microseconds; waking a parked thread costs 50 to 150 microseconds on a GPU host whose cores went
 * idle (docs/gpu.md, "Waking threads"), which a device write request would pay on its hand-off to
 * a serving thread. For bursts of latency-bound work; the price is up to {@code threads} busy
 * cores for {@code spinNanos} after each task. With {@code spinNanos} 0 it is a plain pool whose
 * threads park when idle.
 *
 * <p>The queue takes no lock: a {@link java.util.concurrent.LinkedBlockingQueue} polled back to
 * back by several threads makes every hand-off wait for its lock (measured slower than parking).
 * {@link #execute} unparks one parked thread only when none polls.
 *
 * <p>Threading: thread-safe. {@link #shutdown} lets queued tasks run; {@link #shutdownNow}
 * interrupts the threads and returns the tasks not started.
 */
public final class SpinningPool extends AbstractExecutorService {
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<Thread> parked = new ConcurrentLinkedQueue<>();
  private final List<Thread> threads = new ArrayList<>();
  private final long spinNanos;
  /** Threads polling (not parked, not running a task). */
  private final AtomicInteger polling = new AtomicInteger();
  private final AtomicInteger alive = new AtomicInteger();
  private final int size;
  private final ThreadFactory factory;
  private volatile boolean started;
  private volatile boolean shutdown;

  private SpinningPool(int n, long spinNanos, ThreadFactory factory) {
    this.spinNanos = spinNanos;
    this.size = n;
    this.factory = factory;
  }

  /** Makes the threads with the first task (a pool that never gets one holds no thread). */
  private synchronized void start() {
    if (started || shutdown) {
      return;
    }
    for (int i = 0; i < size; i++) {
      threads.add(factory.newThread(this::work));
    }
    alive.set(size);
    threads.forEach(Thread::start);
    started = true;
  }

  /** A pool of {@code threads} threads from {@code factory} whose idle threads poll for {@code spinNanos} before parking. */
  public static SpinningPool fixed(int threads, long spinNanos, ThreadFactory factory) {
    if (threads < 1 || spinNanos < 0) {
      throw new IllegalArgumentException("spinning pool: " + threads + " threads, " + spinNanos
          + " ns of polling; expected at least 1 thread and a polling time >= 0");
    }
    return new SpinningPool(threads, spinNanos, factory);
  }

  @Override
  public void execute(Runnable task) {
    if (task == null) {
      throw new NullPointerException("task");
    }
    if (shutdown) {
      throw new RejectedExecutionException("spinning pool is shut down");
    }
    if (!started) {
      start();
      if (!started) {
        throw new RejectedExecutionException("spinning pool is shut down");
      }
    }
    tasks.offer(task);
    if (polling.get() == 0) {
      Thread t = parked.poll();
      if (t != null) {
        LockSupport.unpark(t);
      }
    }
  }

  private void work() {
    try {
      long last = System.nanoTime();
      polling.incrementAndGet();
      for (;;) {
        Runnable r = tasks.poll();
        if (r != null) {
          polling.decrementAndGet();
          try {
            r.run();
          } catch (RuntimeException | Error e) {
            Thread t = Thread.currentThread();
            t.getUncaughtExceptionHandler().uncaughtException(t, e);
          } finally {
            polling.incrementAndGet();
          }
          last = System.nanoTime();
          continue;
        }
        if (shutdown && (tasks.isEmpty() || Thread.currentThread().isInterrupted())) {
          return;
        }
        if (System.nanoTime() - last < spinNanos) {
          Thread.onSpinWait();
          continue;
        }
        // Park: announce it, then look once more (a task offered before the announcement was seen
        // by no one who would unpark this thread).
        Thread me = Thread.currentThread();
        polling.decrementAndGet();
        parked.offer(me);
        if (tasks.isEmpty() && !shutdown) {
          LockSupport.park(this);
        }
        parked.remove(me);
        polling.incrementAndGet();
        last = System.nanoTime();
      }
    } finally {
      polling.decrementAndGet();
      alive.decrementAndGet();
      synchronized (this) {
        notifyAll();
      }
    }
  }

  @Override
  public synchronized void shutdown() {
    shutdown = true;
    threads.forEach(LockSupport::unpark);
  }

  @Override
  public synchronized List<Runnable> shutdownNow() {
    shutdown = true;
    List<Runnable> left = new ArrayList<>();
    for (Runnable r = tasks.poll(); r != null; r = tasks.poll()) {
      left.add(r);
    }
    threads.forEach(Thread::interrupt);
    return left;
  }

  @Override
  public boolean isShutdown() {
    return shutdown;
  }

  @Override
  public boolean isTerminated() {
    return shutdown && alive.get() == 0;
  }

  @Override
  public synchronized boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
    long end = System.nanoTime() + unit.toNanos(timeout);
    while (!isTerminated()) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }
}
