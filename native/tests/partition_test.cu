// GPU test of the partition kernel against a CPU reference: every row lands exactly once, in the
// block of its partition, with all payload columns intact; block offsets follow the documented
// layout. Sizes include 0, 1 and counts that are not multiples of the tile.
#include <inttypes.h>

#include <algorithm>
#include <vector>

#include "pair_common.cuh"
#include "slipstream/kernels.h"
#include "slipstream/partition_tuning.h"

namespace {
int g_fail = 0;
#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      g_fail++;                                                             \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
    }                                                                       \
  } while (0)

__host__ __device__ inline int64_t key_of(uint64_t i, uint64_t seed) {
  return (int64_t)slip_hash64(i * 31 + seed) % 1000003 - 500000;  // negative keys and duplicates
}

// Columns: row id (8 B), 4 B, 2 B, 1 B, 16 B values derived from the row id.
__global__ void make(int64_t *k, int64_t *c0, uint32_t *c1, uint16_t *c2, uint8_t *c3, int4 *c4, uint64_t n,
                     uint64_t seed) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    k[i] = key_of(i, seed);
    c0[i] = (int64_t)i;
    c1[i] = (uint32_t)(i * 2654435761u);
    c2[i] = (uint16_t)(i * 31);
    c3[i] = (uint8_t)(i * 7);
    c4[i] = make_int4((int)i, (int)~i, (int)(i >> 3), 42);
  }
}

uint64_t a16(uint64_t x) { return (x + 15) / 16 * 16; }

// ncols: the first ncols of the five columns; tuning: null for slip_partition's default.
void run(uint64_t rows, uint32_t nparts, uint64_t seed, uint32_t ncols = 5, const slip_partition_tuning *tuning = nullptr) {
  const uint32_t widths[5] = {8, 4, 2, 1, 16};
  slip_batch b;
  memset(&b, 0, sizeof b);
  b.rows = rows;
  b.ncols = ncols;
  void *cols[5];
  int64_t *keys;
  const uint64_t alloc = rows ? rows : 1;
  T_CUDA(cudaMalloc(&keys, alloc * 8));
  for (int c = 0; c < 5; c++) {
    b.widths[c] = widths[c];
    T_CUDA(cudaMalloc(&cols[c], alloc * widths[c]));
    b.cols[c] = cols[c];
  }
  for (int c = (int)ncols; c < 5; c++) b.widths[c] = 0;
  b.keys = keys;
  if (rows) {
    make<<<512, 256>>>(keys, (int64_t *)cols[0], (uint32_t *)cols[1], (uint16_t *)cols[2], (uint8_t *)cols[3],
                       (int4 *)cols[4], rows, seed);
    T_LAUNCH();
  }
  const uint64_t cap = slip_partition_out_bound(&b, nparts), scratch_len = slip_partition_scratch_bytes(rows, nparts);
  void *out, *scratch;
  uint64_t *d_off, *d_cnt;
  T_CUDA(cudaMalloc(&out, cap));
  T_CUDA(cudaMemset(out, 0xA5, cap));
  T_CUDA(cudaMalloc(&scratch, scratch_len));
  T_CUDA(cudaMalloc(&d_off, (nparts + 1) * 8));
  T_CUDA(cudaMalloc(&d_cnt, nparts * 8));
  if (tuning) T_SLIP(slip_partition_tuned(&b, nparts, out, cap, d_off, d_cnt, scratch, scratch_len, tuning, 0));
  else T_SLIP(slip_partition(&b, nparts, out, cap, d_off, d_cnt, scratch, scratch_len, 0));
  T_CUDA(cudaDeviceSynchronize());
  std::vector<uint64_t> off(nparts + 1), cnt(nparts), ref(nparts, 0);
  std::vector<uint8_t> h(cap);
  T_CUDA(cudaMemcpy(off.data(), d_off, off.size() * 8, cudaMemcpyDeviceToHost));
  T_CUDA(cudaMemcpy(cnt.data(), d_cnt, cnt.size() * 8, cudaMemcpyDeviceToHost));
  T_CUDA(cudaMemcpy(h.data(), out, cap, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < rows; i++) ref[slip_partition_of(key_of(i, seed), nparts)]++;
  std::vector<uint8_t> seen(rows, 0);
  std::vector<int64_t> keys_seen;
  uint64_t bad = 0, dup = 0, layout = 0;
  for (uint32_t p = 0; p < nparts; p++) {
    const uint64_t n = cnt[p];
    if (n != ref[p]) bad++;
    if (off[p + 1] - off[p] != slip_partition_block_bytes(&b, n)) layout++;
    const uint8_t *blk = h.data() + off[p];
    uint64_t col_off[6];
    col_off[0] = 0;
    uint64_t o = a16(n * 8);
    for (uint32_t c = 0; c < ncols; c++) {
      col_off[c + 1] = o;
      o += a16(n * widths[c]);
    }
    for (uint64_t r = 0; r < n && off[p] + o <= cap; r++) {
      int64_t key, id;
      memcpy(&key, blk + r * 8, 8);
      if (ncols == 0) {  // keys only: the key and its partition (the multiset of keys is checked below)
        if (slip_partition_of(key, nparts) != p) bad++;
        keys_seen.push_back(key);
        continue;
      }
      memcpy(&id, blk + col_off[1] + r * 8, 8);
      if (id < 0 || (uint64_t)id >= rows) { bad++; continue; }
      if (seen[id]++) dup++;
      // The columns beyond ncols are not in the block: compare them as if they held the expected value.
      const uint64_t i = (uint64_t)id;
      uint32_t v1 = (uint32_t)(i * 2654435761u);
      uint16_t v2 = (uint16_t)(i * 31);
      uint8_t v3 = (uint8_t)(i * 7);
      int4 v4 = make_int4((int)i, (int)~i, (int)(i >> 3), 42);
      if (ncols > 1) memcpy(&v1, blk + col_off[2] + r * 4, 4);
      if (ncols > 2) memcpy(&v2, blk + col_off[3] + r * 2, 2);
      if (ncols > 3) memcpy(&v3, blk + col_off[4] + r, 1);
      if (ncols > 4) memcpy(&v4, blk + col_off[5] + r * 16, 16);
      if (key != key_of(i, seed) || slip_partition_of(key, nparts) != p || v1 != (uint32_t)(i * 2654435761u) ||
          v2 != (uint16_t)(i * 31) || v3 != (uint8_t)(i * 7) || v4.x != (int)i || v4.y != (int)~i ||
          v4.z != (int)(i >> 3) || v4.w != 42)
        bad++;
    }
  }
  uint64_t missing = 0;
  if (ncols == 0) {
    std::vector<int64_t> want(rows);
    for (uint64_t i = 0; i < rows; i++) want[i] = key_of(i, seed);
    std::sort(want.begin(), want.end());
    std::sort(keys_seen.begin(), keys_seen.end());
    if (keys_seen != want) missing = rows > keys_seen.size() ? rows - keys_seen.size() : 1;
  } else {
    for (uint64_t i = 0; i < rows; i++) missing += !seen[i];
  }
  CHECK(off[0] == 0, "first offset %" PRIu64, off[0]);
  CHECK(layout == 0, "rows %" PRIu64 " parts %u: %" PRIu64 " blocks with a wrong size", rows, nparts, layout);
  CHECK(bad == 0 && dup == 0 && missing == 0,
        "rows %" PRIu64 " parts %u: %" PRIu64 " wrong, %" PRIu64 " duplicated, %" PRIu64 " missing", rows, nparts, bad,
        dup, missing);
  printf("partition rows=%" PRIu64 " parts=%u cols=%u items=%u waves=%u blocks=%u: %s\n", rows, nparts, ncols,
         tuning ? tuning->items : 0, tuning ? tuning->waves : 0, tuning ? tuning->blocks_per_sm : 0,
         (bad || dup || missing || layout) ? "FAILED" : "ok");
  for (void *q : {(void *)keys, out, scratch, (void *)d_off, (void *)d_cnt}) T_CUDA(cudaFree(q));
  for (int c = 0; c < 5; c++) T_CUDA(cudaFree(cols[c]));
}
}  // namespace

