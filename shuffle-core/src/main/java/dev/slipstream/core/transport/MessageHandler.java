package dev.slipstream.core.transport;

import java.nio.ByteBuffer;

/** Receives two-sided control messages. Runs on a transport progress thread; must not block. */
@FunctionalInterface
public interface MessageHandler {
  /**
   * @param from the endpoint of the sending transport (authenticated when authentication is on)
   * @param message the message bytes, valid only during the call
   */
  void onMessage(EndpointDescriptor from, ByteBuffer message);
}
