package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.PushKernel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The checks a {@link PushScheduler} makes before it writes anything, and the plan of the push
 * that passes them. Checked: the request's ranges against the landing region
 * ({@link WriteRequest#check()}), each map output is in the store, has the requested payload
 * column widths and the requested partition, and each block fits its capacity. Planned: the
 * request's block table, its source regions (one per map output) and its pieces, each block in
 * pieces of {@link WriteRequest#CHUNK_BYTES}.
 *
 * <p>Threading: thread-safe (the store is); runs on the thread that starts the request.
 * Ownership: the returned {@link PushJob} holds the pins of its map outputs; a refused request
 * holds none.
 */
final class PushAdmission {
  private final DeviceMapOutputStore store;

  PushAdmission(DeviceMapOutputStore store) {
    this.store = store;
  }

  /**
   * Checks {@code req} against the store and pins its map outputs; throws, holding nothing, if it
   * is refused ({@link TransportError#UNAVAILABLE} for a map output not here,
   * {@link TransportError#OUT_OF_RANGE} for one of another shape or a block over its capacity).
   * Fills {@code marks[MARK_CHECKED]}.
   */
  PushJob admit(WriteRequest req, long deadline, long limitMs, long[] marks, PushScheduler.Served done)
      throws TransportException {
    req.check();
    Map<Long, DeviceMapOutputStore.Pinned> pins = new LinkedHashMap<>();
    boolean ok = false;
    try {
      int[] widths = req.widths();
      List<LandedBlocks.Landed> table = new ArrayList<>(req.entries().size());
      // The partitions asked of each map output: of a spilled output only their span comes back.
      Map<Long, int[]> spans = new LinkedHashMap<>();
      for (ShuffleMessages.Entry e : req.entries()) {
        int[] r = spans.computeIfAbsent(e.mapId(), m -> new int[] {e.partition(), e.partition()});
        r[0] = Math.min(r[0], e.partition());
        r[1] = Math.max(r[1], e.partition());
      }
      long total = 0;
      for (ShuffleMessages.Entry e : req.entries()) {
        DeviceMapOutputStore.Pinned p = pins.get(e.mapId());
        if (p == null) {
          try {
            // While pushes hold the device budget, a spilled output's span waits for one of them.
            int[] r = spans.get(e.mapId());
            int n = store.partitions(req.shuffleId(), e.mapId());
            if (r[1] >= n) {
              throw refused(req, "partition " + r[1] + " of map attempt " + e.mapId() + ", expected < " + n);
            }
            p = store.pin(req.shuffleId(), e.mapId(), r[0], r[1], deadline);
          } catch (IllegalArgumentException ex) {
            throw refused(req, ex.getMessage());
          } catch (IllegalStateException ex) {
            throw new TransportException(TransportError.UNAVAILABLE, ex.getMessage());
          }
          pins.put(e.mapId(), p);
          if (!Arrays.equals(p.widths(), widths)) {
            throw refused(req, "map attempt " + e.mapId() + " has payload widths "
                + Arrays.toString(p.widths()) + ", the request expects " + Arrays.toString(widths));
          }
        }
        if (e.partition() >= p.partitions()) {
          throw refused(req, "partition " + e.partition() + " of map attempt " + e.mapId() + ", expected < "
              + p.partitions());
        }
        long bytes = p.bytes(e.partition());
        if (bytes > e.capacity()) {
          throw refused(req, "block (" + e.mapId() + ", " + e.partition() + ") has " + bytes
              + " bytes, more than its capacity " + e.capacity());
        }
        table.add(new LandedBlocks.Landed(bytes, p.rows(e.partition())));
        total += bytes;
      }
      PushJob job = new PushJob(req, pins, LandedBlocks.encode(req.requestId(), table), total, deadline, limitMs,
          marks, done);
      plan(job);
      marks[PushScheduler.MARK_CHECKED] = System.nanoTime();
      ok = true;
      return job;
    } finally {
      if (!ok) {
        pins.values().forEach(DeviceMapOutputStore.Pinned::close);
      }
    }
  }

  /** The job's source regions and pieces: each block in pieces of {@link WriteRequest#CHUNK_BYTES}. */
  private static void plan(PushJob job) {
    Map<Long, Integer> sourceIndex = new LinkedHashMap<>();
    Map<Long, Long> base = new LinkedHashMap<>();
    for (Map.Entry<Long, DeviceMapOutputStore.Pinned> e : job.pins.entrySet()) {
      GpuOutputSpace.SlabBlock b = (GpuOutputSpace.SlabBlock) e.getValue().block();
      sourceIndex.put(e.getKey(), job.outputs.size());
      base.put(e.getKey(), b.base());
      job.outputs.add(b.region()); // the output's slab: its pieces are at the block's base in it
      job.items.add(new ArrayList<>());
    }
    for (ShuffleMessages.Entry e : job.req.entries()) {
      DeviceMapOutputStore.Pinned p = job.pins.get(e.mapId());
      List<PushKernel.Item> out = job.items.get(sourceIndex.get(e.mapId()));
      long src = base.get(e.mapId()) + p.offset(e.partition());
      long bytes = p.bytes(e.partition());
      long n = WriteRequest.chunks(e.capacity());
      for (long i = 0; i < n; i++) {
        long at = i * WriteRequest.CHUNK_BYTES;
        long len = Math.max(0, Math.min(WriteRequest.CHUNK_BYTES, bytes - at));
        // A piece past the block's real bytes is empty; it still counts, at an offset inside both regions.
        out.add(len == 0 ? new PushKernel.Item(src, e.landingOffset(), 0)
            : new PushKernel.Item(src + at, e.landingOffset() + at, len));
      }
    }
  }

  /** The refusal of {@code req} for {@code why}: {@link TransportError#OUT_OF_RANGE}, naming the request and shuffle. */
  static TransportException refused(WriteRequest req, String why) {
    return new TransportException(TransportError.OUT_OF_RANGE, "device write request " + req.requestId()
        + " (shuffle " + req.shuffleId() + "): " + why);
  }
}
