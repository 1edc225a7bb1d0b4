package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.config.ConfigEntry;
import dev.slipstream.core.config.ConfigSource;
import java.time.Duration;

/**
 * Typed configuration of the tcp transport. Values are validated when the object is built, so a
 * bad setting fails at start-up naming the key, the value got and what is expected.
 *
 * <p>Threading: immutable.
 */
public final class TcpConfig {
  public static final ConfigEntry<Integer> PORT = ConfigEntry.integer(
      "spark.slipstream.tcp.port", "0", 0, 65535,
      "Port the tcp transport listens on; 0 picks a free (ephemeral) port.");
  public static final ConfigEntry<Long> MAX_FRAME_BYTES = ConfigEntry.size(
      "spark.slipstream.tcp.maxFrameBytes", "4m",
      "Largest tcp frame, header included; larger writes are split into several frames. Frames "
          + "claiming more are rejected before anything is allocated.");
  public static final ConfigEntry<Duration> CONNECT_TIMEOUT = ConfigEntry.duration(
      "spark.slipstream.tcp.connectTimeout", "10s",
      "How long opening a tcp connection to a peer may take before its operations fail with PEER_LOST; also how"
          + " long a receiver waits for a new connection's HELLO (ERROR TIMEOUT) and, with spark.authenticate on, how"
          + " long the authentication handshake may take on either end (AUTH_FAILED).");
  public static final ConfigEntry<Duration> IDLE_TIMEOUT = ConfigEntry.duration(
      "spark.slipstream.tcp.idleTimeout", "5min",
      "How long an inbound tcp connection may go without a frame from its peer before the receiver closes it"
          + " (answering ERROR TIMEOUT); also how long a peer that does not read its replies may keep the receiver"
          + " from reading. 0 turns it off: idle connections then stay open until their peer closes them.");
  public static final ConfigEntry<Integer> MAX_INBOUND_CONNECTIONS = ConfigEntry.integer(
      "spark.slipstream.tcp.maxInboundConnections", "1024", 1, 1 << 20,
      "Most inbound tcp connections one transport keeps open; one more is answered ERROR TOO_MANY_CONNECTIONS and"
          + " closed at once (counted in the transport's connectionsRefused).");
  public static final ConfigEntry<Integer> IO_THREADS = ConfigEntry.integer(
      "spark.slipstream.tcp.ioThreads", "0", 0, 256,
      "Event-loop threads of one tcp transport (serving inbound and outbound connections); "
          + "0 means min(4, available processors).");

  public static final ConfigEntry<String> IO_MODE = ConfigEntry.choice(
      "spark.slipstream.tcp.ioMode", "nio", java.util.List.of("nio", "epoll", "auto"),
      "Netty transport of the tcp event loops: nio (Java NIO selectors, everywhere), epoll (Netty's native epoll"
          + " transport, Linux only; fails at start with the reason where it cannot load), auto (epoll where it"
          + " loads, else nio).");

  public static final ConfigEntry<Duration> BUSY_POLL = ConfigEntry.duration(
      "spark.slipstream.tcp.busyPoll", "0",
      "How long an epoll event loop keeps polling without blocking after its last event or task (0: it blocks"
          + " at once, as Netty does). A message or write that comes meanwhile is picked up without waking a"
          + " sleeping thread, at the price of a busy core per event loop for that long after each burst. Needs"
          + " spark.slipstream.tcp.ioMode=epoll or auto (with auto on a machine without epoll it is not applied).");

  /** Frames must leave room for a useful payload after the largest fixed header. */
  static final long MIN_FRAME_BYTES = 1024;
  static final long MAX_MAX_FRAME_BYTES = 1L << 30;

  private final int port;
  private final int maxFrameBytes;
  private final Duration connectTimeout;
  private final Duration idleTimeout;
  private final int maxInboundConnections;
  private final int ioThreads;
  private final String ioMode;
  private final Duration busyPoll;

  public TcpConfig(ConfigSource source) {
    port = PORT.get(source);
    long frame = MAX_FRAME_BYTES.get(source);
    require(frame >= MIN_FRAME_BYTES && frame <= MAX_MAX_FRAME_BYTES, source, MAX_FRAME_BYTES, frame + " bytes",
        "between " + MIN_FRAME_BYTES + " bytes and 1g");
    maxFrameBytes = (int) frame;
    connectTimeout = CONNECT_TIMEOUT.get(source);
    require(connectTimeout.toMillis() >= 1 && connectTimeout.toMillis() <= Integer.MAX_VALUE,
        source, CONNECT_TIMEOUT, connectTimeout.toMillis() + "ms", "between 1ms and " + Integer.MAX_VALUE + "ms");
    idleTimeout = IDLE_TIMEOUT.get(source);
    require(idleTimeout.toMillis() <= Integer.MAX_VALUE, source, IDLE_TIMEOUT, idleTimeout.toMillis() + "ms",
        "at most " + Integer.MAX_VALUE + "ms (0: off)");
    maxInboundConnections = MAX_INBOUND_CONNECTIONS.get(source);
    int threads = IO_THREADS.get(source);
    ioThreads = threads > 0 ? threads : Math.min(4, Runtime.getRuntime().availableProcessors());
    ioMode = IO_MODE.get(source);
    busyPoll = BUSY_POLL.get(source);
    require(busyPoll.isZero() || !ioMode.equals("nio"), source, BUSY_POLL, busyPoll.toNanos() / 1000 + "us",
        "0 with " + IO_MODE.key() + "=nio (busy polling needs the epoll event loops: set " + IO_MODE.key()
        + "=epoll or auto)");
    require(busyPoll.toMillis() <= 1000, source, BUSY_POLL, busyPoll.toMillis() + "ms", "at most 1s");
  }

  private static void require(boolean ok, ConfigSource source, ConfigEntry<?> e, String parsed, String expected) {
    if (!ok) {
      String raw = source.get(e.key()).orElse(e.defaultValue());
      throw new IllegalArgumentException(e.key() + ": got '" + raw + "' (" + parsed + "), expected " + expected);
    }
  }

  public int port() {
    return port;
  }

  public int maxFrameBytes() {
    return maxFrameBytes;
  }

  public Duration connectTimeout() {
    return connectTimeout;
  }

  /** How long an inbound connection may stay without a frame before it is closed; zero: never. */
  public Duration idleTimeout() {
    return idleTimeout;
  }

  /** Most inbound connections kept open at once. */
  public int maxInboundConnections() {
    return maxInboundConnections;
  }

  public int ioThreads() {
    return ioThreads;
  }

  /** How long an epoll event loop polls without blocking after its last event or task; zero: off. */
  public Duration busyPoll() {
    return busyPoll;
  }

  /** nio, epoll or auto. */
  public String ioMode() {
    return ioMode;
  }

  @Override
  public String toString() {
    return "TcpConfig(port=" + port + ", maxFrameBytes=" + maxFrameBytes + ", connectTimeout="
        + connectTimeout.toMillis() + "ms, idleTimeout=" + idleTimeout.toMillis() + "ms, maxInboundConnections="
        + maxInboundConnections + ", ioThreads=" + ioThreads + ", ioMode=" + ioMode
        + (busyPoll.isZero() ? "" : ", busyPoll=" + busyPoll.toNanos() / 1000 + "us") + ")";
  }
}
