/*
 * gpunetio backend of the device write API: the open DOCA GPUNetIO verbs device functions
 * (doca_gpu_dev_verbs_put, _put_signal, _signal, _poll_one_cq_at), unchanged, on the queue pair the
 * host built for the queue (slip_dev_queue.nic_qp). Compiled only when the GPUNetIO device headers
 * were found at configure time (SLIP_HAVE_GPUNETIO); include write_api.cuh, not this file.
 *
 * The queue's CUDA block owns its queue pair: one leader thread posts one WQE per write (two for a
 * write with signal: RDMA write, then an atomic fetch-add on the same queue pair, which the
 * responder executes after the write). Each post publishes the producer index itself, so commit
 * only synchronises the group.
 *
 * Sharing mode EXCLUSIVE, under a per-queue lock (slip_dev_queue.nic_lock): several warps of the
 * owning block post to one queue pair (the push kernel's small items), and the lock makes them take
 * turns. In the CPU-proxy mode the shared modes (CTA, GPU) publish the producer index with a
 * system-scope atomic max on the doorbell word in pinned host memory, which needs native host
 * atomics that PCIe hosts lack (compute-sanitizer memcheck rejects it on the H200 machine);
 * EXCLUSIVE publishes it with a plain system-scope store.
 * Local completion: the CQE of the last WQE posted; the NIC completes WQEs of a queue pair in order.
 */
#ifndef SLIPSTREAM_DEVICE_GPUNETIO_CUH
#define SLIPSTREAM_DEVICE_GPUNETIO_CUH

#include <cuda.h>  // CUDA_VERSION, which the GPUNetIO headers test (they warn without it)
#include <errno.h>

#include "doca_gpunetio_device.h"

namespace slip {
namespace dev {
namespace gpunetio {

constexpr doca_gpu_dev_verbs_resource_sharing_mode kShare = DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE;

__device__ inline doca_gpu_dev_verbs_qp *qp(const slip_dev_queue &q) { return (doca_gpu_dev_verbs_qp *)q.nic_qp; }

// Held by one thread around every DOCA call on the queue's queue pair (device-scope acquire and
// release: the queue pair's indices live in device memory).
struct Lock {
  slip_dev_queue &q;
  __device__ explicit Lock(slip_dev_queue &queue) : q(queue) {
    while (atomicCAS(&q.nic_lock, 0u, 1u) != 0u) __nanosleep(64);
    __threadfence();
  }
  __device__ ~Lock() {
    __threadfence();
    atomicExch(&q.nic_lock, 0u);
  }
};

// Memory keys as the GPUNetIO version found expects them in its WQE builders.
__device__ inline uint32_t mkey(uint64_t key) {
#if defined(DOCA_GPUNETIO_VERBS_MKEY_SWAPPED) && DOCA_GPUNETIO_VERBS_MKEY_SWAPPED == 1
  return doca_gpu_dev_verbs_bswap32(SLIP_MKEY(key));
#else
  return SLIP_MKEY(key);
#endif
}

__device__ inline doca_gpu_dev_verbs_addr addr(const slip_dev_queue &q, Addr a) {
  const slip_dev_region &r = q.regions[a.region];
  doca_gpu_dev_verbs_addr v;
  v.addr = SLIP_IOVA(r.id, a.offset);
  v.key = mkey(r.key);
  return v;
}

// Where the fetch-add of a signal returns the old value (this queue's 8 bytes of the set's sink).
__device__ inline doca_gpu_dev_verbs_addr sink(const slip_dev_queue &q) {
  doca_gpu_dev_verbs_addr v;
  v.addr = SLIP_IOVA(SLIP_NIC_SINK_ID, (uint64_t)q.index * 8);
  v.key = mkey(q.nic_sink_key);
  return v;
}

// Leader only. The fence makes the group's stores to the source (and everything else this kernel
// wrote before) visible at system scope before the NIC is told to read it.
__device__ inline void write(slip_dev_queue &q, Addr dst, Addr src, uint64_t len) {
  slip::sync::fence_sys();
  Lock lock(q);
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_put<kShare>(qp(q), addr(q, dst), addr(q, src), (size_t)len, &t);
}

__device__ inline void write_signal(slip_dev_queue &q, Addr dst, Addr src, uint64_t len, Addr sig, uint64_t add) {
  slip::sync::fence_sys();
  Lock lock(q);
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_put_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, kShare>(qp(q), addr(q, dst), addr(q, src),
                                                                           (size_t)len, addr(q, sig), sink(q), add, &t);
}

__device__ inline void signal_add(slip_dev_queue &q, Addr sig, uint64_t add) {
  Lock lock(q);
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, kShare>(qp(q), addr(q, sig), sink(q), add, &t);
}

// WQEs reserved so far: waiting for ticket(q) waits for every post made before.
__device__ inline uint64_t ticket(slip_dev_queue &q) {
  Lock lock(q);
  return *(volatile uint64_t *)&qp(q)->sq_rsvd_index;
}

// Leader only: waits for the CQE of WQE tk - 1. SLIP_OK, SLIP_ERR_PEER for an error CQE (the
// software NIC also records why in the set's error record), or SLIP_ERR_TIMEOUT.
__device__ inline int wait(slip_dev_queue &q, uint64_t tk) {
  if (tk == 0) return SLIP_OK;
  const uint64_t t0 = slip::sync::globaltimer_ns();
  slip::sync::Backoff backoff;
  for (;;) {
    int r;
    {
      Lock lock(q);
      r = doca_gpu_dev_verbs_poll_one_cq_at<kShare>(&qp(q)->cq_sq, tk - 1);
    }
    if (r == 0) return SLIP_OK;
    if (r != EBUSY) return SLIP_ERR_PEER;  // -EIO: error completion
    if (slip::sync::globaltimer_ns() - t0 > SLIP_DEVICE_WAIT_NS) return SLIP_ERR_TIMEOUT;
    backoff.pause();
  }
}

}  // namespace gpunetio
}  // namespace dev
}  // namespace slip

#endif
