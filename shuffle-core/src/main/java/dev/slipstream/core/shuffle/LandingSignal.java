package dev.slipstream.core.shuffle;

/**
 * The 8-byte signal word of a write request, the same for every block writer: its top
 * {@value #PIECE_BITS} bits count pieces, its low {@value #BYTE_BITS} bits count bytes. A holder
 * adds to it, after the data each addition counts, until the piece count is the request's
 * {@link ShuffleMessages.WriteRequest#expectedPieces()} and the bytes are the block bytes it wrote
 * plus the block table's: one addition over one ordered queue (the host writer), or one per piece
 * from the many CUDA blocks of a push, each after its own stores. The reader trusts the landing
 * once the count is complete and the bytes agree with the table. Stateless.
 */
public final class LandingSignal {
  public static final int BYTE_BITS = 40;
  public static final int PIECE_BITS = 64 - BYTE_BITS;
  public static final long MAX_PIECES = (1L << PIECE_BITS) - 1;
  public static final long MAX_BYTES = (1L << BYTE_BITS) - 1;

  private LandingSignal() {}

  /** The word {@code pieces} and {@code bytes} add up to. */
  public static long of(long pieces, long bytes) {
    if (pieces < 0 || pieces > MAX_PIECES || bytes < 0 || bytes > MAX_BYTES) {
      throw new IllegalArgumentException("landing signal of " + pieces + " pieces and " + bytes + " bytes, expected at"
          + " most " + MAX_PIECES + " pieces and " + MAX_BYTES + " bytes");
    }
    return pieces << BYTE_BITS | bytes;
  }

  public static long pieces(long signal) {
    return signal >>> BYTE_BITS;
  }

  public static long bytes(long signal) {
    return signal & MAX_BYTES;
  }
}
