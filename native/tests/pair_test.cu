// Two-process GPU test of one backend (argument: nvlink | proxy | gpunetio; --small for sanitizer
// runs). gpunetio runs DOCA GPUNetIO's device functions against the software NIC.
// Process 0 receives, process 1 sends; they exchange region descriptors over a socket and use one
// GPU each (GPU 0 for both when the machine has one). Cases:
//   1. byte-exact delivery of sizes 0, 1, 3, 15, 4 KiB, 4 KiB+1, 64 KiB+1, ~1 MB, 1 MiB, 64 MiB at
//      misaligned offsets, with thread, warp and block groups; signals in host and device memory,
//      waited for by a CPU thread and by a GPU kernel;
//   2. signal-after-data under stress: a receiver kernel checks every block the moment its signal
//      arrives while 8 queues keep writing;
//   3. many destinations at once: partition a batch into 16 blocks and push them to 16 regions;
//   4. bad input: wrong key, out-of-range offsets (host check and device check), forged
//      descriptors; each gives an error naming what was got and expected, and writes nothing.
//      proxy and gpunetio: a forged key that only the executor or the NIC can catch; gpunetio also
//      an out-of-range RDMA write posted with doca_gpu_dev_verbs_put directly (the NIC's range check).
#include <inttypes.h>

#include <vector>

#include "slipstream/softnic.h"
#include "pair_common.cuh"
#include "slipstream/device/write_api.cuh"
#include "slipstream/kernels.h"

using slip::dev::Addr;

