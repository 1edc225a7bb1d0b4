package dev.slipstream.core.transport.tcp;

import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.SelectStrategy;
import io.netty.util.IntSupplier;
import java.util.concurrent.ThreadFactory;

/**
 * Netty's native epoll transport, kept apart from {@link TcpIo} so that nothing links these classes
 * unless epoll was asked for (they come with Spark's Netty on Linux; elsewhere they may be missing).
 *
 * <p>Threading: stateless.
 */
final class EpollIo {
  private EpollIo() {}

  /** Why epoll cannot be used here (its native library did not load), or null. */
  static String unavailable() {
    return Epoll.isAvailable() ? null : String.valueOf(Epoll.unavailabilityCause());
  }

  /**
   * Epoll event loops; with {@code busyPollNanos > 0} each keeps polling without blocking (one
   * non-blocking {@code epoll_wait} per turn) for that long after its last event or task, then blocks.
   */
  @SuppressWarnings("deprecation") // EpollEventLoopGroup: deprecated in Netty 4.2, the one epoll group 4.1 has
  static TcpIo.Loops open(int threads, ThreadFactory factory, long busyPollNanos) {
    EpollEventLoopGroup group = busyPollNanos > 0
        ? new EpollEventLoopGroup(threads, factory, () -> new BusyPoll(busyPollNanos))
        : new EpollEventLoopGroup(threads, factory);
    return new TcpIo.Loops(group, EpollSocketChannel.class, EpollServerSocketChannel.class,
        busyPollNanos > 0 ? "epoll, busy polling " + busyPollNanos / 1000 + " us" : "epoll");
  }

  /**
   * One event loop's strategy: poll without blocking while the last event or task is less than
   * {@code windowNanos} old, else block as usual. Threading: used by its event loop only.
   */
  static final class BusyPoll implements SelectStrategy {
    private final long windowNanos;
    private long lastActive = System.nanoTime();

    BusyPoll(long windowNanos) {
      this.windowNanos = windowNanos;
    }

    @Override
    public int calculateStrategy(IntSupplier selectNow, boolean hasTasks) throws Exception {
      int ready = selectNow.get(); // a non-blocking epoll_wait
      long now = System.nanoTime();
      if (ready > 0 || hasTasks) {
        lastActive = now;
        return ready;
      }
      // 0 ready: the loop runs its (no) tasks and asks again at once; past the window it blocks.
      return now - lastActive < windowNanos ? 0 : SelectStrategy.SELECT;
    }
  }
}
