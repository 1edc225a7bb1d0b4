// Internal, shared by the NIC implementations: the GPU's view of one queue pair (struct doca_gpu_dev_verbs_qp, the layout the device
// write API reads), built in one place for every NIC: the software NIC's hand-made queue pairs
// (gpunetio_host.cu) and a real NIC's (nic_mlx5.cu). Builds without the GPUNetIO device headers
// answer SLIP_ERR_UNSUPPORTED (gpunetio_none.cpp).
#ifndef SLIP_NIC_QP_H
#define SLIP_NIC_QP_H

#include <stddef.h>
#include <stdint.h>

#include "slipstream/host.h"

// Every address is one the GPU can use (device memory, or host memory mapped into the GPU).
struct slip_qp_layout {
  uint32_t qpn;          // 24 bits
  uint32_t sq_wqe_cnt;   // power of two, at most 32768; 64-byte WQEs
  void *sq_wqes;
  void *sq_dbrec;        // big-endian send doorbell record
  void *sq_db;           // gpu_doorbell: the NIC's doorbell register; else the word a host thread watches
  int gpu_doorbell;
  uint32_t cqn;
  uint32_t cqe_cnt;      // power of two; 64-byte CQEs
  void *cqes;
  void *cq_dbrec;
  int rings_in_host;     // rings and records in host memory (else device memory)
};

// A queue pair as a host producer drives it (slip_nic_host_post): host addresses of its rings, and
// how the NIC learns of new WQEs.
struct slip_host_qp {
  uint8_t *sq;           // wqe_num x 64-byte WQEs
  uint32_t wqe_num;      // power of two
  uint32_t qpn;
  const uint8_t *cq;     // cqe_num x 64-byte CQEs
  uint32_t cqe_num;      // power of two, >= wqe_num
  uint32_t *cq_dbrec;    // big-endian consumer index the host writes back (null: the NIC reads none)
  // After the WQEs up to producer count `pi` are written: makes the NIC see them (the software
  // NIC's producer word, a progress thread's word, or the doorbell record and register).
  void (*publish)(void *state, uint64_t pi);
  void *state;
};

// Size of the device struct; 0 in a build without the GPUNetIO device headers.
size_t slip_dev_qp_size(void);
// Fills `out` (slip_dev_qp_size() bytes, host memory: copy it to the device) as a queue pair with
// nothing posted.
slip_status slip_dev_qp_init(const slip_qp_layout *l, void *out);

// The WQEs submitted so far on a queue pair (its struct in device memory: d_qp): a new queue set
// over queue pairs that were used before starts from them (every one of them completed: the set
// before it waited for its last batch).
slip_status slip_dev_qp_submitted(const void *d_qp, uint64_t *out);

// Argument checks shared by the NIC implementations (nic_info.cpp): SLIP_OK, or the error recorded.
slip_status slip_nic_check_open(const char *ibdev, int port, int gid_index, int doorbell, const void *out);
slip_status slip_nic_check_reg(const void *nic, const void *ptr, uint64_t len, uint32_t id, const void *mkey);
slip_status slip_nic_check_link(const void *nic, uint32_t nq, uint32_t depth, const void *out);
// One key per region: a registration whose lkey and rkey differ is refused.
slip_status slip_nic_check_keys(uint32_t id, uint32_t lkey, uint32_t rkey);

#endif
