package dev.slipstream.gpu.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongPredicate;
import org.junit.jupiter.api.Test;

/**
 * The ring protocol with host threads in both roles: reader threads post through
 * {@link ServeRing}, and a consumer thread takes tickets in order as the resident kernel does
 * (waits for a slot's sequence word, reads the request, writes the answer, its sequence word
 * last). The consumer checks that every request it reads is whole (each block derived from the
 * request id), so a slot written over before its answer was taken shows as a bad answer.
 */
class ServeRingTest {
  private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

  /** Takes tickets in order and answers them: status 0 and value = request id when whole, 9 otherwise. */
  private static final class Consumer extends Thread {
    final ByteBuffer m;
    /** Where answers go: {@code m}, or the reader's copy of a remote ring (seq raised by its step, as a fetch-add does). */
    final ByteBuffer answers;
    final int slots;
    final LongPredicate holdBack; // tickets answered only once released
    final ConcurrentHashMap<Long, CountDownLatch> released = new ConcurrentHashMap<>();
    volatile boolean stop;
    final AtomicInteger answered = new AtomicInteger();

    Consumer(ByteBuffer memory, int slots, LongPredicate holdBack) {
      this(memory, memory, slots, holdBack);
    }

    Consumer(ByteBuffer memory, ByteBuffer answerMemory, int slots, LongPredicate holdBack) {
      this.m = memory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      this.answers = answerMemory == memory ? m : answerMemory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      this.slots = slots;
      this.holdBack = holdBack;
      setDaemon(true);
    }

    void release(long t) {
      released.computeIfAbsent(t, k -> new CountDownLatch(1)).countDown();
    }

    @Override
    public void run() {
      for (long t = 0; !stop; t++) {
        int at = ServeRing.HEADER_BYTES + (int) (t & (slots - 1)) * ServeRing.SLOT_BYTES;
        while ((long) LONG.getAcquire(m, at + ServeRing.R_SEQ) != t + 1) {
          if (stop) {
            return;
          }
          Thread.onSpinWait();
        }
        long id = m.getLong(at + ServeRing.R_REQUEST_ID);
        int n = m.getInt(at + ServeRing.R_NBLOCKS);
        boolean whole = m.getInt(at + ServeRing.R_MAGIC) == ServeRing.REQUEST_MAGIC && n >= 1 && n <= ServeRing.MAX_BLOCKS
            && m.getLong(at + ServeRing.R_LANDING_KEY) == key(id);
        long bytes = 0;
        for (int i = 0; whole && i < n; i++) {
          int b = at + ServeRing.R_BLOCKS + i * ServeRing.B_BYTES;
          whole = m.getLong(b + ServeRing.B_MAP) == id * 31 + i && m.getInt(b + ServeRing.B_PARTITION) == i
              && m.getLong(b + ServeRing.B_DST) == 4096L * (i + 1);
          bytes += m.getLong(b + ServeRing.B_CAPACITY);
        }
        if (holdBack.test(t)) {
          try {
            released.computeIfAbsent(t, k -> new CountDownLatch(1)).await();
          } catch (InterruptedException e) {
            return;
          }
        }
        int a = ServeRing.HEADER_BYTES + slots * ServeRing.SLOT_BYTES + (int) (t & (slots - 1)) * ServeRing.ANSWER_BYTES;
        answers.putInt(a + ServeRing.A_STATUS, whole ? 0 : 9).putInt(a + ServeRing.A_BLOCK, n)
            .putLong(a + ServeRing.A_BYTES, bytes).putLong(a + ServeRing.A_VALUE, id);
        if (answers == m) {
          LONG.setRelease(m, a + ServeRing.A_SEQ, t + 1);
        } else {
          long old = (long) LONG.getAcquire(answers, a + ServeRing.A_SEQ);
          LONG.setRelease(answers, a + ServeRing.A_SEQ, old + ServeRing.seqStep(t, slots));
        }
        answered.incrementAndGet();
      }
    }
  }

  private static long key(long id) {
    return id * 0x9E3779B97F4A7C15L;
  }

  private static ServeRing.Request request(long id, int blocks) {
    List<ServeRing.Block> bs = new ArrayList<>();
    for (int i = 0; i < blocks; i++) {
      bs.add(new ServeRing.Block(id * 31 + i, i, 4096L * (i + 1), 100 + i));
    }
    return new ServeRing.Request(id, 7, key(id), 0, Long.MAX_VALUE, bs);
  }

