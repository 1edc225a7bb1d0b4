package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
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
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.InflaterInputStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every test ends within a minute: a lost hand-over shows as a failure, not a hung build. */
@Timeout(60)
class EncodeLanesTest {
  private static final int CHUNK = 4096;
  private final ExecutorService pool = Executors.newFixedThreadPool(3);

  @AfterEach
  void stop() {
    pool.shutdownNow();
  }

  /** The raw bytes written to all partitions (null: a partition never written). */
  private static long bytes(ByteArrayOutputStream[] partitions) {
    long n = 0;
    for (ByteArrayOutputStream p : partitions) {
      n += p == null ? 0 : p.size();
    }
    return n;
  }

  private static byte[] inflate(byte[] stored) throws IOException {
    return new InflaterInputStream(new ByteArrayInputStream(stored)).readAllBytes();
  }

  /** Writes random runs (single bytes, small writes, writes of several chunks) into random partitions. */
  private static ByteArrayOutputStream[] writeRandomly(EncodeLanes lanes, int partitions, Random r) throws IOException {
    ByteArrayOutputStream[] expected = new ByteArrayOutputStream[partitions];
    for (int i = 0; i < 3000; i++) {
      int p = r.nextInt(partitions);
      if (expected[p] == null) {
        expected[p] = new ByteArrayOutputStream();
      }
      OutputStream o = lanes.partition(p);
      int kind = r.nextInt(10);
      if (kind == 0) {
        int b = r.nextInt(256);
        o.write(b);
        expected[p].write(b);
      } else {
        byte[] d = new byte[kind == 9 ? 3 * CHUNK + r.nextInt(CHUNK) : r.nextInt(700)];
        for (int k = 0; k < d.length; k++) {
          d[k] = (byte) (r.nextInt(4) == 0 ? r.nextInt() : k / 64); // compressible, not trivially
        }
        int off = d.length > 2 ? 1 : 0;
        int len = d.length - 2 * off;
        o.write(d, off, len);
        expected[p].write(d, off, len);
      }
    }
    return expected;
  }

  @Test
  void everyPartitionIsEncodedInOrderAndWithinTheBudget() throws Exception {
    int partitions = 37;
    long budget = 4L * CHUNK;
    ByteArrayOutputStream[] sinks = new ByteArrayOutputStream[partitions];
    AtomicLong maxInFlight = new AtomicLong();
    AtomicReference<EncodeLanes> self = new AtomicReference<>();
    Set<Thread> encodedOn = ConcurrentHashMap.newKeySet();
    EncodeLanes lanes = new EncodeLanes(pool, (p, sink) -> {
      encodedOn.add(Thread.currentThread());
      return new DeflaterOutputStream(sink) {
        @Override
        public void write(byte[] b, int off, int len) throws IOException {
          maxInFlight.accumulateAndGet(self.get().inFlightBytes(), Math::max);
          super.write(b, off, len);
        }
      };
    }, p -> sinks[p] = new ByteArrayOutputStream(), partitions, CHUNK, budget);
    self.set(lanes);
    ByteArrayOutputStream[] expected = writeRandomly(lanes, partitions, new Random(42));
    lanes.finish();
    for (int p = 0; p < partitions; p++) {
      if (expected[p] == null) {
        assertEquals(null, sinks[p], "partition " + p + " was never written");
        continue;
      }
      assertArrayEquals(expected[p].toByteArray(), inflate(sinks[p].toByteArray()), "partition " + p);
    }
    assertTrue(maxInFlight.get() <= budget, maxInFlight.get() + " bytes in flight, budget " + budget);
    encodedOn.remove(Thread.currentThread()); // the task encodes where the lanes fall behind
    assertFalse(encodedOn.isEmpty(), "the pool encoded nothing");
    assertEquals(bytes(expected), lanes.bytesEncodedOnTask() + lanes.bytesEncodedOnPool(), "every byte counted once");
    assertTrue(lanes.bytesEncodedOnPool() > 0);
    assertEquals(0, lanes.inFlightBytes());
  }

