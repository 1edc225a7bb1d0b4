package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.io.InputStream;

/**
 * Checks a block's bytes, read in order from its start, against the checksum of each of its
 * partitions, each when that partition's last byte has gone by; {@link #end} checks that no
 * partition is short. One task thread.
 */
final class PartitionCheck {
  private final BlockId block;
  private final String holderId;
  private final long[] lengths;
  private final long[] expected;
  private final ChecksumAlgorithm checksum;
  private final java.util.zip.Checksum c;
  private int index;
  private long left;

  PartitionCheck(ChecksumAlgorithm checksum, BlockId block, String holderId, long[] lengths, long[] expected) {
    this.checksum = checksum;
    this.c = checksum.newChecksum();
    this.block = block;
    this.holderId = holderId;
    this.lengths = lengths;
    this.expected = expected;
    this.left = lengths[0];
  }

  void update(int b) throws BlockFetchException {
    update(new byte[] {(byte) b}, 0, 1);
  }

  void update(byte[] buf, int off, int len) throws BlockFetchException {
    while (true) {
      while (left == 0 && index < lengths.length) {
        verify(); // also partitions with no bytes
      }
      if (len == 0) {
        return;
      }
      if (index == lengths.length) {
        throw new BlockFetchException(block, holderId, "more bytes than the " + total() + " its holder reported",
            new TransportException(TransportError.MALFORMED, "block " + block + " is longer than reported"));
      }
      int n = (int) Math.min(len, left);
      c.update(buf, off, n);
      off += n;
      len -= n;
      left -= n;
    }
  }

  /** At the end of the stream: every partition must have had all its bytes. */
  void end() throws BlockFetchException {
    update(new byte[0], 0, 0);
    if (index < lengths.length) {
      throw new BlockFetchException(block, holderId, "the stream ended " + left + " bytes short of partition "
          + (block.partition() + index) + "'s " + lengths[index] + " bytes",
          new TransportException(TransportError.MALFORMED, "block " + block + " is shorter than reported"));
    }
  }

  private long total() {
    long t = 0;
    for (long l : lengths) {
      t += l;
    }
    return t;
  }

  private void verify() throws BlockFetchException {
    long got = c.getValue();
    if (got != expected[index]) {
      throw new BlockFetchException(block, holderId, "checksum mismatch " + (block.isBatch() ? "in partition "
          + (block.partition() + index) + " of a streamed batch block" : "at the end of a streamed block") + " ("
          + checksum + " got 0x" + Long.toHexString(got) + ", expected 0x" + Long.toHexString(expected[index]) + ")",
          new TransportException(TransportError.CHECKSUM_MISMATCH, "block " + block + " arrived corrupt"));
    }
    c.reset();
    index++;
    left = index < lengths.length ? lengths[index] : 0;
  }

  /** Passes a block's bytes through a {@link PartitionCheck}. */
  static final class VerifyingStream extends java.io.FilterInputStream {
    private final PartitionCheck check;
    private boolean ended;

    VerifyingStream(InputStream in, PartitionCheck check) {
      super(in);
      this.check = check;
    }

    @Override
    public int read() throws IOException {
      int b = in.read();
      if (b < 0) {
        end();
      } else {
        check.update(b);
      }
      return b;
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
      int n = in.read(buf, off, len);
      if (n < 0) {
        end();
      } else {
        check.update(buf, off, n);
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      byte[] tmp = new byte[(int) Math.min(n, 8192)];
      long done = 0;
      while (done < n) {
        int k = read(tmp, 0, (int) Math.min(tmp.length, n - done));
        if (k < 0) {
          break;
        }
        done += k;
      }
      return done;
    }

    private void end() throws IOException {
      if (!ended) {
        ended = true;
        check.end();
      }
    }
  }
}
