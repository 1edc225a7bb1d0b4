package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The landing region's ranges without a GPU: a fake zeroer (tickets done when the test says so)
 * and a fake clock. A range whose request ended before its holder finished is handed out again
 * only once the holder answered, was lost, or the bound passed; and, in a simulation of many
 * requests with holders early and late, no holder's write ever lands in a range another request holds.
 */
class LandingRangesTest {
  private final AtomicLong clock = new AtomicLong(1_000_000_000L);
  private final List<FakeTicket> tickets = new ArrayList<>();

  private final class FakeTicket implements LandingRanges.Ticket {
    final long offset;
    final long length;
    boolean done;
    boolean awaited;
    boolean closed;

    FakeTicket(long offset, long length) {
      this.offset = offset;
      this.length = length;
    }

    @Override
    public boolean done() {
      return done;
    }

    @Override
    public void await() {
      awaited = true;
      done = true;
    }

    @Override
    public void close() {
      closed = true;
    }
  }

  private LandingRanges ranges(long capacity) {
    return new LandingRanges(capacity, (off, len) -> {
      FakeTicket t = new FakeTicket(off, len);
      tickets.add(t);
      return t;
    }, clock::get);
  }

  @Test
  void aRetainedRangeIsHandedOutAgainOnlyOnceItsHolderAnsweredThatRequest() {
    LandingRanges r = ranges(4096);
    long at = r.tryReserve(4096);
    assertEquals(0, at);
    r.retain(7, "holder-1", at, 4096, clock.get() + 1_000_000_000L);
    assertEquals(4096, r.retainedBytes());
    assertEquals(4096, r.used(), "retained bytes stay in use");
    assertEquals(-1, r.tryReserve(16), "nothing is free while the holder may still write");
    assertEquals(null, r.finished(8), "an answer to another request releases nothing");
    assertEquals(-1, r.tryReserve(16));
    assertEquals(7, r.finished(7).requestId());
    assertEquals(0, r.retainedBytes());
    assertEquals(1, tickets.size(), "released ranges are zeroed");
    assertEquals(0, r.tryReserve(4096), "free once zeroed (waited for here)");
    assertTrue(tickets.get(0).awaited && tickets.get(0).closed);
    assertEquals(1, r.released(LandingRanges.Release.ANSWERED));
    assertEquals(null, r.finished(7), "a second answer does nothing");
  }

  @Test
  void aLostHolderReleasesItsRetainedRangesAndNoOthers() {
    LandingRanges r = ranges(3 * 1024);
    long a = r.tryReserve(1024);
    long b = r.tryReserve(1024);
    long c = r.tryReserve(1024);
    r.retain(1, "h1", a, 1024, Long.MAX_VALUE);
    r.retain(2, "h2", b, 1024, Long.MAX_VALUE);
    r.retain(3, "h1", c, 1024, Long.MAX_VALUE);
    assertEquals(List.of(1L, 3L), r.holderLost("h1").stream().map(LandingRanges.Retained::requestId).toList());
    assertEquals(1024, r.retainedBytes());
    assertEquals(List.of(2L), r.retained().stream().map(LandingRanges.Retained::requestId).toList());
    assertEquals(2, r.released(LandingRanges.Release.HOLDER_LOST));
    assertEquals(1024, r.used());
  }

  @Test
  void theBoundReleasesARangeWhoseHolderNeverAnswersAndNotBefore() {
    LandingRanges r = ranges(1024);
    long a = r.tryReserve(1024);
    long bound = clock.get() + 5_000_000_000L;
    r.retain(1, "h", a, 1024, bound);
    clock.set(bound - 1);
    assertEquals(List.of(), r.releaseDue());
    assertEquals(-1, r.tryReserve(1024));
    clock.set(bound);
    assertEquals(1, r.releaseDue().size());
    assertEquals(1, r.released(LandingRanges.Release.BOUND));
    assertEquals(0, r.tryReserve(1024));
    assertEquals(null, r.finished(1), "a late answer after the bound releases nothing twice");
    assertEquals(1024, r.used());
  }

  @Test
  void aReservationWaitingForSpaceNamesTheRetainedBytesWhenItGivesUp() {
    LandingRanges r = ranges(2048);
    r.retain(1, "h", r.tryReserve(1024), 1024, Long.MAX_VALUE);
    long other = r.tryReserve(1024);
    assertEquals(1024, other);
    var e = assertThrows(IllegalStateException.class, () -> r.reserve(1024, clock.get()));
    assertEquals("device landing region: no free range of 1024 bytes (2048 of 2048 in use, 1024 of them retained for"
        + " 1 requests whose holders may still write; spark.slipstream.gpu.landing.bytes)", e.getMessage());
    assertEquals(1024, r.peakRetainedBytes());
  }

  @Test
  void closeReleasesRetainedRangesAndReportsOnlyReservedOnes() {
    LandingRanges r = ranges(2048);
    r.retain(1, "h", r.tryReserve(1024), 1024, Long.MAX_VALUE);
    r.tryReserve(512);
    boolean[] drained = {false};
    assertEquals(512, r.close(() -> drained[0] = true), "the request that never released its range is reported");
    assertTrue(drained[0]);
    r.release(0, 16); // after the close: nothing is zeroed any more
    assertEquals(0, tickets.size());
    assertEquals(0, r.retainedBytes());
    assertEquals(1, r.released(LandingRanges.Release.CLOSED));
    assertThrows(IllegalStateException.class, () -> r.tryReserve(16));
  }

