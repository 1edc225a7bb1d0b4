package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;

/**
 * Encodes (compresses, encrypts) one map task's partitions on a shared pool while the task goes
 * on serializing: the task writes each partition's raw bytes into a stream of this class
 * ({@link #partition}), which hands them over in chunks; a lane per partition runs the chunks, in
 * order, through that partition's encoding stream into its sink. So the codec runs on cores the
 * task threads leave idle, and a partition's bytes reach its sink exactly as they would had the
 * task encoded them itself.
 *
 * <p>Memory: at most {@code budgetBytes} of chunks handed over and not yet encoded. Beyond that
 * the task never idles while work of its own waits for a pool thread: it encodes the chunk itself
 * (after the chunks its partition has queued) when no pool thread is on that lane, and otherwise
 * runs the queued chunks of another of its lanes that no pool thread has started, until the
 * budget has room. It waits only while every lane of its with queued work is running on the pool.
 * So a pool busy with other tasks' work, or one that never runs anything, leaves the task encoding
 * no less than it would alone; the same holds at {@link #finish()} and {@link #abort()}.
 *
 * <p>Failure: the first failure of any lane stops every lane and is rethrown to the task at its
 * next hand-over or at {@link #finish()}. {@link #abort()} drops what is queued and waits for the
 * chunks being encoded, so that the caller may free the sinks after it.
 *
 * <p>Threading: one task thread writes the streams and calls {@link #finish()} / {@link #abort()};
 * a lane's chunks run on one thread at a time (a pool thread or the task), in the order they were
 * handed over. A pool that refuses work leaves it to the task thread.
 */
public final class EncodeLanes {

  /** Wraps a partition's sink in its encoding stream (for Spark: the serializer manager's codec). */
  @FunctionalInterface
  public interface Encoder {
    OutputStream encode(int partition, OutputStream sink) throws IOException;
  }

  /** How long the task waits for a pool thread's chunk before it looks again for work to take. */
  private static final long RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

  private final Executor pool;
  private final Encoder encoder;
  private final IntFunction<OutputStream> sinks;
  private final int chunkBytes;
  private final long budgetBytes;
  private final Lane[] lanes;
  /** Lanes the task has written, in the order it first wrote them (task thread only). */
  private final List<Lane> opened = new ArrayList<>();
  /** Where the task's next search for a lane to take up starts (task thread only). */
  private int helpCursor;
  private final ConcurrentLinkedQueue<byte[]> spare = new ConcurrentLinkedQueue<>();
  /** Chunk bytes handed over and not yet encoded; only the task adds to it. */
  private final AtomicLong inFlight = new AtomicLong();
  /**
   * The task is about to wait (for room, or for the lanes to be idle): threads that free room or
   * end a lane's work then wake it through this object's monitor; otherwise they take no lock.
   */
  private volatile boolean taskWaits;
  private volatile Throwable failure;
  private volatile boolean stopped;
  /** Raw bytes encoded on the task thread and on pool threads. */
  private final AtomicLong bytesOnTask = new AtomicLong();
  private final AtomicLong bytesOnPool = new AtomicLong();

  /**
   * @param sinks each partition's sink, asked for once on the task thread when the task first writes the partition
   * @param chunkBytes the unit handed over
   * @param budgetBytes chunk bytes in flight at most (at least one chunk)
   */
  public EncodeLanes(Executor pool, Encoder encoder, IntFunction<OutputStream> sinks, int partitions, int chunkBytes,
                     long budgetBytes) {
    if (chunkBytes <= 0 || budgetBytes < chunkBytes) {
      throw new IllegalArgumentException("encode-ahead budget " + budgetBytes + " bytes must hold at least one chunk of "
          + chunkBytes + " bytes");
    }
    this.pool = pool;
    this.encoder = encoder;
    this.sinks = sinks;
    this.chunkBytes = chunkBytes;
    this.budgetBytes = budgetBytes;
    this.lanes = new Lane[partitions];
  }

  /** The raw stream of {@code partition}, created on first use; valid until finish or abort. */
  public OutputStream partition(int partition) {
    Lane l = lanes[partition];
    if (l == null) {
      l = new Lane(partition, sinks.apply(partition));
      lanes[partition] = l;
      opened.add(l);
    }
    return l.input;
  }

