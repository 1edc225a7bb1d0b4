package dev.slipstream.testkit;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.PeerDirectory;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import dev.slipstream.core.transport.tcp.TcpTransportProvider;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The two nodes of a {@link ServingRig}: a holder and a reader of one application on
 * {@code loopback} or {@code tcp}, in one peer table, with 64 MiB of map-output and landing memory
 * each and a 30 s fetch timeout; and host landing ranges, each a registration of its own in the
 * reader's transport (as a host reader's request has).
 */
public final class RigNodes implements AutoCloseable {
  private static final String APP = "app-conformance";
  private final PeerDirectory.Table peers = PeerDirectory.table();
  private final Path dir;
  private final ShuffleNode holder;
  private final ShuffleNode reader;
  private final List<RegisteredRegion> regions = new ArrayList<>();

  public RigNodes(String transport) throws IOException, TransportException {
    if (!transport.equals("loopback") && !transport.equals("tcp")) {
      throw new IllegalArgumentException("rig transport: got '" + transport + "', expected loopback or tcp");
    }
    this.dir = Files.createTempDirectory("slipstream-conformance-");
    LoopbackFabric fabric = new LoopbackFabric();
    this.holder = node(transport, fabric, "holder");
    this.reader = node(transport, fabric, "reader");
  }

  private ShuffleNode node(String transport, LoopbackFabric fabric, String name) throws TransportException {
    ConfigSource src = ConfigSource.of(Map.of("spark.slipstream.mapOutput.memoryBytes", "64m",
        "spark.slipstream.landing.bytes", "64m", "spark.slipstream.reader.fetchTimeout", "30s"));
    TransportContext ctx = new TransportContext(src, transport.equals("tcp") ? "127.0.0.1" : "localhost", name,
        Optional.empty(), APP, name);
    Transport t = transport.equals("tcp") ? new TcpTransportProvider().create(ctx)
        : new LoopbackTransportProvider(fabric).create(ctx);
    ShuffleNode n = new ShuffleNode(t, new CoreConfig(src), dir.resolve(name), new NodeIdentity(APP, name), peers);
    peers.put(name, n.localEndpoint());
    return n;
  }

  public ShuffleNode holder() {
    return holder;
  }

  public ShuffleNode reader() {
    return reader;
  }

  /** Whether the reader is still in the peer table (not lost). */
  public boolean readerKnown() {
    return peers.lookup("reader") != null;
  }

  /** A zeroed host landing range of {@code length} bytes: a registration of its own in the reader's transport. */
  public ServingRig.Landing hostLanding(long length) throws TransportException {
    ByteBuffer memory = ByteBuffer.allocateDirect(Math.toIntExact(length));
    RegisteredRegion region = reader.transport().register(memory);
    regions.add(region);
    return new ServingRig.Landing() {
      @Override
      public RegionDescriptor region() {
        return region.descriptor();
      }

      @Override
      public long base() {
        return 0;
      }

      @Override
      public byte[] read(long offset, int len) {
        byte[] b = new byte[len];
        memory.duplicate().position(Math.toIntExact(offset)).get(b);
        return b;
      }
    };
  }

  /** The reader is lost: its node stops, it leaves the peer table, and the holder is told. */
  public void loseReader() {
    reader.close();
    peers.remove("reader");
    holder.peerLost(reader.localEndpoint(), "reader lost");
  }

  @Override
  public void close() {
    for (RegisteredRegion r : regions) {
      try {
        r.close();
      } catch (RuntimeException e) {
        // its transport closed with the reader
      }
    }
    reader.close();
    holder.close();
  }
}
