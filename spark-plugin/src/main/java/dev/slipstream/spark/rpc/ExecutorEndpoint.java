package dev.slipstream.spark.rpc;

import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.rpc.RpcMessages.Metrics;
import dev.slipstream.spark.rpc.RpcMessages.MetricsRequest;
import dev.slipstream.spark.rpc.RpcMessages.PeerJoined;
import dev.slipstream.spark.rpc.RpcMessages.PeerLost;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.PartialFunction;
import scala.runtime.BoxedUnit;

/**
 * An executor's endpoint: the driver tells it about peers joining and leaving, forwards peers'
 * gpunetio link offers, and asks it for its counters. Threading: Spark delivers one message at a time; the callbacks must not block.
 */
public final class ExecutorEndpoint implements ThreadSafeRpcEndpoint {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorEndpoint.class);
  public static final String NAME_PREFIX = "slipstream-executor-";

  private final RpcEnv rpcEnv;
  private final String executorId;
  private final Consumer<PeerInfo> onJoined;
  private final java.util.function.BiConsumer<String, String> onLost;
  private final Supplier<Map<String, Long>> metrics;
  private final Consumer<dev.slipstream.gpu.nic.NicOffer> onNicOffer;
  private final Consumer<dev.slipstream.gpu.serve.RingOffer> onRingOffer;

  public ExecutorEndpoint(RpcEnv rpcEnv, String executorId, Consumer<PeerInfo> onJoined,
                          java.util.function.BiConsumer<String, String> onLost, Supplier<Map<String, Long>> metrics,
                          Consumer<dev.slipstream.gpu.nic.NicOffer> onNicOffer,
                          Consumer<dev.slipstream.gpu.serve.RingOffer> onRingOffer) {
    this.rpcEnv = rpcEnv;
    this.executorId = executorId;
    this.onJoined = onJoined;
    this.onLost = onLost;
    this.metrics = metrics;
    this.onNicOffer = onNicOffer;
    this.onRingOffer = onRingOffer;
  }

  @Override
  public RpcEnv rpcEnv() {
    return rpcEnv;
  }

  @Override
  public PartialFunction<Object, BoxedUnit> receive() {
    return Scala.partial(m -> m instanceof byte[], m -> {
      try {
        RpcMessages.Message msg = RpcMessages.decode((byte[]) m);
        if (msg instanceof PeerJoined j) {
          onJoined.accept(j.peer());
        } else if (msg instanceof PeerLost l) {
          onLost.accept(l.executorId(), l.reason());
        } else if (msg instanceof RpcMessages.NicOfferMessage o) {
          onNicOffer.accept(o.offer());
        } else if (msg instanceof RpcMessages.RingOfferMessage o) {
          onRingOffer.accept(o.offer());
        }
      } catch (Exception e) {
        LOG.warn("Executor {} dropped a malformed driver message: {}", executorId, e.toString());
      }
      return true;
    });
  }

  @Override
  public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
    return Scala.partial(m -> m instanceof byte[], m -> {
      RpcMessages.Message msg = RpcMessages.decode((byte[]) m);
      if (msg instanceof MetricsRequest) {
        context.reply(RpcMessages.encode(new Metrics(executorId, metrics.get())));
      } else {
        context.sendFailure(new IllegalArgumentException("executor " + executorId
            + ": unexpected request, expected a metrics request"));
      }
      return true;
    });
  }
}
