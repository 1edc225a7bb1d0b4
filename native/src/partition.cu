// Hash partition of a device-resident columnar batch into per-destination contiguous blocks.
//
// The rows are cut into tiles of 256 x items rows.
//   1. hist_kernel: per tile and partition, the number of rows (reads the keys once).
//   2. CUB exclusive scan of those counts in partition-major order: where each tile's rows of
//      each partition start.
//   3. layout_kernel: block sizes, byte offsets and, per column and partition, the byte offset of
//      the column's section.
//   4. scatter_kernel: a grid of as many CUDA blocks as the device holds at once walks the tiles
//      (block b takes tiles b, b + grid, ...), so the tiles in flight are neighbours and so are
//      their stores within each section. A block ranks a tile's rows by partition in shared
//      memory, so that consecutive slots hold rows of one partition, then writes the keys and each
//      column in slot order: neighbouring threads store to neighbouring addresses of one section.
//      The partition and slot of a row are computed once per tile and reused for every column;
//      while one column is written out, the next is being loaded, and during the last column the
//      next tile's keys.
// Within a block the order of rows is unspecified (it depends on the order of shared atomics).
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "check.h"
#include "slipstream/kernels.h"
#include "slipstream/partition_tuning.h"

namespace {

constexpr int kThreads = 256;  // histogram and scatter blocks
constexpr int kLayoutThreads = 1024;
constexpr uint32_t kMinTile = kThreads * 8;
constexpr uint32_t kDefaultWaves = 1;
constexpr size_t kColbaseSmem = 48 * 1024;  // the scatter keeps the section offsets in shared memory up to this
constexpr uint32_t kBallotMaxParts = 32;  // up to here, warps aggregate their shared atomics by ballots

struct Cols {
  const char *p[SLIP_PARTITION_MAX_COLS];
  uint32_t w[SLIP_PARTITION_MAX_COLS];
  uint32_t n;
};

__host__ __device__ inline uint64_t align16(uint64_t x) { return (x + 15) & ~15ull; }

// Bits of a partition index when warps aggregate by ballots, or -1 for plain shared atomics.
int ballot_bits(uint32_t nparts) {
  if (nparts > kBallotMaxParts) return -1;
  int bits = 0;
  while ((1u << bits) < nparts) bits++;
  return bits;
}

// Lanes of the warp whose row is valid and in partition q (all lanes call it; part < 2^bits).
__device__ inline unsigned lanes_of(uint32_t q, uint32_t part, bool valid, int bits) {
  unsigned m = __ballot_sync(0xffffffffu, valid);
  for (int b = 0; b < bits; b++) {
    const unsigned set = __ballot_sync(0xffffffffu, (part >> b) & 1u);
    m &= ((q >> b) & 1u) ? set : ~set;
  }
  return m;
}

// Rank of this row among the tile's rows of its partition: counter[part] is advanced by one
// shared atomic per distinct partition in the warp (bits >= 0) or per row (bits < 0). All lanes call it.
__device__ inline uint32_t claim(uint32_t *counter, uint32_t part, bool valid, int bits) {
  if (bits < 0) return valid ? atomicAdd(&counter[part], 1u) : 0u;
  const unsigned lane = threadIdx.x & 31u;
  const unsigned peers = lanes_of(part, part, valid, bits);
  const int leader = peers ? __ffs(peers) - 1 : (int)lane;
  uint32_t first = 0;
  if (valid && (int)lane == leader) first = atomicAdd(&counter[part], (uint32_t)__popc(peers));
  first = __shfl_sync(0xffffffffu, first, leader);
  return first + (uint32_t)__popc(peers & ((1u << lane) - 1u));
}

// Loads rows [0, n) of a tile, row k * kThreads + threadIdx.x into v[k] (zero beyond n).
template <typename V, int I>
__device__ inline void load_tile(V (&v)[I], const V *__restrict__ src, uint32_t n) {
#pragma unroll
  for (int k = 0; k < I; k++) {
    const uint32_t r = (uint32_t)k * kThreads + threadIdx.x;
    v[k] = r < n ? src[r] : V{};
  }
}

__device__ inline uint32_t tile_rows(uint32_t tile, uint64_t left) { return left < tile ? (uint32_t)left : tile; }

// The keys of tile `tile` (of T rows) into key[].
template <int I>
__device__ inline void load_keys(uint64_t (&key)[I], const int64_t *keys, uint64_t rows, uint32_t tile) {
  constexpr uint32_t T = kThreads * I;
  load_tile<uint64_t, I>(key, (const uint64_t *)keys + (uint64_t)tile * T, tile_rows(T, rows - (uint64_t)tile * T));
}

// Rows of each partition in each tile: counts[p * ntiles + tile]. Block b counts tiles b, b + grid, ...
template <int I>
__global__ void __launch_bounds__(kThreads, I == 8 ? 4 : 3) hist_kernel(const int64_t *__restrict__ keys, uint64_t rows,
                                                        uint32_t nparts, uint32_t ntiles, int bits,
                                                        uint16_t *__restrict__ counts) {
  constexpr uint32_t T = kThreads * I;
  extern __shared__ uint32_t hist[];
  for (uint32_t p = threadIdx.x; p < nparts; p += kThreads) hist[p] = 0;
  const uint32_t lane = threadIdx.x & 31u;
  uint64_t key[I];
  uint32_t tile = blockIdx.x;
  if (tile < ntiles) load_keys<I>(key, keys, rows, tile);
  __syncthreads();
  for (; tile < ntiles; tile += gridDim.x) {
    const uint32_t n = tile_rows(T, rows - (uint64_t)tile * T);
    uint32_t part[I];
#pragma unroll
    for (int k = 0; k < I; k++) part[k] = slip_partition_of((int64_t)key[k], nparts);
    const uint32_t next = tile + gridDim.x;  // its keys are in flight while this tile is counted
    if (next < ntiles) load_keys<I>(key, keys, rows, next);
    if (bits >= 0) {
      uint32_t mine = 0;  // this warp's rows of partition `lane`
#pragma unroll
      for (int k = 0; k < I; k++)
        mine += (uint32_t)__popc(lanes_of(lane, part[k], (uint32_t)k * kThreads + threadIdx.x < n, bits));
      if (lane < nparts && mine) atomicAdd(&hist[lane], mine);
    } else {
#pragma unroll
      for (int k = 0; k < I; k++)
        if ((uint32_t)k * kThreads + threadIdx.x < n) atomicAdd(&hist[part[k]], 1u);
    }
    __syncthreads();
    for (uint32_t p = threadIdx.x; p < nparts; p += kThreads) {
      counts[(uint64_t)p * ntiles + tile] = (uint16_t)hist[p];
      hist[p] = 0;
    }
    __syncthreads();
  }
}

__host__ __device__ inline uint64_t block_bytes(const Cols &cols, uint64_t n) {
  uint64_t s = align16(n * 8);
  for (uint32_t c = 0; c < cols.n; c++) s += align16(n * cols.w[c]);
  return s;
}

// One block: rows per partition, block offsets, and colbase[j * nparts + p], the byte offset in
// the output of column j (0: keys) of partition p.
__global__ void __launch_bounds__(kLayoutThreads) layout_kernel(const uint32_t *__restrict__ scanned, uint64_t rows,
                                                                uint32_t nparts, uint32_t ntiles, Cols cols,
                                                                uint64_t *__restrict__ offsets,
                                                                uint64_t *__restrict__ counts,
                                                                uint64_t *__restrict__ colbase) {
  using Scan = cub::BlockScan<uint64_t, kLayoutThreads>;
  __shared__ typename Scan::TempStorage tmp;
  constexpr int kPer = SLIP_PARTITION_MAX_PARTS / kLayoutThreads;
  uint64_t n[kPer], off[kPer];
#pragma unroll
  for (int q = 0; q < kPer; q++) {
    const uint32_t p = threadIdx.x * kPer + q;
    n[q] = 0;
    if (p < nparts) {
      const uint64_t first = scanned[(uint64_t)p * ntiles];
      const uint64_t next = p + 1 < nparts ? scanned[(uint64_t)(p + 1) * ntiles] : rows;
      n[q] = next - first;
    }
    off[q] = p < nparts ? block_bytes(cols, n[q]) : 0;
  }
  uint64_t total;
  Scan(tmp).ExclusiveSum(off, off, total);
#pragma unroll
  for (int q = 0; q < kPer; q++) {
    const uint32_t p = threadIdx.x * kPer + q;
    if (p >= nparts) continue;
    counts[p] = n[q];
    offsets[p] = off[q];
    uint64_t o = off[q];
    colbase[p] = o;
    o += align16(n[q] * 8);
    for (uint32_t c = 0; c < cols.n; c++) {
      colbase[(uint64_t)(c + 1) * nparts + p] = o;
      o += align16(n[q] * cols.w[c]);
    }
  }
  if (threadIdx.x == 0) offsets[nparts] = total;
}

// Exclusive scan of v[0, n) in shared memory by one block of kThreads (n <= 4096 here).
__device__ inline void block_exclusive_scan(uint32_t *v, uint32_t n) {
  __shared__ uint32_t warp_sums[kThreads / 32];
  const uint32_t per = (n + kThreads - 1) / kThreads;
  const uint32_t lo = min(n, threadIdx.x * per), hi = min(n, lo + per);
  uint32_t sum = 0;
  for (uint32_t i = lo; i < hi; i++) sum += v[i];
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
    uint32_t w = lane < kThreads / 32 ? warp_sums[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= (unsigned)d) w += y;
    }
    if (lane < kThreads / 32) warp_sums[lane] = w;
  }
  __syncthreads();
  uint32_t run = x - sum + (warp > 0 ? warp_sums[warp - 1] : 0);
  for (uint32_t i = lo; i < hi; i++) {
    const uint32_t c = v[i];
    v[i] = run;
    run += c;
  }
  __syncthreads();
}

