// A build without a ConnectX NIC implementation (see nic_impl.h): every call says why.
#include "nic_impl.h"

const char *hw_nic_impl(void) { return "none"; }
slip_status hw_nic_probe(void) {
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "gpunetio on a NIC: this build has no NIC implementation (rdma-core's headers, "
                        "infiniband/mlx5dv.h, were not found at configure time: install libibverbs-dev and "
                        "rebuild; or configure with -DSLIP_GPUNETIO_HOST_ROOT=<prefix of the DOCA GPUNetIO host "
                        "library>)");
}
slip_status hw_nic_open(const char *, int, int, int, int, hw_nic **out) {
  *out = nullptr;
  return hw_nic_probe();
}
void hw_nic_close(hw_nic *) {}
slip_status hw_nic_reg(hw_nic *, void *, uint64_t, uint32_t, uint32_t *) { return hw_nic_probe(); }
void hw_nic_dereg(hw_nic *, uint32_t) {}
slip_status hw_nic_link_create(hw_nic *, uint32_t, uint32_t, hw_nic_link **out) {
  *out = nullptr;
  return hw_nic_probe();
}
void hw_nic_link_destroy(hw_nic_link *) {}
slip_status hw_nic_qp_info_get(const hw_nic_link *, uint32_t, slip_nic_qp_info *) { return hw_nic_probe(); }
slip_status hw_nic_connect(hw_nic_link *, uint32_t, const slip_nic_qp_info *) { return hw_nic_probe(); }
void *hw_nic_dev_qp(const hw_nic_link *, uint32_t) { return nullptr; }
int hw_nic_link_doorbell(const hw_nic_link *) { return SLIP_NIC_DOORBELL_HOST; }
slip_status hw_nic_host_qp(hw_nic_link *, uint32_t, slip_host_qp *) { return hw_nic_probe(); }
