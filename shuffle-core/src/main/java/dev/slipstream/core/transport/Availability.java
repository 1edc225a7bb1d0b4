package dev.slipstream.core.transport;

import java.util.Objects;

/** The result of a provider's probe: available, or unavailable with the reason kept. */
public record Availability(boolean available, String reason) {

  public Availability {
    Objects.requireNonNull(reason, "reason");
  }

  public static Availability yes() {
    return new Availability(true, "available");
  }

  public static Availability no(String reason) {
    return new Availability(false, reason);
  }
}
