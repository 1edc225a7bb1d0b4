package dev.slipstream.core.transport.loopback;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The in-JVM "network" loopback transports find each other on. One JVM-wide fabric backs the
 * provider found by {@link java.util.ServiceLoader} (two transports created in one JVM, e.g. the
 * driver and executor roles of {@code local[*]} mode, must reach each other); tests may create
 * their own.
 *
 * <p>Threading: thread-safe.
 */
public final class LoopbackFabric {
  private static final LoopbackFabric JVM_WIDE = new LoopbackFabric();

  private final ConcurrentHashMap<String, LoopbackTransport> endpoints = new ConcurrentHashMap<>();
  private final AtomicLong next = new AtomicLong();

  public static LoopbackFabric jvmWide() {
    return JVM_WIDE;
  }

  String attach(LoopbackTransport t, String processName) {
    String address = processName + "#" + next.incrementAndGet();
    endpoints.put(address, t);
    return address;
  }

  void detach(String address) {
    endpoints.remove(address);
  }

  LoopbackTransport find(String address) throws TransportException {
    LoopbackTransport t = endpoints.get(address);
    if (t == null) {
      throw new TransportException(TransportError.PEER_LOST,
          "no loopback transport at '" + address + "' in this JVM (closed, or in another process)");
    }
    return t;
  }
}
