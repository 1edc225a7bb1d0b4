// Internal: the CUDA executor shared by the proxy executor and the software NIC: copies and small
// signal kernels on one private stream, completion polled through an event (no blocking call, so
// the owning thread never holds other host threads' CUDA calls off).
#ifndef SLIP_CUDA_EXEC_H
#define SLIP_CUDA_EXEC_H

#include <cuda_runtime.h>

#include <atomic>

#include "slipstream/host.h"

struct CudaExec {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  // recorded at each flush and polled
  std::atomic<bool> bound{false};
};

// Stream and event on `device`; destroy accepts NULL.
slip_status cuda_exec_create(int device, CudaExec **out);
void cuda_exec_destroy(CudaExec *x);
// Binds the calling thread to the executor's device on its first call.
slip_status cuda_exec_bind(CudaExec *x);
// slip_proxy_exec_ops / slip_softnic_ops entries (state = CudaExec *).
slip_status cuda_exec_copy(void *state, void *dst, const void *src, uint64_t len);
slip_status cuda_exec_flush(void *state);

#endif
