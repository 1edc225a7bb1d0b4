package dev.slipstream.rapids;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** The host descriptor of a piece compressed on the GPU: its layout, and the forged ones refused before any allocation. */
class Lz4PieceTest {
  private static final int C = 64 << 10;

  @Test
  void aDescriptorRoundTripsAndNamesEachChunksBytes() {
    // 150,000 bytes in chunks of 64 KiB: two whole chunks and one of 18,928.
    Lz4Piece p = new Lz4Piece(C, 150_000, new int[] {30_000, 20_000, 7_000});
    byte[] m = p.encode();
    assertEquals(24 + 3 * 4, m.length);
    assertTrue(Lz4Piece.isCompressed(m));
    assertFalse(Lz4Piece.isCompressed(new byte[0]));
    Lz4Piece q = Lz4Piece.decode(m, 57_000);
    assertEquals(C, q.chunkBytes());
    assertEquals(150_000, q.uncompressedBytes());
    assertArrayEquals(new int[] {30_000, 20_000, 7_000}, q.chunks());
    assertEquals(57_000, q.compressedBytes());
    assertEquals(C, q.uncompressedChunk(0));
    assertEquals(C, q.uncompressedChunk(1));
    assertEquals(150_000 - 2 * C, q.uncompressedChunk(2));
    assertEquals(3, Lz4Piece.chunksOf(150_000, C));
    assertEquals(1, Lz4Piece.chunksOf(C, C));
    assertEquals(2, Lz4Piece.chunksOf(C + 1, C));
  }

  @Test
  void chunkLengthsMustAddUpToThePieceExactly() {
    byte[] m = new Lz4Piece(C, 150_000, new int[] {30_000, 20_000, 7_000}).encode();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(m, 57_001));
    assertEquals("compressed piece of 57001 bytes (36 metadata bytes) refused: 3 chunks of 57000 compressed bytes"
        + " together, expected the piece's 57001", e.getMessage());
    assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(m, 56_999));
  }

  @Test
  void aChunkCountThatDoesNotFitTheSizeIsRefused() {
    byte[] m = new Lz4Piece(C, 150_000, new int[] {30_000, 27_000}).encode();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(m, 57_000));
    assertEquals("compressed piece of 57000 bytes (32 metadata bytes) refused: 2 chunks in 32 metadata bytes,"
        + " expected 3 chunks of 65536 for 150000 bytes in 36", e.getMessage());
    // The count agrees but the metadata is cut short of its chunk lengths.
    byte[] full = new Lz4Piece(C, 150_000, new int[] {30_000, 20_000, 7_000}).encode();
    byte[] cut = java.util.Arrays.copyOf(full, full.length - 4);
    assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(cut, 57_000));
  }

  @Test
  void forgedHeadersAreRefusedNamingWhatWasFound() {
    byte[] m = new Lz4Piece(C, 1000, new int[] {500}).encode();
    byte[] magic = m.clone();
    magic[0] = 'X';
    assertEquals("compressed piece of 500 bytes (28 metadata bytes) refused: magic 0x345a4c58, expected 0x345a4c53",
        assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(magic, 500)).getMessage());
    assertEquals("compressed piece of 500 bytes (3 metadata bytes) refused: 3 metadata bytes, expected at least 24",
        assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(new byte[3], 500)).getMessage());
    byte[] chunk = header(0, 1000, 1);
    assertEquals("compressed piece of 500 bytes (28 metadata bytes) refused: chunks of 0 bytes, expected 1 to 16777216",
        assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(chunk, 500)).getMessage());
    byte[] huge = header(C, 1L << 40, 1);
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(huge, 500));
    assertEquals("compressed piece of 500 bytes (28 metadata bytes) refused: 1099511627776 bytes uncompressed,"
        + " expected 1 to 300 times the piece's 500", e.getMessage());
    byte[] zero = new Lz4Piece(C, 1000, new int[] {0}).encode();
    assertThrows(IllegalStateException.class, () -> Lz4Piece.decode(zero, 0));
    byte[] negative = new Lz4Piece(C, 1000, new int[] {-4}).encode();
    assertEquals("compressed piece of 500 bytes (28 metadata bytes) refused: chunk 0 of 4294967292 compressed bytes,"
        + " expected 1 to 2^31 - 1", assertThrows(IllegalStateException.class,
            () -> Lz4Piece.decode(negative, 500)).getMessage());
  }

  @Test
  void theDescriptorKeepsItsOwnChunkArray() {
    int[] chunks = {500};
    Lz4Piece p = new Lz4Piece(C, 1000, chunks);
    chunks[0] = 7;
    p.chunks()[0] = 9;
    assertEquals(500, p.compressedBytes());
  }

  /** A descriptor header with one chunk of 500 bytes after it. */
  private static byte[] header(int chunkBytes, long uncompressed, int n) {
    return ByteBuffer.allocate(24 + 4 * n).order(ByteOrder.LITTLE_ENDIAN).putInt(Lz4Piece.MAGIC).putInt(chunkBytes)
        .putLong(uncompressed).putInt(n).putInt(0).putInt(500).array();
  }
}
