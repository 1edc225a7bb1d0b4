// Hash partition of a device-resident columnar batch into per-destination contiguous blocks:
// histogram (per tile and partition), exclusive scan (partition-major, so each tile knows where
// its rows of each partition start), layout (block byte offsets), scatter.
#include <cub/device/device_scan.cuh>

#include "../../native/src/check.h"
#include "slipstream/kernels.h"

namespace {

constexpr int kThreads = 256;
#ifndef SLIP_PARTITION_ITEMS
#define SLIP_PARTITION_ITEMS 16
#endif
constexpr int kItems = SLIP_PARTITION_ITEMS;  // rows per thread per tile (a build option, for tuning)
constexpr uint64_t kTile = (uint64_t)kThreads * kItems;

struct Cols {
  const char *p[SLIP_PARTITION_MAX_COLS];
  uint32_t w[SLIP_PARTITION_MAX_COLS];
  uint32_t n;
};

__host__ __device__ inline uint64_t align16(uint64_t x) { return (x + 15) & ~15ull; }

// Warp-aggregated increment of counter[part]: one shared atomic per distinct partition in the
// warp instead of one per lane (two partitions would otherwise serialise 16 lanes each).
__device__ inline uint32_t warp_claim(uint32_t *counter, uint32_t part, bool valid) {
  const unsigned active = __ballot_sync(0xffffffffu, valid);
  const unsigned peers = __match_any_sync(0xffffffffu, valid ? part : 0xffffffffu) & active;
  const unsigned lane = threadIdx.x & 31u;
  uint32_t base = 0;
  if (valid) {
    const int leader = __ffs(peers) - 1;
    if ((int)lane == leader) base = atomicAdd(&counter[part], (uint32_t)__popc(peers));
    base = __shfl_sync(peers, base, leader);
    base += __popc(peers & ((1u << lane) - 1u));
  }
  return base;
}

__global__ void __launch_bounds__(kThreads) hist_kernel(const int64_t *__restrict__ keys, uint64_t rows,
                                                        uint32_t nparts, uint32_t ntiles,
                                                        uint32_t *__restrict__ counts) {
  extern __shared__ uint32_t hist[];
  for (uint32_t p = threadIdx.x; p < nparts; p += blockDim.x) hist[p] = 0;
  __syncthreads();
  const uint64_t base = (uint64_t)blockIdx.x * kTile;
#pragma unroll 4
  for (int k = 0; k < kItems; k++) {
    const uint64_t i = base + (uint64_t)k * kThreads + threadIdx.x;
    const bool valid = i < rows;
    const uint32_t part = valid ? slip_partition_of(keys[i], nparts) : 0u;
    if (nparts >= 64) {
      if (valid) atomicAdd(&hist[part], 1u);
    } else {
      warp_claim(hist, part, valid);
    }
  }
  __syncthreads();
  for (uint32_t p = threadIdx.x; p < nparts; p += blockDim.x) counts[(uint64_t)p * ntiles + blockIdx.x] = hist[p];
}

struct PartMeta {
  uint64_t first;   // first row of the partition in partition-major order
  uint64_t count;
  uint64_t col_off[SLIP_PARTITION_MAX_COLS + 1];  // byte offset of keys (0) and each column in the block
};

// One block: turns the scanned tile counts into counts, block sizes and byte offsets.
__global__ void layout_kernel(const uint64_t *__restrict__ scanned, uint64_t rows, uint32_t nparts, uint32_t ntiles,
                              Cols cols, PartMeta *__restrict__ meta, uint64_t *__restrict__ offsets,
                              uint64_t *__restrict__ counts) {
  __shared__ uint64_t sizes[SLIP_PARTITION_MAX_PARTS];
  for (uint32_t p = threadIdx.x; p < nparts; p += blockDim.x) {
    const uint64_t first = scanned[(uint64_t)p * ntiles];
    const uint64_t next = p + 1 < nparts ? scanned[(uint64_t)(p + 1) * ntiles] : rows;
    const uint64_t n = next - first;
    PartMeta m;
    m.first = first;
    m.count = n;
    uint64_t off = align16(n * 8);
    m.col_off[0] = 0;
    for (uint32_t c = 0; c < cols.n; c++) {
      m.col_off[c + 1] = off;
      off += align16(n * cols.w[c]);
    }
    meta[p] = m;
    counts[p] = n;
    sizes[p] = off;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // nparts <= 4096: a serial scan is a few microseconds
    uint64_t acc = 0;
    for (uint32_t p = 0; p < nparts; p++) {
      offsets[p] = acc;
      acc += sizes[p];
    }
    offsets[nparts] = acc;
  }
}

template <int W>
__device__ inline void put(char *dst, const char *src) {
  if constexpr (W == 1) *(uint8_t *)dst = *(const uint8_t *)src;
  else if constexpr (W == 2) *(uint16_t *)dst = *(const uint16_t *)src;
  else if constexpr (W == 4) *(uint32_t *)dst = *(const uint32_t *)src;
  else if constexpr (W == 8) *(uint64_t *)dst = *(const uint64_t *)src;
  else *(int4 *)dst = *(const int4 *)src;
}

__device__ inline void put_width(uint32_t w, char *dst, const char *src) {
  switch (w) {
    case 1: put<1>(dst, src); break;
    case 2: put<2>(dst, src); break;
    case 4: put<4>(dst, src); break;
    case 8: put<8>(dst, src); break;
    default: put<16>(dst, src); break;
  }
}

// Exclusive scan of v[0, n) in shared memory by one block (n <= 4096 here).
__device__ inline void block_exclusive_scan(uint32_t *v, uint32_t n) {
  __shared__ uint32_t warp_sums[kThreads / 32];
  const uint32_t per = (n + blockDim.x - 1) / blockDim.x;
  const uint32_t lo = threadIdx.x * per, hi = min(n, lo + per);
  uint32_t sum = 0;
  for (uint32_t i = lo; i < hi; i++) sum += v[i];
  // Inclusive scan of the per-thread sums across the block.
  uint32_t x = sum;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= (unsigned)d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = lane < blockDim.x / 32 ? warp_sums[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= (unsigned)d) w += y;
    }
    if (lane < blockDim.x / 32) warp_sums[lane] = w;
  }
  __syncthreads();
  uint32_t run = x - sum + (warp > 0 ? warp_sums[warp - 1] : 0);  // exclusive prefix of this thread
  for (uint32_t i = lo; i < hi; i++) {
    const uint32_t c = v[i];
    v[i] = run;
    run += c;
  }
  __syncthreads();
}

