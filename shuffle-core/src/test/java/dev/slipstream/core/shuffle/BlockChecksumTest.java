package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every block carries a checksum: corruption in flight is repaired by one refetch; at rest it fails the fetch. */
class BlockChecksumTest {
  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private ShuffleNode holder;
  private ShuffleNode reader;

  private static Map<String, String> conf(boolean checksums) {
    Map<String, String> m = new HashMap<>();
    m.put("spark.slipstream.landing.bytes", "256k");
    m.put("spark.slipstream.reader.maxRequestBytes", "16k");
    m.put("spark.slipstream.reader.maxBytesInFlight", "64k");
    m.put("spark.slipstream.mapOutput.segmentBytes", "256k");
    m.put("spark.slipstream.mapOutput.pageBytes", "4k");
    m.put("spark.slipstream.reader.fetchTimeout", "5s");
    m.put("spark.shuffle.checksum.enabled", Boolean.toString(checksums));
    return m;
  }

  private ShuffleNode node(String name, boolean checksums, UnaryOperator<Transport> wrap) throws TransportException {
    return nodes.node(conf(checksums), tmp, name, wrap);
  }

  private void start(boolean checksums, int corruptWrites) throws TransportException {
    holder = node("holder", checksums, t -> corruptWrites > 0 ? new CorruptingTransport(t, corruptWrites) : t);
    reader = node("reader", checksums, t -> t);
  }

  @AfterEach
  void stop() {
    if (reader != null) {
      reader.close();
      holder.close();
    }
  }

  private byte[] write(int size) throws IOException {
    byte[] data = new byte[size];
    new Random(size).nextBytes(data);
    MapOutputWriter w = holder.store().newOutput(1, 7L, 1);
    try (OutputStream o = w.openPartition(0)) {
      o.write(data);
    }
    w.commit();
    return data;
  }

  private void corruptAtRest() throws IOException {
    MapOutput out = holder.store().retain(1, 7L);
    ByteBuffer b = out.slices(0, 0, 1).get(0);
    b.put(0, (byte) (b.get(0) ^ 0x01));
    out.release();
  }

  private byte[] fetch(long size) throws IOException {
    try (BlockFetcher f = reader.newFetcher(1, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
        List.of(new BlockFetcher.RemoteBlock(new BlockId(1, 7L, 0), size)))), FetchMetrics.NONE)) {
      ByteArrayOutputStream o = new ByteArrayOutputStream();
      try (InputStream in = f.next().stream()) {
        in.transferTo(o);
      }
      assertFalse(f.hasNext());
      return o.toByteArray();
    }
  }

  @Test
  void corruptionInFlightIsRepairedByOneRefetch() throws Exception {
    start(true, 1);
    byte[] data = write(10_000);
    assertArrayEquals(data, fetch(data.length));
    assertEquals(1, reader.checksumRetries());
  }

  @Test
  void corruptionAtRestFailsAfterOneRefetchNamingTheBlock() throws Exception {
    start(true, 0);
    write(10_000);
    corruptAtRest();
    BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class, () -> fetch(10_000));
    assertEquals(new BlockId(1, 7L, 0), e.getCause().block());
    assertEquals(TransportError.CHECKSUM_MISMATCH, ((TransportException) e.getCause().getCause()).error());
    assertTrue(e.getMessage().contains("checksum mismatch again after a refetch"), e.getMessage());
    assertEquals(1, reader.checksumRetries());
  }

  @Test
  void corruptionOfAStreamedBlockFailsAtItsEnd() throws Exception {
    start(true, 0);
    write(100_000); // larger than one request: streamed in chunks
    corruptAtRest();
    IOException e = assertThrows(IOException.class, () -> fetch(100_000));
    BlockFetchException bfe = e instanceof BlockFetchException b ? b : (BlockFetchException) e.getCause();
    assertTrue(bfe.getMessage().contains("checksum mismatch at the end of a streamed block"), bfe.getMessage());
  }

  @Test
  void corruptionInFlightOfAStreamedBlockIsDetected() throws Exception {
    start(true, 1);
    byte[] data = write(100_000);
    assertThrows(IOException.class, () -> fetch(data.length));
  }

  @Test
  void checksumsFollowSparksSetting() throws Exception {
    start(false, 1);
    byte[] data = write(10_000);
    byte[] got = fetch(data.length);
    assertEquals(data.length, got.length);
    assertFalse(java.util.Arrays.equals(data, got), "with spark.shuffle.checksum.enabled=false nothing is verified");
    assertEquals(0, reader.checksumRetries());
  }

  @Test
  void unknownChecksumAlgorithmFailsAtStartWithTheValidNames() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new CoreConfig(ConfigSource.of(Map.of("spark.shuffle.checksum.algorithm", "MD5"))));
    assertEquals("spark.shuffle.checksum.algorithm: got 'MD5', expected one of CRC32C, CRC32, ADLER32", e.getMessage());
  }
}
