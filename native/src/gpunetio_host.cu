// Host side of the gpunetio backend, built when the GPUNetIO device headers are found (gpunetio.h).
//
// Each queue gets a doca_gpu_dev_verbs_qp filled by hand in CPU-proxy mode, exactly as the
// device functions read it: send queue, completion queue and doorbell words in pinned host memory
// mapped into the GPU, the struct itself in device memory (the device code updates its indices).
// The software NIC threads (softnic.cpp) serve the queue pairs; each runs a sweep's copies and
// fetch-adds as one kernel on its own CUDA stream. The struct layouts come from the headers found
// at build time; the mlx5 wire formats the NIC decodes are checked against the same headers below.
#include <cuda.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "common/doca_gpunetio_verbs_def.h"
#include "common/doca_gpunetio_verbs_dev.h"

#include "check.h"
#include "cuda_exec.h"
#include "gpunetio.h"
#include "nic_qp.h"
#include "slipstream/device/sync.cuh"
#include "slipstream/device/write_api.cuh"

// ---- the NIC's wire formats against the GPUNetIO headers found at build time ----
static_assert(sizeof(struct doca_gpu_dev_verbs_wqe) == SLIP_MLX5_WQE_BYTES, "WQE size");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe_ctrl_seg, opmod_idx_opcode) == SLIP_WQE_CTRL_OPMOD_IDX_OPCODE, "ctrl");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe_ctrl_seg, qpn_ds) == SLIP_WQE_CTRL_QPN_DS, "ctrl qpn_ds");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe_ctrl_seg, fm_ce_se) == SLIP_WQE_CTRL_FM_CE_SE, "ctrl fm_ce_se");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe_ctrl_seg, imm) == SLIP_WQE_CTRL_IMM, "ctrl imm");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe, rw_rseg) == SLIP_WQE_RADDR, "raddr segment");
static_assert(SLIP_WQE_RADDR + offsetof(struct doca_gpunetio_ib_mlx5_wqe_raddr_seg, rkey) == SLIP_WQE_RKEY, "rkey");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe, rw_dseg0) == SLIP_WQE_DSEG0, "data segment 0");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe, rw_dseg1) == SLIP_WQE_DSEG1, "data segment 1");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_wqe_data_seg, byte_count) == SLIP_DSEG_BYTE_COUNT, "byte_count");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_wqe_data_seg, lkey) == SLIP_DSEG_LKEY, "lkey");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_wqe_data_seg, addr) == SLIP_DSEG_ADDR, "addr");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe, at_seg) == SLIP_WQE_ATOMIC_SWAP_ADD, "atomic segment");
static_assert(SLIP_WQE_ATOMIC_SWAP_ADD + offsetof(struct doca_gpunetio_ib_mlx5_wqe_atomic_seg, compare) ==
                  SLIP_WQE_ATOMIC_COMPARE, "atomic compare");
static_assert(offsetof(struct doca_gpu_dev_verbs_wqe, at_dseg) == SLIP_WQE_ATOMIC_DSEG, "atomic data segment");
static_assert(sizeof(struct doca_gpunetio_ib_mlx5_cqe64) == SLIP_MLX5_CQE_BYTES, "CQE size");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_cqe64, byte_cnt) == SLIP_CQE_BYTE_CNT, "CQE byte_cnt");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_cqe64, sop_drop_qpn) == SLIP_CQE_SOP_DROP_QPN, "CQE qpn");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_cqe64, wqe_counter) == SLIP_CQE_WQE_COUNTER, "CQE wqe_counter");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_cqe64, op_own) == SLIP_CQE_OP_OWN, "CQE op_own");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_err_cqe_ex, syndrome) == SLIP_CQE_SYNDROME, "CQE syndrome");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_err_cqe_ex, vendor_err_synd) == SLIP_CQE_VENDOR_ERR_SYND, "vendor");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_err_cqe_ex, hw_err_synd) == SLIP_CQE_HW_ERR_SYND, "hw syndrome");
static_assert(offsetof(struct doca_gpunetio_ib_mlx5_err_cqe_ex, s_wqe_opcode_qpn) == SLIP_CQE_SOP_DROP_QPN, "opcode");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_OPCODE_NOP == SLIP_MLX5_OPCODE_NOP, "NOP");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE == SLIP_MLX5_OPCODE_RDMA_WRITE, "RDMA_WRITE");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_OPCODE_ATOMIC_FA == SLIP_MLX5_OPCODE_ATOMIC_FA, "ATOMIC_FA");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_CQE_REQ == SLIP_MLX5_CQE_REQ, "CQE REQ");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_CQE_REQ_ERR == SLIP_MLX5_CQE_REQ_ERR, "CQE REQ_ERR");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_CQE_INVALID == SLIP_MLX5_CQE_INVALID, "CQE INVALID");
static_assert((int)DOCA_GPUNETIO_IB_MLX5_CQE_OWNER_MASK == 1, "owner bit");
static_assert((uint32_t)DOCA_GPUNETIO_IB_MLX5_INLINE_SEG == SLIP_MLX5_INLINE_SEG, "inline flag");
static_assert(DOCA_GPUNETIO_VERBS_CQE_SIZE == SLIP_MLX5_CQE_BYTES, "CQE stride");
static_assert((1 << DOCA_GPUNETIO_IB_MLX5_WQE_SQ_SHIFT) == SLIP_MLX5_WQE_BYTES, "WQE stride");
static_assert(DOCA_GPUNETIO_VERBS_WQE_IDX_SHIFT == 8, "WQE index in opmod_idx_opcode");

