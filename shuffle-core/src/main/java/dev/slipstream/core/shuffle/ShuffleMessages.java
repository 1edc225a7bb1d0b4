package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;

/**
 * Control messages of the pull-driven write protocol, sent two-sided on a transport queue.
 * Each starts with the wire header (magic, version, type id).
 */
public final class ShuffleMessages {
  public static final byte TYPE_WRITE_REQUEST = 16;
  public static final byte TYPE_WRITE_RESULT = 17;
  public static final int MAX_ENTRIES = 1 << 16;
  public static final int MAX_REASON = 8 * 1024;
  /** Encoded bytes of one write request entry. */
  private static final int ENCODED_ENTRY = 40;
  /** Most block-table records (partitions over all entries) one write request may ask for. */
  public static final int MAX_TABLE_RECORDS = 1 << 16;
  /** Most payload column widths a request into device memory may name. */
  public static final int MAX_WIDTHS = 8;

  private ShuffleMessages() {}

  /** Common supertype of decoded messages. */
  public sealed interface Message permits WriteRequest, WriteResult {}

  /**
   * One piece of a block to write into the landing region: the bytes of partitions
   * {@code [partition, endPartition)} of map output {@code mapId}, taken as one run (they are
   * adjacent in the map output), from {@code blockOffset} into that run on, at most
   * {@code capacity} of them, placed at {@code landingOffset}. One partition is a single block, more
   * a batch block. (Map statuses carry approximate sizes, so the reader reserves capacity and the
   * holder reports how many bytes the block really has.)
   */
  public record Entry(long mapId, int partition, int endPartition, long blockOffset, long capacity,
                      long landingOffset) {
    /** A piece of the single block of {@code partition}. */
    public Entry(long mapId, int partition, long blockOffset, long capacity, long landingOffset) {
      this(mapId, partition, partition + 1, blockOffset, capacity, landingOffset);
    }

    /** Partitions covered, which is the number of block-table records this entry gets. */
    public int partitions() {
      return endPartition - partition;
    }
  }

