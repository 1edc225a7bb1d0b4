package dev.slipstream.core.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TcpConfigTest {

  private static TcpConfig config(String key, String value) {
    return new TcpConfig(ConfigSource.of(Map.of(key, value)));
  }

  private static void assertRejected(String key, String value, String expected) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> config(key, value));
    assertTrue(e.getMessage().contains(key), e.getMessage());
    assertTrue(e.getMessage().contains(value), e.getMessage());
    assertTrue(e.getMessage().contains(expected), e.getMessage());
  }

  @Test
  void defaultsAreEphemeralPortFourMebibyteFramesTenSecondConnects() {
    TcpConfig c = new TcpConfig(ConfigSource.empty());
    assertEquals(0, c.port());
    assertEquals(4 << 20, c.maxFrameBytes());
    assertEquals(Duration.ofSeconds(10), c.connectTimeout());
    assertEquals(Math.min(4, Runtime.getRuntime().availableProcessors()), c.ioThreads());
    assertEquals("nio", c.ioMode());
    assertEquals(Duration.ZERO, c.busyPoll());
    assertEquals(Duration.ofMinutes(5), c.idleTimeout());
    assertEquals(1024, c.maxInboundConnections());
  }

  @Test
  void ioModesAndBusyPollingParseAndBusyPollingNeedsEpoll() {
    assertEquals("epoll", config("spark.slipstream.tcp.ioMode", "epoll").ioMode());
    assertEquals("auto", config("spark.slipstream.tcp.ioMode", "auto").ioMode());
    TcpConfig c = new TcpConfig(ConfigSource.of(Map.of("spark.slipstream.tcp.ioMode", "epoll",
        "spark.slipstream.tcp.busyPoll", "3ms")));
    assertEquals(Duration.ofMillis(3), c.busyPoll());
    assertRejected("spark.slipstream.tcp.ioMode", "kqueue", "nio");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> config("spark.slipstream.tcp.busyPoll", "2ms"));
    assertTrue(e.getMessage().contains("spark.slipstream.tcp.busyPoll") && e.getMessage().contains("2ms")
        && e.getMessage().contains("spark.slipstream.tcp.ioMode=epoll or auto"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> new TcpConfig(ConfigSource.of(Map.of(
        "spark.slipstream.tcp.ioMode", "auto", "spark.slipstream.tcp.busyPoll", "2s"))));
    assertTrue(e.getMessage().contains("2s") && e.getMessage().contains("at most 1s"), e.getMessage());
  }

  @Test
  void parsesSizesDurationsAndCounts() {
    assertEquals(64 * 1024, config("spark.slipstream.tcp.maxFrameBytes", "64k").maxFrameBytes());
    assertEquals(1 << 30, config("spark.slipstream.tcp.maxFrameBytes", "1g").maxFrameBytes());
    assertEquals(Duration.ofMillis(500), config("spark.slipstream.tcp.connectTimeout", "500ms").connectTimeout());
    assertEquals(Duration.ofMinutes(2), config("spark.slipstream.tcp.connectTimeout", "2min").connectTimeout());
    assertEquals(7077, config("spark.slipstream.tcp.port", "7077").port());
    assertEquals(3, config("spark.slipstream.tcp.ioThreads", "3").ioThreads());
    assertEquals(Duration.ZERO, config("spark.slipstream.tcp.idleTimeout", "0").idleTimeout(), "0: off");
    assertEquals(Duration.ofSeconds(30), config("spark.slipstream.tcp.idleTimeout", "30s").idleTimeout());
    assertEquals(1, config("spark.slipstream.tcp.maxInboundConnections", "1").maxInboundConnections());
  }

  @Test
  void rejectsBadValuesNamingKeyValueAndExpectation() {
    assertRejected("spark.slipstream.tcp.maxFrameBytes", "4x", "expected a non-negative size");
    assertRejected("spark.slipstream.tcp.maxFrameBytes", "100", "expected between 1024 bytes and 1g");
    assertRejected("spark.slipstream.tcp.maxFrameBytes", "2g", "expected between 1024 bytes and 1g");
    assertRejected("spark.slipstream.tcp.connectTimeout", "soon", "expected a non-negative duration");
    assertRejected("spark.slipstream.tcp.connectTimeout", "0", "expected between 1ms");
    assertRejected("spark.slipstream.tcp.port", "65536", "[0, 65535]");
    assertRejected("spark.slipstream.tcp.ioThreads", "-1", "[0, 256]");
    assertRejected("spark.slipstream.tcp.idleTimeout", "later", "expected a non-negative duration");
    assertRejected("spark.slipstream.tcp.idleTimeout", "30d", "expected at most 2147483647ms (0: off)");
    assertRejected("spark.slipstream.tcp.maxInboundConnections", "0", "[1, 1048576]");
    assertRejected("spark.slipstream.tcp.maxInboundConnections", "many", "spark.slipstream.tcp.maxInboundConnections");
  }
}
