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
  public static final byte DEVICE_WRITE = 39;
  public static final byte DEVICE_WRITE_RESULT = 40;
  public static final byte FORWARD_DEVICE_WRITE = 41;
  /** Largest device write request carried ({@code DeviceWriteRequest} with its maximum entries). */
  private static final int MAX_DEVICE_REQUEST = 64 + 192 + 64 + 512 + (1 << 16) * 28; // 512: reader id, budget
  private static final int MAX_PEERS = 1 << 16;

  private RpcMessages() {}

  public sealed interface Message permits Register, Peers, Lookup, PeerJoined, PeerLost, MetricsRequest, Metrics,
      DeviceWrite, DeviceWriteResult, ForwardDeviceWrite {}

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

  /** A reader's device write request for the holder's GPU (the bytes of {@code DeviceWriteRequest}). */
  public record DeviceWrite(byte[] request) implements Message {}

  /** The holder's answer: pushed ({@code ok}, block bytes) or refused with the reason; the reader trusts only its signal. */
  public record DeviceWriteResult(long requestId, boolean ok, long bytes, String reason,
                                  dev.slipstream.core.shuffle.ServeTimeline timeline) implements Message {
    public DeviceWriteResult(long requestId, boolean ok, long bytes, String reason) {
      this(requestId, ok, bytes, reason, dev.slipstream.core.shuffle.ServeTimeline.NONE);
    }
  }

  /**
   * A reader's device write request for executor {@code executorId}, sent to the driver, which
   * forwards it (executors' RPC environments are clients of the driver's and cannot reach each
   * other) and relays the holder's {@link DeviceWriteResult}.
   */
  public record ForwardDeviceWrite(String executorId, byte[] request) implements Message {}

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
    } else if (m instanceof DeviceWrite d) {
      w.putHeader(DEVICE_WRITE).putBytes(d.request());
    } else if (m instanceof ForwardDeviceWrite f) {
      w.putHeader(FORWARD_DEVICE_WRITE).putString(f.executorId()).putBytes(f.request());
    } else if (m instanceof DeviceWriteResult d) {
      w.putHeader(DEVICE_WRITE_RESULT).putLong(d.requestId()).putByte(d.ok() ? 1 : 0).putLong(d.bytes())
          .putString(d.reason());
      d.timeline().write(w);
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
      case DEVICE_WRITE -> new DeviceWrite(r.getBytes("device write request", MAX_DEVICE_REQUEST));
      case FORWARD_DEVICE_WRITE -> new ForwardDeviceWrite(r.getString("executor id", 256),
          r.getBytes("device write request", MAX_DEVICE_REQUEST));
      case DEVICE_WRITE_RESULT -> {
        long id = r.getLong("request id");
        byte ok = r.getByte("device write outcome");
        if (ok != 0 && ok != 1) {
          throw new TransportException(TransportError.MALFORMED, "device write result: outcome " + ok
              + ", expected 0 (refused) or 1 (pushed)");
        }
        long pushed = r.getLong("bytes pushed");
        String reason = r.getString("reason", 8192);
        yield new DeviceWriteResult(id, ok == 1, pushed, reason, dev.slipstream.core.shuffle.ServeTimeline.read(r));
      }
      default -> throw new TransportException(TransportError.UNKNOWN_TYPE,
          "slipstream rpc message: got type id " + type + ", expected " + REGISTER + ".." + FORWARD_DEVICE_WRITE);
    };
    r.expectEnd("slipstream rpc message");
    return m;
  }
}
