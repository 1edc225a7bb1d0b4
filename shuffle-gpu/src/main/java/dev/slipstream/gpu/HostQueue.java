package dev.slipstream.gpu;

/**
 * A queue pair of a NIC link that the host posts on (slipstream/gpunetio_nic.h, host-posted
 * operations): RDMA writes and fetch-adds executed in order by the responder, one completion per
 * post. A reader of resident serving on another machine publishes its requests into the holder's
 * ring this way ({@link RemoteRing}). The first post claims the queue pair for the host; a queue set
 * is then refused it (and a queue pair a queue set uses is refused here).
 *
 * <p>Threading: thread-safe (the native queue pair serialises its posts). Ownership: borrows the
 * link, which must outlive it.
 */
public final class HostQueue {
  private static final int WRITE = 0;
  private static final int FETCH_ADD = 1;
  private static final int FIELDS = 9;

  private final long link;
  private final int queuePair;
  private final String what;

  HostQueue(long link, int queuePair, String what) {
    this.link = link;
    this.queuePair = queuePair;
    this.what = what;
  }

  /**
   * Posts an RDMA write of {@code length} bytes from ({@code localId}, {@code localKey}) +
   * {@code localOffset}, a region registered on this link's NIC, to the peer's ({@code remoteId},
   * {@code remoteKey}) + {@code remoteOffset}, then a fetch-add of {@code add} on the peer's 8-byte
   * word ({@code remoteId}, {@code remoteKey}) + {@code addOffset}, which the responder executes
   * after the write. Does not wait for their completion; waits up to {@code timeoutNanos} for room
   * in the send queue. A {@link GpuException} (SLIP_ERR_PEER, naming the completion's syndrome)
   * once an earlier operation failed: the queue pair is in the error state for good.
   */
  public void writeThenAdd(int localId, int localKey, long localOffset, int remoteId, int remoteKey, long remoteOffset,
      long length, long addOffset, long add, long timeoutNanos) {
    long[] ops = {
        WRITE, localId, Integer.toUnsignedLong(localKey), remoteId, Integer.toUnsignedLong(remoteKey), localOffset,
        remoteOffset, length, 0,
        FETCH_ADD, 0, 0, remoteId, Integer.toUnsignedLong(remoteKey), 0, addOffset, 8, add};
    check(SlipNative.nicPost(link, queuePair, ops, ops.length / FIELDS, timeoutNanos), "post");
  }

  /** Waits until every operation posted completed; a {@link GpuException} when one failed or the wait timed out. */
  public void drain(long timeoutNanos) {
    check(SlipNative.nicDrain(link, queuePair, timeoutNanos), "drain");
  }

  private void check(int code, String op) {
    if (code != 0) {
      throw new GpuException(SlipStatus.of(code), what + ": host " + op + " on queue pair " + queuePair + ": "
          + SlipNative.errorText());
    }
  }

  @Override
  public String toString() {
    return "HostQueue[" + what + ", queue pair " + queuePair + "]";
  }
}
