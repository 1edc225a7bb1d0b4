package dev.slipstream.spark.rpc;

import dev.slipstream.core.transport.TransportException;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.rpc.RpcMessages.Lookup;
import dev.slipstream.spark.rpc.RpcMessages.Metrics;
import dev.slipstream.spark.rpc.RpcMessages.MetricsRequest;
import dev.slipstream.spark.rpc.RpcMessages.PeerJoined;
import dev.slipstream.spark.rpc.RpcMessages.PeerLost;
import dev.slipstream.spark.rpc.RpcMessages.Peers;
import dev.slipstream.spark.rpc.RpcMessages.Register;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.RpcTimeout;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.PartialFunction;
import scala.concurrent.duration.FiniteDuration;
import scala.reflect.ClassTag$;
import scala.runtime.BoxedUnit;

/**
 * The driver's peer table. Executors register their transport endpoint (and GPU endpoint) as
 * they start; the driver answers with every peer it knows, tells the others about the newcomer,
 * tells everyone when an executor is removed, and answers lookups.
 *
 * <p>Messages are {@code byte[]} ({@link RpcMessages}); registration is an {@code Object[]} of
 * the message bytes and the executor endpoint's ref. Threading: Spark delivers messages to a
 * {@link ThreadSafeRpcEndpoint} one at a time; {@link #executorRemoved} and
 * {@link #collectMetrics} may run on other threads, so the tables are concurrent.
 */
public final class DriverEndpoint implements ThreadSafeRpcEndpoint {
  private static final Logger LOG = LoggerFactory.getLogger(DriverEndpoint.class);
  public static final String NAME = "slipstream-driver";

  private final RpcEnv rpcEnv;
  private final Duration rpcTimeout;
  private final Map<String, PeerInfo> peers = new ConcurrentHashMap<>();
  private final Map<String, RpcEndpointRef> executors = new ConcurrentHashMap<>();

  public DriverEndpoint(RpcEnv rpcEnv, Duration rpcTimeout) {
    this.rpcEnv = rpcEnv;
    this.rpcTimeout = rpcTimeout;
  }

  @Override
  public RpcEnv rpcEnv() {
    return rpcEnv;
  }

  /**
   * One-way messages: a gpunetio link offer or a resident ring's set-up is forwarded to the executor
   * it names (dropped, with a line in the log, when that executor is gone: its peers hear of the
   * loss and close their links and rings).
   */
  @Override
  public PartialFunction<Object, BoxedUnit> receive() {
    return Scala.partial(m -> m instanceof byte[], m -> {
      try {
        RpcMessages.Message msg = RpcMessages.decode((byte[]) m);
        if (msg instanceof RpcMessages.NicOfferMessage o) {
          forward(m, "gpunetio link offer", o.offer().from(), o.offer().to());
        } else if (msg instanceof RpcMessages.RingOfferMessage o) {
          forward(m, "resident ring " + o.offer().kind().name().toLowerCase(java.util.Locale.ROOT), o.offer().from(),
              o.offer().to());
        }
      } catch (TransportException e) {
        LOG.warn("Slipstream driver dropped a malformed one-way message: {}", e.getMessage());
      }
      return true;
    });
  }

  private void forward(Object m, String what, String from, String toId) {
    RpcEndpointRef to = executors.get(toId);
    if (to == null || !peers.containsKey(from)) {
      LOG.info("{} from {} to {} dropped: {} is not registered", what, from, toId, to == null ? toId : from);
    } else {
      to.send(m);
    }
  }