// Scatter through shared memory: each tile first orders its rows by partition (a local counting
// sort), then writes every column in that order, so consecutive threads store to consecutive
// addresses of one partition's block instead of scattering each warp's stores over many blocks.
__global__ void __launch_bounds__(kThreads) scatter_kernel(const int64_t *__restrict__ keys, uint64_t rows,
                                                           uint32_t nparts, uint32_t ntiles, Cols cols,
                                                           const uint64_t *__restrict__ scanned,
                                                           const PartMeta *__restrict__ meta,
                                                           const uint64_t *__restrict__ offsets,
                                                           char *__restrict__ out) {
  extern __shared__ uint32_t smem[];
  uint32_t *local = smem;                      // per partition: count, then local start
  uint32_t *base = smem + nparts;              // per partition: global row index - local start
  uint16_t *perm = (uint16_t *)(base + nparts);  // tile slot -> row within the tile
  uint16_t *slot_part = perm + kTile;            // tile slot -> partition
  const uint64_t tile0 = (uint64_t)blockIdx.x * kTile;
  const uint64_t left = rows - tile0;
  const uint32_t n = (uint32_t)(left < kTile ? left : kTile);
  for (uint32_t p = threadIdx.x; p < nparts; p += blockDim.x) local[p] = 0;
  __syncthreads();
  uint32_t part[kItems], rank[kItems];
  const bool many = nparts >= 64;  // little contention: plain shared atomics are cheaper
#pragma unroll
  for (int k = 0; k < kItems; k++) {
    const uint32_t r = (uint32_t)k * kThreads + threadIdx.x;
    const bool valid = r < n;
    part[k] = valid ? slip_partition_of(keys[tile0 + r], nparts) : 0u;
    if (many) rank[k] = valid ? atomicAdd(&local[part[k]], 1u) : 0u;
    else rank[k] = warp_claim(local, part[k], valid);
  }
  __syncthreads();
  // Global position of the tile's first row of p (from the partition-major scan) minus its local start.
  block_exclusive_scan(local, nparts);
  for (uint32_t p = threadIdx.x; p < nparts; p += blockDim.x)
    base[p] = (uint32_t)(scanned[(uint64_t)p * ntiles + blockIdx.x] - meta[p].first) - local[p];
#pragma unroll
  for (int k = 0; k < kItems; k++) {
    const uint32_t r = (uint32_t)k * kThreads + threadIdx.x;
    if (r < n) {
      const uint32_t s = local[part[k]] + rank[k];
      perm[s] = (uint16_t)r;
      slot_part[s] = (uint16_t)part[k];
    }
  }
  __syncthreads();
  for (uint32_t s = threadIdx.x; s < n; s += blockDim.x) {
    const uint32_t p = slot_part[s];
    const uint32_t pos = base[p] + s;  // modulo 2^32: base may be "negative", pos is not
    *(int64_t *)(out + offsets[p] + (uint64_t)pos * 8) = keys[tile0 + perm[s]];
  }
  for (uint32_t c = 0; c < cols.n; c++) {
    const uint32_t w = cols.w[c];
    const char *src = cols.p[c] + tile0 * w;
    for (uint32_t s = threadIdx.x; s < n; s += blockDim.x) {
      const uint32_t p = slot_part[s];
      const uint32_t pos = base[p] + s;
      put_width(w, out + offsets[p] + meta[p].col_off[c + 1] + (uint64_t)pos * w, src + (uint64_t)perm[s] * w);
    }
  }
}

size_t scatter_smem(uint32_t nparts) { return (size_t)nparts * 8 + kTile * 4; }

}  // namespace

