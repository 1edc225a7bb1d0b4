package dev.slipstream.spark.gpu;

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
import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reader's side of resident serving with a host thread in the kernel's place (CPU, no GPU): a
 * request goes into a holder's ring only once the holder acknowledged it, and only when it fits;
 * it carries its blocks and its signal word; answers complete it, a refusal for an output not in
 * device memory sends it again the host-driven way, other refusals are the holder's answer, and a
 * lost holder fails what is still waiting.
 */
class ResidentRequestsTest {
  private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final RegionDescriptor LANDING = new RegionDescriptor(1, 0, 1 << 20, 0x77, MemoryKind.DEVICE, 0);
  private static final int SLOTS = 16;

  @TempDir
  Path dir;

  private static WriteRequest request(long id, int blocks, RegionDescriptor landing) {
    List<ShuffleMessages.Entry> entries = new ArrayList<>();
    for (int i = 0; i < blocks; i++) {
      entries.add(new ShuffleMessages.Entry(40 + i, i, 0, 4096, 8192L * (i + 1)));
    }
    return new WriteRequest(id, 3, new NodeIdentity("app-1", "r1"), 30_000, landing, 0, 4096, entries,
        new int[] {8}, WriteRequest.ANSWER_SERVED);
  }

  /** The kernel's part: answers ticket {@code t} with {@code status} once it is published; returns the slot's flags word. */
  private static int answer(MappedByteBuffer ring, long t, int status, long bytes) throws InterruptedException {
    int slot = ServeRing.HEADER_BYTES + (int) (t % SLOTS) * ServeRing.SLOT_BYTES;
    long deadline = System.nanoTime() + 10_000_000_000L;
    while ((long) LONG.getAcquire(ring, slot) != t + 1) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("ticket " + t + " was never published");
      }
      Thread.sleep(1);
    }
    int a = ServeRing.HEADER_BYTES + SLOTS * ServeRing.SLOT_BYTES + (int) (t % SLOTS) * ServeRing.ANSWER_BYTES;
    ring.putInt(a + 8, status).putInt(a + 12, 0).putLong(a + 16, bytes).putLong(a + 24, 0x77);
    // The kernel's instants: taken, copy begun, copied, answered (a refusal copies nothing).
    boolean ok = status == 0;
    ring.putLong(a + 32, 1_000).putLong(a + 40, ok ? 2_000 : 0).putLong(a + 48, ok ? 5_000 : 0).putLong(a + 56, 6_000);
    LONG.setRelease(ring, a, t + 1);
    return ring.getInt(slot + 28);
  }

  @Test
  void requestsGoIntoAnAcknowledgedRingAndTheirAnswersCompleteThem() throws Exception {
    Path path = ResidentServing.ringPath(dir.toString(), "app-1", "h1", "r1");
    AtomicInteger viaTransport = new AtomicInteger();
    java.util.function.Supplier<CompletableFuture<WriteResult>> fallback = () -> {
      viaTransport.incrementAndGet();
      return CompletableFuture.completedFuture(new WriteResult(2, null, 7, "", null));
    };
    try (ResidentRequests rr = new ResidentRequests("r1", "app-1", dir.toString())) {
      assertTrue(rr.trySend("h1", request(1, 1, LANDING), LANDING, Duration.ofSeconds(30), fallback).isEmpty(),
          "no ring yet");
      try (ServeRingFile holderSide = ServeRingFile.create(path, SLOTS);
          FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
        MappedByteBuffer ring = ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size());
        ring.order(ByteOrder.LITTLE_ENDIAN);
        Thread.sleep(250); // past the reader's wait before it looks for a missing ring again
        assertTrue(rr.trySend("h1", request(1, 1, LANDING), LANDING, Duration.ofSeconds(30), fallback).isEmpty(),
            "a ring its holder has not acknowledged");
        LONG.setRelease(ring, 24, 4242L); // the holder's ack: its process id in the header

        assertTrue(rr.trySend("h1", request(1, 31, LANDING), LANDING, Duration.ofSeconds(30), fallback).isEmpty(),
            "more blocks than a slot holds");
        RegionDescriptor nic = new RegionDescriptor(9, 0, 1 << 20, 0x77, MemoryKind.DEVICE, 0);
        assertTrue(rr.trySend("h1", request(1, 1, nic), LANDING, Duration.ofSeconds(30), fallback).isEmpty(),
            "another landing region (a NIC registration)");

        CompletableFuture<WriteResult> served = rr.trySend("h1", request(1, 2, LANDING), LANDING,
            Duration.ofSeconds(30), fallback).orElseThrow();
        int flags = answer(ring, 0, 0, 123);
        int slot = ServeRing.HEADER_BYTES;
        assertEquals(1, ring.getLong(slot + 8), "request id");
        assertEquals(2, ring.getInt(slot + 20), "blocks");
        assertEquals(0x77, ring.getLong(slot + 32), "landing key");
        assertEquals(4096, ring.getLong(slot + 56), "signal offset");
        assertEquals(request(1, 2, LANDING).expectedPieces(), flags >>> 8, "the signal's pieces");
        assertEquals(1, flags & 0xff, "the signal asked for");
        assertEquals(41, ring.getLong(slot + 64 + 32), "second block's map output");
        assertEquals(16384, ring.getLong(slot + 64 + 32 + 16), "second block's landing offset");
        WriteResult r = served.get(10, TimeUnit.SECONDS);
        assertTrue(r.served());
        assertEquals(123, r.bytes());
        assertEquals(new ServeTimeline(1_000, 1_000, 2_000, 2_000, 2_000, 5_000, 6_000), r.timeline(),
            "the kernel's instants as the host path's timeline");
        assertTrue(((ResidentRequests.RingAnswer) served).fromRing(), "answered from the ring");

        CompletableFuture<WriteResult> spilled = rr.trySend("h1", request(2, 1, LANDING), LANDING,
            Duration.ofSeconds(30), fallback).orElseThrow();
        answer(ring, 1, SlipStatus.SLIP_ERR_BAD_REGION.code(), 0);
        assertEquals(7, spilled.get(10, TimeUnit.SECONDS).bytes(), "sent again the host-driven way");
        assertFalse(((ResidentRequests.RingAnswer) spilled).fromRing(), "its answer came from the transport");
        assertEquals(1, viaTransport.get());

        CompletableFuture<WriteResult> forged = rr.trySend("h1", request(3, 1, LANDING), LANDING,
            Duration.ofSeconds(30), fallback).orElseThrow();
        answer(ring, 2, SlipStatus.SLIP_ERR_BAD_KEY.code(), 0);
        WriteResult refused = forged.get(10, TimeUnit.SECONDS);
        assertFalse(refused.served());
        assertEquals(TransportError.BAD_KEY, refused.error());
        assertTrue(refused.reason().contains("executor h1") && refused.reason().contains("SLIP_ERR_BAD_KEY"),
            refused.reason());
        assertEquals(1, viaTransport.get(), "a refusal is the holder's answer, not sent again");

        CompletableFuture<WriteResult> waiting = rr.trySend("h1", request(4, 1, LANDING), LANDING,
            Duration.ofSeconds(30), fallback).orElseThrow();
        rr.holderLost("h1");
        ExecutionException lost = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
            () -> waiting.get(10, TimeUnit.SECONDS));
        assertTrue(lost.getCause().getMessage().contains("holder h1 was lost"), lost.getCause().getMessage());
        assertEquals(4, rr.posted());
        assertEquals(1, rr.fallbacks());
      }
    }
    assertFalse(Files.exists(path), "the holder's ring file goes with its maker");
  }
}