  /**
   * Hands over every partition's last chunk, ends each partition's encoding stream (flushing the
   * codec into the sink), runs what no pool thread has started, and waits until all lanes are done.
   *
   * @throws IOException the first lane failure, or interruption while waiting
   */
  public void finish() throws IOException {
    checkFailure();
    for (Lane l : opened) {
      l.input.handOver();
      l.submit(Lane.END);
    }
    for (Lane l : opened) {
      l.drain(true);
    }
    try {
      awaitIdle(true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while waiting for the partitions' encoding");
    }
    checkFailure();
  }

  /** Drops what is queued and waits for the chunks being encoded. Idempotent; after it nothing touches a sink. */
  public void abort() {
    stopped = true;
    for (Lane l : opened) {
      l.drain(true); // drops what no pool thread has started
    }
    try {
      awaitIdle(false); // the sinks must not be freed under a running lane, interrupted or not
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible wait was interrupted", e);
    }
  }

  /** Chunk bytes handed over and not yet encoded. */
  long inFlightBytes() {
    return inFlight.get();
  }

  /** Raw bytes the task encoded itself (its own beyond the budget, and queued ones it took up). */
  public long bytesEncodedOnTask() {
    return bytesOnTask.get();
  }

  /** Raw bytes the pool threads encoded. */
  public long bytesEncodedOnPool() {
    return bytesOnPool.get();
  }

  private void checkFailure() throws IOException {
    Throwable f = failure;
    if (f == null) {
      return;
    }
    if (f instanceof IOException io) {
      throw new IOException(io.getMessage(), io);
    }
    if (f instanceof Error e) {
      throw e;
    }
    throw new IOException("encoding a partition failed: " + f, f);
  }

  /**
   * Waits until no lane has work queued or running. Uninterruptible unless asked: an interrupt
   * then only comes back as the thread's flag once the lanes are idle.
   */
  private void awaitIdle(boolean interruptible) throws InterruptedException {
    boolean interrupted = false;
    taskWaits = true;
    try {
      for (Lane l : opened) {
        synchronized (this) {
          while (l.pending.get() > 0) {
            try {
              wait();
            } catch (InterruptedException e) {
              if (interruptible) {
                throw e;
              }
              interrupted = true;
            }
          }
        }
      }
    } finally {
      taskWaits = false;
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Wakes the task if it waits (it sets {@code taskWaits} before it looks at what it waits for). */
  private void wakeTask() {
    if (taskWaits) {
      synchronized (this) {
        notifyAll();
      }
    }
  }

  /** Task thread: takes {@code bytes} of the budget if they fit (or nothing is in flight), without waiting. */
  private boolean tryReserve(int bytes) {
    long f = inFlight.get(); // lanes only lower it meanwhile
    if (f > 0 && f + bytes > budgetBytes) {
      return false;
    }
    inFlight.addAndGet(bytes);
    return true;
  }

  /** Task thread: waits a little for a pool thread to finish a chunk while {@code bytes} more would not fit. */
  private void awaitRoom(int bytes) throws IOException {
    taskWaits = true;
    try {
      synchronized (this) {
        long f = inFlight.get();
        if (f > 0 && f + bytes > budgetBytes && failure == null) {
          TimeUnit.NANOSECONDS.timedWait(this, RECHECK_NANOS);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while waiting for the encoding lanes");
    } finally {
      taskWaits = false;
    }
  }

  /**
   * Task thread: runs the queued chunks of one lane no pool thread has started, searching from
   * where the last search ended; false when there is none.
   */
  private boolean takeUpOne() {
    int n = opened.size();
    for (int i = 0; i < n; i++) {
      Lane l = opened.get((helpCursor + i) % n);
      if (!l.work.isEmpty() && !l.running.get() && l.drain(true)) {
        helpCursor = (helpCursor + i + 1) % n;
        return true;
      }
    }
    return false;
  }

  private void release(byte[] chunk) {
    inFlight.addAndGet(-chunk.length);
    spare.add(chunk);
    wakeTask();
  }

  private void fail(Throwable t) {
    synchronized (this) {
      if (failure == null) {
        failure = t;
      }
      notifyAll();
    }
  }

  /** A chunk handed over ({@code bytes} null: the end of the partition's encoding). */
  private record Item(byte[] bytes, int length) {}

  /**
   * One partition: its raw stream (task thread) and its queue of work, which runs on whichever
   * thread holds {@code running} (a pool thread, or the task when it takes the lane up).
   */
  private final class Lane implements Runnable {
    static final Item END = new Item(null, 0);

    final int partition;
    final RawStream input = new RawStream(this);
    final ConcurrentLinkedQueue<Item> work = new ConcurrentLinkedQueue<>();
    /** Held by the one thread running this lane's work. */
    final AtomicBoolean running = new AtomicBoolean();
    /** A pool job of this lane is queued and has not started. */
    final AtomicBoolean scheduled = new AtomicBoolean();
    /** Items queued or running. */
    final AtomicInteger pending = new AtomicInteger();
    final OutputStream sink;
    /** The partition's encoding stream over the sink, opened by the first chunk. */
    OutputStream encoded;

    Lane(int partition, OutputStream sink) {
      this.partition = partition;
      this.sink = sink;
    }

    /**
     * Task thread: queues an item and makes sure a thread will run it: the one holding the lane
     * (it looks at the queue again after it lets go), else a pool job.
     */
    void submit(Item item) {
      pending.incrementAndGet();
      work.add(item);
      if (!running.get() && scheduled.compareAndSet(false, true)) {
        try {
          pool.execute(this);
        } catch (RejectedExecutionException e) {
          scheduled.set(false);
          drain(true); // the task encodes it itself
        }
      }
    }

    /** Pool job: from here on a new item schedules another job; runs the queue unless a thread already does. */
    @Override
    public void run() {
      scheduled.set(false);
      drain(false);
    }

    /**
     * Runs the queue until it is empty, unless another thread holds the lane: that thread looks at
     * the queue again after it lets go, so no item is left without a thread to run it. True when
     * this thread held the lane.
     */
    boolean drain(boolean onTaskThread) {
      boolean held = false;
      while (running.compareAndSet(false, true)) {
        held = true;
        try {
          runQueued(onTaskThread);
        } finally {
          running.set(false);
        }
        if (work.isEmpty()) {
          break;
        }
      }
      return held;
    }

    /** With the lane held: runs every queued item in order; after a failure or abort only drops them. */
    private void runQueued(boolean onTaskThread) {
      Item it;
      while ((it = work.poll()) != null) {
        try {
          if (failure == null && !stopped) {
            if (it.bytes() == null) {
              endEncoding();
            } else {
              write(it.bytes(), it.length());
              (onTaskThread ? bytesOnTask : bytesOnPool).addAndGet(it.length());
            }
          }
        } catch (IOException e) {
          fail(new UncheckedIOException("encoding partition " + partition + " failed: " + e.getMessage(), e));
        } catch (Throwable t) {
          fail(t);
        } finally {
          if (it.bytes() != null) {
            release(it.bytes());
          }
          if (pending.decrementAndGet() == 0) {
            wakeTask();
          }
        }
      }
    }

    /** Writes a chunk through the partition's encoding stream, by whichever thread holds the lane. */
    private void write(byte[] chunk, int length) throws IOException {
      if (encoded == null) {
        encoded = encoder.encode(partition, sink);
      }
      encoded.write(chunk, 0, length);
    }

    /** Closes the encoding stream, which flushes the codec into the sink. */
    private void endEncoding() throws IOException {
      if (encoded != null) {
        encoded.close();
      }
    }

    /**
     * Task thread, beyond the budget: when no other thread holds the lane, runs its queue and then
     * encodes {@code chunk} (not counted in the budget) here; false when a pool thread holds it.
     */
    boolean encodeHereIfFree(byte[] chunk, int length) {
      if (!running.compareAndSet(false, true)) {
        return false;
      }
      try {
        runQueued(true);
        if (failure == null && !stopped) {
          write(chunk, length);
          bytesOnTask.addAndGet(length);
        }
      } catch (IOException e) {
        fail(new UncheckedIOException("encoding partition " + partition + " failed: " + e.getMessage(), e));
      } catch (RuntimeException | Error e) {
        fail(e);
      } finally {
        running.set(false);
        spare.add(chunk);
      }
      return true;
    }
  }

  /** The task's side of a lane: fills a chunk, hands it over when full. */
  private final class RawStream extends OutputStream {
    private final Lane lane;
    private byte[] chunk;
    private int filled;

    RawStream(Lane lane) {
      this.lane = lane;
    }

    @Override
    public void write(int b) throws IOException {
      if (chunk == null || filled == chunk.length) {
        next();
      }
      chunk[filled++] = (byte) b;
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      java.util.Objects.checkFromIndexSize(off, len, b.length);
      while (len > 0) {
        if (chunk == null || filled == chunk.length) {
          next();
        }
        int n = Math.min(len, chunk.length - filled);
        System.arraycopy(b, off, chunk, filled, n);
        filled += n;
        off += n;
        len -= n;
      }
    }

    /** Hands the full chunk over and takes a fresh one. */
    private void next() throws IOException {
      handOver();
      if (stopped) {
        throw new IOException("partition " + lane.partition + "'s encoding was aborted");
      }
      byte[] c = spare.poll();
      chunk = c != null ? c : new byte[chunkBytes];
      filled = 0;
    }

    /**
     * Hands the chunk over to the lane, if it holds bytes. Beyond the budget the task encodes it
     * here when the lane is free, else takes up another lane's queued chunks, else waits for a
     * pool thread's chunk, and tries again.
     */
    void handOver() throws IOException {
      checkFailure();
      if (chunk == null || filled == 0) {
        return;
      }
      byte[] c = chunk;
      int n = filled;
      chunk = null;
      filled = 0;
      while (!tryReserve(c.length)) {
        if (lane.encodeHereIfFree(c, n)) {
          checkFailure();
          return;
        }
        if (!takeUpOne()) {
          awaitRoom(c.length);
        }
        checkFailure();
      }
      lane.submit(new Item(c, n));
    }

    @Override
    public void flush() {
      // Chunks go over when full and at finish; the serializer's flushes have nothing to push.
    }

    @Override
    public void close() {
      // Partitions stay open until finish; closing a serializer stream over this is harmless.
    }
  }
}
