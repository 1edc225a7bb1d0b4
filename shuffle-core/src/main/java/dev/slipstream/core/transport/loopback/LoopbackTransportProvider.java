package dev.slipstream.core.transport.loopback;

import dev.slipstream.core.transport.Availability;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportProvider;

/** In-JVM transport for tests and {@code local[*]} mode. Always available; reaches only this JVM. */
public final class LoopbackTransportProvider implements TransportProvider {
  public static final String NAME = "loopback";

  private final LoopbackFabric fabric;

  public LoopbackTransportProvider() {
    this(LoopbackFabric.jvmWide());
  }

  public LoopbackTransportProvider(LoopbackFabric fabric) {
    this.fabric = fabric;
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Availability probe() {
    return Availability.yes();
  }

  @Override
  public Transport create(TransportContext context) {
    return new LoopbackTransport(fabric, context.processName(), context.applicationId(), context.executorId());
  }
}