  /**
   * {@code threads} threads each post {@code each} requests of 1 to 30 blocks and wait for each
   * answer; fails naming a few requests that got a wrong or no answer; returns those answered right.
   */
  private static int postFromThreads(ServeRing ring, int threads, int each) throws InterruptedException {
    List<Thread> posters = new ArrayList<>();
    ConcurrentHashMap<Long, String> bad = new ConcurrentHashMap<>();
    AtomicInteger ok = new AtomicInteger();
    for (int k = 0; k < threads; k++) {
      int base = k * each;
      Thread th = new Thread(() -> {
        for (int i = 0; i < each; i++) {
          long id = base + i;
          int blocks = 1 + (int) (id % ServeRing.MAX_BLOCKS);
          long t = ring.post(request(id, blocks), 10 * SECOND);
          ServeRing.Answer a = t < 0 ? null : ring.await(t, 10 * SECOND);
          if (a == null || !a.ok() || a.value() != id || a.block() != blocks) {
            bad.put(id, String.valueOf(a));
          } else {
            ok.incrementAndGet();
          }
        }
      });
      posters.add(th);
      th.start();
    }
    for (Thread th : posters) {
      th.join(60_000);
    }
    assertTrue(bad.isEmpty(), bad.size() + " requests got a wrong or no answer, e.g. " + bad.entrySet().stream().limit(3).toList());
    return ok.get();
  }

