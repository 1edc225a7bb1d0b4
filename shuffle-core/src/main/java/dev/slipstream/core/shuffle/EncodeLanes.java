package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.IntFunction;

/**
 * Encodes (compresses, encrypts) one map task's partitions on a shared pool while the task goes
 * on serializing: the task writes each partition's raw bytes into a stream of this class
 * ({@link #partition}), which hands them over in chunks; a lane per partition runs the chunks, in
 * order, through that partition's encoding stream into its sink. So the codec runs on cores the
 * task threads leave idle, and a partition's bytes reach its sink exactly as they would had the
 * task encoded them itself.
 *
 * <p>Memory: at most {@code budgetBytes} of chunks handed over and not yet encoded. Beyond that the
 * task encodes the chunk itself when its partition's lane has nothing queued (so its order holds),
 * and waits for the lanes only otherwise: a pool busy with other tasks' work never leaves the task
 * encoding less than it would alone. Each partition the task writes holds one chunk it is filling.
 *
 * <p>Failure: the first failure of any lane stops every lane and is rethrown to the task at its
 * next hand-over or at {@link #finish()}. {@link #abort()} drops what is queued and waits for the
 * chunks being encoded, so that the caller may free the sinks after it.
 *
 * <p>Threading: one task thread writes the streams and calls {@link #finish()} / {@link #abort()};
 * pool threads run the lanes, one thread per lane at a time. A pool that refuses work leaves it
 * to the task thread.
 */
public final class EncodeLanes {

  /** Wraps a partition's sink in its encoding stream (for Spark: the serializer manager's codec). */
  @FunctionalInterface
  public interface Encoder {
    OutputStream encode(int partition, OutputStream sink) throws IOException;
  }

