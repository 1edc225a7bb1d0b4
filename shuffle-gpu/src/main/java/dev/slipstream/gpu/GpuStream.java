package dev.slipstream.gpu;

import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * A non-blocking CUDA stream of one context (it does not wait for the legacy default stream, nor
 * that stream for it). Ownership: close it before its {@link GpuContext}; {@link #close()} is
 * idempotent. Threading: any thread (JCuda calls make the context current first).
 */
final class GpuStream implements AutoCloseable {
  private final GpuContext ctx;
  private final CUstream handle = new CUstream();
  private boolean open;

  GpuStream(GpuContext ctx) {
    this.ctx = ctx;
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuStreamCreate(handle, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    open = true;
  }

  CUstream handle() {
    if (!open) {
      throw new IllegalStateException("stream is closed");
    }
    return handle;
  }

  @Override
  public void close() {
    if (open) {
      open = false;
      ctx.makeCurrent();
      JCudaDriver.cuStreamDestroy(handle);
    }
  }
}
