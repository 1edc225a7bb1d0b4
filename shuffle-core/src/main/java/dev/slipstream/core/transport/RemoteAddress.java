package dev.slipstream.core.transport;

import java.util.Objects;

/** An address in a peer's registered memory: a region and an offset from its start. */
public record RemoteAddress(RegionDescriptor region, long offset) {
  public RemoteAddress {
    Objects.requireNonNull(region, "region");
    if (offset < 0) {
      throw new IllegalArgumentException("offset " + offset + " is negative");
    }
  }

  public RemoteAddress plus(long delta) {
    return new RemoteAddress(region, offset + delta);
  }
}
