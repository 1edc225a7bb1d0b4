package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.util.concurrent.ThreadFactory;

/**
 * The Netty event loops and channel types of one tcp transport ({@link TcpConfig#IO_MODE}): Java NIO,
 * or Netty's native epoll transport. Epoll is only touched through {@link EpollIo}, so a class path
 * without it still runs NIO, and {@code auto} falls back to NIO where epoll cannot load.
 *
 * <p>Threading: stateless.
 */
final class TcpIo {
  private TcpIo() {}

  /** What a transport runs on: its event loops, client and server channel types, and the mode's name. */
  record Loops(EventLoopGroup group, Class<? extends SocketChannel> channel,
               Class<? extends ServerSocketChannel> serverChannel, String name) {}

  /**
   * Event loops of {@code mode} (nio, epoll, auto); epoll that cannot load fails with the reason.
   * {@code busyPollNanos} applies to epoll loops only ({@link TcpConfig#BUSY_POLL}).
   */
  static Loops open(String mode, int threads, long busyPollNanos, ThreadFactory factory) throws TransportException {
    switch (mode) {
      case "nio":
        return nio(threads, factory);
      case "epoll": {
        String why = epollUnavailable();
        if (why != null) {
          throw new TransportException(TransportError.UNAVAILABLE, TcpConfig.IO_MODE.key()
              + "=epoll, but Netty's epoll transport cannot load here: " + why + "; expected nio or auto on this"
              + " machine");
        }
        return EpollIo.open(threads, factory, busyPollNanos);
      }
      case "auto":
        return epollUnavailable() == null ? EpollIo.open(threads, factory, busyPollNanos) : nio(threads, factory);
      default:
        throw new IllegalArgumentException(TcpConfig.IO_MODE.key() + ": got '" + mode + "', expected nio, epoll or auto");
    }
  }

  /** Why epoll cannot be used here, or null when it can. */
  static String epollUnavailable() {
    try {
      return EpollIo.unavailable();
    } catch (LinkageError e) {
      return "its classes are not on the class path (" + e + ")";
    }
  }

  @SuppressWarnings("deprecation") // NioEventLoopGroup: deprecated in Netty 4.2, the one NIO group 4.1 has
  private static Loops nio(int threads, ThreadFactory factory) {
    return new Loops(new NioEventLoopGroup(threads, factory), NioSocketChannel.class, NioServerSocketChannel.class,
        "nio");
  }
}
