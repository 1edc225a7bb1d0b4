package dev.slipstream.gpu.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.gpu.SlipStatus;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The protocol's write request into a ring request, and the kernel's answers into results (CPU). */
class RingRequestsTest {
  private static final RegionDescriptor LANDING = new RegionDescriptor(1, 0, 1 << 20, 0x77, MemoryKind.DEVICE, 0);

  private static WriteRequest request(int blocks, long budgetMillis) {
    List<ShuffleMessages.Entry> entries = new ArrayList<>();
    for (int i = 0; i < blocks; i++) {
      entries.add(new ShuffleMessages.Entry(40 + i, i, 0, 4096, 8192L * (i + 1)));
    }
    return new WriteRequest(9, 3, new NodeIdentity("app", "r1"), budgetMillis, LANDING, 0, 4096, entries,
        new int[] {8}, WriteRequest.ANSWER_SERVED);
  }

  @Test
  void aRequestKeepsItsBlocksTableSignalAndBudget() {
    WriteRequest req = request(3, 250);
    ServeRing.Request r = RingRequests.request(req, 0x77, 1_000_000_000L);
    assertEquals(9, r.requestId());
    assertEquals(3, r.shuffleId());
    assertEquals(0x77, r.landingKey());
    assertEquals(0, r.tableOffset());
    assertEquals(1_000_000_000L + 250_000_000L, r.deadlineNanos());
    assertEquals(4096, r.signalOffset());
    assertEquals(req.expectedPieces(), r.signalPieces());
    assertEquals(List.of(new ServeRing.Block(40, 0, 8192, 4096), new ServeRing.Block(41, 1, 16384, 4096),
        new ServeRing.Block(42, 2, 24576, 4096)), r.blocks());
  }

  @Test
  void aRequestWithNoBudgetLeftIsAlreadyPastItsDeadline() {
    assertTrue(RingRequests.request(request(1, 0), 0x77, 5_000_000L).deadlineNanos() < 5_000_000L);
  }

  @Test
  void onlyRequestsOfOneToThirtyBlocksFit() {
    assertTrue(RingRequests.fits(request(1, 10)));
    assertTrue(RingRequests.fits(request(ServeRing.MAX_BLOCKS, 10)));
    assertFalse(RingRequests.fits(request(ServeRing.MAX_BLOCKS + 1, 10)));
  }

  @Test
  void answersBecomeTheHostPathsResults() {
    ServeRing.Answer served = new ServeRing.Answer(0, 0, 2, 8192, 0, 100, 200, 700, 750);
    WriteResult ok = RingRequests.result(9, served, "h1");
    assertTrue(ok.served());
    assertEquals(8192, ok.bytes());
    assertEquals(new ServeTimeline(100, 100, 200, 200, 200, 700, 750), ok.timeline());

    ServeRing.Answer range = new ServeRing.Answer(1, SlipStatus.SLIP_ERR_OUT_OF_RANGE.code(), 1, 0, 5, 100, 0, 0, 120);
    WriteResult refused = RingRequests.result(9, range, "h1");
    assertFalse(refused.served());
    assertEquals(TransportError.OUT_OF_RANGE, refused.error());
    assertTrue(refused.reason().contains("executor h1") && refused.reason().contains("SLIP_ERR_OUT_OF_RANGE")
        && refused.reason().contains("block 1") && refused.reason().contains("value 5"), refused.reason());
    assertFalse(RingRequests.notInDirectory(range));

    ServeRing.Answer spilled = new ServeRing.Answer(2, SlipStatus.SLIP_ERR_BAD_REGION.code(), 0, 0, 40, 100, 0, 0, 120);
    assertTrue(RingRequests.notInDirectory(spilled), "sent again the host-driven way");
    ServeRing.Answer key = new ServeRing.Answer(3, SlipStatus.SLIP_ERR_BAD_KEY.code(), 0, 0, 0x78, 100, 0, 0, 120);
    assertEquals(TransportError.BAD_KEY, RingRequests.result(9, key, "h1").error());
    ServeRing.Answer late = new ServeRing.Answer(4, SlipStatus.SLIP_ERR_TIMEOUT.code(), 1, 0, 7, 100, 0, 0, 120);
    assertEquals(TransportError.TIMEOUT, RingRequests.result(9, late, "h1").error());
  }
}
