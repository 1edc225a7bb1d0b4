package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The block table a holder pushes after a device write request's blocks, and the reader's checks of
 * it. Little-endian: a {@value #HEADER}-byte header (the request id, the entry count, and
 * {@link #MAGIC}), then per entry {@value #ENTRY} bytes (the block's bytes and rows).
 *
 * <p>The header ties the table to one request: the reader trusts a landing only when the signal at
 * the request's offset counted every piece and byte, and the table at the request's offset names
 * this request. A late push of an earlier request whose range was reused cannot complete this one
 * (docs/gpu.md, "Landing ranges belong to one request"). Stateless.
 */
public final class BlockTable {
  public static final int HEADER = 16;
  public static final int ENTRY = 16;
  /** "SLBT". */
  public static final int MAGIC = 0x54424C53;

  private BlockTable() {}

  /** Bytes of the table for {@code entries} blocks. */
  public static long bytes(int entries) {
    return HEADER + (long) ENTRY * entries;
  }

  /** One landed block as the holder reported it. */
  public record Landed(long bytes, long rows) {}

  /** The table the holder writes for request {@code requestId}: {@code blocks[i]} = (bytes, rows). */
  public static byte[] encode(long requestId, List<Landed> blocks) {
    ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(bytes(blocks.size()))).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(requestId).putInt(blocks.size()).putInt(MAGIC);
    for (Landed l : blocks) {
      b.putLong(l.bytes()).putLong(l.rows());
    }
    return b.array();
  }

  /**
   * Checks what landed for {@code req}: the signal ({@code signal}: pieces above 40 bits, bytes
   * below) counted every piece and exactly the bytes the table reports; the table (at
   * {@code table}'s position, little-endian) was written for this request; each block's bytes are
   * in {@code [0, capacity]}, its rows in {@code [0, 2^32)} and packed within its bytes; and no two
   * blocks overlap each other, the table or the signal. Returns the blocks in request order; throws
   * {@link TransportException} (MALFORMED) naming what was got and what was expected.
   */
  public static List<Landed> check(WriteRequest req, long signal, ByteBuffer table) throws TransportException {
    long id = req.requestId();
    long pieces = signal >>> 40;
    if (pieces != req.expectedPieces()) {
      throw malformed(id, "signal counted " + pieces + " pieces, expected " + req.expectedPieces());
    }
    List<ShuffleMessages.Entry> entries = req.entries();
    ByteBuffer t = table.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    if (t.remaining() < bytes(entries.size())) {
      throw malformed(id, "block table of " + t.remaining() + " bytes, expected " + bytes(entries.size()));
    }
    long gotId = t.getLong();
    int count = t.getInt();
    int magic = t.getInt();
    if (magic != MAGIC || gotId != id || count != entries.size()) {
      throw malformed(id, "block table names request " + gotId + " with " + count + " entries (magic 0x"
          + Integer.toHexString(magic) + "), expected request " + id + " with " + entries.size() + " entries (magic 0x"
          + Integer.toHexString(MAGIC) + "): not written for this request");
    }
    int[] widths = req.widths();
    List<Landed> out = new ArrayList<>(entries.size());
    long total = 0;
    long[][] ranges = new long[entries.size() + 2][];
    int i = 0;
    for (ShuffleMessages.Entry e : entries) {
      long bytes = t.getLong();
      long rows = t.getLong();
      String block = "block (" + e.mapId() + ", " + e.partition() + ")";
      if (bytes < 0 || bytes > e.capacity()) {
        throw malformed(id, block + " reported " + bytes + " bytes, expected 0.." + e.capacity() + " (its capacity)");
      }
      if (rows < 0 || rows >= (1L << 32)) {
        throw malformed(id, block + " reported " + rows + " rows, expected 0..2^32-1");
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
    ranges[i++] = new long[] {req.tableOffset(), bytes(entries.size())};
    ranges[i] = new long[] {req.signalOffset(), 8};
    Arrays.sort(ranges, (a, b) -> Long.compare(a[0], b[0]));
    for (int k = 1; k < ranges.length; k++) {
      if (ranges[k][0] < ranges[k - 1][0] + ranges[k - 1][1]) {
        throw malformed(id, "landed ranges overlap: [" + ranges[k - 1][0] + ", " + (ranges[k - 1][0] + ranges[k - 1][1])
            + ") and [" + ranges[k][0] + ", " + (ranges[k][0] + ranges[k][1]) + "), expected disjoint ranges");
      }
    }
    long signalled = signal & ((1L << 40) - 1);
    long expected = total + bytes(entries.size());
    if (signalled != expected) {
      throw malformed(id, "signal counted " + signalled + " bytes, expected " + expected + " (the table's " + total
          + " block bytes and its own " + bytes(entries.size()) + ")");
    }
    return out;
  }

  private static TransportException malformed(long requestId, String what) {
    return new TransportException(TransportError.MALFORMED, "device write request " + requestId + ": " + what);
  }
}
