package dev.slipstream.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.LandingSignal;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What every block writer must do, written once (as the transport conformance suite is for
 * transports) and run for each writer by a subclass that makes its {@link ServingRig}. Requests go
 * from the reader node to the holder node as in a job, so the holder's block server admits and
 * checks them and the writer under test writes them. A writer must land exact bytes, the protocol's
 * block table and signal, the signal after every byte; write nothing for a request it or the server
 * refuses (a map output or partition not there, a range outside the landing region, a landing
 * region its reader did not register, a request past its budget); and report every request exactly
 * once, also when the reader is lost with requests in flight.
 */
public abstract class ServingConformanceSuite {
  private static final int SHUFFLE = 7;
  private static final Duration ANSWER_WITHIN = Duration.ofSeconds(30);

  protected ServingRig rig;

  /** The rig of the writer under test (a subclass skips here, with the reason, where it cannot run). */
  protected abstract ServingRig newRig() throws Exception;

  @BeforeEach
  void open() throws Exception {
    rig = newRig();
  }

  @AfterEach
  void close() throws Exception {
    if (rig != null) {
      rig.close();
    }
  }

  /** One block a request asks for, and what it must land. */
  private record Want(long mapId, int partition, byte[] bytes, long rows) {}

  /** A request laid out in {@code l}: blocks at 16-byte aligned offsets, then the table, then the signal. */
  private WriteRequest layOut(ServingRig.Landing l, RegionDescriptor region, List<Want> wants, long budgetMillis) {
    List<ShuffleMessages.Entry> entries = new ArrayList<>();
    long at = l.base();
    for (Want w : wants) {
      long capacity = align16(Math.max(16, w.bytes().length));
      entries.add(new ShuffleMessages.Entry(w.mapId(), w.partition(), 0, capacity, at));
      at += capacity;
    }
    long table = at;
    long signal = align16(table + BlockTable.bytes(wants.size()));
    return new WriteRequest(rig.reader().nextRequestId(), SHUFFLE, rig.reader().identity(), budgetMillis, region,
        table, signal, entries, rig.widths(), WriteRequest.ANSWER_SERVED);
  }

  private static long need(List<Want> wants) {
    long n = 0;
    for (Want w : wants) {
      n += align16(Math.max(16, w.bytes().length));
    }
    return n + align16(BlockTable.bytes(wants.size())) + 16;
  }

  private static long align16(long n) {
    return (n + 15) & ~15L;
  }

  private CompletableFuture<WriteResult> send(WriteRequest req) {
    return rig.send(req, ANSWER_WITHIN);
  }

  private static WriteResult answer(CompletableFuture<WriteResult> f) throws Exception {
    return f.get(ANSWER_WITHIN.toSeconds() + 10, TimeUnit.SECONDS);
  }

  private long signal(ServingRig.Landing l, WriteRequest req) throws Exception {
    return ByteBuffer.wrap(l.read(req.signalOffset(), 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
  }

  private static List<Want> wants(ServingRig.Output out, long mapId, int... partitions) {
    List<Want> w = new ArrayList<>();
    for (int p : partitions) {
      w.add(new Want(mapId, p, out.bytes()[p], out.rows()[p]));
    }
    return w;
  }

  /** Checks that {@code req} landed exactly {@code wants}: bytes, table, signal. */
  private void checkLanded(ServingRig.Landing l, WriteRequest req, List<Want> wants, String what) throws Exception {
    long total = 0;
    for (int i = 0; i < wants.size(); i++) {
      Want w = wants.get(i);
      ShuffleMessages.Entry e = req.entries().get(i);
      assertArrayEquals(w.bytes(), l.read(e.landingOffset(), w.bytes().length), what + ": block " + i + " ("
          + w.mapId() + ", " + w.partition() + ")");
      total += w.bytes().length;
    }
    ByteBuffer table = ByteBuffer.wrap(l.read(req.tableOffset(), (int) req.tableBytes()));
    BlockTable.checkHeader(table, req.requestId(), wants.size());
    for (int i = 0; i < wants.size(); i++) {
      BlockTable.Record r = BlockTable.record(table, i);
      assertEquals(wants.get(i).bytes().length, r.bytes(), what + ": table record " + i + " bytes");
      assertEquals(wants.get(i).rows(), r.rows(), what + ": table record " + i + " rows");
    }
    assertEquals(LandingSignal.of(req.expectedPieces(), total + req.tableBytes()), signal(l, req),
        what + ": the signal counts every piece and byte, the table's own included");
  }

  private static void assertZero(ServingRig.Landing l, long length, String what) throws Exception {
    byte[] b = l.read(l.base(), (int) length);
    for (int i = 0; i < b.length; i++) {
      if (b[i] != 0) {
        throw new AssertionError(what + ": byte " + i + " of the landing range was written (0x"
            + Integer.toHexString(b[i] & 0xff) + ")");
      }
    }
  }

  @Test
  void blocksOfSeveralMapOutputsLandByteExactWithTheTableAndTheSignal() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {3000, 0, 40_000, 777});
    ServingRig.Output b = rig.commit(SHUFFLE, 2, new int[] {5000, 12_000, 1, 2_500_000});
    List<Want> wants = new ArrayList<>(wants(a, 1, 0, 1, 2, 3));
    wants.addAll(wants(b, 2, 3, 1));
    ServingRig.Landing l = rig.landing(need(wants));
    WriteRequest req = layOut(l, l.region(), wants, 30_000);
    WriteResult r = answer(send(req));
    assertTrue(r.served(), r.reason());
    long total = wants.stream().mapToLong(w -> w.bytes().length).sum();
    assertEquals(total, r.bytes(), "the answer counts the block bytes written");
    checkLanded(l, req, wants, "request " + req.requestId());
    rig.checkServedByTheWriterUnderTest("request " + req.requestId());
  }

