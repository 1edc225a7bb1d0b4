/*
 * Slipstream device write API: the one set of calls through which the push kernels write into a
 * peer, whatever moves the bytes (NVLink stores into CUDA-IPC-mapped peer memory, descriptors for
 * the CPU proxy, or WQEs posted by DOCA GPUNetIO's device functions to a queue pair:
 * gpunetio.cuh).
 *
 *   write        copy len bytes from (src region, offset) to (dst region, offset)
 *   write_signal write, then add to a signal word; a receiver that sees the add sees the data
 *   signal_add   add to a signal word after every earlier write of this group on this queue
 *   commit       make posted work visible to the executor (proxy: publish the producer index;
 *                gpunetio: ask for a CQE on the batch's last WQE and ring the doorbell once)
 *   wait/wait_all local completion: sources may be reused (not remote visibility: use signals)
 *   wait_signal_ge  receiver side: wait until a local signal word reaches a value
 *
 * Every call takes a cooperation group (Thread, Warp, Block); all threads of the group make the
 * call with the same arguments. Addresses are (table index, offset) into the queue's region table,
 * checked on the device before anything is written: a bad index, a range outside the region or a
 * missing permission returns an error code, records the first error in the queue set's error
 * record (host: slip_queueset_check) and writes nothing.
 *
 * Ordering: NVLink: all threads store, the group synchronises, the leader issues a system-scope
 * fence and then a release add on the signal word. Proxy: the executor issues the signal only after
 * the copies posted before it on the same queue have completed. gpunetio: the signal is an atomic
 * fetch-add WQE posted after the write WQEs on the same queue pair, and a reliable-connected
 * responder executes a queue pair's requests in order (the software NIC issues them in order on one
 * CUDA stream). Nothing is ordered across queues.
 * Signals in host memory (SLIP_DEV_REGION_HOST) must have a single writer queue: GPU atomics on
 * host memory are not atomic for the CPU over PCIe, so the add is a released read-modify-write.
 */
#ifndef SLIPSTREAM_DEVICE_WRITE_API_CUH
#define SLIPSTREAM_DEVICE_WRITE_API_CUH

#include <stdint.h>

#include "slipstream/abi.h"
#include "slipstream/device/sync.cuh"

