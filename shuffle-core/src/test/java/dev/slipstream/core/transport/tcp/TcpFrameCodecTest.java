package dev.slipstream.core.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpFrame.FetchAdd;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import dev.slipstream.core.transport.tcp.TcpFrame.Send;
import dev.slipstream.core.transport.tcp.TcpFrame.Signal;
import dev.slipstream.core.transport.tcp.TcpFrame.Target;
import dev.slipstream.core.transport.tcp.TcpFrame.Write;
import dev.slipstream.core.transport.tcp.TcpFrame.WriteSignal;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.util.ReferenceCountUtil;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The tcp frame layer: codec round trips, and the receiver's answers to bad frames and operations. */
class TcpFrameCodecTest {

  private static ByteBuf bytes(int n, int seed) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) (seed + i * 7 + 1);
    }
    return Unpooled.wrappedBuffer(b);
  }

  private static TcpFrame roundTrip(TcpFrame f) throws TransportException {
    ByteBuf b = TcpFrameEncoder.encodeToBuffer(f, ByteBufAllocator.DEFAULT);
    try {
      assertEquals(f.frameLength(), b.readableBytes(), "encoded length of " + f.type());
      assertEquals(f.frameLength(), b.getInt(0), "length field counts the whole frame");
      return TcpFrameDecoder.decodeFrame(b, Integer.MAX_VALUE);
    } finally {
      b.release();
    }
  }

  @Test
  void everyFrameTypeRoundTrips() throws Exception {
    Target t = new Target(7, 0x1234_5678_9abc_def0L, 4096);
    Target s = new Target(8, -1, 16);
    List<TcpFrame> frames = List.of(
        new Hello(new EndpointDescriptor("tcp", "héllo:7077", new byte[] {1, 2, 3})),
        new Write(1, t, 100, 0, bytes(100, 1)),
        new Write(2, t, 10_000, 4096, bytes(100, 2)),
        new Write(3, t, 0, 0, Unpooled.EMPTY_BUFFER),
        new WriteSignal(4, t, 50, 0, s, -5, bytes(50, 3)),
        new Signal(5, s, Long.MIN_VALUE),
        new FetchAdd(6, t, 42),
        new Send(7, bytes(33, 4)),
        new Ack(Long.MAX_VALUE, -9),
        new ErrorReply(9, TransportError.OUT_OF_RANGE.code(), "offset 1 + length 2 outside region 3 (length 4)"));
    for (TcpFrame f : frames) {
      TcpFrame back = roundTrip(f);
      try {
        assertEquals(f, back);
      } finally {
        ReferenceCountUtil.release(back);
        ReferenceCountUtil.release(f);
      }
    }
  }

  @Test
  void errorMessagesAreBoundedWhenSent() {
    ErrorReply e = new ErrorReply(1, 4, "x".repeat(100_000));
    assertEquals(ErrorReply.MAX_MESSAGE_CHARS, e.message().length());
    assertTrue(e.message().endsWith("..."));
  }

  @Test
  void encoderPassesThePayloadOnWithoutCopying() {
    ByteBuffer src = ByteBuffer.allocateDirect(1000);
    ByteBuf payload = Unpooled.wrappedBuffer(src);
    EmbeddedChannel ch = new EmbeddedChannel(TcpFrameEncoder.INSTANCE);
    ch.writeOutbound(new Write(1, new Target(1, 2, 3), 1000, 0, payload));
    ByteBuf header = ch.readOutbound();
    ByteBuf body = ch.readOutbound();
    assertEquals(TcpFrame.HEADER_LENGTH + Write.FIELDS_LENGTH, header.readableBytes());
    assertSame(payload, body);
    assertEquals(1, body.refCnt(), "the frame's reference went with the encoder's release");
    header.release();
    body.release();
    assertFalse(ch.finish());
  }

  @Test
  void decoderWaitsForWholeFramesAcrossReads() {
    byte[] frame = ReceiverHarness.encode(new Write(1, new Target(1, 2, 3), 20, 0, bytes(20, 1)));
    EmbeddedChannel ch = new EmbeddedChannel(new TcpFrameDecoder(4096));
    for (int i = 0; i < frame.length - 1; i++) {
      ch.writeInbound(Unpooled.wrappedBuffer(frame, i, 1));
      assertNull(ch.readInbound(), "no frame before its last byte (" + i + ")");
    }
    ch.writeInbound(Unpooled.wrappedBuffer(frame, frame.length - 1, 1));
    Write w = ch.readInbound();
    assertEquals(20, w.payload().readableBytes());
    w.release();
    assertFalse(ch.finish());
  }

  // ---------------------------------------------------------------- undecodable frames

  private static void assertConnectionRejected(ReceiverHarness h, TransportError code, String... parts) throws Exception {
    ErrorReply e = h.onlyError();
    assertEquals(0, e.seq(), "connection-level errors carry seq 0");
    assertEquals(code.code(), e.code(), e.message());
    for (String p : parts) {
      assertTrue(e.message().contains(p), "'" + e.message() + "' should contain '" + p + "'");
    }
    assertFalse(h.channel.isOpen(), "connection must be closed");
    byte[] untouched = new byte[(int) h.d.length()];
    Arrays.fill(untouched, (byte) 0x5a);
    assertArrayEquals(untouched, h.regionBytes(), "region changed");
    assertEquals(1, h.metrics.rejected());
  }

  private static byte[] header(int length, int m0, int m1, int version, int type) {
    return ByteBuffer.allocate(8).putInt(length).put((byte) m0).put((byte) m1).put((byte) version)
        .put((byte) type).array();
  }

  @Test
  void rejectsOversizedFrameLengthBeforeTheBodyArrives() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.sendBytes(ByteBuffer.allocate(4).putInt(ReceiverHarness.MAX_FRAME + 1).array());
      assertConnectionRejected(h, TransportError.MALFORMED, "frame length " + (ReceiverHarness.MAX_FRAME + 1),
          "outside [8, " + ReceiverHarness.MAX_FRAME + "]");
    }
  }

  @Test
  void rejectsFrameLengthSmallerThanItsHeader() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.sendBytes(ByteBuffer.allocate(4).putInt(3).array());
      assertConnectionRejected(h, TransportError.MALFORMED, "frame length 3", "outside [8, ");
    }
  }

  @Test
  void rejectsWrongMagic() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.sendBytes(header(60, 'X', 'Y', 1, 0x11));
      assertConnectionRejected(h, TransportError.BAD_VERSION, "got magic 0x5859", "expected 0x534c");
    }
  }

  @Test
  void rejectsWrongVersion() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.sendBytes(header(60, 'S', 'L', 2, 0x11));
      assertConnectionRejected(h, TransportError.BAD_VERSION, "got version 2", "expected 1");
    }
  }

  @Test
  void rejectsUnknownTypeId() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.sendBytes(header(8, 'S', 'L', 1, 0x7f));
      assertConnectionRejected(h, TransportError.UNKNOWN_TYPE, "got type id 127", "17 (WRITE)");
    }
  }

  @Test
  void rejectsTruncatedFrame() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      byte[] full = ReceiverHarness.encode(new Write(1, new Target(h.d.id(), h.d.key(), 0), 4, 0, bytes(4, 1)));
      // Claim a frame of 8 + 30 bytes: seq, region id and key fit, the offset does not.
      byte[] cut = Arrays.copyOf(full, 38);
      ByteBuffer.wrap(cut).putInt(0, 38);
      h.sendBytes(cut);
      assertConnectionRejected(h, TransportError.MALFORMED, "truncated WRITE frame", "need 8 bytes for destination offset, have 6");
    }
  }

  @Test
  void rejectsPayloadLengthThatDisagreesWithTheFrame() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      byte[] f = ReceiverHarness.encode(new Write(1, new Target(h.d.id(), h.d.key(), 0), 16, 0, bytes(16, 1)));
      ByteBuffer.wrap(f).putInt(TcpFrame.HEADER_LENGTH + Write.FIELDS_LENGTH - 4, 15);
      h.sendBytes(f);
      assertConnectionRejected(h, TransportError.MALFORMED, "part length 15", "16 payload bytes");
    }
  }

  @Test
  void rejectsPartOutsideItsWrite() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.send(new Write(1, new Target(h.d.id(), h.d.key(), 0), 10, 4, bytes(16, 1)));
      assertConnectionRejected(h, TransportError.MALFORMED, "part offset 4 + part length 16", "write's length 10");
    }
  }

  @Test
  void rejectsOperationsBeforeHello() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Write(1, new Target(h.d.id(), h.d.key(), 0), 16, 0, bytes(16, 1)));
      assertConnectionRejected(h, TransportError.MALFORMED, "got a WRITE frame first", "expected HELLO");
    }
  }

  @Test
  void rejectsRepliesSentToTheReceiver() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.send(new Ack(1, 0));
      assertConnectionRejected(h, TransportError.MALFORMED, "got a ACK frame", "expected WRITE");
    }
  }

  @Test
  void reportsAFrameCutShortByEndOfStream() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      byte[] f = ReceiverHarness.encode(new Write(1, new Target(h.d.id(), h.d.key(), 0), 16, 0, bytes(16, 1)));
      h.sendBytes(Arrays.copyOf(f, 30));
      assertTrue(h.replies().isEmpty(), "a partial frame is not an error while more may come");
      h.channel.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
      assertConnectionRejected(h, TransportError.MALFORMED, "got 30 bytes", "expected " + f.length);
    }
  }

  // ---------------------------------------------------------------- operations

  @Test
  void appliesAValidWriteAndAcksIt() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      ByteBuf p = bytes(16, 1);
      byte[] expected = new byte[16];
      p.getBytes(0, expected);
      h.send(new Write(5, new Target(h.d.id(), h.d.key(), 100), 16, 0, p));
      assertEquals(List.of(new Ack(5, 0)), h.replies());
      assertArrayEquals(expected, Arrays.copyOfRange(h.regionBytes(), 100, 116));
      assertEquals(16, h.metrics.bytesReceived());
    }
  }

  @Test
  void rejectedOperationKeepsTheConnection() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.send(new Write(5, new Target(h.d.id(), h.d.key() + 1, 0), 16, 0, bytes(16, 1)));
      ErrorReply e = h.onlyError();
      assertEquals(5, e.seq());
      assertEquals(TransportError.BAD_KEY.code(), e.code());
      assertTrue(h.channel.isOpen());
      h.send(new FetchAdd(6, new Target(h.d.id(), h.d.key(), 8), 1));
      assertEquals(List.of(new Ack(6, 0x5a5a5a5a5a5a5a5aL)), h.replies());
    }
  }

  @Test
  void rejectsWriteOutsideRegion() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(4096)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.send(new Write(5, new Target(h.d.id(), h.d.key(), 4096), 512, 0, bytes(512, 1)));
      ErrorReply e = h.onlyError();
      assertEquals("offset 4096 + length 512 outside region " + h.d.id() + " (length 4096)", e.message());
      assertTrue(h.channel.isOpen());
    }
  }

  @Test
  void laterPartsOfARejectedWriteAreDroppedWithOneError() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(256)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      Target t = new Target(h.d.id(), h.d.key(), 0);
      for (int part = 0; part < 3; part++) { // a 300-byte write into a 256-byte region
        h.send(new Write(9, t, 300, part * 100, bytes(100, part)));
      }
      assertEquals(9, h.onlyError().seq());
      byte[] untouched = new byte[256];
      Arrays.fill(untouched, (byte) 0x5a);
      assertArrayEquals(untouched, h.regionBytes());
      h.send(new Signal(10, new Target(h.d.id(), h.d.key(), 0), 1));
      assertEquals(List.of(new Ack(10, 0)), h.replies(), "the next operation is applied again");
    }
  }

  @Test
  void writeSignalAppliesTheSignalWithItsLastPart() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(512)) {
      h.region.resetSignal(0, 0);
      ByteBuf p1 = bytes(100, 0);
      ByteBuf p2 = bytes(100, 50);
      byte[] expected = new byte[200];
      p1.getBytes(0, expected, 0, 100);
      p2.getBytes(0, expected, 100, 100);
      byte[][] atSignal = new byte[1][];
      h.region.setSignalListener((r, off, v) -> {
        atSignal[0] = new byte[200];
        r.buffer().get(100, atSignal[0]);
      });
      h.send(new Hello(ReceiverHarness.CLIENT));
      Target dst = new Target(h.d.id(), h.d.key(), 100);
      Target sig = new Target(h.d.id(), h.d.key(), 0);
      h.send(new WriteSignal(3, dst, 200, 0, sig, 4, p1));
      assertTrue(h.replies().isEmpty(), "no ACK before the last part");
      assertEquals(0, h.region.readSignal(0));
      h.send(new WriteSignal(3, dst, 200, 100, sig, 4, p2));
      assertEquals(List.of(new Ack(3, 0)), h.replies());
      assertEquals(4, h.region.readSignal(0));
      assertArrayEquals(expected, atSignal[0], "the listener saw all data of the write");
    }
  }

  @Test
  void sendReachesTheHandlerWithTheHelloEndpoint() throws Exception {
    try (ReceiverHarness h = new ReceiverHarness(64)) {
      h.send(new Hello(ReceiverHarness.CLIENT));
      h.send(new Send(4, bytes(10, 1)));
      assertEquals(List.of(new Ack(4, 0)), h.replies());
      assertEquals(List.of(ReceiverHarness.CLIENT), h.messagesFrom);
    }
  }

  @Test
  void decodeFailureIsEmittedOnceAndLaterInputIgnored() {
    EmbeddedChannel ch = new EmbeddedChannel(new TcpFrameDecoder(4096));
    ch.writeInbound(Unpooled.wrappedBuffer(header(8, 'S', 'L', 1, 0x01)));
    ch.writeInbound(Unpooled.wrappedBuffer(ReceiverHarness.encode(new Ack(1, 1))));
    TcpFrameDecoder.DecodeFailure f = assertInstanceOf(TcpFrameDecoder.DecodeFailure.class, ch.readInbound());
    assertEquals(TransportError.UNKNOWN_TYPE, f.error().error());
    assertNull(ch.readInbound());
    assertFalse(ch.finish());
  }

  @Test
  void decodeFrameThrowsTypedErrorsOnly() {
    ByteBuf b = Unpooled.wrappedBuffer(header(9, 'S', 'L', 1, 0x16), new byte[] {1});
    TransportException e = assertThrows(TransportException.class, () -> TcpFrameDecoder.decodeFrame(b, 4096));
    assertEquals(TransportError.MALFORMED, e.error());
    assertTrue(e.getMessage().contains("truncated ACK frame: need 8 bytes for sequence number, have 1"), e.getMessage());
    b.release();
  }
}
