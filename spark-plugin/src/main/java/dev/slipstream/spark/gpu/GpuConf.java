package dev.slipstream.spark.gpu;

import dev.slipstream.core.config.ConfigEntry;
import dev.slipstream.core.config.ConfigSource;
import java.util.List;

/**
 * Typed configuration of the GPU path, validated when the shuffle manager starts: a bad
 * value fails with the key, the value got and what is expected.
 */
public final class GpuConf {
  public static final ConfigEntry<String> MODE = ConfigEntry.choice("spark.slipstream.gpu.mode", "auto",
      List.of("auto", "off", "require"),
      "GPU executors: auto = an executor that Spark assigned a GPU (spark.executor.resource.gpu.amount, with"
          + " spark.plugins=dev.slipstream.spark.gpu.SlipstreamGpuPlugin) opens it when the GPU probe finds one, and"
          + " otherwise logs why once and stays host-only; require = such an executor fails to start without a usable"
          + " GPU; off = never open a GPU. GPU shuffles (SlipstreamGpuShuffle) fail with the reason on executors"
          + " without one.");
  public static final ConfigEntry<String> RESOURCE = ConfigEntry.string("spark.slipstream.gpu.resourceName", "gpu",
      "Name of the Spark resource that holds the executor's GPU (its first address is the CUDA device ordinal).");
  public static final ConfigEntry<Long> LANDING_BYTES = ConfigEntry.size("spark.slipstream.gpu.landing.bytes", "256m",
      "Device memory of an executor's GPU landing region, where GPU shuffle blocks are pushed for its reduce tasks"
          + " (at least 1m).");
  public static final ConfigEntry<Long> MAP_OUTPUT_BYTES = ConfigEntry.size(
      "spark.slipstream.gpu.mapOutput.memoryBytes", "1g",
      "Device memory for GPU map outputs on one executor; beyond it the oldest outputs move to host memory"
          + " (spark.slipstream.gpu.mapOutput.hostBytes), then to files in Spark's local directory (at least 1m).");
  public static final ConfigEntry<Long> HOST_SPILL_BYTES = ConfigEntry.size(
      "spark.slipstream.gpu.mapOutput.hostBytes", "2g",
      "Host memory that GPU map outputs may spill to when the device budget is spent; beyond it the oldest spilled"
          + " outputs move on to files in Spark's local directory (0: outputs spill from the device straight to disk);"
          + " a map task fails naming both budgets only when its output fits neither and disk refuses it.");
  public static final ConfigEntry<Integer> SERVE_IN_FLIGHT = ConfigEntry.integer("spark.slipstream.gpu.serve.inFlight",
      "4", 1, 64,
      "Device write requests one executor pushes at once for its peers' reduce tasks, each on a stream of its own"
          + " (a push kernel launch covers all blocks of a request); more wait until their fetch deadline."
          + " A reduce task also keeps up to this many requests to its holders in flight.");
  public static final ConfigEntry<Integer> SERVE_THREADS = ConfigEntry.integer("spark.slipstream.gpu.serve.threads",
      "2", 0, 64,
      "Threads that start peers' device write requests on one executor (checks, pins, kernel launch; none waits for"
          + " a push: one completion thread per executor watches them all); 0 starts each on the transport thread it"
          + " arrived on (requests from one peer then start one after another).");
  public static final ConfigEntry<java.time.Duration> SERVE_SPIN = ConfigEntry.duration(
      "spark.slipstream.gpu.serve.spin", "50ms",
      "How long an idle serving thread (spark.slipstream.gpu.serve.threads) keeps polling for the next device write"
          + " request before it parks (0: it parks at once); longer than the gaps between a stage's reduce tasks. A"
          + " request handed over meanwhile starts within microseconds instead of waking a parked thread (50 to 150 us"
          + " on a GPU host whose cores went idle); the price is up to serve.threads busy cores for that long after"
          + " each request. Requests that come over the transport rather than the request ring also wait for an event"
          + " loop to wake: pair it with spark.slipstream.tcp.ioMode=epoll and spark.slipstream.tcp.busyPoll of the"
          + " same length there (docs/gpu.md); at most 1s.");
  public static final ConfigEntry<Boolean> REQUEST_RING = ConfigEntry.bool("spark.slipstream.gpu.requestRing", "true",
      "Whether reduce tasks write their device write requests to holders of the same machine into the holder's"
          + " request ring, a shared-memory file (mode 0600) that one holder thread polls, instead of sending them"
          + " over the transport (the answers still come over the transport; a request larger than a slot or a"
          + " full ring falls back to it). Saves the transport's thread wake-ups and hand-offs, at the price of one"
          + " busy core per executor for spark.slipstream.gpu.requestRing.poll after each request. Not used with"
          + " spark.authenticate (the ring bypasses the transport's authentication); an executor that cannot make its ring logs why and takes"
          + " requests over the transport.");
  public static final ConfigEntry<String> REQUEST_RING_DIR = ConfigEntry.string("spark.slipstream.gpu.requestRing.dir",
      "/dev/shm", "Folder of the request rings' shared-memory files (a tmpfs; every executor of a machine must see"
          + " the same one).");
  public static final ConfigEntry<java.time.Duration> REQUEST_RING_POLL = ConfigEntry.duration(
      "spark.slipstream.gpu.requestRing.poll", "50ms",
      "How long the request ring's holder thread polls back to back after a request before it polls with pauses"
          + " (up to 100 us apart); at most 1s.");
  public static final ConfigEntry<Boolean> SERVE_RESIDENT = ConfigEntry.bool("spark.slipstream.gpu.serve.resident",
      "false",
      "Whether this executor's GPU also runs a resident serving kernel: it makes a request ring (a shared-memory"
          + " file in spark.slipstream.gpu.requestRing.dir, mode 0600) for each reader of the same machine, and, with"
          + " spark.slipstream.gpu.path=gpunetio and a NIC, one in two copies for each reader it has a gpunetio link to"
          + " on another machine (spark.slipstream.gpu.serve.resident.rings); the kernel takes their device write"
          + " requests from it, checks them on the device, pushes the blocks (stores into the reader's landing region,"
          + " or with spark.slipstream.gpu.path=gpunetio RDMA writes it posts itself) and answers in the ring, with no"
          + " CPU thread on a request's path. Readers use a holder's ring once the holder serves it; requests of more"
          + " than 30 blocks, for outputs spilled to host memory, or under spark.authenticate (the ring bypasses the"
          + " transport's authentication) go the host-driven way. Executor processes that share one GPU take turns on"
          + " it (without MPS), so their resident kernels wait milliseconds for each other: use it with one executor"
          + " per GPU.");
  public static final ConfigEntry<String> SERVE_RESIDENT_RINGS = ConfigEntry.choice(
      "spark.slipstream.gpu.serve.resident.rings", "auto", List.of("auto", "nic"),
      "Which readers' resident rings go over the NIC: auto = readers on other machines that this executor has a"
          + " gpunetio link to (readers of its machine get a shared-memory ring file); nic = every reader it has a"
          + " gpunetio link to (with spark.slipstream.gpu.nic=softnic: the readers of its machine), to run the"
          + " NIC's ring path on one machine. A NIC ring costs each link two more queue pairs.");
  public static final ConfigEntry<Integer> SERVE_RESIDENT_CTAS = ConfigEntry.integer(
      "spark.slipstream.gpu.serve.resident.ctas", "4", 1, 64,
      "CUDA blocks (of 256 threads) the resident serving kernel holds while it has work; a request over 128 KiB is"
          + " copied by all of them that are free (a block copies about 40 to 48 GB/s). More serve large requests"
          + " faster; small ones cost 1 to 3 us more with 8 to 16 blocks than with 2.");
  public static final ConfigEntry<java.time.Duration> SERVE_RESIDENT_IDLE = ConfigEntry.duration(
      "spark.slipstream.gpu.serve.resident.idle", "20ms",
      "How long the resident serving kernel waits for a request before it leaves the GPU (it is launched again by"
          + " the next request, about 10 to 20 us later); at most 1s.");
  public static final ConfigEntry<Long> REQUEST_MIN_BYTES = ConfigEntry.size("spark.slipstream.gpu.request.minBytes",
      "4m",
      "A reduce task splits the blocks it reads from one holder into up to spark.slipstream.gpu.serve.inFlight device"
          + " write requests of whole blocks, so their pushes and fixed costs overlap, but none below this size"
          + " (a block larger than it goes alone).");
  public static final ConfigEntry<Integer> PUSH_BLOCKS = ConfigEntry.integer("spark.slipstream.gpu.push.blocks", "64",
      1, 1024,
      "CUDA blocks one device write request's push kernel spreads its 1 MiB pieces over, at most (each block owns"
          + " one nvlink queue; requests in flight at once run side by side).");
  public static final ConfigEntry<Integer> PUSH_THREADS = ConfigEntry.integer("spark.slipstream.gpu.push.threads",
      "256", 32, 1024, "Threads per CUDA block of the push kernel: a multiple of 32.");
  public static final ConfigEntry<String> RAPIDS_SHUFFLE = ConfigEntry.choice("spark.slipstream.rapids.shuffle",
      "device", List.of("device", "host"),
      "RAPIDS Accelerator queries with Slipstream's session extension (spark.sql.extensions="
          + "dev.slipstream.rapids.SlipstreamRapidsExtensions, Spark 4 line): device = each shuffle exchange that"
          + " Slipstream's GPU path can serve keeps its partitions in GPU memory (hash, range or single partitioning"
          + " into at most 2000 partitions; the others stay RAPIDS' host-serialized exchanges, logged once per"
          + " reason); host = every exchange stays RAPIDS'. A SQL setting: a session may change it.");
  public static final ConfigEntry<String> RAPIDS_COMPRESSION = ConfigEntry.choice(
      "spark.slipstream.rapids.compression", "none", List.of("none", "lz4"),
      "How RAPIDS' shuffles on Slipstream's GPU path store their pieces (spark.slipstream.rapids.shuffle=device):"
          + " none = as RAPIDS' GPU serializer wrote them; lz4 = each piece of 1 KiB or more compressed on the GPU"
          + " with nvCOMP's batched LZ4 in 64 KiB chunks, and decompressed on the GPU by the reducer (a piece that"
          + " does not get smaller stays as it was). lz4 stores and moves about half the bytes, and adaptive"
          + " execution then sizes partitions by bytes like those of RAPIDS' own (LZ4-compressed) shuffle, for"
          + " GPU time spent compressing. A SQL setting, read when a query is planned.");
  public static final ConfigEntry<String> PATH = ConfigEntry.choice("spark.slipstream.gpu.path", "auto",
      List.of("auto", "nvlink", "gpunetio", "staged"),
      "How a reduce task reads GPU shuffle blocks from other executors: auto = pushed by the holder's GPU into this"
          + " GPU's landing region when both share a machine (nvlink: the push kernel stores through CUDA IPC), else"
          + " the staging path (the holder copies the blocks to host memory and writes them into this executor's host"
          + " landing region over the transport; this executor copies them to its GPU); nvlink = the same, named;"
          + " auto also reads holders on other machines over their NIC link (spark.slipstream.gpu.nic) once it is"
          + " connected: the holder's push kernel posts DOCA GPUNetIO RDMA writes into this GPU's landing region;"
          + " gpunetio = GPUNetIO RDMA writes for every pair with NICs on both sides, on one machine too (with the"
          + " software NIC, spark.slipstream.gpu.nic=softnic), and for pairs of one machine without NIC links"
          + " gpunetio queue pairs of the native library's software NIC in place of nvlink stores (both need a"
          + " native library built with the GPUNetIO device headers); staged = the staging path for every holder"
          + " (where executors of one machine cannot share CUDA IPC handles, e.g. separate containers).");
  public static final ConfigEntry<String> NIC = ConfigEntry.string("spark.slipstream.gpu.nic", "auto",
      "The RDMA NIC this executor's GPU uses for gpunetio links to executors on other machines: auto = the first"
          + " mlx5 (ConnectX) device when the native library has a NIC implementation and rdma-core is installed,"
          + " else none (logged once); none = no NIC; softnic = the native library's software NIC, which links"
          + " executors of this machine only (GPU-built RDMA writes executed by CPU threads through CUDA IPC: a test"
          + " bed for the NIC path where there is no RDMA NIC); or an RDMA device name such as mlx5_0 (then a"
          + " missing device or library fails the executor's GPU start with the reason).");
  public static final ConfigEntry<Integer> NIC_PORT = ConfigEntry.integer("spark.slipstream.gpu.nic.port", "1", 1,
      255, "Port of the RDMA NIC (spark.slipstream.gpu.nic).");
  public static final ConfigEntry<Integer> NIC_GID_INDEX = ConfigEntry.integer("spark.slipstream.gpu.nic.gidIndex",
      "0", 0, 255, "GID table index of the NIC port for RoCE (show_gids lists them; RoCE v2 over IPv4 is often 3).");
  public static final ConfigEntry<String> NIC_DOORBELL = ConfigEntry.choice("spark.slipstream.gpu.nic.doorbell",
      "auto", List.of("auto", "gpu", "host"),
      "Who rings the NIC's doorbell after a push kernel posted its writes: gpu = the kernel writes the NIC's"
          + " doorbell register (mapped into the GPU; needs GPU-to-NIC peer access), host = a host thread rings it"
          + " from the producer index the kernel publishes, auto = gpu where the register can be mapped, else host.");
  public static final ConfigEntry<Integer> NIC_QUEUES = ConfigEntry.integer("spark.slipstream.gpu.nic.queues", "8",
      2, 128, "Queue pairs one push over a gpunetio link posts on (one CUDA block each; one carries the block"
          + " table). A link to a peer has this many for each of spark.slipstream.gpu.serve.inFlight pushes at once,"
          + " and 2 more with resident serving over gpunetio: at most 256 in all.");

