package dev.slipstream.gpu.nic;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;

/**
 * An executor's device landing region as registered with its RDMA NIC: the region id (RDMA writes
 * address it at iova {@code id << 40}, slipstream/abi.h), its memory key, and its length. Part of
 * the executor's GPU endpoint, so that holders on other machines can address their RDMA writes.
 * Immutable.
 */
public record NicLanding(int regionId, int mkey, long length) {
  /** Region ids stay below the NIC's sink id (2^24 - 1). */
  public static final int MAX_REGION_ID = (1 << 24) - 2;
  public static final long MAX_LENGTH = 1L << 40;

  public NicLanding {
    if (regionId < 0 || regionId > MAX_REGION_ID) {
      throw new IllegalArgumentException("NIC landing: region id " + Integer.toUnsignedString(regionId)
          + ", expected 0.." + MAX_REGION_ID);
    }
    if (length <= 0 || length > MAX_LENGTH) {
      throw new IllegalArgumentException("NIC landing: length " + length + ", expected 1.." + MAX_LENGTH);
    }
  }

  /**
   * How a write request names this landing region ({@code device}: the owner's GPU): its id,
   * length and memory key, no address (the NIC addresses it at iova {@code id << 40}).
   */
  public RegionDescriptor descriptor(int device) {
    return new RegionDescriptor(regionId, 0L, length, Integer.toUnsignedLong(mkey), MemoryKind.DEVICE, device);
  }
}
