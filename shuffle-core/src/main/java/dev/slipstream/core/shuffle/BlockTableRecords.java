package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.util.List;

/**
 * The block table a holder wrote after a request's blocks, as the reader reads it: one
 * {@link ShuffleMessages#TABLE_ENTRY}-byte record per partition of each block, in entry order,
 * holding the bytes the partition has from the entry's block offset on and the checksum of the
 * whole partition. Immutable once read.
 */
record BlockTableRecords(long[] available, long[][] lengths, long[][] expected) {

  /**
   * Reads the records at {@code tableOffset} of {@code range} for {@code blocks}; throws naming the
   * block and the holder when a length is negative or the block's would overflow.
   */
  static BlockTableRecords read(LandingPool.Range range, long tableOffset, List<BlockFetcher.RemoteBlock> blocks,
      BlockFetcher.HolderPlan holder) throws BlockFetchException {
    int n = blocks.size();
    long[] available = new long[n];
    long[][] lengths = new long[n][];
    long[][] expected = new long[n][];
    int record = 0;
    for (int i = 0; i < n; i++) {
      BlockFetcher.RemoteBlock b = blocks.get(i);
      int k = b.id().partitions();
      lengths[i] = new long[k];
      expected[i] = new long[k];
      for (int j = 0; j < k; j++, record++) {
        long len = BlockFetcher.readLength(range, tableOffset + (long) ShuffleMessages.TABLE_ENTRY * record);
        expected[i][j] = BlockFetcher.readLength(range, tableOffset + (long) ShuffleMessages.TABLE_ENTRY * record + 8);
        if (len < 0 || len > Long.MAX_VALUE - available[i]) {
          throw badTable(b, holder, "a length of " + len + " bytes" + (k > 1 ? " for partition "
              + (b.id().partition() + j) : "") + ", expected >= 0" + (len < 0 ? "" : " and a block of at most "
              + Long.MAX_VALUE + " bytes"));
        }
        lengths[i][j] = len;
        available[i] += len;
      }
    }
    return new BlockTableRecords(available, lengths, expected);
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
