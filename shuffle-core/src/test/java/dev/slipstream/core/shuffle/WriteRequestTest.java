package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The one write request: its codec, and {@link WriteRequest#check()}, which every block writer
 * relies on before it writes a byte, for host and device landing regions alike.
 */
class WriteRequestTest {
  private static final NodeIdentity READER = new NodeIdentity(TestNodes.APP, "7");

  private static RegionDescriptor landing(MemoryKind kind, long length) {
    return new RegionDescriptor(1, 0, length, 0x1234_5678_9abcL, kind, kind == MemoryKind.DEVICE ? 1 : -1);
  }

  private static Entry block(long map, int partition, long landingOffset, long capacity) {
    return new Entry(map, partition, 0, capacity, landingOffset);
  }

  private static WriteRequest device(long length, List<Entry> entries, long table, long signal) {
    return new WriteRequest(9, 3, READER, 2_000, landing(MemoryKind.DEVICE, length), table, signal, entries,
        new int[] {8, 4}, WriteRequest.ANSWER_SERVED);
  }

  private static String refusal(WriteRequest req, TransportError expected) {
    TransportException e = assertThrows(TransportException.class, req::check);
    assertEquals(expected, e.error(), e.getMessage());
    return e.getMessage();
  }

  @Test
  void aDeviceRequestRoundTripsWithItsWidthsReaderBudgetAndFlags() throws TransportException {
    WriteRequest req = device(1 << 20, List.of(block(77, 5, 0, 4096), block(78, 5, 4096, 160)), 8192, 8192 + 48)
        .check();
    WriteRequest got = (WriteRequest) ShuffleMessages.decode(req.encode());
    assertEquals(req, got);
    assertArrayEquals(new int[] {8, 4}, got.widths());
    assertEquals(true, got.answerServed());
    assertEquals(16 + 2 * 16, got.tableBytes(), "the table: its header and a record per partition");
    WriteRequest sent = req.from(new NodeIdentity(TestNodes.APP, "8"), 500);
    assertEquals(sent, ShuffleMessages.decodeRequest(sent.toBytes()));
    assertNotEquals(req, sent, "the reader and the budget are part of the request");
    WriteRequest host = new WriteRequest(9, 3, READER, 2_000, landing(MemoryKind.HOST, 1 << 20), 8192, 8192 + 80,
        List.of(new Entry(77, 2, 6, 0, 4096, 0)));
    assertEquals(BlockTable.bytes(4), host.check().tableBytes(), "a record per partition, as into device memory");
    assertEquals(host, ShuffleMessages.decode(host.encode()));
  }

  @Test
  void rangesOutsideTheRegionOverlappingOrMisalignedAreRefusedForEveryMemory() {
    for (MemoryKind kind : new MemoryKind[] {MemoryKind.HOST, MemoryKind.DEVICE}) {
      int[] widths = kind == MemoryKind.DEVICE ? new int[] {8} : new int[0];
      java.util.function.BiFunction<List<Entry>, long[], WriteRequest> req = (entries, slots) -> new WriteRequest(9,
          3, READER, 2_000, landing(kind, 8192), slots[0], slots[1], entries, widths, 0);
      String region = "region 1 (" + kind.name().toLowerCase() + (kind == MemoryKind.DEVICE ? " 1" : "")
          + ", length 8192)";
      assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): block (1, 0): offset 4096 + length 8192 outside "
          + region + ", expected a range inside it", refusal(req.apply(List.of(block(1, 0, 4096, 8192)),
          new long[] {0, 64}), TransportError.OUT_OF_RANGE));
      assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): signal at offset 8190 is not 8-byte aligned, expected"
          + " an aligned slot inside " + region, refusal(req.apply(List.of(block(1, 0, 0, 16)),
          new long[] {1024, 8190}), TransportError.OUT_OF_RANGE));
      assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): block table: offset 8184 + length 32 outside " + region
          + ", expected a range inside it",
          refusal(req.apply(List.of(block(1, 0, 0, 16)), new long[] {8184, 2048}), TransportError.OUT_OF_RANGE));
      assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): landing ranges overlap: [0, 128) and [64, 96),"
          + " expected disjoint ranges inside " + region,
          refusal(req.apply(List.of(block(1, 0, 0, 128)), new long[] {64, 4096}), TransportError.OUT_OF_RANGE));
      assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): landing ranges overlap: [0, 128) and [96, 104),"
          + " expected disjoint ranges inside " + region, refusal(req.apply(List.of(block(1, 0, 0, 128)),
          new long[] {4096, 96}), TransportError.OUT_OF_RANGE), "the signal inside a block");
    }
  }

  @Test
  void aDeviceRequestMustHaveAlignedSinglePartitionBlocksKnownWidthsAndACountableSignal() {
    assertEquals("OUT_OF_RANGE: write request 9 (shuffle 3): landing offset 8 of block (1, 0) is not 16-byte aligned,"
        + " expected aligned offsets in a device landing region",
        refusal(device(8192, List.of(block(1, 0, 8, 16)), 1024, 2048), TransportError.OUT_OF_RANGE));
    assertEquals("MALFORMED: write request 9 (shuffle 3): entry for partitions [0, 3) from block offset 0 into a"
        + " device landing region, expected one partition from offset 0",
        refusal(device(8192, List.of(new Entry(1, 0, 3, 0, 16, 0)), 1024, 2048), TransportError.MALFORMED));
    assertEquals("MALFORMED: write request 9 (shuffle 3): entry for partitions [0, 1) from block offset 16 into a"
        + " device landing region, expected one partition from offset 0",
        refusal(device(8192, List.of(new Entry(1, 0, 16, 16, 0)), 1024, 2048), TransportError.MALFORMED));
    WriteRequest oddWidth = new WriteRequest(9, 3, READER, 2_000, landing(MemoryKind.DEVICE, 8192), 1024, 2048,
        List.of(block(1, 0, 0, 16)), new int[] {3}, 0);
    assertEquals("MALFORMED: write request 9 (shuffle 3): payload width 3, expected 1, 2, 4, 8 or 16",
        refusal(oddWidth, TransportError.MALFORMED));
    long c = WriteRequest.CHUNK_BYTES;
    WriteRequest tooMany = device(Long.MAX_VALUE / 2, List.of(block(1, 0, 0, (1L << 24) * c)), 0, 64);
    assertEquals("MALFORMED: write request 9 (shuffle 3): 16777217 pieces of 1048576 bytes to signal, expected at most"
        + " 16777215 (the signal's piece count)", refusal(tooMany, TransportError.MALFORMED));
    WriteRequest widthsOnHost = new WriteRequest(9, 3, READER, 2_000, landing(MemoryKind.HOST, 8192), 1024, 2048,
        List.of(block(1, 0, 0, 16)), new int[] {8}, 0);
    assertEquals("MALFORMED: write request 9 (shuffle 3): 1 payload widths for a HOST landing region, expected none"
        + " (payload widths describe device batches)", refusal(widthsOnHost, TransportError.MALFORMED));
  }

  @Test
  void blocksIntoDeviceMemoryArePushedInPiecesThatTheSignalCountsOneEach() throws TransportException {
    long c = WriteRequest.CHUNK_BYTES;
    assertEquals(1, WriteRequest.chunks(16));
    assertEquals(1, WriteRequest.chunks(c));
    assertEquals(2, WriteRequest.chunks(c + 16));
    WriteRequest req = device(64L << 20, List.of(block(1, 0, 0, 16), block(1, 1, 16, c), block(2, 0, 16 + c, c + 16),
        block(2, 1, 32 + 2 * c, 3 * c)), 32 + 5 * c, 32 + 5 * c + 80).check();
    assertEquals(1 + 1 + 2 + 3 + 1, req.expectedPieces(), "pieces of every block, plus the table");
  }

  @Test
  void decodeRejectsTruncatedAndUnknownFlagsAndWidths() throws TransportException {
    WriteRequest req = device(1 << 20, List.of(block(77, 5, 0, 4096)), 8192, 8192 + 32);
    byte[] bytes = req.toBytes();
    TransportException e = assertThrows(TransportException.class, () -> ShuffleMessages.decodeRequest(
        java.util.Arrays.copyOf(bytes, bytes.length - 3)));
    assertEquals("MALFORMED: truncated write request: 1 entries need 40 bytes, have 37", e.getMessage());
    byte[] longer = java.util.Arrays.copyOf(bytes, bytes.length + 1);
    assertEquals(TransportError.MALFORMED, assertThrows(TransportException.class,
        () -> ShuffleMessages.decodeRequest(longer)).error());
    ByteBuffer widths = req.encode();
    int widthCountAt = bytes.length - 40 - 4 - 2 * 4 - 4;
    widths.putInt(widths.position() + widthCountAt, 9);
    e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(widths));
    assertEquals(TransportError.MALFORMED, e.error(), e.getMessage());
  }
}
