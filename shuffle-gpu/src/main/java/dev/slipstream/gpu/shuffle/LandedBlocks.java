package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.LandingSignal;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What landed in a device landing region for one write request, as the GPU reader checks it from
 * the request's {@link LandingSignal} and {@link BlockTable} (the protocol's, the same as the host
 * path's). A device request's entries are single partitions, so the table has a record per block:
 * its bytes and its rows. Stateless.
 *
 * <p>The reader trusts a landing only when the signal counted every piece and byte and the table
 * names this request: a late push of an earlier request whose range was reused cannot complete
 * this one (docs/gpu.md, "Landing ranges belong to one request").
 */
public final class LandedBlocks {
  private LandedBlocks() {}

  /** One landed block as the holder reported it. */
  public record Landed(long bytes, long rows) {}

  /** The table a holder writes for request {@code requestId}: {@code blocks[i]} = (bytes, rows), no checksums. */
  public static byte[] encode(long requestId, List<Landed> blocks) {
    List<BlockTable.Record> records = new ArrayList<>(blocks.size());
    for (Landed l : blocks) {
      records.add(new BlockTable.Record(l.bytes(), 0, l.rows()));
    }
    return BlockTable.encode(requestId, records);
  }

  /**
   * Checks what landed for {@code req}: the signal counted every piece and exactly the bytes the
   * table reports plus the table's own; the table (at {@code table}'s position) was written for this
   * request; each block's bytes are in {@code [0, capacity]} and its rows packed within them; and no
   * two blocks overlap each other, the table or the signal. Returns the blocks in request order;
   * throws {@link TransportException} (MALFORMED) naming what was got and what was expected.
   */
  public static List<Landed> check(WriteRequest req, long signal, ByteBuffer table) throws TransportException {
    long id = req.requestId();
    long pieces = LandingSignal.pieces(signal);
    if (pieces != req.expectedPieces()) {
      throw malformed(id, "signal counted " + pieces + " pieces, expected " + req.expectedPieces());
    }
    List<ShuffleMessages.Entry> entries = req.entries();
    try {
      BlockTable.checkHeader(table, id, entries.size());
    } catch (TransportException e) {
      throw malformed(id, e.detail());
    }
    int[] widths = req.widths();
    List<Landed> out = new ArrayList<>(entries.size());
    long total = 0;
    long[][] ranges = new long[entries.size() + 2][];
    int i = 0;
    for (ShuffleMessages.Entry e : entries) {
      BlockTable.Record r = BlockTable.record(table, i);
      long bytes = r.bytes();
      long rows = r.rows();
      String block = "block (" + e.mapId() + ", " + e.partition() + ")";
      if (bytes < 0 || bytes > e.capacity()) {
        throw malformed(id, block + " reported " + bytes + " bytes, expected 0.." + e.capacity() + " (its capacity)");
      }
      long packed = BatchLayout.packedBytes(rows, widths);
      if (packed > bytes) {
        throw malformed(id, block + " reported " + rows + " rows in " + bytes + " bytes, expected at least " + packed
            + " bytes for them (widths " + Arrays.toString(widths) + ")");
      }
      ranges[i++] = new long[] {e.landingOffset(), bytes};
      total += bytes;
      out.add(new Landed(bytes, rows));
    }
    long tableBytes = BlockTable.bytes(entries.size());
    ranges[i++] = new long[] {req.tableOffset(), tableBytes};
    ranges[i] = new long[] {req.signalOffset(), 8};
    Arrays.sort(ranges, (a, b) -> Long.compare(a[0], b[0]));
    for (int k = 1; k < ranges.length; k++) {
      if (ranges[k][0] < ranges[k - 1][0] + ranges[k - 1][1]) {
        throw malformed(id, "landed ranges overlap: [" + ranges[k - 1][0] + ", " + (ranges[k - 1][0] + ranges[k - 1][1])
            + ") and [" + ranges[k][0] + ", " + (ranges[k][0] + ranges[k][1]) + "), expected disjoint ranges");
      }
    }
    long signalled = LandingSignal.bytes(signal);
    if (signalled != total + tableBytes) {
      throw malformed(id, "signal counted " + signalled + " bytes, expected " + (total + tableBytes) + " (the table's "
          + total + " block bytes and its own " + tableBytes + ")");
    }
    return out;
  }

  private static TransportException malformed(long requestId, String what) {
    return new TransportException(TransportError.MALFORMED, "device write request " + requestId + ": " + what);
  }
}
