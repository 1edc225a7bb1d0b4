package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.Availability;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportProvider;

/**
 * The {@code tcp} transport: software one-sided writes over Netty NIO, available wherever Netty
 * is on the class path (Spark ships it). Configuration is {@link TcpConfig}.
 *
 * <p>Threading: stateless. This class refers to Netty only through {@link TcpTransport}, so that
 * {@link java.util.ServiceLoader} can instantiate it and {@link #probe()} can report a missing
 * Netty instead of failing with a linkage error.
 */
public final class TcpTransportProvider implements TransportProvider {
  public static final String NAME = "tcp";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Availability probe() {
    try {
      Class.forName("io.netty.channel.nio.NioEventLoopGroup", false, TcpTransportProvider.class.getClassLoader());
      return Availability.yes();
    } catch (ClassNotFoundException | LinkageError e) {
      return Availability.no("Netty (io.netty:netty-transport) is not on the class path: " + e);
    }
  }

  /**
   * With a shared secret in the context, every connection of the transport authenticates
   * mutually with it ({@link TcpAuth}); without one, connections are unauthenticated and a peer
   * that asks to authenticate is refused.
   *
   * @throws TransportException UNAVAILABLE when Netty is missing, the port cannot be bound, or the
   *     shared secret is empty
   * @throws IllegalArgumentException for a bad {@link TcpConfig} value, naming the key
   */
  @Override
  public Transport create(TransportContext context) throws TransportException {
    Availability a = probe();
    if (!a.available()) {
      throw new TransportException(TransportError.UNAVAILABLE, "tcp transport is unavailable: " + a.reason());
    }
    if (context.secret().isPresent() && context.secret().get().length == 0) {
      throw new TransportException(TransportError.UNAVAILABLE,
          "tcp transport: the shared secret (spark.authenticate) is empty, expected at least one byte");
    }
    return new TcpTransport(context, new TcpConfig(context.config()));
  }
}
