package dev.slipstream.gpu;

/**
 * A peer's region mapped into this process ({@code slip_remote}): device memory opened from its
 * CUDA IPC handle (peer access enabled), or host shared memory mapped and pinned. Or an alias of a
 * local region, the destination when a process writes its own partition.
 *
 * <p>Ownership: close it after the queue sets that use it; {@link #close()} is idempotent.
 */
public final class RemoteRegion implements AutoCloseable {
  private final long devicePointer;
  private final long length;
  private final int id;
  private long handle;

  private RemoteRegion(long handle) {
    this.handle = handle;
    long[] info = SlipNative.remoteInfo(handle);
    this.devicePointer = info[0];
    this.length = info[2];
    this.id = (int) info[3];
  }

  /**
   * Imports a peer's descriptor. The Java codec validates it first, then the native library checks
   * it again (magic, version, kind, length, owner) and maps the memory.
   */
  public static RemoteRegion importFrom(GpuContext ctx, byte[] descriptor) {
    RegionExport.decode(descriptor);
    return new RemoteRegion(SlipNative.importRemote(ctx.handle(), descriptor));
  }

  public static RemoteRegion importFrom(GpuContext ctx, RegionExport descriptor) {
    return new RemoteRegion(SlipNative.importRemote(ctx.handle(), descriptor.encode()));
  }

  /** A remote view of a local region (same process). */
  public static RemoteRegion alias(GpuRegion local) {
    return new RemoteRegion(SlipNative.aliasRemote(local.handle()));
  }

  public int id() {
    return id;
  }

  public long length() {
    return length;
  }

  /** Address usable by this process's GPU. */
  public long devicePointer() {
    ensureOpen();
    return devicePointer;
  }

  /**
   * Checks a write request against the imported region; throws a {@link GpuException}
   * (BAD_REGION, BAD_KEY or OUT_OF_RANGE) whose message names the request, never the real key.
   */
  public void checkWrite(int regionId, long key, long offset, long len) {
    SlipNative.checkRemote(handle(), regionId, key, offset, len);
  }

  /**
   * Checks that the memory really mapped here covers the length the descriptor claims: the
   * allocation that contains this region's address ({@code cuMemGetAddressRange}, in {@code ctx})
   * must reach {@code length()} bytes past it. A device write request is checked against the
   * claimed length only, so a descriptor claiming more than the exporter allocated would otherwise
   * let a push store past the allocation. Throws {@link GpuException} (BAD_DESCRIPTOR) naming both.
   */
  public void checkMappedLength(GpuContext ctx) {
    ctx.makeCurrent();
    long p = devicePointer();
    long[] range = CudaDriver.addressRange(p);
    checkExtent(id, p, length, range[0], range[1]);
  }

  /**
   * Checks that {@code [pointer, pointer + claimed)} lies inside the allocation {@code [base, base +
   * size)}; throws {@link GpuException} (BAD_DESCRIPTOR) naming what was got and what was expected.
   */
  public static void checkExtent(int regionId, long pointer, long claimed, long base, long size) {
    if (claimed < 0 || size < 0 || pointer < base || pointer - base > size || claimed > size - (pointer - base)) {
      throw new GpuException(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, "imported region " + Integer.toUnsignedString(regionId)
          + " claims " + claimed + " bytes at 0x" + Long.toHexString(pointer) + ", but the allocation mapped there has "
          + size + " bytes from 0x" + Long.toHexString(base) + " (" + Math.max(0, size - (pointer - base))
          + " from the region's start): expected the claimed length inside the allocation");
    }
  }

  long handle() {
    ensureOpen();
    return handle;
  }

  private void ensureOpen() {
    if (handle == 0) {
      throw new IllegalStateException("remote region " + Integer.toUnsignedString(id) + " is closed");
    }
  }

  @Override
  public void close() {
    if (handle != 0) {
      SlipNative.destroyRemote(handle);
      handle = 0;
    }
  }
}
