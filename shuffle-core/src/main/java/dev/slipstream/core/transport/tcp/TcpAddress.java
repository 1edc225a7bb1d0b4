package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.net.InetSocketAddress;

/**
 * The {@code host:port} address of a tcp endpoint; IPv6 literals are bracketed
 * ({@code [::1]:7077}).
 */
record TcpAddress(String host, int port) {

  static TcpAddress parse(String address) throws TransportException {
    int colon = address.lastIndexOf(':');
    String host = colon > 0 ? address.substring(0, colon) : "";
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port = -1;
    try {
      port = Integer.parseInt(address.substring(colon + 1));
    } catch (NumberFormatException e) {
      // reported below
    }
    if (host.isEmpty() || port < 1 || port > 65535) {
      throw new TransportException(TransportError.MALFORMED,
          "tcp address '" + address + "' is not host:port with a port in [1, 65535]");
    }
    return new TcpAddress(host, port);
  }

  /** Resolves the host now (on the caller's thread, not an event loop). */
  InetSocketAddress resolve() throws TransportException {
    InetSocketAddress a = new InetSocketAddress(host, port);
    if (a.isUnresolved()) {
      throw new TransportException(TransportError.PEER_LOST, "cannot resolve host '" + host + "' of tcp://" + this);
    }
    return a;
  }

  @Override
  public String toString() {
    return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
  }
}
