// GPU benchmark (see docs/benchmarks/2026-11-30-gpu-push.md for the method).
//   slip_bench pair [--quick]   two processes, one GPU each: link ceiling, host-issued copies per
//                               block, GPU-initiated push (nvlink, proxy) one way and both ways,
//                               and the 2-rank exchange measured like NCCL all-to-all
//   slip_bench gpunetio [--quick]  two processes: push through the gpunetio backend (DOCA GPUNetIO
//                               device code, software NIC) against the nvlink backend, one way
//   slip_bench partition [--quick] [--variants] [--parts N] [--shape NAME]
//                               the partition kernel against measured device-memory bandwidth, for
//                               several partition counts, payload widths and row counts; --variants
//                               times every tile and chunk tuning instead of the default; --parts
//                               and --shape narrow the sweep to one case (for ncu)
//   slip_bench copy [--quick]   one GPU: what 1 to 32 CTAs copy with the resident serving kernel's
//                               CTA copy (slipstream/device/copy.cuh), beside the copy engine
//   slip_bench spin MS          one GPU: one CTA polling the clock for MS ms (another process's
//                               resident kernel, to see what it costs a process sharing the GPU)
// Every push run is verified afterwards: receiver-side signal totals and byte-exact data.
// Lines starting with "csv," are machine-readable: kind,backend,direction,block_bytes,bytes,ms,GBps,verified
#include <inttypes.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../tests/pair_common.cuh"
#include "push_plan.cuh"
#include "slipstream/device/copy.cuh"
#include "slipstream/device/sync.cuh"
#include "slipstream/softnic.h"
#include "slipstream/kernels.h"
#include "slipstream/partition_tuning.h"

