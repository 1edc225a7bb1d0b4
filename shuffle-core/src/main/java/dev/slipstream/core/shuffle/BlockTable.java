package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * The block table a holder writes after a write request's blocks, the same for every block writer
 * and landing memory. Little-endian: a {@value #HEADER}-byte header (the request id, the record
 * count, and {@link #MAGIC}), then a {@value #RECORD}-byte record per partition of each entry, in
 * order: the bytes that partition has from the entry's block offset on (0 for a partition wholly
 * before it; over an entry's partitions these add up to the bytes its block has from there, of
 * which the holder wrote at most the capacity), 8 bytes; the checksum of the partition's whole
 * block (the map task's, 0 without checksums), 4 bytes; and its rows where the writer counts them
 * (GPU batches; 0 otherwise), 4 bytes.
 *
 * <p>The header ties the table to one request: a reader trusts a landing only when the signal
 * counted what it should ({@link LandingSignal}) and the table at the request's offset names this
 * request, so a late write of an earlier request into a reused range cannot complete a later one.
 * Stateless.
 */
public final class BlockTable {
  public static final int HEADER = 16;
  public static final int RECORD = 16;
  /** "SLBT". */
  public static final int MAGIC = 0x54424C53;

  private BlockTable() {}

  /** One partition's record. */
  public record Record(long bytes, long checksum, long rows) {
    public Record {
      if (checksum < 0 || checksum > 0xFFFF_FFFFL || rows < 0 || rows > 0xFFFF_FFFFL) {
        throw new IllegalArgumentException("block table record: checksum " + checksum + " and rows " + rows
            + ", expected each in 0..2^32-1");
      }
    }
  }

  /** Bytes of the table for {@code records} partitions. */
  public static long bytes(int records) {
    return HEADER + (long) RECORD * records;
  }

  /** Puts the header of request {@code requestId}'s table of {@code records} records at {@code b}'s position. */
  public static ByteBuffer putHeader(ByteBuffer b, long requestId, int records) {
    return b.order(ByteOrder.LITTLE_ENDIAN).putLong(requestId).putInt(records).putInt(MAGIC);
  }

  /** Puts one record at {@code b}'s position. */
  public static ByteBuffer putRecord(ByteBuffer b, Record r) {
    return b.order(ByteOrder.LITTLE_ENDIAN).putLong(r.bytes()).putInt((int) r.checksum()).putInt((int) r.rows());
  }

  /** The whole table of request {@code requestId}. */
  public static byte[] encode(long requestId, List<Record> records) {
    ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(bytes(records.size())));
    putHeader(b, requestId, records.size());
    for (Record r : records) {
      putRecord(b, r);
    }
    return b.array();
  }

  /**
   * Checks that {@code table} (from its position, little-endian, at least {@link #bytes} long) was
   * written for request {@code requestId} with {@code records} records; throws
   * {@link TransportException} (MALFORMED) naming what it names otherwise.
   */
  public static void checkHeader(ByteBuffer table, long requestId, int records) throws TransportException {
    ByteBuffer t = table.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    if (t.remaining() < bytes(records)) {
      throw new TransportException(TransportError.MALFORMED, "block table of " + t.remaining() + " bytes, expected "
          + bytes(records));
    }
    long gotId = t.getLong();
    int count = t.getInt();
    int magic = t.getInt();
    if (magic != MAGIC || gotId != requestId || count != records) {
      throw new TransportException(TransportError.MALFORMED, "block table names request " + gotId + " with " + count
          + " records (magic 0x" + Integer.toHexString(magic) + "), expected request " + requestId + " with " + records
          + " records (magic 0x" + Integer.toHexString(MAGIC) + "): not written for this request");
    }
  }

  /** Record {@code i} of {@code table} (from its position; the header checked before). */
  public static Record record(ByteBuffer table, int i) {
    ByteBuffer t = table.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    int at = t.position() + HEADER + RECORD * i;
    return new Record(t.getLong(at), Integer.toUnsignedLong(t.getInt(at + 8)), Integer.toUnsignedLong(t.getInt(at + 12)));
  }
}
