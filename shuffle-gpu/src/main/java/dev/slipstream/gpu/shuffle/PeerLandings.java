package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.nic.NicLanding;
import java.util.Optional;

/**
 * The holder's check of whom a device write request would write to: the landing region it names
 * must be the one its reader registered in the driver's peer table, never one the request merely
 * carries. A request names its reader ({@link WriteRequest#reader()}); that executor must be
 * in the peer table with a GPU endpoint whose landing region is the one the request names (region
 * id, key, length, memory kind and device), either as its CUDA IPC export (then it must be on this
 * machine; the handle the holder maps is the registered one) or as its NIC registration (then the
 * holder writes over its NIC link to the reader, {@link #resolve}).
 * This executor's own landing region is accepted for its own reads without the table.
 *
 * <p>Threading: thread-safe when the peer table is. Stateless otherwise.
 */
public final class PeerLandings {
  /** What an executor registered, as the driver's peer table (this executor's copy) has it. */
  @FunctionalInterface
  public interface PeerTable {
    Optional<Peer> peer(String executorId);
  }

  /** An executor's transport endpoint and GPU endpoint, as registered. */
  public record Peer(EndpointDescriptor endpoint, Optional<GpuEndpoint> gpu) {}

  private final String selfId;
  private final GpuEndpoint self;
  private final PeerTable peers;

  /**
   * @param selfId this executor's id
   * @param self this executor's GPU endpoint (its host id and its own landing)
   */
  public PeerLandings(String selfId, GpuEndpoint self, PeerTable peers) {
    this.selfId = selfId;
    this.self = self;
    this.peers = peers;
  }

  /**
   * The landing descriptor {@code req} may be pushed into: its reader's registered one, equal to the
   * request's. Throws {@link TransportException} naming what was got and what was expected:
   * UNKNOWN_REGION when the reader is not in the peer table with a landing region this executor may
   * see, BAD_KEY when the request names another descriptor than the registered one.
   */
  public RegionExport check(WriteRequest req) throws TransportException {
    return check(req, null);
  }

  /**
   * As {@link #check(WriteRequest)} for a request that came over the transport from
   * {@code from} (null: a request made in this process, with no connection to check): {@code from} must also be the reader's registered
   * transport endpoint (UNKNOWN_REGION otherwise), so a connection cannot speak for another reader.
   */
  public RegionExport check(WriteRequest req, EndpointDescriptor from) throws TransportException {
    Landing l = resolve(req, from);
    if (l instanceof Imported i) {
      return i.export();
    }
    throw refused(req, TransportError.UNKNOWN_REGION, "names reader executor " + req.reader().executorId()
        + "'s NIC landing region, expected its CUDA IPC export");
  }

  /** Where a checked request writes: the reader's landing region as it registered it. */
  public sealed interface Landing permits Imported, OverNic {}

  /** Its CUDA IPC export (a reader of this machine, or this executor). */
  public record Imported(RegionExport export) implements Landing {}

  /** Its NIC registration: written over the NIC link to {@code reader}. */
  public record OverNic(String reader, NicLanding landing) implements Landing {}

  /**
   * As {@link #check(WriteRequest, EndpointDescriptor)}, also accepting a request that names its
   * reader's NIC landing region (any machine; not this executor's own).
   */
  public Landing resolve(WriteRequest req, EndpointDescriptor from) throws TransportException {
    String reader = req.reader().executorId();
    RegionDescriptor claimed = req.landing();
    if (reader.isEmpty()) {
      throw refused(req, TransportError.UNKNOWN_REGION, "names no reader executor, expected the executor whose"
          + " registered landing region it writes to");
    }
    GpuEndpoint registered;
    if (reader.equals(selfId)) {
      registered = self;
    } else {
      Peer p = peers.peer(reader).orElseThrow(() -> refused(req, TransportError.UNKNOWN_REGION,
          "reader executor " + reader + " is not in this executor's peer table (lost, or not registered yet)"));
      if (from != null && !from.equals(p.endpoint())) {
        throw refused(req, TransportError.UNKNOWN_REGION, "came from " + from + ", but reader executor " + reader
            + " registered " + p.endpoint());
      }
      registered = p.gpu().orElseThrow(() -> refused(req, TransportError.UNKNOWN_REGION, "reader executor " + reader
          + " registered no GPU endpoint"));
      if (registered.nic().isPresent() && registered.nic().get().descriptor(registered.device()).equals(claimed)) {
        return new OverNic(reader, registered.nic().get());
      }
      if (!registered.hostId().equals(self.hostId())) {
        throw refused(req, TransportError.UNKNOWN_REGION, "reader executor " + reader + " runs on "
            + registered.hostId() + ", expected this machine (" + self.hostId() + "): CUDA IPC needs one machine");
      }
    }
    if (registered.landing().isEmpty()) {
      throw refused(req, TransportError.UNKNOWN_REGION, "reader executor " + reader
          + " has no device landing region in this executor's peer table");
    }
    RegionExport r = registered.landing().get();
    RegionDescriptor expected = r.descriptor();
    if (!expected.equals(claimed)) {
      String a = describe(claimed);
      String b = describe(expected);
      throw refused(req, TransportError.BAD_KEY, "landing region " + a + " is not the one reader executor " + reader
          + " registered (" + b + (a.equals(b) ? "; their keys differ" : "") + ")");
    }
    return new Imported(r);
  }

  /** A descriptor in a message: never its key. */
  private static String describe(RegionDescriptor d) {
    return "id " + d.id() + ", " + d.length() + " bytes on device " + d.deviceId();
  }

  private static TransportException refused(WriteRequest req, TransportError e, String why) {
    return new TransportException(e, "device write request " + req.requestId() + " (shuffle " + req.shuffleId()
        + "): " + why);
  }
}
