package dev.slipstream.bench.tpch;

import dev.slipstream.bench.LocalCluster;
import org.apache.spark.executor.ExecutorMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.sql.SparkSession;

/**
 * Sums Spark's task metrics over one query at a time. Queries run one after another, so the
 * runner calls {@link #begin()} before a query and {@link #end(SparkSession)} after it; every task
 * that ended in between belongs to it (broadcast and subquery jobs included, which run under job
 * groups of their own). It also records the shuffles the query's map stages wrote
 * ({@link #shuffles()}), for the runner to remove once the query's figures are taken, and whether
 * any of its stages ended without success ({@link #awaitStragglers}): adaptive execution cancels
 * stages it no longer needs, and their running tasks can end after the query returned.
 *
 * <p>Threading: {@code onTaskEnd} runs on Spark's listener bus thread, {@code begin}/{@code end} on
 * the runner's thread; all state is guarded by this object's monitor.
 */
public final class QueryMetricsListener extends SparkListener {
  private long tasks;
  private long inputBytes;
  private long written;
  private long read;
  private long remoteRead;
  private long writeNanos;
  private long fetchWait;
  private long peakExecution;
  private long peakHeap;
  private long peakDirect;
  private long stages;
  private long taskRun;
  private long semaphoreWaitNanos;
  private final java.util.Set<String> executors = new java.util.HashSet<>();
  private final java.util.Set<Integer> shuffles = new java.util.TreeSet<>();
  /** Tasks started and not yet ended, over every query so far. */
  private long running;
  /** Whether a stage ended without success since {@link #begin()}. */
  private boolean unsuccessfulStage;

  /** RAPIDS' task accumulator of the time a task waited for the GPU semaphore (nanoseconds). */
  static final String GPU_SEMAPHORE_WAIT = "gpuSemaphoreWait";

  public synchronized void begin() {
    tasks = inputBytes = written = read = remoteRead = writeNanos = fetchWait = 0;
    peakExecution = peakHeap = peakDirect = stages = taskRun = semaphoreWaitNanos = 0;
    executors.clear();
    shuffles.clear();
    unsuccessfulStage = false;
  }

  /**
   * When a stage of the query ended without success or a task is still running (call after
   * {@link #end}), waits up to {@code timeoutMillis} until every started task has ended, and
   * returns true: those tasks' completions may still be on their way through the scheduler.
   * Returns false at once when every stage succeeded and no task runs.
   */
  public synchronized boolean awaitStragglers(long timeoutMillis) throws InterruptedException {
    if (!unsuccessfulStage && running == 0) {
      return false;
    }
    long deadline = System.nanoTime() + timeoutMillis * 1_000_000;
    for (long left = timeoutMillis; running > 0 && left > 0; left = (deadline - System.nanoTime()) / 1_000_000) {
      wait(left);
    }
    return true;
  }

  /** Tasks started and not yet ended. */
  public synchronized long running() {
    return running;
  }

  /** The shuffles of the map stages submitted since {@link #begin()} (call after {@link #end}). */
  public synchronized java.util.List<Integer> shuffles() {
    return java.util.List.copyOf(shuffles);
  }

  /** Waits until the listener bus has delivered every event so far, then returns the sums. */
  public QueryMetrics end(SparkSession spark) {
    LocalCluster.drainListenerBus(spark);
    synchronized (this) {
      return new QueryMetrics(tasks, inputBytes, written, read, remoteRead, writeNanos, fetchWait, peakExecution,
          peakHeap, peakDirect, stages, taskRun, executors.size(), semaphoreWaitNanos / 1_000_000);
    }
  }

  /**
   * A task's update of a RAPIDS time accumulator in nanoseconds: a number, or RAPIDS' {@code NanoTime}
   * (read through its {@code value()}, so that this class needs no RAPIDS on its class path); 0 for
   * anything else.
   */
  static long nanos(Object update) {
    if (update instanceof Number n) {
      return n.longValue();
    }
    try {
      Object v = update.getClass().getMethod("value").invoke(update);
      return v instanceof Number n ? n.longValue() : 0;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return 0;
    }
  }

  @Override
  public synchronized void onStageSubmitted(SparkListenerStageSubmitted submitted) {
    StageInfo stage = submitted.stageInfo();
    if (stage != null && stage.shuffleDepId().isDefined()) {
      shuffles.add((Integer) stage.shuffleDepId().get());
    }
  }

  @Override
  public synchronized void onStageCompleted(SparkListenerStageCompleted done) {
    stages++;
    if (done.stageInfo() != null && done.stageInfo().failureReason().isDefined()) {
      unsuccessfulStage = true;
    }
  }

  @Override
  public synchronized void onTaskStart(SparkListenerTaskStart start) {
    running++;
  }

  @Override
  public synchronized void onTaskEnd(SparkListenerTaskEnd end) {
    running--;
    notifyAll();
    tasks++;
    if (end.taskInfo() != null) {
      executors.add(end.taskInfo().executorId());
      scala.collection.Iterator<org.apache.spark.scheduler.AccumulableInfo> it = end.taskInfo().accumulables().iterator();
      while (it.hasNext()) {
        org.apache.spark.scheduler.AccumulableInfo a = it.next();
        if (a.name().isDefined() && GPU_SEMAPHORE_WAIT.equals(a.name().get()) && a.update().isDefined()) {
          semaphoreWaitNanos += nanos(a.update().get());
        }
      }
    }
    TaskMetrics m = end.taskMetrics();
    if (m != null) {
      inputBytes += m.inputMetrics().bytesRead();
      written += m.shuffleWriteMetrics().bytesWritten();
      writeNanos += m.shuffleWriteMetrics().writeTime();
      read += m.shuffleReadMetrics().totalBytesRead();
      remoteRead += m.shuffleReadMetrics().remoteBytesRead();
      fetchWait += m.shuffleReadMetrics().fetchWaitTime();
      peakExecution = Math.max(peakExecution, m.peakExecutionMemory());
      taskRun += m.executorRunTime();
    }
    ExecutorMetrics e = end.taskExecutorMetrics();
    if (e != null) {
      peakHeap = Math.max(peakHeap, e.getMetricValue("JVMHeapMemory"));
      peakDirect = Math.max(peakDirect, e.getMetricValue("DirectPoolMemory"));
    }
  }
}