namespace {

constexpr uint64_t kLanding = 1ull << 30;
constexpr uint64_t kChunk = 256 * 1024;  // large blocks are split into chunks spread over queues
constexpr uint32_t kThreads = 512;
// Table of every queue set here: locals [src], remotes [peer landing, peer signals, own landing, own signals].
constexpr uint32_t T_SRC = 0, T_PEER = 1, T_PEER_SIG = 2, T_SELF = 3, T_SELF_SIG = 4;

struct Bench {
  Pair p;
  bool quick = false;
  bool gpunetio_only = false;  // slip_bench gpunetio
  slip_ctx *ctx = nullptr;
  slip_region *src = nullptr, *landing = nullptr, *sig = nullptr;
  slip_remote *peer_landing = nullptr, *peer_sig = nullptr, *self_landing = nullptr, *self_sig = nullptr;
  cudaStream_t stream;
  cudaEvent_t e0, e1;
  int sms = 0;
  uint64_t seed() const { return 0x1000 + (uint64_t)p.rank; }
  uint64_t peer_seed() const { return 0x1000 + (uint64_t)(1 - p.rank); }
};

template <class T>
T exchange(const Bench &b, T mine) {
  T other;
  T_SLIP(slip_oob_send(b.p.fd, &mine, sizeof mine));
  T_SLIP(slip_oob_recv(b.p.fd, &other, sizeof other));
  return other;
}

void csv(const char *kind, const char *backend, const char *dir, uint64_t block, uint64_t bytes, double ms,
         const char *verified) {
  printf("csv,%s,%s,%s,%" PRIu64 ",%" PRIu64 ",%.4f,%.1f,%s\n", kind, backend, dir, block, bytes, ms,
         bytes / (ms * 1e6), verified);
  fflush(stdout);
}

// Verifies what landed here: byte-exact data in [0, n) and the signal totals.
bool verify_landing(Bench &b, uint64_t n, uint64_t src_base, uint64_t seed, uint64_t want_blocks,
                    uint64_t want_bytes, uint32_t nsig, uint64_t landing_base = 0) {
  unsigned long long *d_bad, bad = 0;
  T_CUDA(cudaMalloc(&d_bad, 8));
  T_CUDA(cudaMemset(d_bad, 0, 8));
  check_pattern<<<1024, 256>>>((const uint8_t *)slip_region_ptr(b.landing) + landing_base, n, src_base, seed, d_bad);
  T_LAUNCH();
  T_CUDA(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
  T_CUDA(cudaFree(d_bad));
  std::vector<uint64_t> s(nsig);
  T_CUDA(cudaMemcpy(s.data(), slip_region_ptr(b.sig), nsig * 8, cudaMemcpyDeviceToHost));
  uint64_t blocks = 0, bytes = 0;
  for (uint64_t v : s) {
    blocks += SLIP_SIGNAL_BLOCKS(v);
    bytes += SLIP_SIGNAL_BYTES(v);
  }
  const bool ok = bad == 0 && (want_blocks == 0 || (blocks == want_blocks && bytes == want_bytes));
  if (!ok)
    fprintf(stderr, "[rank %d] verify: %llu bytes differ; signals %" PRIu64 " blocks / %" PRIu64
                    " bytes, expected %" PRIu64 " / %" PRIu64 "\n",
            b.p.rank, bad, blocks, bytes, want_blocks, want_bytes);
  return ok;
}

void reset_landing(Bench &b) {
  T_CUDA(cudaMemset(slip_region_ptr(b.landing), 0x5A, kLanding));
  T_CUDA(cudaMemset(slip_region_ptr(b.sig), 0, slip_region_length(b.sig)));
  T_CUDA(cudaDeviceSynchronize());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Blocks of `block` bytes covering [base, base + bytes), chunked, dealt round-robin over queues
// [q0, q1) that write to (dst, sig). Offsets are the same in source and landing.
void plan_add(PushPlan &pl, std::vector<std::vector<slip_push_item>> &per_q, uint32_t q0, uint32_t q1, uint32_t dst,
              uint32_t sig, uint64_t base, uint64_t bytes, uint64_t block) {
  for (uint32_t q = q0; q < q1; q++) pl.cfg[q] = {T_SRC, dst, sig, 0, (uint64_t)q * 8};
  const uint64_t piece = std::min(block, kChunk);
  uint64_t k = 0;
  for (uint64_t o = 0; o < bytes; o += piece, k++)
    per_q[q0 + k % (q1 - q0)].push_back({base + o, base + o, std::min(piece, bytes - o)});
}

// Times `reps` back-to-back launches (after 2 warm-ups); returns ms per launch, checks statuses.
double time_push(Bench &b, slip_queueset *qs, PushPlan &pl, int reps) {
  const uint32_t nq = (uint32_t)pl.cfg.size();
  for (int w = 0; w < 2; w++)
    T_SLIP(slip_push(slip_queueset_device(qs), nq, pl.d_cfg, pl.d_items, pl.d_start, pl.batch, kThreads, pl.d_status,
                     b.stream));
  wait_stream(b.stream);
  T_CUDA(cudaEventRecord(b.e0, b.stream));
  for (int r = 0; r < reps; r++)
    T_SLIP(slip_push(slip_queueset_device(qs), nq, pl.d_cfg, pl.d_items, pl.d_start, pl.batch, kThreads, pl.d_status,
                     b.stream));
  T_CUDA(cudaEventRecord(b.e1, b.stream));
  wait_event(b.e1);
  float ms = 0;
  T_CUDA(cudaEventElapsedTime(&ms, b.e0, b.e1));
  plan_check_status(pl, qs, b.p.rank);
  return ms / reps;
}

void print_sweeps(const char *what, const char *items, uint64_t block, uint64_t n, uint64_t sweeps, uint64_t issue_ns,
                  uint64_t flush_ns) {
  printf("%s block %" PRIu64 ": %" PRIu64 " %s in %" PRIu64 " sweeps, issue %.1f us/sweep, flush %.1f us/sweep\n", what,
         block, n, items, sweeps, sweeps ? issue_ns / 1e3 / sweeps : 0.0, sweeps ? flush_ns / 1e3 / sweeps : 0.0);
}

// One push experiment. dir: 0 one way (rank 0 -> rank 1), 1 both ways at once.
void push_experiment(Bench &b, slip_queueset *qs, const char *backend, uint32_t nq, uint64_t block, uint64_t total,
                     int both, int reps) {
  reset_landing(b);
  const bool sending = both || b.p.rank == 0, receiving = both || b.p.rank == 1;
  PushPlan pl;
  pl.cfg.resize(nq);
  std::vector<std::vector<slip_push_item>> per_q(nq);
  plan_add(pl, per_q, 0, nq, T_PEER, T_PEER_SIG, 0, total, block);
  plan_upload(pl, per_q, std::min(block, kChunk));
  pair_barrier(&b.p);
  double ms = sending ? time_push(b, qs, pl, reps) : 0;
  pair_barrier(&b.p);
  const uint64_t launches = (uint64_t)reps + 2;
  bool ok = true;
  if (receiving)
    ok = verify_landing(b, total, 0, b.peer_seed(), launches * pl.items_per_launch, launches * total, nq);
  const double other_ms = exchange(b, ms);
  const bool other_ok = exchange(b, ok);
  // Executor-thread counters (cumulative over the queue set's life).
  if (sending && strcmp(backend, "proxy") == 0) {
    slip_proxy_stats ps;
    slip_queueset_proxy_stats(qs, &ps);
    print_sweeps("proxy-stats", "descriptors", block, ps.descriptors, ps.sweeps, ps.issue_ns, ps.flush_ns);
  }
  if (sending && strcmp(backend, "gpunetio") == 0) {
    slip_softnic_stats ns;
    slip_queueset_nic_stats(qs, &ns);
    print_sweeps("softnic-stats", "WQEs", block, ns.wqes, ns.sweeps, ns.issue_ns, ns.run_ns);
  }
  if (b.p.rank == 0) {
    const char *v = ok && other_ok ? "yes" : "NO";
    if (both) {
      csv("push", backend, "both", block, total, std::max(ms, other_ms), v);
    } else {
      csv("push", backend, "one", block, total, ms, v);
    }
  }
  plan_free(pl);
}

void host_copies(Bench &b, uint64_t block, uint64_t total, int both) {
  reset_landing(b);
  const bool sending = both || b.p.rank == 0;
  const uint64_t nblk = total / block;
  char *dst = (char *)slip_remote_ptr(b.peer_landing);
  const char *src = (const char *)slip_region_ptr(b.src);
  std::vector<double> t;
  pair_barrier(&b.p);
  if (sending) {
    for (int r = 0; r < 3; r++) {
      T_CUDA(cudaEventRecord(b.e0, b.stream));
      for (uint64_t i = 0; i < nblk; i++)
        T_CUDA(cudaMemcpyAsync(dst + i * block, src + i * block, block, cudaMemcpyDeviceToDevice, b.stream));
      T_CUDA(cudaEventRecord(b.e1, b.stream));
      T_CUDA(cudaEventSynchronize(b.e1));
      float ms;
      T_CUDA(cudaEventElapsedTime(&ms, b.e0, b.e1));
      t.push_back(ms);
    }
  }
  pair_barrier(&b.p);
  bool ok = true;
  if (both || b.p.rank == 1) ok = verify_landing(b, nblk * block, 0, b.peer_seed(), 0, 0, 0);
  const double ms = sending ? median(t) : 0, other = exchange(b, ms);
  const bool other_ok = exchange(b, ok);
  if (b.p.rank == 0)
    csv(block == total ? "ceiling" : "host_copy_per_block", "cudaMemcpyAsync", both ? "both" : "one", block,
        nblk * block, both ? std::max(ms, other) : ms, ok && other_ok ? "yes" : "NO");
}

// The 2-rank exchange at `per_gpu` bytes per GPU: half to the peer, half to itself, measured as
// NCCL all_to_all_single is by shared/baselines/nccl_a2a.py (bytes crossing the link per rank / time).
void exchange_experiment(Bench &b, slip_queueset *qs, uint32_t nq, uint64_t per_gpu, uint64_t block, int reps) {
  reset_landing(b);
  const uint64_t half = per_gpu / 2;
  const uint32_t nq_peer = nq * 3 / 4;
  PushPlan pl;
  pl.cfg.resize(nq);
  std::vector<std::vector<slip_push_item>> per_q(nq);
  plan_add(pl, per_q, 0, nq_peer, T_PEER, T_PEER_SIG, 0, half, block);
  plan_add(pl, per_q, nq_peer, nq, T_SELF, T_SELF_SIG, half, half, block);
  plan_upload(pl, per_q, std::min(block, kChunk));
  pair_barrier(&b.p);
  const double ms = time_push(b, qs, pl, reps);
  pair_barrier(&b.p);
  // Own signals: slots [0, nq_peer) come from the peer, [nq_peer, nq) from this rank itself.
  const uint64_t launches = (uint64_t)reps + 2;
  bool ok = verify_landing(b, half, 0, b.peer_seed(), 0, 0, 0) && verify_landing(b, half, half, b.seed(), 0, 0, 0, half);
  std::vector<uint64_t> s(nq);
  T_CUDA(cudaMemcpy(s.data(), slip_region_ptr(b.sig), nq * 8, cudaMemcpyDeviceToHost));
  uint64_t bytes = 0;
  for (uint64_t v : s) bytes += SLIP_SIGNAL_BYTES(v);
  ok = ok && bytes == launches * per_gpu;
  const double other = exchange(b, ms);
  const bool other_ok = exchange(b, ok);
  if (b.p.rank == 0) csv("exchange", "nvlink", "both", block, half, std::max(ms, other), ok && other_ok ? "yes" : "NO");
  plan_free(pl);
}

// The full table: ceiling, nvlink one way and both ways, host copies, proxy and gpunetio (when
// built), and the exchange against NCCL.
void pair_rows(Bench &b, slip_queueset *qs_nv, slip_queueset *qs_px, slip_queueset *qs_gn, uint32_t nq,
               uint32_t nq_proxy) {
  const uint64_t total = b.quick ? (64ull << 20) : (256ull << 20);
  const int reps = b.quick ? 3 : 10;
  // (c) link ceiling: one large copy, one way and both ways.
  host_copies(b, kLanding, kLanding, 0);
  host_copies(b, kLanding, kLanding, 1);
  const uint64_t sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
  for (uint64_t bs : sizes) {
    push_experiment(b, qs_nv, "nvlink", nq, bs, total, 0, reps);
    push_experiment(b, qs_nv, "nvlink", nq, bs, total, 1, reps);
    // (a) the CPU-controlled path: one host-issued copy per block (at most 16384 blocks).
    host_copies(b, bs, std::min<uint64_t>(total, bs * 16384), 0);
    push_experiment(b, qs_px, "proxy", nq_proxy, bs, std::min<uint64_t>(total, bs * 8192), 0, b.quick ? 1 : 3);
    if (qs_gn) push_experiment(b, qs_gn, "gpunetio", nq_proxy, bs, std::min<uint64_t>(total, bs * 8192), 0, b.quick ? 1 : 3);
  }
  // (b) against NCCL all-to-all at the same bytes per GPU.
  for (uint64_t per_gpu : {64ull << 20, 256ull << 20, 1ull << 30}) exchange_experiment(b, qs_nv, nq, per_gpu, 1 << 20, reps);
}

// slip_bench gpunetio: the gpunetio backend (DOCA GPUNetIO device code, software NIC) against
// nvlink, one way, with the same queues as the proxy rows. At most 4096 blocks per launch for
// gpunetio: each block is one WQE that the software NIC turns into one copy.
void gpunetio_rows(Bench &b, slip_queueset *qs_nv, slip_queueset *qs_gn, uint32_t nq, uint32_t nq_gn) {
  const uint64_t total = b.quick ? (64ull << 20) : (256ull << 20);
  for (uint64_t bs : {4096ull, 65536ull, 1ull << 20, 16ull << 20}) {
    push_experiment(b, qs_nv, "nvlink", nq, bs, total, 0, b.quick ? 3 : 10);
    push_experiment(b, qs_gn, "gpunetio", nq_gn, bs, std::min<uint64_t>(total, bs * 4096), 0, 3);
  }
}

int run_pair(Bench &b) {
  T_SLIP(slip_ctx_create(b.p.device, &b.ctx));
  T_CUDA(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, b.p.device));
  T_SLIP(slip_region_create(b.ctx, SLIP_MEM_DEVICE, kLanding, 1, &b.src));
  T_SLIP(slip_region_create(b.ctx, SLIP_MEM_DEVICE, kLanding, 10 + (uint32_t)b.p.rank, &b.landing));
  T_SLIP(slip_region_create(b.ctx, SLIP_MEM_DEVICE, 8192, 20 + (uint32_t)b.p.rank, &b.sig));
  fill_pattern<<<2048, 256>>>((uint8_t *)slip_region_ptr(b.src), kLanding, b.seed());
  T_LAUNCH();
  T_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  T_CUDA(cudaEventCreate(&b.e0));
  T_CUDA(cudaEventCreate(&b.e1));
  slip_region_desc mine[2], theirs[2];
  T_SLIP(slip_region_export(b.landing, &mine[0]));
  T_SLIP(slip_region_export(b.sig, &mine[1]));
  T_SLIP(slip_oob_send(b.p.fd, mine, sizeof mine));
  T_SLIP(slip_oob_recv(b.p.fd, theirs, sizeof theirs));
  T_SLIP(slip_remote_import(b.ctx, &theirs[0], sizeof theirs[0], &b.peer_landing));
  T_SLIP(slip_remote_import(b.ctx, &theirs[1], sizeof theirs[1], &b.peer_sig));
  T_SLIP(slip_remote_alias(b.landing, &b.self_landing));
  T_SLIP(slip_remote_alias(b.sig, &b.self_sig));
  const slip_region *locals[1] = {b.src};
  const slip_remote *remotes[4] = {b.peer_landing, b.peer_sig, b.self_landing, b.self_sig};
  const uint32_t nq = 2 * (uint32_t)b.sms, nq_proxy = 16;
  slip_queueset *qs_nv, *qs_px;
  T_SLIP(slip_queueset_create(b.ctx, SLIP_BACKEND_NVLINK, nq, 0, locals, 1, remotes, 4, &qs_nv));
  T_SLIP(slip_queueset_create(b.ctx, SLIP_BACKEND_PROXY, nq_proxy, 1024, locals, 1, remotes, 4, &qs_px));
  // gpunetio queues (DOCA GPUNetIO device code against the software NIC), where built.
  slip_queueset *qs_gn = nullptr;
  if (slip_gpunetio_probe() == SLIP_OK)
    T_SLIP(slip_queueset_create(b.ctx, SLIP_BACKEND_GPUNETIO, nq_proxy, 1024, locals, 1, remotes, 4, &qs_gn));
  else if (b.p.rank == 0)
    printf("gpunetio rows skipped: %s\n", slip_last_error());
  T_CUDA(cudaDeviceSynchronize());
  if (b.p.rank == 0)
    printf("pair: GPUs %d and %d of %d, %d SMs, nvlink queues %u x %u threads, proxy queues %u\n", 0,
           b.p.ngpus > 1 ? 1 : 0, b.p.ngpus, b.sms, nq, kThreads, nq_proxy);
  if (!b.gpunetio_only) pair_rows(b, qs_nv, qs_px, qs_gn, nq, nq_proxy);
  else if (qs_gn) gpunetio_rows(b, qs_nv, qs_gn, nq, nq_proxy);
  slip_queueset_destroy(qs_gn);
  slip_queueset_destroy(qs_px);
  slip_queueset_destroy(qs_nv);
  for (slip_remote *r : {b.peer_landing, b.peer_sig, b.self_landing, b.self_sig}) slip_remote_destroy(r);
  for (slip_region *r : {b.src, b.landing, b.sig}) slip_region_destroy(r);
  slip_ctx_destroy(b.ctx);
  return 0;
}

__global__ void make_cols(int64_t *k, uint8_t *pool, uint64_t pool_bytes, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    k[i] = (int64_t)slip_hash64(i + 12345);
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < pool_bytes / 8;
       i += (uint64_t)gridDim.x * blockDim.x)
    ((uint64_t *)pool)[i] = slip_hash64(i ^ 0xabcdef);
}

struct PartShape {
  const char *name;
  uint32_t ncols;
  uint32_t widths[4];
};

// Every one-GPU mode starts here: 77 (skipped, the reason printed) without a usable GPU, else 0 with
// device 0 current.
int first_gpu() {
  int n = 0;
  if (slip_cuda_probe(&n) != SLIP_OK) {
    printf("SKIP: %s\n", slip_last_error());
    return 77;
  }
  T_CUDA(cudaSetDevice(0));
  return 0;
}

// slip_bench copy: what a few CTAs copy inside one GPU with slipstream/device/copy.cuh, the resident
// serving kernel's copy. Each CTA copies a contiguous slice; rows for 1 MiB and 16 MiB, 1..32 CTAs,
// 256 and 1024 threads, 4 and 8 loads in flight per thread; beside them the copy engine
// (cudaMemcpyAsync) on the same bytes. Median of 20 timed runs (cudaEvent) after 3 untimed.
template <int UNROLL>
__global__ void cta_slices_copy(char *dst, const char *src, uint64_t slice) {
  slip::copy::cta_copy<UNROLL>(dst + blockIdx.x * slice, src + blockIdx.x * slice, slice);
}

int run_copy(bool quick) {
  if (const int rc = first_gpu()) return rc;
  cudaEvent_t e0, e1;
  T_CUDA(cudaEventCreate(&e0));
  T_CUDA(cudaEventCreate(&e1));
  const uint64_t most = 16ull << 20;
  char *src, *dst;
  T_CUDA(cudaMalloc(&src, most));
  T_CUDA(cudaMalloc(&dst, most));
  T_CUDA(cudaMemset(src, 0x5a, most));
  const int reps = quick ? 5 : 20;
  auto median_us = [&](auto launch) {
    std::vector<float> ms;
    for (int r = 0; r < reps + 3; r++) {
      T_CUDA(cudaEventRecord(e0));
      launch();
      T_CUDA(cudaEventRecord(e1));
      T_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      T_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000.0;
  };
  printf("copy: one GPU, CTA copies of slipstream/device/copy.cuh; csv,copy,how,unroll,threads,ctas,bytes,us,GBps\n");
  const uint64_t sizes[] = {1ull << 20, most};
  for (uint64_t bytes : sizes) {
    const double ce = median_us([&] { T_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    printf("csv,copy,engine,0,0,0,%" PRIu64 ",%.2f,%.1f\n", bytes, ce, bytes / ce / 1e3);
    for (int unroll : {4, 8}) {
      for (uint32_t threads : {256u, 1024u}) {
        for (uint32_t ctas : {1u, 2u, 4u, 8u, 16u, 32u}) {
          const uint64_t slice = bytes / ctas;
          const double us = median_us([&] {
            if (unroll == 4) cta_slices_copy<4><<<ctas, threads>>>(dst, src, slice);
            else cta_slices_copy<8><<<ctas, threads>>>(dst, src, slice);
            T_LAUNCH();
          });
          printf("csv,copy,ctas,%d,%u,%u,%" PRIu64 ",%.2f,%.1f\n", unroll, threads, ctas, bytes, us, bytes / us / 1e3);
        }
      }
    }
  }
  // The bytes of the last run are the source's.
  std::vector<char> got(most);
  T_CUDA(cudaMemcpy(got.data(), dst, most, cudaMemcpyDeviceToHost));
  const bool same = std::all_of(got.begin(), got.end(), [](char c) { return c == 0x5a; });
  printf("copy: the last copy's bytes %s\n", same ? "equal the source's" : "DIFFER from the source's");
  T_CUDA(cudaFree(src));
  T_CUDA(cudaFree(dst));
  return same ? 0 : 1;
}

// slip_bench spin MS: one CTA that polls the GPU's clock for MS milliseconds, then leaves: another
// process's resident kernel, for measuring what a kernel of one process costs another's on a GPU
// they share (the GPU time-slices between processes' contexts unless MPS is running).
__global__ void spin_kernel(uint64_t ns) {
  const uint64_t t0 = slip::sync::globaltimer_ns();
  while (slip::sync::globaltimer_ns() - t0 < ns) __nanosleep(1000);
}

int run_spin(uint64_t ms) {
  if (const int rc = first_gpu()) return rc;
  printf("spin: one CTA polling the clock for %" PRIu64 " ms\n", ms);
  fflush(stdout);
  spin_kernel<<<1, 32>>>(ms * 1000000ull);
  T_LAUNCH();
  T_CUDA(cudaDeviceSynchronize());
  printf("spin: done\n");
  return 0;
}

// only_parts / only_shape (0 / null: all) narrow the sweep, for profiling one case.
int run_partition(bool quick, bool variants, uint32_t only_parts, const char *only_shape) {
  if (const int rc = first_gpu()) return rc;
  cudaEvent_t e0, e1;
  T_CUDA(cudaEventCreate(&e0));
  T_CUDA(cudaEventCreate(&e1));
  // Device-memory bandwidth: a large device-to-device copy, bytes read plus bytes written.
  const uint64_t cbytes = 2ull << 30;
  void *a, *c;
  T_CUDA(cudaMalloc(&a, cbytes));
  T_CUDA(cudaMalloc(&c, cbytes));
  T_CUDA(cudaMemset(a, 1, cbytes));
  std::vector<double> t;
  for (int r = 0; r < 7; r++) {
    T_CUDA(cudaEventRecord(e0));
    T_CUDA(cudaMemcpyAsync(c, a, cbytes, cudaMemcpyDeviceToDevice));
    T_CUDA(cudaEventRecord(e1));
    T_CUDA(cudaEventSynchronize(e1));
    float ms;
    T_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) t.push_back(ms);
  }
  const double copy_ms = median(t), copy_gbps = 2.0 * cbytes / (copy_ms * 1e6);
  printf("csv,devmem_copy,cudaMemcpyAsync,d2d,0,%" PRIu64 ",%.4f,%.1f,yes\n", 2 * cbytes, copy_ms, copy_gbps);
  T_CUDA(cudaFree(a));
  T_CUDA(cudaFree(c));
  // Payload shapes (widths in bytes); every column has its own buffer, filled with random bytes.
  const PartShape shapes[] = {{"w0", 0, {0, 0, 0, 0}},
                              {"w12", 2, {8, 4, 0, 0}},
                              {"w23", 4, {16, 4, 2, 1}},
                              {"w32", 4, {8, 8, 8, 8}}};
  const uint64_t max_rows = quick ? (1ull << 24) : (1ull << 27);
  int64_t *keys;
  uint8_t *pool;
  const uint64_t pool_bytes = max_rows * 32;  // room for the widest shape; columns are 256-byte aligned slices
  T_CUDA(cudaMalloc(&keys, max_rows * 8));
  T_CUDA(cudaMalloc(&pool, pool_bytes + 4 * 256));
  make_cols<<<2048, 256>>>(keys, pool, pool_bytes, max_rows);
  T_LAUNCH();
  struct Tuning {
    const char *name;
    slip_partition_tuning t;
  };
  std::vector<Tuning> tunings = {{"default", {0, 0, 0}}};
  if (variants)
    tunings = {{"i8w1", {8, 1, 0}}, {"i8w2", {8, 2, 0}}, {"i16b2", {16, 1, 2}}, {"i16b3", {16, 1, 3}}};
  std::vector<uint64_t> row_counts = {max_rows};
  if (!quick && !variants) row_counts = {1ull << 24, max_rows};
  std::vector<std::string> table;
  for (uint64_t rows : row_counts) {
    for (const PartShape &sh : shapes) {
      if (variants && sh.ncols != 2 && sh.ncols != 4) continue;  // variants: w12, w23, w32
      if (only_shape && strcmp(only_shape, sh.name) != 0) continue;
      slip_batch b;
      memset(&b, 0, sizeof b);
      b.keys = keys;
      b.rows = rows;
      b.ncols = sh.ncols;
      uint64_t w = 0, col = 0;
      for (uint32_t i = 0; i < sh.ncols; i++) {
        b.widths[i] = sh.widths[i];
        b.cols[i] = pool + col;
        col += (rows * sh.widths[i] + 255) / 256 * 256;
        w += sh.widths[i];
      }
      for (uint32_t parts : {2u, 8u, 64u, 256u, 1024u, 4096u}) {
        if (only_parts && parts != only_parts) continue;
        const uint64_t cap = slip_partition_out_bound(&b, parts), sl = slip_partition_scratch_bytes(rows, parts);
        void *out, *scratch;
        uint64_t *off, *cnt;
        T_CUDA(cudaMalloc(&out, cap));
        T_CUDA(cudaMalloc(&scratch, sl));
        T_CUDA(cudaMalloc(&off, (parts + 1) * 8));
        T_CUDA(cudaMalloc(&cnt, parts * 8));
        for (const Tuning &tu : tunings) {
          t.clear();
          for (int r = 0; r < 8; r++) {
            T_CUDA(cudaEventRecord(e0));
            T_SLIP(slip_partition_tuned(&b, parts, out, cap, off, cnt, scratch, sl, &tu.t, 0));
            T_CUDA(cudaEventRecord(e1));
            T_CUDA(cudaEventSynchronize(e1));
            float ms;
            T_CUDA(cudaEventElapsedTime(&ms, e0, e1));
            if (r > 0) t.push_back(ms);
          }
          // Every row landed: the counts add up to the rows and the blocks fill the output exactly.
          std::vector<uint64_t> hc(parts), ho(parts + 1);
          T_CUDA(cudaMemcpy(hc.data(), cnt, parts * 8, cudaMemcpyDeviceToHost));
          T_CUDA(cudaMemcpy(ho.data(), off, (parts + 1) * 8, cudaMemcpyDeviceToHost));
          uint64_t sum = 0, blocks = 0;
          for (uint32_t p = 0; p < parts; p++) {
            sum += hc[p];
            blocks += slip_partition_block_bytes(&b, hc[p]);
          }
          const bool ok = sum == rows && ho[parts] == blocks;
          // Counted bytes (the first definition in docs/benchmarks/2026-11-30-gpu-partition.md): the histogram reads the keys, the scatter reads
          // keys and payload and writes everything once. The floor (each input read once, each output
          // written once) leaves out the histogram's key read.
          const uint64_t moved = rows * (8 + 2 * (8 + w)), floor_bytes = rows * 2 * (8 + w);
          const double ms = median(t), gbps = moved / (ms * 1e6), pct = 100.0 * gbps / copy_gbps;
          const double pct_floor = 100.0 * floor_bytes / (ms * 1e6) / copy_gbps;
          printf("csv,partition_%s,%s,%u_parts,rows_%" PRIu64 ",%" PRIu64 ",%.4f,%.1f,%.1f%%_of_copy,%.1f%%_floor,%s\n",
                 tu.name, sh.name, parts, rows, moved, ms, gbps, pct, pct_floor, ok ? "yes" : "NO");
          char line[160];
          snprintf(line, sizeof line, "%-8s %-4s %5u %10" PRIu64 " %8.3f ms %7.1f GB/s %5.1f%% (floor %5.1f%%) %s",
                   tu.name, sh.name, parts, rows, ms, gbps, pct, pct_floor, ok ? "" : "NOT VERIFIED");
          table.push_back(line);
          if (!ok) {
            fprintf(stderr, "partition %s %s parts %u: counts add up to %" PRIu64 " of %" PRIu64 " rows\n", tu.name,
                    sh.name, parts, sum, rows);
            return 1;
          }
        }
        for (void *q : {out, scratch, (void *)off, (void *)cnt}) T_CUDA(cudaFree(q));
      }
    }
  }
  printf("device copy %.1f GB/s (bytes read + written)\n", copy_gbps);
  printf("variant  cols parts       rows     time      moved   of copy\n");
  for (const std::string &l : table) printf("%s\n", l.c_str());
  for (void *q : {(void *)keys, (void *)pool}) T_CUDA(cudaFree(q));
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s pair [--quick] | gpunetio [--quick] | copy [--quick] | spin MS | partition [--quick] [--variants]"
            " [--parts N] [--shape w0|w12|w23|w32]\n",
            argv[0]);
    return 2;
  }
  bool quick = false, variants = false;
  uint32_t only_parts = 0;
  const char *only_shape = nullptr;
  for (int i = 2; i < argc; i++) {
    quick |= !strcmp(argv[i], "--quick");
    variants |= !strcmp(argv[i], "--variants");
    if (!strcmp(argv[i], "--parts") && i + 1 < argc) only_parts = (uint32_t)atoi(argv[++i]);
    if (!strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[++i];
  }
  if (!strcmp(argv[1], "partition")) return run_partition(quick, variants, only_parts, only_shape);
  if (!strcmp(argv[1], "copy")) return run_copy(quick);
  if (!strcmp(argv[1], "spin") && argc > 2) return run_spin(strtoull(argv[2], nullptr, 10));
  Bench b;
  b.quick = quick;
  b.gpunetio_only = !strcmp(argv[1], "gpunetio");
  const int rc = pair_start(&b.p, 300);
  if (rc != 0) return rc;
  run_pair(b);
  return pair_finish(&b.p);
}
