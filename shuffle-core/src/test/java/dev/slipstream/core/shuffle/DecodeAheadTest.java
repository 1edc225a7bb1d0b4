package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.InflaterInputStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every test ends within a minute: a lost hand-over shows as a failure, not a hung build. */
@Timeout(60)
class DecodeAheadTest {
  private static final int CHUNK = 8 * 1024;
  private final ExecutorService pool = Executors.newFixedThreadPool(3);

  @AfterEach
  void stop() {
    pool.shutdownNow();
  }

  /** A raw block stream that records whether it was closed. */
  private static final class Raw extends FilterInputStream {
    volatile boolean closed;

    Raw(byte[] stored) {
      super(new ByteArrayInputStream(stored));
    }

    @Override
    public void close() throws IOException {
      closed = true;
      super.close();
    }
  }

  private static byte[] deflate(byte[] plain) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (DeflaterOutputStream d = new DeflaterOutputStream(out)) {
      d.write(plain);
    }
    return out.toByteArray();
  }

  private static byte[] block(Random r, int size, boolean compressible) {
    byte[] b = new byte[size];
    if (compressible) {
      for (int i = 0; i < size; i++) {
        b[i] = (byte) (i / 512);
      }
    } else {
      r.nextBytes(b);
    }
    return b;
  }

  /** Reads the stream with reads of varying sizes, single bytes among them. */
  private static byte[] readAll(InputStream in, Random r) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] buf = new byte[20_000];
    while (true) {
      if (r.nextInt(8) == 0) {
        int b = in.read();
        if (b < 0) {
          break;
        }
        out.write(b);
        continue;
      }
      int n = in.read(buf, 0, 1 + r.nextInt(buf.length));
      if (n < 0) {
        break;
      }
      out.write(buf, 0, n);
    }
    return out.toByteArray();
  }

  private static final DecodeAhead.Decoder<Integer> INFLATE = (s, raw) -> new InflaterInputStream(raw);

  @Test
  void blocksComeBackDecodedInOrderWithinTheBudget() throws Exception {
    Random r = new Random(7);
    long budget = 8 * CHUNK;
    AtomicLong maxClaimed = new AtomicLong();
    List<byte[]> plain = new ArrayList<>();
    List<Raw> raws = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      // empty, tiny, several chunks, and highly compressible ones that expand far past the budget
      int size = i % 10 == 0 ? 0 : i % 7 == 0 ? 300_000 : r.nextInt(3 * CHUNK);
      plain.add(block(r, size, i % 3 == 0));
    }
    DecodeAhead<Integer> ahead = new DecodeAhead<>(pool, INFLATE, budget, CHUNK, 16);
    int added = 0;
    int read = 0;
    while (read < plain.size()) {
      while (added < plain.size() && ahead.wantsMore()) {
        byte[] stored = deflate(plain.get(added));
        Raw raw = new Raw(stored);
        raws.add(raw);
        ahead.add(added, raw, stored.length, true);
        added++;
      }
      maxClaimed.accumulateAndGet(ahead.claimedBytes(), Math::max);
      DecodeAhead.Decoded<Integer> d = ahead.next();
      assertEquals(read, d.source());
      byte[] got = readAll(d.stream(), r);
      maxClaimed.accumulateAndGet(ahead.claimedBytes(), Math::max);
      assertArrayEquals(plain.get(read), got, "block " + read);
      d.stream().close();
      assertTrue(raws.get(read).closed, "block " + read + "'s raw stream is closed with its decoded stream");
      read++;
    }
    assertTrue(ahead.isEmpty());
    ahead.close();
    assertTrue(maxClaimed.get() <= budget, "held " + maxClaimed.get() + " decoded bytes ahead, budget " + budget);
    assertTrue(ahead.aheadBytes() > 0, "the pool decoded nothing ahead");
    assertEquals(0, ahead.claimedBytes());
  }

  @Test
  void aParkedJobIsResumedAsTheTaskReadsAndTakenOverWhenReached() throws Exception {
    ArrayDeque<Runnable> submitted = new ArrayDeque<>();
    Set<Thread> decodedOn = ConcurrentHashMap.newKeySet();
    DecodeAhead.Decoder<Integer> recording = (s, raw) -> {
      decodedOn.add(Thread.currentThread());
      return new InflaterInputStream(raw);
    };
    DecodeAhead<Integer> ahead = new DecodeAhead<>(submitted::add, recording, CHUNK, CHUNK, 4);
    Random r = new Random(3);
    byte[] first = block(r, 3 * CHUNK + 100, false);
    byte[] second = block(r, 2 * CHUNK, false);
    ahead.add(0, new Raw(deflate(first)), 1, true);
    ahead.add(1, new Raw(deflate(second)), 1, true);
    Runnable job0 = submitted.poll();
    Runnable job1 = submitted.poll();
    job0.run(); // one chunk, then the budget is spent: parks
    job1.run(); // no budget at all: parks with nothing
    assertEquals(CHUNK, ahead.claimedBytes());
    assertTrue(submitted.isEmpty());

    DecodeAhead.Decoded<Integer> d0 = ahead.next(); // parked: taken over without waiting
    byte[] head = d0.stream().readNBytes(CHUNK);
    assertArrayEquals(java.util.Arrays.copyOf(first, CHUNK), head);
    assertEquals(1, d0.stream().read(new byte[1])); // past the chunk: budget freed, block 1 resumed
    assertEquals(1, submitted.size(), "reading past a chunk resumes the parked job");
    submitted.poll().run(); // block 1 decodes its one chunk ahead
    byte[] rest = d0.stream().readAllBytes(); // the rest of block 0 is decoded on this thread
    assertEquals(first.length - CHUNK - 1, rest.length);
    assertArrayEquals(java.util.Arrays.copyOfRange(first, CHUNK + 1, first.length), rest);
    d0.stream().close();

    DecodeAhead.Decoded<Integer> d1 = ahead.next();
    assertArrayEquals(second, d1.stream().readAllBytes());
    d1.stream().close();
    assertEquals(0, ahead.claimedBytes());
    ahead.close();
  }

  @Test
  void aFailedDecodeIsRethrownAtItsBlockAndClosesIt() throws Exception {
    ArrayDeque<Runnable> submitted = new ArrayDeque<>();
    DecodeAhead<Integer> ahead = new DecodeAhead<>(submitted::add, INFLATE, 4 * CHUNK, CHUNK, 4);
    byte[] good = block(new Random(1), 5000, false);
    Raw ok = new Raw(deflate(good));
    Raw bad = new Raw(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}); // not a deflate stream
    ahead.add(0, ok, 10, true);
    ahead.add(1, bad, 8, true);
    submitted.forEach(Runnable::run);
    DecodeAhead.Decoded<Integer> d0 = ahead.next();
    assertArrayEquals(good, d0.stream().readAllBytes());
    d0.stream().close();
    IOException e = assertThrows(IOException.class, ahead::next);
    assertTrue(e.getMessage() != null && !e.getMessage().isEmpty(), "the codec's own message: " + e);
    assertTrue(bad.closed);
    assertEquals(0, ahead.claimedBytes());
    ahead.close();
  }

  @Test
  void closeDropsJobsNotStartedWaitsForRunningOnesAndClosesEveryBlock() throws Exception {
    CountDownLatch inDecode = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger decodes = new AtomicInteger();
    AtomicInteger submissions = new AtomicInteger();
    ArrayDeque<Runnable> later = new ArrayDeque<>();
    java.util.concurrent.Executor oneRunsNow = task -> {
      if (submissions.getAndIncrement() == 0) {
        pool.execute(task);
      } else {
        later.add(task);
      }
    };
    DecodeAhead.Decoder<Integer> slow = (s, raw) -> {
      decodes.incrementAndGet();
      inDecode.countDown();
      try {
        release.await();
      } catch (InterruptedException e) {
        throw new IOException(e);
      }
      return new InflaterInputStream(raw);
    };
    DecodeAhead<Integer> ahead = new DecodeAhead<>(oneRunsNow, slow, 4 * CHUNK, CHUNK, 4);
    List<Raw> raws = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Raw raw = new Raw(deflate(block(new Random(i), 3 * CHUNK, false)));
      raws.add(raw);
      ahead.add(i, raw, 10, true);
    }
    assertTrue(inDecode.await(10, TimeUnit.SECONDS));
    Thread closer = new Thread(ahead::close);
    closer.start();
    closer.join(300);
    assertTrue(closer.isAlive(), "close returned while a job was still reading its block");
    assertFalse(raws.get(0).closed, "a running job's block was closed under it");
    release.countDown();
    closer.join(10_000);
    assertFalse(closer.isAlive());
    for (Raw raw : raws) {
      assertTrue(raw.closed);
    }
    for (Runnable r : later) {
      r.run(); // dropped jobs do nothing
    }
    assertEquals(1, decodes.get());
    assertEquals(0, ahead.claimedBytes());
    assertThrows(IllegalStateException.class, () -> ahead.add(9, new Raw(new byte[0]), 0, true));
  }

  @Test
  void theTaskDecodesBlocksThePoolRefusesOrMayNotRead() throws Exception {
    Set<Thread> decodedOn = ConcurrentHashMap.newKeySet();
    DecodeAhead.Decoder<Integer> recording = (s, raw) -> {
      decodedOn.add(Thread.currentThread());
      return new InflaterInputStream(raw);
    };
    DecodeAhead<Integer> ahead = new DecodeAhead<>(t -> {
      throw new RejectedExecutionException("pool is shut down");
    }, recording, 4 * CHUNK, CHUNK, 4);
    byte[] a = block(new Random(5), 50_000, true);
    byte[] b = block(new Random(6), 20_000, false);
    ahead.add(0, new Raw(deflate(a)), 1, true);
    ahead.add(1, new Raw(deflate(b)), 1, false);
    DecodeAhead.Decoded<Integer> d0 = ahead.next();
    assertArrayEquals(a, d0.stream().readAllBytes());
    d0.stream().close();
    DecodeAhead.Decoded<Integer> d1 = ahead.next();
    assertArrayEquals(b, d1.stream().readAllBytes());
    d1.stream().close();
    assertEquals(Set.of(Thread.currentThread()), decodedOn);
    assertEquals(0, ahead.aheadBytes());
    ahead.close();
  }

  @Test
  void refusesABudgetSmallerThanAChunk() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new DecodeAhead<>(pool, INFLATE, CHUNK - 1, CHUNK, 4));
    assertTrue(e.getMessage().contains("8191") && e.getMessage().contains("8192"), e.getMessage());
  }
}
