package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireWriter;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.util.List;

/**
 * Splits the byte stream into {@link TcpFrame}s. The length is checked as soon as its 4 bytes
 * arrive and the magic, version and type as soon as the 8-byte header has, so an oversized or
 * foreign frame is rejected before its body is buffered. The first undecodable frame becomes one
 * {@link DecodeFailure} message; everything after it is discarded (the handler closes the
 * connection).
 *
 * <p>Threading: one instance per channel, on its event loop. Ownership: emitted frames with a
 * payload hold a retained slice of the input; the next handler releases them.
 */
final class TcpFrameDecoder extends ByteToMessageDecoder {

  /** The stream could not be decoded; {@code error} says what was got and what was expected. */
  record DecodeFailure(TransportException error) {}

  private int maxFrameBytes;
  private String limitName = TcpConfig.MAX_FRAME_BYTES.key();
  private boolean failed;

  TcpFrameDecoder(int maxFrameBytes) {
    this.maxFrameBytes = maxFrameBytes;
  }

  /**
   * Changes the largest frame accepted from now on (an unauthenticated peer gets a smaller
   * limit); {@code name} says in error messages where the limit comes from.
   */
  void limit(int maxFrameBytes, String name) {
    this.maxFrameBytes = maxFrameBytes;
    this.limitName = name;
  }

  @Override
  protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
    if (failed) {
      in.skipBytes(in.readableBytes());
      return;
    }
    try {
      TcpFrame f = decodeFrame(in, maxFrameBytes, limitName);
      if (f != null) {
        out.add(f);
      }
    } catch (TransportException e) {
      fail(in, out, e);
    }
  }

  @Override
  protected void decodeLast(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
    // Complete frames were decoded before this call; what remains is a frame cut short by EOF.
    decode(ctx, in, out);
    if (!failed && in.isReadable()) {
      String expected = in.readableBytes() >= 4 ? String.valueOf(in.getInt(in.readerIndex()))
          : "at least " + TcpFrame.HEADER_LENGTH;
      fail(in, out, new TransportException(TransportError.MALFORMED, "truncated frame at end of stream: got "
          + in.readableBytes() + " bytes, expected " + expected));
    }
  }

  private void fail(ByteBuf in, List<Object> out, TransportException e) {
    failed = true;
    in.skipBytes(in.readableBytes());
    out.add(new DecodeFailure(e));
  }

  /**
   * Decodes one frame from {@code in}, advancing past it, or returns null (reading nothing) when
   * the frame is not complete yet.
   *
   * @throws TransportException MALFORMED, BAD_VERSION or UNKNOWN_TYPE, naming got and expected
   */
  static TcpFrame decodeFrame(ByteBuf in, int maxFrameBytes) throws TransportException {
    return decodeFrame(in, maxFrameBytes, TcpConfig.MAX_FRAME_BYTES.key());
  }

  /** As {@link #decodeFrame(ByteBuf, int)}; {@code limitName} names the limit in errors. */
  static TcpFrame decodeFrame(ByteBuf in, int maxFrameBytes, String limitName) throws TransportException {
    int readable = in.readableBytes();
    if (readable < 4) {
      return null;
    }
    int start = in.readerIndex();
    int length = in.getInt(start);
    if (length < TcpFrame.HEADER_LENGTH || length > maxFrameBytes) {
      throw new TransportException(TransportError.MALFORMED, "frame length " + length + " outside ["
          + TcpFrame.HEADER_LENGTH + ", " + maxFrameBytes + "] (the length counts the whole frame; "
          + "the maximum is " + limitName + ")");
    }
    if (readable < TcpFrame.HEADER_LENGTH) {
      return null;
    }
    byte m0 = in.getByte(start + 4);
    byte m1 = in.getByte(start + 5);
    if (m0 != WireWriter.MAGIC_0 || m1 != WireWriter.MAGIC_1) {
      throw new TransportException(TransportError.BAD_VERSION, "frame: got magic 0x"
          + String.format("%04x", ((m0 & 0xff) << 8) | (m1 & 0xff)) + ", expected 0x534c ('SL')");
    }
    byte version = in.getByte(start + 6);
    if (version != WireWriter.VERSION) {
      throw new TransportException(TransportError.BAD_VERSION,
          "frame: got version " + version + ", expected " + WireWriter.VERSION);
    }
    byte id = in.getByte(start + 7);
    TcpFrameType type = TcpFrameType.fromId(id);
    if (type == null) {
      throw new TransportException(TransportError.UNKNOWN_TYPE,
          "frame: got type id " + id + ", expected one of " + TcpFrameType.known());
    }
    if (readable < length) {
      return null;
    }
    ByteBuf fields = in.slice(start + TcpFrame.HEADER_LENGTH, length - TcpFrame.HEADER_LENGTH);
    in.skipBytes(length);
    return type.decode(new FrameReader(fields, type));
  }
}
