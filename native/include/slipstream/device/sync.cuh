/*
 * Device-side memory-order primitives (PTX), shared by the native library's own kernels and the
 * device write API (write_api.cuh). System scope everywhere: the other side is another GPU or a CPU.
 */
#ifndef SLIP_SYNC_CUH
#define SLIP_SYNC_CUH

#include <stdint.h>

namespace slip {
namespace sync {

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t ld_volatile(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Release-ordered add at system scope (device memory of this or a peer GPU). */
__device__ __forceinline__ void red_add_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Polling backoff for loops that read host memory across PCIe: start at 32 ns, double up to
 * ~1 us. Unthrottled polls from many threads compete with the GPU's own reads of host memory
 * (command fetch for the proxy executor's copies); see docs/benchmarks/2026-11-30-gpu-push.md, proxy. */
struct Backoff {
  unsigned ns = 32;
  __device__ __forceinline__ void pause() {
    __nanosleep(ns);
    if (ns < 1024) ns *= 2;
  }
};

}  // namespace sync
}  // namespace slip

#endif
