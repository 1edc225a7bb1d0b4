package dev.slipstream.spark.rpc;

import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.Optional;

/**
 * What the driver's peer table holds for one executor: its transport endpoint and, when it has a
 * GPU, its {@link GpuEndpoint} (device identity and device landing region). No host landing
 * region is published: each write request carries its own registration. On the wire the GPU part
 * follows a presence byte (0: none, 1: a versioned GPU endpoint).
 */
public record PeerInfo(String executorId, String host, EndpointDescriptor endpoint, Optional<GpuEndpoint> gpu) {
  public PeerInfo {
    gpu = gpu == null ? Optional.empty() : gpu;
  }

  public PeerInfo(String executorId, String host, EndpointDescriptor endpoint) {
    this(executorId, host, endpoint, Optional.empty());
  }

  /** The same peer with {@code g} as its GPU endpoint. */
  public PeerInfo withGpu(GpuEndpoint g) {
    return new PeerInfo(executorId, host, endpoint, Optional.of(g));
  }

  void encode(WireWriter w) {
    w.putString(executorId).putString(host);
    endpoint.encode(w);
    w.putByte(gpu.isPresent() ? 1 : 0);
    gpu.ifPresent(g -> g.encode(w));
  }

  static PeerInfo decode(WireReader r) throws TransportException {
    String id = r.getString("executor id", 256);
    String host = r.getString("host", 1024);
    EndpointDescriptor e = EndpointDescriptor.decode(r);
    byte hasGpu = r.getByte("GPU endpoint presence");
    if (hasGpu != 0 && hasGpu != 1) {
      throw new TransportException(TransportError.MALFORMED, "peer " + id + ": GPU endpoint presence byte " + hasGpu
          + ", expected 0 (no GPU) or 1 (a GPU endpoint follows)");
    }
    Optional<GpuEndpoint> gpu = hasGpu == 1 ? Optional.of(GpuEndpoint.decode(r)) : Optional.empty();
    return new PeerInfo(id, host, e, gpu);
  }
}
