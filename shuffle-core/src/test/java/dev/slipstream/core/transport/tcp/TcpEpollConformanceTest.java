package dev.slipstream.core.transport.tcp;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportConformanceSuite;
import dev.slipstream.core.transport.TransportContext;
import java.util.Map;

/**
 * The conformance suite over tcp on Netty's native epoll event loops with busy polling
 * ({@code spark.slipstream.tcp.ioMode=epoll}, {@code busyPoll=1ms}): everything behaves as on NIO.
 * Skips with the reason where epoll cannot load (not Linux, or Netty's native library missing).
 */
class TcpEpollConformanceTest extends TransportConformanceSuite {
  @Override
  protected Transport newTransport(String name) throws Exception {
    String why = TcpIo.epollUnavailable();
    assumeTrue(why == null, "Netty's epoll transport cannot load here: " + why);
    return new TcpTransportProvider().create(new TransportContext(ConfigSource.of(Map.of(
        "spark.slipstream.tcp.ioMode", "epoll", "spark.slipstream.tcp.busyPoll", "1ms")), "127.0.0.1", name,
        java.util.Optional.empty(), APPLICATION, name));
  }
}
