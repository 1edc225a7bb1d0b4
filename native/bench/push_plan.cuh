// A push kernel's work list as the benchmarks build it: per-queue configuration and items, flattened
// and uploaded once, launched many times; shared by slip_bench (bench.cu) and slip_a2a (alltoall.cu).
#ifndef SLIP_BENCH_PUSH_PLAN_CUH
#define SLIP_BENCH_PUSH_PLAN_CUH

#include <algorithm>
#include <vector>

#include "../tests/pair_common.cuh"
#include "slipstream/kernels.h"

struct PushPlan {
  std::vector<slip_push_queue_cfg> cfg;
  std::vector<slip_push_item> items;
  std::vector<uint32_t> start;
  slip_push_queue_cfg *d_cfg = nullptr;
  slip_push_item *d_items = nullptr;
  uint32_t *d_start = nullptr;
  int *d_status = nullptr;
  uint32_t batch = 1;
  uint64_t items_per_launch = 0;
};

// Flattens queue q's items (per_q[q]) into the plan, sets the batch for pieces of `piece` bytes and
// copies configuration, items and starts to the device.
static inline void plan_upload(PushPlan &pl, std::vector<std::vector<slip_push_item>> &per_q, uint64_t piece) {
  for (auto &v : per_q) {
    pl.start.push_back((uint32_t)pl.items.size());
    pl.items.insert(pl.items.end(), v.begin(), v.end());
  }
  pl.start.push_back((uint32_t)pl.items.size());
  pl.items_per_launch = pl.items.size();
  pl.batch = (uint32_t)std::max<uint64_t>(1, std::min<uint64_t>(32, (512 * 1024) / piece));
  T_CUDA(cudaMalloc(&pl.d_cfg, pl.cfg.size() * sizeof pl.cfg[0]));
  T_CUDA(cudaMalloc(&pl.d_items, pl.items.size() * sizeof pl.items[0] + 1));
  T_CUDA(cudaMalloc(&pl.d_start, pl.start.size() * 4));
  T_CUDA(cudaMalloc(&pl.d_status, pl.cfg.size() * sizeof(int)));
  T_CUDA(cudaMemcpy(pl.d_cfg, pl.cfg.data(), pl.cfg.size() * sizeof pl.cfg[0], cudaMemcpyHostToDevice));
  T_CUDA(cudaMemcpy(pl.d_items, pl.items.data(), pl.items.size() * sizeof pl.items[0], cudaMemcpyHostToDevice));
  T_CUDA(cudaMemcpy(pl.d_start, pl.start.data(), pl.start.size() * 4, cudaMemcpyHostToDevice));
}

static inline void plan_free(PushPlan &pl) {
  for (void *q : {(void *)pl.d_cfg, (void *)pl.d_items, (void *)pl.d_start, (void *)pl.d_status}) T_CUDA(cudaFree(q));
}

// After the launches: every queue's status must be SLIP_OK; otherwise names the queue, prints the
// queue set's error record and ends the process.
static inline void plan_check_status(const PushPlan &pl, slip_queueset *qs, int rank) {
  const uint32_t nq = (uint32_t)pl.cfg.size();
  std::vector<int> st(nq);
  T_CUDA(cudaMemcpy(st.data(), pl.d_status, nq * sizeof(int), cudaMemcpyDeviceToHost));
  for (uint32_t q = 0; q < nq; q++)
    if (st[q] != SLIP_OK) {
      fprintf(stderr, "[rank %d] push queue %u: status %d\n", rank, q, st[q]);
      T_SLIP(slip_queueset_check(qs, 1));
      exit(3);
    }
}

#endif