extern "C" uint64_t slip_partition_block_bytes(const slip_batch *b, uint64_t n) {
  uint64_t s = align16(n * 8);
  for (uint32_t c = 0; c < b->ncols; c++) s += align16(n * b->widths[c]);
  return s;
}

extern "C" uint64_t slip_partition_out_bound(const slip_batch *b, uint32_t nparts) {
  uint64_t row = 8;
  for (uint32_t c = 0; c < b->ncols; c++) row += b->widths[c];
  return b->rows * row + (uint64_t)nparts * (b->ncols + 1) * 15;
}

static uint64_t scan_temp_bytes(uint64_t n) {
  size_t t = 0;
  // Size query only: no device work.
  cub::DeviceScan::ExclusiveSum(nullptr, t, (const uint32_t *)nullptr, (uint64_t *)nullptr, (int64_t)n);
  return t;
}

extern "C" uint64_t slip_partition_scratch_bytes(uint64_t rows, uint32_t nparts) {
  const uint64_t ntiles = (rows + kTile - 1) / kTile;
  const uint64_t n = ntiles * nparts;
  return align16(n * 4) + align16(n * 8) + align16((uint64_t)nparts * sizeof(PartMeta)) + align16(scan_temp_bytes(n));
}

extern "C" slip_status slip_partition(const slip_batch *b, uint32_t nparts, void *d_out, uint64_t out_cap,
                                      uint64_t *d_offsets, uint64_t *d_counts, void *d_scratch,
                                      uint64_t scratch_bytes, cudaStream_t stream) {
  slip_status st = SLIP_OK;
  uint64_t ntiles = 0, n = 0, need = 0;
  size_t temp = 0;
  char *s = (char *)d_scratch;
  uint32_t *tile_counts = nullptr;
  uint64_t *scanned = nullptr;
  PartMeta *meta = nullptr;
  Cols cols;
  if (!b || !d_offsets || !d_counts) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_partition: null argument");
  if (nparts == 0 || nparts > SLIP_PARTITION_MAX_PARTS)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%u partitions, expected 1..%d", nparts, SLIP_PARTITION_MAX_PARTS);
  if (b->ncols > SLIP_PARTITION_MAX_COLS)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%u payload columns, expected at most %d", b->ncols, SLIP_PARTITION_MAX_COLS);
  if (b->rows >= (1ull << 32))  // row cursors within a partition are 32-bit
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%llu rows, too many for one batch", (unsigned long long)b->rows);
  memset(&cols, 0, sizeof cols);
  cols.n = b->ncols;
  for (uint32_t c = 0; c < b->ncols; c++) {
    const uint32_t w = b->widths[c];
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "column %u: width %u, expected 1, 2, 4, 8 or 16", c, w);
    if (b->rows && (!b->cols[c] || ((uintptr_t)b->cols[c] % w) != 0))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "column %u: null or not aligned to its width %u", c, w);
    cols.p[c] = (const char *)b->cols[c];
    cols.w[c] = w;
  }
  if (b->rows && !b->keys) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_partition: null key column");
  if (slip_partition_out_bound(b, nparts) > out_cap)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "output capacity %llu, expected at least %llu", (unsigned long long)out_cap,
              (unsigned long long)slip_partition_out_bound(b, nparts));
  need = slip_partition_scratch_bytes(b->rows, nparts);
  if (scratch_bytes < need)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "scratch of %llu bytes, expected at least %llu", (unsigned long long)scratch_bytes,
              (unsigned long long)need);
  ntiles = (b->rows + kTile - 1) / kTile;
  if (ntiles == 0) ntiles = 1;  // zero rows: one empty tile keeps the layout code uniform
  n = ntiles * nparts;
  tile_counts = (uint32_t *)s;
  s += align16(n * 4);
  scanned = (uint64_t *)s;
  s += align16(n * 8);
  meta = (PartMeta *)s;
  s += align16((uint64_t)nparts * sizeof(PartMeta));
  temp = (size_t)scan_temp_bytes(n);
  hist_kernel<<<(unsigned)ntiles, kThreads, nparts * sizeof(uint32_t), stream>>>(b->keys, b->rows, nparts,
                                                                                 (uint32_t)ntiles, tile_counts);
  SLIP_LAUNCH_CHECK();
  SLIP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(s, temp, tile_counts, scanned, (int64_t)n, stream));
  layout_kernel<<<1, 1024, 0, stream>>>(scanned, b->rows, nparts, (uint32_t)ntiles, cols, meta, d_offsets, d_counts);
  SLIP_LAUNCH_CHECK();
  if (b->rows > 0) {
    SLIP_CUDA_CHECK(cudaFuncSetAttribute(scatter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)scatter_smem(SLIP_PARTITION_MAX_PARTS)));
    scatter_kernel<<<(unsigned)ntiles, kThreads, scatter_smem(nparts), stream>>>(
        b->keys, b->rows, nparts, (uint32_t)ntiles, cols, scanned, meta, d_offsets, (char *)d_out);
    SLIP_LAUNCH_CHECK();
  }
done:
  return st;
}
