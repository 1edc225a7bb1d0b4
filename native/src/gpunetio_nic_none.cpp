// The installed-GPUNetIO path in a build without it (see slipstream/gpunetio_nic.h).
#include "slipstream/gpunetio_nic.h"

extern "C" slip_status slip_nic_probe(void) {
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "gpunetio on a NIC: this build has no GPUNetIO host library (configure with "
                        "-DSLIP_GPUNETIO_HOST_ROOT=<prefix with include/host/doca_gpunetio.h and "
                        "lib/libdoca_gpunetio_host.so>, and rdma-core's libibverbs and libmlx5)");
}
extern "C" slip_status slip_nic_open(const char *, int, int, int, uint32_t, uint32_t, slip_nic **out) {
  if (out) *out = nullptr;
  return slip_nic_probe();
}
extern "C" void slip_nic_close(slip_nic *) {}
extern "C" slip_status slip_nic_qp_info_get(const slip_nic *, uint32_t, slip_nic_qp_info *) { return slip_nic_probe(); }
extern "C" slip_status slip_nic_connect(slip_nic *, uint32_t, const slip_nic_qp_info *) { return slip_nic_probe(); }
extern "C" slip_status slip_nic_reg(slip_nic *, void *, uint64_t, uint32_t, uint32_t *) { return slip_nic_probe(); }
extern "C" void *slip_nic_dev_qp(const slip_nic *, uint32_t) { return nullptr; }
extern "C" slip_status slip_nic_progress(slip_nic *) { return slip_nic_probe(); }