  public static final ConfigEntry<java.time.Duration> RETAIN_GRACE = ConfigEntry.duration(
      "spark.slipstream.gpu.landing.retainGrace", "30s",
      "How long past its fetch deadline a reduce task's device write request keeps its landing range out of reach"
          + " when its holder has not answered it: the range is handed to another request only once the holder"
          + " answered (a holder answers only when its push can store nothing more), left the cluster, or this"
          + " passed. Covers the holder's own deadline (the request's budget from its arrival), its answer's way"
          + " back and the end of a push launched just before that deadline. Retained bytes are reported as"
          + " gpu.landingRetained; 0 hands the range out at the fetch deadline (a push still running could then"
          + " corrupt the next request's blocks; its signal and block table could not complete it). At most 1h.");

  private static final long MIN_BYTES = 1L << 20;

  private final String mode;
  private final String resource;
  private final long landingBytes;
  private final long mapOutputBytes;
  private final long hostSpillBytes;
  private final int serveInFlight;
  private final int serveThreads;
  private final java.time.Duration serveSpin;
  private final boolean requestRing;
  private final String requestRingDir;
  private final boolean serveResident;
  private final int serveResidentCtas;
  private final java.time.Duration serveResidentIdle;
  private final boolean nicRingsOnly;
  private final java.time.Duration requestRingPoll;
  private final long requestMinBytes;
  private final int pushBlocks;
  private final int pushThreads;
  private final boolean stagedOnly;
  private final boolean gpunetio;
  private final java.time.Duration retainGrace;
  private final String nic;
  private final int nicPort;
  private final int nicGidIndex;
  private final String nicDoorbell;
  private final int nicQueues;

