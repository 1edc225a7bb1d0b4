package dev.slipstream.core.transport;

import dev.slipstream.core.config.ConfigSource;
import java.util.Objects;
import java.util.Optional;

/**
 * What a provider gets to create a transport: configuration, the host name to advertise, a
 * process name for logs, and the shared secret when authentication is on.
 *
 * @param config configuration (keys under {@code spark.slipstream.})
 * @param advertisedHost the host name or address peers use to reach this process
 * @param processName for logs and thread names, e.g. {@code "executor-1"}
 * @param secret Spark's shared secret when {@code spark.authenticate} is on, else empty
 */
public record TransportContext(ConfigSource config, String advertisedHost, String processName,
                               Optional<byte[]> secret) {
  public TransportContext {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(advertisedHost, "advertisedHost");
    Objects.requireNonNull(processName, "processName");
    Objects.requireNonNull(secret, "secret");
  }

  public static TransportContext of(ConfigSource config, String host, String processName) {
    return new TransportContext(config, host, processName, Optional.empty());
  }
}
