package dev.slipstream.gpu;

import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The reader's copy of the request ring of a holder on another machine
 * ({@code native/include/slipstream/serve.h}, rings): a ring file of this process, mapped for the
 * reader's {@link ServeRing} and for this process's GPU, and registered on this executor's NIC so
 * that the holder's kernel writes its answers into it. Once {@link #connect connected} to the
 * holder's copy (its region id and memory key, which the holder sends when it attached the reader),
 * every request posted is also written into the holder's copy over a queue pair the host drives:
 * the slot's bytes, then a fetch-add that publishes it.
 *
 * <p>Threading: {@link #ring()} is thread-safe. Ownership: owns the file, its mappings and the
 * registration; {@link #close} once the holder no longer answers into it (its reader entry
 * cleared, or its process gone).
 */
public final class RemoteRing implements AutoCloseable {
  private final ServeRingFile file;
  private final NativeNic nic;
  private final int regionId;
  private final int key;
  private long map;

  private RemoteRing(ServeRingFile file, long map, NativeNic nic, int regionId, int key) {
    this.file = file;
    this.map = map;
    this.nic = nic;
    this.regionId = regionId;
    this.key = key;
  }

  /** Makes {@code path} (it must not exist) as this reader's copy of a ring of {@code slots}, registered on {@code nic} as region {@code regionId}. */
  public static RemoteRing create(GpuContext ctx, NativeNic nic, Path path, int slots, int regionId)
      throws IOException {
    ServeRingFile f = ServeRingFile.create(path, slots);
    long m = 0;
    try {
      m = SlipNative.attachRing(ctx.handle(), path.toString());
      int k = nic.registerFile(SlipNative.ringHostPointer(m), ServeRing.bytes(slots), regionId, path);
      return new RemoteRing(f, m, nic, regionId, k);
    } catch (RuntimeException e) {
      if (m != 0) {
        SlipNative.detachRing(m);
      }
      f.close();
      throw e;
    }
  }

  /** The region id the holder's kernel writes answers to (iova {@code id << 40} on this executor's NIC). */
  public int regionId() {
    return regionId;
  }

  /** The memory key of that region. */
  public int key() {
    return key;
  }

  public Path path() {
    return file.path();
  }

  public ServeRing ring() {
    return file.ring();
  }

  /**
   * From now on every request posted into {@link #ring()} is written into the holder's copy,
   * region ({@code holderId}, {@code holderKey}) on the holder's NIC, over {@code queue} (a queue
   * pair of this executor's link to the holder that only the host posts on), waiting up to
   * {@code timeoutNanos} for room in its send queue.
   */
  public void connect(HostQueue queue, int holderId, int holderKey, long timeoutNanos) {
    int body = ServeRing.SLOT_BYTES - 8;
    file.ring().publishWith((at, ticket, step) -> queue.writeThenAdd(regionId, key, at + 8L, holderId, holderKey,
        at + 8L, body, at, step, timeoutNanos));
  }

  @Override
  public synchronized void close() throws IOException {
    if (map == 0) {
      return;
    }
    try {
      nic.deregister(regionId, key);
    } finally {
      SlipNative.detachRing(map);
      map = 0;
      file.close();
    }
  }

  @Override
  public String toString() {
    return "RemoteRing[" + file.path() + ", region " + regionId + "]";
  }
}