int main(int argc, char **argv) {
  int n = 0;
  if (slip_cuda_probe(&n) != SLIP_OK) {
    printf("SKIP: %s\n", slip_last_error());
    return 77;
  }
  const bool small = argc > 1 && !strcmp(argv[1], "--small");
  T_CUDA(cudaSetDevice(0));
  run(0, 4, 1);
  run(1, 1, 2);
  run(4097, 7, 3);
  run(100003, 2, 4);
  run(100003, 1000, 5);
  run(70001, 32, 8);  // the last partition count whose warps aggregate by ballots
  run(70001, 33, 9);  // the first with one shared atomic per row
  run(50000, 5, 10, 0);  // keys only
  // Tunings: several tiles per chunk (a block's cursors carry over from tile to tile), both tile sizes.
  const slip_partition_tuning t16 = {16, 1, 2}, t16b3 = {16, 1, 3}, t8 = {8, 4, 0};
  run(300007, 7, 11, 5, &t16);
  run(300007, 300, 12, 5, &t8);
  run(300007, 77, 16, 5, &t16b3);
  if (!small) {
    run(3000017, 64, 6);
    run(1 << 22, 4096, 7);
    run(5000011, 2, 13, 5, &t16);
    run(5000011, 256, 14, 2, &t8);
    run(4000037, 4096, 15, 0, &t16);
    run(2000003, 1024, 17, 4, &t16b3);
  }
  // Bad arguments are rejected with the value got and the one expected.
  slip_batch b;
  memset(&b, 0, sizeof b);
  b.rows = 10;
  b.ncols = 1;
  b.widths[0] = 3;
  b.keys = (const int64_t *)16;
  b.cols[0] = (const void *)16;
  uint64_t dummy[2];
  CHECK(slip_partition(&b, 4, nullptr, 1 << 20, dummy, dummy, nullptr, 1 << 20, 0) == SLIP_ERR_INVALID_ARG, "width 3");
  CHECK(strstr(slip_last_error(), "width 3, expected 1, 2, 4, 8 or 16") != nullptr, "got '%s'", slip_last_error());
  b.widths[0] = 4;
  CHECK(slip_partition(&b, 5000, nullptr, 1 << 20, dummy, dummy, nullptr, 1 << 20, 0) == SLIP_ERR_INVALID_ARG, "parts");
  CHECK(strstr(slip_last_error(), "5000 partitions, expected 1..4096") != nullptr, "got '%s'", slip_last_error());
  CHECK(slip_partition(&b, 4, nullptr, 10, dummy, dummy, nullptr, 1 << 20, 0) == SLIP_ERR_INVALID_ARG, "capacity");
  CHECK(strstr(slip_last_error(), "output capacity 10, expected at least") != nullptr, "got '%s'", slip_last_error());
  printf("partition_test: %s\n", g_fail ? "FAIL" : "PASS");
  return g_fail ? 1 : 0;
}
