package dev.slipstream.gpu;

import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Zeroes device memory in the background: {@link #zero} queues a memset on a stream of its own and
 * returns a {@link Ticket} whose event says when it is done, so a caller can hand the memory out
 * again without waiting for the device in the common case (the zeroing ended long before).
 *
 * <p>A zeroing starts only after the work queued on the context's legacy default stream before it,
 * where the synchronous copies of {@link DeviceBuffer} and {@link GpuRegion} run (a device-to-device
 * cuMemcpy may return before it is done): memory copied out just before it is released is not zeroed
 * under the copy. Work a caller queued on streams of its own must be done before it asks.
 *
 * <p>Threading: callers serialise {@link #zero} and {@link #close} (the landing region calls them
 * under its lock); a ticket is used by one thread at a time. Ownership: close the tickets, then this,
 * before the context.
 */
public final class DeviceZeroer implements AutoCloseable {
  private final GpuContext ctx;
  private final GpuStream stream;
  /** Recorded on the legacy default stream before each zeroing, which waits for it. */
  private final CUevent before = new CUevent();

  public DeviceZeroer(GpuContext ctx) {
    this.ctx = ctx;
    this.stream = new GpuStream(ctx);
    try {
      ctx.makeCurrent();
      CudaDriver.check(JCudaDriver.cuEventCreate(before, CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    } catch (RuntimeException e) {
      stream.close();
      throw e;
    }
  }

  /** One queued zeroing. */
  public final class Ticket implements AutoCloseable {
    private final CUevent event = new CUevent();
    private boolean open = true;

    private Ticket() {}

    /** Whether the zeroing is done (throws on a device error). */
    public boolean done() {
      ctx.makeCurrent();
      int r = JCudaDriver.cuEventQuery(event);
      if (r == CUresult.CUDA_ERROR_NOT_READY) {
        return false;
      }
      CudaDriver.check(r, "cuEventQuery (zeroing)");
      return true;
    }

    /** Waits until the zeroing is done. */
    public void await() {
      ctx.makeCurrent();
      CudaDriver.check(JCudaDriver.cuEventSynchronize(event), "cuEventSynchronize (zeroing)");
    }

    @Override
    public void close() {
      if (open) {
        open = false;
        ctx.makeCurrent();
        JCudaDriver.cuEventDestroy(event);
      }
    }
  }

  /** Queues zeroing {@code length} bytes at device address {@code address} (both 4-byte aligned). */
  public Ticket zero(long address, long length) {
    if (address == 0 || (address & 3) != 0 || length < 0 || (length & 3) != 0) {
      throw new IllegalArgumentException("zeroing " + length + " bytes at 0x" + Long.toHexString(address)
          + ", expected a non-null address and a length, both multiples of 4");
    }
    ctx.makeCurrent();
    Ticket t = new Ticket();
    CudaDriver.check(JCudaDriver.cuEventCreate(t.event, CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    try {
      if (length > 0) {
        CudaDriver.check(JCudaDriver.cuEventRecord(before, LEGACY_STREAM), "cuEventRecord (legacy stream)");
        CudaDriver.check(JCudaDriver.cuStreamWaitEvent(stream.handle(), before, 0), "cuStreamWaitEvent (zeroing)");
        CudaDriver.check(JCudaDriver.cuMemsetD32Async(CudaDriver.at(address), 0, length / 4, stream.handle()),
            "cuMemsetD32Async (zeroing " + length + " bytes)");
      }
      CudaDriver.check(JCudaDriver.cuEventRecord(t.event, stream.handle()), "cuEventRecord (zeroing)");
      return t;
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
  }

  /** Waits for every queued zeroing, then frees the stream. */
  @Override
  public void close() {
    try {
      ctx.makeCurrent();
      JCudaDriver.cuStreamSynchronize(stream.handle());
    } finally {
      JCudaDriver.cuEventDestroy(before);
      stream.close();
    }
  }

  /**
   * Stream 0: the legacy default stream, on which JCuda's synchronous copies run (JCuda's native
   * library is built without per-thread default streams).
   */
  private static final jcuda.driver.CUstream LEGACY_STREAM = new jcuda.driver.CUstream();
}
