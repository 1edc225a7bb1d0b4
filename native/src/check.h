/* Internal check macros (NCCL's CUDACHECK style): every CUDA, driver and system call goes
 * through one of these. Each records the failing call, its error and the source line in the
 * thread's error text, sets `st` and jumps to the function's `done:` cleanup label. */
#ifndef SLIP_CHECK_H
#define SLIP_CHECK_H

#include <errno.h>
#include <string.h>
#include "slipstream/host.h"

#define SLIP_SYS_CHECK(cond, what)                                                        \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      st = slip_set_error(SLIP_ERR_OS, "%s failed: %s (errno %d) at %s:%d", what,       \
                          strerror(errno), errno, __FILE__, __LINE__);                    \
      goto done;                                                                          \
    }                                                                                     \
  } while (0)

#define SLIP_CHECK(call)                                                                  \
  do {                                                                                    \
    st = (call);                                                                          \
    if (st != SLIP_OK) goto done;                                                         \
  } while (0)

#define SLIP_FAIL(code, ...)                                                              \
  do {                                                                                    \
    st = slip_set_error((code), __VA_ARGS__);                                             \
    goto done;                                                                            \
  } while (0)

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define SLIP_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      st = slip_set_error(SLIP_ERR_CUDA, "%s failed: %s (%s) at %s:%d", #call,           \
                          cudaGetErrorName(e_), cudaGetErrorString(e_), __FILE__,         \
                          __LINE__);                                                      \
      goto done;                                                                          \
    }                                                                                     \
  } while (0)
/* After a kernel launch: the launch error, not a later asynchronous one. */
#define SLIP_LAUNCH_CHECK() SLIP_CUDA_CHECK(cudaGetLastError())
#endif

#endif
