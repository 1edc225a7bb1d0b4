package dev.slipstream.spark;

import dev.slipstream.core.config.ConfigEntry;
import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.transport.Transports;
import java.time.Duration;
import java.util.Optional;
import org.apache.spark.SparkConf;

/**
 * The plugin's typed configuration, validated at start-up: an unknown transport or a bad size
 * fails with the key, the value got and the valid values.
 */
public final class SlipstreamConf {
  public static final ConfigEntry<String> TRANSPORT = ConfigEntry.string("spark.slipstream.transport", "tcp",
      "Transport provider that moves shuffle blocks: tcp (any cluster), loopback (one JVM, local mode only).");
  public static final ConfigEntry<Duration> REGISTRATION_TIMEOUT = ConfigEntry.duration(
      "spark.slipstream.registrationTimeout", "120s",
      "How long an executor keeps trying to register its endpoint with the driver before it fails.");
  public static final ConfigEntry<Duration> RPC_TIMEOUT = ConfigEntry.duration(
      "spark.slipstream.rpcTimeout", "30s", "Deadline of one Slipstream RPC (registration, peer lookup, metrics).");

  public static final ConfigEntry<Integer> DIRECT_PARTITIONS_MAX = ConfigEntry.integer(
      "spark.slipstream.writer.directPartitionsMax", "200", 0, 100_000,
      "Shuffles with at most this many partitions and no map-side combine serialize each record straight into its"
          + " partition's registered pages (one open stream per partition); others sort by partition first.");

  /** RAPIDS' Spark plugin class, whose presence in spark.plugins turns the codec threads on by default. */
  static final String RAPIDS_PLUGIN = "com.nvidia.spark.SQLPlugin";
  /** The most codec threads {@code auto} starts. */
  static final int AUTO_CODEC_THREADS_MAX = 32;
  public static final ConfigEntry<String> CODEC_THREADS = ConfigEntry.string(
      "spark.slipstream.codec.threads", "auto",
      "Threads per executor that run the shuffle codec (compression, I/O encryption) beside the tasks: map tasks"
          + " hand their partitions' serialized bytes over to them (encoding a chunk themselves when the threads"
          + " fall behind), reduce tasks' blocks are decoded ahead of their deserializers. Meant for cores the task"
          + " threads leave idle. auto (the default): one per task slot (the executor's cores over spark.task.cpus,"
          + " at most 32; its cores are spark.executor.cores, else those a local or local-cluster master gives it,"
          + " else the JVM's processors) in executors that run the RAPIDS Accelerator (spark.plugins lists "
          + RAPIDS_PLUGIN + "), whose tasks wait on the GPU; none elsewhere. 0 runs the codec on the task threads;"
          + " 1 to 256 sets the number.");
  public static final ConfigEntry<Long> DECODE_AHEAD_BYTES = ConfigEntry.size(
      "spark.slipstream.reader.decodeAheadBytes", "16m",
      "Decoded bytes one reduce task may hold ahead of its reads, on the JVM heap (at least 64k). Beyond it a"
          + " block is decoded on the task's thread as it is read.");
  public static final ConfigEntry<Long> ENCODE_AHEAD_BYTES = ConfigEntry.size(
      "spark.slipstream.writer.encodeAheadBytes", "16m",
      "Serialized bytes one map task may have handed to the codec threads and not yet encoded, on the JVM heap (at"
          + " least 64k); beyond it the task encodes its own chunks, queued ones first, wherever no codec thread has"
          + " started them, and waits only while codec threads run all of them. Applies to the direct writer"
          + " (spark.slipstream.writer.directPartitionsMax).");
  /** The smallest decode- and encode-ahead budgets. */
  static final long MIN_AHEAD_BYTES = 64 * 1024;
  /** The unit the codec threads claim and decode into. */
  static final int DECODE_CHUNK_BYTES = 256 * 1024;
  /** The unit a map task hands over to the codec threads: Spark's LZ4 block size. */
  static final int ENCODE_CHUNK_BYTES = 32 * 1024;

  public static final ConfigEntry<Integer> EAGER_PEERS = ConfigEntry.integer(
      "spark.slipstream.connect.eagerPeers", "64", 0, 4096,
      "Peers an executor connects to as soon as it learns of them (at registration and as they join), so that"
          + " neither the first fetch from a peer nor the first write into it waits for the connection to open;"
          + " connections to further peers open at first use. 0 opens every connection at first use.");