// Writes slots [0, n) of a staged column: slot s of partition p goes to row base[p] + s of p's
// section, which starts at byte colbase[p] of the output.
template <typename V, int I>
__device__ inline void out_tile(const V *stage, const uint16_t *slot_part, const uint32_t *base,
                                const uint64_t *colbase, uint32_t n, char *__restrict__ out) {
#pragma unroll 4  // everything read here is in shared memory: a deeper unroll only adds registers
  for (int k = 0; k < I; k++) {
    const uint32_t s = (uint32_t)k * kThreads + threadIdx.x;
    if (s < n) {
      const uint32_t p = slot_part[s];
      const uint32_t pos = base[p] + s;  // modulo 2^32: base may be "negative", pos is not
      *(V *)(out + colbase[p] + (uint64_t)pos * sizeof(V)) = stage[s];
    }
  }
}

template <int I>
__device__ inline void out_width(uint32_t w, const char *stage, const uint16_t *slot_part, const uint32_t *base,
                                 const uint64_t *colbase, uint32_t n, char *__restrict__ out) {
  switch (w) {
    case 1: out_tile<uint8_t, I>((const uint8_t *)stage, slot_part, base, colbase, n, out); break;
    case 2: out_tile<uint16_t, I>((const uint16_t *)stage, slot_part, base, colbase, n, out); break;
    case 4: out_tile<uint32_t, I>((const uint32_t *)stage, slot_part, base, colbase, n, out); break;
    case 8: out_tile<uint64_t, I>((const uint64_t *)stage, slot_part, base, colbase, n, out); break;
    default: out_tile<uint4, I>((const uint4 *)stage, slot_part, base, colbase, n, out); break;
  }
}

