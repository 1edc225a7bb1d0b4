/*
 * gpunetio backend of the device write API: WQEs built with the open DOCA GPUNetIO verbs device
 * functions (doca_gpu_dev_verbs_wqe_prepare_write, _prepare_atomic, _submit, _poll_one_cq_at) on the
 * queue pair the host built for the queue (slip_dev_queue.nic_qp). Compiled only when the GPUNetIO
 * device headers were found at configure time (SLIP_HAVE_GPUNETIO); include write_api.cuh, not this
 * file.
 *
 * DOCA GPUNetIO's batch pattern: a post reserves the next send-queue slot and builds its WQE there
 * without ringing the doorbell, and without asking for a completion (the NIC writes a CQE for it
 * only if it fails). Several warps of the owning block post to one queue pair (the push kernel's
 * small items); a per-queue lock (slip_dev_queue.nic_lock) makes them take turns on the queue
 * pair's indices, which is a few stores each. commit() then asks for a CQE on the batch's last WQE
 * (the NIC completes a queue pair's WQEs in order, so that one CQE completes the batch), issues a
 * system-scope fence (the WQEs, in pinned host memory, and the data they name reach the NIC before
 * it sees the producer index) and submits once: one doorbell per batch. wait() polls that CQE.
 *
 * Counters: sq_rsvd_index (slots reserved) and sq_ready_index (slots built) advance per post,
 * sq_wqe_pi (slots submitted) per commit; cq_sq.cqe_rsvd counts the CQEs asked for, which is the
 * ticket; slip_dev_queue.head counts the WQEs known complete (from the last CQE's WQE counter), and
 * a post waits for earlier batches rather than reuse a slot whose WQE may not have completed.
 *
 * Sharing mode EXCLUSIVE (one owner at a time, under the lock): in the CPU-proxy mode the shared
 * modes publish the producer index with a system-scope atomic max on the doorbell word in pinned
 * host memory, which needs native host atomics that PCIe hosts lack (compute-sanitizer memcheck
 * rejects it on the H200 machine); EXCLUSIVE publishes it with a plain system-scope store.
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

constexpr auto kNoCqe = DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_ERROR_UPDATE;  // a CQE only on error
constexpr uint8_t kCqUpdate = DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE;
constexpr uint32_t kCtrlFlagsByte = 11;  // fm_ce_se in the control segment
constexpr int kBusy = -1;                // poll_once: the CQE has not arrived

// Caller holds the lock. One look at the CQE with index tk - 1: SLIP_OK (then the WQEs up to the
// one it names are known complete: q.head), kBusy, or SLIP_ERR_PEER for an error CQE (the software
// NIC also records why in the set's error record).
__device__ inline int poll_once(slip_dev_queue &q, uint64_t tk) {
  doca_gpu_dev_verbs_qp *p = qp(q);
  if (tk == 0 || tk <= *(volatile uint64_t *)&p->cq_sq.cqe_ci) return SLIP_OK;
  const int r = doca_gpu_dev_verbs_poll_one_cq_at<kShare>(&p->cq_sq, tk - 1);
  if (r == EBUSY) return kBusy;
  if (r != 0) return SLIP_ERR_PEER;  // -EIO: error completion
  // The CQE's WQE counter holds the low 16 bits of the index of the WQE it completes, one of the
  // last `depth` submitted.
  const uint8_t *cqe = p->cq_sq.cqe_daddr + ((tk - 1) & (p->cq_sq.cqe_num - 1)) * DOCA_GPUNETIO_VERBS_CQE_SIZE;
  const uint16_t counter = (uint16_t)(cqe[60] << 8 | cqe[61]);
  const uint64_t pi = p->sq_wqe_pi;
  const uint64_t done = pi - (uint16_t)((uint16_t)(pi - 1) - counter);
  if (done > q.head) q.head = done;
  return SLIP_OK;
}

// Caller holds the lock: polls until the CQE with index tk - 1 arrived; SLIP_OK, SLIP_ERR_PEER or
// SLIP_ERR_TIMEOUT.
__device__ inline int wait_locked(slip_dev_queue &q, uint64_t tk) {
  const uint64_t t0 = slip::sync::globaltimer_ns();
  slip::sync::Backoff backoff;
  for (;;) {
    const int r = poll_once(q, tk);
    if (r != kBusy) return r;
    if (slip::sync::globaltimer_ns() - t0 > SLIP_DEVICE_WAIT_NS) return SLIP_ERR_TIMEOUT;
    backoff.pause();
  }
}

// Caller holds the lock. Reserves n consecutive slots; a slot is free once the WQE one lap earlier
// completed, so a full ring first waits for the batches already submitted. SLIP_ERR_QUEUE_FULL
// (recorded) when more than `depth` WQEs would be outstanding without a commit.
__device__ inline int reserve(slip_dev_queue &q, uint32_t n, uint64_t *first) {
  doca_gpu_dev_verbs_qp *p = qp(q);
  const uint64_t i = p->sq_rsvd_index;
  if (i + n - q.head > p->sq_wqe_num && p->sq_wqe_pi > q.head) {
    const int st = wait_locked(q, p->cq_sq.cqe_rsvd);
    if (st != SLIP_OK) return st;
  }
  if (i + n - q.head > p->sq_wqe_num) {
    slip::dev::detail::report(q, SLIP_ERR_QUEUE_FULL, 0, i, n, p->sq_wqe_num);
    return SLIP_ERR_QUEUE_FULL;  // more than `depth` posts without a commit
  }
  p->sq_rsvd_index = i + n;
  *first = i;
  return SLIP_OK;
}

// Leader only, under the lock. An RDMA write from (l) to (r), addresses and keys as the wire has
// them, of at most 1 GiB per WQE. No check of its own: the caller checked the ranges (the
// responder still checks the key and range against its registrations).
__device__ inline int post_write_at(slip_dev_queue &q, doca_gpu_dev_verbs_addr r, doca_gpu_dev_verbs_addr l,
                                    uint64_t len) {
  doca_gpu_dev_verbs_qp *p = qp(q);
  const uint32_t chunks = len == 0 ? 1 : (uint32_t)((len + DOCA_GPUNETIO_VERBS_MAX_TRANSFER_SIZE - 1) >>
                                                    DOCA_GPUNETIO_VERBS_MAX_TRANSFER_SIZE_SHIFT);
  uint64_t i;
  const int st = reserve(q, chunks, &i);
  if (st != SLIP_OK) return st;
  for (uint32_t c = 0; c < chunks; c++) {
    const uint64_t off = (uint64_t)c * DOCA_GPUNETIO_VERBS_MAX_TRANSFER_SIZE;
    const uint64_t n = len - off < DOCA_GPUNETIO_VERBS_MAX_TRANSFER_SIZE ? len - off : DOCA_GPUNETIO_VERBS_MAX_TRANSFER_SIZE;
    doca_gpu_dev_verbs_wqe *w = doca_gpu_dev_verbs_get_wqe_ptr(p, (uint16_t)(i + c));
    if (n == 0)
      doca_gpu_dev_verbs_wqe_prepare_nop(p, w, (uint16_t)(i + c), kNoCqe);
    else
      doca_gpu_dev_verbs_wqe_prepare_write(p, w, (uint16_t)(i + c), DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE, kNoCqe, 0,
                                           r.addr + off, r.key, l.addr + off, l.key, (uint32_t)n);
  }
  p->sq_ready_index = i + chunks;
  return SLIP_OK;
}

// Leader only, under the lock: post_write_at between table entries.
__device__ inline int post_write(slip_dev_queue &q, Addr dst, Addr src, uint64_t len) {
  return post_write_at(q, addr(q, dst), addr(q, src), len);
}

// Leader only, under the lock. A fetch-add of `add` on the 8-byte word at (r), addressed as the
// wire has it; the old value goes to this queue's slot of the set's sink.
__device__ inline int post_add_at(slip_dev_queue &q, doca_gpu_dev_verbs_addr r, uint64_t add) {
  doca_gpu_dev_verbs_qp *p = qp(q);
  uint64_t i;
  const int st = reserve(q, 1, &i);
  if (st != SLIP_OK) return st;
  const doca_gpu_dev_verbs_addr l = sink(q);
  doca_gpu_dev_verbs_wqe_prepare_atomic(p, doca_gpu_dev_verbs_get_wqe_ptr(p, (uint16_t)i), (uint16_t)i,
                                        DOCA_GPUNETIO_IB_MLX5_OPCODE_ATOMIC_FA, kNoCqe, r.addr, r.key, l.addr, l.key,
                                        sizeof(uint64_t), add, 0);
  p->sq_ready_index = i + 1;
  return SLIP_OK;
}

// Leader only, under the lock. A fetch-add of `add` on the 8-byte signal word (a table entry).
__device__ inline int post_signal(slip_dev_queue &q, Addr sig, uint64_t add) { return post_add_at(q, addr(q, sig), add); }

__device__ inline int write(slip_dev_queue &q, Addr dst, Addr src, uint64_t len) {
  Lock lock(q);
  return post_write(q, dst, src, len);
}

// The write and the fetch-add on the same queue pair: the responder executes them in order.
__device__ inline int write_signal(slip_dev_queue &q, Addr dst, Addr src, uint64_t len, Addr sig, uint64_t add) {
  Lock lock(q);
  const int st = post_write(q, dst, src, len);
  return st != SLIP_OK ? st : post_signal(q, sig, add);
}

__device__ inline int signal_add(slip_dev_queue &q, Addr sig, uint64_t add) {
  Lock lock(q);
  return post_signal(q, sig, add);
}

// Caller holds the lock: asks for a CQE on the last WQE built since the last commit and submits
// everything built (one doorbell). Returns the ticket that completes the batch (the CQEs asked
// for so far).
__device__ inline uint64_t commit_locked(slip_dev_queue &q) {
  doca_gpu_dev_verbs_qp *p = qp(q);
  const uint64_t ready = p->sq_ready_index;
  if (ready == p->sq_wqe_pi) return p->cq_sq.cqe_rsvd;
  uint8_t *last = (uint8_t *)doca_gpu_dev_verbs_get_wqe_ptr(p, (uint16_t)(ready - 1));
  last[kCtrlFlagsByte] |= kCqUpdate;
  p->cq_sq.cqe_rsvd += 1;
  p->sq_wqe_pi = ready;
  // The WQEs (host memory) and everything this kernel wrote before are visible at system scope
  // before the NIC can see the new producer index.
  slip::sync::fence_sys();
  doca_gpu_dev_verbs_submit<kShare, DOCA_GPUNETIO_VERBS_SYNC_SCOPE_SYS>(p, ready);
  return p->cq_sq.cqe_rsvd;
}

// Leader only, after the group synchronised.
__device__ inline void commit(slip_dev_queue &q) {
  Lock lock(q);
  (void)commit_locked(q);
}

// CQEs asked for so far: waiting for ticket(q) waits for every batch committed before. Read after
// the group synchronised on a commit (only commit, by the leader, changes it).
__device__ inline uint64_t ticket(slip_dev_queue &q) { return *(volatile uint64_t *)&qp(q)->cq_sq.cqe_rsvd; }

// For a caller that posted one WQE with DOCA's own one-shot functions (which ask for a CQE on
// every WQE and submit it): counts that CQE and returns the ticket to wait for.
__device__ inline uint64_t expect_cqe(slip_dev_queue &q) {
  Lock lock(q);
  doca_gpu_dev_verbs_qp *p = qp(q);
  p->sq_wqe_pi = p->sq_ready_index;
  return ++p->cq_sq.cqe_rsvd;
}

// Leader only: waits for the CQE with index tk - 1, taking the lock for each look (other warps of
// the block may post meanwhile).
__device__ inline int wait(slip_dev_queue &q, uint64_t tk) {
  const uint64_t t0 = slip::sync::globaltimer_ns();
  slip::sync::Backoff backoff;
  for (;;) {
    int r;
    {
      Lock lock(q);
      r = poll_once(q, tk);
    }
    if (r != kBusy) return r;
    if (slip::sync::globaltimer_ns() - t0 > SLIP_DEVICE_WAIT_NS) return SLIP_ERR_TIMEOUT;
    backoff.pause();
  }
}

}  // namespace gpunetio
}  // namespace dev
}  // namespace slip

#endif