  public static final ConfigEntry<String> FALLBACK = ConfigEntry.choice("spark.slipstream.fallback", "sort",
      java.util.List.of("sort", "fail"),
      "What to do when the configuration asks for something Slipstream cannot serve (external shuffle service,"
          + " dynamic allocation without shuffle tracking, shuffle-block migration on decommission): sort = log"
          + " one warning and use Spark's sort shuffle; fail = refuse to start.");

  /**
   * Spark settings that ask for encrypted network traffic. Slipstream's tcp transport
   * authenticates (spark.authenticate) but does not encrypt, so with either on it refuses to start
   * rather than send shuffle blocks in plaintext.
   */
  static final java.util.List<String> ENCRYPTION_KEYS =
      java.util.List.of("spark.network.crypto.enabled", "spark.authenticate.enableSaslEncryption");

  private final ConfigSource source;
  private final String transport;
  private final CoreConfig core;
  private final Duration registrationTimeout;
  private final Duration rpcTimeout;
  private final int directPartitionsMax;
  private final int eagerPeers;
  private final int codecThreads;
  private final long decodeAheadBytes;
  private final long encodeAheadBytes;
  private final String fallback;
  private final dev.slipstream.spark.gpu.GpuConf gpu;

  public SlipstreamConf(ConfigSource source, Transports transports) {
    this.source = source;
    String t = TRANSPORT.get(source).toLowerCase(java.util.Locale.ROOT);
    if (!transports.names().contains(t)) {
      throw new IllegalArgumentException(TRANSPORT.key() + ": got '" + t + "', expected one of " + transports.names());
    }
    this.transport = t;
    refusePlaintext(source, t);
    this.core = new CoreConfig(source);
    this.registrationTimeout = REGISTRATION_TIMEOUT.get(source);
    this.rpcTimeout = RPC_TIMEOUT.get(source);
    this.directPartitionsMax = DIRECT_PARTITIONS_MAX.get(source);
    this.eagerPeers = EAGER_PEERS.get(source);
    this.codecThreads = codecThreads(source);
    this.decodeAheadBytes = atLeast(DECODE_AHEAD_BYTES, source);
    this.encodeAheadBytes = atLeast(ENCODE_AHEAD_BYTES, source);
    this.fallback = FALLBACK.get(source);
    this.gpu = new dev.slipstream.spark.gpu.GpuConf(source);
  }

  /**
   * The codec threads asked for: a number, or {@code auto}, which gives executors of RAPIDS jobs a
   * thread per task slot (their tasks spend most of their time waiting on the GPU, and RAPIDS' own
   * shuffle manager runs its codec on threads of its own too) and CPU executors none (their tasks
   * keep every core busy, and handing chunks over costs CPU time).
   */
  static int codecThreads(ConfigSource source) {
    String v = CODEC_THREADS.get(source);
    if (v.equalsIgnoreCase("auto")) {
      boolean rapids = java.util.Arrays.stream(source.get("spark.plugins").orElse("").split(","))
          .anyMatch(c -> c.trim().equals(RAPIDS_PLUGIN));
      return rapids ? Math.min(AUTO_CODEC_THREADS_MAX, taskSlots(source)) : 0;
    }
    int n;
    try {
      n = Integer.parseInt(v);
    } catch (NumberFormatException e) {
      n = -1;
    }
    if (n < 0 || n > 256) {
      throw new IllegalArgumentException(CODEC_THREADS.key() + ": got '" + v + "', expected auto or an integer in [0, 256]");
    }
    return n;
  }

  /**
   * An executor's task slots: its cores over spark.task.cpus. Its cores are spark.executor.cores;
   * where that is unset, those the master gives each executor ({@code local[N]}, {@code
   * local-cluster[E,N,MB]}), else this JVM's processors (a standalone executor takes its worker's
   * cores).
   */
  static int taskSlots(ConfigSource source) {
    int cores = positive(source, "spark.executor.cores", masterCores(source.get("spark.master").orElse("")));
    return Math.max(1, cores / positive(source, "spark.task.cpus", 1));
  }

  private static final java.util.regex.Pattern LOCAL = java.util.regex.Pattern.compile(
      "local\\[\\s*(\\d{1,6}|\\*)\\s*(,\\s*\\d+\\s*)?]");
  private static final java.util.regex.Pattern LOCAL_CLUSTER = java.util.regex.Pattern.compile(
      "local-cluster\\[\\s*\\d+\\s*,\\s*(\\d{1,6})\\s*,\\s*\\d+\\s*]");

