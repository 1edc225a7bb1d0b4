package dev.slipstream.core.transport;

import dev.slipstream.core.config.ConfigSource;
import java.util.Objects;
import java.util.Optional;

/**
 * What a provider gets to create a transport: configuration, the host name to advertise, a
 * process name for logs, the shared secret when authentication is on, and the identity of this
 * process (its application and executor id).
 *
 * <p>Every connection the transport opens states the application and executor id
 * ({@link PeerIdentity}); a transport that knows its application id refuses connections that name
 * another application (a stale peer entry, or a port reused by another application).
 *
 * @param config configuration (keys under {@code spark.slipstream.})
 * @param advertisedHost the host name or address peers use to reach this process
 * @param processName for logs and thread names, e.g. {@code "executor-1"}
 * @param secret Spark's shared secret when {@code spark.authenticate} is on, else empty
 * @param applicationId Spark's {@code spark.app.id}, or empty when unknown (no application check)
 * @param executorId this process's executor id, or empty when unknown
 */
public record TransportContext(ConfigSource config, String advertisedHost, String processName,
                               Optional<byte[]> secret, String applicationId, String executorId) {
  public TransportContext {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(advertisedHost, "advertisedHost");
    Objects.requireNonNull(processName, "processName");
    Objects.requireNonNull(secret, "secret");
    PeerIdentity.checkId("application id", applicationId);
    PeerIdentity.checkId("executor id", executorId);
  }

  /** A context without application and executor id. */
  public TransportContext(ConfigSource config, String advertisedHost, String processName, Optional<byte[]> secret) {
    this(config, advertisedHost, processName, secret, "", "");
  }

  /** A context without secret, application and executor id. */
  public static TransportContext of(ConfigSource config, String host, String processName) {
    return new TransportContext(config, host, processName, Optional.empty());
  }
}
