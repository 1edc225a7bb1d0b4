package dev.slipstream.core.transport;

import java.nio.ByteBuffer;

/**
 * Memory registered with a transport: peers holding {@link #descriptor()} may write into it and
 * add to 8-byte signals in it.
 *
 * <p>Signals are 8-byte little-endian counters at 8-byte aligned offsets inside the region.
 *
 * <p>Ownership: {@link #close()} deregisters the region (later writes with its key are rejected);
 * the memory itself stays with the caller. Close is idempotent.
 */
public interface RegisteredRegion extends AutoCloseable {

  RegionDescriptor descriptor();

  /** A view of the registered memory, position 0, limit = region length. */
  ByteBuffer buffer();

  /** Reads the signal at {@code offset} with acquire semantics. */
  long readSignal(long offset);

  /** Sets the signal at {@code offset} (the owner resets a slot before reusing it). */
  void resetSignal(long offset, long value);

  /**
   * Installs a listener told about every signal applied to this region by a peer, after the
   * signal is visible. Replaces any previous listener; {@code null} removes it.
   */
  void setSignalListener(SignalListener listener);

  boolean isOpen();

  @Override
  void close();
}
