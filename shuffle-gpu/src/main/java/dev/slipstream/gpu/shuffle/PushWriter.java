package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.BlockWriter;
import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.RemoteRegion;
import java.util.function.Function;

/**
 * The block writer into device landing regions over push lanes: a request the block server
 * admitted and checked is checked once more for whom it writes to ({@link PeerLandings}: the region
 * it names must be the one its reader registered: its CUDA IPC export, on this machine, or its NIC
 * registration), the reader's region is mapped ({@code importer}: CUDA IPC, cached by the caller;
 * nothing to map for a NIC landing region) before anything is pinned, and the
 * {@link PushScheduler} pins the map outputs and launches the push; its completion thread
 * reports the outcome, with the request's {@link ServeTimeline}.
 *
 * <p>Threading: {@link #write} does the checks, the pins and the launch on the calling thread and
 * returns without waiting for the push; a caller that may not block (a transport thread) calls it
 * only for requests whose outputs are in device memory ({@link DeviceMapOutputStore#onDevice}).
 * Ownership: owns nothing it was given.
 */
public final class PushWriter implements BlockWriter {
  private final PushScheduler server;
  private final PeerLandings landings;
  private final Function<RegionExport, RemoteRegion> importer;
  private final long timeoutMs;
  private final java.util.concurrent.atomic.AtomicLong overNic = new java.util.concurrent.atomic.AtomicLong();

  /**
   * @param importer maps a reader's registered landing region (an alias for this process's own)
   * @param timeoutMs the longest a request may wait for a lane or push (the fetch timeout); its
   *     budget may make it shorter
   */
  public PushWriter(PushScheduler server, PeerLandings landings, Function<RegionExport, RemoteRegion> importer,
      long timeoutMs) {
    this.server = server;
    this.landings = landings;
    this.importer = importer;
    this.timeoutMs = timeoutMs;
  }

  @Override
  public void write(EndpointDescriptor reader, WriteRequest req, long receivedNanos, long deadlineNanos,
      Outcome outcome) {
    long started = System.nanoTime();
    long[] marks = new long[PushScheduler.MARKS];
    try {
      PeerLandings.Landing to = landings.resolve(req, reader);
      if (to instanceof PeerLandings.OverNic) {
        overNic.incrementAndGet();
      }
      if (to instanceof PeerLandings.Imported i) {
        try {
          importer.apply(i.export()); // mapped and its length checked before anything is pinned
        } catch (RuntimeException e) {
          throw new TransportException(TransportError.OUT_OF_RANGE, "device write request " + req.requestId()
              + ": landing region of reader executor " + req.reader().executorId() + ": " + e.getMessage(), e);
        }
      }
      // A NIC landing region needs no mapping: the push's lane leases a slot of the link to the reader.
      server.start(req, receivedNanos, timeoutMs, marks, (bytes, error) ->
          outcome.done(error == null ? bytes : 0, error, timeline(receivedNanos, started, marks)));
    } catch (TransportException e) {
      outcome.done(0, e, timeline(receivedNanos, started, marks));
    } catch (RuntimeException e) {
      outcome.done(0, new TransportException(TransportError.INTERNAL, "device write request " + req.requestId() + ": "
          + e, e), timeline(receivedNanos, started, marks));
    }
  }

  /** Requests accepted so far that name their reader's NIC landing region (pushed over a NIC link). */
  public long overNic() {
    return overNic.get();
  }

  private static ServeTimeline timeline(long received, long started, long[] marks) {
    return new ServeTimeline(received, started, marks[PushScheduler.MARK_CHECKED],
        marks[PushScheduler.MARK_LANE_READY], marks[PushScheduler.MARK_LAUNCHED],
        marks[PushScheduler.MARK_ENDED], 0);
  }
}
