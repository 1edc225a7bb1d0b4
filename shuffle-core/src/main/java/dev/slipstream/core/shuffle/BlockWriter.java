package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportException;

/**
 * One mechanism by which a holder writes the blocks of a write request into its reader's landing
 * region: one-sided writes over the shuffle transport into host memory ({@link HostBlockWriter}),
 * stores from GPU kernels into a peer GPU's memory, or RDMA writes posted by GPU kernels. The
 * {@link BlockServer} picks the writer by the landing region's memory kind, after it has admitted
 * the request (its application and executor, the peer table's endpoint, its time budget) and
 * {@link WriteRequest#check() checked} its ranges, and it sends the answer: a writer only writes
 * and reports.
 *
 * <p>A writer checks what only it can (the map outputs it serves from: present, of the requested
 * shape, the range inside the block; the landing region: the one the reader registered), writes
 * nothing for a request it refuses, writes the signal after every other byte of the request, and
 * reports each request exactly once, after which nothing more is written for it.
 *
 * <p>Threading: {@link #write} may be called on a transport thread; it must not block there (it
 * hands work that may wait to threads of its own).
 */
public interface BlockWriter {
  /**
   * Writes {@code request}'s blocks into the landing region of {@code reader}, the endpoint the
   * peer table holds for the request's executor. {@code receivedNanos} is when the request arrived
   * and {@code deadlineNanos} ({@link System#nanoTime()} instants) when its reader gives it up: a
   * request not written by then is dropped, writing nothing.
   */
  void write(EndpointDescriptor reader, WriteRequest request, long receivedNanos, long deadlineNanos, Outcome outcome);

  /** How a request ended; called exactly once per {@link #write}. */
  @FunctionalInterface
  interface Outcome {
    /**
     * @param bytes block bytes written (0 when {@code error} is set)
     * @param error null when every byte and the signal were written, else why nothing more will be
     * @param timeline when the writer served it ({@link ServeTimeline#NONE} if not measured)
     */
    void done(long bytes, TransportException error, ServeTimeline timeline);
  }
}
