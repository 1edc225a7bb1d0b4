package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The peer table a holder trusts: which transport endpoint belongs to which executor of its
 * application. A holder writes only to the endpoint this table gives for the executor a request
 * names, never to an endpoint a connection merely claims; in Spark the table is the driver's
 * (executors register with it at start-up).
 *
 * <p>Threading: thread-safe. {@link #lookup} never blocks (it runs on transport threads);
 * {@link #refresh} may block for a bounded time (it runs on the block server's own threads).
 */
public interface PeerDirectory {

  /** The endpoint the table holds for {@code executorId} now, or null when it holds none. */
  EndpointDescriptor lookup(String executorId);

  /**
   * Asks the table's source again (an executor that joined a moment ago may not have reached this
   * copy yet) and returns the endpoint it holds then, or null. Bounded by the caller's RPC timeout.
   */
  default EndpointDescriptor refresh(String executorId) {
    return lookup(executorId);
  }

  /** A directory backed by a concurrent map the caller fills (tests, and processes without a driver). */
  static Table table() {
    return new Table();
  }

  /** A directory over a map of executor id to endpoint; {@link #put} and {@link #remove} change it. */
  final class Table implements PeerDirectory {
    private final Map<String, EndpointDescriptor> peers = new ConcurrentHashMap<>();

    private Table() {}

    public Table put(String executorId, EndpointDescriptor endpoint) {
      peers.put(executorId, endpoint);
      return this;
    }

    public void remove(String executorId) {
      peers.remove(executorId);
    }

    @Override
    public EndpointDescriptor lookup(String executorId) {
      return peers.get(executorId);
    }
  }
}