  @Test
  void whenTheSignalIsCompleteEveryByteHasLanded() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1 << 20, 300_000, 4096});
    for (int n = 0; n < 10; n++) {
      List<Want> wants = wants(a, 1, 0, 1, 2);
      ServingRig.Landing l = rig.landing(need(wants));
      WriteRequest req = layOut(l, l.region(), wants, 30_000);
      CompletableFuture<WriteResult> f = send(req);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      long s;
      while (LandingSignal.pieces(s = signal(l, req)) < req.expectedPieces()) {
        assertTrue(System.nanoTime() < deadline, "request " + req.requestId() + ": signal at " + Long.toHexString(s)
            + " after 30 s");
        Thread.onSpinWait();
      }
      // The data is read after the signal was seen complete, in that order (the rig's reads are plain reads).
      java.lang.invoke.VarHandle.acquireFence();
      checkLanded(l, req, wants, "request " + n + " as soon as its signal was complete");
      assertTrue(answer(f).served());
    }
    rig.checkServedByTheWriterUnderTest("10 requests watched through their signal");
  }

  /**
   * Sends a request for {@code wants} into a fresh landing range, naming {@code region} (null: the
   * range's own) with {@code budgetMillis}, and checks that it was refused with nothing written.
   */
  private WriteResult refused(List<Want> wants, java.util.function.UnaryOperator<RegionDescriptor> region,
      long budgetMillis, String what) throws Exception {
    ServingRig.Landing l = rig.landing(need(wants));
    WriteResult r = answer(send(layOut(l, region.apply(l.region()), wants, budgetMillis)));
    assertFalse(r.served(), what + ": served");
    assertNotNull(r.error());
    assertZero(l, need(wants), what);
    return r;
  }

  @Test
  void aRequestForAMapOutputNotHereIsRefusedAndWritesNothing() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1000, 2000});
    List<Want> wants = new ArrayList<>(wants(a, 1, 0));
    wants.add(new Want(99, 0, new byte[64], 0));
    WriteResult r = refused(wants, d -> d, 30_000, "a map output not here");
    assertTrue(r.reason().contains("99"), "names the map output: " + r.reason());
  }

  @Test
  void aPartitionOutsideTheMapOutputIsRefusedAndWritesNothing() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1000, 2000});
    List<Want> wants = new ArrayList<>(wants(a, 1, 1));
    wants.add(new Want(1, 2, new byte[64], 0));
    WriteResult r = refused(wants, d -> d, 30_000, "a partition outside the output");
    assertEquals(TransportError.OUT_OF_RANGE, r.error(), r.reason());
  }

  @Test
  void aRangeOutsideTheLandingRegionIsRefusedBeforeTheWriterAndWritesNothing() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1000});
    WriteResult r = refused(wants(a, 1, 0), d -> new RegionDescriptor(d.id(), d.base(), 512, d.key(), d.kind(),
        d.deviceId()), 30_000, "a request reaching past its region");
    assertEquals(TransportError.OUT_OF_RANGE, r.error(), r.reason());
  }

  @Test
  void aLandingRegionItsReaderDidNotRegisterGetsNothing() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1000, 50_000});
    WriteResult r = refused(wants(a, 1, 0, 1), d -> new RegionDescriptor(d.id(), d.base(), d.length(),
        d.key() ^ 0x5a5a, d.kind(), d.deviceId()), 30_000, "a forged landing key");
    assertTrue(r.error() == TransportError.BAD_KEY || r.error() == TransportError.UNKNOWN_REGION, r.error() + ": "
        + r.reason());
  }

  @Test
  void aRequestPastItsBudgetIsDroppedWritingNothing() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {1000});
    WriteResult r = refused(wants(a, 1, 0), d -> d, 0, "a late request");
    assertEquals(TransportError.TIMEOUT, r.error(), r.reason());
  }

  @Test
  void everyRequestIsReportedExactlyOnceWhenTheReaderIsLostWithRequestsInFlight() throws Exception {
    ServingRig.Output a = rig.commit(SHUFFLE, 1, new int[] {600_000, 600_000, 600_000, 600_000});
    int n = 24;
    for (int i = 0; i < n; i++) {
      List<Want> wants = wants(a, 1, i % 4, (i + 1) % 4);
      ServingRig.Landing l = rig.landing(need(wants));
      send(layOut(l, l.region(), wants, 30_000));
    }
    // Lost once every request reached the holder (most are still being written then).
    long arrived = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (rig.requestsIn() < n && System.nanoTime() < arrived) {
      Thread.onSpinWait();
    }
    assertEquals(n, rig.requestsIn(), "requests that reached the holder within 30 s");
    rig.loseReader();
    // Each request ends once: served, failed, or refused (its reader gone from the peer table
    // before it was admitted); none is left pinning outputs or lanes.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (rig.requestsEnded() < rig.requestsIn() && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    Thread.sleep(200); // a second report of any of them would come about now
    ShuffleNode h = rig.holder();
    String counts = "in " + rig.requestsIn() + ", ended " + rig.requestsEnded() + " (holder node: received "
        + h.requestsReceived() + ", served " + h.requestsServed() + ", failed " + h.serveFailures() + ", refused "
        + h.requestsRefused() + ")";
    assertEquals(rig.requestsIn(), rig.requestsEnded(), counts);
    assertEquals(0, rig.reportsBeyondFirst(), "no request was reported twice");
  }
}
