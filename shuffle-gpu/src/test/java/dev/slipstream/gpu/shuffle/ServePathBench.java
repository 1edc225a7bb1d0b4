package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RemoteRegion;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * The GPU path's software cost per device write request, without Spark and without a second
 * process: one JVM on one GPU is reader and holder at once. A map output of {@code --rows} rows is
 * partitioned on the device into {@code --parts} partitions; each request asks for {@code --blocks}
 * of them (from partition 0 on, wrapping), into a device landing region aliased as its own remote
 * region, with up to {@code --inflight} requests outstanding, the reader polling the oldest as the
 * reduce task does. Per request it records the reader's and holder's instants (one clock) and prints,
 * per phase, the median, 90th and 99th percentile over the timed requests:
 *
 * <ul>
 *   <li>{@code prepare}: {@link DeviceLanding#prepare} (landing range, zeroed);
 *   <li>{@code codec}: encoding and decoding the request (what the transport would carry);
 *   <li>{@code check}: {@link PushScheduler#start} up to the checks, pins and block table;
 *   <li>{@code lane}, {@code launch}, {@code kernel}: as the server marks them;
 *   <li>{@code land}: from the holder seeing the kernel end to the reader seeing the signal (0 when
 *       the reader saw it first);
 *   <li>{@code total}: from prepare to the reader seeing the signal.
 * </ul>
 *
 * Also the landed bytes per second over the timed requests' wall time. Every landed block is
 * compared with the store's bytes in the first and last timed request (byte-exact or it throws).
 *
 * <p>{@code --path resident} measures the resident server instead ({@link ResidentPath}): the
 * request is posted into a request ring and the holder's kernel, already on the GPU, checks and
 * pushes it and answers in the ring; no host thread of the holder is on the request's path.
 * {@code --path resident-gpunetio}: the same with the kernel posting GPUNetIO RDMA writes that the
 * native library's software NIC executes.
 * {@code --path resident-remote}: the reader on "another machine": two software NICs linked to each
 * other; the reader publishes each request into the holder's copy of the ring with an RDMA write and
 * a fetch-add posted from the host, and the kernel answers into the reader's copy over its link.
 *
 * <p>Run on the GPU machine through {@code dev/slipstream-gpu-java main
 * dev.slipstream.gpu.shuffle.ServePathBench --rows 4000000 --parts 4 --blocks 1 --iters 2000};
 * results and method in docs/benchmarks/2026-12-01-gpu-serve-path.md and
 * docs/benchmarks/2026-12-02-gpu-resident-serve.md. Not a test: it asserts nothing about time.
 */
public final class ServePathBench {
  static final int[] W = {8, 8};
  static final int SHUFFLE = 5;
  private static final String[] PHASES = {"prepare", "codec", "check", "lane", "launch", "kernel", "land", "total"};

  private ServePathBench() {}

  public static void main(String[] args) throws Exception {
    int rows = 4_000_000;
    int parts = 4;
    int blocks = 1;
    int iters = 2000;
    int warmup = 1000;
    int inflight = 1;
    int ctas = 2;
    String path = "scheduler";
    for (int i = 0; i < args.length; i += 2) {
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option " + args[i] + " has no value");
      }
      if (args[i].equals("--path")) {
        path = args[i + 1];
        if (!path.equals("scheduler") && !path.equals("resident") && !path.equals("resident-gpunetio")
            && !path.equals("resident-remote")) {
          throw new IllegalArgumentException("--path " + path
              + ", expected scheduler, resident, resident-gpunetio or resident-remote");
        }
        continue;
      }
      int v = Integer.parseInt(args[i + 1]);
      switch (args[i]) {
        case "--rows" -> rows = v;
        case "--parts" -> parts = v;
        case "--blocks" -> blocks = v;
        case "--iters" -> iters = v;
        case "--warmup" -> warmup = v;
        case "--inflight" -> inflight = v;
        case "--ctas" -> ctas = v;
        default -> throw new IllegalArgumentException("unknown option " + args[i]
            + ", expected --path, --rows, --parts, --blocks, --iters, --warmup, --inflight or --ctas");
      }
    }
    if (blocks < 1 || blocks > parts || inflight < 1 || iters < 2 || rows < 1) {
      throw new IllegalArgumentException("--blocks " + blocks + " --parts " + parts + " --inflight " + inflight
          + " --iters " + iters + " --rows " + rows + ": expected 1 <= blocks <= parts, inflight >= 1, iters >= 2,"
          + " rows >= 1");
    }
    if (path.startsWith("resident")) {
      ResidentPath.run(rows, parts, blocks, iters, warmup, inflight, ctas, switch (path) {
        case "resident-gpunetio" -> ResidentPath.Mode.GPUNETIO;
        case "resident-remote" -> ResidentPath.Mode.REMOTE;
        default -> ResidentPath.Mode.STORES;
      });
    } else {
      run(rows, parts, blocks, iters, warmup, inflight);
    }
  }

  private record Outstanding(DeviceLanding.Fetch fetch, long[] marks, CompletableFuture<Long> answer, long start,
      long coded, int first) {}

  private static void run(int rows, int parts, int blocks, int iters, int warmup, int inflight) throws Exception {
    BatchLayout whole = BatchLayout.packed(rows, W);
    long mapBytes = whole.bufferBytes();
    try (GpuContext ctx = GpuContext.open(0);
        PushKernel kernel = PushKernel.load(ctx);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000), 2 * mapBytes + (64 << 20),
            0)) {
      try (DeviceBatch b = upload(ctx, rows)) {
        DeviceMapOutputWriter.write(ctx, store, SHUFFLE, 1, List.of(b), parts, W, 60_000);
      }
      long[] sizes = new long[parts];
      long biggest = 0;
      try (DeviceMapOutputStore.Pinned p = store.pin(SHUFFLE, 1)) {
        for (int q = 0; q < parts; q++) {
          sizes[q] = p.bytes(q);
          biggest = Math.max(biggest, sizes[q]);
        }
      }
      long perRequest = blocks * (biggest + 64) + 4096;
      long landingBytes = Math.max(64L << 20, 2L * inflight * perRequest);
      try (DeviceLanding landing = new DeviceLanding(ctx, landingBytes, 1);
          RemoteRegion view = RemoteRegion.alias(landing.region());
          PushScheduler server = new PushScheduler(ctx, kernel, store, d -> view, 1 << 20, inflight)) {
        System.out.printf("serve path: 1 GPU, map of %d rows (%d bytes) in %d partitions, %d block(s) of up to %d bytes"
            + " per request, %d in flight, %d untimed then %d timed requests; landing region %d bytes%n",
            rows, mapBytes, parts, blocks, biggest, inflight, warmup, iters, landingBytes);
        measure(ctx, store, landing, server, parts, blocks, warmup, inflight, null, sizes);
        long[][] t = new long[PHASES.length][iters];
        long t0 = System.nanoTime();
        long bytes = measure(ctx, store, landing, server, parts, blocks, iters, inflight, t, sizes);
        long wall = System.nanoTime() - t0;
        for (int i = 0; i < PHASES.length; i++) {
          long[] v = t[i];
          Arrays.sort(v);
          System.out.printf("  %-8s us: median %8.1f  p90 %8.1f  p99 %8.1f%n", PHASES[i], v[v.length / 2] / 1e3,
              v[(int) (v.length * 0.9)] / 1e3, v[(int) (v.length * 0.99)] / 1e3);
        }
        System.out.printf("  landed %d bytes in %.1f ms: %.2f GB/s; lanes made %d, requests served %d%n", bytes,
            wall / 1e6, bytes / (wall / 1e9) / 1e9, server.lanesMade(), server.requestsServed());
        if (landing.used() != 0) {
          throw new IllegalStateException("landing region still has " + landing.used() + " bytes reserved");
        }
      }
    }
  }

  /** Sends {@code n} requests, at most {@code inflight} outstanding; fills {@code t} (phase x request) if not null. */
  private static long measure(GpuContext ctx, DeviceMapOutputStore store, DeviceLanding landing,
      PushScheduler server, int parts, int blocks, int n, int inflight, long[][] t, long[] sizes)
      throws Exception {
    Deque<Outstanding> out = new ArrayDeque<>();
    long landedBytes = 0;
    int sent = 0;
    int done = 0;
    int next = 0;
    while (done < n) {
      if (sent < n && out.size() < inflight) {
        List<DeviceLanding.Want> wants = new ArrayList<>(blocks);
        int first = next;
        for (int k = 0; k < blocks; k++) {
          int q = (first + k) % parts;
          wants.add(new DeviceLanding.Want(1, q, Math.max(16, sizes[q])));
        }
        next = (first + blocks) % parts;
        long start = System.nanoTime();
        DeviceLanding.Fetch f = landing.prepare(SHUFFLE, W, wants);
        long prepared = System.nanoTime();
        WriteRequest req = ShuffleMessages.decodeRequest(f.request().toBytes());
        long coded = System.nanoTime();
        long[] marks = new long[PushScheduler.MARKS];
        CompletableFuture<Long> answer = new CompletableFuture<>();
        server.start(req, 30_000, marks, (bytes, error) -> {
          if (error == null) {
            answer.complete(bytes);
          } else {
            answer.completeExceptionally(error);
          }
        });
        f.begin();
        if (t != null) {
          t[0][sent] = prepared - start;
          t[1][sent] = coded - prepared;
        }
        out.addLast(new Outstanding(f, marks, answer, start, coded, first));
        sent++;
        continue;
      }
      Outstanding o = out.pollFirst();
      List<DeviceBatch> landed;
      long deadline = System.nanoTime() + 30_000_000_000L;
      while ((landed = o.fetch().poll()) == null) {
        if (o.answer().isCompletedExceptionally()) {
          o.answer().join(); // throws the holder's error
        }
        if (System.nanoTime() - deadline > 0) {
          throw new IllegalStateException("request " + done + ": no signal within 30 s");
        }
      }
      long seen = System.nanoTime();
      long pushed = o.answer().get(30, java.util.concurrent.TimeUnit.SECONDS);
      if (t != null && (done == 0 || done == n - 1)) {
        check(store, landing, landed, o.first(), parts, blocks);
      }
      o.fetch().close();
      landedBytes += pushed;
      if (t != null) {
        long[] m = o.marks();
        t[2][done] = m[PushScheduler.MARK_CHECKED] - o.coded();
        t[3][done] = m[PushScheduler.MARK_LANE_READY] - m[PushScheduler.MARK_CHECKED];
        t[4][done] = m[PushScheduler.MARK_LAUNCHED] - m[PushScheduler.MARK_LANE_READY];
        t[5][done] = m[PushScheduler.MARK_ENDED] - m[PushScheduler.MARK_LAUNCHED];
        t[6][done] = Math.max(0, seen - m[PushScheduler.MARK_ENDED]);
        t[7][done] = seen - o.start();
      }
      done++;
    }
    return landedBytes;
  }

  /** Each landed block equals the store's bytes of its partition. */
  private static void check(DeviceMapOutputStore store, DeviceLanding landing, List<DeviceBatch> landed, int first,
      int parts, int blocks) {
    try (DeviceMapOutputStore.Pinned p = store.pin(SHUFFLE, 1)) {
      for (int k = 0; k < blocks; k++) {
        int q = (first + k) % parts;
        int len = Math.toIntExact(p.bytes(q));
        byte[] want = new byte[len];
        p.block().read(p.offset(q), want, 0, len);
        long off = landed.get(k).address() - landing.region().devicePointer();
        if (!Arrays.equals(want, landing.region().read(off, len))) {
          throw new IllegalStateException("partition " + q + ": landed bytes differ from the store's");
        }
      }
    }
  }

  /** {@code n} rows of random keys; payload columns derived from the key. */
  static DeviceBatch upload(GpuContext ctx, int n) {
    BatchLayout l = BatchLayout.packed(n, W);
    ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(l.bufferBytes())).order(ByteOrder.LITTLE_ENDIAN);
    SplittableRandom r = new SplittableRandom(7);
    for (int i = 0; i < n; i++) {
      long key = r.nextLong();
      b.putLong(8 * i, key);
      b.putLong((int) l.offset(0) + 8 * i, key * 3);
      b.putLong((int) l.offset(1) + 8 * i, i);
    }
    DeviceBuffer d = ctx.allocate(Math.max(16, b.capacity()));
    d.write(0, b.array());
    return DeviceBatch.owning(ctx.device(), d.address(), l, d);
  }
}
