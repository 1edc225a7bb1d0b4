// Helpers shared by the two-process GPU test and the benchmark: a forked pair of processes joined
// by a socket (one GPU each), check macros for test programs, and pattern kernels.
#ifndef SLIP_PAIR_COMMON_CUH
#define SLIP_PAIR_COMMON_CUH

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "slipstream/host.h"

// Test programs abort the process on an unexpected failure, naming the call and the reason.
#define T_CUDA(call)                                                                                 \
  do {                                                                                               \
    cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      fprintf(stderr, "[%d] %s:%d: %s failed: %s\n", (int)getpid(), __FILE__, __LINE__, #call,       \
              cudaGetErrorString(e_));                                                               \
      exit(3);                                                                                       \
    }                                                                                                \
  } while (0)
#define T_SLIP(call)                                                                                 \
  do {                                                                                               \
    slip_status s_ = (call);                                                                         \
    if (s_ != SLIP_OK) {                                                                             \
      fprintf(stderr, "[%d] %s:%d: %s failed: %s\n", (int)getpid(), __FILE__, __LINE__, #call,       \
              slip_last_error());                                                                    \
      exit(3);                                                                                       \
    }                                                                                                \
  } while (0)
#define T_LAUNCH() T_CUDA(cudaGetLastError())

// Waits for a stream by polling. While a push kernel runs, the proxy executor thread must be able
// to issue CUDA calls; a host thread blocked inside a synchronous CUDA call (cudaMemcpy,
// cudaEventSynchronize) can hold it off until the kernel's own timeout (seen on the H200 pair).
static inline void wait_stream(cudaStream_t s) {
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) usleep(20);
  T_CUDA(e);
}
static inline void wait_event(cudaEvent_t ev) {
  cudaError_t e;
  while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) usleep(20);
  T_CUDA(e);
}

struct Pair {
  int rank;    // 0: parent, 1: child
  int fd;      // socket to the other process
  int device;  // GPU of this process
  int ngpus;
  pid_t child;
};

// Forks; both processes probe CUDA only after the fork (a CUDA context does not survive fork).
// Returns 77 (skip) from the parent when no GPU is usable; the child exits on its own.
// Both processes arm alarm(limit_s): a hung peer ends the run instead of the machine's lease.
static inline int pair_start(Pair *p, unsigned limit_s) {
  alarm(limit_s);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("socketpair");
    exit(3);
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(3);
  }
  p->rank = pid == 0 ? 1 : 0;
  p->child = pid;
  p->fd = sv[p->rank == 0 ? 0 : 1];
  close(sv[p->rank == 0 ? 1 : 0]);
  int n = 0;
  slip_status st = slip_cuda_probe(&n);
  int ok = st == SLIP_OK, peer_ok = 0;
  T_SLIP(slip_oob_send(p->fd, &ok, sizeof ok));
  T_SLIP(slip_oob_recv(p->fd, &peer_ok, sizeof peer_ok));
  if (!ok || !peer_ok) {
    if (p->rank == 1) exit(0);
    printf("SKIP: %s\n", ok ? "the second process found no usable GPU" : slip_last_error());
    waitpid(pid, nullptr, 0);
    return 77;
  }
  p->ngpus = n;
  p->device = n >= 2 ? p->rank : 0;
  if (p->rank == 0 && n < 2) printf("note: one GPU only: both processes use GPU 0 (IPC within one device)\n");
  return 0;
}

static inline void pair_barrier(const Pair *p) {
  int token = 0x5117;
  int got = 0;
  T_SLIP(slip_oob_send(p->fd, &token, sizeof token));
  T_SLIP(slip_oob_recv(p->fd, &got, sizeof got));
  if (got != token) {
    fprintf(stderr, "[%d] barrier: got 0x%x, expected 0x%x\n", (int)getpid(), got, token);
    exit(3);
  }
}

// Returns the child's exit status (parent) after it ends; 0 in the child.
static inline int pair_finish(Pair *p) {
  close(p->fd);
  if (p->rank == 1) return 0;
  int status = 0;
  waitpid(p->child, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fprintf(stderr, "child ended by signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
  return 4;
}

// Pattern byte at a source offset: a hash of (offset, seed), so shifted or stale data shows.
__host__ __device__ inline uint8_t pattern_byte(uint64_t off, uint64_t seed) {
  return (uint8_t)(slip_hash64(off * 0x9E3779B97F4A7C15ull ^ seed) >> 17);
}

__global__ void fill_pattern(uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pattern_byte(i, seed);
}

// Counts bytes of dst[0, n) that differ from pattern_byte(src_base + i, seed).
__global__ void check_pattern(const uint8_t *dst, uint64_t n, uint64_t src_base, uint64_t seed,
                              unsigned long long *bad) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    mine += dst[i] != pattern_byte(src_base + i, seed);
  if (mine) atomicAdd(bad, mine);
}

#endif
