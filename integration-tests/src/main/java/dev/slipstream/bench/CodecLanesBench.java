package dev.slipstream.bench;

import dev.slipstream.core.config.ConfigParsers;
import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.EncodeLanes;
import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.MapOutputStore;
import dev.slipstream.core.shuffle.PartitionedOutputWriter;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import net.jpountz.lz4.LZ4BlockOutputStream;

/**
 * The direct writer's map side with Spark's LZ4 codec, as RAPIDS' host-serialized batches reach
 * it: each map task cuts batches of {@code --batch-bytes} into one slice per partition, written
 * in partition order, into every partition's codec stream over the map-output store's pages, on
 * {@code --threads} task threads. With {@code --codec-threads 0} each task compresses its own
 * partitions, as it does with {@code spark.slipstream.codec.threads=0}; above 0 the tasks hand
 * their bytes to {@link EncodeLanes} on a pool of that many threads shared by all tasks, as the
 * executor does. No serializer and no transport: the figures are the codec's placement.
 *
 * <p>Usage: {@code CodecLanesBench [--threads 2] [--codec-threads 0] [--maps 32] [--map-bytes 32m]
 * [--batch-bytes 8m] [--partitions 200] [--encode-ahead 16m] [--rounds 5] [--chunk 32k]}; prints each round's
 * write time and rate, the process's CPU time, the compressed size, then the median round.
 */
public final class CodecLanesBench {
  private static final int LZ4_BLOCK = 32 << 10; // spark.io.compression.lz4.blockSize's default

  private CodecLanesBench() {}

  public static void main(String[] args) throws Exception {
    int threads = 2;
    int codecThreads = 0;
    int maps = 32;
    long mapBytes = 32L << 20;
    long batchBytes = 8L << 20;
    int partitions = 200;
    long encodeAhead = 16L << 20;
    int rounds = 5;
    int chunk = 32 << 10; // the direct writer's hand-over unit
    for (int i = 0; i < args.length; i++) {
      String v = i + 1 < args.length ? args[i + 1] : null;
      if (v == null) {
        throw new IllegalArgumentException(args[i] + ": expected a value after it");
      }
      switch (args[i]) {
        case "--threads" -> threads = Integer.parseInt(v);
        case "--codec-threads" -> codecThreads = Integer.parseInt(v);
        case "--maps" -> maps = Integer.parseInt(v);
        case "--map-bytes" -> mapBytes = ConfigParsers.parseSize("--map-bytes", v);
        case "--batch-bytes" -> batchBytes = ConfigParsers.parseSize("--batch-bytes", v);
        case "--partitions" -> partitions = Integer.parseInt(v);
        case "--encode-ahead" -> encodeAhead = ConfigParsers.parseSize("--encode-ahead", v);
        case "--rounds" -> rounds = Integer.parseInt(v);
        case "--chunk" -> chunk = (int) ConfigParsers.parseSize("--chunk", v);
        default -> throw new IllegalArgumentException("unknown option " + args[i] + "; expected --threads,"
            + " --codec-threads, --maps, --map-bytes, --batch-bytes, --partitions, --encode-ahead, --rounds or --chunk");
      }
      i++;
    }
    if (threads < 1 || codecThreads < 0 || maps < 1 || partitions < 1 || rounds < 1 || chunk < 1
        || batchBytes < partitions || mapBytes < batchBytes) {
      throw new IllegalArgumentException("--threads, --maps, --partitions, --rounds, --chunk must be >= 1,"
          + " --codec-threads >= 0, --batch-bytes >= --partitions and --map-bytes >= --batch-bytes");
    }
    Path spillDir = Files.createTempDirectory("slipstream-codec-bench");
    Transport transport = new LoopbackTransportProvider().create(
        TransportContext.of(ConfigSource.of(Map.of()), "localhost", "codec-bench"));
    // Room for every output of a round: the figures leave spilling out.
    MemoryPool pool = MemoryPool.root("codec-bench", Long.MAX_VALUE).child("map-output", maps * mapBytes + (64L << 20));
    MapOutputStore store = new MapOutputStore(transport, pool, 8L << 20, 64L << 10, spillDir);
    byte[] data = columnLike(4 << 20);
    System.out.printf("CodecLanesBench: %d maps x %d MiB in batches of %d MiB, %d partitions, %d task threads,"
            + " %d codec threads, encode-ahead %d MiB, chunks of %d KiB, lz4 blocks of %d KiB%n", maps, mapBytes >> 20,
        batchBytes >> 20, partitions, threads, codecThreads, encodeAhead >> 20, chunk >> 10, LZ4_BLOCK >> 10);
    ExecutorService tasks = Executors.newFixedThreadPool(threads);
    ExecutorService codec = codecThreads == 0 ? null : Executors.newFixedThreadPool(codecThreads, r -> {
      Thread t = new Thread(r, "codec");
      t.setDaemon(true);
      return t;
    });
    long[] writeNs = new long[rounds];
    long[] cpuNs = new long[rounds];
    var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    try {
      for (int round = 0; round < rounds; round++) {
        final int shuffle = round;
        final int nParts = partitions;
        final long perMap = mapBytes;
        final long perBatch = batchBytes;
        final long ahead = encodeAhead;
        final int unit = chunk;
        long cpu0 = os.getProcessCpuTime();
        long t0 = System.nanoTime();
        List<Future<Long>> fs = new ArrayList<>();
        for (int m = 0; m < maps; m++) {
          final long mapId = m;
          fs.add(tasks.submit(() -> writeMap(store, codec, shuffle, mapId, nParts, perMap, perBatch, ahead, unit, data)));
        }
        long stored = 0;
        for (Future<Long> f : fs) {
          stored += f.get();
        }
        long t1 = System.nanoTime();
        long cpu1 = os.getProcessCpuTime();
        store.removeShuffle(shuffle);
        long total = maps * mapBytes;
        writeNs[round] = t1 - t0;
        cpuNs[round] = cpu1 - cpu0;
        System.out.printf("round %d: write %6d ms (%5.2f GB/s), process CPU %6d ms; stored %d MiB (%.2f of the"
                + " input)%n", round + 1, (t1 - t0) / 1_000_000, total / (double) (t1 - t0), (cpu1 - cpu0) / 1_000_000,
            stored >> 20, stored / (double) total);
      }
    } finally {
      tasks.shutdownNow();
      if (codec != null) {
        codec.shutdownNow();
      }
      store.close();
      transport.close();
    }
    long w = median(writeNs);
    System.out.printf("median: write %d ms (%.2f GB/s), process CPU %d ms%n", w / 1_000_000,
        maps * mapBytes / (double) w, median(cpuNs) / 1_000_000);
  }

