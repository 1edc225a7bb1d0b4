package dev.slipstream.gpu.nic;

import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.QueueSet;
import java.util.List;

/**
 * One executor GPU's RDMA NIC as the link table ({@link NicLinks}) uses it: it makes links (a set of
 * queue pairs towards one peer, in RESET) and connects them to a peer's records. The native
 * implementation is {@link NativeNic}; tests use a model of the verbs state machine.
 */
public interface NicDevice {
  /** {@code queues} queue pairs of {@code depth} WQEs towards one peer, in RESET. */
  Link createLink(int queues, int depth);

  /** The queue pairs towards one peer. Closed only while no kernel uses them. */
  interface Link extends AutoCloseable {
    /** This side's records, one per queue pair, to send to the peer. */
    List<NicQpRecord> records();

    /** Moves queue pair {@code q} to RTS against the peer's record; at most once per queue pair. */
    void connect(int q, NicQpRecord peer);

    /** True when the GPU rings the queue pairs' doorbell itself, false when a host thread does. */
    boolean gpuDoorbell();

    /**
     * A gpunetio queue set whose queues are queue pairs {@code [first, first + count)} of this
     * connected link: table entries {@code locals} (regions registered on this link's NIC), then
     * {@code peer} (the peer's regions as its NIC registered them). One set at a time may use a
     * queue pair; close the set before the link.
     */
    QueueSet queueSet(GpuContext ctx, int first, int count, List<GpuRegion> locals, List<NicLanding> peer);

    @Override
    void close();
  }
}