// Loads the next column's tile, writes out the current staged column, then stages the next one.
// At most 128 bytes of values per thread are held: a wider tile is loaded and staged in two
// halves, the second after the write-out (registers, not latency, limit the blocks per SM).
template <typename V, int I>
__device__ inline void column_step(const char *src, const uint32_t (&slot)[I], char *next, uint32_t wcur,
                                   const char *cur, const uint16_t *slot_part, const uint32_t *base,
                                   const uint64_t *colbase, uint32_t n, char *__restrict__ out) {
  constexpr int H = sizeof(V) * I > 128 ? I / 2 : I;
  V v[H];
  for (int k0 = 0; k0 < I; k0 += H) {
#pragma unroll
    for (int k = 0; k < H; k++) {
      const uint32_t r = (uint32_t)(k0 + k) * kThreads + threadIdx.x;
      v[k] = r < n ? ((const V *)src)[r] : V{};
    }
    if (k0 == 0) out_width<I>(wcur, cur, slot_part, base, colbase, n, out);
#pragma unroll
    for (int k = 0; k < H; k++)
      if ((uint32_t)(k0 + k) * kThreads + threadIdx.x < n) ((V *)next)[slot[k0 + k]] = v[k];
  }
}

// Shared memory of the scatter: per partition its tile count/first slot, base and first row;
// per slot its partition; two staging buffers; then, if they fit, the section offsets.
size_t scatter_smem(uint32_t nparts, uint32_t tile, uint32_t maxw) {
  return align16((size_t)nparts * 12 + (size_t)tile * 2) + 2 * (size_t)tile * maxw;
}

