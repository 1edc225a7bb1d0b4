package dev.slipstream.core.shuffle;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * Shuffle nodes of one test application on one loopback fabric, each entered in a shared peer
 * table under its name as it is made (as executors register with the driver).
 */
public final class TestNodes {
  public static final String APP = "app-test";

  private final LoopbackFabric fabric;
  private final boolean tcp;
  private final String app;
  private final PeerDirectory.Table peers = PeerDirectory.table();

  private static final Map<LoopbackFabric, TestNodes> BY_FABRIC = new java.util.WeakHashMap<>();

  public TestNodes(LoopbackFabric fabric) {
    this.fabric = fabric;
    this.tcp = false;
    this.app = APP;
  }

  /** Nodes on {@code transport}: {@code "loopback"} (a fabric of their own) or {@code "tcp"} (127.0.0.1, ephemeral ports). */
  public TestNodes(String transport) {
    this(transport, APP);
  }

  /** Nodes of application {@code app} on {@code transport}, with a peer table of their own. */
  public TestNodes(String transport, String app) {
    if (!transport.equals("loopback") && !transport.equals("tcp")) {
      throw new IllegalArgumentException("test transport: got '" + transport + "', expected loopback or tcp");
    }
    this.fabric = new LoopbackFabric();
    this.tcp = transport.equals("tcp");
    this.app = app;
  }

  /** The nodes of {@code fabric}: one peer table for every node made on it this way. */
  public static synchronized TestNodes on(LoopbackFabric fabric) {
    return BY_FABRIC.computeIfAbsent(fabric, TestNodes::new);
  }

  /**
   * Settings for small test nodes: 256 KiB of landing memory, 16 KiB requests, 64 KiB in flight,
   * 1 MiB of map output in 256 KiB segments of 4 KiB pages, and {@code fetchTimeout}. Mutable.
   */
  public static Map<String, String> conf(String fetchTimeout) {
    Map<String, String> m = new java.util.HashMap<>();
    m.put("spark.slipstream.landing.bytes", "256k");
    m.put("spark.slipstream.reader.maxRequestBytes", "16k");
    m.put("spark.slipstream.reader.maxBytesInFlight", "64k");
    m.put("spark.slipstream.mapOutput.memoryBytes", "1m");
    m.put("spark.slipstream.mapOutput.segmentBytes", "256k");
    m.put("spark.slipstream.mapOutput.pageBytes", "4k");
    m.put("spark.slipstream.reader.fetchTimeout", fetchTimeout);
    return m;
  }

  public PeerDirectory.Table peers() {
    return peers;
  }

  public LoopbackFabric fabric() {
    return fabric;
  }

  /** A node named {@code name} (its executor id), with its spill folder under {@code dir}. */
  public ShuffleNode node(Map<String, String> conf, Path dir, String name) throws TransportException {
    return node(conf, dir, name, t -> t);
  }

  /** The same, its transport wrapped by {@code wrap} (faults injected in tests). */
  public ShuffleNode node(Map<String, String> conf, Path dir, String name, UnaryOperator<Transport> wrap)
      throws TransportException {
    return node(conf, dir, name, wrap, dev.slipstream.core.memory.DirectMemory.JDK);
  }

  /** The same, its landing pool and map-output segments from {@code memory}. */
  public ShuffleNode node(Map<String, String> conf, Path dir, String name, UnaryOperator<Transport> wrap,
                          dev.slipstream.core.memory.DirectMemory memory) throws TransportException {
    ConfigSource src = ConfigSource.of(conf);
    Transport t = tcp ? new dev.slipstream.core.transport.tcp.TcpTransportProvider().create(
        new TransportContext(src, "127.0.0.1", name, java.util.Optional.empty(), app, name))
        : new LoopbackTransportProvider(fabric).create(new TransportContext(src, "localhost", name,
            java.util.Optional.empty(), app, name));
    ShuffleNode n = new ShuffleNode(wrap.apply(t), new CoreConfig(src), dir.resolve(name),
        new NodeIdentity(app, name), peers, memory);
    peers.put(name, n.localEndpoint());
    return n;
  }
}
