package dev.slipstream.testkit;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.shuffle.MapOutputWriter;
import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.PeerDirectory;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import dev.slipstream.core.transport.tcp.TcpTransportProvider;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;

/**
 * The host block writer's rig: two shuffle nodes of one application on {@code loopback} or
 * {@code tcp}, map outputs in the holder's store, each landing range a registration of its own in
 * the reader's transport (as a host reader's request has).
 */
final class HostRig implements ServingRig {
  private static final String APP = "app-conformance";
  private final Path dir;
  private final PeerDirectory.Table peers = PeerDirectory.table();
  private final ShuffleNode holder;
  private ShuffleNode reader;
  private final List<RegisteredRegion> regions = new ArrayList<>();

  HostRig(String transport) throws Exception {
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

  @Override
  public MemoryKind kind() {
    return MemoryKind.HOST;
  }

  @Override
  public ShuffleNode holder() {
    return holder;
  }

  @Override
  public ShuffleNode reader() {
    return reader;
  }

  @Override
  public int[] widths() {
    return new int[0];
  }

  @Override
  public Output commit(int shuffleId, long mapId, int[] sizes) throws Exception {
    SplittableRandom r = new SplittableRandom(mapId * 31 + shuffleId);
    byte[][] data = new byte[sizes.length][];
    MapOutputWriter w = holder.store().newOutput(shuffleId, mapId, sizes.length);
    for (int p = 0; p < sizes.length; p++) {
      data[p] = new byte[sizes[p]];
      r.nextBytes(data[p]);
      if (sizes[p] > 0) {
        try (OutputStream o = w.openPartition(p)) {
          o.write(data[p]);
        }
      }
    }
    w.commit();
    return new Output(data, new long[sizes.length]);
  }

  @Override
  public Landing landing(long length) throws Exception {
    ByteBuffer memory = ByteBuffer.allocateDirect((int) length);
    RegisteredRegion region = reader.transport().register(memory);
    regions.add(region);
    return new Landing() {
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
        memory.duplicate().position((int) offset).get(b);
        return b;
      }
    };
  }

  @Override
  public void loseReader() {
    reader.close();
    holder.peerLost(reader.localEndpoint(), "reader lost");
    peers.remove("reader");
  }

  @Override
  public void close() throws Exception {
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