size_t colbase_bytes(uint32_t nparts, uint32_t ncols) { return (size_t)(ncols + 1) * nparts * 8; }

// kBlocks: blocks per SM the registers must allow (shared memory may allow fewer). At 16 rows per
// thread, 2 fit without spills and 3 with a few.
constexpr int kPrefetch = 1;  // per thread, the next tile's scanned counts of partitions tid + 256 j held in registers

template <int I, int kBlocks>
__global__ void __launch_bounds__(kThreads, kBlocks) scatter_kernel(const int64_t *__restrict__ keys, uint64_t rows,
                                                           uint32_t nparts, uint32_t ntiles, int bits,
                                                           const Cols cols_arg, uint32_t maxw, bool colbase_shared,
                                                           const uint32_t *__restrict__ scanned,
                                                           const uint64_t *__restrict__ colbase_global,
                                                           char *__restrict__ out) {
  constexpr uint32_t T = kThreads * I;
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t *cnt = (uint32_t *)smem;    // per partition: rows in this tile, then their first slot
  uint32_t *base = cnt + nparts;       // per partition: row in its section of slot 0
  uint32_t *first = base + nparts;     // per partition: scanned position of its first row
  uint16_t *slot_part = (uint16_t *)(first + nparts);  // per slot: partition
  char *stage0 = (char *)smem + align16((uint64_t)nparts * 12 + (uint64_t)T * 2);
  char *stage1 = stage0 + (uint64_t)T * maxw;
  __shared__ Cols cols;  // indexed by column below: from shared memory rather than a local copy
  if (threadIdx.x == 0) cols = cols_arg;
  // Section offsets, the same for every tile: copied once into shared memory where they fit.
  const uint64_t *colbase = colbase_global;
  if (colbase_shared) {
    uint64_t *cb = (uint64_t *)(stage1 + (uint64_t)T * maxw);
    for (uint32_t i = threadIdx.x; i < (cols_arg.n + 1) * nparts; i += kThreads) cb[i] = colbase_global[i];
    colbase = cb;
  }
  for (uint32_t p = threadIdx.x; p < nparts; p += kThreads) first[p] = scanned[(uint64_t)p * ntiles];
  uint64_t key[I];
  uint32_t tile = blockIdx.x;
  if (tile < ntiles) load_keys<I>(key, keys, rows, tile);
  __syncthreads();
  uint32_t pre[kPrefetch];  // scanned[p * ntiles + tile] for p = threadIdx.x + j * kThreads
#pragma unroll
  for (int j = 0; j < kPrefetch; j++) {
    const uint32_t p = threadIdx.x + j * kThreads;
    pre[j] = p < nparts && tile < ntiles ? scanned[(uint64_t)p * ntiles + tile] : 0;
  }
  for (; tile < ntiles; tile += gridDim.x) {
    const uint64_t t0 = (uint64_t)tile * T;
    const uint32_t n = tile_rows(T, rows - t0);
    // Row in p's section of the tile's first row of p (before its slot is subtracted).
#pragma unroll
    for (int j = 0; j < kPrefetch; j++) {
      const uint32_t p = threadIdx.x + j * kThreads;
      if (p < nparts) {
        cnt[p] = 0;
        base[p] = pre[j] - first[p];
      }
    }
    for (uint32_t p = threadIdx.x + kPrefetch * kThreads; p < nparts; p += kThreads) {
      cnt[p] = 0;
      base[p] = scanned[(uint64_t)p * ntiles + tile] - first[p];
    }
    __syncthreads();
    uint32_t part[I], slot[I];
#pragma unroll
    for (int k = 0; k < I; k++) {
      const bool valid = (uint32_t)k * kThreads + threadIdx.x < n;
      part[k] = valid ? slip_partition_of((int64_t)key[k], nparts) : 0u;
      slot[k] = claim(cnt, part[k], valid, bits);
    }
    __syncthreads();
    block_exclusive_scan(cnt, nparts);
    for (uint32_t p = threadIdx.x; p < nparts; p += kThreads) base[p] -= cnt[p];
#pragma unroll
    for (int k = 0; k < I; k++) {
      if ((uint32_t)k * kThreads + threadIdx.x < n) {
        const uint32_t s = cnt[part[k]] + slot[k];
        slot[k] = s;
        slot_part[s] = (uint16_t)part[k];
        ((uint64_t *)stage0)[s] = key[k];
      }
    }
    __syncthreads();
    // Column j (0: keys, j: payload column j - 1) is staged in stage0 (j even) or stage1 (j odd).
    for (uint32_t j = 0; j <= cols.n; j++) {
      const uint32_t wcur = j == 0 ? 8u : cols.w[j - 1];
      const char *cur = (j & 1) ? stage1 : stage0;
      char *next = (j & 1) ? stage0 : stage1;
      const uint64_t *cb = colbase + (uint64_t)j * nparts;
      if (j < cols.n) {
        const uint32_t w = cols.w[j];
        const char *src = cols.p[j] + t0 * w;
        switch (w) {
          case 1: column_step<uint8_t, I>(src, slot, next, wcur, cur, slot_part, base, cb, n, out); break;
          case 2: column_step<uint16_t, I>(src, slot, next, wcur, cur, slot_part, base, cb, n, out); break;
          case 4: column_step<uint32_t, I>(src, slot, next, wcur, cur, slot_part, base, cb, n, out); break;
          case 8: column_step<uint64_t, I>(src, slot, next, wcur, cur, slot_part, base, cb, n, out); break;
          default: column_step<uint4, I>(src, slot, next, wcur, cur, slot_part, base, cb, n, out); break;
        }
      } else {
        // Last column: the block's next tile's keys and counts are loaded while it is written out.
        const uint32_t nt = tile + gridDim.x;
        if (nt < ntiles) {
          load_keys<I>(key, keys, rows, nt);
#pragma unroll
          for (int j = 0; j < kPrefetch; j++) {
            const uint32_t p = threadIdx.x + j * kThreads;
            if (p < nparts) pre[j] = scanned[(uint64_t)p * ntiles + nt];
          }
        }
        out_width<I>(wcur, cur, slot_part, base, cb, n, out);
      }
      __syncthreads();
    }
  }
}

