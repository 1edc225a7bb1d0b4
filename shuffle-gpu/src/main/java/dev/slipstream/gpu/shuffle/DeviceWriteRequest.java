package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The pull-driven write request of the GPU path (docs/architecture.md, "One shuffle", step 4, with
 * a device landing region): the reader asks a holder to push blocks {@code (mapAttemptId,
 * partition)} of shuffle {@code shuffleId}, each into at most {@code capacity} bytes at
 * {@code landingOffset} of the reader's device landing region (imported by the holder through CUDA
 * IPC from {@code landing}), then a {@link #TABLE_ENTRY}-byte record per entry at
 * {@code tableOffset} (the block's bytes and rows, 8-byte little-endian each), then to add to the
 * signal word at {@code signalOffset}: once the signal's block count reaches
 * {@link #expectedBlocks()}, every byte has landed. The holder pushes each block as
 * {@link #chunks(long) chunks(capacity)} pieces of at most {@link #CHUNK_BYTES} (those past the
 * block's real bytes empty), spread over many CUDA blocks, and each piece counts one in the signal;
 * the table counts one. {@code widths} are the payload column widths the reader expects; the
 * holder refuses a map output of another shape.
 *
 * <p>{@code reader} is the executor the request is for: a holder pushes only into the landing
 * region that executor registered in the driver's peer table, never into one a request merely
 * carries ({@link PeerLandings}). {@code budgetMillis} is the time left until the reader gives the
 * request up, as a remaining-time budget (the two processes' clocks are never compared): a holder
 * that has not launched the push within it drops the request.
 *
 * <p>Immutable. {@link #decode} checks every field; {@link #check()} checks every range against
 * the landing region, so a holder never writes outside it.
 */
public record DeviceWriteRequest(long requestId, int shuffleId, RegionDescriptor landing, long tableOffset,
    long signalOffset, int[] widths, List<Entry> entries, String reader, long budgetMillis) {
  public static final byte TYPE = 48;
  /** The longest budget a request may carry (a day). */
  public static final long MAX_BUDGET_MILLIS = 24L * 3600 * 1000;
  static final int MAX_READER_ID = 64;
  public static final int MAX_ENTRIES = 1 << 16;
  public static final int TABLE_ENTRY = BlockTable.ENTRY;
  /** Landing offsets are 16-byte aligned: the partition kernel's sections are. */
  public static final int ALIGN = 16;
  /** The piece of a block one push queue sends at a time (a protocol constant: both sides count by it). */
  public static final long CHUNK_BYTES = 1L << 20;
  /** The signal's block count has 24 bits (SLIP_SIGNAL_BYTES_BITS = 40 of 64). */
  static final long MAX_SIGNAL_BLOCKS = (1L << 24) - 1;

  /** Pieces a block of {@code capacity} bytes is pushed in: at least one. */
  public static long chunks(long capacity) {
    return Math.max(1, (capacity + CHUNK_BYTES - 1) / CHUNK_BYTES);
  }

  /** The block count the signal reaches once everything landed: every entry's chunks plus the table. */
  public long expectedBlocks() {
    long n = 1;
    for (Entry e : entries) {
      n += chunks(e.capacity());
    }
    return n;
  }

  /** One block to push: its bytes go to {@code [landingOffset, landingOffset + capacity)}. */
  public record Entry(long mapAttemptId, int partition, long landingOffset, long capacity) {}

  public DeviceWriteRequest {
    widths = widths.clone();
    entries = List.copyOf(entries);
    reader = reader == null ? "" : reader;
  }

  /** A request for no named reader, with the longest budget (tests and benchmarks in one process). */
  public DeviceWriteRequest(long requestId, int shuffleId, RegionDescriptor landing, long tableOffset,
      long signalOffset, int[] widths, List<Entry> entries) {
    this(requestId, shuffleId, landing, tableOffset, signalOffset, widths, entries, "", MAX_BUDGET_MILLIS);
  }

  /** This request from executor {@code readerId}, to be given up {@code millis} from now. */
  public DeviceWriteRequest from(String readerId, long millis) {
    return new DeviceWriteRequest(requestId, shuffleId, landing, tableOffset, signalOffset, widths, entries, readerId,
        millis);
  }

  @Override
  public int[] widths() {
    return widths.clone();
  }

  /**
   * Checks the request against its landing region: a device region; entries, table and signal
   * inside it, aligned, and not overlapping one another. Throws {@link TransportException}
   * (MALFORMED) naming what was got and what was expected.
   */
  public DeviceWriteRequest check() throws TransportException {
    if (landing.kind() != MemoryKind.DEVICE) {
      throw malformed("landing region " + Integer.toUnsignedString(landing.id()) + " is " + landing.kind()
          + " memory, expected DEVICE");
    }
    if (reader.length() > MAX_READER_ID) {
      throw malformed("reader id of " + reader.length() + " characters, expected at most " + MAX_READER_ID);
    }
    if (budgetMillis < 0 || budgetMillis > MAX_BUDGET_MILLIS) {
      throw malformed("budget " + budgetMillis + " ms, expected 0.." + MAX_BUDGET_MILLIS);
    }
    if (entries.isEmpty() || entries.size() > MAX_ENTRIES) {
      throw malformed(entries.size() + " entries, expected 1.." + MAX_ENTRIES);
    }
    if (expectedBlocks() > MAX_SIGNAL_BLOCKS) {
      throw malformed(expectedBlocks() + " pieces of " + CHUNK_BYTES + " bytes to signal, expected at most "
          + MAX_SIGNAL_BLOCKS + " (the signal's block count)");
    }
    if (widths.length > BatchLayout.MAX_COLUMNS) {
      throw malformed(widths.length + " payload widths, expected at most " + BatchLayout.MAX_COLUMNS);
    }
    for (int w : widths) {
      if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
        throw malformed("payload width " + w + ", expected 1, 2, 4, 8 or 16");
      }
    }
    long len = landing.length();
    long[][] ranges = new long[entries.size() + 2][];
    int i = 0;
    for (Entry e : entries) {
      if (e.partition() < 0) {
        throw malformed("partition " + e.partition() + ", expected >= 0");
      }
      if (e.landingOffset() % ALIGN != 0) {
        throw malformed("landing offset " + e.landingOffset() + " not " + ALIGN + "-byte aligned");
      }
      ranges[i++] = range("block (" + e.mapAttemptId() + ", " + e.partition() + ")", e.landingOffset(), e.capacity(), len);
    }
    if (signalOffset % 8 != 0) {
      throw malformed("signal offset " + signalOffset + " not 8-byte aligned");
    }
    if (tableOffset % 8 != 0) {
      throw malformed("table offset " + tableOffset + " not 8-byte aligned");
    }
    ranges[i++] = range("block table", tableOffset, BlockTable.bytes(entries.size()), len);
    ranges[i] = range("signal", signalOffset, 8, len);
    Arrays.sort(ranges, (a, b) -> Long.compare(a[0], b[0]));
    for (int k = 1; k < ranges.length; k++) {
      if (ranges[k][0] < ranges[k - 1][0] + ranges[k - 1][1]) {
        throw malformed("landing ranges overlap: [" + ranges[k - 1][0] + ", " + (ranges[k - 1][0] + ranges[k - 1][1])
            + ") and [" + ranges[k][0] + ", " + (ranges[k][0] + ranges[k][1]) + ")");
      }
    }
    return this;
  }

  private long[] range(String what, long offset, long length, long regionLength) throws TransportException {
    if (offset < 0 || length < 0 || offset > regionLength || length > regionLength - offset) {
      throw malformed(what + ": offset " + offset + " + length " + length + " outside landing region "
          + Integer.toUnsignedString(landing.id()) + " (length " + regionLength + ")");
    }
    return new long[] {offset, length};
  }

  private static TransportException malformed(String msg) {
    return new TransportException(TransportError.MALFORMED, "device write request: " + msg);
  }

  public byte[] encode() {
    WireWriter w = new WireWriter(96 + reader.length() * 4 + RegionDescriptor.BYTES + entries.size() * 28);
    w.putHeader(TYPE).putLong(requestId).putInt(shuffleId).putString(reader).putLong(budgetMillis)
        .putBytes(landing.encode()).putLong(tableOffset).putLong(signalOffset).putInt(widths.length);
    for (int x : widths) {
      w.putInt(x);
    }
    w.putInt(entries.size());
    for (Entry e : entries) {
      w.putLong(e.mapAttemptId()).putInt(e.partition()).putLong(e.landingOffset()).putLong(e.capacity());
    }
    return w.toByteArray();
  }

  /** Decodes and {@link #check() checks} a request. */
  public static DeviceWriteRequest decode(byte[] bytes) throws TransportException {
    WireReader r = new WireReader(bytes);
    r.expectHeader(TYPE, "device write request");
    long id = r.getLong("request id");
    int shuffleId = r.getInt("shuffle id", 0, Integer.MAX_VALUE);
    String reader = r.getString("reader id", MAX_READER_ID * 4);
    long budget = r.getLong("budget");
    RegionDescriptor landing;
    try {
      landing = RegionDescriptor.decode(r.getBytes("landing descriptor", RegionDescriptor.BYTES));
    } catch (IllegalArgumentException e) {
      throw malformed(e.getMessage());
    }
    long table = r.getLong("table offset");
    long signal = r.getLong("signal offset");
    int nw = r.getInt("payload width count", 0, BatchLayout.MAX_COLUMNS);
    int[] widths = new int[nw];
    for (int i = 0; i < nw; i++) {
      widths[i] = r.getInt("payload width");
    }
    int n = r.getInt("entry count", 1, MAX_ENTRIES);
    if (r.remaining() != n * 28) {
      throw malformed(r.remaining() + " bytes for " + n + " entries, expected " + (n * 28));
    }
    List<Entry> entries = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      entries.add(new Entry(r.getLong("map attempt id"), r.getInt("partition"), r.getLong("landing offset"),
          r.getLong("capacity")));
    }
    r.expectEnd("device write request");
    return new DeviceWriteRequest(id, shuffleId, landing, table, signal, widths, entries, reader, budget).check();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof DeviceWriteRequest q && requestId == q.requestId && shuffleId == q.shuffleId
        && landing.equals(q.landing) && tableOffset == q.tableOffset && signalOffset == q.signalOffset
        && Arrays.equals(widths, q.widths) && entries.equals(q.entries) && reader.equals(q.reader)
        && budgetMillis == q.budgetMillis;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(requestId) * 31 + entries.hashCode();
  }
}
