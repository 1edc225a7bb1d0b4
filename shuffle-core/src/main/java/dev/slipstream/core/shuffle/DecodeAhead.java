package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Decodes one reduce task's blocks (decompression, decryption) on a shared pool ahead of the
 * task's deserializer, so that codec work runs on cores the task threads leave idle and overlaps
 * the task's own work, as the blocks arrive. The task hands over blocks in the order it wants
 * their records ({@link #add}) and takes their decoded streams in that order ({@link #next}).
 *
 * <p>Memory: a pool thread decodes a block into chunks of at most {@code chunkBytes}, each first
 * claimed from the task's budget of {@code budgetBytes} decoded bytes held ahead; a chunk goes
 * back to the budget when the task has read past it. When the budget is spent a job parks; as the
 * task reads, freed budget resumes the first parked job in queue order. When the task reaches a
 * block whose job has not started or is parked, it takes the block over and decodes the rest of it
 * on its own thread, as without this class. So a highly compressible block never holds more than
 * the budget, and the task never waits for a job that is not running. The task queues blocks
 * while their stored bytes stay under the budget (always at least one).
 *
 * <p>A block's raw stream stays open until the task closes its decoded stream or this class:
 * local map outputs stay retained and landing space stays reserved while a pool thread reads
 * them. {@link #close()} waits for jobs that are running before it closes their streams; jobs
 * that have not started are dropped.
 *
 * <p>Threading: one task thread calls {@link #add}, {@link #next}, {@link #wantsMore},
 * {@link #close} and reads the decoded streams; pool threads run the jobs. A job's chunks pass
 * between the two through its state: written before a job leaves RUNNING (under the job's monitor),
 * read after the task saw that.
 *
 * @param <S> what the task knows about a block (where it came from, for errors)
 */
public final class DecodeAhead<S> implements AutoCloseable {

  /** Wraps a block's raw stream in its decoding stream (for Spark: the serializer manager's codec). */
  @FunctionalInterface
  public interface Decoder<S> {
    InputStream decode(S source, InputStream raw) throws IOException;
  }

  /** A block's decoded stream and the source it was added with. Closing the stream closes the block. */
  public record Decoded<S>(S source, InputStream stream) {}

  /** Queued for a pool thread. */
  private static final int NEW = 0;
  private static final int RUNNING = 1;
  /** Stopped for want of budget, its chunks and decoding stream kept; resumed or taken over. */
  private static final int PARKED = 2;
  /** At the block's end, failed, or stopped by close. */
  private static final int DONE = 3;
  /** Taken over by the task (or dropped by close): no pool thread touches it again. */
  private static final int TAKEN = 4;

  private final Executor pool;
  private final Decoder<S> decoder;
  private final long budgetBytes;
  private final int chunkBytes;
  private final int maxQueued;
  /** Decoded bytes claimed by chunks not yet read past. */
  private final AtomicLong claimed = new AtomicLong();
  private final ConcurrentLinkedQueue<byte[]> spare = new ConcurrentLinkedQueue<>();
  private final ArrayDeque<Job> queue = new ArrayDeque<>();
  /** Stored bytes of the queued blocks (task thread). */
  private long queuedBytes;
  private volatile boolean closed;
  private final AtomicLong aheadBytes = new AtomicLong();

  /**
   * @param pool runs the decode jobs; a pool that refuses a job leaves the block to the task
   * @param budgetBytes decoded bytes this task may hold ahead of its reads
   * @param chunkBytes the unit a job claims and decodes into
   * @param maxQueued blocks queued at most
   */
  public DecodeAhead(Executor pool, Decoder<S> decoder, long budgetBytes, int chunkBytes, int maxQueued) {
    if (chunkBytes <= 0 || budgetBytes < chunkBytes) {
      throw new IllegalArgumentException("decode-ahead budget " + budgetBytes + " bytes must hold at least one chunk of "
          + chunkBytes + " bytes");
    }
    if (maxQueued < 1) {
      throw new IllegalArgumentException("maxQueued " + maxQueued + " must be at least 1");
    }
    this.pool = pool;
    this.decoder = decoder;
    this.budgetBytes = budgetBytes;
    this.chunkBytes = chunkBytes;
    this.maxQueued = maxQueued;
  }

  /** Whether the task should add another block now: nothing is queued, or the queue is under its limits. */
  public boolean wantsMore() {
    return !closed && (queue.isEmpty() || (queue.size() < maxQueued && queuedBytes < budgetBytes));
  }

  public boolean isEmpty() {
    return queue.isEmpty();
  }

  /**
   * Queues a block. With {@code pooled} false (a stream that only the task thread may read) the
   * task decodes it when it gets there; otherwise a pool thread starts on it.
   *
   * @param storedBytes the block's size as stored, for the queue's limit
   */
  public void add(S source, InputStream raw, long storedBytes, boolean pooled) {
    if (closed) {
      throw new IllegalStateException("decode-ahead is closed");
    }
    Job j = new Job(source, raw, storedBytes);
    queue.add(j);
    queuedBytes += storedBytes;
    if (pooled) {
      submit(j);
    } else {
      j.state.set(TAKEN);
    }
  }

  private void submit(Job j) {
    try {
      pool.execute(j);
    } catch (RejectedExecutionException e) {
      // stays NEW: the task takes it over when it gets there
    }
  }

  /** Resumes the first parked job in queue order when a chunk's worth of budget is free (task thread). */
  private void resumeParked() {
    if (closed || claimed.get() + chunkBytes > budgetBytes) {
      return;
    }
    for (Job j : queue) {
      if (j.state.compareAndSet(PARKED, NEW)) {
        submit(j);
        return;
      }
    }
  }

  /**
   * The first queued block's decoded stream: waits while a pool thread is decoding it; a block
   * whose job has not started or is parked is taken over as it is. A job that failed rethrows its
   * failure here, its block closed.
   */
  public Decoded<S> next() throws IOException {
    Job j = queue.poll();
    if (j == null) {
      throw new java.util.NoSuchElementException("no block queued");
    }
    queuedBytes -= j.storedBytes;
    try {
      j.settle();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      queue.addFirst(j); // close() waits for it and closes it
      queuedBytes += j.storedBytes;
      throw new InterruptedIOException("interrupted while waiting for a block's decoding");
    }
    if (j.failure != null) {
      j.closeAll();
      if (j.failure instanceof IOException io) {
        throw io;
      }
      if (j.failure instanceof RuntimeException re) {
        throw re;
      }
      if (j.failure instanceof Error e) {
        throw e;
      }
      throw new IOException("decoding a block failed", j.failure);
    }
    return new Decoded<>(j.source, new DecodedStream(j));
  }

  /** Decoded bytes held ahead now (chunks claimed and not yet read past). */
  long claimedBytes() {
    return claimed.get();
  }

  /** Decoded bytes the pool has produced for this task so far (read ahead of the task). */
  public long aheadBytes() {
    return aheadBytes.get();
  }

  /**
   * Drops queued blocks: jobs not started never run, running ones are waited for (a job stops at
   * its next chunk once it sees this), then every block's streams are closed. Idempotent.
   */
  @Override
  public void close() {
    closed = true;
    boolean interrupted = false;
    for (Job j : queue) {
      while (true) {
        try {
          j.settle();
          break;
        } catch (InterruptedException e) {
          interrupted = true; // the block's memory must not be freed under a running job
        }
      }
      j.closeAll();
    }
    queue.clear();
    queuedBytes = 0;
    spare.clear();
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private boolean claim() {
    while (true) {
      long c = claimed.get();
      if (c + chunkBytes > budgetBytes) {
        return false;
      }
      if (claimed.compareAndSet(c, c + chunkBytes)) {
        return true;
      }
    }
  }

  private void unclaim(byte[] chunk) {
    claimed.addAndGet(-chunkBytes);
    if (!closed) {
      spare.add(chunk);
    }
  }

  private final class Job implements Runnable {
    final S source;
    final InputStream raw;
    final long storedBytes;
    final AtomicInteger state = new AtomicInteger(NEW);
    final List<byte[]> chunks = new ArrayList<>();
    /** Bytes in the last chunk; the others are full. */
    int lastLength;
    /** The decoding stream, once opened; the task reads the rest of the block from it. */
    InputStream decoded;
    boolean ended;
    Throwable failure;

    Job(S source, InputStream raw, long storedBytes) {
      this.source = source;
      this.raw = raw;
      this.storedBytes = storedBytes;
    }

    @Override
    public void run() {
      if (!state.compareAndSet(NEW, RUNNING)) {
        return; // taken over by the task, or dropped by close
      }
      try {
        decodeAhead();
      } catch (Throwable t) {
        failure = t;
      } finally {
        synchronized (this) {
          state.set(ended || failure != null || closed ? DONE : PARKED);
          notifyAll();
        }
      }
    }

    /**
     * Task thread: waits while a pool thread runs the job, then takes it over unless it is done.
     * After this no pool thread touches the job.
     */
    synchronized void settle() throws InterruptedException {
      while (true) {
        if (state.compareAndSet(NEW, TAKEN) || state.compareAndSet(PARKED, TAKEN)) {
          return;
        }
        int s = state.get();
        if (s == DONE || s == TAKEN) {
          return;
        }
        wait();
      }
    }

    private void decodeAhead() throws IOException {
      while (!closed && claim()) {
        byte[] c = spare.poll();
        if (c == null) {
          c = new byte[chunkBytes];
        }
        int n = 0;
        try {
          if (decoded == null) {
            decoded = decoder.decode(source, raw);
          }
          while (n < c.length) {
            int k = decoded.read(c, n, c.length - n);
            if (k < 0) {
              ended = true;
              break;
            }
            n += k;
          }
        } catch (IOException | RuntimeException | Error e) {
          unclaim(c);
          throw e;
        }
        if (n == 0) {
          unclaim(c);
          return;
        }
        chunks.add(c);
        lastLength = n;
        aheadBytes.addAndGet(n);
        if (ended) {
          return;
        }
      }
    }

    void closeAll() {
      for (byte[] c : chunks) {
        unclaim(c);
      }
      chunks.clear();
      try {
        if (decoded != null) {
          decoded.close();
        }
      } catch (IOException | RuntimeException e) {
        // closing the raw stream below frees the block either way
      }
      try {
        raw.close();
      } catch (IOException e) {
        // store and landing streams do not fail on close
      }
    }
  }

  /**
   * The job's chunks, then the rest of the block decoded on the reading thread. Threading: the
   * task thread, once the job is settled.
   */
  private final class DecodedStream extends InputStream {
    private final Job job;
    private int chunk;
    private int pos;
    private boolean closed;

    DecodedStream(Job job) {
      this.job = job;
    }

    private int chunkLength(int i) {
      return i == job.chunks.size() - 1 ? job.lastLength : chunkBytes;
    }

    /** The stream past the chunks, or null at the block's end. */
    private InputStream rest() throws IOException {
      if (job.ended) {
        return null;
      }
      if (job.decoded == null) {
        job.decoded = decoder.decode(job.source, job.raw);
      }
      return job.decoded;
    }

    /** Moves past fully read chunks, giving them back to the budget; true while a chunk has bytes left. */
    private boolean inChunks() {
      while (chunk < job.chunks.size()) {
        if (pos < chunkLength(chunk)) {
          return true;
        }
        unclaim(job.chunks.set(chunk, null));
        resumeParked();
        chunk++;
        pos = 0;
      }
      return false;
    }

    @Override
    public int read() throws IOException {
      if (closed) {
        throw new IOException("decoded block stream is closed");
      }
      if (inChunks()) {
        return job.chunks.get(chunk)[pos++] & 0xff;
      }
      InputStream r = rest();
      return r == null ? -1 : r.read();
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (closed) {
        throw new IOException("decoded block stream is closed");
      }
      java.util.Objects.checkFromIndexSize(off, len, b.length);
      if (len == 0) {
        return 0;
      }
      int done = 0;
      while (done < len && inChunks()) {
        int n = Math.min(len - done, chunkLength(chunk) - pos);
        System.arraycopy(job.chunks.get(chunk), pos, b, off + done, n);
        pos += n;
        done += n;
      }
      if (done == len) {
        return done;
      }
      InputStream r = rest();
      if (r == null) {
        return done == 0 ? -1 : done;
      }
      if (done > 0) {
        return done; // what is decoded already; the caller asks again for more
      }
      return r.read(b, off, len);
    }

    @Override
    public int available() throws IOException {
      if (inChunks()) {
        return chunkLength(chunk) - pos;
      }
      InputStream r = closed ? null : rest();
      return r == null ? 0 : r.available();
    }

    @Override
    public void close() {
      if (closed) {
        return;
      }
      closed = true;
      for (int i = chunk; i < job.chunks.size(); i++) {
        byte[] c = job.chunks.get(i);
        if (c != null) {
          unclaim(c);
        }
      }
      job.chunks.clear();
      job.closeAll();
      resumeParked();
    }
  }
}
