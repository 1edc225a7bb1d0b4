package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.util.Arrays;

/**
 * {@link WriteRequest#check()}: whether a request may be served into its landing region at all,
 * decided before a single byte is written and by every block writer alike. What the map outputs
 * hold (does the block exist, is the range inside it) is the writer's check, made against its own
 * store. Stateless.
 */
final class WriteRequestChecks {
  private WriteRequestChecks() {}

  static void check(WriteRequest req) throws TransportException {
    RegionDescriptor landing = req.landing();
    boolean device = landing.kind() == MemoryKind.DEVICE;
    int[] widths = req.widths();
    if (device) {
      checkDeviceShape(req, widths);
    } else if (widths.length > 0) {
      throw malformed(req, widths.length + " payload widths for a " + landing.kind() + " landing region, expected"
          + " none (payload widths describe device batches)");
    }
    if (req.expectedPieces() > LandingSignal.MAX_PIECES) {
      throw malformed(req, req.expectedPieces() + " pieces of " + WriteRequest.CHUNK_BYTES + " bytes to signal,"
          + " expected at most " + LandingSignal.MAX_PIECES + " (the signal's piece count)");
    }
    if (req.totalCapacity() > LandingSignal.MAX_BYTES - req.tableBytes()) {
      throw malformed(req, req.totalCapacity() + " bytes of capacity and a table of " + req.tableBytes()
          + " bytes, expected at most " + LandingSignal.MAX_BYTES + " in all (the signal's byte count)");
    }
    long len = landing.length();
    long[][] ranges = new long[req.entries().size() + 2][];
    int i = 0;
    for (Entry e : req.entries()) {
      if (device && e.landingOffset() % WriteRequest.DEVICE_ALIGN != 0) {
        throw outOfRange(req, "landing offset " + e.landingOffset() + " of block (" + e.mapId() + ", "
            + e.partition() + ") is not " + WriteRequest.DEVICE_ALIGN + "-byte aligned, expected aligned offsets in"
            + " a device landing region");
      }
      ranges[i++] = range(req, "block (" + e.mapId() + ", " + e.partition() + ")", e.landingOffset(), e.capacity());
    }
    ranges[i++] = slot(req, "block table", req.tableOffset(), req.tableBytes());
    ranges[i] = slot(req, "signal", req.signalOffset(), 8);
    Arrays.sort(ranges, (a, b) -> Long.compare(a[0], b[0]));
    for (int k = 1; k < ranges.length; k++) {
      if (ranges[k][0] < ranges[k - 1][0] + ranges[k - 1][1]) {
        throw outOfRange(req, "landing ranges overlap: [" + ranges[k - 1][0] + ", " + (ranges[k - 1][0]
            + ranges[k - 1][1]) + ") and [" + ranges[k][0] + ", " + (ranges[k][0] + ranges[k][1])
            + "), expected disjoint ranges inside " + landing);
      }
    }
  }

  /** A device request: single-partition entries from offset 0, widths the batch layout knows. */
  private static void checkDeviceShape(WriteRequest req, int[] widths) throws TransportException {
    for (int w : widths) {
      if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
        throw malformed(req, "payload width " + w + ", expected 1, 2, 4, 8 or 16");
      }
    }
    for (Entry e : req.entries()) {
      if (e.partitions() != 1 || e.blockOffset() != 0) {
        throw malformed(req, "entry for partitions [" + e.partition() + ", " + e.endPartition() + ") from block offset "
            + e.blockOffset() + " into a device landing region, expected one partition from offset 0");
      }
    }
  }

  /** An 8-byte aligned range inside the landing region. */
  private static long[] slot(WriteRequest req, String what, long offset, long length) throws TransportException {
    if ((offset & 7) != 0) {
      throw outOfRange(req, what + " at offset " + offset + " is not 8-byte aligned, expected an aligned slot inside "
          + req.landing());
    }
    return range(req, what, offset, length);
  }

  private static long[] range(WriteRequest req, String what, long offset, long length) throws TransportException {
    long regionLength = req.landing().length();
    if (offset < 0 || length < 0 || offset > regionLength || length > regionLength - offset) {
      throw outOfRange(req, what + ": offset " + offset + " + length " + length + " outside " + req.landing()
          + ", expected a range inside it");
    }
    return new long[] {offset, length};
  }

  private static TransportException outOfRange(WriteRequest req, String what) {
    return new TransportException(TransportError.OUT_OF_RANGE, "write request " + req.requestId() + " (shuffle "
        + req.shuffleId() + "): " + what);
  }

  private static TransportException malformed(WriteRequest req, String what) {
    return new TransportException(TransportError.MALFORMED, "write request " + req.requestId() + " (shuffle "
        + req.shuffleId() + "): " + what);
  }
}
