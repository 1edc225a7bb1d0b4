// The software NIC in a build without the GPUNetIO device headers (see nic_impl.h): every call
// says why.
#include "nic_impl.h"

slip_status soft_nic_probe(void) {
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "software NIC: this build has no GPUNetIO device headers (configure with "
                        "-DSLIP_GPUNETIO_INCLUDE=<dir of doca_gpunetio_device.h>, which NCCL's Python package ships)");
}
slip_status soft_nic_open(int, soft_nic **out) {
  *out = nullptr;
  return soft_nic_probe();
}
void soft_nic_close(soft_nic *) {}
slip_status soft_nic_reg(soft_nic *, void *, uint64_t, uint32_t, uint32_t *) { return soft_nic_probe(); }
slip_status soft_nic_reg_file(soft_nic *, void *, uint64_t, uint32_t, const char *, uint32_t *) {
  return soft_nic_probe();
}
void soft_nic_dereg(soft_nic *, uint32_t, uint32_t) {}
slip_status soft_nic_link_create(soft_nic *, uint32_t, uint32_t, soft_nic_link **out) {
  *out = nullptr;
  return soft_nic_probe();
}
void soft_nic_link_destroy(soft_nic_link *) {}
slip_status soft_nic_qp_info_get(const soft_nic_link *, uint32_t, slip_nic_qp_info *) { return soft_nic_probe(); }
slip_status soft_nic_connect(soft_nic_link *, uint32_t, const slip_nic_qp_info *) { return soft_nic_probe(); }
void *soft_nic_dev_qp(const soft_nic_link *, uint32_t) { return nullptr; }
slip_status soft_nic_host_qp(soft_nic_link *, uint32_t, slip_host_qp *) { return soft_nic_probe(); }
uint32_t soft_nic_link_sink_key(const soft_nic_link *) { return 0; }
void soft_nic_link_error(soft_nic_link *, slip_dev_error *out, uint32_t *syndrome, int) {
  *out = slip_dev_error{};
  *syndrome = 0;
}
const slip_dev_error *soft_nic_link_error_record(const soft_nic_link *) { return nullptr; }
