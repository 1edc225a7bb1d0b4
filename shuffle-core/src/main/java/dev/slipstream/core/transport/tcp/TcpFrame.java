package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import io.netty.buffer.ByteBuf;
import io.netty.util.ReferenceCounted;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * A frame of the tcp transport; docs/protocol-tcp.md is the reference. Every frame is
 *
 * <pre>
 *   length:i32  magic 'S' 'L'  version:u8  type:u8  fields...  [payload]
 * </pre>
 *
 * where {@code length} counts the whole frame including itself, all integers are big-endian,
 * and a payload, when there is one, ends the frame after its own i32 length.
 *
 * <p>Ownership: frames with a payload ({@link Write}, {@link WriteSignal}, {@link Send}) are
 * {@link ReferenceCounted} through their payload; whoever holds one releases it once.
 */
sealed interface TcpFrame permits TcpFrame.WithPayload, TcpHandshake.Hello, TcpFrame.Signal, TcpFrame.FetchAdd,
    TcpFrame.Ack, TcpFrame.ErrorReply, TcpHandshake.AuthHello, TcpHandshake.AuthChallenge, TcpHandshake.AuthProof {
  /** Length field, magic, version and type id. */
  int HEADER_LENGTH = 8;

  TcpFrameType type();

  /** Bytes of the fixed fields between the header and the payload. */
  int fieldsLength();

  void encodeFields(ByteBuf out);

  /** The payload ending the frame, or null. */
  default ByteBuf payload() {
    return null;
  }

  /** Bytes of the whole encoded frame. */
  default int frameLength() {
    ByteBuf p = payload();
    return HEADER_LENGTH + fieldsLength() + (p == null ? 0 : p.readableBytes());
  }

  /** The region id, key and offset that name a place in a peer's registered memory. */
  record Target(long regionId, long key, long offset) {
    static final int LENGTH = 24;

    static Target of(RemoteAddress a) {
      return new Target(a.region().id(), a.region().key(), a.offset());
    }

    void encode(ByteBuf out) {
      out.writeLong(regionId).writeLong(key).writeLong(offset);
    }

    static Target decode(FrameReader in, String what) throws TransportException {
      return new Target(in.getLong(what + " region id"), in.getLong(what + " region key"),
          in.getLong(what + " offset"));
    }
  }

  /** A frame whose reference count is its payload's. */
  sealed interface WithPayload extends TcpFrame, ReferenceCounted permits Write, WriteSignal, Send {
    @Override
    ByteBuf payload();

    @Override
    default int refCnt() {
      return payload().refCnt();
    }

    @Override
    default ReferenceCounted retain() {
      payload().retain();
      return this;
    }

    @Override
    default ReferenceCounted retain(int increment) {
      payload().retain(increment);
      return this;
    }

    @Override
    default ReferenceCounted touch() {
      payload().touch();
      return this;
    }

    @Override
    default ReferenceCounted touch(Object hint) {
      payload().touch(hint);
      return this;
    }

    @Override
    default boolean release() {
      return payload().release();
    }

    @Override
    default boolean release(int decrement) {
      return payload().release(decrement);
    }
  }

  /**
   * One part of a write of {@code length} bytes at {@code dst}: the payload goes to
   * {@code dst.offset + partOffset}. The receiver checks the whole write's range on every part,
   * so a rejected write writes nothing; the last part (partOffset + payload == length) is acked.
   */
  record Write(long seq, Target dst, long length, long partOffset, ByteBuf payload) implements WithPayload {
    static final int FIELDS_LENGTH = 8 + Target.LENGTH + 8 + 8 + 4;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.WRITE;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    boolean isLast() {
      return partOffset + payload.readableBytes() == length;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq);
      dst.encode(out);
      out.writeLong(length).writeLong(partOffset).writeInt(payload.readableBytes());
    }

    static Write decode(FrameReader in) throws TransportException {
      long seq = in.getLong("sequence number");
      Target dst = Target.decode(in, "destination");
      long length = in.getLong("write length");
      long partOffset = in.getLong("part offset");
      int partLength = in.getInt("part length");
      checkPart(in.type(), length, partOffset, partLength);
      return new Write(seq, dst, length, partOffset, in.retainedPayload("part length", partLength));
    }
  }

  /** A write part that also names the signal to add {@code delta} to after the last part. */
  record WriteSignal(long seq, Target dst, long length, long partOffset, Target signal, long delta,
                     ByteBuf payload) implements WithPayload {
    static final int FIELDS_LENGTH = Write.FIELDS_LENGTH + Target.LENGTH + 8;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.WRITE_SIGNAL;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    boolean isLast() {
      return partOffset + payload.readableBytes() == length;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq);
      dst.encode(out);
      out.writeLong(length).writeLong(partOffset);
      signal.encode(out);
      out.writeLong(delta).writeInt(payload.readableBytes());
    }

    static WriteSignal decode(FrameReader in) throws TransportException {
      long seq = in.getLong("sequence number");
      Target dst = Target.decode(in, "destination");
      long length = in.getLong("write length");
      long partOffset = in.getLong("part offset");
      Target signal = Target.decode(in, "signal");
      long delta = in.getLong("signal delta");
      int partLength = in.getInt("part length");
      checkPart(in.type(), length, partOffset, partLength);
      return new WriteSignal(seq, dst, length, partOffset, signal, delta,
          in.retainedPayload("part length", partLength));
    }
  }

  private static void checkPart(TcpFrameType type, long length, long partOffset, int partLength)
      throws TransportException {
    if (length < 0 || partOffset < 0 || partLength < 0 || partOffset > length - partLength) {
      throw new TransportException(TransportError.MALFORMED, type + " frame: part offset " + partOffset
          + " + part length " + partLength + " outside the write's length " + length
          + ", expected 0 <= part offset <= write length - part length");
    }
  }

  /** Adds {@code delta} to the 8-byte signal at {@code signal}, after earlier frames. */
  record Signal(long seq, Target signal, long delta) implements TcpFrame {
    static final int FIELDS_LENGTH = 8 + Target.LENGTH + 8;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.SIGNAL;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq);
      signal.encode(out);
      out.writeLong(delta);
    }

    static Signal decode(FrameReader in) throws TransportException {
      Signal s = new Signal(in.getLong("sequence number"), Target.decode(in, "signal"), in.getLong("delta"));
      in.expectEnd();
      return s;
    }
  }

  /** Atomically adds {@code delta} to the 8-byte word at {@code dst}; the ACK carries the old value. */
  record FetchAdd(long seq, Target dst, long delta) implements TcpFrame {
    static final int FIELDS_LENGTH = 8 + Target.LENGTH + 8;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.FETCH_ADD;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq);
      dst.encode(out);
      out.writeLong(delta);
    }

    static FetchAdd decode(FrameReader in) throws TransportException {
      FetchAdd f = new FetchAdd(in.getLong("sequence number"), Target.decode(in, "destination"), in.getLong("delta"));
      in.expectEnd();
      return f;
    }
  }

  /** A two-sided control message for the receiver's MessageHandler. */
  record Send(long seq, ByteBuf payload) implements WithPayload {
    static final int FIELDS_LENGTH = 8 + 4;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.SEND;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq).writeInt(payload.readableBytes());
    }

    static Send decode(FrameReader in) throws TransportException {
      long seq = in.getLong("sequence number");
      int length = in.getInt("message length");
      return new Send(seq, in.retainedPayload("message length", length));
    }
  }

  /** The operation {@code seq} was applied; {@code value} is fetch-add's old value, else 0. */
  record Ack(long seq, long value) implements TcpFrame {
    static final int FIELDS_LENGTH = 16;

    @Override
    public TcpFrameType type() {
      return TcpFrameType.ACK;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeLong(seq).writeLong(value);
    }

    static Ack decode(FrameReader in) throws TransportException {
      Ack a = new Ack(in.getLong("sequence number"), in.getLong("ack value"));
      in.expectEnd();
      return a;
    }
  }

  /**
   * The operation {@code seq} was rejected and wrote nothing; seq 0 means the connection itself
   * was rejected (an undecodable frame) and is being closed. {@code code} is a
   * {@link TransportError} wire code.
   */
  record ErrorReply(long seq, int code, String message) implements TcpFrame {
    /** Longest message sent, in UTF-16 units; decoding accepts up to {@link #MAX_MESSAGE_BYTES}. */
    static final int MAX_MESSAGE_CHARS = 1024;
    static final int MAX_MESSAGE_BYTES = 4 * MAX_MESSAGE_CHARS;

    public ErrorReply {
      Objects.requireNonNull(message, "message");
      if (message.length() > MAX_MESSAGE_CHARS) {
        message = message.substring(0, MAX_MESSAGE_CHARS - 3) + "...";
      }
    }

    static ErrorReply of(long seq, TransportException e) {
      return new ErrorReply(seq, e.error().code(), detail(e));
    }

    /** The peer's error as an exception; the message comes from the peer, so it is escaped ({@link PeerText}). */
    TransportException toException() {
      return new TransportException(TransportError.fromCode(code), PeerText.escape(message, MAX_MESSAGE_CHARS));
    }

    @Override
    public TcpFrameType type() {
      return TcpFrameType.ERROR;
    }

    @Override
    public int fieldsLength() {
      return 8 + 4 + 4 + message.getBytes(StandardCharsets.UTF_8).length;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      byte[] m = message.getBytes(StandardCharsets.UTF_8);
      out.writeLong(seq).writeInt(code).writeInt(m.length).writeBytes(m);
    }

    static ErrorReply decode(FrameReader in) throws TransportException {
      long seq = in.getLong("sequence number");
      int code = in.getInt("error code");
      String message = new String(in.getBytes("error message", MAX_MESSAGE_BYTES), StandardCharsets.UTF_8);
      in.expectEnd();
      return new ErrorReply(seq, code, message);
    }
  }

  /** The message of {@code e} without the {@code "CODE: "} prefix TransportException adds. */
  static String detail(TransportException e) {
    String m = String.valueOf(e.getMessage());
    String prefix = e.error() + ": ";
    return m.startsWith(prefix) ? m.substring(prefix.length()) : m;
  }
}
