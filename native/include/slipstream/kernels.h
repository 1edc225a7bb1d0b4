/*
 * Host-callable launchers of the shuffle kernels (partition, push, receive-side wait).
 * All launches are asynchronous on the given stream and check the launch error.
 */
#ifndef SLIPSTREAM_KERNELS_H
#define SLIPSTREAM_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "slipstream/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLIP_PARTITION_MAX_COLS 8
#define SLIP_PARTITION_MAX_PARTS 4096

/* A device-resident columnar batch: an int64 key column plus fixed-width payload columns. */
typedef struct slip_batch {
  const int64_t *keys;
  uint64_t rows;
  uint32_t ncols;
  uint32_t widths[SLIP_PARTITION_MAX_COLS];  /* bytes: 1, 2, 4, 8 or 16 */
  const void *cols[SLIP_PARTITION_MAX_COLS];
} slip_batch;

/* Per-destination output: block p starts at byte offsets[p] of the output buffer and holds
 * counts[p] keys, then each payload column, each section starting 16-byte aligned:
 *   keys @ 0, col c @ align16(n*8) + sum_{c'<c} align16(n*w_c'), n = counts[p]. */
uint64_t slip_partition_block_bytes(const slip_batch *b, uint64_t rows_in_block);
uint64_t slip_partition_out_bound(const slip_batch *b, uint32_t nparts);
uint64_t slip_partition_scratch_bytes(uint64_t rows, uint32_t nparts);

/* Hash-partitions `b` into `nparts` contiguous blocks in d_out (capacity out_cap, 16-byte aligned).
 * Writes d_offsets[nparts + 1] and d_counts[nparts] (device memory, uint64). Within a block, the
 * order of the rows is unspecified. partition_tuning.h has a variant with explicit tile sizes. */
slip_status slip_partition(const slip_batch *b, uint32_t nparts, void *d_out, uint64_t out_cap, uint64_t *d_offsets,
                           uint64_t *d_counts, void *d_scratch, uint64_t scratch_bytes, cudaStream_t stream);

/* Push: CUDA block q owns queue q and sends the items [item_start[q], item_start[q+1]) to the
 * queue's destination region, `batch` items at a time; after each batch one signal add of
 * SLIP_SIGNAL_PACK(items, bytes) (the ones that landed) to (sig_region, sig_offset), commit, and
 * a wait for local completion. Addresses are queue-table indices (see slip_dev_queue). */
typedef struct slip_push_queue_cfg {
  uint32_t src_region;
  uint32_t dst_region;
  uint32_t sig_region;
  uint32_t reserved;
  uint64_t sig_offset;
} slip_push_queue_cfg;
typedef struct slip_push_item {
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t length;
} slip_push_item;
/* slip_push_packed_kernel's one argument: slip_push's arguments as a struct in device memory (the
 * kernel is launched from Java through the fatbin; no host launcher). status may be a mapped
 * pinned host address. */
typedef struct slip_push_launch {
  slip_dev_queue *queues;
  const slip_push_queue_cfg *cfgs;
  const slip_push_item *items;
  const uint32_t *item_start;
  int *status;
  uint32_t batch;
  uint32_t reserved;
} slip_push_launch;
/* d_status[q] receives SLIP_OK or the first error of queue q. */
slip_status slip_push(slip_dev_queue *d_queues, uint32_t nqueues, const slip_push_queue_cfg *d_cfg,
                      const slip_push_item *d_items, const uint32_t *d_item_start, uint32_t batch,
                      uint32_t threads, int *d_status, cudaStream_t stream);

/* Receiver: one thread per signal waits until sigs[i] >= expected[i]; d_result[i] = SLIP_OK or
 * SLIP_ERR_TIMEOUT. Signals may be device memory or mapped host memory. */
slip_status slip_wait_signals(const uint64_t *sigs, const uint64_t *d_expected, uint32_t n, uint64_t timeout_ns,
                              int *d_result, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
