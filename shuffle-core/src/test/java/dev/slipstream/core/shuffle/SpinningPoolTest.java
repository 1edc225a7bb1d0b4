package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class SpinningPoolTest {
  @Test
  void runsEveryTaskOnItsThreadsAndStopsPollingThreadsOnShutdownNow() throws Exception {
    List<Thread> made = new CopyOnWriteArrayList<>();
    ExecutorService pool = SpinningPool.fixed(2, TimeUnit.SECONDS.toNanos(30), r -> {
      Thread t = new Thread(r, "spin-test");
      t.setDaemon(true);
      made.add(t);
      return t;
    });
    AtomicInteger ran = new AtomicInteger();
    CountDownLatch all = new CountDownLatch(100);
    for (int i = 0; i < 100; i++) {
      pool.execute(() -> {
        ran.incrementAndGet();
        all.countDown();
      });
    }
    assertTrue(all.await(10, TimeUnit.SECONDS), "ran " + ran.get() + " of 100 tasks");
    assertEquals(2, made.size(), "threads made");
    // Both threads now poll for 30 s; shutdownNow must still end them at once.
    pool.shutdownNow();
    assertTrue(pool.awaitTermination(5, TimeUnit.SECONDS), "polling threads ended on shutdownNow");
  }

  @Test
  void aThreadPollsForItsSpinTimeThenParks() throws Exception {
    List<Thread> made = new CopyOnWriteArrayList<>();
    ExecutorService pool = SpinningPool.fixed(1, TimeUnit.SECONDS.toNanos(1), r -> {
      Thread t = new Thread(r, "spin-test");
      t.setDaemon(true);
      made.add(t);
      return t;
    });
    try {
      CountDownLatch first = new CountDownLatch(1);
      pool.execute(first::countDown);
      assertTrue(first.await(10, TimeUnit.SECONDS));
      Thread t = made.get(0);
      Thread.sleep(100);
      assertEquals(Thread.State.RUNNABLE, t.getState(), "100 ms after its task the idle thread still polls");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (t.getState() != Thread.State.WAITING && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertEquals(Thread.State.WAITING, t.getState(), "after its 1 s of polling the idle thread parks");
      CountDownLatch second = new CountDownLatch(1);
      pool.execute(second::countDown);
      assertTrue(second.await(10, TimeUnit.SECONDS), "a parked thread still takes new work");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aTimedPollWaitsItsWholeTimeoutAcrossPollingAndParking() throws Exception {
    SpinningPool.SpinningQueue q = new SpinningPool.SpinningQueue(TimeUnit.MILLISECONDS.toNanos(5));
    long t0 = System.nanoTime();
    assertNull(q.poll(40, TimeUnit.MILLISECONDS));
    long waited = System.nanoTime() - t0;
    assertTrue(waited >= TimeUnit.MILLISECONDS.toNanos(40), "waited " + waited + " ns, expected >= 40 ms");
    Runnable r = () -> { };
    q.offer(r);
    assertSame(r, q.take());
  }

  @Test
  void rejectsAnEmptyPoolOrANegativePollingTime() {
    assertThrows(IllegalArgumentException.class, () -> SpinningPool.fixed(0, 1, Thread::new));
    var e = assertThrows(IllegalArgumentException.class, () -> SpinningPool.fixed(1, -1, Thread::new));
    assertTrue(e.getMessage().contains("-1 ns"), e.getMessage());
  }
}
