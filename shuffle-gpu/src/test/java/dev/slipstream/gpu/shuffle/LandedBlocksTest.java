package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import java.nio.ByteBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What a reader checks after a push, without a GPU: the signal's pieces and bytes and the block
 * table the holder wrote, which must name this request; reported lengths that are negative, larger
 * than the reserved capacity, too small for their rows, or that overlap fail naming what was got
 * and what was expected.
 */
class LandedBlocksTest {
  private static final int[] W = {8, 4};

  private static RegionExport landing() {
    return new RegionExport(MemoryKind.DEVICE, 1, 0, 42, 1 << 20, 1, new byte[RegionExport.IPC_HANDLE_BYTES],
        "");
  }

  /** Request 9: blocks of capacity 4096 at 0 and 160 at 4096, table at 8192, signal after it. */
  private static WriteRequest request() throws TransportException {
    return DeviceRequests.request(9, 3, landing(), 8192, 8192 + BlockTable.bytes(2), W,
        List.of(DeviceRequests.entry(77, 5, 0, 4096), DeviceRequests.entry(78, 5, 4096, 160)))
        .check();
  }

  private static long signal(long pieces, long bytes) {
    return (pieces << 40) | bytes;
  }

  private static ByteBuffer table(long id, long... bytesRows) {
    List<LandedBlocks.Landed> l = new java.util.ArrayList<>();
    for (int i = 0; i < bytesRows.length; i += 2) {
      l.add(new LandedBlocks.Landed(bytesRows[i], bytesRows[i + 1]));
    }
    return ByteBuffer.wrap(LandedBlocks.encode(id, l));
  }

  private static String refusal(WriteRequest req, long signal, ByteBuffer table) {
    return assertThrows(TransportException.class, () -> LandedBlocks.check(req, signal, table)).getMessage();
  }

  @Test
  void aTableForThisRequestWithMatchingSignalIsAccepted() throws TransportException {
    WriteRequest req = request();
    long rows = 100;
    long bytes = BatchLayout.packedBytes(rows, W);
    List<LandedBlocks.Landed> got = LandedBlocks.check(req, signal(3, bytes + 48 + BlockTable.bytes(2)),
        table(9, bytes, rows, 48, 1));
    assertEquals(List.of(new LandedBlocks.Landed(bytes, rows), new LandedBlocks.Landed(48, 1)), got);
    assertEquals(List.of(new LandedBlocks.Landed(0, 0), new LandedBlocks.Landed(0, 0)),
        LandedBlocks.check(req, signal(3, BlockTable.bytes(2)), table(9, 0, 0, 0, 0)), "empty blocks");
  }

  @Test
  void aTableWrittenForAnotherRequestNeverCompletesThisOne() throws TransportException {
    WriteRequest req = request();
    // A late push of request 8 into reused space: its table and a signal that counts enough pieces.
    assertEquals("MALFORMED: device write request 9: block table names request 8 with 2 records (magic 0x54424c53),"
        + " expected request 9 with 2 records (magic 0x54424c53): not written for this request",
        refusal(req, signal(3, 96 + BlockTable.bytes(2)), table(8, 48, 1, 48, 1)));
    assertEquals("MALFORMED: device write request 9: block table names request 0 with 0 records (magic 0x0),"
        + " expected request 9 with 2 records (magic 0x54424c53): not written for this request",
        refusal(req, signal(3, 0), ByteBuffer.allocate((int) BlockTable.bytes(2))), "a zeroed table");
    assertEquals("MALFORMED: device write request 9: signal counted 4 pieces, expected 3",
        refusal(req, signal(4, 0), table(9, 48, 1, 48, 1)), "extra pieces added by another push");
    assertEquals("MALFORMED: device write request 9: signal counted 1000 bytes, expected 144 (the table's 96 block"
        + " bytes and its own 48)", refusal(req, signal(3, 1000), table(9, 48, 1, 48, 1)));
  }

  @Test
  void reportedLengthsOutsideTheReservedCapacityAreRefused() throws TransportException {
    WriteRequest req = request();
    assertEquals("MALFORMED: device write request 9: block (77, 5) reported -16 bytes, expected 0..4096 (its"
        + " capacity)", refusal(req, signal(3, 0), table(9, -16, 0, 48, 1)));
    assertEquals("MALFORMED: device write request 9: block (78, 5) reported 176 bytes, expected 0..160 (its"
        + " capacity)", refusal(req, signal(3, 0), table(9, 48, 1, 176, 1)));
    assertEquals("MALFORMED: device write request 9: block (77, 5) reported 1000 rows in 16 bytes, expected at least "
        + BatchLayout.packedBytes(1000, W) + " bytes for them (widths [8, 4])",
        refusal(req, signal(3, 0), table(9, 16, 1000, 48, 1)));
    assertEquals("MALFORMED: device write request 9: block table of 16 bytes, expected 48",
        refusal(req, signal(3, 0), ByteBuffer.allocate(16)));
  }

  @Test
  void overlappingLandedRangesAreRefused() {
    // Not a request a reader lays out (check() refuses it): the table's own check still catches it.
    WriteRequest req = DeviceRequests.request(9, 3, landing(), 8192, 8192 + BlockTable.bytes(2), W,
        List.of(DeviceRequests.entry(77, 5, 0, 4096), DeviceRequests.entry(78, 5, 64, 160)));
    assertEquals("MALFORMED: device write request 9: landed ranges overlap: [0, 128) and [64, 112), expected disjoint"
        + " ranges", refusal(req, signal(3, 176 + 48), table(9, 128, 1, 48, 1)));
  }

  @Test
  void theTableLayoutIsFixed() {
    byte[] t = LandedBlocks.encode(0x0102030405060708L, List.of(new LandedBlocks.Landed(5, 6)));
    assertEquals(BlockTable.HEADER + BlockTable.RECORD, t.length, "the protocol's table, as the host path writes it");
    assertEquals(8, t[0], "request id, little-endian");
    assertEquals(1, t[8], "record count");
    assertEquals('S', t[12], "magic SLBT");
    assertEquals(5, t[16], "the first block's bytes");
    assertEquals(0, t[24], "then its checksum: none for device batches");
    assertEquals(6, t[28], "then its rows");
  }
}
