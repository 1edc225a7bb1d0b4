package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A holder refuses a device write request that does not match its map outputs before it takes a
 * lane or touches the device: an output not here, of other payload widths, without the requested
 * partition, or with a block larger than the request's capacity for it. The refusal names what was
 * got and what was expected, the pins taken so far are released, and the request is never answered
 * by the server as well. No GPU: the store is over host memory and the server's device
 * collaborators are absent, which a refused request never reaches.
 */
class PushSchedulerAdmissionTest {
  private static final int SHUFFLE = 3;
  private static final int[] W = {4};

  private static WriteRequest request(int[] widths, ShuffleMessages.Entry... entries) {
    RegionExport l = new RegionExport(MemoryKind.DEVICE, 1, 0, 5, 1 << 20, 1, null, null);
    return DeviceRequests.from(DeviceRequests.request(4, SHUFFLE, l, 1 << 19, (1 << 19) + BlockTable.bytes(entries.length), widths,
        List.of(entries)), "2", 60_000);
  }

  private static ShuffleMessages.Entry entry(long map, int partition, long at, long capacity) {
    return DeviceRequests.entry(map, partition, at, capacity);
  }

  /** Commits map output {@code map} of two partitions of two rows each (32 bytes each). */
  private static void put(DeviceMapOutputStore s, long map) {
    long b = BatchLayout.packedBytes(2, W);
    OutputSpace.Block block = s.allocate(2 * b);
    s.commit(SHUFFLE, map, block, W, new long[] {0, b, 2 * b}, new long[] {2, 2});
  }

  private static TransportException refusal(PushScheduler server, WriteRequest req, AtomicInteger answers) {
    return assertThrows(TransportException.class, () -> server.start(req, 60_000, new long[PushScheduler.MARKS],
        (bytes, error) -> answers.incrementAndGet()));
  }

  @Test
  void aRequestThatDoesNotMatchTheMapOutputsIsRefusedBeforeAnythingIsWritten() {
    AtomicInteger answers = new AtomicInteger();
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore store = new DeviceMapOutputStore(space, 1 << 20, 0);
        PushScheduler server = new PushScheduler(null, null, store, d -> null, 1, 1)) {
      put(store, 1);
      put(store, 2);
      assertEquals(32, BatchLayout.packedBytes(2, W));

      TransportException missing = refusal(server, request(W, entry(9, 0, 0, 4096)), answers);
      assertEquals(TransportError.UNAVAILABLE, missing.error());
      assertEquals("UNAVAILABLE: no device map output for shuffle 3 map attempt 9 on this executor",
          missing.getMessage());

      TransportException widths = refusal(server, request(new int[] {8}, entry(1, 0, 0, 4096)), answers);
      assertEquals(TransportError.OUT_OF_RANGE, widths.error());
      assertEquals("OUT_OF_RANGE: device write request 4 (shuffle 3): map attempt 1 has payload widths [4], the"
          + " request expects [8]", widths.getMessage());

      TransportException partition = refusal(server, request(W, entry(1, 0, 0, 4096), entry(2, 2, 4096, 4096)),
          answers);
      assertEquals("OUT_OF_RANGE: device write request 4 (shuffle 3): partition 2 of map attempt 2, expected < 2",
          partition.getMessage());

      TransportException capacity = refusal(server, request(W, entry(1, 1, 0, 16)), answers);
      assertEquals("OUT_OF_RANGE: device write request 4 (shuffle 3): block (1, 1) has 32 bytes, more than its"
          + " capacity 16", capacity.getMessage());

      // Every pin taken on the way was released: removing the outputs frees their memory at once.
      assertTrue(store.removeMapOutput(SHUFFLE, 1));
      assertTrue(store.removeMapOutput(SHUFFLE, 2));
      assertEquals(0, store.deviceInUse());
      assertEquals(0, server.lanesMade(), "a refused request takes no lane");
    }
    assertEquals(0, answers.get(), "a refused request is answered by the caller, never by the server too");
    assertEquals(0, space.live());
  }
}
