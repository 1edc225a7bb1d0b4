package dev.slipstream.bench;

import dev.slipstream.core.config.ConfigParsers;
import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.MapOutputStore;
import dev.slipstream.core.shuffle.PartitionedOutputWriter;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
import java.util.concurrent.atomic.AtomicLong;

/**
 * The host map-output store under its budget, as a map stage of a columnar job uses it: map tasks
 * write through {@link PartitionedOutputWriter} (every partition open at once, as the direct
 * writer does for a serializer without relocation, such as RAPIDS' Kudo batches), in writes of
 * {@code --write-bytes} to random partitions, on {@code --threads} task threads; then reduce tasks
 * read each partition of every map output as local reads do ({@link MapOutput#open}). With more
 * map output than {@code --budget}, outputs move to and spill into local files.
 *
 * <p>Usage: {@code StoreSpillBench [--budget 256m] [--maps 128] [--map-bytes 24m] [--partitions 200]
 * [--write-bytes 32k] [--threads 8] [--rounds 5] [--dir PATH]}; prints each round's write and read
 * time and rate and the store's spill counters, then the median round. Nothing else runs: no
 * serializer, codec or transport, so the figures are the store's own cost.
 */
public final class StoreSpillBench {
  private StoreSpillBench() {}

  public static void main(String[] args) throws Exception {
    long budget = 256L << 20;
    int maps = 128;
    long mapBytes = 24L << 20;
    int partitions = 200;
    int writeBytes = 32 << 10;
    int threads = 8;
    int rounds = 5;
    Path dir = null;
    for (int i = 0; i < args.length; i++) {
      String v = i + 1 < args.length ? args[i + 1] : null;
      if (v == null) {
        throw new IllegalArgumentException(args[i] + ": expected a value after it");
      }
      switch (args[i]) {
        case "--budget" -> budget = ConfigParsers.parseSize("--budget", v);
        case "--maps" -> maps = Integer.parseInt(v);
        case "--map-bytes" -> mapBytes = ConfigParsers.parseSize("--map-bytes", v);
        case "--partitions" -> partitions = Integer.parseInt(v);
        case "--write-bytes" -> writeBytes = (int) ConfigParsers.parseSize("--write-bytes", v);
        case "--threads" -> threads = Integer.parseInt(v);
        case "--rounds" -> rounds = Integer.parseInt(v);
        case "--dir" -> dir = Path.of(v);
        default -> throw new IllegalArgumentException("unknown option " + args[i] + "; expected --budget, --maps,"
            + " --map-bytes, --partitions, --write-bytes, --threads, --rounds or --dir");
      }
      i++;
    }
    if (maps < 1 || partitions < 1 || threads < 1 || rounds < 1 || writeBytes < 1 || mapBytes < writeBytes) {
      throw new IllegalArgumentException("--maps, --partitions, --threads, --rounds, --write-bytes must be >= 1"
          + " and --map-bytes >= --write-bytes");
    }
    Path spillDir = dir != null ? dir : Files.createTempDirectory("slipstream-store-bench");
    Transport transport = new LoopbackTransportProvider().create(
        TransportContext.of(ConfigSource.of(Map.of()), "localhost", "store-bench"));
    MemoryPool pool = MemoryPool.root("store-bench", Long.MAX_VALUE).child("map-output", budget);
    MapOutputStore store = new MapOutputStore(transport, pool, 8L << 20, 64L << 10, spillDir);
    byte[] data = new byte[1 << 20];
    new Random(1).nextBytes(data);
    System.out.printf("StoreSpillBench: budget %d MiB, %d maps x %d MiB, %d partitions, writes of %d bytes, %d threads,"
            + " spill folder %s%n", budget >> 20, maps, mapBytes >> 20, partitions, writeBytes, threads, spillDir);
    ExecutorService workers = Executors.newFixedThreadPool(threads);
    long[] writeNs = new long[rounds];
    long[] readNs = new long[rounds];
    try {
      for (int round = 0; round < rounds; round++) {
        long spills0 = store.spills();
        long evictions0 = store.evictions();
        long spilled0 = store.spilledBytes();
        final int shuffle = round;
        final int nParts = partitions;
        final long perMap = mapBytes;
        final int chunk = writeBytes;
        long t0 = System.nanoTime();
        List<Future<?>> fs = new ArrayList<>();
        for (int m = 0; m < maps; m++) {
          final long mapId = m;
          fs.add(workers.submit(() -> {
            writeMap(store, shuffle, mapId, nParts, perMap, chunk, data);
            return null;
          }));
        }
        for (Future<?> f : fs) {
          f.get();
        }
        long t1 = System.nanoTime();
        AtomicLong read = new AtomicLong();
        fs.clear();
        final int nMaps = maps;
        for (int p = 0; p < partitions; p++) {
          final int part = p;
          fs.add(workers.submit(() -> {
            read.addAndGet(readPartition(store, shuffle, nMaps, part));
            return null;
          }));
        }
        for (Future<?> f : fs) {
          f.get();
        }
        long t2 = System.nanoTime();
        store.removeShuffle(shuffle);
        long total = maps * mapBytes;
        if (read.get() != total) {
          throw new IllegalStateException("read " + read.get() + " bytes of " + total + " written");
        }
        writeNs[round] = t1 - t0;
        readNs[round] = t2 - t1;
        System.out.printf("round %d: write %6d ms (%5.2f GB/s), read %6d ms (%5.2f GB/s); %d spills, %d outputs moved"
                + " to files, %d MiB to disk%n", round + 1, (t1 - t0) / 1_000_000, total / (double) (t1 - t0),
            (t2 - t1) / 1_000_000, total / (double) (t2 - t1), store.spills() - spills0, store.evictions() - evictions0,
            (store.spilledBytes() - spilled0) >> 20);
      }
    } finally {
      workers.shutdownNow();
      store.close();
      transport.close();
    }
    long w = median(writeNs);
    long r = median(readNs);
    long total = maps * mapBytes;
    System.out.printf("median: write %d ms (%.2f GB/s), read %d ms (%.2f GB/s), write+read %d ms%n", w / 1_000_000,
        total / (double) w, r / 1_000_000, total / (double) r, (w + r) / 1_000_000);
  }

