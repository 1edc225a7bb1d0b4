package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import io.netty.buffer.ByteBuf;

/**
 * A bounds-checked reader over the fields of one frame (after its 8-byte header). Every read
 * names the field, so a truncated or forged frame fails with
 * {@code "truncated WRITE frame: need 8 bytes for write length, have 3"}, never an index
 * exception.
 *
 * <p>Threading: not thread-safe; one reader per frame, on the event loop.
 */
final class FrameReader {
  private final ByteBuf in;
  private final TcpFrameType type;

  FrameReader(ByteBuf fields, TcpFrameType type) {
    this.in = fields;
    this.type = type;
  }

  TcpFrameType type() {
    return type;
  }

  int remaining() {
    return in.readableBytes();
  }

  private void need(int n, String field) throws TransportException {
    if (in.readableBytes() < n) {
      throw new TransportException(TransportError.MALFORMED, "truncated " + type + " frame: need " + n
          + " bytes for " + field + ", have " + in.readableBytes());
    }
  }

  long getLong(String field) throws TransportException {
    need(8, field);
    return in.readLong();
  }

  int getInt(String field) throws TransportException {
    need(4, field);
    return in.readInt();
  }

  /** A length-prefixed byte string of at most {@code max} bytes. */
  byte[] getBytes(String field, int max) throws TransportException {
    int n = getInt(field + " length");
    if (n < 0 || n > max) {
      throw new TransportException(TransportError.MALFORMED,
          type + " frame: " + field + " length " + n + " outside [0, " + max + "]");
    }
    need(n, field);
    byte[] b = new byte[n];
    in.readBytes(b);
    return b;
  }

  /** Exactly {@code n} bytes (a fixed-size field such as a nonce or a MAC). */
  byte[] getFixed(String field, int n) throws TransportException {
    need(n, field);
    byte[] b = new byte[n];
    in.readBytes(b);
    return b;
  }

  /** A reader for the rest of the frame in the descriptor codec's format. */
  WireReader restAsWire() {
    WireReader r = new WireReader(in.nioBuffer(in.readerIndex(), in.readableBytes()));
    in.skipBytes(in.readableBytes());
    return r;
  }

  /**
   * The payload that ends the frame: its declared length must equal the bytes left. Returns a
   * retained slice; the caller owns it.
   */
  ByteBuf retainedPayload(String field, int declared) throws TransportException {
    if (declared < 0 || declared != in.readableBytes()) {
      throw new TransportException(TransportError.MALFORMED, type + " frame: " + field + " " + declared
          + " does not match the " + in.readableBytes() + " payload bytes left in the frame");
    }
    return in.readRetainedSlice(declared);
  }

  void expectEnd() throws TransportException {
    if (in.isReadable()) {
      throw new TransportException(TransportError.MALFORMED,
          type + " frame: " + in.readableBytes() + " trailing bytes, expected none");
    }
  }
}
