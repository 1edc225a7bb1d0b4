package dev.slipstream.gpu.shuffle;

/**
 * A device-resident columnar batch: {@link BatchLayout} host metadata over one contiguous range of
 * device memory starting at {@link #address()}. It either owns that memory ({@code owner} is closed
 * with the batch) or is a view into memory owned elsewhere (a landing region, a map output), valid
 * until that owner releases it.
 *
 * <p>Threading: immutable; {@link #close()} is idempotent and may run on any thread.
 */
public final class DeviceBatch implements AutoCloseable {
  private final int device;
  private final long address;
  private final BatchLayout layout;
  private AutoCloseable owner;

  private DeviceBatch(int device, long address, BatchLayout layout, AutoCloseable owner) {
    if (address == 0 && layout.bufferBytes() > 0) {
      throw new IllegalArgumentException("device batch of " + layout.bufferBytes() + " bytes at address 0");
    }
    this.device = device;
    this.address = address;
    this.layout = layout;
    this.owner = owner;
  }

  /** A batch that owns its memory: closing the batch closes {@code owner}. */
  public static DeviceBatch owning(int device, long address, BatchLayout layout, AutoCloseable owner) {
    return new DeviceBatch(device, address, layout, owner);
  }

  /** A view into memory owned elsewhere. */
  public static DeviceBatch view(int device, long address, BatchLayout layout) {
    return new DeviceBatch(device, address, layout, null);
  }

  public int device() {
    return device;
  }

  public long address() {
    return address;
  }

  public BatchLayout layout() {
    return layout;
  }

  public long rows() {
    return layout.rows();
  }

  /** Device address of the key column. */
  public long keys() {
    return address + layout.keyOffset();
  }

  /** Device address of payload column {@code c}. */
  public long column(int c) {
    return address + layout.offset(c);
  }

  @Override
  public synchronized void close() {
    if (owner != null) {
      AutoCloseable o = owner;
      owner = null;
      try {
        o.close();
      } catch (Exception e) {
        throw new IllegalStateException("closing a device batch's memory: " + e, e);
      }
    }
  }

  @Override
  public String toString() {
    return "DeviceBatch[device " + device + ", " + layout.rows() + " rows, " + layout.bufferBytes() + " bytes]";
  }
}
