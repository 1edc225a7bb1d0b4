package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportConformanceSuite;
import dev.slipstream.core.transport.TransportContext;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The conformance suite over tcp with a shared secret: every connection authenticates first
 * (docs/protocol-tcp.md, "Authentication"), and everything else behaves as without it.
 */
class TcpAuthenticatedConformanceTest extends TransportConformanceSuite {
  @Override
  protected Transport newTransport(String name) throws Exception {
    return new TcpTransportProvider().create(new TransportContext(ConfigSource.empty(), "127.0.0.1", name,
        Optional.of("conformance-secret".getBytes(StandardCharsets.UTF_8)), APPLICATION, name));
  }
}
