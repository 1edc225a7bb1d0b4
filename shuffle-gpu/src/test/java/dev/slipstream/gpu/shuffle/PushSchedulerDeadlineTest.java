package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A holder drops a device write request whose deadline (the earlier of its own timeout and the
 * reader's budget, from the request's arrival) has passed before serving it: refused at once,
 * touching neither the store nor the device, and never answered twice. No GPU: the server's
 * collaborators are absent, which a request past its deadline never reaches.
 */
class PushSchedulerDeadlineTest {
  private static WriteRequest request(long budgetMs) throws TransportException {
    RegionExport l = new RegionExport(MemoryKind.DEVICE, 1, 0, 5, 1 << 20, 1, null, null);
    return DeviceRequests.from(DeviceRequests.request(4, 3, l, 4096, 4096 + BlockTable.bytes(1), new int[] {8},
        List.of(DeviceRequests.entry(1, 0, 0, 4096))), "2", budgetMs).check();
  }

  @Test
  void aRequestPastTheReadersBudgetIsDroppedBeforeAnythingIsTouched() throws TransportException {
    AtomicInteger answers = new AtomicInteger();
    try (PushScheduler server = new PushScheduler(null, null, null, d -> null, 1, 1)) {
      long arrived = System.nanoTime() - 1_000_000_000L;
      TransportException e = assertThrows(TransportException.class, () -> server.start(request(200), arrived, 60_000,
          new long[PushScheduler.MARKS], (bytes, error) -> answers.incrementAndGet()));
      assertEquals(TransportError.TIMEOUT, e.error());
      assertEquals("TIMEOUT: device write request 4: its deadline (200 ms from its arrival) passed before it was"
          + " served; dropped, nothing written", e.getMessage());
      TransportException own = assertThrows(TransportException.class, () -> server.start(request(60_000), arrived,
          500, new long[PushScheduler.MARKS], (bytes, error) -> answers.incrementAndGet()));
      assertEquals("TIMEOUT: device write request 4: its deadline (500 ms from its arrival) passed before it was"
          + " served; dropped, nothing written", own.getMessage(), "the holder's own timeout when it is shorter");
      assertThrows(TransportException.class, () -> server.start(request(0), System.nanoTime() - 1, 60_000,
          new long[PushScheduler.MARKS], (bytes, error) -> answers.incrementAndGet()), "a zero budget");
    }
    assertEquals(0, answers.get(), "a refused request is answered by the caller, never by the server too");
  }
}
