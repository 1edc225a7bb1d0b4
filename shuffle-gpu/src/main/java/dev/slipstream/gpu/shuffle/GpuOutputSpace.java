package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link OutputSpace} of registered device regions ({@link GpuRegion}, cudaMalloc'd, exportable), so
 * the push kernel can send from them through a queue set; with a NIC, each is also registered on
 * it when made (once per map output, for its lifetime), so pushes over NIC links can read it.
 * Region ids are taken from {@code firstId} upwards.
 */
public final class GpuOutputSpace implements OutputSpace {
  private final GpuContext ctx;
  private final AtomicInteger nextId;
  private final NicRegistrar nic;

  public GpuOutputSpace(GpuContext ctx, int firstId) {
    this(ctx, firstId, null);
  }

  /** {@code nic}: the NIC every output is registered on, or null for none. */
  public GpuOutputSpace(GpuContext ctx, int firstId, NicRegistrar nic) {
    this.ctx = ctx;
    this.nextId = new AtomicInteger(firstId);
    this.nic = nic;
  }

  @Override
  public RegionBlock allocate(long bytes) {
    GpuRegion r = GpuRegion.create(ctx, MemoryKind.DEVICE, bytes, nextId.getAndIncrement());
    if (nic == null) {
      return new RegionBlock(r, null, 0);
    }
    try {
      return new RegionBlock(r, nic, nic.register(r.devicePointer(), r.length(), r.id()));
    } catch (RuntimeException e) {
      r.close();
      throw e;
    }
  }

  /** A block that is a whole registered device region (and its NIC registration, when {@code nic} is not null). */
  public record RegionBlock(GpuRegion region, NicRegistrar nic, int mkey) implements Block {
    @Override
    public long length() {
      return region.length();
    }

    @Override
    public long address() {
      return region.devicePointer();
    }

    @Override
    public void write(long offset, byte[] src, int off, int len) {
      if (off == 0 && len == src.length) {
        region.write(offset, src);
      } else {
        region.write(offset, java.util.Arrays.copyOfRange(src, off, off + len));
      }
    }

    @Override
    public void read(long offset, byte[] dst, int off, int len) {
      region.read(offset, dst, off, len);
    }

    @Override
    public void read(long offset, java.nio.ByteBuffer dst) {
      region.read(offset, dst); // straight into a direct buffer: no staging copy
    }

    @Override
    public void close() {
      try {
        if (nic != null) {
          nic.deregister(region.id(), mkey);
        }
      } finally {
        region.close();
      }
    }
  }
}
