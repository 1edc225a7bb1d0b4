package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.wire.WireWriter;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.MessageToMessageEncoder;
import java.util.List;

/**
 * Encodes a {@link TcpFrame} as a small header buffer followed by its payload, which is passed
 * on without copying (for writes, a wrapped view of the caller's source buffer).
 *
 * <p>Threading: stateless and sharable. Ownership: the frame is released after encoding; the
 * payload is retained once for the outbound buffers.
 */
@ChannelHandler.Sharable
final class TcpFrameEncoder extends MessageToMessageEncoder<TcpFrame> {
  static final TcpFrameEncoder INSTANCE = new TcpFrameEncoder();

  private TcpFrameEncoder() {}

  @Override
  protected void encode(ChannelHandlerContext ctx, TcpFrame frame, List<Object> out) {
    out.add(encodeHeader(frame, ctx.alloc()));
    ByteBuf payload = frame.payload();
    if (payload != null && payload.isReadable()) {
      out.add(payload.retain());
    }
  }

  /** The length, magic, version, type and fixed fields of {@code frame}. */
  static ByteBuf encodeHeader(TcpFrame frame, ByteBufAllocator alloc) {
    int fields = frame.fieldsLength();
    ByteBuf header = alloc.buffer(TcpFrame.HEADER_LENGTH + fields);
    header.writeInt(frame.frameLength())
        .writeByte(WireWriter.MAGIC_0).writeByte(WireWriter.MAGIC_1).writeByte(WireWriter.VERSION)
        .writeByte(frame.type().id());
    frame.encodeFields(header);
    return header;
  }

  /** The whole frame in one new buffer (tests, tools); does not release {@code frame}. */
  static ByteBuf encodeToBuffer(TcpFrame frame, ByteBufAllocator alloc) {
    ByteBuf header = encodeHeader(frame, alloc);
    ByteBuf payload = frame.payload();
    if (payload != null && payload.isReadable()) {
      header.writeBytes(payload, payload.readerIndex(), payload.readableBytes());
    }
    return header;
  }
}