namespace {

enum : uint32_t { ID_SRC = 1, ID_OUT = 2, ID_DATA = 10, ID_DSIG = 11, ID_HSIG = 12, ID_DEST0 = 100 };
constexpr int kDests = 16;
constexpr uint64_t kSeed = 0x5EED5EEDull;
constexpr uint8_t kPoison = 0x5A;
constexpr uint64_t kSigBytes = 4096;
// Sender's table: locals [SRC, OUT], remotes [DATA, DSIG, HSIG, DEST0..15].
constexpr uint32_t T_SRC = 0, T_OUT = 1, T_DATA = 2, T_DSIG = 3, T_HSIG = 4, T_DEST0 = 5;

int g_fail = 0;
#define CHECK(cond, ...)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      g_fail++;                                                                     \
      fprintf(stderr, "[rank %d] FAIL %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                 \
      fprintf(stderr, "\n");                                                        \
    }                                                                               \
  } while (0)
int g_rank = -1;

struct Config {
  int backend;
  bool small;
  uint64_t data_len;
  uint64_t rows;
  uint32_t rounds;
};

struct Case1 {
  uint64_t len, doff, soff;
  int group;  // 0 thread, 1 warp, 2 block
  bool host_signal;
};

std::vector<Case1> case1_list(const Config &c) {
  std::vector<uint64_t> sizes = {0, 1, 15, 4096, 1ull << 20, 3, 4097, 65537, 1000003, 12345};
  if (!c.small) sizes.push_back(64ull << 20);
  std::vector<Case1> v;
  uint64_t cursor = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    Case1 k;
    k.len = sizes[i];
    k.doff = cursor + i % 5;
    k.soff = 1024 * i + (i * 13) % 64;
    k.group = (int)(i % 3);
    k.host_signal = i % 2 == 0;
    cursor = (k.doff + k.len + 63) / 64 * 64 + 64;  // a poisoned gap after every block
    v.push_back(k);
  }
  return v;
}

const char *backend_name(int b) {
  return b == SLIP_BACKEND_NVLINK ? "nvlink" : b == SLIP_BACKEND_PROXY ? "proxy" : "gpunetio";
}

// ---- kernels -------------------------------------------------------------------------------

template <class G>
__global__ void one_write_signal(slip_dev_queue *qs, Addr dst, Addr src, uint64_t len, Addr sig, uint64_t add,
                                 int *status) {
  G g;
  const int st = slip::dev::write_signal(g, qs[0], dst, src, len, sig, add);
  slip::dev::commit(g, qs[0]);
  const int w = slip::dev::wait_all(g, qs[0]);
  if (g.rank() == 0) status[0] = st != SLIP_OK ? st : w;
}

constexpr uint64_t kStressSlot = 16 * 1024;
constexpr uint64_t kStressLen = kStressSlot - 4;  // odd tail

__host__ __device__ inline uint64_t stress_src(uint32_t q, uint32_t r, uint32_t rounds) {
  return ((uint64_t)q * rounds + r) * kStressSlot + r % 7;
}
__host__ __device__ inline uint64_t stress_dst(uint32_t q, uint32_t r, uint32_t rounds) {
  return ((uint64_t)q * rounds + r) * kStressSlot;
}
__host__ __device__ inline uint32_t stress_sig_table(uint32_t q) { return q % 2 ? T_HSIG : T_DSIG; }

__global__ void stress_send(slip_dev_queue *qs, uint32_t rounds, int *status) {
  slip::dev::Block g;
  slip_dev_queue &q = qs[blockIdx.x];
  int first = SLIP_OK;
  for (uint32_t r = 0; r < rounds; r++) {
    const int st = slip::dev::write_signal(g, q, Addr{T_DATA, stress_dst(blockIdx.x, r, rounds)},
                                           Addr{T_SRC, stress_src(blockIdx.x, r, rounds)}, kStressLen,
                                           Addr{stress_sig_table(blockIdx.x), (64 + blockIdx.x) * 8},
                                           SLIP_SIGNAL_PACK(1, kStressLen));
    if (st != SLIP_OK && first == SLIP_OK) first = st;
    slip::dev::commit(g, q);
    if (r % 8 == 7) {
      const int w = slip::dev::wait_all(g, q);
      if (w != SLIP_OK && first == SLIP_OK) first = w;
    }
  }
  const int w = slip::dev::wait_all(g, q);
  if (threadIdx.x == 0) status[blockIdx.x] = first != SLIP_OK ? first : w;
}

// Receiver: for each round, wait for the queue's signal, then check the block at once.
__global__ void stress_check(const uint8_t *data, uint64_t *dsig, uint64_t *hsig, uint32_t rounds,
                             unsigned long long *bad, int *timeouts) {
  __shared__ int to;
  const uint32_t q = blockIdx.x;
  uint64_t *sig = (q % 2 ? hsig : dsig) + 64 + q;
  unsigned long long mine = 0;
  for (uint32_t r = 0; r < rounds; r++) {
    if (threadIdx.x == 0) to = slip::dev::wait_signal_ge(sig, SLIP_SIGNAL_PACK(r + 1, (uint64_t)(r + 1) * kStressLen));
    __syncthreads();
    if (to != SLIP_OK) {
      if (threadIdx.x == 0) atomicAdd(timeouts, 1);
      break;
    }
    const volatile uint8_t *blk = data + stress_dst(q, r, rounds);
    const uint64_t sbase = stress_src(q, r, rounds);
    for (uint64_t i = threadIdx.x; i < kStressLen; i += blockDim.x) mine += blk[i] != pattern_byte(sbase + i, kSeed);
    __syncthreads();
  }
  if (mine) atomicAdd(bad, mine);
}

#if SLIP_HAVE_GPUNETIO
// An RDMA write posted with the GPUNetIO device function itself, past the device-side checks of the
// write API: only the NIC's rkey and range check stands between it and the receiver's memory.
__global__ void raw_put(slip_dev_queue *qs, uint32_t dst_id, uint64_t dst_key, uint64_t dst_off, uint32_t src_id,
                        uint64_t src_key, uint64_t len, int *status) {
  slip_dev_queue &q = qs[0];
  doca_gpu_dev_verbs_addr r, l;
  r.addr = SLIP_IOVA(dst_id, dst_off);
  r.key = slip::dev::gpunetio::mkey(dst_key);
  l.addr = SLIP_IOVA(src_id, 0);
  l.key = slip::dev::gpunetio::mkey(src_key);
  doca_gpu_dev_verbs_ticket_t t;
  {
    slip::dev::gpunetio::Lock lock(q);
    doca_gpu_dev_verbs_put<slip::dev::gpunetio::kShare>(slip::dev::gpunetio::qp(q), r, l, len, &t);
  }
  *status = slip::dev::gpunetio::wait(q, slip::dev::gpunetio::expect_cqe(q));
}
#endif

__global__ void make_batch(int64_t *keys, int64_t *rowid, int32_t *val, uint64_t rows) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < rows; i += (uint64_t)gridDim.x * blockDim.x) {
    keys[i] = (int64_t)(slip_hash64(i ^ kSeed) % (rows / 3 + 1));  // duplicates on purpose
    rowid[i] = (int64_t)i;
    val[i] = (int32_t)(i * 2654435761u);
  }
}

// ---- helpers ---------------------------------------------------------------------------------

