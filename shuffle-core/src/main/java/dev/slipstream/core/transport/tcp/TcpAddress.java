package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import io.netty.util.NetUtil;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

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

  /**
   * The address to connect to, without a name lookup: resolved for an IP literal (parsed, never
   * looked up), unresolved for a host name, which the transport's {@link TcpResolver} then looks
   * up off the event loops.
   */
  InetSocketAddress socketAddress() {
    byte[] ip = NetUtil.createByteArrayFromIpAddressString(host);
    if (ip == null) {
      return InetSocketAddress.createUnresolved(host, port);
    }
    try {
      return new InetSocketAddress(InetAddress.getByAddress(ip), port); // no lookup: the bytes are given
    } catch (UnknownHostException e) {
      throw new IllegalStateException("IP literal '" + host + "' parsed to " + ip.length + " bytes", e);
    }
  }

  @Override
  public String toString() {
    return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
  }
}
