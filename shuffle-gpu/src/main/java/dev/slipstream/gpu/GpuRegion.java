package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
/**
 * A registered region of this process ({@code slip_region}): device memory exported to peers
 * through CUDA IPC, or POSIX shared memory pinned for the GPU. Peers get its
 * {@link #export() descriptor} out of band and import it as a {@link RemoteRegion}.
 *
 * <p>Ownership: close it after the queue sets that use it and before its {@link GpuContext};
 * {@link #close()} is idempotent. Threading: any thread.
 */
public final class GpuRegion implements AutoCloseable {
  private final GpuContext ctx;
  private final MemoryKind kind;
  private final long devicePointer;
  private final long hostPointer;
  private final long length;
  private final int id;
  private final long key;
  private long handle;

  private GpuRegion(GpuContext ctx, MemoryKind kind, long handle) {
    this.ctx = ctx;
    this.kind = kind;
    this.handle = handle;
    long[] info = SlipNative.regionInfo(handle);
    this.devicePointer = info[0];
    this.hostPointer = info[1];
    this.length = info[2];
    this.id = (int) info[3];
    this.key = info[4];
  }

  /** Allocates and registers {@code length} bytes of {@code kind} under {@code id}, with a fresh random key. */
  public static GpuRegion create(GpuContext ctx, MemoryKind kind, long length, int id) {
    return new GpuRegion(ctx, kind, SlipNative.createRegion(ctx.handle(), kind, length, id));
  }

  public MemoryKind kind() {
    return kind;
  }

  public int id() {
    return id;
  }

  /** The access key a writer must present (the owner's secret: send it only inside the descriptor). */
  public long key() {
    return key;
  }

  public long length() {
    return length;
  }

  /** Device address (for host memory: its device alias). */
  public long devicePointer() {
    ensureOpen();
    return devicePointer;
  }

  /** Host address of host memory, 0 for device memory. */
  public long hostPointer() {
    ensureOpen();
    return hostPointer;
  }

  public RegionExport export() {
    return RegionExport.decode(SlipNative.exportRegion(handle()));
  }

  public void write(long offset, byte[] src) {
    CudaDriver.checkRange(offset, src.length, length, "region " + Integer.toUnsignedString(id));
    ctx.makeCurrent();
    CudaDriver.copyToDevice(devicePointer() + offset, src, 0, src.length);
  }

  public byte[] read(long offset, int len) {
    byte[] b = new byte[len];
    read(offset, b, 0, len);
    return b;
  }

  /** Fills {@code dst}'s remaining bytes (a direct buffer, position unchanged) from {@code offset} of this region. */
  public void read(long offset, java.nio.ByteBuffer dst) {
    CudaDriver.checkRange(offset, dst.remaining(), length, "region " + Integer.toUnsignedString(id));
    ctx.makeCurrent();
    CudaDriver.copyFromDevice(devicePointer() + offset, dst);
  }

  /** Copies {@code len} bytes from {@code offset} of this region into {@code dst[off..]}. */
  public void read(long offset, byte[] dst, int off, int len) {
    CudaDriver.checkRange(offset, len, length, "region " + Integer.toUnsignedString(id));
    ctx.makeCurrent();
    CudaDriver.copyFromDevice(devicePointer() + offset, dst, off, len);
  }

  public void fill(byte value) {
    ctx.makeCurrent();
    CudaDriver.fill(devicePointer(), value, length);
  }

  long handle() {
    ensureOpen();
    return handle;
  }

  private void ensureOpen() {
    if (handle == 0) {
      throw new IllegalStateException("region " + Integer.toUnsignedString(id) + " is closed");
    }
  }

  @Override
  public void close() {
    if (handle != 0) {
      SlipNative.destroyRegion(handle);
      handle = 0;
    }
  }
}