  /** One map task: {@code mapBytes} in writes of {@code chunk} bytes to partitions drawn at random. */
  private static void writeMap(MapOutputStore store, int shuffle, long mapId, int partitions, long mapBytes, int chunk,
                               byte[] data) throws IOException {
    PartitionedOutputWriter w = store.newPartitionedOutput(shuffle, mapId, partitions);
    Random r = new Random(mapId);
    try {
      for (long left = mapBytes; left > 0; ) {
        int n = (int) Math.min(chunk, left);
        OutputStream out = w.partition(r.nextInt(partitions));
        int at = r.nextInt(data.length - n + 1);
        out.write(data, at, n);
        left -= n;
      }
      w.commit();
    } catch (IOException | RuntimeException e) {
      w.abort();
      throw e;
    }
  }

  /** One reduce task: partition {@code part} of every map output, read to the end; its bytes. */
  private static long readPartition(MapOutputStore store, int shuffle, int maps, int part) throws IOException {
    byte[] buf = new byte[64 << 10];
    long bytes = 0;
    for (int m = 0; m < maps; m++) {
      MapOutput out = store.retain(shuffle, m);
      if (out == null) {
        throw new IllegalStateException("map output " + shuffle + "/" + m + " is missing");
      }
      try (InputStream in = out.open(part)) {
        for (int n; (n = in.read(buf)) > 0; ) {
          bytes += n;
        }
      } finally {
        out.release();
      }
    }
    return bytes;
  }

  private static long median(long[] v) {
    long[] s = v.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }
}