int launch_one(int group, slip_dev_queue *qs, Addr dst, Addr src, uint64_t len, Addr sig, uint64_t add) {
  int *d_st;
  int st = -1;
  T_CUDA(cudaMalloc(&d_st, sizeof(int)));
  T_CUDA(cudaMemset(d_st, 0xff, sizeof(int)));
  T_CUDA(cudaDeviceSynchronize());
  if (group == 0) one_write_signal<slip::dev::Thread><<<1, 1>>>(qs, dst, src, len, sig, add, d_st);
  else if (group == 1) one_write_signal<slip::dev::Warp><<<1, 32>>>(qs, dst, src, len, sig, add, d_st);
  else one_write_signal<slip::dev::Block><<<1, 256>>>(qs, dst, src, len, sig, add, d_st);
  T_LAUNCH();
  wait_stream(0);
  T_CUDA(cudaMemcpy(&st, d_st, sizeof st, cudaMemcpyDeviceToHost));
  T_CUDA(cudaFree(d_st));
  return st;
}

uint64_t block_bytes(uint64_t n) { return (n * 8 + 15) / 16 * 16 + (n * 8 + 15) / 16 * 16 + (n * 4 + 15) / 16 * 16; }
uint64_t dest_cap(const Config &c) { return block_bytes(c.rows / kDests * 2 + 4096); }

std::vector<uint64_t> reference_counts(uint64_t rows) {
  std::vector<uint64_t> n(kDests, 0);
  for (uint64_t i = 0; i < rows; i++)
    n[slip_partition_of((int64_t)(slip_hash64(i ^ kSeed) % (rows / 3 + 1)), kDests)]++;
  return n;
}

void poison(slip_region *r) { T_CUDA(cudaMemset(slip_region_ptr(r), kPoison, slip_region_length(r))); }

// ---- receiver (rank 0) -----------------------------------------------------------------------

