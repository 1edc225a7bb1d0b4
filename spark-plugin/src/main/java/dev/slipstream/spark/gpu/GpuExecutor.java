package dev.slipstream.spark.gpu;

import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuException;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.NativeNic;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.SlipStatus;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.nic.NicLinks;
import dev.slipstream.gpu.nic.NicOffer;
import dev.slipstream.gpu.shuffle.DeviceLanding;
import dev.slipstream.gpu.shuffle.DeviceMapOutputStore;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.gpu.shuffle.GpuOutputSpace;
import dev.slipstream.gpu.shuffle.HostIdentity;
import dev.slipstream.gpu.shuffle.LaneTarget;
import dev.slipstream.gpu.shuffle.PeerLandings;
import dev.slipstream.gpu.shuffle.PushScheduler;
import dev.slipstream.gpu.shuffle.PushWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One executor's GPU: the context on the device Spark assigned it, the device landing region its
 * reduce tasks receive into, the device map-output store its map tasks write to, the push kernel
 * and the block server that serves peers' device write requests, and the landing regions of peers
 * it imported (CUDA IPC), cached until the peer is lost or this closes. It pushes only into landing
 * regions that readers of this machine registered in the driver's peer table ({@link PeerLandings}),
 * each checked against the allocation really mapped ({@link RemoteRegion#checkMappedLength}).
 *
 * <p>With a NIC ({@code spark.slipstream.gpu.nic}), its landing region and every map output are
 * registered on it once, and it keeps a {@link NicLinks} link to each peer it can reach (other
 * machines; this machine's with the software NIC): readers of such a peer name its NIC landing
 * region in their requests, and the push lanes into it post GPUNetIO RDMA writes on a slot of the
 * link ({@link LaneTarget#overLink}).
 *
 * <p>Threading: thread-safe; the block server bounds the pushes in flight. Ownership: {@link #close()}
 * frees the block server's push lanes, the NIC links, the imported regions, the store's outputs, the
 * NIC, the landing region, the kernel module and the context, in that order.
 */
public final class GpuExecutor implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(GpuExecutor.class);
  static final int LANDING_REGION_ID = 1;
  /** The resident server's block-table staging region (gpunetio reader entries). */
  static final int STAGING_REGION_ID = 2;
  /** Region ids of this executor's copies of remote holders' rings (below the tables' ids). */
  static final int FIRST_COPY_REGION_ID = 1 << 19;
  static final int FIRST_TABLE_ID = 1 << 20;
  static final int FIRST_OUTPUT_ID = 1 << 21;

  private final String executorId;
  private final GpuContext ctx;
  private final PushKernel kernel;
  private final DeviceLanding landing;
  private final DeviceMapOutputStore store;
  /** Queued copies of device-table writers and readers. */
  private final dev.slipstream.gpu.DeviceCopyBatch.Pool copies;
  private final PushScheduler server;
  /** The queues the push lanes write through ({@link #pushBackend}). */
  private final Backend backend;
  private final GpuEndpoint endpoint;
  private final PushWriter writer;
  /** Imported landing regions, by the descriptor requests name them with ({@link RegionExport#descriptor()}). */
  private final Map<RegionDescriptor, RemoteRegion> imported = new ConcurrentHashMap<>();
  private final Map<Long, GpuReadStats> reads = new ConcurrentHashMap<>();
  /** This GPU's node of the executor's memory accounting tree, and its landing region's account. */
  private final MemoryPool pool;
  private final MemoryPool landingPool;
  private final long landingReserved;
  /** This GPU's RDMA NIC and its links to executors of other machines; null without a NIC. */
  private final NativeNic nic;
  private final NicLinks nicLinks;
  private final java.util.concurrent.atomic.AtomicLong nicLanes = new java.util.concurrent.atomic.AtomicLong();
  /** Bytes of device-table blocks written into the map-output store (DeviceTableWriter). */
  private final java.util.concurrent.atomic.AtomicLong tableBytes = new java.util.concurrent.atomic.AtomicLong();
  /** The resident server for readers of this machine (spark.slipstream.gpu.serve.resident); null when off. */
  private final ResidentServing resident;
  private final GpuConf conf;
  private final PeerLandings.PeerTable peers;
  /** How long a fetch waits for its holder; map tasks wait as long for room in the store. */
  private final long fetchTimeoutMs;
  /** Whether links carry the two ring queue pairs: resident serving over gpunetio (the same on every executor). */
  private final boolean ringLinks;
  /** Region ids of this executor's copies of holders' rings on its NIC. */
  private final java.util.concurrent.atomic.AtomicInteger nextCopyId = new java.util.concurrent.atomic.AtomicInteger(
      FIRST_COPY_REGION_ID);
  /** Whether the warning about an executor sharing this GPU with resident serving on was logged. */
  private volatile boolean sharedGpuWarned;
  private volatile boolean closed;

  private GpuExecutor(String executorId, GpuContext ctx, GpuConf conf, String hostName, PeerLandings.PeerTable peers,
      MemoryPool memory, java.util.function.LongSupplier requestIds, long fetchTimeoutMs,
      java.util.function.Consumer<NicOffer> relay, String residentApp, java.nio.file.Path spillDir) {
    this.executorId = executorId;
    this.fetchTimeoutMs = fetchTimeoutMs;
    this.ctx = ctx;
    this.conf = conf;
    this.peers = peers;
    List<AutoCloseable> made = new ArrayList<>();
    // This GPU's memory in the executor's accounting tree, beside the host pools: its landing
    // region (reserved whole, as the host landing memory is), and the device map outputs with the
    // host copies of those spilled. Closing it fails loudly when anything is still reserved.
    this.pool = memory.child("gpu-" + ctx.device(), Long.MAX_VALUE);
    made.add(pool);
    try {
      this.landingPool = pool.child("landing", conf.landingBytes());
      this.landingReserved = conf.landingBytes();
      if (!landingPool.tryReserve(landingReserved)) {
        throw new IllegalStateException("GPU landing region of " + landingReserved + " bytes does not fit " + pool);
      }
      made.add(() -> landingPool.release(landingReserved));
      this.kernel = PushKernel.load(ctx);
      made.add(kernel);
      this.landing = new DeviceLanding(ctx, conf.landingBytes(), LANDING_REGION_ID, requestIds);
      made.add(landing);
      this.nic = openNic(conf, ctx.device(), executorId);
      if (nic != null) {
        made.add(nic);
      }
      // With a NIC, every map output is registered on it when made (pushes over links read them).
      this.store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, FIRST_OUTPUT_ID, nic),
          pool.child("map-output", conf.mapOutputBytes()), pool.child("map-output-spilled", conf.hostSpillBytes()),
          spillDir);
      made.add(store);
      this.copies = new dev.slipstream.gpu.DeviceCopyBatch.Pool(ctx);
      made.add(copies);
      this.backend = pushBackend(conf);
      this.ringLinks = residentApp != null && backend == Backend.GPUNETIO;
      this.server = new PushScheduler(ctx, kernel, store, FIRST_TABLE_ID, conf.serveInFlight(),
          new PushScheduler.Lanes(backend, conf.pushBlocks(), conf.pushThreads(),
              pool.child("push-tables", Long.MAX_VALUE)), this::laneTarget);
      made.add(server);
      GpuEndpoint base = new GpuEndpoint(HostIdentity.local(hostName), ctx.device(), ctx.pciBusId(), ctx.uuid(),
          landing.export());
      if (nic != null) {
        // Registered once; holders address it at iova LANDING_REGION_ID << 40.
        int mkey = nic.register(landing.region().devicePointer(), landing.region().length(), LANDING_REGION_ID);
        // A link's queue pairs: one slot per push in flight to that peer.
        this.nicLinks = new NicLinks(executorId, nic, conf.nicQueues(), conf.serveInFlight(),
            ringLinks, PushScheduler.GPUNETIO_QUEUE_DEPTH, relay);
        made.add(nicLinks);
        this.endpoint = base.withNic(new NicLanding(LANDING_REGION_ID, mkey, landing.region().length()));
      } else {
        this.nicLinks = null;
        this.endpoint = base;
      }
      this.writer = new PushWriter(server, new PeerLandings(executorId, endpoint, peers), this::importLanding,
          fetchTimeoutMs);
      this.resident = residentApp == null ? null : new ResidentServing(executorId, residentApp, ctx, store, conf,
          this::importLanding, java.time.Duration.ofMillis(fetchTimeoutMs), backend, STAGING_REGION_ID, nic);
    } catch (RuntimeException e) {
      for (int i = made.size() - 1; i >= 0; i--) {
        try {
          made.get(i).close();
        } catch (Exception s) {
          e.addSuppressed(s);
        }
      }
      throw e;
    }
  }

  /**
   * The queues the push lanes write through: nvlink stores, or with
   * {@code spark.slipstream.gpu.path=gpunetio} DOCA GPUNetIO WQEs (served by the native library's
   * software NIC); a library built without the GPUNetIO headers refuses the latter with the reason.
   */
  static Backend pushBackend(GpuConf conf) {
    if (!conf.gpunetio()) {
      return Backend.NVLINK;
    }
    String why = GpuRuntime.gpunetioUnavailable();
    if (why != null) {
      throw new IllegalStateException(GpuConf.PATH.key() + "=gpunetio, but this build has no gpunetio backend: " + why);
    }
    return Backend.GPUNETIO;
  }

  /**
   * The NIC {@code spark.slipstream.gpu.nic} names, opened for CUDA device {@code device}; null for
   * none. With {@code auto}, a build without a NIC implementation, a machine without rdma-core or
   * without an mlx5 device means none (logged); a named device that cannot be opened throws.
   */
  static NativeNic openNic(GpuConf conf, int device, String executorId) {
    if (conf.nic().equals("none")) {
      return null;
    }
    boolean auto = conf.nic().equals("auto");
    // The software NIC needs no rdma-core but the gpunetio backend (the GPUNetIO device headers).
    String why = conf.nic().equals(NativeNic.SOFTWARE) ? GpuRuntime.gpunetioUnavailable() : NativeNic.unavailable();
    if (why != null) {
      if (auto) {
        LOG.info("Executor {}: no gpunetio NIC ({}); GPUs of other machines are read over the staging path",
            executorId, why);
        return null;
      }
      throw new IllegalStateException(GpuConf.NIC.key() + "=" + conf.nic() + ", but " + why);
    }
    NativeNic.Doorbell doorbell = switch (conf.nicDoorbell()) {
      case "gpu" -> NativeNic.Doorbell.GPU;
      case "host" -> NativeNic.Doorbell.HOST;
      default -> NativeNic.Doorbell.AUTO;
    };
    try {
      NativeNic n = NativeNic.open(auto ? "" : conf.nic(), conf.nicPort(), conf.nicGidIndex(), device, doorbell);
      LOG.info("Executor {}: gpunetio NIC {} port {} for GPU {}", executorId, n, conf.nicPort(), device);
      return n;
    } catch (GpuException e) {
      if (auto && e.status() == SlipStatus.SLIP_ERR_NO_DEVICE) {
        LOG.info("Executor {}: no gpunetio NIC ({}); GPUs of other machines are read over the staging path",
            executorId, e.getMessage());
        return null;
      }
      throw new IllegalStateException(GpuConf.NIC.key() + "=" + conf.nic() + ": " + e.getMessage(), e);
    }
  }

  /**
   * A peer with a GPU registered: a gpunetio link to it when both have a NIC and machines differ,
   * or, with the software NIC (which reaches this machine only), when both are on this machine.
   */
  public void peerJoined(String peerId, GpuEndpoint peer) {
    if (resident != null && !closed && peer.hostId().equals(endpoint.hostId()) && !peerId.equals(executorId)
        && !nicRing(peer)) {
      resident.readerJoined(peerId, peer);
      if (peer.uuid().equals(endpoint.uuid()) && !sharedGpuWarned) {
        sharedGpuWarned = true;
        LOG.warn("Slipstream executor {}: executor {} shares GPU {} with it; with spark.slipstream.gpu.serve.resident"
            + " the two processes' kernels take turns on that GPU (without MPS), and resident requests can wait"
            + " milliseconds: resident serving is meant for one executor per GPU (docs/gpu.md)", executorId, peerId,
            endpoint.uuid());
      }
    }
    if (nicLinks != null && peer.gpunetio() && !closed
        && peer.hostId().equals(endpoint.hostId()) == nic.software()) {
      nicLinks.peerJoined(peerId);
    }
  }

  /** Whether this executor has (or gets) a gpunetio link to {@code peer}: both have a NIC, and the NIC reaches it. */
  private boolean linkable(GpuEndpoint peer) {
    return nicLinks != null && peer.gpunetio() && peer.hostId().equals(endpoint.hostId()) == nic.software();
  }

  /**
   * Whether resident rings between this executor and {@code peer} (either way) go over their gpunetio
   * link, in two copies: resident serving over gpunetio, a link, and the peer on another machine (or
   * any linked peer with {@code spark.slipstream.gpu.serve.resident.rings=nic}). The same on both sides.
   */
  public boolean nicRing(GpuEndpoint peer) {
    return ringLinks && linkable(peer) && (conf.nicRingsOnly() || !peer.hostId().equals(endpoint.hostId()));
  }

  /**
   * A resident ring's set-up message from a peer, relayed by the driver. An offer (this executor as the
   * holder) is answered through {@code relay}; answers to this executor's offers go to
   * {@code answers} (the reader's side, {@link ResidentRequests}).
   */
  public void ringOffer(dev.slipstream.gpu.serve.RingOffer o, java.util.function.Consumer<dev.slipstream.gpu.serve.RingOffer> relay) {
    if (o.kind() != dev.slipstream.gpu.serve.RingOffer.Kind.OFFER) {
      throw new IllegalArgumentException("ring " + o.kind() + " from " + o.from() + " for the holder's side, expected"
          + " an offer");
    }
    if (!o.to().equals(executorId)) {
      throw new IllegalArgumentException("ring offer from " + o.from() + " is addressed to executor " + o.to()
          + ", expected " + executorId);
    }
    java.util.Optional<GpuEndpoint> reader = peers.peer(o.from()).flatMap(PeerLandings.Peer::gpu);
    dev.slipstream.gpu.serve.RingOffer answer;
    if (resident == null || closed || reader.isEmpty() || !nicRing(reader.get())) {
      answer = dev.slipstream.gpu.serve.RingOffer.refuse(executorId, o.from(), reader.isEmpty()
          ? "reader " + o.from() + " has no GPU in the peer table"
          : "executor " + executorId + " serves no resident ring over a NIC link to " + o.from());
    } else {
      answer = resident.remoteReaderOffered(o, reader.get(), nicLinks);
    }
    relay.accept(answer);
  }

  /**
   * A new copy of holder {@code holder}'s ring for this executor as its reader, registered on this
   * executor's NIC, in {@code dir}; the caller closes it.
   */
  public dev.slipstream.gpu.RemoteRing remoteRingCopy(String dir, String app, String holder, int slots)
      throws java.io.IOException {
    java.nio.file.Path path = java.nio.file.Path.of(ResidentServing.ringPath(dir, app, holder, executorId) + "-copy");
    java.nio.file.Files.deleteIfExists(path); // left by an executor of the same id that is gone
    int id = nextCopyId.getAndIncrement();
    if (id >= FIRST_TABLE_ID) {
      throw new IllegalStateException("executor " + executorId + " made " + (id - FIRST_COPY_REGION_ID)
          + " copies of holders' rings, more than its region ids allow");
    }
    return dev.slipstream.gpu.RemoteRing.create(ctx, nic, path, slots, id);
  }

  /**
   * The host's queue pair of the connected link to {@code holder}, leased for one ring (the reader
   * posts its requests on it); empty when the link is not connected (yet).
   */
  public java.util.Optional<NicLinks.Lease> ringHostLease(String holder) {
    return nicLinks == null ? java.util.Optional.empty() : nicLinks.ringLease(holder, NicLinks.RingRole.HOST);
  }

  /** The host queue of a lease from {@link #ringHostLease}. */
  public dev.slipstream.gpu.HostQueue hostQueue(NicLinks.Lease lease) {
    return nic.hostQueue(lease.link(), lease.firstQueue());
  }

  /** This executor's NIC landing region as requests into it name it (holders on other machines push there). */
  public java.util.Optional<RegionDescriptor> nicLandingDescriptor() {
    return endpoint.nic().map(n -> n.descriptor(ctx.device()));
  }

  /** Whether the gpunetio link to {@code peer} is connected (both sides can write over it). */
  public boolean nicLinked(String peer) {
    return nicLinks != null && nicLinks.connected(peer);
  }

  /**
   * What a new push lane for {@code req} pushes into: the reader's imported landing region (mapped
   * by the writer), else its NIC landing region over a slot of the link to it. Throws when there
   * is no connected link (yet) or every slot is in use.
   */
  private LaneTarget laneTarget(WriteRequest req) {
    RemoteRegion r = imported.get(req.landing());
    if (r != null) {
      return LaneTarget.imported(r);
    }
    String reader = req.reader().executorId();
    if (nicLinks == null) {
      throw new IllegalStateException("no imported landing region for " + req.landing() + " and no gpunetio NIC");
    }
    // The writer checked the descriptor against the reader's registered NIC landing region.
    NicLanding to = new NicLanding((int) req.landing().id(), (int) req.landing().key(), req.landing().length());
    NicLinks.Lease lease = nicLinks.lease(reader).orElseThrow(() -> new IllegalStateException(
        "no connected gpunetio link to reader executor " + reader + " (yet)"));
    nicLanes.incrementAndGet();
    return LaneTarget.overLink(lease, to, nic);
  }

  /** What the resident server did since start, when it runs. */
  public java.util.Optional<dev.slipstream.gpu.ResidentServer.Stats> residentStats() {
    return resident == null || closed ? java.util.Optional.empty() : java.util.Optional.of(resident.stats());
  }

  /** Push lanes made over NIC links since start (one per link slot in use). */
  public long nicLanes() {
    return nicLanes.get();
  }

  /** A peer's gpunetio link offer (relayed by the driver); throws, connecting nothing, when it is bad. */
  public void nicOffer(NicOffer o) {
    if (nicLinks == null) {
      throw new IllegalStateException("executor " + executorId + " has no gpunetio NIC (" + GpuConf.NIC.key() + ")");
    }
    nicLinks.offered(o);
  }

  /** Peers with a connected gpunetio link. */
  public List<String> nicPeers() {
    return nicLinks == null ? List.of() : nicLinks.connected();
  }

  /**
   * Opens device {@code ordinal} for executor {@code executorId}, or throws with the probe's reason
   * (no library, no driver, no GPU) or the failing call. {@code peers} is this executor's copy of the
   * driver's peer table: the only source of the landing regions it pushes into; {@code requestIds}
   * gives the ids of its write requests (the shuffle node's sequence); a request it serves waits at
   * most {@code fetchTimeoutMs} for a lane and its push.
   */
  /**
   * Opens GPU {@code ordinal} for executor {@code executorId}; {@code residentApp}: the application
   * whose readers of this machine the resident server serves, or null for none; {@code spillDir}: where
   * map outputs go when the device and host budgets are spent.
   */
  public static GpuExecutor open(String executorId, String hostName, int ordinal, GpuConf conf,
      PeerLandings.PeerTable peers, MemoryPool memory, java.util.function.LongSupplier requestIds, long fetchTimeoutMs,
      java.util.function.Consumer<NicOffer> relay, String residentApp, java.nio.file.Path spillDir) {
    GpuProbe probe = GpuRuntime.probe();
    if (!probe.available()) {
      throw new IllegalStateException("executor " + executorId + " has no usable GPU: " + probe.reason());
    }
    if (ordinal >= probe.deviceCount()) {
      throw new IllegalStateException("executor " + executorId + " was assigned GPU " + ordinal + ", but this machine has "
          + probe.deviceCount() + " GPU(s) (ordinals 0.." + (probe.deviceCount() - 1) + ")");
    }
    GpuContext ctx = GpuContext.open(ordinal);
    try {
      GpuExecutor g = new GpuExecutor(executorId, ctx, conf, hostName, peers, memory, requestIds, fetchTimeoutMs,
          relay, residentApp, spillDir);
      LOG.info("Slipstream executor {} opened GPU {} ({}, {}); device landing {} bytes, map-output budget {} bytes,"
          + " pushes over {} queues", executorId, ordinal, g.endpoint.pciBusId(), g.endpoint.uuid(), conf.landingBytes(),
          conf.mapOutputBytes(), g.backend);
      return g;
    } catch (RuntimeException e) {
      ctx.close();
      throw e;
    }
  }

  public GpuContext context() { return ctx; }
  public GpuEndpoint endpoint() { return endpoint; }
  public DeviceLanding landing() { return landing; }
  public DeviceMapOutputStore store() { return store; }

  /** Batches of queued device copies: acquire one for a task's copies, close it after. */
  public dev.slipstream.gpu.DeviceCopyBatch.Pool copies() { return copies; }
  public long fetchTimeoutMs() { return fetchTimeoutMs; }
  public PushScheduler server() { return server; }
  /** The block writer into device landing regions (checks the landing, maps it, pushes). */
  public PushWriter writer() { return writer; }

  /**
   * The imported region for a reader's landing descriptor (checked against the peer table before):
   * an alias of this executor's own, else a CUDA IPC import whose mapped allocation must cover the
   * length the descriptor claims (cuMemGetAddressRange), or it is closed and refused.
   */
  private RemoteRegion importLanding(RegionExport d) {
    if (closed) {
      throw new IllegalStateException("GPU of executor " + executorId + " is closed");
    }
    RegionDescriptor key = d.descriptor();
    RemoteRegion r = imported.get(key);
    if (r != null) {
      return r;
    }
    if (d.equals(landing.export())) {
      return imported.computeIfAbsent(key, x -> RemoteRegion.alias(landing.region()));
    }
    // One import per descriptor, made under the map's lock for that key: CUDA refuses a second
    // cudaIpcOpenMemHandle of a handle this process already mapped (cudaErrorAlreadyMapped).
    return imported.computeIfAbsent(key, x -> {
      RemoteRegion fresh = RemoteRegion.importFrom(ctx, d);
      try {
        fresh.checkMappedLength(ctx);
      } catch (RuntimeException e) {
        fresh.close();
        throw e;
      }
      return fresh;
    });
  }

  /** Whether every map output {@code request} reads is in device memory (serving it restores nothing from host memory). */
  public boolean onDevice(WriteRequest request) {
    for (ShuffleMessages.Entry e : request.entries()) {
      if (!store.onDevice(request.shuffleId(), e.mapId())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Executor {@code executorId} was lost: the landing ranges retained for its pushes are released,
   * and its push lanes and imported landing region are forgotten.
   */
  public void peerLost(String executorId, GpuEndpoint peer) {
    if (resident != null) {
      resident.readerLost(executorId); // before its landing region is unmapped below
    }
    if (nicLinks != null) {
      nicLinks.peerLost(executorId);
    }
    landing.holderLost(executorId);
    peer.landing().ifPresent(d -> {
      server.forget(d.descriptor());
      RemoteRegion r = imported.remove(d.descriptor());
      if (r != null) {
        r.close();
      }
    });
  }

  /** Counts {@code bytes} of device-table blocks a map task stored. */
  public void tableBytesWritten(long bytes) {
    tableBytes.addAndGet(bytes);
  }

  /** Bytes of device-table blocks map tasks stored on this executor so far. */
  public long tableBytesWritten() {
    return tableBytes.get();
  }

  /** Keeps what task {@code taskAttemptId}'s GPU shuffle read moved, until {@link #forgetRead}. */
  public void recordRead(long taskAttemptId, GpuReadStats stats) {
    reads.put(taskAttemptId, stats);
  }

  /** What task {@code taskAttemptId}'s last GPU shuffle read moved, while the task runs. */
  public java.util.Optional<GpuReadStats> readStats(long taskAttemptId) {
    return java.util.Optional.ofNullable(reads.get(taskAttemptId));
  }

  public void forgetRead(long taskAttemptId) {
    reads.remove(taskAttemptId);
  }

  /** Frees a shuffle's device map outputs (those a push still reads go when it ends). */
  public int removeShuffle(int shuffleId) {
    return store.removeShuffle(shuffleId);
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    RuntimeException first = null;
    if (resident != null) {
      resident.close(); // the kernel stops before the store, the landing regions and the context go
    }
    server.close(); // the lanes' queue sets go before the regions they name
    if (nicLinks != null) {
      nicLinks.close();  // links before the NIC; the NIC before the landing region it registered
    }
    for (RemoteRegion r : imported.values()) {
      r.close();
    }
    imported.clear();
    // The accounts go after the store and the landing region: closing the pool fails loudly on a leak.
    AutoCloseable accounts = () -> {
      landingPool.release(landingReserved);
      pool.close();
    };
    AutoCloseable nicClose = () -> {
      if (nic != null) {
        nic.close();
      }
    };
    // The store deregisters its outputs from the NIC; the NIC goes before the landing region it registered.
    for (AutoCloseable c : new AutoCloseable[] {copies, store, nicClose, landing, accounts, kernel, ctx}) {
      try {
        c.close();
      } catch (Exception e) {
        if (first == null) {
          first = new IllegalStateException("closing the GPU of executor " + executorId + ": " + e.getMessage(), e);
        } else {
          first.addSuppressed(e);
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }
}