  @Override
  public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
    return Scala.partial(m -> m instanceof byte[] || m instanceof Object[], m -> {
      try {
        if (m instanceof Object[] pair && pair.length == 2 && pair[0] instanceof byte[] b
            && pair[1] instanceof RpcEndpointRef ref && RpcMessages.decode(b) instanceof Register r) {
          context.reply(RpcMessages.encode(register(r.peer(), ref)));
        } else if (m instanceof byte[] b && RpcMessages.decode(b) instanceof Lookup l) {
          PeerInfo p = peers.get(l.executorId());
          context.reply(RpcMessages.encode(new Peers(p == null ? List.of()
              : List.of(dev.slipstream.spark.gpu.GpuPeers.visibleTo(p, peers.get(l.from()))))));
        } else {
          context.sendFailure(new IllegalArgumentException("slipstream driver: unexpected message "
              + m.getClass().getName() + ", expected a register or lookup message"));
        }
      } catch (TransportException e) {
        context.sendFailure(e);
      }
      return true;
    });
  }

  private Peers register(PeerInfo peer, RpcEndpointRef ref) {
    LOG.info("Slipstream executor {} registered: {}{}", peer.executorId(), peer.endpoint(),
        peer.gpu().map(g -> ", GPU " + g.device() + " (" + g.pciBusId() + ", " + g.uuid() + ") on " + g.hostId())
            .orElse(", no GPU"));
    PeerInfo old = peers.put(peer.executorId(), peer);
    executors.put(peer.executorId(), ref);
    executors.forEach((id, r) -> {
      if (!id.equals(peer.executorId())) {
        // GPU: landing descriptors (CUDA IPC handles) and request rings go to executors of the same machine only.
        r.send(RpcMessages.encode(new PeerJoined(dev.slipstream.spark.gpu.GpuPeers.visibleTo(peer, peers.get(id)))));
      }
    });
    if (old != null && !old.equals(peer)) {
      LOG.info("Executor {} re-registered with a new endpoint", peer.executorId());
    }
    List<PeerInfo> all = new ArrayList<>();
    peers.values().forEach(p -> all.add(dev.slipstream.spark.gpu.GpuPeers.visibleTo(p, peer)));
    return new Peers(all);
  }

  /** Drops an executor from the table and tells every other executor. */
  public void executorRemoved(String executorId, String reason) {
    PeerInfo p = peers.remove(executorId);
    executors.remove(executorId);
    if (p != null) {
      LOG.info("Slipstream executor {} removed: {}", executorId, reason);
      byte[] lost = RpcMessages.encode(new PeerLost(executorId, reason));
      executors.values().forEach(r -> r.send(lost));
    }
  }

  /**
   * How GPU shuffle blocks move from executor {@code from} to executor {@code to}
   * ({@link dev.slipstream.gpu.shuffle.GpuPath#between}); {@code HOST} when either is unknown or
   * has no GPU.
   */
  public dev.slipstream.gpu.shuffle.GpuPath path(String from, String to) {
    PeerInfo a = peers.get(from);
    PeerInfo b = peers.get(to);
    return dev.slipstream.gpu.shuffle.GpuPath.between(a == null ? null : a.gpu().orElse(null),
        b == null ? null : b.gpu().orElse(null));
  }

  /** A snapshot of the peer table. */
  public Map<String, PeerInfo> peers() {
    return Map.copyOf(peers);
  }

  /** Asks every registered executor for its Slipstream counters. */
  public Map<String, Map<String, Long>> collectMetrics() {
    Map<String, Map<String, Long>> out = new LinkedHashMap<>();
    RpcTimeout timeout = new RpcTimeout(FiniteDuration.apply(rpcTimeout.toMillis(), TimeUnit.MILLISECONDS),
        "spark.slipstream.rpcTimeout");
    byte[] req = RpcMessages.encode(new MetricsRequest());
    executors.forEach((id, ref) -> {
      try {
        byte[] reply = ref.askSync(req, timeout, ClassTag$.MODULE$.apply(byte[].class));
        if (RpcMessages.decode(reply) instanceof Metrics m) {
          out.put(m.executorId(), m.values());
        }
      } catch (Exception e) {
        LOG.warn("Could not collect metrics from executor {}: {}", id, e.toString());
      }
    });
    return out;
  }
}