namespace {

constexpr size_t kLine = 64;           // one doorbell word per cache line
constexpr uint32_t kQpnBase = 0x100;  // queue pair numbers: kQpnBase + queue index

uint32_t host_be32(uint32_t v) { return __builtin_bswap32(v); }

__device__ __forceinline__ uint64_t bswap64(uint64_t v) {
  return (uint64_t)__byte_perm((uint32_t)v, 0, 0x0123) << 32 | __byte_perm((uint32_t)(v >> 32), 0, 0x0123);
}

constexpr uint64_t kChunkBytes = 256 * 1024;  // copies are split so that every SM has work
constexpr unsigned kSweepThreads = 512;

// One sweep of a NIC thread: the blocks share the copies' chunks; the last block to finish runs the
// fetch-adds in order, after every block's copies (each block fences at system scope first).
__global__ void nic_sweep_kernel(const slip_softnic_copy *chunks, uint32_t nchunks, const slip_softnic_add *adds,
                                 uint32_t nadds, unsigned *arrived) {
  for (uint32_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const slip_softnic_copy k = chunks[c];
    slip::dev::detail::copy(slip::dev::Block{}, (char *)k.dst, (const char *)k.src, k.len);
  }
  if (nadds == 0) return;
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    last = atomicAdd(arrived, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  __threadfence_system();
  for (uint32_t i = 0; i < nadds; i++) {
    const slip_softnic_add a = adds[i];
    uint64_t old;
    if (a.target_flags & SLIP_DEV_REGION_HOST) {
      // Single-writer slot in host memory (see write_api.cuh): read-modify-write, released.
      old = slip::sync::ld_volatile(a.target);
      slip::sync::st_release_sys(a.target, old + a.add);
    } else {
      asm volatile("atom.add.release.sys.global.u64 %0, [%1], %2;" : "=l"(old) : "l"(a.target), "l"(a.add) : "memory");
    }
    *a.result = bswap64(old);  // a NIC returns the fetched value big-endian
  }
  *arrived = 0;  // for the next sweep, ordered after it on the stream
}

// A NIC thread's executor: its stream, and the sweep's chunks and adds in pinned host memory that
// the kernel reads directly.
struct SweepExec {
  CudaExec *exec = nullptr;
  int sms = 1;
  unsigned *d_arrived = nullptr;
  slip_softnic_copy *h_chunks = nullptr;
  slip_softnic_add *h_adds = nullptr;
  uint32_t chunk_cap = 0, add_cap = 0;
};

void sweep_exec_destroy(SweepExec *x) {
  if (!x) return;
  if (x->exec) (void)cudaSetDevice(x->exec->device);
  (void)cudaFree(x->d_arrived);
  (void)cudaFreeHost(x->h_chunks);
  (void)cudaFreeHost(x->h_adds);
  cuda_exec_destroy(x->exec);
  delete x;
}

template <class T>
slip_status grow(T **buf, uint32_t *cap, uint32_t need) {
  slip_status st = SLIP_OK;
  if (need <= *cap) return SLIP_OK;
  uint32_t n = std::max<uint32_t>(need, std::max<uint32_t>(256, *cap * 2));
  if (*buf) SLIP_CUDA_CHECK(cudaFreeHost(*buf));
  *buf = nullptr;
  *cap = 0;
  SLIP_CUDA_CHECK(cudaHostAlloc((void **)buf, (size_t)n * sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
  *cap = n;
done:
  return st;
}

slip_status sweep_run(void *state, const slip_softnic_copy *copies, uint32_t ncopies, const slip_softnic_add *adds,
                      uint32_t nadds) {
  slip_status st = SLIP_OK;
  SweepExec *x = (SweepExec *)state;
  uint64_t nchunks = 0;
  SLIP_CHECK(cuda_exec_bind(x->exec));
  for (uint32_t i = 0; i < ncopies; i++) nchunks += (copies[i].len + kChunkBytes - 1) / kChunkBytes;
  if (nchunks > UINT32_MAX) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "sweep of %llu chunks", (unsigned long long)nchunks);
  SLIP_CHECK(grow(&x->h_chunks, &x->chunk_cap, (uint32_t)nchunks));
  SLIP_CHECK(grow(&x->h_adds, &x->add_cap, nadds));
  {
    uint32_t k = 0;
    for (uint32_t i = 0; i < ncopies; i++)
      for (uint64_t off = 0; off < copies[i].len; off += kChunkBytes)
        x->h_chunks[k++] = {(char *)copies[i].dst + off, (const char *)copies[i].src + off,
                            std::min<uint64_t>(kChunkBytes, copies[i].len - off)};
    if (nadds) memcpy(x->h_adds, adds, (size_t)nadds * sizeof *adds);
    const uint32_t grid = (uint32_t)std::max<uint64_t>(1, std::min<uint64_t>(nchunks, 2ull * x->sms));
    nic_sweep_kernel<<<grid, kSweepThreads, 0, x->exec->stream>>>(x->h_chunks, (uint32_t)nchunks, x->h_adds, nadds,
                                                                  x->d_arrived);
    SLIP_LAUNCH_CHECK();
  }
  SLIP_CHECK(cuda_exec_flush(x->exec));
done:
  return st;
}

slip_status sweep_exec_create(int device, SweepExec **out) {
  slip_status st = SLIP_OK;
  SweepExec *x = new SweepExec();
  SLIP_CHECK(cuda_exec_create(device, &x->exec));
  SLIP_CUDA_CHECK(cudaDeviceGetAttribute(&x->sms, cudaDevAttrMultiProcessorCount, device));
  SLIP_CUDA_CHECK(cudaMalloc(&x->d_arrived, sizeof(unsigned)));
  SLIP_CUDA_CHECK(cudaMemset(x->d_arrived, 0, sizeof(unsigned)));
  // Load the kernel now: with lazy loading its first launch would wait for the module while a
  // push kernel spins on the completion that launch produces (see the proxy in queueset.cu). The
  // launch check must not report an error an earlier call of this thread left behind.
  (void)cudaGetLastError();
  nic_sweep_kernel<<<1, kSweepThreads, 0, x->exec->stream>>>(nullptr, 0, nullptr, 0, x->d_arrived);
  SLIP_LAUNCH_CHECK();
  SLIP_CUDA_CHECK(cudaStreamSynchronize(x->exec->stream));
  *out = x;
  x = nullptr;
done:
  sweep_exec_destroy(x);
  return st;
}

// NIC threads per GPU: SLIP_SOFTNIC_THREADS (1..64), else 2. Every queue set of a device is
// served by the same threads, as one NIC serves all of a host's queue pairs.
uint32_t nic_threads() {
  const char *v = getenv("SLIP_SOFTNIC_THREADS");
  long t = v && *v ? strtol(v, nullptr, 10) : 2;
  return (uint32_t)std::max<long>(1, std::min<long>(t, 64));
}

// One software NIC engine per device, made with the first queue set on it and stopped with the
// last one.
struct DeviceEngine {
  slip_softnic_engine *engine = nullptr;
  std::vector<SweepExec *> execs;  // one per engine thread
  uint32_t users = 0;
};
std::mutex g_engines_mu;
std::map<int, DeviceEngine> g_engines;

slip_status engine_acquire(int device, slip_softnic_engine **out) {
  slip_status st = SLIP_OK;
  std::lock_guard<std::mutex> g(g_engines_mu);
  DeviceEngine &d = g_engines[device];
  if (!d.engine) {
    std::vector<slip_softnic_ops> ops;
    for (uint32_t t = 0, n = nic_threads(); t < n; t++) {
      SweepExec *x = nullptr;
      SLIP_CHECK(sweep_exec_create(device, &x));
      d.execs.push_back(x);
      ops.push_back({sweep_run, x});
    }
    SLIP_CHECK(slip_softnic_engine_create(ops.data(), (uint32_t)ops.size(), &d.engine));
  }
  d.users++;
  *out = d.engine;
done:
  if (st != SLIP_OK && !d.engine) {
    for (SweepExec *x : d.execs) sweep_exec_destroy(x);
    g_engines.erase(device);
  }
  return st;
}

void engine_release(int device) {
  std::lock_guard<std::mutex> g(g_engines_mu);
  auto it = g_engines.find(device);
  if (it == g_engines.end() || --it->second.users > 0) return;
  slip_softnic_engine_destroy(it->second.engine);  // joins its threads before their executors go
  for (SweepExec *x : it->second.execs) sweep_exec_destroy(x);
  g_engines.erase(it);
}

slip_status mapped(void *host, void **dev) {
  slip_status st = SLIP_OK;
  SLIP_CUDA_CHECK(cudaHostGetDevicePointer(dev, host, 0));
done:
  return st;
}

}  // namespace

struct slip_gpunetio {
  int device = 0;
  uint32_t nq = 0, depth = 0;
  uint8_t *h_sq = nullptr, *h_cq = nullptr;  // pinned, mapped: nq x depth x 64 bytes each
  uint8_t *h_words = nullptr;                // pinned, mapped: per queue pair 3 lines (PI, SQ DBR, CQ DBR)
  doca_gpu_dev_verbs_qp *d_qps = nullptr;
  uint64_t *d_sink = nullptr;                // nq x 8 bytes: values fetched by atomics
  uint32_t sink_key = 0;
  uint32_t qpn_base = 0;
  std::vector<doca_gpu_dev_verbs_qp> fresh;  // the queue pairs as created (reset copies them back)
  bool engine = false;                       // holds a use of the device's NIC engine
  slip_softnic *nic = nullptr;
};

void slip_gpunetio_destroy(slip_gpunetio *g) {
  if (!g) return;
  slip_softnic_destroy(g->nic);  // no engine thread looks at its queue pairs any more
  if (g->engine) engine_release(g->device);
  (void)cudaSetDevice(g->device);
  (void)cudaFree(g->d_qps);
  (void)cudaFree(g->d_sink);
  (void)cudaFreeHost(g->h_sq);
  (void)cudaFreeHost(g->h_cq);
  (void)cudaFreeHost(g->h_words);
  delete g;
}

slip_status slip_gpunetio_create(int device, uint32_t nq, uint32_t depth, const slip_region_entry *local,
                                 uint32_t nlocal, const slip_region_entry *remote, uint32_t nremote,
                                 slip_softnic_pd pd, slip_dev_error *err, uint32_t qpn_base,
                                 const slip_softnic_pd *rpd, slip_gpunetio **out) {
  slip_status st = SLIP_OK;
  slip_gpunetio *g = nullptr;
  std::vector<slip_region_entry> loc, rem;
  std::vector<slip_softnic_qp> nqps(nq);
  std::vector<doca_gpu_dev_verbs_qp> qps(nq);
  const size_t ring = (size_t)depth * SLIP_MLX5_WQE_BYTES;
  if (depth < 2 || depth > 32768 || (depth & (depth - 1)) != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "gpunetio queue depth %u, expected a power of two in 2..32768 (16-bit WQE mask)",
              depth);
  if (qpn_base == 0) qpn_base = kQpnBase;
  if ((uint64_t)qpn_base + nq > 0xffffffu)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%u queue pairs from number 0x%x, expected numbers below 2^24", nq, qpn_base);
  for (uint32_t i = 0; i < nlocal + nremote; i++) {
    slip_region_entry e = i < nlocal ? local[i] : remote[i - nlocal];
    if (e.id >= SLIP_NIC_SINK_ID)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "region id %u, expected below %u for the gpunetio backend (iova = id << %d)",
                e.id, SLIP_NIC_SINK_ID, SLIP_IOVA_SHIFT);
    e.key = SLIP_MKEY(e.key);
    (i < nlocal ? loc : rem).push_back(e);
  }
  g = new slip_gpunetio();
  g->device = device;
  g->nq = nq;
  g->depth = depth;
  g->qpn_base = qpn_base;
  SLIP_SYS_CHECK(getrandom(&g->sink_key, sizeof g->sink_key, 0) == (ssize_t)sizeof g->sink_key, "getrandom");
  SLIP_CUDA_CHECK(cudaSetDevice(device));
  SLIP_CUDA_CHECK(cudaHostAlloc(&g->h_sq, nq * ring, cudaHostAllocMapped | cudaHostAllocPortable));
  SLIP_CUDA_CHECK(cudaHostAlloc(&g->h_cq, nq * ring, cudaHostAllocMapped | cudaHostAllocPortable));
  SLIP_CUDA_CHECK(cudaHostAlloc(&g->h_words, nq * 3 * kLine, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(g->h_words, 0, nq * 3 * kLine);
  SLIP_CUDA_CHECK(cudaMalloc(&g->d_sink, nq * sizeof(uint64_t)));
  SLIP_CUDA_CHECK(cudaMemset(g->d_sink, 0, nq * sizeof(uint64_t)));
  SLIP_CUDA_CHECK(cudaMalloc(&g->d_qps, nq * sizeof(doca_gpu_dev_verbs_qp)));
  loc.push_back({SLIP_NIC_SINK_ID, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE, g->sink_key,
                 nq * sizeof(uint64_t), g->d_sink});
  for (uint32_t q = 0; q < nq; q++) {
    uint8_t *sq = g->h_sq + q * ring, *cq = g->h_cq + q * ring, *words = g->h_words + q * 3 * kLine;
    const uint32_t qpn = qpn_base + q;
    slip_qp_layout l;
    memset(&l, 0, sizeof l);
    l.qpn = qpn;
    l.sq_wqe_cnt = depth;
    l.cqn = qpn;
    l.cqe_cnt = depth;
    l.rings_in_host = 1;
    SLIP_CHECK(mapped(sq, &l.sq_wqes));
    SLIP_CHECK(mapped(words + kLine, &l.sq_dbrec));
    SLIP_CHECK(mapped(words, &l.sq_db));  // CPU proxy: the device publishes its producer index here
    SLIP_CHECK(mapped(cq, &l.cqes));
    SLIP_CHECK(mapped(words + 2 * kLine, &l.cq_dbrec));
    SLIP_CHECK(slip_dev_qp_init(&l, &qps[q]));
    nqps[q] = {sq, depth, qpn, (const uint64_t *)words, cq, depth};
  }
  SLIP_CUDA_CHECK(cudaMemcpy(g->d_qps, qps.data(), nq * sizeof(doca_gpu_dev_verbs_qp), cudaMemcpyHostToDevice));
  g->fresh = qps;
  {
    slip_softnic_engine *engine = nullptr;
    SLIP_CHECK(engine_acquire(device, &engine));
    g->engine = true;
    SLIP_CHECK(slip_softnic_create(engine, nq, nqps.data(), err, loc.data(), (uint32_t)loc.size(), &pd, rem.data(),
                                   (uint32_t)rem.size(), rpd, &g->nic));
  }
  *out = g;
  g = nullptr;
done:
  slip_gpunetio_destroy(g);
  return st;
}

size_t slip_dev_qp_size(void) { return sizeof(doca_gpu_dev_verbs_qp); }

slip_status slip_dev_qp_init(const slip_qp_layout *l, void *out) {
  slip_status st = SLIP_OK;
  doca_gpu_dev_verbs_qp h;
  if (!l || !out || !l->sq_wqes || !l->sq_dbrec || !l->sq_db || !l->cqes || !l->cq_dbrec)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_dev_qp_init: null layout, struct or ring address");
  if (l->qpn == 0 || l->qpn > 0xffffffu) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "queue pair number %u, expected 24 bits", l->qpn);
  if (l->sq_wqe_cnt < 2 || l->sq_wqe_cnt > 32768 || (l->sq_wqe_cnt & (l->sq_wqe_cnt - 1)) != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "send queue of %u WQEs, expected a power of two in 2..32768", l->sq_wqe_cnt);
  if (l->cqe_cnt < 2 || (l->cqe_cnt & (l->cqe_cnt - 1)) != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "completion queue of %u CQEs, expected a power of two", l->cqe_cnt);
  memset(&h, 0, sizeof h);
  h.sq_num = l->qpn;
  h.sq_num_shift8 = l->qpn << 8;
  h.sq_num_shift8_be = host_be32(l->qpn << 8);
  h.sq_num_shift8_be_1ds = host_be32(l->qpn << 8 | 1);
  h.sq_num_shift8_be_2ds = host_be32(l->qpn << 8 | 2);
  h.sq_num_shift8_be_3ds = host_be32(l->qpn << 8 | 3);
  h.sq_num_shift8_be_4ds = host_be32(l->qpn << 8 | 4);
  h.sq_wqe_num = (uint16_t)l->sq_wqe_cnt;
  h.sq_wqe_mask = (uint16_t)(l->sq_wqe_cnt - 1);
  h.sq_wqe_daddr = (uint8_t *)l->sq_wqes;
  h.sq_dbrec = (__be32 *)l->sq_dbrec;
  h.sq_db = (uint64_t *)l->sq_db;
  h.cq_sq.cqe_daddr = (uint8_t *)l->cqes;
  h.cq_sq.cq_num = l->cqn;
  h.cq_sq.cqe_num = l->cqe_cnt;
  h.cq_sq.cqe_mask = l->cqe_cnt - 1;
  h.cq_sq.cqe_size = SLIP_MLX5_CQE_BYTES;
  h.cq_sq.dbrec = (__be32 *)l->cq_dbrec;
  h.cq_sq.mem_type = l->rings_in_host ? DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST : DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU;
  h.mem_type = h.cq_sq.mem_type;
  h.nic_handler = l->gpu_doorbell ? DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB : DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY;
  memcpy(out, &h, sizeof h);
done:
  return st;
}

slip_status slip_dev_qp_submitted(const void *d_qp, uint64_t *out) {
  slip_status st = SLIP_OK;
  SLIP_CUDA_CHECK(cudaMemcpy(out, (const char *)d_qp + offsetof(doca_gpu_dev_verbs_qp, sq_wqe_pi), sizeof(uint64_t),
                             cudaMemcpyDeviceToHost));
done:
  return st;
}

extern "C" slip_status slip_gpunetio_probe(void) { return SLIP_OK; }

void *slip_gpunetio_qp(const slip_gpunetio *g, uint32_t q) { return g && q < g->nq ? g->d_qps + q : nullptr; }
uint32_t slip_gpunetio_sink_key(const slip_gpunetio *g) { return g ? g->sink_key : 0; }

namespace {
// The software NIC's engine reads the producer count from this word, as it does the device's.
void publish_word(void *word, uint64_t pi) { __atomic_store_n((uint64_t *)word, pi, __ATOMIC_RELEASE); }
}  // namespace

slip_status slip_gpunetio_host_qp(slip_gpunetio *g, uint32_t q, slip_host_qp *out) {
  if (!g || q >= g->nq) return slip_set_error(SLIP_ERR_INVALID_ARG, "queue pair %u of %u", q, g ? g->nq : 0);
  const size_t ring = (size_t)g->depth * SLIP_MLX5_WQE_BYTES;
  uint8_t *words = g->h_words + q * 3 * kLine;
  *out = slip_host_qp{};
  out->sq = g->h_sq + q * ring;
  out->wqe_num = g->depth;
  out->qpn = g->qpn_base + q;
  out->cq = g->h_cq + q * ring;
  out->cqe_num = g->depth;
  out->cq_dbrec = nullptr;
  out->publish = publish_word;
  out->state = words;
  return SLIP_OK;
}
slip_status slip_gpunetio_reset(slip_gpunetio *g) {
  slip_status st = SLIP_OK;
  if (!g) return SLIP_OK;
  // No kernel uses the queue pairs (the caller's contract): producer words to 0, the NIC's side
  // reset, then the device's view of every queue pair as it was created.
  for (uint32_t q = 0; q < g->nq; q++) __atomic_store_n((uint64_t *)(g->h_words + q * 3 * kLine), 0, __ATOMIC_RELEASE);
  slip_softnic_reset(g->nic);
  SLIP_CUDA_CHECK(cudaSetDevice(g->device));
  SLIP_CUDA_CHECK(cudaMemcpy(g->d_qps, g->fresh.data(), g->nq * sizeof(doca_gpu_dev_verbs_qp), cudaMemcpyHostToDevice));
done:
  return st;
}
void slip_gpunetio_stats(const slip_gpunetio *g, slip_softnic_stats *out) { slip_softnic_get_stats(g ? g->nic : nullptr, out); }
