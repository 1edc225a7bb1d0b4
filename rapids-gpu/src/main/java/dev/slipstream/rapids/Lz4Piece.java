package dev.slipstream.rapids;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * How a Kudo piece compressed on the GPU is laid out: its bytes are LZ4 blocks (nvCOMP's batched
 * LZ4, one block per {@code chunkBytes} of the piece, the last one shorter) back to back, and this
 * descriptor, the piece's host metadata in its {@code DeviceTableBlock} entry, says how long each is.
 * The reducer decompresses from it alone, so a block is never read beyond what the descriptor,
 * checked against the piece's length, accounts for. Little-endian:
 *
 * <pre>
 *   u32 magic "SLZ4", u32 chunk bytes C, u64 uncompressed bytes U, u32 chunks n = ceil(U / C), u32 0,
 *   n x u32 compressed bytes of chunk i (together the piece's length)
 * </pre>
 *
 * A piece stored uncompressed has no metadata at all.
 *
 * <p>Threading: immutable. Ownership: holds only host arrays.
 *
 * @param chunkBytes uncompressed bytes of each chunk but the last
 * @param uncompressedBytes the piece's bytes once decompressed (what the reducer assembles)
 * @param chunks compressed bytes of each chunk, in order
 */
public record Lz4Piece(int chunkBytes, long uncompressedBytes, int[] chunks) {
  static final int MAGIC = 0x345a_4c53; // "SLZ4" little-endian
  static final int HEADER = 24;
  /** nvCOMP's largest LZ4 chunk. */
  public static final int MAX_CHUNK = 16 << 20;
  /**
   * Most uncompressed bytes one compressed byte may stand for: LZ4 spends at least one byte per 255
   * of a match, so no real chunk comes near it; a descriptor claiming more is forged or corrupt.
   */
  static final long MAX_RATIO = 300;

  public Lz4Piece {
    chunks = chunks.clone();
  }

  /** Compressed bytes of the whole piece: the chunks' lengths together. */
  public long compressedBytes() {
    long s = 0;
    for (int c : chunks) {
      s += c;
    }
    return s;
  }

  /** Uncompressed bytes of chunk {@code i}: {@code chunkBytes}, the last one the rest of the piece. */
  public long uncompressedChunk(int i) {
    return i < chunks.length - 1 ? chunkBytes : uncompressedBytes - (long) chunkBytes * (chunks.length - 1);
  }

  @Override
  public int[] chunks() {
    return chunks.clone();
  }

  /** The chunk count a piece of {@code uncompressed} bytes has in chunks of {@code chunkBytes}. */
  public static int chunksOf(long uncompressed, int chunkBytes) {
    long n = (uncompressed + chunkBytes - 1) / chunkBytes;
    if (n > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(uncompressed + " bytes in chunks of " + chunkBytes
          + ", expected fewer than 2^31 chunks");
    }
    return (int) n;
  }

  /** This descriptor as a piece's metadata. */
  public byte[] encode() {
    ByteBuffer b = ByteBuffer.allocate(HEADER + 4 * chunks.length).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(MAGIC).putInt(chunkBytes).putLong(uncompressedBytes).putInt(chunks.length).putInt(0);
    for (int c : chunks) {
      b.putInt(c);
    }
    return b.array();
  }

  /** Whether {@code metadata} describes a compressed piece (a piece stored as it is has none). */
  public static boolean isCompressed(byte[] metadata) {
    return metadata.length > 0;
  }

  /**
   * The descriptor in {@code metadata} of a landed piece of {@code pieceBytes} bytes, checked: the
   * chunk size within nvCOMP's, a chunk count that fits the uncompressed size, chunk lengths of at
   * least one byte that add up to exactly the piece, and no more than {@link #MAX_RATIO} times the
   * piece once decompressed (so a forged size cannot make the reducer allocate without bound).
   */
  public static Lz4Piece decode(byte[] metadata, long pieceBytes) {
    if (metadata.length < HEADER) {
      throw refused(metadata, pieceBytes, metadata.length + " metadata bytes, expected at least " + HEADER);
    }
    ByteBuffer b = ByteBuffer.wrap(metadata).order(ByteOrder.LITTLE_ENDIAN);
    int magic = b.getInt();
    int chunkBytes = b.getInt();
    long uncompressed = b.getLong();
    long n = Integer.toUnsignedLong(b.getInt());
    b.getInt();
    if (magic != MAGIC) {
      throw refused(metadata, pieceBytes, String.format("magic 0x%08x, expected 0x%08x", magic, MAGIC));
    }
    if (chunkBytes <= 0 || chunkBytes > MAX_CHUNK) {
      throw refused(metadata, pieceBytes, "chunks of " + chunkBytes + " bytes, expected 1 to " + MAX_CHUNK);
    }
    if (uncompressed <= 0 || uncompressed > MAX_RATIO * pieceBytes) {
      throw refused(metadata, pieceBytes, uncompressed + " bytes uncompressed, expected 1 to " + MAX_RATIO
          + " times the piece's " + pieceBytes);
    }
    long want = (uncompressed + chunkBytes - 1) / chunkBytes;
    if (n != want || metadata.length != HEADER + 4 * n) {
      throw refused(metadata, pieceBytes, n + " chunks in " + metadata.length + " metadata bytes, expected " + want
          + " chunks of " + chunkBytes + " for " + uncompressed + " bytes in " + (HEADER + 4 * want));
    }
    int[] chunks = new int[(int) n];
    long sum = 0;
    for (int i = 0; i < n; i++) {
      chunks[i] = b.getInt();
      if (chunks[i] <= 0) {
        throw refused(metadata, pieceBytes, "chunk " + i + " of " + Integer.toUnsignedLong(chunks[i])
            + " compressed bytes, expected 1 to 2^31 - 1");
      }
      sum += chunks[i];
    }
    if (sum != pieceBytes) {
      throw refused(metadata, pieceBytes, n + " chunks of " + sum + " compressed bytes together, expected the piece's "
          + pieceBytes);
    }
    return new Lz4Piece(chunkBytes, uncompressed, chunks);
  }

  private static IllegalStateException refused(byte[] metadata, long pieceBytes, String what) {
    return new IllegalStateException("compressed piece of " + pieceBytes + " bytes (" + metadata.length
        + " metadata bytes) refused: " + what);
  }
}
