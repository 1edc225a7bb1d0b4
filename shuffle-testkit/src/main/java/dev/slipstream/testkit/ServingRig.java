package dev.slipstream.testkit;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * One block writer set up for {@link ServingConformanceSuite}: a holder node whose block server
 * hands requests into landing memory of {@link #kind()} to the writer under test, a reader node in
 * its peer table, the holder's map outputs, and the reader's landing memory. A serving mechanism
 * that takes requests another way than the holder's block server (a resident kernel's ring)
 * overrides {@link #send} and the request counts.
 */
public interface ServingRig extends AutoCloseable {
  /** The landing memory the writer writes into. */
  MemoryKind kind();

  /** The node serving requests with the writer under test. */
  ShuffleNode holder();

  /** The node sending requests; the holder's peer table holds it. */
  ShuffleNode reader();

  /** The payload column widths requests name (none for host memory). */
  int[] widths();

  /**
   * Commits map output {@code mapId} of {@code shuffleId} on the holder, {@code sizes.length}
   * partitions of about {@code sizes[p]} bytes each (a writer may round them to its format), and
   * returns what a request lands of each partition.
   */
  Output commit(int shuffleId, long mapId, int[] sizes) throws Exception;

  /** What a request lands of each partition of a map output: its bytes and its rows (0 where not counted). */
  record Output(byte[][] bytes, long[] rows) {}

  /**
   * A zeroed range of {@code length} bytes of the reader's landing memory that the holder may write,
   * never handed out again by this rig.
   */
  Landing landing(long length) throws Exception;

  /** A range of the reader's landing memory. */
  interface Landing {
    /** The region a request names (offsets are relative to it). */
    RegionDescriptor region();

    /** Where the range starts in the region. */
    long base();

    /** {@code length} bytes at {@code offset} of the region. */
    byte[] read(long offset, int length) throws Exception;
  }

  /**
   * The reader is lost while requests are in flight: its node stops, and the holder is told as its
   * executor would be (landing memory a push may still write stays mapped until the holder's pushes
   * ended).
   */
  void loseReader() throws Exception;

  /**
   * Sends {@code req} from the reader to the holder as this rig's reader does; by default through
   * the reader node's write exchange, over the transport to the holder's block server.
   */
  default CompletableFuture<WriteResult> send(WriteRequest req, Duration answerWithin) {
    return reader().writeExchange().send(holder().localEndpoint(), req, null, answerWithin);
  }

  /** Requests that reached the holder's serving (by default its node's block server). */
  default long requestsIn() {
    return holder().requestsReceived();
  }

  /**
   * Of those, the ones that ended: served, failed or refused (by default as the holder node counts
   * them), or never taken up because their reader was lost first.
   */
  default long requestsEnded() {
    ShuffleNode h = holder();
    return h.requestsServed() + h.serveFailures() + h.requestsRefused();
  }

  /** Reports of a request beyond its first; 0 when every request was reported once. */
  default long reportsBeyondFirst() {
    return holder().writerReportsIgnored();
  }

  /**
   * For a rig whose requests can also be served by a fallback path (a resident kernel's rig sends
   * what the kernel refuses as "not in its directory" to push lanes): throws unless every request
   * served since the last call was served by the writer under test itself, and at least one was.
   * The suite calls it after requests that the writer under test must serve. Nothing by default.
   */
  default void checkServedByTheWriterUnderTest(String what) {}
}
