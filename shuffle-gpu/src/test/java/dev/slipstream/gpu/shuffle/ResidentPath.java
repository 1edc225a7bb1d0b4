package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.ResidentServer;
import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;

/**
 * {@link ServePathBench}'s resident mode: one JVM on one GPU is reader and holder. The map output
 * is partitioned on the device into the store as in the scheduler mode, entered in a resident
 * server's directory; the reader posts requests through a {@link ServeRing} in a shared-memory
 * file that the server maps into the GPU, and waits for each answer in the ring (host memory: no
 * device copy per poll). Per request it prints the median, 90th and 99th percentile of
 * {@code post} (writing and publishing the request), {@code total} (start of the post to the
 * answer seen), {@code copy} (the kernel's copy and table, from the answer's instants) and
 * {@code software} (total less copy: what the request costs beyond its bytes), and the landed bytes
 * per second over the timed requests' wall time. The first and
 * last timed requests' blocks are compared with the store's bytes. With {@code gpunetio} the reader
 * entry is pushed to over gpunetio: the kernel posts RDMA writes of the blocks and the table on a
 * queue pair the native library's software NIC executes ({@code copy} is then the posting and the
 * NIC's work up to the batch's completion). With {@code remote} the reader is on "another machine":
 * two software NICs linked to each other, the reader's own copy of the ring published into the
 * holder's with an RDMA write and a fetch-add from the host, and the kernel's answer written back
 * into the reader's copy ({@code total} then includes both NIC trips).
 */
final class ResidentPath {
  private static final long KEY = 0x51_1b57_ea3dL;

  private ResidentPath() {}

  /** How the reader entry is pushed to: stores, gpunetio on this machine, or a reader on another. */
  enum Mode {
    STORES,
    GPUNETIO,
    REMOTE
  }

