package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link OutputSpace} of registered device regions ({@link GpuRegion}, cudaMalloc'd, exportable), so
 * the push kernel can send from them through a queue set. Region ids are taken from
 * {@code firstId} upwards.
 */
public final class GpuOutputSpace implements OutputSpace {
  private final GpuContext ctx;
  private final AtomicInteger nextId;

  public GpuOutputSpace(GpuContext ctx, int firstId) {
    this.ctx = ctx;
    this.nextId = new AtomicInteger(firstId);
  }

  @Override
  public RegionBlock allocate(long bytes) {
    return new RegionBlock(GpuRegion.create(ctx, MemoryKind.DEVICE, bytes, nextId.getAndIncrement()));
  }

  /** A block that is a whole registered device region. */
  public record RegionBlock(GpuRegion region) implements Block {
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
      region.close();
    }
  }
}
