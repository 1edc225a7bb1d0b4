package dev.slipstream.core.transport;

/** Why a transport operation failed. Wire codes are stable and travel in error replies. */
public enum TransportError {
  /** The region id is not registered at the receiver (never was, or was closed). */
  UNKNOWN_REGION(1),
  /** The key does not match the registered region's key. */
  BAD_KEY(2),
  /** Offset or offset+length lies outside the region, or overflows. */
  OUT_OF_RANGE(3),
  /** A frame or message could not be decoded: truncated, oversized, bad field. */
  MALFORMED(4),
  /** Unknown message or frame type id. */
  UNKNOWN_TYPE(5),
  /** Wrong magic or protocol version. */
  BAD_VERSION(6),
  /** The peer's connection died or could not be opened. */
  PEER_LOST(7),
  /** A deadline passed. */
  TIMEOUT(8),
  /** The queue or transport was closed. */
  CLOSED(9),
  /** The provider cannot run here. */
  UNAVAILABLE(10),
  /** Authentication failed or was required and missing. */
  AUTH_FAILED(11),
  /** A signal address is not 8-byte aligned. */
  MISALIGNED(12),
  /** Received bytes do not match the block's checksum. */
  CHECKSUM_MISMATCH(13),
  /** The connecting peer belongs to another application than the receiver. */
  WRONG_APPLICATION(14),
  /** The receiver has as many inbound connections as it allows and refused one more. */
  TOO_MANY_CONNECTIONS(15),
  /** Anything else; the message says what. */
  INTERNAL(99);

  private final int code;

  TransportError(int code) {
    this.code = code;
  }

  public int code() {
    return code;
  }

  /** Decodes a wire code; unknown codes map to {@link #INTERNAL} (the message keeps the detail). */
  public static TransportError fromCode(int code) {
    for (TransportError e : values()) {
      if (e.code == code) {
        return e;
      }
    }
    return INTERNAL;
  }
}
