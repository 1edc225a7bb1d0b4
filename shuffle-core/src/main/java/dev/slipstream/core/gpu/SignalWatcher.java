package dev.slipstream.core.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;
import jcuda.Pointer;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUresult;
import jcuda.driver.CUstreamWaitValue_flags;
import jcuda.driver.JCudaDriver;

/**
 * A stream-ordered wait for a receive signal, so that the host reads no device memory while it
 * waits: on a stream of its own the device waits until a 64-bit signal word reaches a value
 * ({@code cuStreamWaitValue64}, {@code (int64_t)(*signal - value) >= 0}), then copies a range into
 * pinned host memory ({@code cuMemcpyDtoHAsync}); the host polls the stream ({@code cuStreamQuery},
 * no copy) and reads the range from host memory. Because the copy starts after the wait, the range
 * (a block table, say, and the signal word itself) is read after the signal was seen, as a reader
 * that trusts only the signal needs.
 *
 * <p>At the deadline the word's current value is read once, and the word is set to the awaited
 * value so the stream drains (a caller times out only on a range it then quarantines; later adds
 * by a late writer land on top). Threading: one wait at a time. Ownership: close it before its
 * {@link GpuContext}.
 */
public final class SignalWatcher implements AutoCloseable {
  private final GpuContext ctx;
  private final GpuStream stream;
  private Pointer host;
  private long hostBytes;
  private boolean open;

  /** What a wait saw: whether the signal reached the value, its value, and the range copied after (null if not). */
  public record Seen(boolean reached, long signal, ByteBuffer range) {}

  private SignalWatcher(GpuContext ctx) {
    this.ctx = ctx;
    this.stream = new GpuStream(ctx);
  }

  /**
   * Whether {@code ctx}'s device takes 64-bit stream memory operations; null if it does, else why
   * not (callers then poll the signal with device-to-host reads).
   */
  public static String unsupportedReason(GpuContext ctx) {
    ctx.makeCurrent();
    int[] v = new int[1];
    jcuda.driver.CUdevice d = new jcuda.driver.CUdevice();
    CudaDriver.check(JCudaDriver.cuDeviceGet(d, ctx.device()), "cuDeviceGet(" + ctx.device() + ")");
    CudaDriver.check(JCudaDriver.cuDeviceGetAttribute(v,
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, d), "cuDeviceGetAttribute");
    return v[0] != 0 ? null : "device " + ctx.device() + " has no 64-bit stream memory operations"
        + " (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 0)";
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
   * that (little-endian), or, at
   * {@code deadlineNanos} ({@link System#nanoTime()}), a {@link Seen} that did not reach it with the
   * value read then.
   */
  public Seen await(long from, int len, long signal, long value, long deadlineNanos) {
    if (!open) {
      throw new IllegalStateException("signal watcher is closed");
    }
    if (len < 8 || from == 0 || signal != from + len - 8 || (signal & 7) != 0) {
      throw new IllegalArgumentException("signal wait: range at 0x" + Long.toHexString(from) + " of " + len
          + " bytes, signal at 0x" + Long.toHexString(signal) + "; expected a non-null range of >= 8 bytes that"
          + " ends with the 8-byte aligned signal word");
    }
    ctx.makeCurrent();
    ensureHost(len);
    CudaDriver.check(JCudaDriver.cuStreamWaitValue64(stream.handle(), CudaDriver.at(signal), value,
        CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue64");
    CudaDriver.check(JCudaDriver.cuMemcpyDtoHAsync(host, CudaDriver.at(from), len, stream.handle()), "cuMemcpyDtoHAsync");
    long pause = 1;
    for (;;) {
      int r = JCudaDriver.cuStreamQuery(stream.handle());
      if (r == CUresult.CUDA_SUCCESS) {
        ByteBuffer b = ByteBuffer.allocate(len).order(ByteOrder.LITTLE_ENDIAN);
        b.put(0, host.getByteBuffer(0, len), 0, len);
        return new Seen(true, b.getLong(len - 8), b);
      }
      if (r != CUresult.CUDA_ERROR_NOT_READY) {
        CudaDriver.check(r, "signal wait (cuStreamQuery)");
      }
      if (System.nanoTime() - deadlineNanos > 0) {
        return timedOut(signal, value);
      }
      LockSupport.parkNanos(pause * 1000);
      pause = Math.min(200, pause * 2);
    }
  }

  /**
   * Sets the word at device address {@code signal} to 0 and returns once that is done on the device
   * (a plain copy from pageable memory may return before its DMA is), so a writer told afterwards
   * adds to a reset word.
   */
  public void reset(long signal) {
    if (!open) {
      throw new IllegalStateException("signal watcher is closed");
    }
    ctx.makeCurrent();
    CudaDriver.copyToDeviceAsync(signal, new byte[8], 0, 8, stream.handle());
    CudaDriver.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "signal reset (cuStreamSynchronize)");
  }

  /** Reads the word once, then sets it to {@code value} so the wait is satisfied and the stream drains. */
  private Seen timedOut(long signal, long value) {
    byte[] now = new byte[8];
    CudaDriver.copyFromDevice(signal, now, 0, 8);
    byte[] v = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, value).array();
    CudaDriver.copyToDevice(signal, v, 0, 8);
    CudaDriver.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "signal wait drain (cuStreamSynchronize)");
    return new Seen(false, ByteBuffer.wrap(now).order(ByteOrder.LITTLE_ENDIAN).getLong(), null);
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
    Pointer p = new Pointer();
    CudaDriver.check(JCudaDriver.cuMemAllocHost(p, want), "cuMemAllocHost(" + want + " bytes)");
    host = p;
    hostBytes = want;
  }

  @Override
  public void close() {
    if (open) {
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
