package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.SlipStatus;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The completion thread of a {@link PushScheduler} ({@code slipstream-gpu-push-completion}):
 * polls the streams of the pushes in flight (one {@code cuStreamQuery} each, back to back while any
 * is in flight), ends each one that finished (every queue's status checked) or passed its deadline,
 * closes the lanes set aside whose stream became idle (every {@link #RECLAIM_EVERY_NANOS}), and every
 * round lets its server fail and launch the requests waiting for a permit ({@link Rounds#schedule});
 * parks while there is nothing in flight. So no thread waits per push.
 *
 * <p>Threading: {@link #add}, {@link #wake} and {@link #start} from any thread; the rest runs on
 * its own thread, which ends once the server's round says so (closed, nothing left). Ownership: owns
 * its thread; the pushes handed to it are ended through {@link Rounds#finish}, each exactly once.
 */
final class PushCompletion {
  private static final Logger LOG = LoggerFactory.getLogger(PushCompletion.class);
  /** How often the completion thread looks whether lanes set aside became idle. */
  static final long RECLAIM_EVERY_NANOS = 100_000_000L;

  /** What the completion thread needs of its server. */
  interface Rounds {
    /** Ends {@code job} with {@code error} (null: pushed); {@code keep}: its lane may serve again. */
    void finish(PushJob job, boolean keep, TransportException error);

    /**
     * The server's part of a round at {@code now}: fails waiting requests past their deadline and
     * launches waiting ones as permits free; false once the server is closed and nothing is left
     * ({@code drained}, asked under the server's lock: the completion thread holds no push), when
     * the thread ends.
     */
    boolean schedule(long now, BooleanSupplier drained);
  }

  private final GpuContext ctx;
  private final PushLanes lanes;
  private final Rounds server;
  /** Launched pushes handed to the completion thread. */
  private final ConcurrentLinkedQueue<PushJob> launched = new ConcurrentLinkedQueue<>();
  /** The thread, while it runs (guarded by this). */
  private volatile Thread thread;
  private long lastReclaim = System.nanoTime();

  PushCompletion(GpuContext ctx, PushLanes lanes, Rounds server) {
    this.ctx = ctx;
    this.lanes = lanes;
    this.server = server;
  }

  /** Starts the thread unless it runs. */
  synchronized void start() {
    if (thread == null) {
      Thread t = new Thread(this::run, "slipstream-gpu-push-completion");
      t.setDaemon(true);
      thread = t;
      t.start();
    }
  }

  /** Hands a launched push to the thread, which ends it. */
  void add(PushJob job) {
    launched.add(job);
    wake();
  }

  /** Wakes the thread for a round (a request waits, or the server closes). */
  void wake() {
    LockSupport.unpark(thread);
  }

  /** Waits up to {@code millis} for the thread to end; whether it ended (or never ran). */
  synchronized boolean awaitEnd(long millis) {
    long deadline = System.nanoTime() + millis * 1_000_000L;
    while (thread != null && deadline - System.nanoTime() > 0) {
      try {
        wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000L));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return thread == null;
  }

  private void run() {
    List<PushJob> running = new ArrayList<>();
    ctx.makeCurrent();
    for (;;) {
      try {
        if (!round(running)) {
          synchronized (this) {
            thread = null;
            notifyAll();
          }
          return;
        }
      } catch (RuntimeException e) {
        LOG.error("Push scheduler completion round failed", e);
      }
      if (running.isEmpty() && launched.isEmpty()) {
        LockSupport.parkNanos(this, 50_000_000L); // woken by a launch, a waiting request or close
      } else {
        Thread.onSpinWait();
      }
    }
  }

  /** One round over {@code running}; false once the thread is to end. */
  private boolean round(List<PushJob> running) {
    for (PushJob j = launched.poll(); j != null; j = launched.poll()) {
      running.add(j);
    }
    long now = System.nanoTime();
    if (now - lastReclaim > RECLAIM_EVERY_NANOS) {
      lastReclaim = now;
      lanes.reclaim();
    }
    for (Iterator<PushJob> it = running.iterator(); it.hasNext(); ) {
      PushJob j = it.next();
      boolean ended;
      try {
        ended = j.lane.finished();
      } catch (RuntimeException e) {
        it.remove();
        server.finish(j, false, new TransportException(TransportError.INTERNAL, "device write request "
            + j.req.requestId() + ": push failed: " + e.getMessage(), e));
        continue;
      }
      if (ended) {
        it.remove();
        j.marks[PushScheduler.MARK_ENDED] = j.lane.endedNanos();
        ended(j);
      } else if (now - j.deadline > 0) {
        it.remove();
        server.finish(j, false, new TransportException(TransportError.TIMEOUT, "device write request "
            + j.req.requestId() + ": push failed: still running after " + j.timeoutMs + " ms (answered once it"
            + " ended)"));
      }
    }
    return server.schedule(now, () -> running.isEmpty() && launched.isEmpty());
  }

  /** A push that ended: every queue's status checked; a failing queue's text makes the refusal. */
  private void ended(PushJob j) {
    SlipStatus[] st;
    try {
      st = j.lane.statuses();
    } catch (RuntimeException e) {
      server.finish(j, false, new TransportException(TransportError.INTERNAL, "device write request "
          + j.req.requestId() + ": push failed: " + e.getMessage(), e));
      return;
    }
    for (int q = 0; q < st.length; q++) {
      if (st[q] != SlipStatus.SLIP_OK) {
        String why;
        try {
          j.lane.error();
          why = "push queue " + q + " ended with " + st[q];
        } catch (RuntimeException ex) {
          why = "push queue " + q + ": " + st[q] + ": " + ex.getMessage();
        }
        // Queue pairs of a NIC link stay in the error state: the link is replaced, and the lane,
        // no longer current, is closed instead of kept.
        j.lane.failed();
        server.finish(j, true, PushAdmission.refused(j.req, why));
        return;
      }
    }
    server.finish(j, true, null);
  }
}
