package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/** A transport that flips one byte of the payload of its first {@code n} data writes (bytes corrupted in flight). */
final class CorruptingTransport extends ForwardingTransport {
  private final AtomicInteger left;

  CorruptingTransport(Transport inner, int n) {
    super(inner);
    this.left = new AtomicInteger(n);
  }

  private ByteBuffer maybeCorrupt(ByteBuffer src) {
    if (src.remaining() == 0 || left.getAndDecrement() <= 0) {
      return src;
    }
    ByteBuffer copy = ByteBuffer.allocate(src.remaining());
    copy.put(src.duplicate()).flip();
    copy.put(copy.remaining() / 2, (byte) (copy.get(copy.remaining() / 2) ^ 0x5a));
    return copy;
  }

  @Override
  public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
    PeerQueue q = inner.connect(peer);
    return new PeerQueue() {
      @Override public EndpointDescriptor peer() { return q.peer(); }
      @Override public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) {
        return q.write(maybeCorrupt(src), dst);
      }
      @Override public CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress s, long d) {
        return q.writeAndSignal(src, dst, s, d); // the block table: left intact
      }
      @Override public CompletableFuture<Void> signal(RemoteAddress s, long d) { return q.signal(s, d); }
      @Override public CompletableFuture<Long> fetchAdd(RemoteAddress dst, long d) { return q.fetchAdd(dst, d); }
      @Override public CompletableFuture<Void> send(ByteBuffer m) { return q.send(m); }
      @Override public void commit() { q.commit(); }
      @Override public boolean isOpen() { return q.isOpen(); }
      @Override public void close() { q.close(); }
    };
  }
}
