package dev.slipstream.core.transport;

import java.io.IOException;

/** A typed transport failure. The message says what was got and what was expected. */
public class TransportException extends IOException {
  private static final long serialVersionUID = 1L;

  private final TransportError error;
  private final String detail;

  public TransportException(TransportError error, String message) {
    super(error + ": " + message);
    this.error = error;
    this.detail = message;
  }

  public TransportException(TransportError error, String message, Throwable cause) {
    super(error + ": " + message, cause);
    this.error = error;
    this.detail = message;
  }

  public TransportError error() {
    return error;
  }

  /** The message without the error's name in front (for wrapping in a message of its own). */
  public String detail() {
    return detail;
  }
}
