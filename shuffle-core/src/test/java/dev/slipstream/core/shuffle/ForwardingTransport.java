package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import java.nio.ByteBuffer;

/**
 * A transport that passes everything to another; tests that inject faults into what one node
 * sends extend it and override {@link #connect} (and {@link #close} where they hold state).
 */
abstract class ForwardingTransport implements Transport {
  protected final Transport inner;

  ForwardingTransport(Transport inner) {
    this.inner = inner;
  }

  @Override public String name() { return inner.name(); }
  @Override public EndpointDescriptor localEndpoint() { return inner.localEndpoint(); }
  @Override public RegisteredRegion register(ByteBuffer memory) throws TransportException { return inner.register(memory); }
  @Override public void setMessageHandler(MessageHandler handler) { inner.setMessageHandler(handler); }
  @Override public TransportMetrics metrics() { return inner.metrics(); }
  @Override public int registeredRegionCount() { return inner.registeredRegionCount(); }
  @Override public PeerQueue connect(EndpointDescriptor peer) throws TransportException { return inner.connect(peer); }
  @Override public void close() { inner.close(); }
}
