package dev.slipstream.bench.tpch;

/**
 * What Spark's own task metrics say about one query run, summed (or the maximum, for peaks) over
 * every task of every job the query started.
 *
 * @param tasks tasks that ended
 * @param inputBytes bytes read by scans (Parquet)
 * @param shuffleBytesWritten shuffle bytes written by map tasks
 * @param shuffleBytesRead shuffle bytes read by reduce tasks (local and remote)
 * @param shuffleRemoteBytesRead the part of {@code shuffleBytesRead} that came from another executor
 * @param shuffleWriteNanos time map tasks spent writing shuffle output
 * @param fetchWaitMillis time reduce tasks waited for shuffle blocks
 * @param peakExecutionMemory largest execution memory (sort, aggregation, join buffers) of one task
 * @param peakHeapBytes largest JVM heap use an executor reported while the query ran
 * @param peakDirectBytes largest direct (off-heap NIO) buffer pool an executor reported
 * @param stages stages that completed (skipped stages, whose shuffle output was reused, not counted)
 * @param taskRunMillis executor run time summed over the tasks (Spark's {@code executorRunTime})
 * @param executorsUsed executors that ran at least one of the tasks
 * @param gpuSemaphoreWaitMillis time tasks waited for RAPIDS' GPU semaphore (its task accumulator
 *     {@code gpuSemaphoreWait}; 0 without RAPIDS)
 */
public record QueryMetrics(long tasks, long inputBytes, long shuffleBytesWritten, long shuffleBytesRead,
    long shuffleRemoteBytesRead, long shuffleWriteNanos, long fetchWaitMillis, long peakExecutionMemory,
    long peakHeapBytes, long peakDirectBytes, long stages, long taskRunMillis, long executorsUsed,
    long gpuSemaphoreWaitMillis) {

  public static final QueryMetrics ZERO = new QueryMetrics(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

  /** Peak executor memory: heap plus direct buffers (Slipstream's registered memory is direct). */
  public long peakExecutorMemory() {
    return peakHeapBytes + peakDirectBytes;
  }
}
