package dev.slipstream.core.transport;

import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.Arrays;
import java.util.Objects;

/**
 * Everything a peer needs to connect to a transport: the transport name, an address the
 * provider understands (for tcp {@code host:port}, for loopback a fabric-local name), and
 * provider-specific extra bytes (queue numbers, GIDs, IPC handles).
 */
public final class EndpointDescriptor {
  /** Upper bounds checked before anything is allocated while decoding. */
  public static final int MAX_NAME = 64;
  public static final int MAX_ADDRESS = 1024;
  public static final int MAX_EXTRA = 64 * 1024;

  private final String transport;
  private final String address;
  private final byte[] extra;

  public EndpointDescriptor(String transport, String address, byte[] extra) {
    this.transport = Objects.requireNonNull(transport, "transport");
    this.address = Objects.requireNonNull(address, "address");
    this.extra = extra == null ? new byte[0] : extra.clone();
  }

  public String transport() {
    return transport;
  }

  public String address() {
    return address;
  }

  public byte[] extra() {
    return extra.clone();
  }

  public void encode(WireWriter out) {
    out.putString(transport).putString(address).putBytes(extra);
  }

  public static EndpointDescriptor decode(WireReader in) throws TransportException {
    String t = in.getString("transport name", MAX_NAME);
    String a = in.getString("endpoint address", MAX_ADDRESS);
    byte[] x = in.getBytes("endpoint extra", MAX_EXTRA);
    return new EndpointDescriptor(t, a, x);
  }

  /** Standalone encoding with magic and version, for carrying in RPC messages. */
  public byte[] toBytes() {
    WireWriter w = new WireWriter(32 + address.length() + extra.length);
    w.putHeader(WireWriter.TYPE_ENDPOINT);
    encode(w);
    return w.toByteArray();
  }

  public static EndpointDescriptor fromBytes(byte[] bytes) throws TransportException {
    WireReader r = new WireReader(bytes);
    r.expectHeader(WireWriter.TYPE_ENDPOINT, "endpoint descriptor");
    EndpointDescriptor d = decode(r);
    r.expectEnd("endpoint descriptor");
    return d;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof EndpointDescriptor e && transport.equals(e.transport)
        && address.equals(e.address) && Arrays.equals(extra, e.extra);
  }

  @Override
  public int hashCode() {
    return Objects.hash(transport, address, Arrays.hashCode(extra));
  }

  @Override
  public String toString() {
    return transport + "://" + address;
  }
}
