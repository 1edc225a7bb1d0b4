/*
 * Device-side copies by one CTA, for kernels that hold few SMs and copy with every thread of the
 * CTA (the resident serving kernel). 16-byte accesses where both ends are 16-byte aligned, with
 * UNROLL loads in flight per thread before their stores; bytes otherwise.
 */
#ifndef SLIP_COPY_CUH
#define SLIP_COPY_CUH

#include <stdint.h>

namespace slip {
namespace copy {

template <int UNROLL>
__device__ __forceinline__ void cta_copy(char *dst, const char *src, uint64_t len) {
  uint64_t done = 0;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
    const uint64_t n16 = len / 16;
    const int4 *s = (const int4 *)src;
    int4 *d = (int4 *)dst;
    uint64_t i = threadIdx.x;
    const uint64_t n = blockDim.x;
    for (; i + (UNROLL - 1) * n < n16; i += UNROLL * n) {
      int4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) v[u] = s[i + u * n];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) d[i + u * n] = v[u];
    }
    for (; i < n16; i += n) d[i] = s[i];
    done = n16 * 16;
  }
  for (uint64_t i = done + threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
}

}  // namespace copy
}  // namespace slip

#endif