  @Test
  void readersOnManyThreadsGetEachTheirOwnAnswerThroughASmallRing() throws Exception {
    int slots = 8;
    ByteBuffer mem = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots));
    ServeRing ring = ServeRing.format(mem, slots, 1);
    Consumer c = new Consumer(mem, slots, t -> false);
    c.start();
    int threads = 4;
    int each = 2000;
    int ok = postFromThreads(ring, threads, each);
    c.stop = true;
    assertEquals(threads * each, ok);
    assertEquals(threads * each, c.answered.get(), "every ticket was published and answered once");
  }

  /**
   * A remote holder: posts go into the reader's copy and a publisher writes each slot into the
   * holder's copy (the bytes, then the sequence word raised by its step, as the NIC's write and
   * fetch-add do, in order); the holder answers into the reader's copy the same way. Every reader
   * gets its own answer, and the sequence words reach ticket + 1 on every lap.
   */
  @Test
  void readersReachAHolderCopyThroughAPublisherAndGetTheirAnswersInTheirOwn() throws Exception {
    int slots = 8;
    ByteBuffer mine = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots));
    ByteBuffer holder = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots)).order(ByteOrder.LITTLE_ENDIAN);
    ServeRing ring = ServeRing.format(mine, slots, 1);
    ServeRing.format(holder, slots, 2);
    ByteBuffer src = mine.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    ConcurrentHashMap<Long, String> wrongStep = new ConcurrentHashMap<>();
    ring.publishWith((at, t, step) -> {
      synchronized (holder) { // one queue pair: executed in order
        for (int i = 8; i < ServeRing.SLOT_BYTES; i += 8) {
          holder.putLong(at + i, src.getLong(at + i));
        }
        long old = (long) LONG.getAcquire(holder, at + ServeRing.R_SEQ);
        if (old + step != t + 1) {
          wrongStep.put(t, "seq " + old + " + " + step);
        }
        LONG.setRelease(holder, at + ServeRing.R_SEQ, old + step);
      }
    });
    Consumer c = new Consumer(holder, mine, slots, t -> false);
    c.start();
    int ok = postFromThreads(ring, 4, 1000);
    c.stop = true;
    assertEquals(4000, ok);
    assertTrue(wrongStep.isEmpty(), "sequence steps that did not reach ticket + 1: " + wrongStep);
    assertEquals(4000, c.answered.get());
  }

  @Test
  void aPublishThatFailsBreaksTheRingAndSaysWhy() {
    ByteBuffer mem = ByteBuffer.allocateDirect((int) ServeRing.bytes(4));
    ServeRing ring = ServeRing.format(mem, 4, 1);
    IllegalStateException down = new IllegalStateException("queue pair failed");
    List<Long> published = new ArrayList<>();
    ring.publishWith((at, t, step) -> {
      if (t == 2) {
        throw down;
      }
      published.add(t);
    });
    assertEquals(0, ring.post(request(1, 1), SECOND));
    assertEquals(1, ring.post(request(2, 1), SECOND));
    assertEquals(-1, ring.post(request(3, 1), SECOND), "a request not in the holder's copy");
    assertTrue(ring.broken());
    assertEquals(down, ring.publishFailure());
    assertEquals(-1, ring.post(request(4, 1), SECOND), "nothing after it is taken: the ring stays broken");
    assertEquals(List.of(0L, 1L), published);
    assertEquals(1, ServeRing.seqStep(0, 4));
    assertEquals(4, ServeRing.seqStep(3, 4));
    assertEquals(4, ServeRing.seqStep(9, 4));
  }

  @Test
  void aRequestItsPosterGaveUpOnFreesItsSlotOnceItsAnswerComes() throws Exception {
    int slots = 2;
    ByteBuffer mem = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots));
    ServeRing ring = ServeRing.format(mem, slots, 1);
    Consumer c = new Consumer(mem, slots, t -> t == 0);
    c.start();
    long t0 = ring.post(request(100, 1), SECOND);
    assertEquals(0, t0);
    assertNull(ring.await(t0, TimeUnit.MILLISECONDS.toNanos(50)), "held back: no answer yet");
    long t1 = ring.post(request(101, 2), SECOND);
    // Ticket 2 needs ticket 0's slot: it waits for ticket 0's answer, which nobody will take.
    Thread later = new Thread(() -> c.release(0));
    later.start();
    long t2 = ring.post(request(102, 3), 5 * SECOND);
    assertEquals(2, t2, "the slot came free once the abandoned request's answer arrived");
    assertEquals(101, ring.await(t1, SECOND).value());
    assertEquals(102, ring.await(t2, SECOND).value());
    c.stop = true;
  }

  @Test
  void aRingWhoseHolderStoppedAnsweringBreaksAndRefusesAtOnce() {
    int slots = 2;
    ByteBuffer mem = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots));
    ServeRing ring = ServeRing.format(mem, slots, 1); // no consumer
    assertEquals(0, ring.post(request(1, 1), SECOND));
    assertEquals(1, ring.post(request(2, 1), SECOND));
    long t0 = System.nanoTime();
    assertEquals(-1, ring.post(request(3, 1), TimeUnit.MILLISECONDS.toNanos(100)), "the slot never came free");
    assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(100));
    assertTrue(ring.broken());
    t0 = System.nanoTime();
    assertEquals(-1, ring.post(request(4, 1), 10 * SECOND));
    assertTrue(System.nanoTime() - t0 < SECOND, "a broken ring refuses without waiting");
  }

  @Test
  void theLayoutIsWhatTheKernelReads() {
    int slots = 4;
    ByteBuffer mem = ByteBuffer.allocateDirect((int) ServeRing.bytes(slots));
    ServeRing ring = ServeRing.format(mem, slots, 4242);
    ByteBuffer m = mem.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    assertEquals(ServeRing.RING_MAGIC, m.getInt(0));
    assertEquals(ServeRing.VERSION, m.getShort(4));
    assertEquals(slots, m.getInt(8));
    assertEquals(ServeRing.SLOT_BYTES, m.getInt(12));
    assertEquals(4242, m.getLong(16));
    assertEquals(128 + 4 * (1024 + 64), ServeRing.bytes(slots));
    long t = ring.post(new ServeRing.Request(77, 5, 0xABCDL, 16, 123456789L,
        List.of(new ServeRing.Block(9, 3, 4096, 8192))), SECOND);
    int at = 128 + (int) t * 1024;
    assertEquals(1, m.getLong(at), "sequence word: ticket + 1");
    assertEquals(77, m.getLong(at + 8));
    assertEquals(ServeRing.REQUEST_MAGIC, m.getInt(at + 16));
    assertEquals(1, m.getInt(at + 20));
    assertEquals(5, m.getInt(at + 24));
    assertEquals(0xABCDL, m.getLong(at + 32));
    assertEquals(16, m.getLong(at + 40));
    assertEquals(123456789L, m.getLong(at + 48));
    assertEquals(9, m.getLong(at + 64));
    assertEquals(3, m.getInt(at + 72));
    assertEquals(4096, m.getLong(at + 80));
    assertEquals(8192, m.getLong(at + 88));
    assertNull(ring.poll(t));
    int a = 128 + 4 * 1024;
    m.putInt(a + 8, 8).putInt(a + 12, 0).putLong(a + 16, 0).putLong(a + 24, 8193).putLong(a + 32, 1000)
        .putLong(a + 40, 0).putLong(a + 48, 0).putLong(a + 56, 1500).putLong(a, 1);
    ServeRing.Answer got = ring.poll(t);
    assertNotNull(got);
    assertEquals(new ServeRing.Answer(0, 8, 0, 0, 8193, 1000, 0, 0, 1500), got);
  }

  @Test
  void badRingsAndRequestsAreRefusedSayingWhatWasExpected() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ServeRing.format(ByteBuffer.allocateDirect(1 << 20), 3, 1));
    assertTrue(e.getMessage().contains("3 slots") && e.getMessage().contains("power of two"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> ServeRing.format(ByteBuffer.allocate(1 << 20), 4, 1));
    assertTrue(e.getMessage().contains("heap"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> ServeRing.format(ByteBuffer.allocateDirect(100), 4, 1));
    assertTrue(e.getMessage().contains("needs " + ServeRing.bytes(4)), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> request(1, ServeRing.MAX_BLOCKS + 1));
    assertTrue(e.getMessage().contains("got 31"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> new ServeRing.Request(1, 1, 1, 0, 0, List.of()));
    assertTrue(e.getMessage().contains("got 0"), e.getMessage());
  }
}