  @Test
  void aPoolBusyWithOtherWorkLeavesTheTaskEncodingItsOwnChunks() throws Exception {
    ExecutorService one = Executors.newSingleThreadExecutor();
    CountDownLatch otherWork = new CountDownLatch(1);
    try {
      one.execute(() -> {
        try {
          otherWork.await(); // another task's work holds the pool's only thread
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      ByteArrayOutputStream[] sinks = new ByteArrayOutputStream[20];
      EncodeLanes lanes = new EncodeLanes(one, (p, sink) -> new DeflaterOutputStream(sink),
          p -> sinks[p] = new ByteArrayOutputStream(), 20, CHUNK, 2L * CHUNK);
      Random r = new Random(17);
      ByteArrayOutputStream[] expected = new ByteArrayOutputStream[20];
      // The other work ends after a while: until then the task encodes its chunks itself, the
      // queued ones included, since no pool thread has started them.
      Thread ender = new Thread(() -> {
        try {
          Thread.sleep(300);
        } catch (InterruptedException e) {
          return;
        }
        otherWork.countDown();
      });
      ender.start();
      for (int i = 0; i < 400; i++) {
        int p = i % 20; // round robin: the partition written next has nothing queued
        byte[] d = new byte[CHUNK + r.nextInt(CHUNK)];
        r.nextBytes(d);
        lanes.partition(p).write(d);
        if (expected[p] == null) {
          expected[p] = new ByteArrayOutputStream();
        }
        expected[p].write(d);
      }
      lanes.finish();
      assertTrue(lanes.bytesEncodedOnTask() > 10L * CHUNK,
          lanes.bytesEncodedOnTask() + " bytes encoded by the task while the pool was busy");
      for (int p = 0; p < 20; p++) {
        assertArrayEquals(expected[p].toByteArray(), inflate(sinks[p].toByteArray()), "partition " + p);
      }
    } finally {
      otherWork.countDown();
      one.shutdownNow();
    }
  }

  @Test
  void underContentionEveryPartitionStillComesOutWhole() throws Exception {
    // Small budgets: the task keeps taking lanes up while pool threads run others.
    for (int round = 0; round < 6; round++) {
      int partitions = 3 + round * 9;
      ByteArrayOutputStream[] sinks = new ByteArrayOutputStream[partitions];
      EncodeLanes lanes = new EncodeLanes(pool, (p, sink) -> new DeflaterOutputStream(sink),
          p -> sinks[p] = new ByteArrayOutputStream(), partitions, CHUNK, (1 + round % 3) * (long) CHUNK);
      ByteArrayOutputStream[] expected = writeRandomly(lanes, partitions, new Random(round));
      lanes.finish();
      for (int p = 0; p < partitions; p++) {
        if (expected[p] != null) {
          assertArrayEquals(expected[p].toByteArray(), inflate(sinks[p].toByteArray()), "round " + round + ", partition " + p);
        }
      }
      assertEquals(0, lanes.inFlightBytes());
    }
  }

  /** A pool that takes jobs and runs none until told to. */
  private static final class HeldPool implements java.util.concurrent.Executor {
    final java.util.List<Runnable> jobs = java.util.Collections.synchronizedList(new java.util.ArrayList<>());

    @Override
    public void execute(Runnable r) {
      jobs.add(r);
    }

    void runAll() {
      new java.util.ArrayList<>(jobs).forEach(Runnable::run);
    }
  }

  @Test
  void aPoolThatNeverRunsLeavesTheWholeEncodingToTheTaskAndItsLateJobsTouchNothing() throws Exception {
    HeldPool held = new HeldPool();
    ByteArrayOutputStream[] sinks = new ByteArrayOutputStream[11];
    EncodeLanes lanes = new EncodeLanes(held, (p, sink) -> new DeflaterOutputStream(sink),
        p -> sinks[p] = new ByteArrayOutputStream(), 11, CHUNK, 3L * CHUNK);
    ByteArrayOutputStream[] expected = writeRandomly(lanes, 11, new Random(5));
    lanes.finish();
    byte[][] stored = new byte[11][];
    for (int p = 0; p < 11; p++) {
      stored[p] = sinks[p] == null ? null : sinks[p].toByteArray();
      if (expected[p] != null) {
        assertArrayEquals(expected[p].toByteArray(), inflate(stored[p]), "partition " + p);
      }
    }
    assertFalse(held.jobs.isEmpty(), "the lanes never asked the pool");
    assertEquals(bytes(expected), lanes.bytesEncodedOnTask(), "every byte encoded on the task");
    assertEquals(0, lanes.bytesEncodedOnPool());
    held.runAll(); // the jobs start after the task finished: they find nothing to do
    for (int p = 0; p < 11; p++) {
      assertArrayEquals(stored[p], sinks[p] == null ? null : sinks[p].toByteArray(), "partition " + p + " after the late jobs");
    }
  }

  @Test
  void abortReturnsWhenThePoolNeverRunsTheQueuedChunks() throws Exception {
    HeldPool held = new HeldPool();
    AtomicInteger writes = new AtomicInteger();
    EncodeLanes lanes = new EncodeLanes(held, (p, sink) -> new FilterOutputStream(sink) {
      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        writes.incrementAndGet();
        out.write(b, off, len);
      }
    }, p -> new ByteArrayOutputStream(), 4, CHUNK, 8L * CHUNK);
    for (int i = 0; i < 6; i++) {
      lanes.partition(i % 4).write(new byte[CHUNK]); // within the budget: queued, none run
    }
    lanes.partition(0).write(new byte[CHUNK]);
    assertEquals(0, writes.get());
    lanes.abort(); // drops the queued chunks rather than wait for a pool that never comes
    held.runAll();
    assertEquals(0, writes.get(), "a dropped chunk was written");
    assertEquals(0, lanes.inFlightBytes());
  }

  @Test
  void aLaneFailureReachesTheTaskAndStopsTheOtherLanes() throws Exception {
    AtomicInteger writesAfterFailure = new AtomicInteger();
    AtomicReference<Boolean> failed = new AtomicReference<>(false);
    EncodeLanes lanes = new EncodeLanes(pool, (p, sink) -> new FilterOutputStream(sink) {
      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        if (p == 3) {
          failed.set(true);
          throw new IOException("disk full under partition 3");
        }
        if (failed.get()) {
          writesAfterFailure.incrementAndGet();
        }
        out.write(b, off, len);
      }
    }, p -> new ByteArrayOutputStream(), 8, CHUNK, 2L * CHUNK);
    IOException e = assertThrows(IOException.class, () -> {
      for (int i = 0; i < 1000; i++) {
        lanes.partition(i % 8).write(new byte[CHUNK]);
      }
      lanes.finish();
    });
    assertTrue(e.getMessage().contains("partition 3") && e.getMessage().contains("disk full"), e.getMessage());
    lanes.abort();
    // Lanes running when partition 3 failed may finish their chunk; after abort none writes.
    int atAbort = writesAfterFailure.get();
    Thread.sleep(100);
    assertEquals(atAbort, writesAfterFailure.get(), "a lane wrote into its sink after abort returned");
    assertTrue(atAbort < 1000 * 7 / 8, atAbort + " writes after the failure: the other lanes did not stop");
  }

  @Test
  void abortWaitsForAChunkBeingEncodedAndDropsTheRest() throws Exception {
    CountDownLatch inEncode = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger chunksEncoded = new AtomicInteger();
    EncodeLanes lanes = new EncodeLanes(pool, (p, sink) -> new FilterOutputStream(sink) {
      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        inEncode.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          throw new IOException(e);
        }
        chunksEncoded.incrementAndGet();
        out.write(b, off, len);
      }
    }, p -> new ByteArrayOutputStream(), 1, CHUNK, 8L * CHUNK);
    OutputStream o = lanes.partition(0);
    o.write(new byte[4 * CHUNK + 1]); // four chunks handed over, the lane blocks in the first
    assertTrue(inEncode.await(10, TimeUnit.SECONDS));
    Thread aborter = new Thread(lanes::abort);
    aborter.start();
    aborter.join(300);
    assertTrue(aborter.isAlive(), "abort returned while a chunk was being encoded");
    release.countDown();
    aborter.join(10_000);
    assertFalse(aborter.isAlive());
    assertEquals(1, chunksEncoded.get(), "queued chunks are dropped once aborted");
    assertThrows(IOException.class, () -> o.write(new byte[2 * CHUNK]));
  }

  @Test
  void aRefusingPoolLeavesTheEncodingToTheTask() throws Exception {
    Set<Thread> encodedOn = ConcurrentHashMap.newKeySet();
    ByteArrayOutputStream[] sinks = new ByteArrayOutputStream[5];
    EncodeLanes lanes = new EncodeLanes(t -> {
      throw new RejectedExecutionException("pool is shut down");
    }, (p, sink) -> {
      encodedOn.add(Thread.currentThread());
      return new DeflaterOutputStream(sink);
    }, p -> sinks[p] = new ByteArrayOutputStream(), 5, CHUNK, CHUNK);
    ByteArrayOutputStream[] expected = writeRandomly(lanes, 5, new Random(9));
    lanes.finish();
    for (int p = 0; p < 5; p++) {
      assertArrayEquals(expected[p].toByteArray(), inflate(sinks[p].toByteArray()), "partition " + p);
    }
    assertEquals(Set.of(Thread.currentThread()), encodedOn);
  }

  @Test
  void refusesABudgetSmallerThanAChunk() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new EncodeLanes(pool, (p, s) -> s, p -> new ByteArrayOutputStream(), 1, CHUNK, CHUNK - 1));
    assertTrue(e.getMessage().contains("4095") && e.getMessage().contains("4096"), e.getMessage());
  }
}
