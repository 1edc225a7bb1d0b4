/*
 * gpunetio on a real ConnectX NIC: queue pairs created by an installed open-source DOCA
 * GPUNetIO host library (doca_gpu_verbs_* over rdma-core mlx5 DevX), connected with data exchanged
 * out of band, and memory registered so that the device write API's addressing holds on the wire
 * (iova = region id << 40, memory key = SLIP_MKEY: slipstream/abi.h).
 *
 * Built only with -DSLIP_GPUNETIO_HOST_ROOT=<prefix of an installed GPUNetIO> and rdma-core
 * (libibverbs, libmlx5); otherwise every call but the wire-format parser answers
 * SLIP_ERR_UNSUPPORTED with the reason. Not run in this project's CI or on its GPU machine, which
 * have no RDMA device: the software NIC (slipstream/softnic.h) is what the tests exercise.
 *
 * Sequence per peer: slip_nic_open, slip_nic_qp_info_get (send it), slip_nic_qp_info_parse (what the
 * peer sent), slip_nic_connect, slip_nic_reg for every region both sides address, then hand
 * slip_nic_dev_qp(q) to the device write API as slip_dev_queue.nic_qp.
 */
#ifndef SLIP_GPUNETIO_NIC_H
#define SLIP_GPUNETIO_NIC_H

#include <stddef.h>
#include <stdint.h>
#include "slipstream/host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connection data of one queue pair: 64 bytes, little-endian, sent to the peer out of band. */
#define SLIP_NIC_QP_INFO_MAGIC 0x51504C53u /* "SLPQ" */
#define SLIP_NIC_QP_INFO_VERSION 1u
enum { SLIP_NIC_ADDR_IB = 0 /* LID routed */, SLIP_NIC_ADDR_ROCE = 1 /* GID routed */ };
typedef struct slip_nic_qp_info {
  uint32_t magic;
  uint16_t version;
  uint16_t addr_type;   /* SLIP_NIC_ADDR_* */
  uint32_t qpn;         /* 24 bits */
  uint32_t lid;         /* 16 bits, IB */
  uint8_t gid[16];
  uint32_t mtu;         /* IBV_MTU_* enum value, 1..5 */
  uint8_t reserved[28];
} slip_nic_qp_info;

/* Checks a received record (size, magic, version, address type, qpn, mtu). */
slip_status slip_nic_qp_info_parse(const void *buf, size_t len, slip_nic_qp_info *out);

/* SLIP_OK when this build has the installed-GPUNetIO path, else SLIP_ERR_UNSUPPORTED with why. */
slip_status slip_nic_probe(void);

typedef struct slip_nic slip_nic;
/* Opens RDMA device `ibdev` (e.g. "mlx5_0"), port `port`, GID index `gid_index` (RoCE), for CUDA
 * device `device`, and creates `nq` queue pairs of `depth` WQEs (NIC handler chosen by GPUNetIO:
 * GPU doorbells where the NIC's UAR can be mapped into the GPU, else its CPU proxy). */
slip_status slip_nic_open(const char *ibdev, int port, int gid_index, int device, uint32_t nq, uint32_t depth,
                          slip_nic **out);
void slip_nic_close(slip_nic *n);
slip_status slip_nic_qp_info_get(const slip_nic *n, uint32_t q, slip_nic_qp_info *out);
/* RST -> INIT -> RTR -> RTS against the peer's queue pair; remote write and atomics allowed. */
slip_status slip_nic_connect(slip_nic *n, uint32_t q, const slip_nic_qp_info *peer);
/* Registers [ptr, ptr + len) (device memory through dma-buf, else peer memory; or host memory)
 * with iova = id << 40; *mkey is both its lkey and its rkey. */
slip_status slip_nic_reg(slip_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey);
/* The struct doca_gpu_dev_verbs_qp of queue pair q, in GPU memory (for slip_dev_queue.nic_qp). */
void *slip_nic_dev_qp(const slip_nic *n, uint32_t q);
/* CPU-proxy queue pairs need this called repeatedly by one host thread (rings the doorbells). */
slip_status slip_nic_progress(slip_nic *n);

#ifdef __cplusplus
}
#endif
#endif /* SLIP_GPUNETIO_NIC_H */