  /**
   * The reader asks the holder to write {@code entries} of shuffle {@code shuffleId} into the
   * request's own landing region {@code landing} (offsets are relative to it), then the
   * {@link BlockTable} at {@code tableOffset} (a record per partition of each entry: a batch
   * entry's checksums are per partition, so the reader verifies each partition's bytes against the
   * checksum its map task computed), then to add to the {@link LandingSignal} at
   * {@code signalOffset}, after all of it: each block counts as its {@link #chunks(long) pieces}
   * of {@link #CHUNK_BYTES} (a push spreads them over many CUDA blocks) and the table as one, so the
   * reader has every byte once the count reaches {@link #expectedPieces()}. That layout is the same
   * for every landing memory. Into {@link MemoryKind#DEVICE} memory (a GPU shuffle) entries are
   * single partitions from offset 0 at {@value #DEVICE_ALIGN}-byte aligned offsets, and
   * {@code widths} are the payload column widths the reader expects: the holder refuses a map
   * output of another shape.
   *
   * <p>{@code reader} names the application and executor asking: the holder serves only its own
   * application and writes only to the endpoint its peer table holds for that executor (and, for
   * a device landing region, only into the region that executor registered).
   * {@code budgetMillis} is the time the reader will still wait when it sends the request (a
   * duration, not a clock reading, so the two hosts' clocks need not agree): the holder drops the
   * request once that much time has passed since it arrived. A holder answers a request it cannot
   * serve with a {@link WriteResult} naming the error; with {@link #ANSWER_SERVED} in
   * {@code flags} it answers a served one too, once nothing more will be written for it.
   *
   * <p>Immutable. {@link #decode} checks every field; {@link #check()} every range.
   */
  public record WriteRequest(long requestId, int shuffleId, NodeIdentity reader, long budgetMillis,
                             RegionDescriptor landing, long tableOffset, long signalOffset, List<Entry> entries,
                             int[] widths, int flags) implements Message {
    /** Flag: answer this request when it was served too, not only when it failed. */
    public static final int ANSWER_SERVED = 1;
    /** Landing offsets of a device landing region are 16-byte aligned (the partition kernel's sections are). */
    public static final int DEVICE_ALIGN = 16;
    /** The piece of a block one push queue sends at a time (a protocol constant: both sides count by it). */
    public static final long CHUNK_BYTES = 1L << 20;

    public WriteRequest {
      entries = List.copyOf(entries);
      widths = widths.clone();
    }

    /** A host request: no payload widths, answered only when it fails. */
    public WriteRequest(long requestId, int shuffleId, NodeIdentity reader, long budgetMillis, RegionDescriptor landing,
                        long tableOffset, long signalOffset, List<Entry> entries) {
      this(requestId, shuffleId, reader, budgetMillis, landing, tableOffset, signalOffset, entries, new int[0], 0);
    }

    @Override
    public int[] widths() {
      return widths.clone();
    }

    /** This request from {@code who}, to be given up {@code millis} after it arrives. */
    public WriteRequest from(NodeIdentity who, long millis) {
      return new WriteRequest(requestId, shuffleId, who, millis, landing, tableOffset, signalOffset, entries, widths,
          flags);
    }

    /**
     * This request into the same landing offsets of region {@code d}: the reader's landing as
     * another mechanism names it (its NIC registration instead of its CUDA IPC export).
     */
    public WriteRequest onLanding(RegionDescriptor d) {
      return new WriteRequest(requestId, shuffleId, reader, budgetMillis, d, tableOffset, signalOffset, entries, widths,
          flags);
    }

    /** Whether the holder answers this request when it was served. */
    public boolean answerServed() {
      return (flags & ANSWER_SERVED) != 0;
    }

    /** Block-table records the holder writes: one per partition of each entry. */
    public int tableRecords() {
      int n = 0;
      for (Entry e : entries) {
        n += e.partitions();
      }
      return n;
    }

    /** Bytes of the block table the holder writes at {@link #tableOffset()}. */
    public long tableBytes() {
      return BlockTable.bytes(tableRecords());
    }

    public long totalCapacity() {
      long t = 0;
      for (Entry e : entries) {
        t += e.capacity();
      }
      return t;
    }

    /** Pieces a block of {@code capacity} bytes counts as in the signal: at least one. */
    public static long chunks(long capacity) {
      return Math.max(1, (capacity + CHUNK_BYTES - 1) / CHUNK_BYTES);
    }

    /** The piece count the signal reaches once everything landed: every entry's pieces and the table. */
    public long expectedPieces() {
      return expectedPieces(entries);
    }

    /** {@link #expectedPieces()} of a request of {@code entries}. */
    public static long expectedPieces(List<Entry> entries) {
      long n = 1;
      for (Entry e : entries) {
        n += chunks(e.capacity());
      }
      return n;
    }

    /**
     * Checks the request against its landing region before anything is written: the entries, the
     * table and the signal inside it, aligned and disjoint, and what the signal will count within
     * its bounds; for a device region also the entries' shape and the payload widths. Throws {@link TransportException}
     * naming what was got and what was expected: OUT_OF_RANGE for a range, MALFORMED otherwise.
     */
    public WriteRequest check() throws TransportException {
      WriteRequestChecks.check(this);
      return this;
    }

    public ByteBuffer encode() {
      WireWriter w = new WireWriter(96 + 3 * (reader.applicationId().length() + reader.executorId().length())
          + RegionDescriptor.ENCODED_LENGTH + entries.size() * ENCODED_ENTRY + 4 * widths.length);
      w.putHeader(TYPE_WRITE_REQUEST).putLong(requestId).putInt(shuffleId)
          .putString(reader.applicationId()).putString(reader.executorId()).putLong(budgetMillis).putInt(flags);
      landing.encode(w);
      w.putLong(tableOffset).putLong(signalOffset).putInt(widths.length);
      for (int x : widths) {
        w.putInt(x);
      }
      w.putInt(entries.size());
      for (Entry e : entries) {
        w.putLong(e.mapId()).putInt(e.partition()).putInt(e.endPartition()).putLong(e.blockOffset())
            .putLong(e.capacity()).putLong(e.landingOffset());
      }
      return w.toByteBuffer();
    }

    /** {@link #encode()} as an array. */
    public byte[] toBytes() {
      ByteBuffer b = encode();
      byte[] out = new byte[b.remaining()];
      b.get(out);
      return out;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof WriteRequest q && requestId == q.requestId && shuffleId == q.shuffleId
          && reader.equals(q.reader) && budgetMillis == q.budgetMillis && landing.equals(q.landing)
          && tableOffset == q.tableOffset && signalOffset == q.signalOffset && entries.equals(q.entries)
          && Arrays.equals(widths, q.widths) && flags == q.flags;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(requestId) * 31 + entries.hashCode();
    }

    @Override
    public String toString() {
      return "write request " + requestId + " (shuffle " + shuffleId + ", " + entries.size() + " entries into "
          + landing + ")";
    }
  }

