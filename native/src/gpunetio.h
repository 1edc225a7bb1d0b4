// Internal: host side of the gpunetio backend, used by slip_queueset_create. Two builds:
//   gpunetio_host.cu  (GPUNetIO device headers found): hand-built CPU-proxy queue pairs in pinned
//                     host memory, served by the software NIC (slipstream/softnic.h);
//   gpunetio_none.cpp (headers not found): every entry answers SLIP_ERR_UNSUPPORTED with the reason.
#ifndef SLIP_GPUNETIO_H
#define SLIP_GPUNETIO_H

#include "slipstream/softnic.h"

struct slip_gpunetio;

// nq queue pairs of `depth` WQEs (a power of two, 2..32768) on `device`. local: the set's source
// regions (other registered regions through pd), remote: its destinations; keys are the regions' 64-bit keys (the memory keys are their
// low 32 bits). err: the set's host-pinned error record, written by the NIC.
// qpn_base: queue pair q is number qpn_base + q (0: the default base); rpd: the responder's
// registrations for rkeys not in `remote` (a software NIC link; NULL otherwise).
slip_status slip_gpunetio_create(int device, uint32_t nq, uint32_t depth, const slip_region_entry *local,
                                 uint32_t nlocal, const slip_region_entry *remote, uint32_t nremote,
                                 slip_softnic_pd pd, slip_dev_error *err, uint32_t qpn_base,
                                 const slip_softnic_pd *rpd, slip_gpunetio **out);
// The regions registered on a context (its protection domain; cuda_host.cu), for slip_softnic_pd.
int slip_ctx_find_registered(void *ctx, uint32_t id, uint32_t mkey, slip_region_entry *out);
void slip_gpunetio_destroy(slip_gpunetio *g);
void *slip_gpunetio_qp(const slip_gpunetio *g, uint32_t q);  // device address of queue pair q
// Queue pair q as a host producer drives it (nic_qp.h), instead of the device.
struct slip_host_qp;
slip_status slip_gpunetio_host_qp(slip_gpunetio *g, uint32_t q, slip_host_qp *out);
uint32_t slip_gpunetio_sink_key(const slip_gpunetio *g);
// Resets every queue pair (error state, indices, rings), as a QP reset and reconnect does, and
// the device's view of them. Only while no kernel uses them.
slip_status slip_gpunetio_reset(slip_gpunetio *g);
void slip_gpunetio_stats(const slip_gpunetio *g, slip_softnic_stats *out);

#endif
