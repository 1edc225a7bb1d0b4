package dev.slipstream.spark.gpu;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.NativeNic;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.ResidentServer;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.nic.NicLinks;
import dev.slipstream.gpu.serve.RingOffer;
import dev.slipstream.gpu.serve.ServeRingFile;
import dev.slipstream.gpu.shuffle.DeviceMapOutputStore;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.gpu.shuffle.ResidentDirectory;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder's side of resident serving ({@code spark.slipstream.gpu.serve.resident}): one
 * {@link ResidentServer} on this executor's GPU whose directory follows the device map-output store,
 * and one request ring for each reader of this machine with a GPU. The holder makes the reader's
 * ring file ({@link #ringPath}), imports the reader's landing region (the one the peer table has
 * for it), sets the reader entry and says so in the ring's header; the reader posts into the ring
 * from then on ({@link ResidentRequests}). A lost reader's entry is cleared (the kernel stopped for
 * it) before its landing region is unmapped.
 *
 * <p>With {@code spark.slipstream.gpu.path=gpunetio} each reader entry is pushed to over gpunetio:
 * a one-queue gpunetio set per reader (its table: this executor's block-table staging region, then
 * the reader's imported landing region), on which the kernel posts the RDMA writes, the table and
 * the signal's fetch-add itself. The native library's software NIC executes them (one machine).
 *
 * <p>A reader this executor has a gpunetio link to on another machine (or any linked reader, with
 * {@code spark.slipstream.gpu.serve.resident.rings=nic}) offers its own copy of a ring
 * ({@link #remoteReaderOffered}); the holder makes its copy ({@link #remoteRingPath}), registers it
 * on its NIC, sets a remote reader entry on the link's kernel queue pair (the table: the staging
 * region, then the reader's NIC landing region) and answers with its copy's key and its clock.
 *
 * <p>Threading: thread-safe. Ownership: owns the server, its directory and the ring files;
 * {@link #close()} stops following the store, then closes them.
 */
final class ResidentServing implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ResidentServing.class);
  static final int MAX_READERS = 64;
  static final int RING_SLOTS = 64;
  private static final int DIRECTORY_SLOTS = 1 << 14;
  private static final long OFFSETS_TABLE_BYTES = 16L << 20;
  /** Region ids on this executor's NIC of the holder's copies of remote rings: one per reader entry. */
  static final int FIRST_RING_REGION_ID = 3;

  private final String executorId;
  private final String applicationId;
  private final String ringDir;
  private final DeviceMapOutputStore store;
  private final ResidentServer server;
  private final ResidentDirectory directory;
  private final Function<RegionExport, RemoteRegion> importLanding;
  private final GpuContext ctx;
  /** gpunetio: the kernel's block-table staging region (a slot per CTA); null for stores. */
  private final GpuRegion staging;
  /** The executor's NIC, on which the staging region is registered too (remote readers); null for none. */
  private final NativeNic nic;
  private final int stagingKey;
  /** Per reader served: its entry index, ring file and, over gpunetio, its queue set. */
  private final Map<String, Reader> readers = new HashMap<>();
  private final boolean[] taken = new boolean[MAX_READERS];
  private boolean closed;

  /** {@code lease}: a remote reader's kernel queue pair of the link to it (null for readers of this machine). */
  private record Reader(int index, ServeRingFile ring, QueueSet queues, NicLinks.Lease lease) {}

  /**
   * @param backend how reader entries are pushed to: {@link Backend#NVLINK} stores into the imported
   *     landing region, or {@link Backend#GPUNETIO} RDMA writes the kernel posts
   * @param stagingRegionId the region id of the gpunetio staging region (unused for stores)
   */
  ResidentServing(String executorId, String applicationId, GpuContext ctx, DeviceMapOutputStore store, GpuConf conf,
      Function<RegionExport, RemoteRegion> importLanding, Duration revokeTimeout, Backend backend,
      int stagingRegionId, NativeNic nic) {
    if (backend != Backend.NVLINK && backend != Backend.GPUNETIO) {
      throw new IllegalArgumentException("resident serving over " + backend + ", expected NVLINK or GPUNETIO");
    }
    this.executorId = executorId;
    this.applicationId = applicationId;
    this.ringDir = conf.requestRingDir();
    this.store = store;
    this.importLanding = importLanding;
    this.ctx = ctx;
    this.server = ResidentServer.create(ctx, new ResidentServer.Settings(MAX_READERS, DIRECTORY_SLOTS,
        conf.serveResidentCtas(), 256, conf.serveResidentIdle(), Duration.ofNanos(50_000)));
    GpuRegion stage = null;
    int key = 0;
    try {
      if (backend == Backend.GPUNETIO) {
        stage = GpuRegion.create(ctx, MemoryKind.DEVICE, server.stagingBytes(), stagingRegionId);
        if (nic != null) {
          key = nic.register(stage.devicePointer(), stage.length(), stage.id()); // queue sets over NIC links
        }
      }
      this.staging = stage;
      this.nic = stage != null ? nic : null;
      this.stagingKey = key;
      this.directory = new ResidentDirectory(ctx, server, OFFSETS_TABLE_BYTES, revokeTimeout);
      store.follow(directory);
    } catch (RuntimeException e) {
      server.close();
      if (key != 0) {
        nic.deregister(stage.id(), key);
      }
      if (stage != null) {
        stage.close();
      }
      throw e;
    }
  }

  /** The holder's copy of the ring of reader {@code reader} on another machine (or linked over the NIC). */
  static Path remoteRingPath(String dir, String app, String holder, String reader) {
    return Path.of(ringPath(dir, app, holder, reader) + "-nic");
  }

  /** The ring file holder {@code holder} makes for reader {@code reader} of application {@code app}. */
  static Path ringPath(String dir, String app, String holder, String reader) {
    return Path.of(dir, "slipstream-serve-" + safe(app) + "-" + safe(holder) + "-to-" + safe(reader));
  }

  private static String safe(String id) {
    return id.replaceAll("[^A-Za-z0-9._-]", "_");
  }

  /** A reader of this machine with a GPU and a landing region: its ring, made and served. */
  synchronized void readerJoined(String readerId, GpuEndpoint reader) {
    if (closed || readers.containsKey(readerId) || reader.landing().isEmpty()) {
      return;
    }
    int index = freeIndex();
    if (index < 0) {
      LOG.warn("Slipstream executor {}: the resident server serves {} readers already; reader {} reads the"
          + " host-driven way", executorId, MAX_READERS, readerId);
      return;
    }
    Path path = ringPath(ringDir, applicationId, executorId, readerId);
    ServeRingFile ring = null;
    QueueSet queues = null;
    try {
      RegionExport landing = reader.landing().get();
      RemoteRegion r = importLanding.apply(landing);
      java.nio.file.Files.deleteIfExists(path); // left by an executor of the same id that is gone
      ring = ServeRingFile.create(path, RING_SLOTS);
      if (staging != null) {
        queues = ResidentServer.nicQueues(ctx, staging, r);
        server.attachReaderNic(index, path, queues, r.length(), landing.descriptor().key());
      } else {
        server.attachReader(index, path, r.devicePointer(), r.length(), landing.descriptor().key());
      }
      taken[index] = true;
      readers.put(readerId, new Reader(index, ring, queues, null));
      LOG.info("Slipstream executor {} serves reader {} from its resident server ({}; ring {})", executorId, readerId,
          queues != null ? "gpunetio" : "stores", path);
    } catch (IOException | RuntimeException e) {
      LOG.warn("Slipstream executor {}: no resident serving for reader {} ({}); it reads the host-driven way",
          executorId, readerId, e.toString());
      release(new Reader(index, ring, queues, null));
    }
  }

  /**
   * Reader {@code o.from()} (its GPU endpoint {@code reader}) offered its copy of a ring over the
   * link {@code links} has to it: the answer to send back, an accept once the reader entry is set,
   * else a refusal naming why (the reader then reads the host-driven way). An offer from a reader
   * this holder serves already replaces its ring (the reader made a new copy).
   */
  synchronized RingOffer remoteReaderOffered(RingOffer o, GpuEndpoint reader, NicLinks links) {
    String readerId = o.from();
    if (closed || nic == null || staging == null) {
      return RingOffer.refuse(executorId, readerId, "executor " + executorId + " serves no rings over a NIC"
          + " (its resident server pushes with stores, or it has no NIC)");
    }
    if (reader.nic().isEmpty()) {
      return RingOffer.refuse(executorId, readerId, "reader " + readerId + " has no NIC landing region in the"
          + " peer table");
    }
    if (readers.containsKey(readerId)) {
      readerLost(readerId);
    }
    int index = freeIndex();
    if (index < 0) {
      return RingOffer.refuse(executorId, readerId, "the resident server serves " + MAX_READERS + " readers already");
    }
    NicLanding landing = reader.nic().get();
    Path path = remoteRingPath(ringDir, applicationId, executorId, readerId);
    ServeRingFile ring = null;
    QueueSet queues = null;
    NicLinks.Lease lease = null;
    try {
      lease = links.ringLease(readerId, NicLinks.RingRole.KERNEL).orElse(null);
      if (lease == null) {
        return RingOffer.refuse(executorId, readerId, "no connected gpunetio link to " + readerId + " (yet)");
      }
      java.nio.file.Files.deleteIfExists(path); // left by an executor of the same id that is gone
      ring = ServeRingFile.create(path, o.slots());
      queues = lease.link().queueSet(ctx, lease.firstQueue(), 1, java.util.List.of(staging),
          java.util.List.of(landing));
      int regionId = FIRST_RING_REGION_ID + index;
      int key = server.attachReaderRemote(index, path, nic, regionId, queues, landing.length(),
          Integer.toUnsignedLong(landing.mkey()), o.regionId(), o.key());
      taken[index] = true;
      readers.put(readerId, new Reader(index, ring, queues, lease));
      LOG.info("Slipstream executor {} serves reader {} from its resident server over the NIC (ring {})", executorId,
          readerId, path);
      return RingOffer.accept(executorId, readerId, regionId, key, System.nanoTime());
    } catch (IOException | RuntimeException e) {
      LOG.warn("Slipstream executor {}: no resident ring over the NIC for reader {} ({}); it reads the host-driven way",
          executorId, readerId, e.toString());
      release(new Reader(index, ring, queues, lease));
      return RingOffer.refuse(executorId, readerId, String.valueOf(e.getMessage()));
    }
  }

  private int freeIndex() {
    for (int i = 0; i < MAX_READERS; i++) {
      if (!taken[i]) {
        return i;
      }
    }
    return -1;
  }

  /** A reader left: no more requests from its ring; returns once the kernel writes nothing of it. */
  synchronized void readerLost(String readerId) {
    Reader r = readers.remove(readerId);
    if (r != null) {
      server.detachReader(r.index());
      taken[r.index()] = false;
      release(r);
    }
  }

  /** What a reader entry held, once the kernel left it: its ring, its queue set, its link's queue pair. */
  private static void release(Reader r) {
    closeQuietly(r.ring());
    if (r.queues() != null) {
      r.queues().close(); // the kernel left the entry: nothing posts on it
    }
    if (r.lease() != null) {
      r.lease().close();
    }
  }

  /** Whether the ring of reader {@code readerId} is served (tests, metrics). */
  synchronized boolean serves(String readerId) {
    return readers.containsKey(readerId);
  }

  ResidentServer.Stats stats() {
    return server.stats();
  }

  private static void closeQuietly(ServeRingFile f) {
    if (f != null) {
      try {
        f.close();
      } catch (IOException ignored) {
        // a ring file left in the tmpfs is removed by the next executor of this id
      }
    }
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      store.follow(null);
    } finally {
      server.close();
      directory.close();
      readers.values().forEach(ResidentServing::release);
      readers.clear();
      if (stagingKey != 0) {
        nic.deregister(staging.id(), stagingKey);
      }
      if (staging != null) {
        staging.close();
      }
    }
  }
}