  private static int masterCores(String master) {
    int processors = Runtime.getRuntime().availableProcessors();
    java.util.regex.Matcher m = LOCAL_CLUSTER.matcher(master.trim());
    if (m.matches()) {
      return Integer.parseInt(m.group(1));
    }
    m = LOCAL.matcher(master.trim());
    if (m.matches() && !m.group(1).equals("*")) {
      return Integer.parseInt(m.group(1));
    }
    return processors;
  }

  private static int positive(ConfigSource source, String key, int otherwise) {
    String v = source.get(key).orElse("").trim();
    try {
      int n = Integer.parseInt(v);
      return n > 0 ? n : otherwise;
    } catch (NumberFormatException e) {
      return otherwise; // Spark itself validates these keys and refuses bad values
    }
  }

  private static long atLeast(ConfigEntry<Long> entry, ConfigSource source) {
    long v = entry.get(source);
    if (v < MIN_AHEAD_BYTES) {
      throw new IllegalArgumentException(entry.key() + ": got " + v + " bytes, expected at least " + MIN_AHEAD_BYTES
          + " (64k); " + CODEC_THREADS.key() + "=0 runs the codec on the task threads instead");
    }
    return v;
  }

  /** Never silent plaintext: encryption asked of Spark stops Slipstream's start, naming the way out. */
  private static void refusePlaintext(ConfigSource source, String transport) {
    if ("loopback".equals(transport)) {
      return; // blocks never leave the JVM
    }
    for (String key : ENCRYPTION_KEYS) {
      String v = source.get(key).orElse("false").trim();
      if (v.equalsIgnoreCase("true")) {
        throw new IllegalArgumentException(key + "=" + v + ": Spark is asked to encrypt its network traffic, but"
            + " Slipstream's " + transport + " transport does not encrypt shuffle blocks and would send them in"
            + " plaintext, so it refuses to start. Expected " + key + "=false with Slipstream (spark.authenticate=true"
            + " alone is supported: connections are authenticated, not encrypted); or use Spark's sort shuffle"
            + " (spark.shuffle.manager=sort), whose block transfers are encrypted; or encrypt the network below Spark"
            + " (IPsec, WireGuard) and turn " + key + " off.");
      }
    }
  }

  /**
   * Why Slipstream cannot serve this configuration, or empty when it can. Map output lives in
   * the executor's registered memory, so nothing that expects shuffle files on disk works.
   */
  public java.util.Optional<String> unsupported() {
    java.util.List<String> why = new java.util.ArrayList<>();
    if (flag("spark.shuffle.service.enabled")) {
      why.add("spark.shuffle.service.enabled=true (the external shuffle service serves sort-shuffle files; "
          + "Slipstream's map output lives in executor memory)");
    }
    if (flag("spark.dynamicAllocation.enabled") && !flag("spark.dynamicAllocation.shuffleTracking.enabled")) {
      why.add("spark.dynamicAllocation.enabled=true without spark.dynamicAllocation.shuffleTracking.enabled=true "
          + "(executors holding map output could be removed)");
    }
    if (flag("spark.decommission.enabled") && flag("spark.storage.decommission.shuffleBlocks.enabled")) {
      why.add("spark.storage.decommission.shuffleBlocks.enabled=true (Slipstream's blocks cannot be migrated)");
    }
    return why.isEmpty() ? java.util.Optional.empty() : java.util.Optional.of(String.join("; ", why));
  }

  private boolean flag(String key) {
    return source.get(key).map(v -> v.trim().equalsIgnoreCase("true")).orElse(false);
  }

  /** {@code sort} or {@code fail}. */
  public String fallback() {
    return fallback;
  }

  public static ConfigSource source(SparkConf conf) {
    return key -> {
      scala.Option<String> v = conf.getOption(key);
      return v.isDefined() ? Optional.of(v.get()) : Optional.empty();
    };
  }

  public ConfigSource source() { return source; }
  public String transport() { return transport; }
  public CoreConfig core() { return core; }
  public Duration registrationTimeout() { return registrationTimeout; }
  public Duration rpcTimeout() { return rpcTimeout; }
  public int directPartitionsMax() { return directPartitionsMax; }
  public int eagerPeers() { return eagerPeers; }
  public int codecThreads() { return codecThreads; }
  public long decodeAheadBytes() { return decodeAheadBytes; }
  public long encodeAheadBytes() { return encodeAheadBytes; }
  /** The unit a decode thread claims: 256 KiB, or the whole budget when that is smaller. */
  public int decodeChunkBytes() { return (int) Math.min(DECODE_CHUNK_BYTES, decodeAheadBytes); }
  public int encodeChunkBytes() { return ENCODE_CHUNK_BYTES; }
  public dev.slipstream.spark.gpu.GpuConf gpu() { return gpu; }
}
