package dev.slipstream.core.transport.tcp;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.ReferenceCountUtil;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/** Helpers shared by the tcp tests that look at regions and at the wire through raw sockets. */
final class TcpTestSupport {
  private TcpTestSupport() {}

  /** A region of {@code length} bytes, all 0x5a, so any write (even of zeros) shows. */
  static RegisteredRegion filled(Transport t, int length) throws TransportException {
    ByteBuffer m = ByteBuffer.allocateDirect(length);
    for (int i = 0; i < length; i++) {
      m.put(i, (byte) 0x5a);
    }
    return t.register(m);
  }

  static byte[] bytes(RegisteredRegion r) {
    ByteBuffer b = r.buffer();
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  /** The TransportException {@code f} fails with; fails the test if it succeeds or hangs. */
  static TransportException failure(CompletableFuture<?> f) throws Exception {
    try {
      f.get(30, SECONDS);
    } catch (ExecutionException e) {
      return assertInstanceOf(TransportException.class, e.getCause());
    } catch (TimeoutException e) {
      throw new AssertionError("operation hung");
    }
    throw new AssertionError("operation succeeded, expected a failure");
  }

  /** A plain socket connected to {@code t}'s listener (30 s read timeout); the caller closes it. */
  static Socket rawClient(Transport t) throws IOException {
    TcpAddress a = TcpAddress.parse(t.localEndpoint().address());
    Socket s = new Socket();
    s.connect(new InetSocketAddress(a.host(), a.port()), 10_000);
    s.setSoTimeout(30_000);
    return s;
  }

  /** Every frame in {@code bytes}, decoded; no bytes may be left over. */
  static List<TcpFrame> frames(byte[] bytes) throws TransportException {
    ByteBuf in = Unpooled.wrappedBuffer(bytes);
    List<TcpFrame> out = new ArrayList<>();
    for (TcpFrame f; (f = TcpFrameDecoder.decodeFrame(in, Integer.MAX_VALUE)) != null; ) {
      out.add(f);
      ReferenceCountUtil.release(f);
    }
    assertFalse(in.isReadable(), "trailing bytes in the reply");
    return out;
  }

  /** The frames (and already encoded byte arrays) back to back, to go out in one socket write. */
  static byte[] concat(Object... parts) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (Object p : parts) {
      out.writeBytes(p instanceof TcpFrame f ? ReceiverHarness.encode(f) : (byte[]) p);
    }
    return out.toByteArray();
  }

  /** A WRITE of 1 2 3 4 at offset 0, a SEND and a FETCH_ADD of the word at 8: what an intruder would try. */
  static byte[] intrusion(dev.slipstream.core.transport.RegionDescriptor d) {
    return concat(new TcpFrame.Write(1, new TcpFrame.Target(d.id(), d.key(), 0), 4, 0,
            io.netty.buffer.Unpooled.wrappedBuffer(new byte[] {1, 2, 3, 4})),
        new TcpFrame.Send(2, io.netty.buffer.Unpooled.wrappedBuffer(new byte[] {9})),
        new TcpFrame.FetchAdd(3, new TcpFrame.Target(d.id(), d.key(), 8), 1));
  }
}
