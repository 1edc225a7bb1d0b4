/*
 * Tuning hook of the partition kernel, for the benchmark: slip_partition with an explicit tile
 * and chunk configuration. Callers that only want a partition use slip_partition (kernels.h),
 * which runs the default configuration.
 */
#ifndef SLIPSTREAM_PARTITION_TUNING_H
#define SLIPSTREAM_PARTITION_TUNING_H

#include "slipstream/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct slip_partition_tuning {
  uint32_t items;  /* rows per thread in a tile of 256 threads: 8 or 16 (0: the default for the partition count) */
  uint32_t waves;  /* CUDA blocks = waves x the blocks the device holds at once; they walk the tiles (0: 1) */
  uint32_t blocks_per_sm;  /* scatter blocks per SM that its registers allow: 3 (8 items), 2 or 3 (16 items); 0: default */
} slip_partition_tuning;

/* As slip_partition; a zero field takes the default. The scratch size does not depend on the tuning. */
slip_status slip_partition_tuned(const slip_batch *b, uint32_t nparts, void *d_out, uint64_t out_cap,
                                 uint64_t *d_offsets, uint64_t *d_counts, void *d_scratch, uint64_t scratch_bytes,
                                 const slip_partition_tuning *tuning, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