  /**
   * Bytes that compress about as TPC-H's columns do under LZ4 (to about half): 4 KiB runs of
   * small integers from a few distinct values, of words from a small dictionary (two runs), and of
   * random bytes, in turn.
   */
  private static byte[] columnLike(int n) {
    byte[] b = new byte[n];
    Random r = new Random(7);
    String[] words = {"DELIVER IN PERSON", "TAKE BACK RETURN", "COLLECT COD", "NONE", "AIR", "RAIL", "SHIP", "TRUCK",
        "MAIL", "FOB", "REG AIR", "furiously", "carefully", "regular", "final", "pending", "deposits", "accounts"};
    for (int i = 0; i < n; ) {
      int end = Math.min(n, i + 4096);
      switch ((i >> 12) % 4) {
        case 0 -> {
          for (; i + 4 <= end; i += 4) {
            b[i] = (byte) r.nextInt(50);
          }
        }
        case 1, 2 -> {
          while (i < end) {
            byte[] w = words[r.nextInt(words.length)].getBytes(java.nio.charset.StandardCharsets.US_ASCII);
            int k = Math.min(w.length, end - i);
            System.arraycopy(w, 0, b, i, k);
            i += k;
          }
        }
        default -> {
          for (; i < end; i++) {
            b[i] = (byte) r.nextInt();
          }
        }
      }
      i = end;
    }
    return b;
  }

  /** One map task; its stored (compressed) bytes. */
  private static long writeMap(MapOutputStore store, ExecutorService codec, int shuffle, long mapId, int partitions,
                               long mapBytes, long batchBytes, long encodeAhead, int chunk, byte[] data)
      throws IOException {
    PartitionedOutputWriter w = store.newPartitionedOutput(shuffle, mapId, partitions);
    EncodeLanes lanes = codec == null ? null : new EncodeLanes(codec, (p, sink) -> new LZ4BlockOutputStream(sink,
        LZ4_BLOCK), w::partition, partitions, chunk, encodeAhead);
    OutputStream[] own = new OutputStream[partitions];
    Random r = new Random(mapId);
    try {
      for (long left = mapBytes; left > 0; left -= batchBytes) {
        long batch = Math.min(batchBytes, left);
        for (int p = 0; p < partitions; p++) {
          int n = (int) (batch / partitions + (p < batch % partitions ? 1 : 0));
          OutputStream out;
          if (lanes != null) {
            out = lanes.partition(p);
          } else {
            if (own[p] == null) {
              own[p] = new LZ4BlockOutputStream(w.partition(p), LZ4_BLOCK);
            }
            out = own[p];
          }
          out.write(data, r.nextInt(data.length - n + 1), n);
        }
      }
      if (lanes != null) {
        lanes.finish();
      } else {
        for (OutputStream o : own) {
          if (o != null) {
            o.close();
          }
        }
      }
      MapOutput committed = w.commit();
      return committed.totalBytes();
    } catch (IOException | RuntimeException e) {
      if (lanes != null) {
        lanes.abort();
      }
      w.abort();
      throw e;
    }
  }

  private static long median(long[] v) {
    long[] s = v.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }
}