  private final Executor pool;
  private final Encoder encoder;
  private final IntFunction<OutputStream> sinks;
  private final int chunkBytes;
  private final long budgetBytes;
  private final Lane[] lanes;
  private final ConcurrentLinkedQueue<byte[]> spare = new ConcurrentLinkedQueue<>();
  /** Chunk bytes handed over and not yet encoded; guarded by {@code this}. */
  private long inFlight;
  private volatile Throwable failure;
  private volatile boolean stopped;
  private final java.util.concurrent.atomic.AtomicLong inline = new java.util.concurrent.atomic.AtomicLong();

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
    }
    return l.input;
  }

  /**
   * Hands over every partition's last chunk, ends each partition's encoding stream (flushing the
   * codec into the sink), and waits until all lanes are done.
   *
   * @throws IOException the first lane failure, or interruption while waiting
   */
  public void finish() throws IOException {
    checkFailure();
    for (Lane l : lanes) {
      if (l != null) {
        l.input.handOver();
        l.submit(l::endEncoding);
      }
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
    try {
      awaitIdle(false); // the sinks must not be freed under a running lane, interrupted or not
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible wait was interrupted", e);
    }
  }

  /** Chunk bytes handed over and not yet encoded. */
  synchronized long inFlightBytes() {
    return inFlight;
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
    try {
      for (Lane l : lanes) {
        if (l == null) {
          continue;
        }
        synchronized (l) {
          while (l.pending > 0) {
            try {
              l.wait();
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
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Task thread: takes {@code bytes} of the budget if they fit (or nothing is in flight), without waiting. */
  private boolean tryReserve(int bytes) {
    synchronized (this) {
      if (inFlight > 0 && inFlight + bytes > budgetBytes) {
        return false;
      }
      inFlight += bytes;
      return true;
    }
  }

  /** Chunks the task encoded itself because the lanes were behind. */
  long inlineChunks() {
    return inline.get();
  }

  /** Task thread: waits while the chunks in flight would exceed the budget with {@code bytes} more. */
  private void reserve(int bytes) throws IOException {
    synchronized (this) {
      while (inFlight > 0 && inFlight + bytes > budgetBytes && failure == null) {
        try {
          wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted while waiting for the encoding lanes");
        }
      }
      inFlight += bytes;
    }
  }

  private void release(byte[] chunk) {
    synchronized (this) {
      inFlight -= chunk.length;
      notifyAll();
    }
    spare.add(chunk);
  }

  private void fail(Throwable t) {
    synchronized (this) {
      if (failure == null) {
        failure = t;
      }
      notifyAll();
    }
  }

  /** One partition: its raw stream (task thread) and its queue of work (one pool thread at a time). */
  private final class Lane implements Runnable {
    final int partition;
    final RawStream input = new RawStream(this);
    final ConcurrentLinkedQueue<Runnable> work = new ConcurrentLinkedQueue<>();
    final AtomicBoolean scheduled = new AtomicBoolean();
    /** Work items queued or running (or 1 while the task encodes on the lane); guarded by this lane's monitor. */
    int pending;
    final OutputStream sink;
    /** The partition's encoding stream over the sink, opened by the first chunk (lane thread). */
    OutputStream encoded;

    Lane(int partition, OutputStream sink) {
      this.partition = partition;
      this.sink = sink;
    }

    void submit(Runnable r) {
      synchronized (this) {
        pending++;
      }
      work.add(r);
      if (scheduled.compareAndSet(false, true)) {
        try {
          pool.execute(this);
        } catch (RejectedExecutionException e) {
          run(); // the task encodes it itself
        }
      }
    }

    @Override
    public void run() {
      while (true) {
        Runnable r;
        while ((r = work.poll()) != null) {
          try {
            if (failure == null && !stopped) {
              r.run();
            }
          } catch (Throwable t) {
            fail(t);
          } finally {
            synchronized (this) {
              if (--pending == 0) {
                notifyAll();
              }
            }
          }
        }
        scheduled.set(false);
        // Work added after the queue looked empty and before the flag was cleared is ours to run.
        if (work.isEmpty() || !scheduled.compareAndSet(false, true)) {
          return;
        }
      }
    }

    /**
     * Task thread: marks the lane busy when nothing is queued or running on it, so the task may
     * encode on it directly (only the task submits to a lane, so it stays idle meanwhile).
     */
    boolean claimIdle() {
      synchronized (this) {
        if (pending > 0) {
          return false;
        }
        pending = 1;
        return true;
      }
    }

    void releaseIdle() {
      synchronized (this) {
        pending = 0;
        notifyAll();
      }
    }

    /** Writes a chunk through the partition's encoding stream, by whichever thread holds the lane. */
    private void write(byte[] chunk, int length) throws IOException {
      if (failure != null || stopped) {
        return;
      }
      if (encoded == null) {
        encoded = encoder.encode(partition, sink);
      }
      encoded.write(chunk, 0, length);
    }

    /** Task thread, with the lane claimed: encodes a chunk not counted in the budget; a failure stops every lane. */
    void encodeOwned(byte[] chunk, int length) {
      try {
        write(chunk, length);
      } catch (IOException e) {
        fail(new java.io.UncheckedIOException("encoding partition " + partition + " failed: " + e.getMessage(), e));
      } catch (RuntimeException | Error e) {
        fail(e);
      } finally {
        spare.add(chunk);
      }
    }

    /** Lane thread: encodes one chunk's first {@code length} bytes. */
    void encode(byte[] chunk, int length) {
      try {
        write(chunk, length);
      } catch (IOException e) {
        throw new java.io.UncheckedIOException("encoding partition " + partition + " failed: " + e.getMessage(), e);
      } finally {
        release(chunk);
      }
    }

    /** Lane thread: closes the encoding stream, which flushes the codec into the sink. */
    void endEncoding() {
      if (encoded == null) {
        return;
      }
      try {
        encoded.close();
      } catch (IOException e) {
        throw new java.io.UncheckedIOException("ending partition " + partition + "'s encoding failed: "
            + e.getMessage(), e);
      }
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

    /** Hands the chunk over to the lane, if it holds bytes. */
    void handOver() throws IOException {
      checkFailure();
      if (chunk == null || filled == 0) {
        return;
      }
      byte[] c = chunk;
      int n = filled;
      chunk = null;
      filled = 0;
      if (!tryReserve(c.length)) {
        if (lane.claimIdle()) {
          // The lanes are behind and this partition's is idle: encode here, in order, rather than wait.
          try {
            inline.incrementAndGet();
            lane.encodeOwned(c, n);
          } finally {
            lane.releaseIdle();
          }
          checkFailure();
          return;
        }
        reserve(c.length);
      }
      lane.submit(() -> lane.encode(c, n));
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
