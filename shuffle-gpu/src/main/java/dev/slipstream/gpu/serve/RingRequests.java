package dev.slipstream.gpu.serve;

import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.gpu.SlipStatus;
import java.util.ArrayList;
import java.util.List;

/**
 * The protocol's device write request as a resident ring carries it, and the kernel's answer as the
 * protocol's result: what a reader posting into a holder's ring needs on both sides of the ring.
 * Stateless.
 */
public final class RingRequests {
  private RingRequests() {}

  /**
   * Whether {@code req} can go into a ring at all: at most {@value ServeRing#MAX_BLOCKS} blocks.
   * (The landing region it names must also be the one the holder's reader entry was set for.)
   */
  public static boolean fits(WriteRequest req) {
    return !req.entries().isEmpty() && req.entries().size() <= ServeRing.MAX_BLOCKS;
  }

  /**
   * {@code req} for a ring whose reader entry names landing key {@code landingKey}: its blocks, block
   * table, and signal word with its piece count; its deadline {@code nowNanos} plus its budget
   * ({@link System#nanoTime()}: reader and holder share the machine's CLOCK_MONOTONIC), or already
   * past for a request with no budget left (the kernel's clock is good to microseconds, so a
   * deadline of now could still pass its check).
   */
  public static ServeRing.Request request(WriteRequest req, long landingKey, long nowNanos) {
    List<ServeRing.Block> blocks = new ArrayList<>(req.entries().size());
    for (ShuffleMessages.Entry e : req.entries()) {
      blocks.add(new ServeRing.Block(e.mapId(), e.partition(), e.landingOffset(), e.capacity()));
    }
    long deadline = req.budgetMillis() > 0 ? nowNanos + req.budgetMillis() * 1_000_000L : nowNanos - 1_000_000L;
    return new ServeRing.Request(req.requestId(), req.shuffleId(), landingKey, req.tableOffset(), deadline, blocks,
        req.signalOffset(), req.expectedPieces());
  }

  /** Whether the kernel refused because an output is not in its directory (spilled, or not entered): nothing was written. */
  public static boolean notInDirectory(ServeRing.Answer a) {
    return !a.ok() && SlipStatus.of(a.status()) == SlipStatus.SLIP_ERR_BAD_REGION;
  }

  /**
   * The answer to request {@code requestId} as the protocol's result: served with the bytes the
   * kernel pushed and its {@link #timeline}, or failed with the error the host path gives for the
   * same check, naming the holder, the check, the block and the value.
   */
  public static WriteResult result(long requestId, ServeRing.Answer a, String holder) {
    if (a.ok()) {
      return new WriteResult(requestId, null, a.bytes(), "", timeline(a));
    }
    SlipStatus st = SlipStatus.of(a.status());
    return WriteResult.failed(requestId, errorOf(st), "the resident server of executor " + holder + " refused it: "
        + st + " at block " + a.block() + " (value " + a.value() + ")");
  }

  /**
   * A served answer's instants in the host path's timeline: the kernel took the request (received
   * and started: there is no queue between the ring and the kernel), its checks were done and the
   * copy began (checked, lane ready and launched: the kernel needs neither lane nor launch), the
   * copy and the table were finished (ended), the answer was written (answered). {@link
   * ServeTimeline#NONE} where an instant is missing.
   */
  public static ServeTimeline timeline(ServeRing.Answer a) {
    if (a.takenNanos() == 0 || a.copyNanos() == 0 || a.copiedNanos() == 0 || a.answeredNanos() == 0) {
      return ServeTimeline.NONE;
    }
    return new ServeTimeline(a.takenNanos(), a.takenNanos(), a.copyNanos(), a.copyNanos(), a.copyNanos(),
        a.copiedNanos(), a.answeredNanos());
  }

  private static TransportError errorOf(SlipStatus st) {
    return switch (st) {
      case SLIP_ERR_BAD_KEY -> TransportError.BAD_KEY;
      case SLIP_ERR_OUT_OF_RANGE -> TransportError.OUT_OF_RANGE;
      case SLIP_ERR_TIMEOUT -> TransportError.TIMEOUT;
      default -> TransportError.MALFORMED;
    };
  }
}
