package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class SpinningPoolTest {
  /** Daemon threads named spin-test, each added to {@code made}. */
  private static ThreadFactory daemons(List<Thread> made) {
    return r -> {
      Thread t = new Thread(r, "spin-test");
      t.setDaemon(true);
      made.add(t);
      return t;
    };
  }

  @Test
  void runsEveryTaskOnItsThreadsAndStopsPollingThreadsOnShutdownNow() throws Exception {
    List<Thread> made = new CopyOnWriteArrayList<>();
    ExecutorService pool = SpinningPool.fixed(2, TimeUnit.SECONDS.toNanos(30), daemons(made));
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
    ExecutorService pool = SpinningPool.fixed(1, TimeUnit.SECONDS.toNanos(1), daemons(made));
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
  void tasksHandedToParkedThreadsInABurstAllRunAndShutdownLetsQueuedTasksFinish() throws Exception {
    SpinningPool pool = SpinningPool.fixed(3, 0, daemons(new CopyOnWriteArrayList<>()));
    for (int round = 0; round < 200; round++) {
      CountDownLatch all = new CountDownLatch(5);
      for (int i = 0; i < 5; i++) {
        pool.execute(all::countDown); // threads park between rounds (no polling time)
      }
      assertTrue(all.await(10, TimeUnit.SECONDS), "round " + round + ": " + all.getCount() + " of 5 tasks never ran");
    }
    CountDownLatch slow = new CountDownLatch(1);
    AtomicInteger after = new AtomicInteger();
    pool.execute(() -> {
      try {
        slow.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    for (int i = 0; i < 10; i++) {
      pool.execute(after::incrementAndGet);
    }
    pool.shutdown();
    assertThrows(java.util.concurrent.RejectedExecutionException.class, () -> pool.execute(() -> { }));
    slow.countDown();
    assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
    assertEquals(10, after.get(), "tasks queued before shutdown ran");
  }

  @Test
  void threadsAreMadeWithTheFirstTaskAndAPoolShutDownUnusedTakesNone() throws Exception {
    List<Thread> made = new CopyOnWriteArrayList<>();
    ThreadFactory f = daemons(made);
    SpinningPool unused = SpinningPool.fixed(4, 0, f);
    assertEquals(0, made.size(), "no thread before the first task");
    unused.shutdown();
    assertTrue(unused.isTerminated());
    assertThrows(java.util.concurrent.RejectedExecutionException.class, () -> unused.execute(() -> { }));
    assertEquals(0, made.size());
    SpinningPool used = SpinningPool.fixed(2, 0, f);
    CountDownLatch ran = new CountDownLatch(1);
    used.execute(ran::countDown);
    assertTrue(ran.await(10, TimeUnit.SECONDS));
    assertEquals(2, made.size());
    used.shutdownNow();
    assertTrue(used.awaitTermination(5, TimeUnit.SECONDS));
  }

  @Test
  void rejectsAnEmptyPoolOrANegativePollingTime() {
    assertThrows(IllegalArgumentException.class, () -> SpinningPool.fixed(0, 1, Thread::new));
    var e = assertThrows(IllegalArgumentException.class, () -> SpinningPool.fixed(1, -1, Thread::new));
    assertTrue(e.getMessage().contains("-1 ns"), e.getMessage());
  }
}
