/*
 * Software NIC for the gpunetio backend: CPU threads that play the ConnectX NIC behind
 * DOCA GPUNetIO's CPU-proxy queue pairs. The GPU runs DOCA GPUNetIO's device code, which writes
 * 64-byte mlx5 WQEs into a send queue in pinned host memory and publishes its producer index in
 * the word `sq_db` points at. An engine's threads serve the queue pairs of all its NICs in sweeps:
 * each reads every WQE published since its last sweep on any of its share of them, decodes and checks it against the
 * registered regions (slip_region_validate, as the proxy executor does), hands the sweep's copies
 * and fetch-adds to its executor in one call (one CUDA kernel on the GPU machine, memcpy in the
 * CPU tests), and then writes the CQEs the WQEs asked for, with the owner bit the device polls.
 *
 * Wire formats: the mlx5 WQE segments and the CQE are fixed by the ConnectX hardware (PRM), so the
 * decoder names byte offsets here and is tested without the GPUNetIO headers. Where the headers are
 * found at build time (SLIP_HAVE_GPUNETIO), src/gpunetio_host.cu checks every offset below against
 * the headers' own structs with static_assert, and fills the doca_gpu_dev_verbs_qp from them.
 *
 * Addressing: SLIP_IOVA and SLIP_MKEY in slipstream/abi.h (memory key = low 32 bits of the region
 * key; iova = region id << 40 | offset).
 *
 * Errors: a WQE that fails a check gets an error CQE (opcode 0xd, a PRM syndrome), writes nothing,
 * and moves its queue pair to the error state, as on a ConnectX NIC: every later WQE of that queue
 * pair is completed with a flush error and not executed (so the signal of a rejected write never
 * fires). The first failure is also recorded in the shared slip_dev_error. slip_softnic_reset()
 * brings the queue pairs back, as a QP reset and reconnect does on a NIC.
 */
#ifndef SLIP_SOFTNIC_H
#define SLIP_SOFTNIC_H

#include <stdint.h>
#include "slipstream/host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- mlx5 wire formats (big-endian fields; byte offsets within the 64-byte WQE / CQE) ---- */
#define SLIP_MLX5_WQE_BYTES 64
#define SLIP_MLX5_CQE_BYTES 64
enum {
  /* control segment, at 0 */
  SLIP_WQE_CTRL_OPMOD_IDX_OPCODE = 0, /* be32: opmod << 24 | wqe index << 8 | opcode */
  SLIP_WQE_CTRL_QPN_DS = 4,           /* be32: qpn << 8 | number of 16-byte segments */
  SLIP_WQE_CTRL_FM_CE_SE = 11,        /* u8: fence mode, completion request, solicited */
  SLIP_WQE_CTRL_IMM = 12,
  /* remote-address segment, at 16 */
  SLIP_WQE_RADDR = 16,                /* be64 */
  SLIP_WQE_RKEY = 24,                 /* be32 */
  /* RDMA write: data segments at 32 and 48 (byte_count be32, lkey be32, addr be64) */
  SLIP_WQE_DSEG0 = 32,
  SLIP_WQE_DSEG1 = 48,
  SLIP_DSEG_BYTE_COUNT = 0,
  SLIP_DSEG_LKEY = 4,
  SLIP_DSEG_ADDR = 8,
  /* atomic: atomic segment at 32 (swap_add be64, compare be64), data segment at 48 */
  SLIP_WQE_ATOMIC_SWAP_ADD = 32,
  SLIP_WQE_ATOMIC_COMPARE = 40,
  SLIP_WQE_ATOMIC_DSEG = 48,
  /* requester CQE */
  SLIP_CQE_BYTE_CNT = 44,             /* be32 */
  SLIP_CQE_HW_ERR_SYND = 52,
  SLIP_CQE_VENDOR_ERR_SYND = 54,
  SLIP_CQE_SYNDROME = 55,             /* error CQE only */
  SLIP_CQE_SOP_DROP_QPN = 56,         /* be32; error CQE: wqe opcode << 24 | qpn */
  SLIP_CQE_WQE_COUNTER = 60,          /* be16 */
  SLIP_CQE_SIGNATURE = 62,
  SLIP_CQE_OP_OWN = 63                /* opcode << 4 | owner bit; written last */
};
enum {
  SLIP_MLX5_OPCODE_NOP = 0x00,
  SLIP_MLX5_OPCODE_RDMA_WRITE = 0x08,
  SLIP_MLX5_OPCODE_ATOMIC_FA = 0x12
};
#define SLIP_MLX5_INLINE_SEG 0x80000000u
enum { SLIP_MLX5_CQE_REQ = 0x0, SLIP_MLX5_CQE_REQ_ERR = 0xd, SLIP_MLX5_CQE_INVALID = 0xf };
/* Error syndromes of the mlx5 PRM (the values of rdma-core's MLX5_CQE_SYNDROME_*). */
enum {
  SLIP_MLX5_SYND_LOCAL_LENGTH_ERR = 0x01,
  SLIP_MLX5_SYND_LOCAL_QP_OP_ERR = 0x02,
  SLIP_MLX5_SYND_LOCAL_PROT_ERR = 0x04,
  SLIP_MLX5_SYND_WR_FLUSH_ERR = 0x05,
  SLIP_MLX5_SYND_REMOTE_ACCESS_ERR = 0x13,
  SLIP_MLX5_SYND_REMOTE_OP_ERR = 0x14,
  SLIP_MLX5_SYND_TRANSPORT_RETRY_EXC_ERR = 0x15
};