uint64_t tiles_of(uint64_t rows, uint32_t tile) {
  const uint64_t t = (rows + tile - 1) / tile;
  return t ? t : 1;
}

uint64_t scan_temp_bytes(uint64_t n) {
  size_t t = 0;
  // Size query only: no device work.
  cub::DeviceScan::ExclusiveScan(nullptr, t, (const uint16_t *)nullptr, (uint32_t *)nullptr,
                                 cuda::std::plus<uint32_t>{}, (uint32_t)0, (int64_t)n);
  return t;
}

// Grid of a persistent kernel: `waves` times the blocks of it the device holds at once, at most one per tile.
template <typename K>
slip_status grid_of(K kernel, size_t smem, uint32_t waves, uint64_t ntiles, uint32_t *grid) {
  slip_status st = SLIP_OK;
  int dev = 0, sms = 0, per_sm = 0;
  SLIP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  SLIP_CUDA_CHECK(cudaGetDevice(&dev));
  SLIP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  SLIP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  if (per_sm < 1) per_sm = 1;
  {
    const uint64_t g = (uint64_t)waves * sms * per_sm;
    *grid = (uint32_t)(g < ntiles ? g : ntiles);
  }
done:
  return st;
}

struct Launch {
  const slip_batch *b;
  uint32_t nparts, ntiles, maxw;
  int bits;
  Cols cols;
  uint16_t *counts;
  uint32_t *scanned;
  uint64_t *colbase;
  uint64_t *offsets, *out_counts;
  char *scan_temp;
  size_t scan_temp_bytes;
  char *out;
  uint32_t waves;
  cudaStream_t stream;
};

