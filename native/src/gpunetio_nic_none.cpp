// gpunetio on a NIC in a build without a NIC implementation (see slipstream/gpunetio_nic.h).
#include "slipstream/gpunetio_nic.h"

extern "C" const char *slip_nic_impl(void) { return "none"; }
extern "C" slip_status slip_nic_probe(void) {
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "gpunetio on a NIC: this build has no NIC implementation (rdma-core's headers, "
                        "infiniband/mlx5dv.h, were not found at configure time: install libibverbs-dev and "
                        "rebuild; or configure with -DSLIP_GPUNETIO_HOST_ROOT=<prefix of the DOCA GPUNetIO host "
                        "library>)");
}
extern "C" slip_status slip_nic_open(const char *, int, int, int, int, slip_nic **out) {
  if (out) *out = nullptr;
  return slip_nic_probe();
}
extern "C" void slip_nic_close(slip_nic *) {}
extern "C" slip_status slip_nic_reg(slip_nic *, void *, uint64_t, uint32_t, uint32_t *) { return slip_nic_probe(); }
extern "C" slip_status slip_nic_link_create(slip_nic *, uint32_t, uint32_t, slip_nic_link **out) {
  if (out) *out = nullptr;
  return slip_nic_probe();
}
extern "C" void slip_nic_link_destroy(slip_nic_link *) {}
extern "C" slip_status slip_nic_qp_info_get(const slip_nic_link *, uint32_t, slip_nic_qp_info *) { return slip_nic_probe(); }
extern "C" slip_status slip_nic_connect(slip_nic_link *, uint32_t, const slip_nic_qp_info *) { return slip_nic_probe(); }
extern "C" void *slip_nic_dev_qp(const slip_nic_link *, uint32_t) { return nullptr; }
extern "C" int slip_nic_link_doorbell(const slip_nic_link *) { return SLIP_NIC_DOORBELL_HOST; }
