package dev.slipstream.gpu;

import jcuda.driver.JCudaDriver;

/**
 * Device memory from cuMemAlloc (JCuda), for kernel arguments and staging.
 *
 * <p>Ownership: the caller closes it before its {@link GpuContext}; {@link #close()} is idempotent.
 */
public final class DeviceBuffer implements AutoCloseable {
  private final GpuContext ctx;
  private final DevicePointer ptr;
  private final long length;
  private boolean open;

  private DeviceBuffer(GpuContext ctx, DevicePointer ptr, long length) {
    this.ctx = ctx;
    this.ptr = ptr;
    this.length = length;
    this.open = true;
  }

  static DeviceBuffer allocate(GpuContext ctx, long bytes) {
    if (bytes <= 0) {
      throw new IllegalArgumentException("device allocation of " + bytes + " bytes, expected > 0");
    }
    DevicePointer p = new DevicePointer();
    CudaDriver.check(JCudaDriver.cuMemAlloc(p, bytes), "cuMemAlloc(" + bytes + " bytes)");
    return new DeviceBuffer(ctx, p, bytes);
  }

  public long address() {
    ensureOpen();
    return ptr.address();
  }

  public long length() {
    return length;
  }

  public void write(long offset, byte[] src, int off, int len) {
    CudaDriver.checkRange(offset, len, length, "device buffer");
    ctx.makeCurrent();
    CudaDriver.copyToDevice(address() + offset, src, off, len);
  }

  /** Copies {@code src}'s remaining bytes (a direct buffer, position unchanged) to {@code offset}. */
  public void write(long offset, java.nio.ByteBuffer src) {
    CudaDriver.checkRange(offset, src.remaining(), length, "device buffer");
    ctx.makeCurrent();
    CudaDriver.copyToDevice(address() + offset, src);
  }

  public void write(long offset, byte[] src) {
    write(offset, src, 0, src.length);
  }

  public void read(long offset, byte[] dst, int off, int len) {
    CudaDriver.checkRange(offset, len, length, "device buffer");
    ctx.makeCurrent();
    CudaDriver.copyFromDevice(address() + offset, dst, off, len);
  }

  public byte[] read(long offset, int len) {
    byte[] b = new byte[len];
    read(offset, b, 0, len);
    return b;
  }

  /**
   * Copies {@code len} bytes from device address {@code src} (any device memory of this context)
   * to {@code offset} of this buffer; the destination range is checked.
   */
  public void copyFromDevice(long offset, long src, long len) {
    CudaDriver.checkRange(offset, len, length, "device buffer");
    if (len > 0 && src == 0) {
      throw new IllegalArgumentException("device copy of " + len + " bytes from address 0");
    }
    ctx.makeCurrent();
    CudaDriver.copyDeviceToDevice(address() + offset, src, len);
  }

  public void fill(byte value) {
    ctx.makeCurrent();
    CudaDriver.fill(address(), value, length);
  }

  private void ensureOpen() {
    if (!open) {
      throw new IllegalStateException("device buffer of " + length + " bytes is closed");
    }
  }

  @Override
  public void close() {
    if (open) {
      open = false;
      ctx.makeCurrent();
      JCudaDriver.cuMemFree(ptr);
    }
  }
}
