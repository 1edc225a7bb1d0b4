package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared-memory request ring: messages in order and once each, full and oversized refused,
 * producers on other mappings of the file (as other processes are), a claimed slot never published
 * taken back, a damaged message dropped, and every malformed file refused with what was got and
 * what was expected.
 */
class RequestRingTest {
  private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

  private static byte[] msg(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** A mapping of the ring's file of its own, to write into it as a misbehaving process would. */
  private static MappedByteBuffer raw(Path p) throws IOException {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size());
      m.order(ByteOrder.LITTLE_ENDIAN);
      return m;
    }
  }

  @Test
  void messagesComeOutInOrderOnceEachAcrossLapsAndAFullRingRefuses(@TempDir Path dir) throws IOException {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      assertEquals(Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE),
          Files.getPosixFilePermissions(ring.path()), "only this user may open it");
      RequestRing.Producer p = RequestRing.open(ring.path());
      assertNull(ring.poll());
      for (int lap = 0; lap < 50; lap++) {
        assertTrue(p.offer(msg("a" + lap)));
        assertTrue(p.offer(msg("b" + lap)));
        assertArrayEquals(msg("a" + lap), ring.poll());
        assertArrayEquals(msg("b" + lap), ring.poll());
        assertNull(ring.poll());
      }
      for (int i = 0; i < 4; i++) {
        assertTrue(p.offer(msg("m" + i)));
      }
      assertFalse(p.offer(msg("m4")), "four slots hold four messages");
      assertArrayEquals(msg("m0"), ring.poll());
      assertTrue(p.offer(msg("m4")), "a slot read is free again");
      for (int i = 1; i <= 4; i++) {
        assertArrayEquals(msg("m" + i), ring.poll());
      }
      assertEquals(256 - 16, p.maxMessage());
      assertFalse(p.offer(new byte[p.maxMessage() + 1]), "a message larger than a slot is not sent");
      byte[] full = new byte[p.maxMessage()];
      full[full.length - 1] = 7;
      assertTrue(p.offer(full));
      assertArrayEquals(full, ring.poll());
      assertTrue(p.offer(new byte[0]));
      assertArrayEquals(new byte[0], ring.poll());
      assertEquals(0, ring.dropped());
    }
  }

  @Test
  void producersOnOtherMappingsAndThreadsLoseAndRepeatNothing(@TempDir Path dir) throws Exception {
    int threads = 4;
    int each = 20_000;
    try (RequestRing ring = RequestRing.create(dir, 64, 256, SECOND)) {
      List<Thread> ts = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        RequestRing.Producer p = RequestRing.open(ring.path()); // a mapping of its own, as another process has
        int id = t;
        ts.add(new Thread(() -> {
          for (int i = 0; i < each; i++) {
            byte[] m = msg(id + ":" + i);
            while (!p.offer(m)) {
              Thread.onSpinWait(); // full: the owner has not caught up
            }
          }
        }));
      }
      ts.forEach(Thread::start);
      Set<String> seen = new HashSet<>();
      int[] next = new int[threads];
      long deadline = System.nanoTime() + 60 * SECOND;
      while (seen.size() < threads * each && System.nanoTime() < deadline) {
        byte[] m = ring.poll();
        if (m == null) {
          Thread.onSpinWait();
          continue;
        }
        String s = new String(m, StandardCharsets.UTF_8);
        assertTrue(seen.add(s), "message " + s + " came twice");
        int t = Integer.parseInt(s.substring(0, s.indexOf(':')));
        int i = Integer.parseInt(s.substring(s.indexOf(':') + 1));
        assertEquals(next[t], i, "producer " + t + "'s messages in its order");
        next[t]++;
      }
      for (Thread t : ts) {
        t.join(10_000);
      }
      assertEquals(threads * each, seen.size());
      assertNull(ring.poll());
      assertEquals(0, ring.dropped());
      assertEquals(0, ring.abandoned());
    }
  }

  @Test
  void aSlotClaimedAndNeverPublishedIsTakenBackAndItsLatePublishFails(@TempDir Path dir) throws Exception {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, TimeUnit.MILLISECONDS.toNanos(20))) {
      RequestRing.Producer p = RequestRing.open(ring.path());
      MappedByteBuffer m = raw(ring.path());
      // A producer claims ticket 0 (the counter moves on) and stops before publishing.
      assertTrue(LONG.compareAndSet(m, RequestRing.TAIL, 0L, 1L));
      assertTrue(p.offer(msg("after")), "ticket 1");
      assertNull(ring.poll(), "ticket 0 holds the head (its wait starts now)");
      assertEquals(0, ring.abandoned());
      Thread.sleep(40);
      assertArrayEquals(msg("after"), ring.poll(), "past the abandon time ticket 0 is taken back, ticket 1 read");
      assertEquals(1, ring.abandoned());
      // The late producer's publish (word 0 -> 1) finds the slot taken back.
      assertFalse(LONG.compareAndSet(m, RequestRing.HEADER, 0L, 1L));
    }
  }

  @Test
  void aDamagedMessageIsDroppedAndTheNextOneRead(@TempDir Path dir) throws Exception {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      RequestRing.Producer p = RequestRing.open(ring.path());
      assertTrue(p.offer(msg("first")));
      assertTrue(p.offer(msg("second")));
      MappedByteBuffer m = raw(ring.path());
      m.put(RequestRing.HEADER + RequestRing.SLOT_HEADER, (byte) 'F'); // its checksum no longer matches
      m.putInt(RequestRing.HEADER + 256 + 8, 10_000); // a length beyond the slot
      assertTrue(p.offer(msg("third")));
      assertArrayEquals(msg("third"), ring.poll());
      assertEquals(2, ring.dropped());
      assertNull(ring.poll());
    }
  }

  /** Messages {@link RequestRing#serve} hands over until one equals {@code last}; hangs past 10 s fail the test. */
  private static List<String> serveUntil(RequestRing ring, String last) {
    return assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
      List<String> got = new ArrayList<>();
      ring.serve(0, () -> !got.isEmpty() && got.get(got.size() - 1).equals(last),
          m -> got.add(new String(m, StandardCharsets.UTF_8)));
      return got;
    }, "the reader hung on a corrupt slot");
  }

  @Test
  void aClaimedSlotWithACorruptSequenceWordIsSkippedAndNeverDelivered(@TempDir Path dir) throws Exception {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      RequestRing.Producer p = RequestRing.open(ring.path());
      assertTrue(p.offer(msg("first")));
      assertTrue(p.offer(msg("second")));
      MappedByteBuffer m = raw(ring.path());
      LONG.setRelease(m, RequestRing.HEADER, 0xdeadL); // slot 0 (ticket 0, published): neither 0 nor 1 now

      assertEquals(List.of("second"), serveUntil(ring, "second"), "the corrupt slot's message is not delivered");
      assertEquals(1, ring.corrupted());
      assertEquals(0, ring.dropped());
      assertTrue(p.offer(msg("third")), "the ring still works");
      assertArrayEquals(msg("third"), ring.poll());
      for (int i = 0; i < 8; i++) { // around the ring again, through the skipped slot
        assertTrue(p.offer(msg("lap" + i)));
        assertArrayEquals(msg("lap" + i), ring.poll());
      }
      assertTrue(ring.broken().isEmpty());
    }
  }

  @Test
  void anUnclaimedSlotWithACorruptSequenceWordNeitherHangsProducersNorTheReader(@TempDir Path dir) throws Exception {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      RequestRing.Producer p = RequestRing.open(ring.path());
      MappedByteBuffer m = raw(ring.path());
      LONG.setRelease(m, RequestRing.HEADER, 5L); // ticket 0 not claimed yet; its word says 5

      assertFalse(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> p.offer(msg("x")),
          "the producer spun on the corrupt slot"), "nothing is sent into a corrupt slot");
      assertNull(ring.poll(), "nothing to read; the slot is given back to its ticket");
      assertEquals(1, ring.corrupted());
      assertTrue(p.offer(msg("x")));
      assertEquals(List.of("x"), serveUntil(ring, "x"));
    }
  }

  @Test
  void aCorruptTicketCounterBreaksTheRingServeReturnsAndProducersStop(@TempDir Path dir) throws Exception {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      RequestRing.Producer p = RequestRing.open(ring.path());
      assertTrue(p.offer(msg("before")));
      assertArrayEquals(msg("before"), ring.poll());
      MappedByteBuffer m = raw(ring.path());
      LONG.setRelease(m, RequestRing.TAIL, 1000L);

      List<String> got = new ArrayList<>();
      assertTimeoutPreemptively(Duration.ofSeconds(10), () -> ring.serve(0, () -> false,
          x -> got.add(new String(x, StandardCharsets.UTF_8))), "serve kept polling a broken ring");
      assertEquals(List.of(), got);
      assertEquals("request ring " + ring.path() + " is broken: ticket counter 1000, expected between the next ticket"
          + " to read, 1, and 5 (4 slots)", ring.broken().orElseThrow());
      assertFalse(p.offer(msg("after")), "producers send nothing into a broken ring");
      assertNull(ring.poll());
    }
  }

  @Test
  void producersSendNothingIntoAClosedRing(@TempDir Path dir) throws Exception {
    RequestRing ring = RequestRing.create(dir, 4, 256, SECOND);
    RequestRing.Producer p = RequestRing.open(ring.path());
    assertTrue(p.offer(msg("open")));
    ring.close();
    assertFalse(p.offer(msg("closed")), "its owner reads it no more");
  }

  @Test
  void malformedFilesAreRefusedNamingWhatWasGotAndExpected(@TempDir Path dir) throws IOException {
    try (RequestRing ring = RequestRing.create(dir, 4, 256, SECOND)) {
      Path good = ring.path();
      assertTrue(RequestRing.NAME.matcher(good.getFileName().toString()).matches(), good.toString());
      Path other = dir.resolve("passwd");
      Files.write(other, new byte[4096]);
      assertEquals("request ring: path " + other + ", expected an absolute path to a file named"
          + " slipstream-ring-<32 hex digits>",
          assertThrows(IllegalArgumentException.class, () -> RequestRing.open(other)).getMessage());
      assertThrows(IllegalArgumentException.class, () -> RequestRing.open(Path.of(good.getFileName().toString())),
          "a relative path");

      Path copy = dir.resolve("slipstream-ring-" + "0".repeat(32));
      Files.copy(good, copy);
      MappedByteBuffer m = raw(copy);
      m.putLong(0, 42);
      assertEquals("request ring " + copy + ": magic 0x2a, expected 0x474e495250494c53 (SLIPRING)",
          assertThrows(IllegalArgumentException.class, () -> RequestRing.open(copy)).getMessage());
      m.putLong(0, RequestRing.MAGIC);
      m.putInt(8, 2);
      assertEquals("request ring " + copy + ": version 2, expected 1",
          assertThrows(IllegalArgumentException.class, () -> RequestRing.open(copy)).getMessage());
      m.putInt(8, 1);
      m.putInt(12, 3);
      assertTrue(assertThrows(IllegalArgumentException.class, () -> RequestRing.open(copy)).getMessage()
          .startsWith("request ring " + copy + ": 3 slots of 256 bytes, expected a power of two"));
      m.putInt(12, 8);
      assertEquals("request ring " + copy + ": " + (128 + 4 * 256) + " bytes, expected " + (128 + 8 * 256)
          + " for 8 slots of 256 bytes",
          assertThrows(IllegalArgumentException.class, () -> RequestRing.open(copy)).getMessage());
      try (FileChannel ch = FileChannel.open(copy, StandardOpenOption.WRITE)) {
        ch.truncate(100);
      }
      assertEquals("request ring " + copy + ": 100 bytes, expected at least the 128-byte header",
          assertThrows(IllegalArgumentException.class, () -> RequestRing.open(copy)).getMessage());
    }
  }

  @Test
  void badShapesAreRefusedAndCloseDeletesTheFile(@TempDir Path dir) throws IOException {
    assertEquals("request ring: 3 slots, expected a power of two in 2..65536",
        assertThrows(IllegalArgumentException.class, () -> RequestRing.create(dir, 3, 256, SECOND)).getMessage());
    assertEquals("request ring: slots of 300 bytes, expected a multiple of 64 in 256..65536",
        assertThrows(IllegalArgumentException.class, () -> RequestRing.create(dir, 4, 300, SECOND)).getMessage());
    assertThrows(IllegalArgumentException.class, () -> RequestRing.create(dir, 65536, 65536, SECOND));
    assertThrows(IllegalArgumentException.class, () -> RequestRing.create(dir, 4, 256, 0));
    RequestRing ring = RequestRing.create(dir, 4, 256, SECOND);
    Path p = ring.path();
    assertTrue(Files.exists(p));
    ring.close();
    assertFalse(Files.exists(p));
    assertNull(ring.poll(), "a closed ring gives nothing");
    try (var files = Files.list(dir)) {
      assertEquals(0, files.count(), "nothing left behind by the refused shapes either");
    }
  }

  @Test
  void ringsWhoseOwnerIsGoneAreRemovedWhenANewOneIsMade(@TempDir Path dir) throws IOException {
    RequestRing live = RequestRing.create(dir, 4, 256, SECOND);
    RequestRing dead = RequestRing.create(dir, 4, 256, SECOND);
    raw(dead.path()).putLong(RequestRing.OWNER_PID, 2_147_483_646L); // above any pid_max: no such process
    Path notARing = dir.resolve("slipstream-ring-notes.txt");
    Files.writeString(notARing, "x");
    try (RequestRing next = RequestRing.create(dir, 4, 256, SECOND)) {
      assertFalse(Files.exists(dead.path()), "the dead owner's ring is gone");
      assertTrue(Files.exists(live.path()), "a live owner's ring stays");
      assertTrue(Files.exists(next.path()));
      assertTrue(Files.exists(notARing), "a file that is not a ring stays");
    } finally {
      live.close();
    }
  }
}