  public GpuConf(ConfigSource source) {
    this.mode = MODE.get(source);
    this.resource = RESOURCE.get(source);
    if (resource.isEmpty()) {
      throw new IllegalArgumentException(RESOURCE.key() + ": got an empty name, expected a Spark resource name such as 'gpu'");
    }
    this.landingBytes = atLeast(LANDING_BYTES, LANDING_BYTES.get(source), MIN_BYTES);
    this.mapOutputBytes = atLeast(MAP_OUTPUT_BYTES, MAP_OUTPUT_BYTES.get(source), MIN_BYTES);
    this.hostSpillBytes = atLeast(HOST_SPILL_BYTES, HOST_SPILL_BYTES.get(source), 0);
    this.serveInFlight = SERVE_IN_FLIGHT.get(source);
    this.serveThreads = SERVE_THREADS.get(source);
    this.serveSpin = upToASecond(SERVE_SPIN, source);
    this.requestRing = REQUEST_RING.get(source);
    this.requestRingDir = REQUEST_RING_DIR.get(source);
    if (!requestRingDir.startsWith("/")) {
      throw new IllegalArgumentException(REQUEST_RING_DIR.key() + ": got '" + requestRingDir
          + "', expected an absolute path");
    }
    this.requestRingPoll = upToASecond(REQUEST_RING_POLL, source);
    this.serveResident = SERVE_RESIDENT.get(source);
    this.serveResidentCtas = SERVE_RESIDENT_CTAS.get(source);
    this.serveResidentIdle = upToASecond(SERVE_RESIDENT_IDLE, source);
    this.nicRingsOnly = "nic".equals(SERVE_RESIDENT_RINGS.get(source));
    this.requestMinBytes = atLeast(REQUEST_MIN_BYTES, REQUEST_MIN_BYTES.get(source), 1);
    this.pushBlocks = PUSH_BLOCKS.get(source);
    this.pushThreads = PUSH_THREADS.get(source);
    if (pushThreads % 32 != 0) {
      throw new IllegalArgumentException(PUSH_THREADS.key() + ": got " + pushThreads
          + ", expected a multiple of 32 (whole warps) in 32..1024");
    }
    this.stagedOnly = "staged".equals(PATH.get(source));
    this.gpunetio = "gpunetio".equals(PATH.get(source));
    this.nic = NIC.get(source).trim();
    if (nic.isEmpty() || !nic.matches("[A-Za-z0-9_.-]{1,64}")) {
      throw new IllegalArgumentException(NIC.key() + ": got '" + nic + "', expected auto, none or an RDMA device name"
          + " such as mlx5_0");
    }
    this.nicPort = NIC_PORT.get(source);
    this.nicGidIndex = NIC_GID_INDEX.get(source);
    this.nicDoorbell = NIC_DOORBELL.get(source);
    this.nicQueues = NIC_QUEUES.get(source);
    // Resident serving over gpunetio adds the two queue pairs of resident rings to every link.
    int ringQueues = serveResident && gpunetio ? 2 : 0;
    if ((long) nicQueues * serveInFlight + ringQueues > 256) {
      throw new IllegalArgumentException(NIC_QUEUES.key() + " x " + SERVE_IN_FLIGHT.key() + ": got " + nicQueues + " x "
          + serveInFlight + " = " + (long) nicQueues * serveInFlight + " queue pairs per gpunetio link"
          + (ringQueues > 0 ? " and 2 for resident rings" : "") + ", expected at most 256 in all");
    }
    this.retainGrace = RETAIN_GRACE.get(source);
    if (retainGrace.isNegative() || retainGrace.toMillis() > 3_600_000L) {
      throw new IllegalArgumentException(RETAIN_GRACE.key() + ": got " + retainGrace.toMillis()
          + "ms, expected 0 to 1h");
    }
  }

