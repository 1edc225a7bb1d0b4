package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * The {@link BlockTable} a holder wrote after a request's blocks, as the host reader reads it: the
 * header must name the request, and per partition of each block, in entry order, a record holds
 * the bytes the partition has from the entry's block offset on and the checksum of the whole
 * partition; the bytes the signal counted must be the bytes those records say were written (at
 * most each block's capacity) plus the table's own. Immutable once read.
 */
record BlockTableRecords(long[] available, long[][] lengths, long[][] expected) {

  /**
   * Reads the table at {@code tableOffset} of {@code range} for {@code blocks} of request
   * {@code requestId}, whose signal completed at {@code signalled}; throws naming the block and the
   * holder when the table names another request, a length is negative, a block's would overflow,
   * or the signal's bytes disagree with it.
   */
  static BlockTableRecords read(LandingPool.Range range, long tableOffset, List<BlockFetcher.RemoteBlock> blocks,
      BlockFetcher.HolderPlan holder, long requestId, long signalled) throws BlockFetchException {
    int n = blocks.size();
    int records = 0;
    for (BlockFetcher.RemoteBlock b : blocks) {
      records += b.id().partitions();
    }
    ByteBuffer table = header(range, tableOffset, records, blocks.get(0), holder, requestId);
    long[] available = new long[n];
    long[][] lengths = new long[n][];
    long[][] expected = new long[n][];
    long written = 0;
    int record = 0;
    for (int i = 0; i < n; i++) {
      BlockFetcher.RemoteBlock b = blocks.get(i);
      int k = b.id().partitions();
      lengths[i] = new long[k];
      expected[i] = new long[k];
      for (int j = 0; j < k; j++, record++) {
        BlockTable.Record r = BlockTable.record(table, record);
        long len = r.bytes();
        expected[i][j] = r.checksum();
        if (len < 0 || len > Long.MAX_VALUE - available[i]) {
          throw badTable(b, holder, "a length of " + len + " bytes" + (k > 1 ? " for partition "
              + (b.id().partition() + j) : "") + ", expected >= 0" + (len < 0 ? "" : " and a block of at most "
              + Long.MAX_VALUE + " bytes"));
        }
        lengths[i][j] = len;
        available[i] += len;
      }
      written += Math.min(available[i], b.size());
    }
    checkSignalledBytes(blocks.get(0), holder, signalled, written, BlockTable.bytes(records));
    return new BlockTableRecords(available, lengths, expected);
  }

  /** The table of {@code records} records at {@code tableOffset}, its header checked to name request {@code requestId}. */
  static ByteBuffer header(LandingPool.Range range, long tableOffset, int records, BlockFetcher.RemoteBlock first,
      BlockFetcher.HolderPlan holder, long requestId) throws BlockFetchException {
    ByteBuffer table = range.view(tableOffset, BlockTable.bytes(records));
    try {
      BlockTable.checkHeader(table, requestId, records);
    } catch (TransportException e) {
      throw new BlockFetchException(first.id(), holder.holderId(), "its " + e.detail(), e);
    }
    return table;
  }

  /** The signal counted {@code written} block bytes and the table's {@code tableBytes}, or the table is wrong. */
  static void checkSignalledBytes(BlockFetcher.RemoteBlock first, BlockFetcher.HolderPlan holder, long signalled,
      long written, long tableBytes) throws BlockFetchException {
    long counted = LandingSignal.bytes(signalled);
    if (counted != written + tableBytes) {
      throw badTable(first, holder, written + " block bytes written, but the signal counted " + counted
          + " bytes, expected " + (written + tableBytes) + " (those and the table's own " + tableBytes + ")");
    }
  }

  static BlockFetchException badTable(BlockFetcher.RemoteBlock b, BlockFetcher.HolderPlan holder, String what) {
    return new BlockFetchException(b.id(), holder.holderId(), "its block table is wrong: it reported " + what,
        new TransportException(TransportError.MALFORMED, "bad block table from holder " + holder.holderId()));
  }

  /**
   * The first partition of a block landed whole at {@code at} whose bytes do not match its
   * checksum, described as "ALGORITHM got 0x.., expected 0x.." (with the partition for a batch
   * block); null when all match.
   */
  static String mismatch(ChecksumAlgorithm checksum, LandingPool.Range range, long at, BlockId id, long[] lengths,
      long[] expected) {
    long off = at;
    for (int j = 0; j < lengths.length; j++) {
      java.util.zip.Checksum c = checksum.newChecksum();
      c.update(range.view(off, lengths[j]));
      long got = c.getValue();
      if (got != expected[j]) {
        return (id.isBatch() ? "partition " + (id.partition() + j) + ": " : "") + checksum + " got 0x"
            + Long.toHexString(got) + ", expected 0x" + Long.toHexString(expected[j]);
      }
      off += lengths[j];
    }
    return null;
  }
}
