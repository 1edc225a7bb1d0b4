package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.HostRegion;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionTable;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Software one-sided writes over tcp (Netty NIO). The transport listens on
 * {@code advertisedHost:spark.slipstream.tcp.port}; each peer queue is one outbound connection
 * that opens with a HELLO carrying this transport's endpoint. The receiving end
 * ({@link TcpServerHandler}) validates every operation and copies payloads straight from the
 * socket buffer into the registered region. The frame format is in docs/protocol-tcp.md. With a
 * shared secret in the context, every connection, inbound and outbound, first passes the mutual
 * challenge-response of {@link TcpAuth}; a peer without the secret can neither write nor send.
 *
 * <p>Threading: all methods are thread-safe; {@link #connect} and posting never wait for the
 * network. One event-loop group (daemon threads named {@code slipstream-tcp-<process>}) serves
 * inbound and outbound connections; a connection stays on one event-loop thread, which is what
 * orders its operations. Signal listeners and the message handler run on those threads.
 *
 * <p>Ownership: the transport owns its queues, connections, regions and threads. {@link #close()}
 * is idempotent: it fails outstanding operations with CLOSED, deregisters every region (waiting
 * for copies in progress), closes every connection and stops the event loops with no quiet
 * period, waiting for them unless called on one of them.
 */
final class TcpTransport implements Transport {
  private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
  private static final long SHUTDOWN_TIMEOUT_SECONDS = 10;

  private final TcpConfig config;
  private final TransportMetrics metrics = new TransportMetrics();
  private final RegionTable regions = new RegionTable();
  private final ConcurrentHashMap<EndpointDescriptor, TcpPeerQueue> queues = new ConcurrentHashMap<>();
  private final Set<Channel> inbound = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final EventLoopGroup group;
  /** The event loops' kind: nio or epoll. */
  private final String io;
  private final Bootstrap clientTemplate;
  private final Channel server;
  private final EndpointDescriptor endpoint;
  /** Null when no shared secret is configured. */
  private final TcpAuth auth;
  private volatile MessageHandler handler;

  TcpTransport(TransportContext context, TcpConfig config) throws TransportException {
    this.config = config;
    this.auth = context.secret().map(secret -> new TcpAuth(secret, config.connectTimeout())).orElse(null);
    TcpIo.Loops loops = TcpIo.open(config.ioMode(), config.ioThreads(), config.busyPoll().toNanos(),
        new DefaultThreadFactory("slipstream-tcp-" + context.processName(), true));
    this.io = loops.name();
    this.group = loops.group();
    this.clientTemplate = new Bootstrap().group(group).channel(loops.channel())
        .option(ChannelOption.TCP_NODELAY, true)
        .option(ChannelOption.SO_KEEPALIVE, true)
        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) config.connectTimeout().toMillis());
    String host = context.advertisedHost();
    ServerBootstrap sb = new ServerBootstrap().group(group).channel(loops.serverChannel())
        .childOption(ChannelOption.TCP_NODELAY, true)
        .childOption(ChannelOption.SO_KEEPALIVE, true)
        // Half-closure lets the receiver still answer a sender that shut its output mid-frame.
        .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
        .childHandler(new ChannelInitializer<SocketChannel>() {
          @Override
          protected void initChannel(SocketChannel ch) {
            inbound.add(ch);
            ch.closeFuture().addListener(f -> inbound.remove(ch));
            String local = "tcp://" + new TcpAddress(host, ch.localAddress().getPort());
            TcpServerHandler.initPipeline(ch.pipeline(), config.maxFrameBytes(),
                new TcpServerHandler(regions, metrics, () -> handler, local, auth));
          }
        });
    ChannelFuture bound = sb.bind(new InetSocketAddress(host, config.port())).awaitUninterruptibly();
    if (!bound.isSuccess()) {
      group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_SECONDS, TimeUnit.SECONDS).awaitUninterruptibly();
      throw new TransportException(TransportError.UNAVAILABLE,
          "tcp transport cannot listen on " + new TcpAddress(host, config.port()) + ": " + bound.cause(), bound.cause());
    }
    this.server = bound.channel();
    int port = ((InetSocketAddress) server.localAddress()).getPort();
    this.endpoint = new EndpointDescriptor(TcpTransportProvider.NAME, new TcpAddress(host, port).toString(), null);
    LOG.info("tcp transport listening at {} ({}, event loops: {}, {})", endpoint, config, io,
        auth == null ? "unauthenticated" : "connections authenticated with the shared secret");
  }

  @Override
  public String name() {
    return TcpTransportProvider.NAME;
  }

  @Override
  public EndpointDescriptor localEndpoint() {
    return endpoint;
  }

  @Override
  public RegisteredRegion register(ByteBuffer memory) throws TransportException {
    checkOpen();
    HostRegion r = regions.register(memory);
    if (closed.get()) {
      r.close();
      checkOpen();
    }
    return r;
  }

  @Override
  public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
    checkOpen();
    if (!TcpTransportProvider.NAME.equals(peer.transport())) {
      throw new TransportException(TransportError.MALFORMED,
          "cannot connect tcp to a '" + peer.transport() + "' endpoint (" + peer + "), expected 'tcp'");
    }
    TcpPeerQueue q = queues.get(peer);
    if (q != null && q.isOpen()) {
      return q;
    }
    InetSocketAddress address = TcpAddress.parse(peer.address()).resolve();
    TcpPeerQueue[] stale = new TcpPeerQueue[1];
    TcpPeerQueue result = queues.compute(peer, (k, cur) -> {
      if (cur != null && cur.isOpen()) {
        return cur;
      }
      stale[0] = cur;
      return new TcpPeerQueue(clientTemplate, address, peer, endpoint, metrics, config.maxFrameBytes(), auth);
    });
    if (stale[0] != null) {
      stale[0].close();
    }
    if (closed.get()) {
      result.close(); // raced with close(): do not leave a connection behind
      checkOpen();
    }
    return result;
  }

  @Override
  public void setMessageHandler(MessageHandler handler) {
    this.handler = handler;
  }

  @Override
  public TransportMetrics metrics() {
    return metrics;
  }

  @Override
  public int registeredRegionCount() {
    return regions.size();
  }

  private void checkOpen() throws TransportException {
    if (closed.get()) {
      throw new TransportException(TransportError.CLOSED, "tcp transport " + endpoint + " is closed");
    }
  }

  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    List<TcpPeerQueue> qs = new ArrayList<>(queues.values());
    queues.clear();
    qs.forEach(TcpPeerQueue::close);
    regions.closeAll();
    server.close();
    inbound.forEach(Channel::close);
    Future<?> terminated = group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    if (!onEventLoop()) {
      if (!terminated.awaitUninterruptibly(SHUTDOWN_TIMEOUT_SECONDS + 5, TimeUnit.SECONDS)) {
        LOG.warn("event loops of tcp transport {} did not stop within {}s", endpoint, SHUTDOWN_TIMEOUT_SECONDS + 5);
      }
    }
    LOG.info("tcp transport {} closed ({})", endpoint, metrics);
  }

  private boolean onEventLoop() {
    for (EventExecutor e : group) {
      if (e.inEventLoop()) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return "TcpTransport(" + endpoint + ")";
  }
}
