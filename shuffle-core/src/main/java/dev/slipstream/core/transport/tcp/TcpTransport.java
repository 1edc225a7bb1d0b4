package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.HostRegion;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RegionTable;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
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
 * <p>Identity: every connection opens stating this transport's endpoint, application id and
 * executor id ({@link PeerIdentity}); a transport that knows its application id refuses inbound
 * connections of another application (WRONG_APPLICATION).
 *
 * <p>Bounded cost: inbound connections are capped ({@link TcpConfig#MAX_INBOUND_CONNECTIONS}); one
 * more is answered ERROR(0, TOO_MANY_CONNECTIONS) and closed at once. Each inbound connection is
 * held to the {@link TcpInboundGuard.Policy}: a small frame limit and the connect timeout until its
 * HELLO, the idle timeout, and no reading while its replies go unread. Host names of peers are looked
 * up by a {@link TcpResolver}, never on an event loop; queues that shut down leave the cache at once.
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
  /** Inbound connections open now (admitted, not yet closed), against the cap. */
  private final AtomicInteger inboundOpen = new AtomicInteger();
  private final Object connectLock = new Object();
  private final TcpResolver resolver;
  private final TcpInboundGuard.Policy policy;
  private final PeerIdentity identity;
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
    this(context, config, InetAddress::getAllByName);
  }

  /** @param lookup how the resolver looks up peers' host names (tests count and delay lookups) */
  TcpTransport(TransportContext context, TcpConfig config, TcpResolver.Lookup lookup) throws TransportException {
    this.config = config;
    this.policy = TcpInboundGuard.Policy.of(config, context.applicationId());
    this.resolver = new TcpResolver(new DefaultThreadFactory("slipstream-tcp-resolve-" + context.processName(), true),
        lookup);
    this.auth = context.secret().map(secret -> new TcpAuth(secret, config.connectTimeout())).orElse(null);
    TcpIo.Loops loops = TcpIo.open(config.ioMode(), config.ioThreads(), config.busyPoll().toNanos(),
        new DefaultThreadFactory("slipstream-tcp-" + context.processName(), true));
    this.io = loops.name();
    this.group = loops.group();
    this.clientTemplate = new Bootstrap().group(group).channel(loops.channel()).resolver(resolver)
        .option(ChannelOption.TCP_NODELAY, true)
        .option(ChannelOption.SO_KEEPALIVE, true)
        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) config.connectTimeout().toMillis());
    String host = context.advertisedHost();
    ServerBootstrap sb = new ServerBootstrap().group(group).channel(loops.serverChannel())
        .childOption(ChannelOption.TCP_NODELAY, true)
        .childOption(ChannelOption.SO_KEEPALIVE, true)
        // Half-closure lets the receiver still answer a sender that shut its output mid-frame.
        .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
        // Replies beyond the high mark make the channel unwritable; its receiver then stops reading it.
        .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(
            TcpInboundGuard.Policy.REPLY_LOW_WATER, TcpInboundGuard.Policy.REPLY_HIGH_WATER))
        .childHandler(new ChannelInitializer<SocketChannel>() {
          @Override
          protected void initChannel(SocketChannel ch) {
            String local = "tcp://" + new TcpAddress(host, ch.localAddress().getPort());
            if (inboundOpen.incrementAndGet() > config.maxInboundConnections()) {
              inboundOpen.decrementAndGet();
              refuse(ch, local);
              return;
            }
            inbound.add(ch);
            ch.closeFuture().addListener(f -> {
              inbound.remove(ch);
              inboundOpen.decrementAndGet();
            });
            TcpServerHandler.initPipeline(ch.pipeline(), config.maxFrameBytes(),
                new TcpServerHandler(regions, metrics, () -> handler, local, auth, policy));
          }
        });
    ChannelFuture bound = sb.bind(new InetSocketAddress(host, config.port())).awaitUninterruptibly();
    if (!bound.isSuccess()) {
      resolver.close();
      group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_SECONDS, TimeUnit.SECONDS).awaitUninterruptibly();
      throw new TransportException(TransportError.UNAVAILABLE,
          "tcp transport cannot listen on " + new TcpAddress(host, config.port()) + ": " + bound.cause(), bound.cause());
    }
    this.server = bound.channel();
    int port = ((InetSocketAddress) server.localAddress()).getPort();
    this.endpoint = new EndpointDescriptor(TcpTransportProvider.NAME, new TcpAddress(host, port).toString(), null);
    this.identity = new PeerIdentity(endpoint, context.applicationId(), context.executorId());
    LOG.info("tcp transport listening at {} for {} ({}, event loops: {}, {})", endpoint,
        context.applicationId().isEmpty() ? "any application" : "application " + context.applicationId(), config, io,
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
    InetSocketAddress address = TcpAddress.parse(peer.address()).socketAddress(); // never a lookup here
    TcpPeerQueue stale;
    TcpPeerQueue result;
    synchronized (connectLock) {
      // The queue is made outside the map's compute: it may shut down (and leave the map) at once.
      stale = queues.get(peer);
      if (stale != null && stale.isOpen()) {
        return stale;
      }
      result = new TcpPeerQueue(clientTemplate, address, peer, identity, metrics, config.maxFrameBytes(), auth,
          this::evict);
      queues.put(peer, result);
      if (!result.isOpen()) {
        queues.remove(peer, result);
      }
    }
    if (stale != null) {
      stale.closeConnection(); // not open: its operations fail (or failed) with the reason it is not
    }
    if (closed.get()) {
      result.close(); // raced with close(): do not leave a connection behind
      checkOpen();
    }
    return result;
  }

  /** Drops a queue that shut down from the cache, so dead queues do not pile up. */
  private void evict(TcpPeerQueue q) {
    queues.remove(q.peer(), q);
  }

  /** Queues cached now (tests check that dead ones leave). */
  int cachedQueueCount() {
    return queues.size();
  }

  /** Answers a connection over the cap ERROR(0, TOO_MANY_CONNECTIONS) and closes it; its pipeline stays empty. */
  private void refuse(SocketChannel ch, String local) {
    metrics.onConnectionRefused();
    String why = "this transport has " + config.maxInboundConnections() + " inbound connections open, the most "
        + TcpConfig.MAX_INBOUND_CONNECTIONS.key() + " allows";
    policy.log().warn(TcpInboundGuard.logKey(ch.remoteAddress()), local + " refuses a connection from "
        + PeerText.escape(ch.remoteAddress()) + ": " + why);
    ByteBuf error = TcpFrameEncoder.encodeToBuffer(
        new TcpFrame.ErrorReply(0, TransportError.TOO_MANY_CONNECTIONS.code(), why), ch.alloc());
    ch.writeAndFlush(error).addListener(ChannelFutureListener.CLOSE);
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
    resolver.close();
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
