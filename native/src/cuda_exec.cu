// The CUDA executor behind the proxy executor and the software NIC (see cuda_exec.h).
#include "check.h"
#include "cuda_exec.h"

slip_status cuda_exec_create(int device, CudaExec **out) {
  slip_status st = SLIP_OK;
  CudaExec *x = new CudaExec();
  x->device = device;
  SLIP_CUDA_CHECK(cudaSetDevice(device));
  SLIP_CUDA_CHECK(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
  SLIP_CUDA_CHECK(cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));
  *out = x;
  x = nullptr;
done:
  cuda_exec_destroy(x);
  return st;
}

void cuda_exec_destroy(CudaExec *x) {
  if (!x) return;
  (void)cudaSetDevice(x->device);
  if (x->done) (void)cudaEventDestroy(x->done);
  if (x->stream) (void)cudaStreamDestroy(x->stream);
  delete x;
}

slip_status cuda_exec_bind(CudaExec *x) {
  slip_status st = SLIP_OK;
  if (!x->bound.load(std::memory_order_relaxed)) {
    SLIP_CUDA_CHECK(cudaSetDevice(x->device));  // the executor thread's first CUDA call
    x->bound.store(true, std::memory_order_relaxed);
  }
done:
  return st;
}

slip_status cuda_exec_copy(void *state, void *dst, const void *src, uint64_t len) {
  slip_status st = SLIP_OK;
  CudaExec *x = (CudaExec *)state;
  SLIP_CHECK(cuda_exec_bind(x));
  SLIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, x->stream));
done:
  return st;
}

slip_status cuda_exec_flush(void *state) {
  slip_status st = SLIP_OK;
  CudaExec *x = (CudaExec *)state;
  SLIP_CHECK(cuda_exec_bind(x));
  SLIP_CUDA_CHECK(cudaEventRecord(x->done, x->stream));
  for (;;) {
    cudaError_t e = cudaEventQuery(x->done);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) SLIP_CUDA_CHECK(e);
  }
done:
  return st;
}
