package dev.slipstream.core.transport;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;
import java.util.concurrent.locks.StampedLock;
import java.util.function.Consumer;

/**
 * Registered host memory: a direct buffer that peers may write into, with 8-byte atomic
 * signals. Used by transports whose receiver places payloads in software (loopback, tcp).
 *
 * <p>Threading: {@link #apply} and the signal methods are called on the owning transport's
 * progress thread; {@link #readSignal} from any thread (acquire). Ownership: the memory stays
 * with the registering caller; {@link #close()} only deregisters.
 *
 * <p>Receivers that apply peer writes on threads other than the owner's (tcp's event loops)
 * bracket each copy or atomic with {@link #beginAccess()} / {@link #endAccess()}; {@link #close()}
 * then waits for accesses in progress, so once it returns no peer byte lands in the memory and
 * the owner may free it.
 */
public final class HostRegion implements RegisteredRegion {
  private static final VarHandle LONGS =
      MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private final RegionDescriptor descriptor;
  private final ByteBuffer memory;
  private final Consumer<HostRegion> onClose;
  private volatile SignalListener listener;
  private volatile boolean open = true;
  private final StampedLock access = new StampedLock();

  HostRegion(RegionDescriptor descriptor, ByteBuffer memory, Consumer<HostRegion> onClose) {
    this.descriptor = descriptor;
    this.memory = memory.slice().order(ByteOrder.LITTLE_ENDIAN);
    this.onClose = Objects.requireNonNull(onClose, "onClose");
  }

  @Override
  public RegionDescriptor descriptor() {
    return descriptor;
  }

  @Override
  public ByteBuffer buffer() {
    return memory.duplicate().clear();
  }

  /** Copies {@code src} (position to limit, not consumed) to {@code offset}; bounds already checked. */
  public void put(long offset, ByteBuffer src) {
    memory.duplicate().position((int) offset).put(src.duplicate());
  }

  /** Atomically adds {@code delta} at the (checked, aligned) offset; returns the old value. */
  public long getAndAdd(long offset, long delta) {
    return (long) LONGS.getAndAdd(memory, (int) offset, delta);
  }

  /**
   * Starts an inbound access (a copy or an atomic). Returns false when the region is closed or
   * closing: the caller must then reject the operation and touch nothing. Every true return is
   * paired with {@link #endAccess()}; call no listener and never {@link #close()} in between.
   */
  public boolean beginAccess() {
    if (access.tryReadLock() == 0L) {
      return false;
    }
    if (!open) {
      access.tryUnlockRead();
      return false;
    }
    return true;
  }

  /** Ends an access started by {@link #beginAccess()}. */
  public void endAccess() {
    access.tryUnlockRead();
  }

  /** Tells the listener, if any, that the signal at {@code offset} now holds {@code newValue}. */
  public void notifySignal(long offset, long newValue) {
    SignalListener l = listener;
    if (l != null) {
      l.onSignal(this, offset, newValue);
    }
  }

  @Override
  public long readSignal(long offset) {
    checkSignalOffset(offset);
    return (long) LONGS.getAcquire(memory, (int) offset);
  }

  @Override
  public void resetSignal(long offset, long value) {
    checkSignalOffset(offset);
    LONGS.setRelease(memory, (int) offset, value);
  }

  private void checkSignalOffset(long offset) {
    if (offset < 0 || offset + 8 > descriptor.length() || (offset & 7) != 0) {
      throw new IllegalArgumentException("signal offset " + offset + " must be 8-aligned inside "
          + descriptor + " (length " + descriptor.length() + ")");
    }
  }

  @Override
  public void setSignalListener(SignalListener listener) {
    this.listener = listener;
  }

  @Override
  public boolean isOpen() {
    return open;
  }

  @Override
  public void close() {
    if (open) {
      open = false;
      onClose.accept(this);
      // Wait for accesses begun before open became false (see beginAccess).
      access.unlockWrite(access.writeLock());
    }
  }
}
