// Helpers of the resident server's GPU tests: the reader's side of a ring (post a request, wait
// for its answer) and request builders.
#ifndef SLIP_SERVE_COMMON_CUH
#define SLIP_SERVE_COMMON_CUH

#include <string.h>
#include <time.h>

#include "pair_common.cuh"
#include "slipstream/gpunetio_nic.h"
#include "slipstream/serve.h"

namespace serve_test {

constexpr uint64_t kKey = 0x5eed5eed12345678ull;

inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Formats a ring header of n slots over `memory`, made by this process. */
inline slip_serve_ring_header *format_header(void *memory, uint32_t n) {
  auto *h = (slip_serve_ring_header *)memory;
  h->magic = SLIP_SERVE_RING_MAGIC;
  h->version = SLIP_SERVE_VERSION;
  h->nslots = n;
  h->slot_bytes = SLIP_SERVE_SLOT_BYTES;
  h->reader_pid = (uint64_t)getpid();
  return h;
}

/* The reader's side of one ring. */
struct Ring {
  uint8_t *host = nullptr;  // mapped pinned
  uint64_t dev = 0;
  uint32_t nslots = 0;
  uint64_t next = 0;  // next ticket
  /* A ring of a holder on another machine: `host` is the reader's copy (registered on its NIC as
   * local_id / local_mkey); post() also writes the slot into the holder's copy (remote_id /
   * remote_mkey) on queue pair `qp` of `link`, which the host drives (serve.h, rings). */
  slip_nic_link *link = nullptr;
  uint32_t qp = 0, local_id = 0, local_mkey = 0, remote_id = 0, remote_mkey = 0;
  slip_status posted = SLIP_OK;  // the last host post's status
  /* Formats a ring over `memory` (slip_serve_ring_bytes(n) bytes, zeroed), at device address `d`. */
  void format(uint8_t *memory, uint64_t d, uint32_t n) {
    host = memory;
    dev = d;
    nslots = n;
    next = 0;
    format_header(host, n)->holder_pid = (uint64_t)getpid();  // served from the start (a holder's slip_serve_ring_ack)
  }
  /* A ring of n slots in mapped pinned memory of this process. */
  void make(uint32_t n) {
    const uint64_t bytes = slip_serve_ring_bytes(n);
    uint8_t *memory = nullptr;
    T_CUDA(cudaHostAlloc((void **)&memory, bytes, cudaHostAllocMapped));
    memset(memory, 0, bytes);
    void *d = nullptr;
    T_CUDA(cudaHostGetDevicePointer(&d, memory, 0));
    format(memory, (uint64_t)(uintptr_t)d, n);
  }
  slip_serve_request *slot(uint64_t t) {
    return (slip_serve_request *)(host + SLIP_SERVE_RING_HEADER + (t & (nslots - 1)) * SLIP_SERVE_SLOT_BYTES);
  }
  slip_serve_done *done(uint64_t t) {
    return (slip_serve_done *)(host + SLIP_SERVE_RING_HEADER + (uint64_t)nslots * SLIP_SERVE_SLOT_BYTES +
                               (t & (nslots - 1)) * sizeof(slip_serve_done));
  }
  /* Writes q (its seq set here) into the next slot and publishes it; returns the ticket. */
  uint64_t post(const slip_serve_request &q) {
    const uint64_t t = next++;
    slip_serve_request *s = slot(t);
    memcpy((char *)s + 8, (const char *)&q + 8, sizeof(q) - 8);
    __atomic_store_n(&s->seq, t + 1, __ATOMIC_RELEASE);
    if (link) {
      const uint64_t off = (uint64_t)((uint8_t *)s - host);
      // The slot after seq, then the holder's seq word from the previous lap's ticket + 1 to t + 1.
      const slip_nic_op w[2] = {
          {SLIP_NIC_OP_WRITE, local_id, local_mkey, remote_id, remote_mkey, 0, off + 8, off + 8,
           SLIP_SERVE_SLOT_BYTES - 8, 0},
          {SLIP_NIC_OP_FETCH_ADD, 0, 0, remote_id, remote_mkey, 0, 0, off, 8, slip_serve_seq_step(t, nslots)}};
      posted = slip_nic_host_post(link, qp, w, 2, 1000000000ull);
    }
    return t;
  }
  /* Once it returns, the holder's copy holds every request posted (a remote ring's writes completed). */
  void flush() {
    if (link) posted = slip_nic_host_drain(link, qp, 2000000000ull);
  }
  /* Waits for ticket t's answer; false after timeout_ns. */
  bool wait(uint64_t t, slip_serve_done *out, uint64_t timeout_ns = 5000000000ull) {
    slip_serve_done *d = done(t);
    const uint64_t t0 = mono_ns();
    while (__atomic_load_n(&d->seq, __ATOMIC_ACQUIRE) != t + 1) {
      if (mono_ns() - t0 > timeout_ns) return false;
    }
    *out = *d;
    return true;
  }
};

inline slip_serve_request request(uint64_t id, uint32_t shuffle, uint64_t table_offset) {
  slip_serve_request q;
  memset(&q, 0, sizeof q);
  q.request_id = id;
  q.magic = SLIP_SERVE_REQ_MAGIC;
  q.shuffle_id = shuffle;
  q.landing_key = kKey;
  q.table_offset = table_offset;
  q.deadline_ns = mono_ns() + 10000000000ull;
  return q;
}

inline void add_block(slip_serve_request &q, uint64_t map, uint32_t part, uint64_t dst, uint64_t cap) {
  slip_serve_block &b = q.blocks[q.nblocks++];
  b.map_id = map;
  b.partition = part;
  b.dst_offset = dst;
  b.capacity = cap;
}

}  // namespace serve_test

#endif