  @Test
  void aRangeIsRetainedOncePerRequest() {
    LandingRanges r = ranges(2048);
    r.retain(1, "h", r.tryReserve(1024), 1024, Long.MAX_VALUE);
    assertThrows(IllegalStateException.class, () -> r.retain(1, "h", r.tryReserve(1024), 1024, Long.MAX_VALUE));
  }

  /**
   * Many requests over a small region, each with a holder that pushes after a random delay around the
   * reader's deadline (some early, many late, some lost, some never answering within the bound and
   * never writing after it): every byte a holder stores lands in memory that its own request still
   * holds, every request that landed reads only its own bytes, and no byte stays reserved.
   */
  @Test
  void noHolderWriteEverLandsInARangeAnotherRequestHolds() {
    Sim s = simulate(true);
    assertEquals(0, s.wrong, "holder writes into ranges other requests held");
    assertEquals(20_000, s.landed + s.failed, "every request landed or failed");
    assertTrue(s.landed > 5_000 && s.failed > 5_000, s.landed + " landed, " + s.failed + " failed");
    assertEquals(0, s.ranges.used(), "no landing bytes leaked");
    assertEquals(0, s.ranges.retainedBytes());
  }

  /** The same requests with a range handed out again one timeout after its deadline, answered or not. */
  @Test
  void aQuarantineOfOneTimeoutLetsLateWritesLandInReusedRanges() {
    Sim s = simulate(false);
    assertTrue(s.wrong > 0, "late writes landed in reused ranges: " + s.wrong + " bytes");
  }

  private record Sim(LandingRanges ranges, int wrong, int landed, int failed) {}

  private Sim simulate(boolean retainUntilAnswered) {
    final long capacity = 64 * 1024;
    final long deadlineNs = 2_000_000_000L; // the reader's fetch timeout
    final long graceNs = 3_000_000_000L;
    final long releaseAfter = retainUntilAnswered ? graceNs : deadlineNs;
    LandingRanges r = new LandingRanges(capacity, (off, len) -> {
      FakeTicket t = new FakeTicket(off, len);
      t.done = true;
      return t;
    }, clock::get);
    long[] owner = new long[(int) capacity]; // which request's bytes each landing byte holds (0: zeros)
    // Who holds each byte now: the request whose range contains it (0: free).
    long[] holder = new long[(int) capacity];
    SplittableRandom rnd = new SplittableRandom(17);
    record Event(long at, int kind, long id) {}
    PriorityQueue<Event> events = new PriorityQueue<>((x, y) -> x.at != y.at ? Long.compare(x.at, y.at)
        : Integer.compare(x.kind, y.kind));
    final int write = 0;
    final int deadline = 1;
    final int bound = 2;
    final int lost = 3;
    long[][] range = new long[20_001][];
    boolean[] landed = new boolean[range.length];
    boolean[] ended = new boolean[range.length];
    int wrong = 0;
    int landedCount = 0;
    int failed = 0;
    long next = 1;
    long now = clock.get();
    while (next < range.length || !events.isEmpty()) {
      // Start new requests while space is free.
      while (next < range.length) {
        long len = 16L * (1 + rnd.nextInt(256));
        long at = r.tryReserve(len);
        if (at < 0) {
          break;
        }
        long id = next++;
        range[(int) id] = new long[] {at, len};
        Arrays.fill(holder, (int) at, (int) (at + len), id);
        double p = rnd.nextDouble();
        long delay = p < 0.5 ? rnd.nextLong(deadlineNs) // early
            : p < 0.9 ? deadlineNs + rnd.nextLong(graceNs) // late, within the bound
            : -1; // lost, or never answers (and never writes after the bound: the holder's promise)
        if (delay >= 0) {
          events.add(new Event(now + delay, write, id));
        } else if (p < 0.95) {
          events.add(new Event(now + rnd.nextLong(deadlineNs + graceNs), lost, id));
        }
        events.add(new Event(now + deadlineNs, deadline, id));
        events.add(new Event(now + deadlineNs + graceNs, bound, id));
      }
      Event e = events.poll();
      if (e == null) {
        break;
      }
      now = e.at;
      clock.set(now);
      int id = (int) e.id;
      long at = range[id][0];
      long len = range[id][1];
      switch (e.kind) {
        case write -> {
          for (long b = at; b < at + len; b++) {
            if (holder[(int) b] != id) {
              wrong++;
            }
            owner[(int) b] = id;
          }
          if (!ended[id]) { // the signal came before the deadline: the reader checks its bytes and releases
            for (long b = at; b < at + len; b++) {
              if (owner[(int) b] != id) {
                wrong++;
              }
            }
            landed[id] = true;
            landedCount++;
            ended[id] = true;
            free(holder, at, len);
            r.release(at, len);
          } else {
            LandingRanges.Retained done = retainUntilAnswered ? r.finished(id) : null; // the holder's answer
            if (done != null) {
              free(holder, at, len);
            }
          }
        }
        case deadline -> {
          if (!ended[id]) {
            ended[id] = true;
            failed++;
            r.retain(id, "h" + id, at, len, now + releaseAfter);
          }
        }
        case lost -> {
          if (!ended[id]) {
            ended[id] = true;
            failed++;
            r.retain(id, "h" + id, at, len, now + releaseAfter);
          }
          for (LandingRanges.Retained x : r.holderLost("h" + id)) {
            free(holder, x.offset(), x.length());
          }
        }
        default -> {
          for (LandingRanges.Retained x : r.releaseDue()) {
            free(holder, x.offset(), x.length());
          }
        }
      }
    }
    return new Sim(r, wrong, landedCount, failed);
  }

  private static void free(long[] holder, long at, long len) {
    Arrays.fill(holder, (int) at, (int) (at + len), 0);
  }
}