/* One WQE, decoded into host order. */
typedef struct slip_wqe {
  uint8_t opcode;      /* SLIP_MLX5_OPCODE_* */
  uint8_t opmod;
  uint16_t index;      /* WQE index (low 16 bits of the producer count when it was written) */
  uint32_t qpn;
  uint8_t ds;          /* 16-byte segments, control segment included */
  uint8_t fm_ce_se;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t nseg;       /* RDMA write: data segments (1 or 2); atomic: 1 */
  struct { uint64_t addr; uint32_t lkey; uint32_t bytes; } seg[2];
  uint32_t inline_bytes;      /* RDMA write with inline data: its length, else 0 */
  uint8_t inline_data[28];
  uint64_t swap_add, compare; /* atomics */
} slip_wqe;

/* Decodes one 64-byte WQE. SLIP_ERR_BAD_DESCRIPTOR with the field got and the one expected when
 * the segment count does not fit the opcode, or the opcode is not one this NIC executes
 * (NOP, RDMA_WRITE, ATOMIC_FA). */
slip_status slip_wqe_decode(const void *wqe64, slip_wqe *out);
/* Builds the 64-byte WQE of an RDMA write of `bytes` (1..2^31 - 1) from (laddr, lkey) to
 * (raddr, rkey) at send-queue index `index` of queue pair `qpn`: control, remote-address and one
 * data segment, with a CQE requested when `cqe` (else only on error), as the GPU's builders make
 * it. The host-posted writes of slipstream/gpunetio_nic.h use it. */
void slip_wqe_encode_write(void *wqe64, uint16_t index, uint32_t qpn, int cqe, uint64_t raddr, uint32_t rkey,
                           uint64_t laddr, uint32_t lkey, uint32_t bytes);
/* Builds the 64-byte WQE of a fetch-add of `add` on the 8-byte word (raddr, rkey), its old value to
 * (laddr, lkey), with a CQE requested when `cqe`. */
void slip_wqe_encode_fadd(void *wqe64, uint16_t index, uint32_t qpn, int cqe, uint64_t raddr, uint32_t rkey,
                          uint64_t laddr, uint32_t lkey, uint64_t add);
/* Total bytes an RDMA write moves (sum of its data segments, or its inline length). */
uint64_t slip_wqe_write_bytes(const slip_wqe *w);
/* Writes a requester CQE for the WQE with counter `wqe_counter` into `cqe64`, which is CQ slot
 * `index % cqe_num`; owner bit (index / cqe_num) & 1. op_own is stored last, with release. */
void slip_cqe_write(void *cqe64, uint64_t index, uint32_t cqe_num, uint16_t wqe_counter, uint32_t qpn,
                    uint32_t byte_cnt);
void slip_cqe_write_error(void *cqe64, uint64_t index, uint32_t cqe_num, uint16_t wqe_counter, uint32_t qpn,
                          uint8_t wqe_opcode, uint8_t syndrome);
/* Marks every CQE of a fresh CQ invalid and owned by the NIC (op_own 0xf1), so that no slot
 * reads as completed before the NIC writes it. */
void slip_cq_init(void *cq, uint32_t cqe_num);
/* Owner bit, opcode, WQE counter and syndrome of a CQE (tests and diagnostics). */
void slip_cqe_read(const void *cqe64, uint8_t *owner, uint8_t *opcode, uint16_t *wqe_counter, uint8_t *syndrome);

/* ---- the software NIC threads ---- */
/* One copy of an RDMA write (host or device-accessible pointers), and one fetch-add. */
typedef struct slip_softnic_copy {
  void *dst;
  const void *src;
  uint64_t len;
} slip_softnic_copy;
typedef struct slip_softnic_add {
  uint64_t *target;      /* += add */
  uint64_t *result;      /* receives the old value, big-endian */
  uint64_t add;
  uint32_t target_flags; /* SLIP_DEV_REGION_* of the target's region (HOST: single-writer slot) */
  uint32_t reserved;
} slip_softnic_add;

typedef struct slip_softnic_ops {
  /* Executes one sweep: every copy (in any order, or all at once), then the adds in the order
   * given, each after every copy; returns once all of them completed. */
  slip_status (*run)(void *state, const slip_softnic_copy *copies, uint32_t ncopies, const slip_softnic_add *adds,
                     uint32_t nadds);
  void *state;
} slip_softnic_ops;

