package dev.slipstream.core.transport;

import java.io.IOException;

/** A typed transport failure. The message says what was got and what was expected. */
public class TransportException extends IOException {
  private static final long serialVersionUID = 1L;

  private final TransportError error;

  public TransportException(TransportError error, String message) {
    super(error + ": " + message);
    this.error = error;
  }

  public TransportException(TransportError error, String message, Throwable cause) {
    super(error + ": " + message, cause);
    this.error = error;
  }

  public TransportError error() {
    return error;
  }
}
