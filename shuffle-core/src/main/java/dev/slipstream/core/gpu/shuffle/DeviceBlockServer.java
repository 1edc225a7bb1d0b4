package dev.slipstream.core.gpu.shuffle;

import dev.slipstream.core.gpu.Backend;
import dev.slipstream.core.gpu.GpuContext;
import dev.slipstream.core.gpu.GpuRegion;
import dev.slipstream.core.gpu.MemoryKind;
import dev.slipstream.core.gpu.PushKernel;
import dev.slipstream.core.gpu.QueueSet;
import dev.slipstream.core.gpu.RegionDescriptor;
import dev.slipstream.core.gpu.RemoteRegion;
import dev.slipstream.core.gpu.SlipStatus;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * The holder's side of the GPU path: serves a {@link DeviceWriteRequest} by launching the push
 * kernel from the map outputs in the {@link DeviceMapOutputStore} into the reader's device landing
 * region (imported through CUDA IPC by {@code landings}), over an nvlink queue set: one queue per
 * map output (a queue has one source region) and one for the block table; every queue adds its
 * (blocks, bytes) to the request's signal word after its data, so the reader, once the block count
 * reaches entries + 1, has every byte.
 *
 * <p>Everything is checked before anything is written: the request's ranges against the landing
 * region ({@link DeviceWriteRequest#check()}), each output is here, has the requested partition and
 * the requested column widths, and each block fits its capacity. The device checks the addresses
 * again. Threading: one request at a time per server (it owns the push kernel's stream); callers
 * serialise. Ownership: closes nothing it was given.
 */
public final class DeviceBlockServer {
  private final GpuContext ctx;
  private final PushKernel kernel;
  private final DeviceMapOutputStore store;
  private final Function<RegionDescriptor, RemoteRegion> landings;
  private final AtomicInteger tableIds;
  private long served;
  private long bytesServed;

  /**
   * @param landings maps a reader's landing descriptor to the imported region (cached by the caller;
   *     an alias for this process's own landing region)
   * @param firstTableId region ids for the per-request block-table staging regions
   */
  public DeviceBlockServer(GpuContext ctx, PushKernel kernel, DeviceMapOutputStore store,
      Function<RegionDescriptor, RemoteRegion> landings, int firstTableId) {
    this.ctx = ctx;
    this.kernel = kernel;
    this.store = store;
    this.landings = landings;
    this.tableIds = new AtomicInteger(firstTableId);
  }

  /** Serves {@code req} and returns the block bytes pushed; throws with the reason, writing nothing, if it is refused. */
  public synchronized long serve(DeviceWriteRequest req, long timeoutMs) throws TransportException {
    req.check();
    Map<Long, DeviceMapOutputStore.Pinned> pins = new LinkedHashMap<>();
    try {
      int[] widths = req.widths();
      ByteBuffer table = ByteBuffer.allocate(DeviceWriteRequest.TABLE_ENTRY * req.entries().size())
          .order(ByteOrder.LITTLE_ENDIAN);
      long total = 0;
      for (DeviceWriteRequest.Entry e : req.entries()) {
        DeviceMapOutputStore.Pinned p = pins.get(e.mapAttemptId());
        if (p == null) {
          try {
            p = store.pin(req.shuffleId(), e.mapAttemptId());
          } catch (IllegalStateException ex) {
            throw new TransportException(TransportError.UNAVAILABLE, ex.getMessage());
          }
          pins.put(e.mapAttemptId(), p);
          if (!java.util.Arrays.equals(p.widths(), widths)) {
            throw refused(req, "map attempt " + e.mapAttemptId() + " has payload widths "
                + java.util.Arrays.toString(p.widths()) + ", the request expects " + java.util.Arrays.toString(widths));
          }
        }
        if (e.partition() >= p.partitions()) {
          throw refused(req, "partition " + e.partition() + " of map attempt " + e.mapAttemptId() + ", expected < "
              + p.partitions());
        }
        long bytes = p.bytes(e.partition());
        if (bytes > e.capacity()) {
          throw refused(req, "block (" + e.mapAttemptId() + ", " + e.partition() + ") has " + bytes
              + " bytes, more than its capacity " + e.capacity());
        }
        table.putLong(bytes).putLong(p.rows(e.partition()));
        total += bytes;
      }
      push(req, pins, table.array(), timeoutMs);
      served++;
      bytesServed += total;
      return total;
    } finally {
      pins.values().forEach(DeviceMapOutputStore.Pinned::close);
    }
  }

  private void push(DeviceWriteRequest req, Map<Long, DeviceMapOutputStore.Pinned> pins, byte[] table, long timeoutMs)
      throws TransportException {
    RemoteRegion landing = landings.apply(req.landing());
    try (GpuRegion tableRegion = GpuRegion.create(ctx, MemoryKind.DEVICE, table.length, tableIds.getAndIncrement())) {
      tableRegion.write(0, table);
      List<GpuRegion> locals = new ArrayList<>();
      Map<Long, Integer> sourceIndex = new LinkedHashMap<>();
      for (Map.Entry<Long, DeviceMapOutputStore.Pinned> e : pins.entrySet()) {
        sourceIndex.put(e.getKey(), locals.size());
        locals.add(((GpuOutputSpace.RegionBlock) e.getValue().block()).region());
      }
      int tableIndex = locals.size();
      locals.add(tableRegion);
      int landingIndex = locals.size();
      int n = locals.size();
      List<PushKernel.Queue> queues = new ArrayList<>(n);
      List<List<PushKernel.Item>> items = new ArrayList<>(n);
      for (int q = 0; q < n; q++) {
        queues.add(new PushKernel.Queue(q, landingIndex, landingIndex, req.signalOffset()));
        items.add(new ArrayList<>());
      }
      for (DeviceWriteRequest.Entry e : req.entries()) {
        DeviceMapOutputStore.Pinned p = pins.get(e.mapAttemptId());
        items.get(sourceIndex.get(e.mapAttemptId())).add(
            new PushKernel.Item(p.offset(e.partition()), e.landingOffset(), p.bytes(e.partition())));
      }
      items.get(tableIndex).add(new PushKernel.Item(0, req.tableOffset(), table.length));
      int batch = items.stream().mapToInt(List::size).max().orElse(1);
      try (QueueSet qs = QueueSet.create(ctx, Backend.NVLINK, n, 0, locals, List.of(landing))) {
        SlipStatus[] st = kernel.push(qs, queues, items, batch, 256, timeoutMs);
        for (int q = 0; q < st.length; q++) {
          if (st[q] != SlipStatus.SLIP_OK) {
            try {
              qs.check(true);
            } catch (RuntimeException ex) {
              throw refused(req, "push queue " + q + ": " + st[q] + ": " + ex.getMessage());
            }
            throw refused(req, "push queue " + q + " ended with " + st[q]);
          }
        }
      }
    } catch (RuntimeException e) {
      throw new TransportException(TransportError.INTERNAL, "device write request " + req.requestId() + ": push failed: "
          + e.getMessage(), e);
    }
  }

  private static TransportException refused(DeviceWriteRequest req, String why) {
    return new TransportException(TransportError.OUT_OF_RANGE, "device write request " + req.requestId()
        + " (shuffle " + req.shuffleId() + "): " + why);
  }

  public synchronized long requestsServed() {
    return served;
  }

  public synchronized long bytesServed() {
    return bytesServed;
  }
}
