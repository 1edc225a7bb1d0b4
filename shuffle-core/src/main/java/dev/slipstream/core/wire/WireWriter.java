package dev.slipstream.core.wire;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A growable big-endian encoder for Slipstream wire formats. Every standalone encoding starts
 * with {@link #putHeader}: magic {@code 'S','L'}, version, type id.
 *
 * <p>Threading: not thread-safe; one writer per message.
 */
public final class WireWriter {
  public static final byte MAGIC_0 = 'S';
  public static final byte MAGIC_1 = 'L';
  public static final byte VERSION = 1;
  public static final int HEADER_LENGTH = 4;

  /** Type ids of standalone encodings (descriptors and control messages). */
  public static final byte TYPE_ENDPOINT = 1;
  public static final byte TYPE_REGION = 2;

  private byte[] buf;
  private int pos;

  public WireWriter(int initialCapacity) {
    buf = new byte[Math.max(16, initialCapacity)];
  }

  private void ensure(int n) {
    if (pos + n > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
    }
  }

  public WireWriter putHeader(byte type) {
    return putByte(MAGIC_0).putByte(MAGIC_1).putByte(VERSION).putByte(type);
  }

  public WireWriter putByte(int v) {
    ensure(1);
    buf[pos++] = (byte) v;
    return this;
  }

  public WireWriter putInt(int v) {
    ensure(4);
    buf[pos++] = (byte) (v >>> 24);
    buf[pos++] = (byte) (v >>> 16);
    buf[pos++] = (byte) (v >>> 8);
    buf[pos++] = (byte) v;
    return this;
  }

  public WireWriter putLong(long v) {
    putInt((int) (v >>> 32));
    return putInt((int) v);
  }

  /** Length-prefixed (int) bytes. */
  public WireWriter putBytes(byte[] b) {
    putInt(b.length);
    ensure(b.length);
    System.arraycopy(b, 0, buf, pos, b.length);
    pos += b.length;
    return this;
  }

  /** Length-prefixed UTF-8. */
  public WireWriter putString(String s) {
    return putBytes(s.getBytes(StandardCharsets.UTF_8));
  }

  public int length() {
    return pos;
  }

  public byte[] toByteArray() {
    return Arrays.copyOf(buf, pos);
  }

  public ByteBuffer toByteBuffer() {
    return ByteBuffer.wrap(buf, 0, pos).slice().order(ByteOrder.BIG_ENDIAN);
  }
}