template <int I, int kBlocks>
slip_status run_partition(const Launch &l) {
  slip_status st = SLIP_OK;
  const uint64_t n = (uint64_t)l.ntiles * l.nparts;
  uint32_t hist_grid = 0, scatter_grid = 0;
  const bool cb_shared = colbase_bytes(l.nparts, l.cols.n) <= kColbaseSmem;
  const size_t smem =
      scatter_smem(l.nparts, kThreads * I, l.maxw) + (cb_shared ? colbase_bytes(l.nparts, l.cols.n) : 0);
  size_t temp = l.scan_temp_bytes;
  SLIP_CHECK(grid_of(hist_kernel<I>, l.nparts * sizeof(uint32_t), l.waves, l.ntiles, &hist_grid));
  hist_kernel<I><<<hist_grid, kThreads, l.nparts * sizeof(uint32_t), l.stream>>>(l.b->keys, l.b->rows, l.nparts,
                                                                                 l.ntiles, l.bits, l.counts);
  SLIP_LAUNCH_CHECK();
  SLIP_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(l.scan_temp, temp, l.counts, l.scanned, cuda::std::plus<uint32_t>{},
                                                 (uint32_t)0, (int64_t)n, l.stream));
  layout_kernel<<<1, kLayoutThreads, 0, l.stream>>>(l.scanned, l.b->rows, l.nparts, l.ntiles, l.cols, l.offsets,
                                                    l.out_counts, l.colbase);
  SLIP_LAUNCH_CHECK();
  if (l.b->rows > 0) {
    SLIP_CHECK(grid_of(scatter_kernel<I, kBlocks>, smem, l.waves, l.ntiles, &scatter_grid));
    scatter_kernel<I, kBlocks><<<scatter_grid, kThreads, smem, l.stream>>>(
        l.b->keys, l.b->rows, l.nparts, l.ntiles, l.bits, l.cols, l.maxw, cb_shared, l.scanned, l.colbase, l.out);
    SLIP_LAUNCH_CHECK();
  }
done:
  return st;
}

// Rows per thread: short tiles keep 3 blocks per SM, which pays with few partitions; long tiles
// give longer runs per partition, which pays with many.
uint32_t default_items(uint32_t nparts) { return nparts <= 32 ? 8 : 16; }
uint32_t default_blocks(uint32_t items) { return items == 8 ? 3 : 2; }

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

extern "C" uint64_t slip_partition_scratch_bytes(uint64_t rows, uint32_t nparts) {
  const uint64_t n = tiles_of(rows, kMinTile) * nparts;
  return align16(n * 2) + align16(n * 4) + align16((uint64_t)(SLIP_PARTITION_MAX_COLS + 1) * nparts * 8) +
         align16(scan_temp_bytes(n));
}