void receiver(const Pair &p, const Config &c) {
  slip_ctx *ctx;
  T_SLIP(slip_ctx_create(p.device, &ctx));
  slip_region *data, *dsig, *hsig, *dest[kDests];
  T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, c.data_len, ID_DATA, &data));
  T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, kSigBytes, ID_DSIG, &dsig));
  T_SLIP(slip_region_create(ctx, SLIP_MEM_HOST_SHM, kSigBytes, ID_HSIG, &hsig));
  for (int d = 0; d < kDests; d++) T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, dest_cap(c), ID_DEST0 + d, &dest[d]));
  poison(data);
  T_CUDA(cudaMemset(slip_region_ptr(dsig), 0, kSigBytes));
  memset(slip_region_host_ptr(hsig), 0, kSigBytes);
  for (int d = 0; d < kDests; d++) poison(dest[d]);
  T_CUDA(cudaDeviceSynchronize());
  std::vector<slip_region_desc> descs(3 + kDests);
  T_SLIP(slip_region_export(data, &descs[0]));
  T_SLIP(slip_region_export(dsig, &descs[1]));
  T_SLIP(slip_region_export(hsig, &descs[2]));
  for (int d = 0; d < kDests; d++) T_SLIP(slip_region_export(dest[d], &descs[3 + d]));
  T_SLIP(slip_oob_send(p.fd, descs.data(), descs.size() * sizeof(slip_region_desc)));
  uint64_t *h_hsig = (uint64_t *)slip_region_host_ptr(hsig);
  uint64_t *d_dsig = (uint64_t *)slip_region_ptr(dsig);
  uint64_t *d_hsig = (uint64_t *)slip_region_ptr(hsig);

  // Case 1: wait for every signal (CPU for host slots, a GPU kernel for device slots), then check.
  std::vector<Case1> cases = case1_list(c);
  for (size_t i = 0; i < cases.size(); i++) {
    const uint64_t want = SLIP_SIGNAL_PACK(1, cases[i].len);
    if (cases[i].host_signal) {
      slip_status st = slip_signal_wait_ge(h_hsig + i, want, 20000000000ull);
      CHECK(st == SLIP_OK, "case 1 size %" PRIu64 ": %s", cases[i].len, slip_last_error());
    } else {
      uint64_t *d_want;
      int *d_res, res = -1;
      T_CUDA(cudaMalloc(&d_want, 8));
      T_CUDA(cudaMalloc(&d_res, sizeof(int)));
      T_CUDA(cudaMemcpy(d_want, &want, 8, cudaMemcpyHostToDevice));
      T_SLIP(slip_wait_signals(d_dsig + i, d_want, 1, 20000000000ull, d_res, 0));
      T_CUDA(cudaMemcpy(&res, d_res, sizeof res, cudaMemcpyDeviceToHost));
      CHECK(res == SLIP_OK, "case 1 size %" PRIu64 ": GPU wait returned %d", cases[i].len, res);
      T_CUDA(cudaFree(d_want));
      T_CUDA(cudaFree(d_res));
    }
  }
  {
    std::vector<uint8_t> h(c.data_len);
    T_CUDA(cudaMemcpy(h.data(), slip_region_ptr(data), c.data_len, cudaMemcpyDeviceToHost));
    std::vector<uint8_t> written(c.data_len, 0);
    for (size_t i = 0; i < cases.size(); i++) {
      uint64_t bad = 0;
      for (uint64_t k = 0; k < cases[i].len; k++) {
        bad += h[cases[i].doff + k] != pattern_byte(cases[i].soff + k, kSeed);
        written[cases[i].doff + k] = 1;
      }
      CHECK(bad == 0, "case 1 size %" PRIu64 " at offset %" PRIu64 ": %" PRIu64 " bytes differ", cases[i].len,
            cases[i].doff, bad);
    }
    uint64_t stray = 0;
    for (uint64_t k = 0; k < c.data_len; k++) stray += !written[k] && h[k] != kPoison;
    CHECK(stray == 0, "case 1: %" PRIu64 " bytes outside the blocks were written", stray);
    printf("[%s] case 1: %zu sizes delivered byte-exact, gaps untouched: %s\n", backend_name(c.backend), cases.size(),
           g_fail ? "FAILED" : "ok");
  }

  // Case 2: checker kernel runs while the sender writes.
  poison(data);
  T_CUDA(cudaDeviceSynchronize());
  unsigned long long *d_bad;
  int *d_to;
  T_CUDA(cudaMalloc(&d_bad, 8));
  T_CUDA(cudaMalloc(&d_to, sizeof(int)));
  T_CUDA(cudaMemset(d_bad, 0, 8));
  T_CUDA(cudaMemset(d_to, 0, sizeof(int)));
  cudaStream_t s;
  T_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stress_check<<<8, 256, 0, s>>>((const uint8_t *)slip_region_ptr(data), d_dsig, d_hsig, c.rounds, d_bad, d_to);
  T_LAUNCH();
  pair_barrier(&p);  // checker is running: go
  T_CUDA(cudaStreamSynchronize(s));
  {
    unsigned long long bad = 0;
    int to = 0;
    T_CUDA(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
    T_CUDA(cudaMemcpy(&to, d_to, sizeof to, cudaMemcpyDeviceToHost));
    CHECK(to == 0, "case 2: %d queues timed out waiting for signals", to);
    CHECK(bad == 0, "case 2: %llu bytes seen before their data arrived (signal overtook data)", bad);
    printf("[%s] case 2: 8 queues x %u blocks of %" PRIu64 " B, each checked on signal arrival: %s\n",
           backend_name(c.backend), c.rounds, kStressLen, (to == 0 && bad == 0) ? "ok" : "FAILED");
  }

  // Case 3: sixteen destinations; the CPU waits on the host-memory signals.
  {
    std::vector<uint64_t> counts = reference_counts(c.rows), sent(kDests);
    T_SLIP(slip_oob_recv(p.fd, sent.data(), kDests * 8));
    int ok = 1;
    for (int d = 0; d < kDests; d++) {
      CHECK(sent[d] == counts[d], "case 3: sender partitioned %" PRIu64 " rows to %d, reference %" PRIu64, sent[d], d,
            counts[d]);
      const uint64_t bytes = block_bytes(counts[d]), chunks = (bytes + 65535) / 65536;
      slip_status st = slip_signal_wait_ge(h_hsig + 128 + d, SLIP_SIGNAL_PACK(chunks, bytes), 20000000000ull);
      CHECK(st == SLIP_OK, "case 3 destination %d: %s", d, slip_last_error());
      ok &= st == SLIP_OK;
    }
    std::vector<uint8_t> seen(c.rows, 0);
    for (int d = 0; d < kDests && ok; d++) {
      const uint64_t n = counts[d];
      std::vector<uint8_t> h(block_bytes(n) + 64);
      T_CUDA(cudaMemcpy(h.data(), slip_region_ptr(dest[d]), h.size(), cudaMemcpyDeviceToHost));
      const int64_t *keys = (const int64_t *)h.data();
      const int64_t *rowid = (const int64_t *)(h.data() + (n * 8 + 15) / 16 * 16);
      const int32_t *val = (const int32_t *)(h.data() + 2 * ((n * 8 + 15) / 16 * 16));
      uint64_t bad = 0;
      for (uint64_t k = 0; k < n; k++) {
        const uint64_t r = (uint64_t)rowid[k];
        if (r >= c.rows || seen[r]) { bad++; continue; }
        seen[r] = 1;
        const int64_t key = (int64_t)(slip_hash64(r ^ kSeed) % (c.rows / 3 + 1));
        bad += keys[k] != key || slip_partition_of(keys[k], kDests) != (uint32_t)d || val[k] != (int32_t)(r * 2654435761u);
      }
      CHECK(bad == 0, "case 3 destination %d: %" PRIu64 " of %" PRIu64 " rows wrong", d, bad, n);
      uint64_t tail_bad = 0;
      for (uint64_t k = block_bytes(n); k < h.size(); k++) tail_bad += h[k] != kPoison;
      CHECK(tail_bad == 0, "case 3 destination %d: %" PRIu64 " bytes written past the block", d, tail_bad);
    }
    uint64_t missing = 0;
    for (uint64_t r = 0; r < c.rows; r++) missing += !seen[r];
    CHECK(missing == 0, "case 3: %" PRIu64 " rows never arrived", missing);
    printf("[%s] case 3: %" PRIu64 " rows partitioned and pushed to %d destinations at once: %s\n",
           backend_name(c.backend), c.rows, kDests, (ok && missing == 0) ? "ok" : "FAILED");
  }

  // Case 4: bad input writes nothing.
  poison(data);
  T_CUDA(cudaDeviceSynchronize());
  const uint64_t hs200 = h_hsig[200];
  pair_barrier(&p);  // poisoned: sender may try
  pair_barrier(&p);  // sender done
  {
    std::vector<uint8_t> h(c.data_len);
    T_CUDA(cudaMemcpy(h.data(), slip_region_ptr(data), c.data_len, cudaMemcpyDeviceToHost));
    uint64_t stray = 0;
    for (uint64_t k = 0; k < c.data_len; k++) stray += h[k] != kPoison;
    uint64_t ds201 = 0;
    T_CUDA(cudaMemcpy(&ds201, d_dsig + 201, 8, cudaMemcpyDeviceToHost));
    CHECK(stray == 0, "case 4: rejected writes changed %" PRIu64 " bytes", stray);
    CHECK(h_hsig[200] == hs200 && ds201 == 0, "case 4: signal of a rejected write moved (0x%" PRIx64 ", 0x%" PRIx64 ")",
          h_hsig[200], ds201);
    printf("[%s] case 4: rejected writes left the region and the signals untouched: %s\n", backend_name(c.backend),
           (stray == 0 && ds201 == 0) ? "ok" : "FAILED");
  }
  int peer_fail = 0;
  T_SLIP(slip_oob_recv(p.fd, &peer_fail, sizeof peer_fail));
  g_fail += peer_fail;
  T_CUDA(cudaFree(d_bad));
  T_CUDA(cudaFree(d_to));
  T_CUDA(cudaStreamDestroy(s));
  for (int d = 0; d < kDests; d++) slip_region_destroy(dest[d]);
  slip_region_destroy(data);
  slip_region_destroy(dsig);
  slip_region_destroy(hsig);
  slip_ctx_destroy(ctx);
}

