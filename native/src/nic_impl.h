// Internal: the two kinds of NIC behind slipstream/gpunetio_nic.h, which nic.cu dispatches to.
//   hw_nic_*    the implementation chosen at configure time (nic_mlx5.cu, gpunetio_nic.cu, or
//               gpunetio_nic_none.cpp): a ConnectX NIC;
//   soft_nic_*  the software NIC (nic_soft.cu with the GPUNetIO device headers, else
//               nic_soft_none.cpp), opened as device "softnic": links between executors of one
//               machine that move data the way the real NIC does (GPU-built WQEs, memory keys,
//               completions), with CPU threads in place of the NIC.
// Argument checks are done once, in nic.cu; these functions get valid arguments. Region ids may
// be SLIP_NIC_SINK_ID here (a link's fetch-add sink).
#ifndef SLIP_NIC_IMPL_H
#define SLIP_NIC_IMPL_H

#include <stdint.h>

#include "slipstream/abi.h"
#include "slipstream/gpunetio_nic.h"

struct slip_host_qp;

struct hw_nic;
struct hw_nic_link;
const char *hw_nic_impl(void);
slip_status hw_nic_probe(void);
slip_status hw_nic_open(const char *ibdev, int port, int gid_index, int device, int doorbell, hw_nic **out);
void hw_nic_close(hw_nic *n);
slip_status hw_nic_reg(hw_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey);
void hw_nic_dereg(hw_nic *n, uint32_t mkey);
slip_status hw_nic_link_create(hw_nic *n, uint32_t nq, uint32_t depth, hw_nic_link **out);
void hw_nic_link_destroy(hw_nic_link *l);
slip_status hw_nic_qp_info_get(const hw_nic_link *l, uint32_t q, slip_nic_qp_info *out);
slip_status hw_nic_connect(hw_nic_link *l, uint32_t q, const slip_nic_qp_info *peer);
void *hw_nic_dev_qp(const hw_nic_link *l, uint32_t q);
int hw_nic_link_doorbell(const hw_nic_link *l);
// Queue pair q (connected) as a host producer drives it.
slip_status hw_nic_host_qp(hw_nic_link *l, uint32_t q, slip_host_qp *out);

struct soft_nic;
struct soft_nic_link;
// SLIP_OK when this build has the software NIC (the GPUNetIO device headers), else why not.
slip_status soft_nic_probe(void);
slip_status soft_nic_open(int device, soft_nic **out);
void soft_nic_close(soft_nic *n);
// Device memory (peers reach it through CUDA IPC).
slip_status soft_nic_reg(soft_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey);
// Host memory registered with the GPU that maps the shared file `path` from its first byte (peers
// map the file).
slip_status soft_nic_reg_file(soft_nic *n, void *host, uint64_t len, uint32_t id, const char *path, uint32_t *mkey);
void soft_nic_dereg(soft_nic *n, uint32_t id, uint32_t mkey);
slip_status soft_nic_link_create(soft_nic *n, uint32_t nq, uint32_t depth, soft_nic_link **out);
void soft_nic_link_destroy(soft_nic_link *l);
slip_status soft_nic_qp_info_get(const soft_nic_link *l, uint32_t q, slip_nic_qp_info *out);
slip_status soft_nic_connect(soft_nic_link *l, uint32_t q, const slip_nic_qp_info *peer);
void *soft_nic_dev_qp(const soft_nic_link *l, uint32_t q);
slip_status soft_nic_host_qp(soft_nic_link *l, uint32_t q, slip_host_qp *out);
uint32_t soft_nic_link_sink_key(const soft_nic_link *l);
// The first error the software NIC recorded on the link (code 0: none) and its CQE syndrome;
// clear resets the record (not the queue pairs: a link in error is replaced, as on a NIC).
void soft_nic_link_error(soft_nic_link *l, slip_dev_error *out, uint32_t *syndrome, int clear);
// That record itself (pinned host memory, mapped into the GPU).
const slip_dev_error *soft_nic_link_error_record(const soft_nic_link *l);

// For queue sets over a link (cuda_host.cu): the record the NIC writes the link's first error to
// (pinned host memory, mapped), or NULL when the NIC reports errors in CQEs only.
const slip_dev_error *slip_nic_link_error_record(const slip_nic_link *l);
// Whether the host posts on queue pair q of the link (slip_nic_host_post claimed it).
int slip_nic_link_host_driven(const slip_nic_link *l, uint32_t q);

#endif