extern "C" slip_status slip_partition_tuned(const slip_batch *b, uint32_t nparts, void *d_out, uint64_t out_cap,
                                            uint64_t *d_offsets, uint64_t *d_counts, void *d_scratch,
                                            uint64_t scratch_bytes, const slip_partition_tuning *tuning,
                                            cudaStream_t stream) {
  slip_status st = SLIP_OK;
  uint64_t need = 0, ntiles_max = 0;
  char *s = (char *)d_scratch;
  uint32_t items = 0, blocks = 0;
  Launch l;
  memset(&l, 0, sizeof l);
  if (!b || !d_offsets || !d_counts) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_partition: null argument");
  if (nparts == 0 || nparts > SLIP_PARTITION_MAX_PARTS)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%u partitions, expected 1..%d", nparts, SLIP_PARTITION_MAX_PARTS);
  items = tuning && tuning->items ? tuning->items : default_items(nparts);
  if (items != 8 && items != 16)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "tuning: %u items per thread, expected 8 or 16", items);
  blocks = tuning && tuning->blocks_per_sm ? tuning->blocks_per_sm : default_blocks(items);
  if (blocks != 2 && blocks != 3) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "tuning: %u blocks per SM, expected 2 or 3", blocks);
  if (b->ncols > SLIP_PARTITION_MAX_COLS)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%u payload columns, expected at most %d", b->ncols, SLIP_PARTITION_MAX_COLS);
  if (b->rows >= (1ull << 32))  // row positions within a partition are 32-bit
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "%llu rows, too many for one batch", (unsigned long long)b->rows);
  l.maxw = 8;
  l.cols.n = b->ncols;
  for (uint32_t c = 0; c < b->ncols; c++) {
    const uint32_t w = b->widths[c];
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "column %u: width %u, expected 1, 2, 4, 8 or 16", c, w);
    if (b->rows && (!b->cols[c] || ((uintptr_t)b->cols[c] % w) != 0))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "column %u: null or not aligned to its width %u", c, w);
    l.cols.p[c] = (const char *)b->cols[c];
    l.cols.w[c] = w;
    if (w > l.maxw) l.maxw = w;
  }
  if (b->rows && (!b->keys || ((uintptr_t)b->keys % 8) != 0))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_partition: key column null or not 8-byte aligned");
  if (slip_partition_out_bound(b, nparts) > out_cap)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "output capacity %llu, expected at least %llu", (unsigned long long)out_cap,
              (unsigned long long)slip_partition_out_bound(b, nparts));
  if (b->rows && (!d_out || ((uintptr_t)d_out % 16) != 0))  // sections are 16-byte aligned offsets
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_partition: output null or not 16-byte aligned");
  need = slip_partition_scratch_bytes(b->rows, nparts);
  if (scratch_bytes < need)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "scratch of %llu bytes, expected at least %llu", (unsigned long long)scratch_bytes,
              (unsigned long long)need);
  // The scratch is laid out for the smallest tile, whatever the tile of this call.
  ntiles_max = tiles_of(b->rows, kMinTile);
  l.b = b;
  l.nparts = nparts;
  l.ntiles = (uint32_t)tiles_of(b->rows, kThreads * items);
  l.bits = ballot_bits(nparts);
  l.counts = (uint16_t *)s;
  s += align16(ntiles_max * nparts * 2);
  l.scanned = (uint32_t *)s;
  s += align16(ntiles_max * nparts * 4);
  l.colbase = (uint64_t *)s;
  s += align16((uint64_t)(SLIP_PARTITION_MAX_COLS + 1) * nparts * 8);
  l.scan_temp = s;
  l.scan_temp_bytes = (size_t)scan_temp_bytes((uint64_t)l.ntiles * nparts);
  l.offsets = d_offsets;
  l.out_counts = d_counts;
  l.out = (char *)d_out;
  l.waves = tuning && tuning->waves ? tuning->waves : kDefaultWaves;
  l.stream = stream;
  if (items == 8) SLIP_CHECK((run_partition<8, 3>(l)));
  else if (blocks == 3) SLIP_CHECK((run_partition<16, 3>(l)));
  else SLIP_CHECK((run_partition<16, 2>(l)));
done:
  return st;
}

extern "C" slip_status slip_partition(const slip_batch *b, uint32_t nparts, void *d_out, uint64_t out_cap,
                                      uint64_t *d_offsets, uint64_t *d_counts, void *d_scratch,
                                      uint64_t scratch_bytes, cudaStream_t stream) {
  return slip_partition_tuned(b, nparts, d_out, out_cap, d_offsets, d_counts, d_scratch, scratch_bytes, nullptr,
                              stream);
}
