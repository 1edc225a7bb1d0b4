package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.ServeTimeline;
import org.junit.jupiter.api.Test;

class RequestPhasesTest {
  @Test
  void eachPhaseIsTheGapBetweenConsecutiveReaderAndHolderInstants() {
    RequestPhases p = new RequestPhases();
    assertTrue(p.add(100, 150, new ServeTimeline(170, 180, 200, 260, 270, 770, 790), 900));
    // The reader saw the second request land before the holder saw its kernel end: land counts 0.
    assertTrue(p.add(1_000, 1_010, new ServeTimeline(1_020, 1_030, 1_040, 1_050, 1_060, 1_160, 1_170), 1_150));
    assertArrayEquals(new long[] {50 + 10, 20 + 10, 10 + 10, 20 + 10, 60 + 10, 10 + 10, 500 + 100, 130 + 0},
        p.sums());
    assertEquals(2, p.requests());
    // Software cost: sent to landed less the kernel phase, 750 - 500 and 140 - 100.
    assertArrayEquals(new long[] {40, 250}, p.softwareNanos());
    assertEquals("2 requests, mean us per request: prepare 0, to holder 0, queued 0, check 0, lane 0, launch 0,"
        + " kernel 0, land 0; total 0; software (sent to landed, less the kernel phase) median 0.3 us, p90 0.3, of 2",
        p.describe());
  }

  @Test
  void theSoftwareCostIsKeptForTheFirstRequestsOnly() {
    RequestPhases p = new RequestPhases();
    for (int i = 0; i < RequestPhases.KEPT + 10; i++) {
      p.add(0, 10, new ServeTimeline(20, 30, 40, 50, 60, 70, 80), 100 + i);
    }
    assertEquals(RequestPhases.KEPT + 10, p.requests());
    long[] sw = p.softwareNanos();
    assertEquals(RequestPhases.KEPT, sw.length);
    assertEquals(80, sw[0]);
    assertEquals(80 + RequestPhases.KEPT - 1, sw[sw.length - 1]);
    assertEquals(RequestPhases.KEPT, p.plus(p).softwareNanos().length, "a sum keeps at most as many");
  }

  @Test
  void aRequestWithoutACompleteHolderTimelineAddsNothing() {
    RequestPhases p = new RequestPhases();
    assertFalse(p.add(1, 2, ServeTimeline.NONE, 5));
    assertFalse(p.add(1, 2, new ServeTimeline(3, 4, 5, 0, 0, 0, 9), 12));
    assertEquals(0, p.requests());
    assertEquals("no request with a complete holder timeline", p.describe());
  }

  @Test
  void snapshotsAndSumsDoNotShareState() {
    RequestPhases a = new RequestPhases();
    a.add(0, 1_000, new ServeTimeline(2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000), 8_000);
    RequestPhases snap = a.snapshot();
    RequestPhases both = a.plus(snap);
    a.add(0, 1_000, new ServeTimeline(2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000), 8_000);
    assertEquals(1, snap.requests());
    assertEquals(2, both.requests());
    assertEquals(both, a);
    assertEquals("2 requests, mean us per request: prepare 1, to holder 1, queued 1, check 1, lane 1, launch 1,"
        + " kernel 1, land 1; total 8; software (sent to landed, less the kernel phase) median 6.0 us, p90 6.0, of 2",
        both.describe());
    assertArrayEquals(new long[] {6_000}, snap.softwareNanos(), "a snapshot keeps its own");
  }
}
