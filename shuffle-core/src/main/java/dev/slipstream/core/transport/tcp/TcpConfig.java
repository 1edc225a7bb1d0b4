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
      "How long opening a tcp connection to a peer may take before its operations fail with PEER_LOST; with"
          + " spark.authenticate on, also how long the authentication handshake may take on either end (AUTH_FAILED).");
  public static final ConfigEntry<Integer> IO_THREADS = ConfigEntry.integer(
      "spark.slipstream.tcp.ioThreads", "0", 0, 256,
      "Event-loop threads of one tcp transport (serving inbound and outbound connections); "
          + "0 means min(4, available processors).");

  /** Frames must leave room for a useful payload after the largest fixed header. */
  static final long MIN_FRAME_BYTES = 1024;
  static final long MAX_MAX_FRAME_BYTES = 1L << 30;

  private final int port;
  private final int maxFrameBytes;
  private final Duration connectTimeout;
  private final int ioThreads;

  public TcpConfig(ConfigSource source) {
    port = PORT.get(source);
    long frame = MAX_FRAME_BYTES.get(source);
    require(frame >= MIN_FRAME_BYTES && frame <= MAX_MAX_FRAME_BYTES, source, MAX_FRAME_BYTES, frame + " bytes",
        "between " + MIN_FRAME_BYTES + " bytes and 1g");
    maxFrameBytes = (int) frame;
    connectTimeout = CONNECT_TIMEOUT.get(source);
    require(connectTimeout.toMillis() >= 1 && connectTimeout.toMillis() <= Integer.MAX_VALUE,
        source, CONNECT_TIMEOUT, connectTimeout.toMillis() + "ms", "between 1ms and " + Integer.MAX_VALUE + "ms");
    int threads = IO_THREADS.get(source);
    ioThreads = threads > 0 ? threads : Math.min(4, Runtime.getRuntime().availableProcessors());
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

  public int ioThreads() {
    return ioThreads;
  }

  @Override
  public String toString() {
    return "TcpConfig(port=" + port + ", maxFrameBytes=" + maxFrameBytes + ", connectTimeout="
        + connectTimeout.toMillis() + "ms, ioThreads=" + ioThreads + ")";
  }
}
