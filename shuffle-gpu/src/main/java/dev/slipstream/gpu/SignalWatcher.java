package dev.slipstream.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;
import jcuda.Pointer;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Watches a receive signal in device memory without blocking any stream: on a stream of its own it
 * queues two copies to pinned host memory ({@code cuMemcpyDtoHAsync}), the 64-bit signal word and
 * then a range (a block table, say, ending with the signal word); the host polls the stream
 * ({@code cuStreamQuery}) and reads host memory. Copies on one stream run one after the other, so
 * when the signal's copy shows the word reached the awaited value, the range's copy read the range
 * after that: it is read as a reader that trusts only the signal needs (writers fence their data
 * before they add to the signal), and one round trip to the device answers a wait whose signal had
 * already come. When the word had not reached the value, the range's copy is dropped and both are
 * queued again on the next poll.
 *
 * <p>Why not a device-side wait ({@code cuStreamWaitValue64})? A stream blocked on a value holds
 * the hardware queue it shares with other streams of the process; an executor that waits for its
 * peer's push while the peer waits for its own push (each executor is reader and holder at once)
 * can then stall both pushes until the deadline. Copies never block a queue.
 *
 * <p>Use: {@link #begin} a wait, {@link #poll} it (it blocks at most for its own copies, 0.2 ms)
 * until it answers, or
 * {@link #cancel} it; {@link #await} does all three with a deadline. Threading: one wait at a
 * time, one thread at a time. Ownership: close it before its {@link GpuContext}.
 */
public final class SignalWatcher implements AutoCloseable {
  private static final int IDLE = 0;
  /** Begun; no copy in flight. */
  private static final int BEGUN = 1;
  /** The signal word's copy and the range's copy after it are in flight. */
  private static final int COPYING = 2;
  /** Where the range's copy lands in the host buffer (the signal's copy is at 0). */
  private static final int RANGE_AT = 64;
  /** How long a poll spins for its own copy before it returns (the copy stays in flight). */
  private static final long COPY_SPIN_NANOS = 200_000;

  private final GpuContext ctx;
  private final GpuStream stream;
  private Pointer host;
  private long hostBytes;
  private boolean open;
  private int state = IDLE;
  private long from;
  private int len;
  private long signal;
  private long value;

  /** What a wait saw: whether the signal reached the value, its value, and the range copied after (null if not). */
  public record Seen(boolean reached, long signal, ByteBuffer range) {}

  private SignalWatcher(GpuContext ctx) {
    this.ctx = ctx;
    this.stream = new GpuStream(ctx);
  }

  /** A watcher with its own non-blocking stream on {@code ctx}'s device. */
  public static SignalWatcher create(GpuContext ctx) {
    SignalWatcher w = new SignalWatcher(ctx);
    w.open = true;
    return w;
  }

  /**
   * Waits until the word at device address {@code signal} reaches {@code value}, then returns the
   * {@code len} bytes at device address {@code from}, which end with the signal word, as copied after
   * that (little-endian), or, at {@code deadlineNanos} ({@link System#nanoTime()}), a {@link Seen}
   * that did not reach it with the value read then: {@link #begin}, {@link #poll} until it answers,
   * {@link #cancel} at the deadline.
   */
  public Seen await(long from, int len, long signal, long value, long deadlineNanos) {
    begin(from, len, signal, value);
    long pause = 1;
    for (;;) {
      Seen s = poll();
      if (s != null) {
        return s;
      }
      if (System.nanoTime() - deadlineNanos > 0) {
        return cancel();
      }
      LockSupport.parkNanos(pause * 1000);
      pause = Math.min(200, pause * 2);
    }
  }

  /**
   * Starts watching the word at {@code signal} for {@code value} ({@code (int64_t)(word - value) >= 0}),
   * to copy the {@code len} bytes at {@code from} (which end with the signal word) once it is
   * reached. Blocks nothing; {@link #poll} does the work. One wait at a time.
   */
  public void begin(long from, int len, long signal, long value) {
    if (!open) {
      throw new IllegalStateException("signal watcher is closed");
    }
    if (state != IDLE) {
      throw new IllegalStateException("signal watcher already waits for the word at 0x" + Long.toHexString(this.signal));
    }
    if (len < 8 || from == 0 || signal != from + len - 8 || (signal & 7) != 0) {
      throw new IllegalArgumentException("signal wait: range at 0x" + Long.toHexString(from) + " of " + len
          + " bytes, signal at 0x" + Long.toHexString(signal) + "; expected a non-null range of >= 8 bytes that"
          + " ends with the 8-byte aligned signal word");
    }
    ctx.makeCurrent();
    ensureHost(RANGE_AT + len);
    this.from = from;
    this.len = len;
    this.signal = signal;
    this.value = value;
    state = BEGUN;
  }

  /** Whether a wait was begun and has not been answered by {@link #poll} or {@link #cancel} yet. */
  public boolean waiting() {
    return state != IDLE;
  }

  /**
   * Advances the begun wait (waiting at most 0.2 ms for its copies): the wait's outcome once the
   * signal reached its value and the range was copied after that, else null. The watcher is then free for the next wait.
   */
  public Seen poll() {
    if (state == IDLE) {
      throw new IllegalStateException("signal watcher: poll without a wait begun");
    }
    ctx.makeCurrent();
    if (state == BEGUN) {
      copy(0, signal, 8);
      copy(RANGE_AT, from, len); // runs after the signal's copy ended: valid if that one saw the value
      state = COPYING;
    }
    if (!copied()) {
      return null;
    }
    long word = host.getByteBuffer(0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    if (word - value < 0) {
      state = BEGUN; // not yet: the next poll reads both afresh
      return null;
    }
    state = IDLE;
    ByteBuffer b = ByteBuffer.allocate(len).order(ByteOrder.LITTLE_ENDIAN);
    b.put(0, host.getByteBuffer(RANGE_AT, len), 0, len);
    return new Seen(true, b.getLong(len - 8), b);
  }

  /**
   * Ends the begun wait without waiting for the signal: lets a copy in flight finish, reads the
   * word once, and returns a {@link Seen} that did not reach the value, with the word as read. The
   * word is left as it is (a late writer may still add to it: the caller quarantines the range).
   */
  public Seen cancel() {
    if (state == IDLE) {
      throw new IllegalStateException("signal watcher: cancel without a wait begun");
    }
    ctx.makeCurrent();
    state = IDLE;
    CudaDriver.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "signal watch drain (cuStreamSynchronize)");
    byte[] now = new byte[8];
    CudaDriver.copyFromDevice(signal, now, 0, 8);
    return new Seen(false, ByteBuffer.wrap(now).order(ByteOrder.LITTLE_ENDIAN).getLong(), null);
  }

  /** Queues a copy of {@code bytes} at device address {@code at} to offset {@code hostAt} of the host buffer. */
  private void copy(int hostAt, long at, int bytes) {
    CudaDriver.check(JCudaDriver.cuMemcpyDtoHAsync(host.withByteOffset(hostAt), CudaDriver.at(at), bytes, stream.handle()),
        "cuMemcpyDtoHAsync(" + bytes + " bytes)");
  }

  /**
   * Whether the stream's copies are done (throws on a CUDA error), spinning up to
   * {@link #COPY_SPIN_NANOS} for them: a copy of a few bytes takes microseconds, and a poll that
   * comes back for it later would add a caller's pause to every step.
   */
  private boolean copied() {
    long until = System.nanoTime() + COPY_SPIN_NANOS;
    for (;;) {
      int r = JCudaDriver.cuStreamQuery(stream.handle());
      if (r != CUresult.CUDA_ERROR_NOT_READY) {
        CudaDriver.check(r, "signal watch (cuStreamQuery)");
        return true;
      }
      if (System.nanoTime() - until > 0) {
        return false;
      }
      Thread.onSpinWait();
    }
  }

  private void ensureHost(int len) {
    if (host != null && hostBytes >= len) {
      return;
    }
    long want = Math.max(4096, Long.highestOneBit(Math.max(1, len - 1)) * 2);
    if (host != null) {
      JCudaDriver.cuMemFreeHost(host);
      host = null;
    }
    host = CudaDriver.allocHost(want, "signal watch");
    hostBytes = want;
  }

  @Override
  public void close() {
    if (open) {
      if (state != IDLE) {
        cancel(); // no copy into the host buffer may be in flight when it goes
      }
      open = false;
      stream.close();
      if (host != null) {
        ctx.makeCurrent();
        JCudaDriver.cuMemFreeHost(host);
        host = null;
      }
    }
  }
}
