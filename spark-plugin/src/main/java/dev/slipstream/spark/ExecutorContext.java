package dev.slipstream.spark;

import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.spark.rpc.PeerInfo;
import java.util.Optional;

/**
 * What one executor's Slipstream runtime offers the GPU path ({@code dev.slipstream.spark.gpu}):
 * its identity, its shuffle node, its configuration and its copy of the driver's peer table.
 *
 * <p>Threading: every method is thread-safe.
 */
public interface ExecutorContext {
  String executorId();

  /** The host name this executor registered with the driver. */
  String host();

  ShuffleNode node();

  /** This executor's folder for spilled map outputs, under Spark's local directory; deleted when it stops. */
  java.nio.file.Path spillDir();

  SlipstreamConf conf();

  /** Whether spark.authenticate is on (the transport then authenticates every peer with Spark's secret). */
  boolean authenticated();

  /** The peer, from the local table or else from the driver; empty when the driver does not know it. */
  Optional<PeerInfo> peer(String executorId);

  /**
   * The peer as the driver knows it now (a GPU endpoint registered after the local copy was made
   * reaches this executor through a PeerJoined message, which may still be on its way).
   */
  Optional<PeerInfo> peerFromDriver(String executorId);

  /** The peer from the local table only; empty when it is not there (no driver round trip). */
  Optional<PeerInfo> knownPeer(String executorId);

  /** Whether some peer of the local table registered {@code endpoint} as its transport endpoint. */
  boolean isPeerEndpoint(dev.slipstream.core.transport.EndpointDescriptor endpoint);

  /** Registers this executor again with its GPU endpoint, so the driver tells every peer. */
  void publishGpu(GpuEndpoint endpoint) throws Exception;

  /** The peers of the local table. */
  java.util.Collection<PeerInfo> knownPeers();

  /** Sends a gpunetio link offer to the executor it names, through the driver (one-way). */
  void relay(dev.slipstream.gpu.nic.NicOffer offer);

  /** Sends a resident ring's set-up message to the executor it names, through the driver (one-way). */
  void relay(dev.slipstream.gpu.serve.RingOffer offer);
}