/* One queue pair as the NIC sees it (host pointers). */
typedef struct slip_softnic_qp {
  void *sq;             /* wqe_num x 64-byte WQEs */
  uint32_t wqe_num;     /* power of two */
  uint32_t qpn;         /* expected in every WQE's control segment */
  const uint64_t *pi;   /* producer count published by the device (the word sq_db points at) */
  void *cq;             /* cqe_num x 64-byte CQEs */
  uint32_t cqe_num;     /* power of two, >= wqe_num */
} slip_softnic_qp;

/* The protection domain the queue pairs belong to: every region registered with it. A WQE's local
 * (lkey) region that is not in the create call's local table is looked up here, so regions
 * registered once serve every later WQE. find: the region `id` whose 32-bit memory key is `mkey`
 * (else any region `id`, so that the check names the wrong key), as an entry with its memory key;
 * 0 when none is. */
typedef struct slip_softnic_pd {
  int (*find)(void *state, uint32_t id, uint32_t mkey, slip_region_entry *out);
  void *state;
} slip_softnic_pd;

typedef struct slip_softnic slip_softnic;
typedef struct slip_softnic_engine slip_softnic_engine;

/* Starts `nthreads` NIC threads (thread t executes through ops[t]) that serve the queue pairs of
 * every NIC made on the engine, as one ConnectX serves all of a host's queue pairs: the threads do
 * not multiply with the queue sets. Destroy after every NIC made on it. */
slip_status slip_softnic_engine_create(const slip_softnic_ops *ops, uint32_t nthreads, slip_softnic_engine **out);
void slip_softnic_engine_destroy(slip_softnic_engine *e);

/* A NIC on engine `e` over `nqps` queue pairs (queue pair q is served by one of the engine's
 * threads; the NICs made on an engine spread their queue pairs over its threads), after stamping
 * every SQ slot with an index of the previous lap and initialising the CQs (slip_cq_init). local:
 * regions the lkeys name (sources; atomic result buffers need SLIP_DEV_REGION_WRITABLE), with `pd`
 * for the rest (pd or pd->find may be NULL); remote: regions the rkeys name, with `rpd` for the
 * rest (the responder's registrations: a link between NICs; rpd or rpd->find may be NULL; its find
 * may also answer -1, the responder is unreachable, which completes the WQE with the transport
 * retry error). Entries' keys are the 32-bit memory keys (SLIP_MKEY). Tables are copied; the
 * finds are called from the engine's threads, concurrently.
 *
 * Completions, as on a ConnectX NIC: a WQE whose control segment requests a CQE (fm_ce_se bit
 * 0x08, CQ update) gets one when it and every WQE before it on its queue pair completed; a WQE
 * that fails its checks always gets an error CQE; after it, the queue pair is in the error state
 * and every later WQE completes with a flush error (a CQE for those that request one) and is not
 * executed. CQEs fill the CQ in order: the k-th CQE of a queue pair goes to slot k % cqe_num with
 * owner bit (k / cqe_num) & 1, and carries the WQE's index as its counter. */
slip_status slip_softnic_create(slip_softnic_engine *e, uint32_t nqps, const slip_softnic_qp *qps, slip_dev_error *err,
                                const slip_region_entry *local, uint32_t nlocal, const slip_softnic_pd *pd,
                                const slip_region_entry *remote, uint32_t nremote, const slip_softnic_pd *rpd,
                                slip_softnic **out);
void slip_softnic_destroy(slip_softnic *n);  /* once it returns, no engine thread looks at the NIC */
/* Resets every queue pair of the NIC, as a QP reset and reconnect does on a NIC: out of the error
 * state, WQE and CQE counts back to 0, SQ slots stamped and CQs initialised again. The producer
 * must be quiescent and start again from index 0, with its producer word already set to 0.
 * Returns once every engine thread has done so. */
void slip_softnic_reset(slip_softnic *n);
typedef struct slip_softnic_stats {
  uint64_t wqes, cqes, errors, sweeps, issue_ns, run_ns;
  uint32_t first_syndrome;  /* the syndrome of the first error CQE since creation or reset (0: none) */
  uint32_t reserved;
} slip_softnic_stats;
/* The PRM's name of an error CQE syndrome ("remote access error"), or "unknown syndrome". */
const char *slip_mlx5_syndrome_name(uint32_t syndrome);
void slip_softnic_get_stats(const slip_softnic *n, slip_softnic_stats *out);
/* SLIP_OK when this build has the gpunetio backend, else SLIP_ERR_UNSUPPORTED with the reason. */
slip_status slip_gpunetio_probe(void);
/* The software NIC's counters of a gpunetio queue set (zeros for other backends). */
void slip_queueset_nic_stats(const slip_queueset *qs, slip_softnic_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SLIP_SOFTNIC_H */
