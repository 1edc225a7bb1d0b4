package dev.slipstream.core.transport.loopback;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportConformanceSuite;
import dev.slipstream.core.transport.TransportContext;

/** The conformance suite over the in-JVM loopback transport, on a fabric of its own. */
class LoopbackTransportConformanceTest extends TransportConformanceSuite {
  private final LoopbackFabric fabric = new LoopbackFabric();

  @Override
  protected Transport newTransport(String name) throws Exception {
    return new LoopbackTransportProvider(fabric).create(new TransportContext(ConfigSource.empty(), "localhost", name,
        java.util.Optional.empty(), APPLICATION, name));
  }
}