// ---- sender (rank 1) -------------------------------------------------------------------------

void sender(const Pair &p, const Config &c) {
  slip_ctx *ctx;
  T_SLIP(slip_ctx_create(p.device, &ctx));
  std::vector<slip_region_desc> descs(3 + kDests);
  T_SLIP(slip_oob_recv(p.fd, descs.data(), descs.size() * sizeof(slip_region_desc)));
  std::vector<slip_remote *> remotes(descs.size());
  for (size_t i = 0; i < descs.size(); i++)
    T_SLIP(slip_remote_import(ctx, &descs[i], sizeof descs[i], &remotes[i]));
  const uint64_t src_len = c.data_len + (1 << 20);
  slip_region *src, *out;
  T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, src_len, ID_SRC, &src));
  slip_batch b;
  memset(&b, 0, sizeof b);
  b.rows = c.rows;
  b.ncols = 2;
  b.widths[0] = 8;
  b.widths[1] = 4;
  const uint64_t out_cap = slip_partition_out_bound(&b, kDests);
  T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, out_cap, ID_OUT, &out));
  fill_pattern<<<1024, 256>>>((uint8_t *)slip_region_ptr(src), src_len, kSeed);
  T_LAUNCH();
  T_CUDA(cudaDeviceSynchronize());
  const slip_region *locals[2] = {src, out};
  slip_queueset *qs;
  T_SLIP(slip_queueset_create(ctx, c.backend, kDests, 256, locals, 2, remotes.data(), (uint32_t)remotes.size(), &qs));
  slip_dev_queue *dq = slip_queueset_device(qs);

  // Case 1
  std::vector<Case1> cases = case1_list(c);
  for (size_t i = 0; i < cases.size(); i++) {
    const Case1 &k = cases[i];
    int st = launch_one(k.group, dq, Addr{T_DATA, k.doff}, Addr{T_SRC, k.soff}, k.len,
                        Addr{k.host_signal ? T_HSIG : T_DSIG, i * 8}, SLIP_SIGNAL_PACK(1, k.len));
    CHECK(st == SLIP_OK, "case 1 size %" PRIu64 ": status %d", k.len, st);
  }
  CHECK(slip_queueset_check(qs, 1) == SLIP_OK, "case 1: %s", slip_last_error());

  // Case 2
  pair_barrier(&p);
  {
    int *d_st;
    std::vector<int> st(8, -1);
    T_CUDA(cudaMalloc(&d_st, 8 * sizeof(int)));
    stress_send<<<8, 256>>>(dq, c.rounds, d_st);
    T_LAUNCH();
    wait_stream(0);
    T_CUDA(cudaMemcpy(st.data(), d_st, 8 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int q = 0; q < 8; q++) CHECK(st[q] == SLIP_OK, "case 2 queue %d: status %d", q, st[q]);
    T_CUDA(cudaFree(d_st));
  }

  // Case 3: partition, then one push launch to all destinations.
  {
    int64_t *keys, *rowid;
    int32_t *val;
    T_CUDA(cudaMalloc(&keys, c.rows * 8));
    T_CUDA(cudaMalloc(&rowid, c.rows * 8));
    T_CUDA(cudaMalloc(&val, c.rows * 4));
    make_batch<<<1024, 256>>>(keys, rowid, val, c.rows);
    T_LAUNCH();
    b.keys = keys;
    b.cols[0] = rowid;
    b.cols[1] = val;
    const uint64_t scratch_len = slip_partition_scratch_bytes(c.rows, kDests);
    void *scratch;
    uint64_t *d_off, *d_cnt;
    T_CUDA(cudaMalloc(&scratch, scratch_len));
    T_CUDA(cudaMalloc(&d_off, (kDests + 1) * 8));
    T_CUDA(cudaMalloc(&d_cnt, kDests * 8));
    T_SLIP(slip_partition(&b, kDests, slip_region_ptr(out), out_cap, d_off, d_cnt, scratch, scratch_len, 0));
    std::vector<uint64_t> off(kDests + 1), cnt(kDests);
    T_CUDA(cudaMemcpy(off.data(), d_off, off.size() * 8, cudaMemcpyDeviceToHost));
    T_CUDA(cudaMemcpy(cnt.data(), d_cnt, cnt.size() * 8, cudaMemcpyDeviceToHost));
    T_SLIP(slip_oob_send(p.fd, cnt.data(), kDests * 8));
    std::vector<slip_push_queue_cfg> cfg(kDests);
    std::vector<slip_push_item> items;
    std::vector<uint32_t> start;
    for (int d = 0; d < kDests; d++) {
      cfg[d] = {T_OUT, T_DEST0 + (uint32_t)d, T_HSIG, 0, (uint64_t)(128 + d) * 8};
      start.push_back((uint32_t)items.size());
      const uint64_t bytes = off[d + 1] - off[d];
      // The host checks each request against the imported region before the kernel sees it.
      T_SLIP(slip_remote_check(remotes[3 + d], ID_DEST0 + d, descs[3 + d].key, 0, bytes));
      for (uint64_t o = 0; o < bytes; o += 65536)
        items.push_back({off[d] + o, o, bytes - o < 65536 ? bytes - o : 65536});
    }
    start.push_back((uint32_t)items.size());
    slip_push_queue_cfg *d_cfg;
    slip_push_item *d_items;
    uint32_t *d_start;
    int *d_st;
    T_CUDA(cudaMalloc(&d_cfg, cfg.size() * sizeof cfg[0]));
    T_CUDA(cudaMalloc(&d_items, items.size() * sizeof items[0] + 1));
    T_CUDA(cudaMalloc(&d_start, start.size() * 4));
    T_CUDA(cudaMalloc(&d_st, kDests * sizeof(int)));
    T_CUDA(cudaMemcpy(d_cfg, cfg.data(), cfg.size() * sizeof cfg[0], cudaMemcpyHostToDevice));
    T_CUDA(cudaMemcpy(d_items, items.data(), items.size() * sizeof items[0], cudaMemcpyHostToDevice));
    T_CUDA(cudaMemcpy(d_start, start.data(), start.size() * 4, cudaMemcpyHostToDevice));
    T_CUDA(cudaDeviceSynchronize());
    T_SLIP(slip_push(dq, kDests, d_cfg, d_items, d_start, 8, 256, d_st, 0));
    wait_stream(0);
    std::vector<int> st(kDests);
    T_CUDA(cudaMemcpy(st.data(), d_st, kDests * sizeof(int), cudaMemcpyDeviceToHost));
    for (int d = 0; d < kDests; d++) CHECK(st[d] == SLIP_OK, "case 3 queue %d: status %d", d, st[d]);
    CHECK(slip_queueset_check(qs, 1) == SLIP_OK, "case 3: %s", slip_last_error());
    for (void *q : {(void *)keys, (void *)rowid, (void *)val, scratch, (void *)d_off, (void *)d_cnt, (void *)d_cfg,
                    (void *)d_items, (void *)d_start, (void *)d_st})
      T_CUDA(cudaFree(q));
  }

  // Case 4
  pair_barrier(&p);
  {
    const slip_remote *data = remotes[0];
    const uint64_t key = descs[0].key, len = c.data_len;
    char want[160];
    CHECK(slip_remote_check(data, ID_DATA, key ^ 1, 0, 64) == SLIP_ERR_BAD_KEY, "host check let a wrong key pass");
    CHECK(strstr(slip_last_error(), "presented for region 10 does not match") != nullptr, "got '%s'", slip_last_error());
    CHECK(slip_remote_check(data, ID_DATA, key, len - 10, 64) == SLIP_ERR_OUT_OF_RANGE, "host range check");
    snprintf(want, sizeof want, "offset %" PRIu64 " + length 64 outside region 10 (length %" PRIu64 ")", len - 10, len);
    CHECK(strstr(slip_last_error(), want) != nullptr, "got '%s', expected '%s'", slip_last_error(), want);
    CHECK(slip_remote_check(data, 99, key, 0, 64) == SLIP_ERR_BAD_REGION, "wrong region id accepted");

    // Out of range from device code: an error completion, nothing written, no signal.
    int st = launch_one(2, dq, Addr{T_DATA, len - 10}, Addr{T_SRC, 0}, 64, Addr{T_HSIG, 200 * 8},
                        SLIP_SIGNAL_PACK(1, 64));
    CHECK(st == SLIP_ERR_OUT_OF_RANGE, "device range check: status %d", st);
    CHECK(slip_queueset_check(qs, 1) == SLIP_ERR_OUT_OF_RANGE, "queue error record: %s", slip_last_error());
    CHECK(strstr(slip_last_error(), want) != nullptr, "got '%s', expected '%s'", slip_last_error(), want);
    // A table index that does not exist.
    st = launch_one(0, dq, Addr{77, 0}, Addr{T_SRC, 0}, 8, Addr{T_DSIG, 201 * 8}, 1);
    CHECK(st == SLIP_ERR_BAD_REGION, "bad table index: status %d", st);
    CHECK(slip_queueset_check(qs, 1) == SLIP_ERR_BAD_REGION, "%s", slip_last_error());
    // Writing into a source-only... signal slot misaligned.
    st = launch_one(1, dq, Addr{T_DATA, 0}, Addr{T_SRC, 0}, 8, Addr{T_DSIG, 201 * 8 + 4}, 1);
    CHECK(st == SLIP_ERR_INVALID_ARG, "misaligned signal: status %d", st);
    CHECK(slip_queueset_check(qs, 1) == SLIP_ERR_INVALID_ARG, "%s", slip_last_error());
    if (c.backend != SLIP_BACKEND_NVLINK) {
      // A forged key reaches the executor (or the NIC), which rejects it: error completion,
      // nothing written.
      T_SLIP(slip_queueset_set_key(qs, T_DATA, key ^ 0x40));
      st = launch_one(2, dq, Addr{T_DATA, 0}, Addr{T_SRC, 0}, 4096, Addr{T_DSIG, 201 * 8}, SLIP_SIGNAL_PACK(1, 4096));
      CHECK(st == SLIP_ERR_BAD_KEY, "executor key check: status %d", st);
      CHECK(slip_queueset_check(qs, 1) == SLIP_ERR_BAD_KEY, "%s", slip_last_error());
      CHECK(strstr(slip_last_error(), "presented for region 10 does not match its registered key") != nullptr,
            "got '%s'", slip_last_error());
      T_SLIP(slip_queueset_set_key(qs, T_DATA, key));
    }
#if SLIP_HAVE_GPUNETIO
    if (c.backend == SLIP_BACKEND_GPUNETIO) {
      int *d_st;
      T_CUDA(cudaMalloc(&d_st, sizeof(int)));
      raw_put<<<1, 1>>>(dq, ID_DATA, key, len - 10, ID_SRC, slip_region_key(src), 64, d_st);
      T_LAUNCH();
      wait_stream(0);
      T_CUDA(cudaMemcpy(&st, d_st, sizeof st, cudaMemcpyDeviceToHost));
      T_CUDA(cudaFree(d_st));
      CHECK(st == SLIP_ERR_PEER, "NIC range check: wait gave %d, expected an error completion (%d)", st, SLIP_ERR_PEER);
      CHECK(slip_queueset_check(qs, 1) == SLIP_ERR_OUT_OF_RANGE, "NIC range check: %s", slip_last_error());
      CHECK(strstr(slip_last_error(), want) != nullptr, "got '%s', expected '%s'", slip_last_error(), want);
      CHECK(strstr(slip_last_error(), "(CQE syndrome 0x13, remote access error)") != nullptr,
            "got '%s', expected the error CQE's syndrome", slip_last_error());
      slip_softnic_stats ns;
      slip_queueset_nic_stats(qs, &ns);
      CHECK(ns.errors >= 2, "software NIC counted %llu errors, expected the forged key and the range",
            (unsigned long long)ns.errors);
    }
#endif
    // Forged descriptors never map.
    slip_region_desc forged = descs[0];
    slip_remote *r = nullptr;
    forged.magic ^= 1;
    CHECK(slip_remote_import(ctx, &forged, sizeof forged, &r) == SLIP_ERR_BAD_DESCRIPTOR && r == nullptr, "magic");
    CHECK(strstr(slip_last_error(), "magic") != nullptr, "got '%s'", slip_last_error());
    forged = descs[2];  // host shm: a longer length than the memory behind it
    forged.length = (uint64_t)1 << 40;
    CHECK(slip_remote_import(ctx, &forged, sizeof forged, &r) == SLIP_ERR_BAD_DESCRIPTOR && r == nullptr, "length");
    CHECK(strstr(slip_last_error(), "exceeds the shared memory") != nullptr, "got '%s'", slip_last_error());
    printf("[%s] case 4 (sender): error completions and messages as expected: %s\n", backend_name(c.backend),
           g_fail ? "FAILED" : "ok");
  }
  pair_barrier(&p);
  T_SLIP(slip_oob_send(p.fd, &g_fail, sizeof g_fail));
  slip_queueset_destroy(qs);
  for (slip_remote *r : remotes) slip_remote_destroy(r);
  slip_region_destroy(src);
  slip_region_destroy(out);
  slip_ctx_destroy(ctx);
}

}  // namespace

