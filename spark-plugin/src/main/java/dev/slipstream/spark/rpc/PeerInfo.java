package dev.slipstream.spark.rpc;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;

/** What the driver's peer table holds for one executor. */
public record PeerInfo(String executorId, String host, EndpointDescriptor endpoint, RegionDescriptor landing) {
  void encode(WireWriter w) {
    w.putString(executorId).putString(host);
    endpoint.encode(w);
    landing.encode(w);
  }

  static PeerInfo decode(WireReader r) throws TransportException {
    String id = r.getString("executor id", 256);
    String host = r.getString("host", 1024);
    EndpointDescriptor e = EndpointDescriptor.decode(r);
    RegionDescriptor l = RegionDescriptor.decode(r);
    return new PeerInfo(id, host, e, l);
  }
}
