package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.HostRegion;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegionTable;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.ReferenceCountUtil;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The receiving pipeline of a tcp connection (decoder, encoder, {@link TcpServerHandler}) on an
 * {@link EmbeddedChannel}, with one registered region filled with 0x5a, so tests can feed raw
 * bytes and read the decoded replies.
 */
final class ReceiverHarness implements AutoCloseable {
  static final int MAX_FRAME = 4096;
  static final EndpointDescriptor CLIENT = new EndpointDescriptor("tcp", "client:1", null);
  /**
   * For bytes the test feeds in: untracked by the leak detector, which stays on for everything
   * the pipeline itself allocates (the paranoid tracking of test input only costs time).
   */
  static final ByteBufAllocator TEST_ALLOC = new UnpooledByteBufAllocator(false, true);

  final RegionTable regions = new RegionTable();
  final TransportMetrics metrics = new TransportMetrics();
  final HostRegion region;
  final RegionDescriptor d;
  final List<EndpointDescriptor> messagesFrom = new ArrayList<>();
  final EmbeddedChannel channel = new EmbeddedChannel();
  private final ByteBuf replies = Unpooled.buffer();

  ReceiverHarness(int regionLength) throws TransportException {
    ByteBuffer m = ByteBuffer.allocateDirect(regionLength);
    for (int i = 0; i < regionLength; i++) {
      m.put(i, (byte) 0x5a);
    }
    region = regions.register(m);
    d = region.descriptor();
    TcpServerHandler.initPipeline(channel.pipeline(), MAX_FRAME,
        new TcpServerHandler(regions, metrics, () -> (from, msg) -> messagesFrom.add(from), "tcp://test:1"));
  }

  /** Encodes and feeds {@code frame}, then releases it. */
  void send(TcpFrame frame) {
    ByteBuf b = TcpFrameEncoder.encodeToBuffer(frame, TEST_ALLOC);
    ReferenceCountUtil.release(frame);
    channel.writeInbound(b);
  }

  void sendBytes(byte[] bytes) {
    channel.writeInbound(Unpooled.wrappedBuffer(bytes));
  }

  static byte[] encode(TcpFrame frame) {
    ByteBuf b = TcpFrameEncoder.encodeToBuffer(frame, TEST_ALLOC);
    try {
      byte[] out = new byte[b.readableBytes()];
      b.readBytes(out);
      return out;
    } finally {
      b.release();
    }
  }

  /** Every reply written since the last call, decoded. */
  List<TcpFrame> replies() throws TransportException {
    for (Object o; (o = channel.readOutbound()) != null; ) {
      ByteBuf b = (ByteBuf) o;
      replies.writeBytes(b);
      b.release();
    }
    List<TcpFrame> out = new ArrayList<>();
    for (TcpFrame f; (f = TcpFrameDecoder.decodeFrame(replies, Integer.MAX_VALUE)) != null; ) {
      out.add(f);
      ReferenceCountUtil.release(f);
    }
    replies.discardReadBytes();
    return out;
  }

  TcpFrame.ErrorReply onlyError() throws TransportException {
    List<TcpFrame> r = replies();
    if (r.size() != 1 || !(r.get(0) instanceof TcpFrame.ErrorReply e)) {
      throw new AssertionError("expected exactly one ERROR reply, got " + r);
    }
    return e;
  }

  byte[] regionBytes() {
    ByteBuffer b = region.buffer();
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  @Override
  public void close() {
    channel.finishAndReleaseAll();
    replies.release();
  }
}
