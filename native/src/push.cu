// The push kernel (DOCA GPUNetIO's pattern on the Slipstream write API): CUDA block q owns queue
// q; its threads post the writes of one batch in parallel (a warp per small item, the whole block
// per large one); after a barrier one thread adds the batch's signal, commits, and waits for local
// completion before the next batch reuses anything.
#include "check.h"
#include "slipstream/device/write_api.cuh"
#include "slipstream/kernels.h"

namespace {

using slip::dev::Addr;

constexpr uint64_t kBlockScopeBytes = 64 * 1024;  // items at least this large use the whole block

__device__ __forceinline__ void push_body(slip_dev_queue *queues, const slip_push_queue_cfg *__restrict__ cfgs,
                                          const slip_push_item *__restrict__ items,
                                          const uint32_t *__restrict__ item_start, uint32_t batch, int *status) {
  __shared__ unsigned long long ok_bytes;
  __shared__ unsigned ok_items;
  __shared__ int first_error;
  slip_dev_queue &q = queues[blockIdx.x];
  const slip_push_queue_cfg cfg = cfgs[blockIdx.x];
  const uint32_t begin = item_start[blockIdx.x], end = item_start[blockIdx.x + 1];
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  slip::dev::Block block;
  slip::dev::Warp w;
  if (threadIdx.x == 0) first_error = SLIP_OK;
  for (uint32_t b0 = begin; b0 < end; b0 += batch) {
    const uint32_t b1 = min(end, b0 + batch);
    if (threadIdx.x == 0) {
      ok_bytes = 0;
      ok_items = 0;
    }
    __syncthreads();
    // Large items: the whole block copies each one (16-byte stores across all threads).
    for (uint32_t i = b0; i < b1; i++) {
      const slip_push_item it = items[i];
      if (it.length < kBlockScopeBytes) continue;
      const int st = slip::dev::write(block, q, Addr{cfg.dst_region, it.dst_offset}, Addr{cfg.src_region, it.src_offset},
                                      it.length);
      if (threadIdx.x == 0) {
        if (st == SLIP_OK) {
          atomicAdd(&ok_bytes, (unsigned long long)it.length);
          atomicAdd(&ok_items, 1u);
        } else {
          atomicCAS(&first_error, SLIP_OK, st);
        }
      }
    }
    __syncthreads();  // thread 0's counters are settled before the warps add theirs
    // Small items: one warp each, all warps in parallel.
    uint32_t k = 0;
    for (uint32_t i = b0; i < b1; i++) {
      const slip_push_item it = items[i];
      if (it.length >= kBlockScopeBytes) continue;
      if (k++ % nwarps != warp) continue;
      const int st = slip::dev::write(w, q, Addr{cfg.dst_region, it.dst_offset}, Addr{cfg.src_region, it.src_offset},
                                      it.length);
      if (w.rank() == 0) {
        if (st == SLIP_OK) {
          atomicAdd(&ok_bytes, (unsigned long long)it.length);
          atomicAdd(&ok_items, 1u);
        } else {
          atomicCAS(&first_error, SLIP_OK, st);
        }
      }
    }
    __syncthreads();
    const uint64_t n_items = ok_items, n_bytes = ok_bytes;
    int st = SLIP_OK;
    if (n_items > 0)
      st = slip::dev::signal_add(block, q, Addr{cfg.sig_region, cfg.sig_offset}, SLIP_SIGNAL_PACK(n_items, n_bytes));
    slip::dev::commit(block, q);
    const int wst = slip::dev::wait_all(block, q);
    // An atomic, not a test-and-store: the compiler may hoist a plain load of first_error into
    // every thread, which racecheck then (rightly) reports against thread 0's store.
    if (threadIdx.x == 0 && (st != SLIP_OK || wst != SLIP_OK)) atomicCAS(&first_error, SLIP_OK, st != SLIP_OK ? st : wst);
    __syncthreads();
    if (wst != SLIP_OK) break;  // the executor failed or timed out: stop this queue
  }
  __syncthreads();
  if (threadIdx.x == 0) status[blockIdx.x] = first_error;
}

__global__ void push_kernel(slip_dev_queue *queues, const slip_push_queue_cfg *__restrict__ cfgs,
                            const slip_push_item *__restrict__ items, const uint32_t *__restrict__ item_start,
                            uint32_t batch, int *status) {
  push_body(queues, cfgs, items, item_start, batch, status);
}

__global__ void wait_signals_kernel(const uint64_t *sigs, const uint64_t *expected, uint32_t n, uint64_t timeout_ns,
                                    int *result) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) result[i] = slip::dev::wait_signal_ge(sigs + i, expected[i], timeout_ns);
}

}  // namespace

// The push with its arguments in one struct in device memory, copied there with the queue
// configurations and items it points to: a launch passes one pointer (what a launcher from Java
// pays for per parameter is the marshalling, not the driver). status may point into mapped pinned
// host memory, so the host sees each queue's outcome without a copy after the kernel. Launched from
// Java through the fatbin only, so it has C linkage (no host launcher references it).
extern "C" __global__ void slip_push_packed_kernel(const slip_push_launch *__restrict__ a) {
  push_body(a->queues, a->cfgs, a->items, a->item_start, a->batch, a->status);
}

extern "C" slip_status slip_push(slip_dev_queue *d_queues, uint32_t nqueues, const slip_push_queue_cfg *d_cfg,
                                 const slip_push_item *d_items, const uint32_t *d_item_start, uint32_t batch,
                                 uint32_t threads, int *d_status, cudaStream_t stream) {
  slip_status st = SLIP_OK;
  if (!d_queues || !d_cfg || !d_item_start || !d_status) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_push: null argument");
  if (nqueues == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_push: no queues");
  if (batch == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_push: batch 0");
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_push: %u threads, expected a multiple of 32 in 32..1024", threads);
  push_kernel<<<nqueues, threads, 0, stream>>>(d_queues, d_cfg, d_items, d_item_start, batch, d_status);
  SLIP_LAUNCH_CHECK();
done:
  return st;
}

extern "C" slip_status slip_wait_signals(const uint64_t *sigs, const uint64_t *d_expected, uint32_t n,
                                         uint64_t timeout_ns, int *d_result, cudaStream_t stream) {
  slip_status st = SLIP_OK;
  if (n == 0) goto done;
  if (!sigs || !d_expected || !d_result) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_wait_signals: null argument");
  wait_signals_kernel<<<(n + 127) / 128, 128, 0, stream>>>(sigs, d_expected, n, timeout_ns, d_result);
  SLIP_LAUNCH_CHECK();
done:
  return st;
}
