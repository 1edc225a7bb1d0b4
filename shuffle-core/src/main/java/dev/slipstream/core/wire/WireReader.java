package dev.slipstream.core.wire;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A bounds-checked big-endian decoder. Every read names the field, so a truncated or forged
 * input fails with "truncated <field>: need N bytes, have M" instead of an index exception.
 *
 * <p>Threading: not thread-safe; one reader per message.
 */
public final class WireReader {
  private final ByteBuffer in;

  public WireReader(byte[] bytes) {
    this(ByteBuffer.wrap(bytes));
  }

  /** Reads from the buffer's position to its limit without changing the caller's buffer. */
  public WireReader(ByteBuffer buffer) {
    this.in = buffer.duplicate().order(java.nio.ByteOrder.BIG_ENDIAN);
  }

  public int remaining() {
    return in.remaining();
  }

  private void need(int n, String field) throws TransportException {
    if (in.remaining() < n) {
      throw new TransportException(TransportError.MALFORMED,
          "truncated " + field + ": need " + n + " bytes, have " + in.remaining());
    }
  }

  /** Checks magic, version and type. */
  public void expectHeader(byte type, String what) throws TransportException {
    byte t = readHeader(what);
    if (t != type) {
      throw new TransportException(TransportError.UNKNOWN_TYPE,
          what + ": got type id " + t + ", expected " + type);
    }
  }

  /** Checks magic and version and returns the type id. */
  public byte readHeader(String what) throws TransportException {
    need(WireWriter.HEADER_LENGTH, what + " header");
    byte m0 = in.get();
    byte m1 = in.get();
    if (m0 != WireWriter.MAGIC_0 || m1 != WireWriter.MAGIC_1) {
      throw new TransportException(TransportError.BAD_VERSION,
          what + ": got magic 0x" + Integer.toHexString(((m0 & 0xff) << 8) | (m1 & 0xff))
              + ", expected 0x534c ('SL')");
    }
    byte v = in.get();
    if (v != WireWriter.VERSION) {
      throw new TransportException(TransportError.BAD_VERSION,
          what + ": got version " + v + ", expected " + WireWriter.VERSION);
    }
    return in.get();
  }

  public byte getByte(String field) throws TransportException {
    need(1, field);
    return in.get();
  }

  public int getInt(String field) throws TransportException {
    need(4, field);
    return in.getInt();
  }

  public long getLong(String field) throws TransportException {
    need(8, field);
    return in.getLong();
  }

  /** An int that must lie in {@code [min, max]}. */
  public int getInt(String field, int min, int max) throws TransportException {
    int v = getInt(field);
    if (v < min || v > max) {
      throw new TransportException(TransportError.MALFORMED,
          field + " " + v + " outside [" + min + ", " + max + "]");
    }
    return v;
  }

  /** Length-prefixed bytes, the length checked against {@code max} and what remains. */
  public byte[] getBytes(String field, int max) throws TransportException {
    int n = getInt(field + " length");
    if (n < 0 || n > max) {
      throw new TransportException(TransportError.MALFORMED,
          field + " length " + n + " outside [0, " + max + "]");
    }
    need(n, field);
    byte[] b = new byte[n];
    in.get(b);
    return b;
  }

  public String getString(String field, int maxBytes) throws TransportException {
    return new String(getBytes(field, maxBytes), StandardCharsets.UTF_8);
  }

  /** A view of the next {@code n} bytes (checked), advancing past them. */
  public ByteBuffer getSlice(String field, int n) throws TransportException {
    if (n < 0) {
      throw new TransportException(TransportError.MALFORMED, field + " length " + n + " is negative");
    }
    need(n, field);
    ByteBuffer s = in.slice();
    s.limit(n);
    in.position(in.position() + n);
    return s;
  }

  public void expectEnd(String what) throws TransportException {
    if (in.remaining() != 0) {
      throw new TransportException(TransportError.MALFORMED,
          what + ": " + in.remaining() + " trailing bytes, expected none");
    }
  }
}
