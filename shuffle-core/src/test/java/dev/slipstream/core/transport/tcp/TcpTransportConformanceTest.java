package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportConformanceSuite;
import dev.slipstream.core.transport.TransportContext;

/** The conformance suite over real tcp connections on 127.0.0.1, ephemeral ports, default config. */
class TcpTransportConformanceTest extends TransportConformanceSuite {
  @Override
  protected Transport newTransport(String name) throws Exception {
    return new TcpTransportProvider().create(new TransportContext(ConfigSource.empty(), "127.0.0.1", name,
        java.util.Optional.empty(), APPLICATION, name));
  }
}
