package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.nic.NicLinks;
import java.util.List;

/**
 * What a {@link PushLane} pushes into, and over which queues: a reader's landing region imported
 * through CUDA IPC (one machine: nvlink stores, or the software NIC's own gpunetio queue pairs), or
 * a reader's landing region as its NIC registered it, reached over a slot of the NIC link to that
 * reader ({@link #overLink}: GPUNetIO RDMA writes the push kernel posts on the link's queue pairs).
 *
 * <p>Ownership: a lane closes its target after its queue set.
 */
public interface LaneTarget extends AutoCloseable {
  /**
   * A queue set of {@code queues} queues (at most {@link #maxQueues}) of the lanes' configured
   * {@code backend} where the target does not fix it, over {@code locals} then the landing region.
   */
  QueueSet queueSet(GpuContext ctx, Backend backend, int queues, List<GpuRegion> locals);

  /** The most queues a set into this target may have. */
  int maxQueues();

  /** The backend a set into this target has, given the lanes' configured one. */
  Backend backend(Backend configured);

  /** False once the target may not be pushed into any more (its link was replaced): the lane is closed. */
  boolean current();

  /** A push into it failed or passed its deadline: a link in the error state is replaced. */
  void failed();

  /**
   * Makes a region of the lane's own (its block-table staging region, a source of every push)
   * readable by the target's queues: registered on the NIC for a link target, nothing otherwise.
   */
  void adopt(GpuRegion r);

  /** Undoes {@link #adopt} before the region is freed. */
  void release(GpuRegion r);

  @Override
  void close();

  /** A landing region imported through CUDA IPC (or this executor's own, aliased). Not owned. */
  static LaneTarget imported(RemoteRegion landing) {
    return new LaneTarget() {
      @Override
      public QueueSet queueSet(GpuContext ctx, Backend backend, int queues, List<GpuRegion> locals) {
        return QueueSet.create(ctx, backend, queues, backend == Backend.GPUNETIO ? PushLane.GPUNETIO_DEPTH : 0, locals,
            List.of(landing));
      }

      @Override
      public int maxQueues() {
        return PushScheduler.MAX_PUSH_QUEUES + 1;
      }

      @Override
      public Backend backend(Backend configured) {
        return configured;
      }

      @Override
      public boolean current() {
        return true;
      }

      @Override
      public void failed() {}

      @Override
      public void adopt(GpuRegion r) {}

      @Override
      public void release(GpuRegion r) {}

      @Override
      public void close() {}
    };
  }

  /**
   * The reader's NIC-registered {@code landing}, over the slot of its NIC link that {@code lease}
   * holds (closed with the target): gpunetio queues on the slot's queue pairs, all of them. The
   * lane's own regions are registered on {@code nic}.
   */
  static LaneTarget overLink(NicLinks.Lease lease, NicLanding landing, NicRegistrar nic) {
    return new LaneTarget() {
      private final java.util.Map<GpuRegion, Integer> keys = new java.util.IdentityHashMap<>();

      @Override
      public void adopt(GpuRegion r) {
        keys.put(r, nic.register(r.devicePointer(), r.length(), r.id()));
      }

      @Override
      public void release(GpuRegion r) {
        Integer k = keys.remove(r);
        if (k != null) {
          nic.deregister(r.id(), k);
        }
      }

      @Override
      public QueueSet queueSet(GpuContext ctx, Backend backend, int queues, List<GpuRegion> locals) {
        if (queues > lease.queues()) {
          throw new IllegalArgumentException("a push over a NIC link slot of " + lease.queues() + " queue pairs asked"
              + " for " + queues + " queues");
        }
        return lease.link().queueSet(ctx, lease.firstQueue(), lease.queues(), locals, List.of(landing));
      }

      @Override
      public int maxQueues() {
        return lease.queues();
      }

      @Override
      public Backend backend(Backend configured) {
        return Backend.GPUNETIO;
      }

      @Override
      public boolean current() {
        return lease.current();
      }

      @Override
      public void failed() {
        lease.failed();
      }

      @Override
      public void close() {
        lease.close();
      }
    };
  }
}