int main(int argc, char **argv) {
  Config c;
  memset(&c, 0, sizeof c);
  c.backend = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "nvlink")) c.backend = SLIP_BACKEND_NVLINK;
    else if (!strcmp(argv[i], "proxy")) c.backend = SLIP_BACKEND_PROXY;
    else if (!strcmp(argv[i], "gpunetio")) c.backend = SLIP_BACKEND_GPUNETIO;
    else if (!strcmp(argv[i], "--small")) c.small = true;
  }
  if (c.backend < 0) {
    fprintf(stderr, "usage: %s nvlink|proxy|gpunetio [--small]\n", argv[0]);
    return 2;
  }
  if (c.backend == SLIP_BACKEND_GPUNETIO && slip_gpunetio_probe() != SLIP_OK) {
    printf("SKIP: %s\n", slip_last_error());
    return 77;
  }
  c.data_len = c.small ? (16ull << 20) : (96ull << 20);
  c.rows = c.small ? 100000 : 2000000;
  c.rounds = c.small ? 64 : 400;
  Pair p;
  const int rc = pair_start(&p, c.small ? 150 : 120);
  if (rc != 0) return rc;
  g_rank = p.rank;
  if (p.rank == 0) receiver(p, c);
  else sender(p, c);
  const int child = pair_finish(&p);
  if (p.rank == 1) return g_fail ? 1 : 0;
  if (child != 0) fprintf(stderr, "sender process exited with %d\n", child);
  const bool ok = g_fail == 0 && child == 0;
  printf("pair_test %s: %s\n", backend_name(c.backend), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
