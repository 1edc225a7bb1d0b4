package dev.slipstream.core.transport;

import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The regions a software receiver has registered, and the checks every inbound operation passes
 * before it touches memory: region known, key equal, range inside the region without overflow,
 * signals 8-aligned.
 *
 * <p>Threading: thread-safe. Keys are random 64-bit values from {@link SecureRandom}.
 */
public final class RegionTable {
  private final ConcurrentHashMap<Long, HostRegion> regions = new ConcurrentHashMap<>();
  private final AtomicLong nextId = new AtomicLong(1);
  private final SecureRandom random = new SecureRandom();

  /** Registers {@code [position, limit)} of a direct buffer. */
  public HostRegion register(ByteBuffer memory) throws TransportException {
    if (!memory.isDirect()) {
      throw new TransportException(TransportError.INTERNAL,
          "registered memory must be a direct buffer, got a heap buffer");
    }
    long id = nextId.getAndIncrement();
    long key = random.nextLong();
    RegionDescriptor d = RegionDescriptor.host(id, memory.remaining(), key);
    HostRegion r = new HostRegion(d, memory, reg -> regions.remove(reg.descriptor().id(), reg));
    regions.put(id, r);
    return r;
  }

  public int size() {
    return regions.size();
  }

  /** Closes every region. */
  public void closeAll() {
    List<HostRegion> all = new ArrayList<>(regions.values());
    all.forEach(HostRegion::close);
  }

  /**
   * The region for a write of {@code length} bytes at {@code offset}, after every check.
   *
   * @throws TransportException UNKNOWN_REGION, BAD_KEY or OUT_OF_RANGE, naming got and expected
   */
  public HostRegion checkWrite(long regionId, long key, long offset, long length) throws TransportException {
    HostRegion r = lookup(regionId, key);
    long regionLength = r.descriptor().length();
    if (offset < 0 || length < 0 || offset > regionLength || length > regionLength - offset) {
      throw new TransportException(TransportError.OUT_OF_RANGE, "offset " + offset + " + length " + length
          + " outside region " + regionId + " (length " + regionLength + ")");
    }
    return r;
  }

  /** The region for an 8-byte signal or atomic at {@code offset}, after every check. */
  public HostRegion checkAtomic(long regionId, long key, long offset) throws TransportException {
    HostRegion r = checkWrite(regionId, key, offset, 8);
    if ((offset & 7) != 0) {
      throw new TransportException(TransportError.MISALIGNED,
          "signal offset " + offset + " in region " + regionId + " is not 8-byte aligned");
    }
    return r;
  }

  private HostRegion lookup(long regionId, long key) throws TransportException {
    HostRegion r = regions.get(regionId);
    if (r == null || !r.isOpen()) {
      // Ids are never reused, so an id below the next one was registered here once and is closed:
      // its owner revoked it (the request or shuffle it belonged to ended).
      boolean wasRegistered = regionId > 0 && regionId < nextId.get();
      throw new TransportException(TransportError.UNKNOWN_REGION, "region " + regionId
          + (wasRegistered ? " was deregistered here (its owner revoked it: the request it belonged to has ended)"
              : " is not registered here") + " (" + regions.size() + " regions are)");
    }
    if (r.descriptor().key() != key) {
      throw new TransportException(TransportError.BAD_KEY, "wrong key for region " + regionId
          + ": got 0x" + Long.toHexString(key) + ", expected the key it was registered with");
    }
    return r;
  }
}