  static void run(int rows, int parts, int blocks, int iters, int warmup, int inflight, int ctas, Mode mode)
      throws Exception {
    boolean gpunetio = mode != Mode.STORES;
    boolean remote = mode == Mode.REMOTE;
    BatchLayout whole = BatchLayout.packed(rows, ServePathBench.W);
    long mapBytes = whole.bufferBytes();
    Path dir = Files.createTempDirectory(Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
        : Path.of(System.getProperty("java.io.tmpdir")), "slipstream-serve-bench");
    ResidentServingConformanceGpuTest.Nics nics = remote ? ResidentServingConformanceGpuTest.Nics.open() : null;
    try (GpuContext ctx = GpuContext.open(0);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000,
            nics == null ? null : nics.holder()), 2 * mapBytes + (64 << 20), 0)) {
      try (DeviceBatch b = ServePathBench.upload(ctx, rows)) {
        DeviceMapOutputWriter.write(ctx, store, ServePathBench.SHUFFLE, 1, List.of(b), parts, ServePathBench.W, 60_000);
      }
      try (DeviceMapOutputStore.Pinned p = store.pin(ServePathBench.SHUFFLE, 1)) {
        // The directory's blocks: partition q is [offsets[q], offsets[q + 1]) of the store's block.
        // (sections are in partition order; a section's padding goes with it).
        long[] offsets = new long[parts + 1];
        for (int q = 0; q < parts; q++) {
          offsets[q] = p.offset(q);
        }
        offsets[parts] = p.offset(parts - 1) + p.bytes(parts - 1);
        long room = 0;
        for (int q = 0; q < parts; q++) {
          if (offsets[q + 1] < offsets[q] + p.bytes(q)) {
            throw new IllegalStateException("partition " + q + " at " + offsets[q] + " (" + p.bytes(q)
                + " bytes) overlaps the next at " + offsets[q + 1]);
          }
          room = Math.max(room, align16(offsets[q + 1] - offsets[q]));
        }
        long tableBytes = align16(16 + 16L * blocks);
        long perRequest = tableBytes + blocks * room;
        int slots = Integer.highestOneBit(Math.max(2, inflight) * 2 - 1) * 2;
        long landingBytes = perRequest * slots;
        ByteBuffer offs = ByteBuffer.allocate(8 * (parts + 1)).order(ByteOrder.LITTLE_ENDIAN);
        Arrays.stream(offsets).forEach(offs::putLong);
        ResidentServer.Settings settings = new ResidentServer.Settings(1, 64, ctas, 256, Duration.ofSeconds(10),
            Duration.ofMillis(1));
        try (DeviceBuffer dOffsets = ctx.allocate(offs.capacity());
            GpuRegion landing = GpuRegion.create(ctx, MemoryKind.DEVICE, landingBytes, 1);
            RemoteRegion view = RemoteRegion.alias(landing);
            ServeRingFile file = ServeRingFile.create(dir.resolve("ring"), slots);
            ResidentServer server = ResidentServer.create(ctx, settings);
            GpuRegion staging = GpuRegion.create(ctx, MemoryKind.DEVICE, server.stagingBytes(), 2);
            RemoteSide far = remote ? new RemoteSide(ctx, nics, staging, landing, dir.resolve("reader-copy"), slots)
                : null;
            QueueSet queues = far != null ? far.queues : gpunetio ? ResidentServer.nicQueues(ctx, staging, view)
                : null) {
          dOffsets.write(0, offs.array());
          ServeRing ring = file.ring();
          if (far != null) {
            int ringKey = server.attachReaderRemote(0, file.path(), nics.holder(), 40, queues, landingBytes, KEY,
                far.copy.regionId(), far.copy.key());
            far.copy.connect(far.host, 40, ringKey, 30_000_000_000L);
            ring = far.copy.ring();
          } else if (gpunetio) {
            server.attachReaderNic(0, file.path(), queues, landingBytes, KEY);
          } else {
            server.attachReader(0, file.path(), landing.devicePointer(), landingBytes, KEY);
          }
          server.putOutput(ServePathBench.SHUFFLE, 1, p.block().address(), dOffsets.address(), 0, parts,
              ResidentDirectory.nicSource(p.block()));
          server.start();
          System.out.printf("serve path (resident, %s): 1 GPU, map of %d rows (%d bytes) in %d partitions, %d block(s)"
              + " of up to %d bytes per request, %d in flight, %d CTAs x 256 threads, %d untimed then %d timed"
              + " requests%n", remote ? "remote reader, two software NICs" : gpunetio ? "gpunetio, software NIC"
              : "stores", rows, mapBytes, parts, blocks, room, inflight, ctas, warmup, iters);
          Rig rig = new Rig(ring, landing, p, offsets, room, tableBytes, perRequest, slots, parts, blocks);
          rig.measure(warmup, inflight, null);
          long[][] t = new long[4][iters];
          long t0 = System.nanoTime();
          long bytes = rig.measure(iters, inflight, t);
          long wall = System.nanoTime() - t0;
          String[] names = {"post", "total", "copy", "software"};
          for (int i = 0; i < names.length; i++) {
            long[] v = t[i];
            Arrays.sort(v);
            System.out.printf("  %-8s us: median %8.1f  p90 %8.1f  p99 %8.1f%n", names[i], v[v.length / 2] / 1e3,
                v[(int) (v.length * 0.9)] / 1e3, v[(int) (v.length * 0.99)] / 1e3);
          }
          ResidentServer.Stats st = server.stats();
          System.out.printf("  landed %d bytes in %.1f ms: %.2f GB/s; kernel served %d, refused %d%n", bytes,
              wall / 1e6, bytes / (wall / 1e9) / 1e9, st.served(), st.failed());
          if (st.failed() != 0) {
            throw new IllegalStateException(st.failed() + " requests refused");
          }
          server.close(); // before the reader's side goes
        }
      }
    } finally {
      if (nics != null) {
        nics.reader().close();
        nics.holder().close();
      }
      try (var files = Files.list(dir)) {
        files.forEach(f -> f.toFile().delete());
      }
      Files.deleteIfExists(dir);
    }
  }

  /**
   * The reader's side of a remote ring and the holder's queue to it: a link each way between the two
   * NICs, the reader's landing region and the holder's staging region registered, the reader's copy
   * of the ring.
   */
  private static final class RemoteSide implements AutoCloseable {
    final dev.slipstream.gpu.nic.NicDevice.Link holderLink;
    final dev.slipstream.gpu.nic.NicDevice.Link readerLink;
    final QueueSet queues;
    final dev.slipstream.gpu.RemoteRing copy;
    final dev.slipstream.gpu.HostQueue host;
    private final ResidentServingConformanceGpuTest.Nics nics;
    private final GpuRegion staging;
    private final GpuRegion landing;
    private final int stagingKey;
    private final int landingKey;

    RemoteSide(GpuContext ctx, ResidentServingConformanceGpuTest.Nics nics, GpuRegion staging, GpuRegion landing,
        Path copyFile, int slots) throws java.io.IOException {
      this.nics = nics;
      this.staging = staging;
      this.landing = landing;
      holderLink = nics.holder().createLink(1, 1024);
      readerLink = nics.reader().createLink(1, 1024);
      holderLink.connect(0, readerLink.records().get(0));
      readerLink.connect(0, holderLink.records().get(0));
      stagingKey = nics.holder().register(staging.devicePointer(), staging.length(), staging.id());
      landingKey = nics.reader().register(landing.devicePointer(), landing.length(), landing.id());
      queues = holderLink.queueSet(ctx, 0, 1, List.of(staging),
          List.of(new dev.slipstream.gpu.nic.NicLanding(landing.id(), landingKey, landing.length())));
      copy = dev.slipstream.gpu.RemoteRing.create(ctx, nics.reader(), copyFile, slots, 41);
      host = nics.reader().hostQueue(readerLink, 0);
    }

    @Override
    public void close() throws java.io.IOException {
      queues.close();
      copy.close();
      holderLink.close();
      readerLink.close();
      nics.holder().deregister(staging.id(), stagingKey);
      nics.reader().deregister(landing.id(), landingKey);
    }
  }

  private static long align16(long v) {
    return (v + 15) & ~15L;
  }

  private record Posted(long ticket, long start, int first, int slot) {}

  private record Rig(ServeRing ring, GpuRegion landing, DeviceMapOutputStore.Pinned output, long[] offsets,
      long room, long tableBytes, long perRequest, int slots, int parts, int blocks) {

    /** Serves {@code n} requests, at most {@code inflight} outstanding; fills {@code t} (post, total, copy, software) if not null. */
    long measure(int n, int inflight, long[][] t) {
      Deque<Posted> out = new ArrayDeque<>();
      long landed = 0;
      int sent = 0;
      int done = 0;
      int next = 0;
      while (done < n) {
        if (sent < n && out.size() < inflight) {
          int first = next;
          int slot = sent % slots;
          long base = slot * perRequest;
          List<ServeRing.Block> bs = new ArrayList<>(blocks);
          for (int k = 0; k < blocks; k++) {
            bs.add(new ServeRing.Block(1, (first + k) % parts, base + tableBytes + k * room, room));
          }
          next = (first + blocks) % parts;
          long start = System.nanoTime();
          long ticket = ring.post(new ServeRing.Request(sent, ServePathBench.SHUFFLE, KEY, base,
              start + 30_000_000_000L, bs), 30_000_000_000L);
          if (ticket < 0) {
            throw new IllegalStateException("request " + sent + ": the ring is broken");
          }
          if (t != null) {
            t[0][sent] = System.nanoTime() - start;
          }
          out.addLast(new Posted(ticket, start, first, slot));
          sent++;
          continue;
        }
        Posted o = out.pollFirst();
        ServeRing.Answer a = ring.await(o.ticket(), 30_000_000_000L);
        long seen = System.nanoTime();
        if (a == null || !a.ok()) {
          throw new IllegalStateException("request " + done + ": " + (a == null ? "no answer within 30 s"
              : "status " + a.status() + " at block " + a.block() + ", value " + a.value()));
        }
        if (t != null) {
          t[1][done] = seen - o.start();
          t[2][done] = a.copiedNanos() - a.copyNanos();
          t[3][done] = t[1][done] - t[2][done];
          if (done == 0 || done == n - 1) {
            check(o);
          }
        }
        landed += a.bytes();
        done++;
      }
      return landed;
    }

    /** Each landed block equals the store's bytes of its partition. */
    private void check(Posted o) {
      for (int k = 0; k < blocks; k++) {
        int q = (o.first() + k) % parts;
        int len = Math.toIntExact(output.bytes(q));
        byte[] want = new byte[len];
        output.block().read(output.offset(q), want, 0, len);
        byte[] got = landing.read(o.slot() * perRequest + tableBytes + k * room, len);
        if (!Arrays.equals(want, got)) {
          throw new IllegalStateException("partition " + q + ": landed bytes differ from the store's");
        }
      }
    }
  }
}
