// The gpunetio backend in a build without the GPUNetIO device headers: queue sets of this backend
// are refused with the reason and the way to build it (see gpunetio.h).
#include <string.h>

#include "gpunetio.h"
#include "nic_qp.h"

extern "C" slip_status slip_gpunetio_probe(void) {
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "backend gpunetio: this build has no GPUNetIO device headers (found at configure time in "
                        "nvidia.nccl's include/nccl_device/gin/gdaki/doca_gpunetio, or given with "
                        "-DSLIP_GPUNETIO_INCLUDE=<dir of doca_gpunetio_device.h>)");
}

slip_status slip_gpunetio_create(int, uint32_t, uint32_t, const slip_region_entry *, uint32_t,
                                 const slip_region_entry *, uint32_t, slip_softnic_pd, slip_dev_error *, uint32_t,
                                 const slip_softnic_pd *, slip_gpunetio **out) {
  if (out) *out = nullptr;
  return slip_gpunetio_probe();
}
void slip_gpunetio_destroy(slip_gpunetio *) {}
void *slip_gpunetio_qp(const slip_gpunetio *, uint32_t) { return nullptr; }
uint32_t slip_gpunetio_sink_key(const slip_gpunetio *) { return 0; }
slip_status slip_gpunetio_reset(slip_gpunetio *) { return SLIP_OK; }
void slip_gpunetio_stats(const slip_gpunetio *, slip_softnic_stats *out) { memset(out, 0, sizeof *out); }
size_t slip_dev_qp_size(void) { return 0; }
slip_status slip_dev_qp_init(const slip_qp_layout *, void *) { return slip_gpunetio_probe(); }
slip_status slip_dev_qp_submitted(const void *, uint64_t *) { return slip_gpunetio_probe(); }
slip_status slip_gpunetio_host_qp(slip_gpunetio *, uint32_t, slip_host_qp *) { return slip_gpunetio_probe(); }
