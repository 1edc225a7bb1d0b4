package dev.slipstream.spark.rpc;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Messages between the driver and executor endpoints. They travel over Spark's RPC as plain
 * {@code byte[]} (magic, version, type id, fields), so no plugin class needs to be visible to
 * the RPC layer's class loader.
 */
public final class RpcMessages {
  public static final byte REGISTER = 32;
  public static final byte PEERS = 33;
  public static final byte LOOKUP = 34;
  public static final byte PEER_JOINED = 35;
  public static final byte PEER_LOST = 36;
  public static final byte METRICS_REQUEST = 37;
  public static final byte METRICS = 38;
  // Type ids 39..41 are retired (device write requests go executor to executor over the shuffle transport).
  public static final byte NIC_OFFER = 42;
  public static final byte RING_OFFER = 43;
  private static final int MAX_PEERS = 1 << 16;

  private RpcMessages() {}

  public sealed interface Message permits Register, Peers, Lookup, PeerJoined, PeerLost, MetricsRequest, Metrics,
      NicOfferMessage, RingOfferMessage {}

  public record Register(PeerInfo peer) implements Message {}

  public record Peers(List<PeerInfo> peers) implements Message {}

  /**
   * Asks the driver for executor {@code executorId}'s entry on behalf of executor {@code from} (empty:
   * unnamed), which decides what of its GPU endpoint the answer carries (GpuPeers).
   */
  public record Lookup(String executorId, String from) implements Message {
    public Lookup(String executorId) {
      this(executorId, "");
    }
  }

  public record PeerJoined(PeerInfo peer) implements Message {}

  public record PeerLost(String executorId, String reason) implements Message {}

  public record MetricsRequest() implements Message {}

  public record Metrics(String executorId, Map<String, Long> values) implements Message {}

  /** A gpunetio link offer from one executor to another; the driver forwards it to {@code offer.to()}. */
  public record NicOfferMessage(dev.slipstream.gpu.nic.NicOffer offer) implements Message {}

  /** A resident ring's set-up between a reader and a holder of different machines; forwarded to {@code offer.to()}. */
  public record RingOfferMessage(dev.slipstream.gpu.serve.RingOffer offer) implements Message {}

  public static byte[] encode(Message m) {
    WireWriter w = new WireWriter(256);
    if (m instanceof Register r) {
      w.putHeader(REGISTER);
      r.peer().encode(w);
    } else if (m instanceof Peers p) {
      w.putHeader(PEERS).putInt(p.peers().size());
      p.peers().forEach(x -> x.encode(w));
    } else if (m instanceof Lookup l) {
      w.putHeader(LOOKUP).putString(l.executorId()).putString(l.from());
    } else if (m instanceof PeerJoined j) {
      w.putHeader(PEER_JOINED);
      j.peer().encode(w);
    } else if (m instanceof PeerLost l) {
      w.putHeader(PEER_LOST).putString(l.executorId()).putString(l.reason());
    } else if (m instanceof MetricsRequest) {
      w.putHeader(METRICS_REQUEST);
    } else if (m instanceof Metrics x) {
      w.putHeader(METRICS).putString(x.executorId()).putInt(x.values().size());
      x.values().forEach((k, v) -> w.putString(k).putLong(v));
    } else if (m instanceof NicOfferMessage o) {
      w.putHeader(NIC_OFFER);
      o.offer().encode(w);
    } else if (m instanceof RingOfferMessage o) {
      w.putHeader(RING_OFFER);
      o.offer().encode(w);
    }
    return w.toByteArray();
  }

  public static Message decode(byte[] bytes) throws TransportException {
    WireReader r = new WireReader(bytes);
    byte type = r.readHeader("slipstream rpc message");
    Message m = switch (type) {
      case REGISTER -> new Register(PeerInfo.decode(r));
      case PEERS -> {
        int n = r.getInt("peer count", 0, MAX_PEERS);
        List<PeerInfo> peers = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          peers.add(PeerInfo.decode(r));
        }
        yield new Peers(peers);
      }
      case LOOKUP -> new Lookup(r.getString("executor id", 256), r.getString("asking executor id", 256));
      case PEER_JOINED -> new PeerJoined(PeerInfo.decode(r));
      case PEER_LOST -> new PeerLost(r.getString("executor id", 256), r.getString("reason", 4096));
      case METRICS_REQUEST -> new MetricsRequest();
      case METRICS -> {
        String id = r.getString("executor id", 256);
        int n = r.getInt("metric count", 0, 4096);
        Map<String, Long> values = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
          values.put(r.getString("metric name", 256), r.getLong("metric value"));
        }
        yield new Metrics(id, values);
      }
      case NIC_OFFER -> new NicOfferMessage(dev.slipstream.gpu.nic.NicOffer.decode(r));
      case RING_OFFER -> new RingOfferMessage(dev.slipstream.gpu.serve.RingOffer.decode(r));
      default -> throw new TransportException(TransportError.UNKNOWN_TYPE,
          "slipstream rpc message: got type id " + type + ", expected " + REGISTER + ".." + METRICS + ", "
              + NIC_OFFER + " or " + RING_OFFER);
    };
    r.expectEnd("slipstream rpc message");
    return m;
  }
}