namespace slip {
namespace dev {

/* ---- cooperation groups (1-D blocks) ---- */
struct Thread {
  __device__ unsigned rank() const { return 0; }
  __device__ unsigned size() const { return 1; }
  __device__ void sync() const {}
  __device__ int broadcast(int v) const { return v; }
};
struct Warp {
  __device__ unsigned rank() const { return threadIdx.x & 31u; }
  __device__ unsigned size() const { return 32; }
  __device__ void sync() const { __syncwarp(); }
  __device__ int broadcast(int v) const { return __shfl_sync(0xffffffffu, v, 0); }
};
struct Block {
  __device__ unsigned rank() const { return threadIdx.x; }
  __device__ unsigned size() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ int broadcast(int v) const {
    __shared__ int slot;
    __syncthreads();
    if (threadIdx.x == 0) slot = v;
    __syncthreads();
    return slot;
  }
};

struct Addr {
  uint32_t region;  /* index into the queue's region table */
  uint64_t offset;
};

/* Spin limit for device-side waits: a dead peer or executor becomes SLIP_ERR_TIMEOUT. */
#ifndef SLIP_DEVICE_WAIT_NS
#define SLIP_DEVICE_WAIT_NS (10ull * 1000 * 1000 * 1000)
#endif

namespace detail {

__device__ inline void report(const slip_dev_queue &q, int code, uint32_t region_id, uint64_t offset,
                              uint64_t length, uint64_t limit) {
  slip_dev_error *e = q.error;
  if (atomicCAS(&e->claimed, 0u, 1u) != 0u) return;  // keep the first error only
  e->region_id = region_id;
  e->offset = offset;
  e->length = length;
  e->limit = limit;
  e->got_key = 0;
  e->queue = q.index;
  __threadfence();
  atomicExch(&e->code, (uint32_t)code);
}

/* Same result in every thread of the group; the leader reports. */
template <class G>
__device__ inline int check(G g, const slip_dev_queue &q, Addr a, uint64_t len, uint32_t need) {
  int code = SLIP_OK;
  uint32_t id = a.region;
  uint64_t limit = q.nregions;
  if (a.region >= q.nregions) {
    code = SLIP_ERR_BAD_REGION;
  } else {
    const slip_dev_region &r = q.regions[a.region];
    id = r.id;
    limit = r.length;
    if ((r.flags & need) != need) code = SLIP_ERR_BAD_REGION;
    else if (a.offset > r.length || len > r.length - a.offset) code = SLIP_ERR_OUT_OF_RANGE;
  }
  if (code != SLIP_OK && g.rank() == 0) report(q, code, id, a.offset, len, limit);
  return code;
}

__device__ inline char *ptr(const slip_dev_queue &q, Addr a) {
  return (char *)(uintptr_t)q.regions[a.region].base + a.offset;
}

/* Group copy: 16-byte accesses when source and destination share 16-byte alignment, four loads in
 * flight per thread before their stores; 4-byte or byte accesses otherwise and for the edges. */
template <class G>
__device__ inline void copy(G g, char *dst, const char *src, uint64_t len) {
  const unsigned r = g.rank(), n = g.size();
  uint64_t done = 0;
  if ((((uintptr_t)dst ^ (uintptr_t)src) & 15u) == 0) {
    uint64_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;
    if (head > len) head = len;
    for (uint64_t i = r; i < head; i += n) dst[i] = src[i];
    const uint64_t n16 = (len - head) / 16;
    const int4 *s4 = (const int4 *)(src + head);
    int4 *d4 = (int4 *)(dst + head);
    uint64_t i = r;
    for (; i + 3ull * n < n16; i += 4ull * n) {
      int4 a = s4[i], b = s4[i + n], c = s4[i + 2ull * n], d = s4[i + 3ull * n];
      d4[i] = a;
      d4[i + n] = b;
      d4[i + 2ull * n] = c;
      d4[i + 3ull * n] = d;
    }
    for (; i < n16; i += n) d4[i] = s4[i];
    done = head + n16 * 16;
  } else if ((((uintptr_t)dst ^ (uintptr_t)src) & 3u) == 0) {
    uint64_t head = (4u - ((uintptr_t)dst & 3u)) & 3u;
    if (head > len) head = len;
    for (uint64_t i = r; i < head; i += n) dst[i] = src[i];
    const uint64_t n4 = (len - head) / 4;
    const uint32_t *s4 = (const uint32_t *)(src + head);
    uint32_t *d4 = (uint32_t *)(dst + head);
    for (uint64_t i = r; i < n4; i += n) d4[i] = s4[i];
    done = head + n4 * 4;
  }
  for (uint64_t i = done + r; i < len; i += n) dst[i] = src[i];
}

__device__ inline void nvlink_signal(const slip_dev_queue &q, Addr sig, uint64_t add) {
  uint64_t *p = (uint64_t *)ptr(q, sig);
  slip::sync::fence_sys();
  if (q.regions[sig.region].flags & SLIP_DEV_REGION_HOST)
    slip::sync::st_release_sys(p, slip::sync::ld_volatile(p) + add);
  else
    slip::sync::red_add_release_sys(p, add);
}

/* One thread posts one descriptor. Slots are reserved with an atomic on the queue's head, so
 * several threads of the owning block may post between two commits; at most `depth` posts may
 * be outstanding (the executor cannot drain unpublished slots). */
__device__ inline int proxy_post(slip_dev_queue &q, uint16_t op, Addr dst, Addr src, uint64_t len, Addr sig,
                                 uint64_t add) {
  const uint64_t idx = atomicAdd((unsigned long long *)&q.head, 1ull);
  const uint64_t t0 = slip::sync::globaltimer_ns();
  slip::sync::Backoff backoff;
  for (;; backoff.pause()) {
    const uint64_t tail = slip::sync::ld_acquire_sys(&q.ctrl->tail);
    if (idx - tail < q.depth) break;
    if (tail == slip::sync::ld_volatile(&q.ctrl->head) && idx - tail >= q.depth) {
      report(q, SLIP_ERR_QUEUE_FULL, 0, idx, q.depth, q.depth);
      return SLIP_ERR_QUEUE_FULL;  // more than `depth` posts without a commit
    }
    if (slip::sync::globaltimer_ns() - t0 > SLIP_DEVICE_WAIT_NS) {
      report(q, SLIP_ERR_TIMEOUT, 0, idx, 0, 0);
      return SLIP_ERR_TIMEOUT;
    }
  }
  slip_proxy_desc d;
  d.op = op;
  d.lap = SLIP_PROXY_LAP(idx, q.depth);
  d.dst_region = op == SLIP_OP_SIGNAL_ADD ? 0u : q.regions[dst.region].id;
  d.src_region = op == SLIP_OP_SIGNAL_ADD ? 0u : q.regions[src.region].id;
  d.sig_region = op == SLIP_OP_WRITE ? 0u : q.regions[sig.region].id;
  d.dst_key = op == SLIP_OP_SIGNAL_ADD ? 0ull : q.regions[dst.region].key;
  d.sig_key = op == SLIP_OP_WRITE ? 0ull : q.regions[sig.region].key;
  d.dst_offset = dst.offset;
  d.src_offset = src.offset;
  d.length = len;
  d.sig_offset = sig.offset;
  d.sig_add = add;
  for (int k = 0; k < 7; k++) d.reserved[k] = 0;
  static_assert(sizeof(slip_proxy_desc) == 128, "proxy descriptor is 128 bytes");
  const int4 *in = (const int4 *)&d;
  int4 *out = (int4 *)&q.ring[idx & (q.depth - 1)];
#pragma unroll
  for (int k = 0; k < 8; k++) out[k] = in[k];
  return SLIP_OK;
}

}  // namespace detail
}  // namespace dev
}  // namespace slip