  /**
   * The holder's answer to write request {@code requestId}: {@code error} null when it was served
   * ({@code bytes} block bytes written; sent only for requests that ask, {@link WriteRequest#ANSWER_SERVED}),
   * else the error and the reason, nothing more being written for it. {@code timeline} says when the
   * holder served it ({@link ServeTimeline#NONE} where it was not measured).
   */
  public record WriteResult(long requestId, TransportError error, long bytes, String reason, ServeTimeline timeline)
      implements Message {
    public WriteResult {
      reason = reason == null ? "" : reason;
      timeline = timeline == null ? ServeTimeline.NONE : timeline;
    }

    /** A failure: nothing more will be written for the request. */
    public static WriteResult failed(long requestId, TransportError error, String reason) {
      return new WriteResult(requestId, error, 0, reason, ServeTimeline.NONE);
    }

    public boolean served() {
      return error == null;
    }

    /** The same result with {@code answered} set in its timeline. */
    public WriteResult answeredAt(long nanos) {
      return new WriteResult(requestId, error, bytes, reason, timeline.answeredAt(nanos));
    }

    public ByteBuffer encode() {
      String r = reason.length() > MAX_REASON / 4 ? reason.substring(0, MAX_REASON / 4) : reason;
      WireWriter w = new WireWriter(96 + r.length() * 3);
      w.putHeader(TYPE_WRITE_RESULT).putLong(requestId).putInt(error == null ? 0 : error.code()).putLong(bytes)
          .putString(r);
      timeline.write(w);
      return w.toByteBuffer();
    }
  }

  /** Decodes a message; every field is checked before use. */
  public static Message decode(ByteBuffer buf) throws TransportException {
    WireReader r = new WireReader(buf);
    byte type = r.readHeader("shuffle message");
    switch (type) {
      case TYPE_WRITE_REQUEST -> {
        return decodeRequest(r);
      }
      case TYPE_WRITE_RESULT -> {
        long id = r.getLong("request id");
        int code = r.getInt("error code");
        long bytes = r.getLong("bytes written");
        if (bytes < 0 || code != 0 && bytes != 0) {
          throw new TransportException(TransportError.MALFORMED, "write result of request " + id + ": " + bytes
              + " bytes written with error code " + code + ", expected >= 0, and 0 with an error");
        }
        String reason = r.getString("failure reason", MAX_REASON);
        ServeTimeline timeline = ServeTimeline.read(r);
        r.expectEnd("write result");
        return new WriteResult(id, code == 0 ? null : TransportError.fromCode(code), bytes, reason, timeline);
      }
      default -> throw new TransportException(TransportError.UNKNOWN_TYPE,
          "shuffle message: got type id " + type + ", expected " + TYPE_WRITE_REQUEST + " (write request) or "
              + TYPE_WRITE_RESULT + " (write result)");
    }
  }