  /** A polling time: 0 to 1 s. */
  private static java.time.Duration upToASecond(ConfigEntry<java.time.Duration> e, ConfigSource source) {
    java.time.Duration d = e.get(source);
    if (d.isNegative() || d.toMillis() > 1000) {
      throw new IllegalArgumentException(e.key() + ": got " + d.toMillis() + "ms, expected 0 to 1s");
    }
    return d;
  }

  private static long atLeast(ConfigEntry<Long> e, long v, long min) {
    if (v < min) {
      throw new IllegalArgumentException(e.key() + ": got " + v + " bytes, expected at least " + min);
    }
    return v;
  }

  public String mode() { return mode; }
  public boolean off() { return "off".equals(mode); }
  public boolean required() { return "require".equals(mode); }
  public String resource() { return resource; }
  public long landingBytes() { return landingBytes; }
  public long mapOutputBytes() { return mapOutputBytes; }
  public long hostSpillBytes() { return hostSpillBytes; }
  public int serveInFlight() { return serveInFlight; }
  /** Threads that start device write requests; 0: the transport thread each arrives on. */
  public int serveThreads() { return serveThreads; }
  public java.time.Duration serveSpin() { return serveSpin; }
  public boolean requestRing() { return requestRing; }
  public String requestRingDir() { return requestRingDir; }
  public java.time.Duration requestRingPoll() { return requestRingPoll; }
  public boolean serveResident() { return serveResident; }
  public int serveResidentCtas() { return serveResidentCtas; }
  public java.time.Duration serveResidentIdle() { return serveResidentIdle; }
  /** Whether every reader with a gpunetio link gets a NIC ring, this machine's too ({@link #SERVE_RESIDENT_RINGS} nic). */
  public boolean nicRingsOnly() { return nicRingsOnly; }
  public long requestMinBytes() { return requestMinBytes; }
  public int pushBlocks() { return pushBlocks; }
  public int pushThreads() { return pushThreads; }
  /** True when every remote GPU block is read over the staging path, also from holders of this machine. */
  public boolean stagedOnly() { return stagedOnly; }
  /** True when holders push over gpunetio queue pairs instead of nvlink stores. */
  public boolean gpunetio() { return gpunetio; }
  /** "auto", "none" or an RDMA device name. */
  public String nic() { return nic; }
  public int nicPort() { return nicPort; }
  public int nicGidIndex() { return nicGidIndex; }
  /** "auto", "gpu" or "host". */
  public String nicDoorbell() { return nicDoorbell; }
  public int nicQueues() { return nicQueues; }
  /** How long past the fetch deadline a request's landing range waits for its holder's answer. */
  public java.time.Duration retainGrace() { return retainGrace; }

  /**
   * The CUDA device ordinal from a Spark resource address; the discovery script and Spark's
   * standalone worker hand out ordinals ("0", "1").
   */
  public static int ordinal(String resource, String[] addresses) {
    if (addresses == null || addresses.length == 0) {
      throw new IllegalArgumentException("Spark resource '" + resource + "': no address, expected one GPU ordinal");
    }
    String a = addresses[0].trim();
    try {
      int d = Integer.parseInt(a);
      if (d >= 0) {
        return d;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException("Spark resource '" + resource + "': address '" + a
        + "', expected a CUDA device ordinal (0, 1, ...) as bin/slipstream-gpu-discover reports");
  }
}