#if SLIP_HAVE_GPUNETIO
#include "slipstream/device/gpunetio.cuh"
#endif

namespace slip {
namespace dev {
namespace detail {
/* gpunetio without its headers: the host never builds such a queue (slip_queueset_create answers
 * SLIP_ERR_UNSUPPORTED), so this is only reached through a forged queue. */
__device__ inline int no_gpunetio(const slip_dev_queue &q) {
  report(q, SLIP_ERR_UNSUPPORTED, 0, 0, 0, 0);
  return SLIP_ERR_UNSUPPORTED;
}
/* The leader posts a gpunetio operation (a WQE built, not yet submitted); the whole group returns
 * its status. */
#if SLIP_HAVE_GPUNETIO
#define SLIP_GPUNETIO_POST(g, q, call)  \
  do {                                  \
    int post_st = SLIP_OK;              \
    g.sync();                           \
    if (g.rank() == 0) post_st = call;  \
    return g.broadcast(post_st);        \
  } while (0)
#else
#define SLIP_GPUNETIO_POST(g, q, call) return detail::no_gpunetio(q)
#endif
}  // namespace detail

template <class G>
__device__ inline int write(G g, slip_dev_queue &q, Addr dst, Addr src, uint64_t len) {
  int st = detail::check(g, q, dst, len, SLIP_DEV_REGION_WRITABLE);
  if (st == SLIP_OK) st = detail::check(g, q, src, len, SLIP_DEV_REGION_READABLE);
  if (st != SLIP_OK) return st;
  if (q.backend == SLIP_BACKEND_NVLINK) {
    detail::copy(g, detail::ptr(q, dst), detail::ptr(q, src), len);
    return SLIP_OK;
  }
  if (q.backend == SLIP_BACKEND_GPUNETIO) SLIP_GPUNETIO_POST(g, q, gpunetio::write(q, dst, src, len));
  if (g.rank() == 0) st = detail::proxy_post(q, SLIP_OP_WRITE, dst, src, len, Addr{0, 0}, 0);
  return g.broadcast(st);
}

template <class G>
__device__ inline int signal_add(G g, slip_dev_queue &q, Addr sig, uint64_t add) {
  int st = detail::check(g, q, sig, 8, SLIP_DEV_REGION_WRITABLE);
  if (st == SLIP_OK && (sig.offset & 7u) != 0) {
    st = SLIP_ERR_INVALID_ARG;
    if (g.rank() == 0) detail::report(q, st, q.regions[sig.region].id, sig.offset, 8, 8);
  }
  if (st != SLIP_OK) return st;
  if (q.backend == SLIP_BACKEND_NVLINK) {
    g.sync();  // every thread's stores precede the leader's fence
    if (g.rank() == 0) detail::nvlink_signal(q, sig, add);
    return SLIP_OK;
  }
  if (q.backend == SLIP_BACKEND_GPUNETIO) SLIP_GPUNETIO_POST(g, q, gpunetio::signal_add(q, sig, add));
  if (g.rank() == 0) st = detail::proxy_post(q, SLIP_OP_SIGNAL_ADD, Addr{0, 0}, Addr{0, 0}, 0, sig, add);
  return g.broadcast(st);
}

template <class G>
__device__ inline int write_signal(G g, slip_dev_queue &q, Addr dst, Addr src, uint64_t len, Addr sig,
                                   uint64_t add) {
  int st = detail::check(g, q, dst, len, SLIP_DEV_REGION_WRITABLE);
  if (st == SLIP_OK) st = detail::check(g, q, src, len, SLIP_DEV_REGION_READABLE);
  if (st == SLIP_OK) st = detail::check(g, q, sig, 8, SLIP_DEV_REGION_WRITABLE);
  if (st == SLIP_OK && (sig.offset & 7u) != 0) {
    st = SLIP_ERR_INVALID_ARG;
    if (g.rank() == 0) detail::report(q, st, q.regions[sig.region].id, sig.offset, 8, 8);
  }
  if (st != SLIP_OK) return st;
  if (q.backend == SLIP_BACKEND_NVLINK) {
    detail::copy(g, detail::ptr(q, dst), detail::ptr(q, src), len);
    g.sync();
    if (g.rank() == 0) detail::nvlink_signal(q, sig, add);
    return SLIP_OK;
  }
  if (q.backend == SLIP_BACKEND_GPUNETIO)
    SLIP_GPUNETIO_POST(g, q, gpunetio::write_signal(q, dst, src, len, sig, add));
  if (g.rank() == 0) st = detail::proxy_post(q, SLIP_OP_WRITE_SIGNAL, dst, src, len, sig, add);
  return g.broadcast(st);
}

/* Publishes everything this group (and any other poster of this queue) wrote before the call. */
template <class G>
__device__ inline void commit(G g, slip_dev_queue &q) {
  g.sync();
  if (q.backend == SLIP_BACKEND_PROXY && g.rank() == 0) {
    // Data written by this kernel and the descriptors in host memory precede the index.
    slip::sync::fence_sys();
    slip::sync::st_release_sys(&q.ctrl->head, *(volatile uint64_t *)&q.head);
  }
#if SLIP_HAVE_GPUNETIO
  if (q.backend == SLIP_BACKEND_GPUNETIO && g.rank() == 0) gpunetio::commit(q);
#endif
}

/* Ticket of the last post: wait(g, q, ticket(q)) waits for everything posted so far. */
__device__ inline uint64_t ticket(slip_dev_queue &q) {
#if SLIP_HAVE_GPUNETIO
  if (q.backend == SLIP_BACKEND_GPUNETIO) return gpunetio::ticket(q);
#endif
  return *(const volatile uint64_t *)&q.head;
}

/* Local completion of everything up to `ticket`; SLIP_OK or the set's first error. */
template <class G>
__device__ inline int wait(G g, slip_dev_queue &q, uint64_t tk) {
  int st = SLIP_OK;
  g.sync();
  if (g.rank() == 0) {
    if (q.backend == SLIP_BACKEND_PROXY) {
      const uint64_t t0 = slip::sync::globaltimer_ns();
      slip::sync::Backoff backoff;
      while (slip::sync::ld_acquire_sys(&q.ctrl->tail) < tk) {
        backoff.pause();
        if (slip::sync::ld_acquire_sys(&q.proxy_error->code) != 0) break;
        if (slip::sync::globaltimer_ns() - t0 > SLIP_DEVICE_WAIT_NS) {
          detail::report(q, SLIP_ERR_TIMEOUT, 0, tk, 0, 0);
          break;
        }
      }
      st = (int)slip::sync::ld_acquire_sys(&q.proxy_error->code);
    } else if (q.backend == SLIP_BACKEND_GPUNETIO) {
#if SLIP_HAVE_GPUNETIO
      const int w = gpunetio::wait(q, tk);
      if (w == SLIP_ERR_TIMEOUT) detail::report(q, SLIP_ERR_TIMEOUT, 0, tk, 0, 0);
      // The software NIC records why a WQE failed before it writes the error CQE.
      st = (int)slip::sync::ld_acquire_sys(&q.proxy_error->code);
      if (st == SLIP_OK && w != SLIP_ERR_TIMEOUT) st = w;
#else
      st = detail::no_gpunetio(q);
#endif
    }
    if (st == SLIP_OK) st = (int)*(volatile uint32_t *)&q.error->code;
  }
  return g.broadcast(st);
}

template <class G>
__device__ inline int wait_all(G g, slip_dev_queue &q) {
  g.sync();
  return wait(g, q, ticket(q));
}

/* Receiver side (one thread): wait until *sig >= value. SLIP_OK or SLIP_ERR_TIMEOUT. */
__device__ inline int wait_signal_ge(const uint64_t *sig, uint64_t value, uint64_t timeout_ns = SLIP_DEVICE_WAIT_NS) {
  const uint64_t t0 = slip::sync::globaltimer_ns();
  slip::sync::Backoff backoff;
  while (slip::sync::ld_acquire_sys(sig) < value) {
    if (slip::sync::globaltimer_ns() - t0 > timeout_ns) return SLIP_ERR_TIMEOUT;
    backoff.pause();
  }
  return SLIP_OK;
}

}  // namespace dev
}  // namespace slip

#endif
