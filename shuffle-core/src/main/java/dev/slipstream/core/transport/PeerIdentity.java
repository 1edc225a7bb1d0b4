package dev.slipstream.core.transport;

import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * Who the sending side of a connection says it is: its transport's endpoint, the application
 * (Spark's {@code spark.app.id}) and the executor it belongs to. An empty id means the sender did
 * not know it (tests, tools). With authentication on, the whole identity is covered by the
 * handshake's proofs; without it, it is only what the peer claims.
 *
 * <p>Threading: immutable.
 *
 * @param endpoint the endpoint of the sending transport
 * @param applicationId the sender's application id, or empty
 * @param executorId the sender's executor id, or empty
 */
public record PeerIdentity(EndpointDescriptor endpoint, String applicationId, String executorId) {
  /** Longest application or executor id, in UTF-8 bytes; checked before anything is allocated while decoding. */
  public static final int MAX_ID_BYTES = 256;

  public PeerIdentity {
    Objects.requireNonNull(endpoint, "endpoint");
    checkId("application id", applicationId);
    checkId("executor id", executorId);
  }

  /** An endpoint with no application or executor id. */
  public static PeerIdentity of(EndpointDescriptor endpoint) {
    return new PeerIdentity(endpoint, "", "");
  }

  /** @throws IllegalArgumentException when {@code id} is null or longer than {@link #MAX_ID_BYTES} UTF-8 bytes */
  public static void checkId(String what, String id) {
    Objects.requireNonNull(id, what);
    int bytes = id.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > MAX_ID_BYTES) {
      throw new IllegalArgumentException(what + " '" + PeerText.escape(id) + "': got " + bytes
          + " UTF-8 bytes, expected at most " + MAX_ID_BYTES);
    }
  }

  /** The endpoint (as {@link EndpointDescriptor#encode}), then the application id and the executor id. */
  public void encode(WireWriter out) {
    endpoint.encode(out);
    out.putString(applicationId).putString(executorId);
  }

  public static PeerIdentity decode(WireReader in) throws TransportException {
    EndpointDescriptor e = EndpointDescriptor.decode(in);
    String app = in.getString("application id", MAX_ID_BYTES);
    String executor = in.getString("executor id", MAX_ID_BYTES);
    return new PeerIdentity(e, app, executor);
  }

  /** For logs: the endpoint, then the ids unless both are empty, escaped ({@link PeerText}). */
  @Override
  public String toString() {
    String e = PeerText.escape(endpoint);
    return applicationId.isEmpty() && executorId.isEmpty() ? e : e + " (executor '" + PeerText.escape(executorId)
        + "' of application '" + PeerText.escape(applicationId) + "')";
  }
}
