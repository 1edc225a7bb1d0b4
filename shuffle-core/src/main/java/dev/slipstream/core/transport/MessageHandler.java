package dev.slipstream.core.transport;

import java.nio.ByteBuffer;

/**
 * Receives two-sided control messages. Runs on a transport progress thread; must not block.
 *
 * <p>Transports that know the sending connection's {@link PeerIdentity} (the tcp and loopback
 * providers) call {@link #onMessage(PeerIdentity, ByteBuffer)}; by default it passes the endpoint
 * on to {@link #onMessage(EndpointDescriptor, ByteBuffer)}. A handler that needs the sender's
 * executor or application id is made with {@link #identified}.
 */
@FunctionalInterface
public interface MessageHandler {
  /**
   * @param from the endpoint of the sending transport (authenticated when authentication is on)
   * @param message the message bytes, valid only during the call
   */
  void onMessage(EndpointDescriptor from, ByteBuffer message);

  /**
   * @param from who the sending connection says it is (authenticated when authentication is on;
   *     its application id is the receiver's own whenever the receiver knows one)
   * @param message the message bytes, valid only during the call
   */
  default void onMessage(PeerIdentity from, ByteBuffer message) {
    onMessage(from.endpoint(), message);
  }

  /** A handler that gets the sender's whole identity; from a transport that has none, empty ids. */
  static MessageHandler identified(Identified handler) {
    return new MessageHandler() {
      @Override
      public void onMessage(EndpointDescriptor from, ByteBuffer message) {
        handler.onMessage(PeerIdentity.of(from), message);
      }

      @Override
      public void onMessage(PeerIdentity from, ByteBuffer message) {
        handler.onMessage(from, message);
      }
    };
  }

  /** The handler {@link #identified} wraps. */
  @FunctionalInterface
  interface Identified {
    void onMessage(PeerIdentity from, ByteBuffer message);
  }
}