  /** Decodes a standalone {@link WriteRequest#encode()} (as a request ring carries it). */
  public static WriteRequest decodeRequest(byte[] bytes) throws TransportException {
    WireReader r = new WireReader(bytes);
    r.expectHeader(TYPE_WRITE_REQUEST, "write request");
    return decodeRequest(r);
  }

  private static WriteRequest decodeRequest(WireReader r) throws TransportException {
    long id = r.getLong("request id");
    int shuffleId = r.getInt("shuffle id");
    String app = r.getString("application id", 4 * NodeIdentity.MAX_ID);
    String executor = r.getString("reader executor id", 4 * NodeIdentity.MAX_ID);
    if (app.length() > NodeIdentity.MAX_ID || executor.length() > NodeIdentity.MAX_ID) {
      throw new TransportException(TransportError.MALFORMED, "write request " + id + ": application id of "
          + app.length() + " and executor id of " + executor.length() + " characters, expected at most "
          + NodeIdentity.MAX_ID + " each");
    }
    long budget = r.getLong("time budget");
    if (budget < 0) {
      throw new TransportException(TransportError.MALFORMED, "write request " + id + ": time budget " + budget
          + " ms, expected >= 0");
    }
    int flags = r.getInt("flags");
    if ((flags & ~WriteRequest.ANSWER_SERVED) != 0) {
      throw new TransportException(TransportError.MALFORMED, "write request " + id + ": flags 0x"
          + Integer.toHexString(flags) + ", expected only 0x" + Integer.toHexString(WriteRequest.ANSWER_SERVED)
          + " (answer when served)");
    }
    RegionDescriptor landing = RegionDescriptor.decode(r);
    long tableOffset = r.getLong("table offset");
    long signalOffset = r.getLong("signal offset");
    int nw = r.getInt("payload width count", 0, MAX_WIDTHS);
    int[] widths = new int[nw];
    for (int i = 0; i < nw; i++) {
      widths[i] = r.getInt("payload width");
    }
    int n = r.getInt("entry count", 1, MAX_ENTRIES);
    if (r.remaining() < (long) n * ENCODED_ENTRY) {
      throw new TransportException(TransportError.MALFORMED, "truncated write request: " + n + " entries need "
          + (n * (long) ENCODED_ENTRY) + " bytes, have " + r.remaining());
    }
    Entry[] entries = new Entry[n];
    long records = 0;
    for (int i = 0; i < n; i++) {
      long mapId = r.getLong("map id");
      int partition = r.getInt("partition");
      int endPartition = r.getInt("end partition");
      long blockOffset = r.getLong("block offset");
      long capacity = r.getLong("capacity");
      long landingOffset = r.getLong("landing offset");
      if (partition < 0 || endPartition <= partition || blockOffset < 0 || capacity <= 0 || landingOffset < 0) {
        throw new TransportException(TransportError.MALFORMED, "write request entry " + i + ": partitions ["
            + partition + ", " + endPartition + "), block offset " + blockOffset + ", capacity " + capacity
            + ", landing offset " + landingOffset + "; expected 0 <= partition < end partition, offsets >= 0"
            + " and capacity > 0");
      }
      records += (long) endPartition - partition;
      if (records > MAX_TABLE_RECORDS) {
        throw new TransportException(TransportError.MALFORMED, "write request " + id + ": entries up to " + i
            + " cover " + records + " partitions, expected at most " + MAX_TABLE_RECORDS + " in one request");
      }
      entries[i] = new Entry(mapId, partition, endPartition, blockOffset, capacity, landingOffset);
    }
    r.expectEnd("write request");
    return new WriteRequest(id, shuffleId, new NodeIdentity(app, executor), budget, landing, tableOffset,
        signalOffset, List.of(entries), widths, flags);
  }
}
