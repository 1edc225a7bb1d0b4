// The CPU side of the proxy backend: one thread drains the descriptor rings that GPU queues (or a
// host producer) fill, checks each descriptor against the region tables, and executes it through
// an executor (CUDA copies on the GPU machine, memcpy in the CPU tests).
//
// Protocol per ring (see slip_proxy_ctrl): the producer writes slots, then publishes `head` with a
// release store; this thread reads `head` with acquire, executes [tail, head), flushes the
// executor, then publishes `tail` with release. A descriptor that fails its checks is consumed
// without touching memory; the first such failure is recorded in the shared error record, and its
// signal (if any) is not sent, so a receiver never counts bytes that did not land.
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "check.h"
#include "slipstream/host.h"

struct slip_proxy {
  slip_proxy_exec_ops ops;
  uint32_t nqueues = 0;
  uint32_t depth = 0;
  std::vector<slip_proxy_desc *> rings;
  std::vector<slip_proxy_ctrl *> ctrls;
  slip_dev_error *err = nullptr;
  std::vector<slip_region_entry> src, dst;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> executed{0};
  std::atomic<uint64_t> sweeps{0}, issue_ns{0}, flush_ns{0};
  std::thread thread;
};

static uint64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t load_acquire(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_release(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void publish_error(slip_proxy *p, const slip_dev_error &e, uint32_t q) { slip_dev_error_publish(p->err, &e, q); }

// Checks and executes one descriptor. Returns the executor's status (a failing executor stops the
// proxy); a descriptor rejected by the checks returns SLIP_OK after recording the error.
static slip_status execute(slip_proxy *p, uint32_t q, const slip_proxy_desc &d) {
  slip_dev_error e;
  memset(&e, 0, sizeof e);
  const uint32_t n_src = (uint32_t)p->src.size(), n_dst = (uint32_t)p->dst.size();
  const bool write = d.op == SLIP_OP_WRITE || d.op == SLIP_OP_WRITE_SIGNAL;
  const bool signal = d.op == SLIP_OP_SIGNAL_ADD || d.op == SLIP_OP_WRITE_SIGNAL;
  if (!write && !signal) {
    e.code = SLIP_ERR_BAD_DESCRIPTOR;
    e.limit = d.op;
    publish_error(p, e, q);
    return SLIP_OK;
  }
  // Check everything before doing anything: a bad signal must not leave a lone data write.
  if (write) {
    if (slip_region_validate(p->dst.data(), n_dst, d.dst_region, 1, d.dst_key, d.dst_offset, d.length,
                             SLIP_DEV_REGION_WRITABLE, &e) != SLIP_OK ||
        slip_region_validate(p->src.data(), n_src, d.src_region, 0, 0, d.src_offset, d.length,
                             SLIP_DEV_REGION_READABLE, &e) != SLIP_OK) {
      publish_error(p, e, q);
      return SLIP_OK;
    }
  }
  if (signal) {
    if (slip_region_validate(p->dst.data(), n_dst, d.sig_region, 1, d.sig_key, d.sig_offset, 8,
                             SLIP_DEV_REGION_WRITABLE, &e) != SLIP_OK) {
      publish_error(p, e, q);
      return SLIP_OK;
    }
    if (d.sig_offset % 8 != 0) {
      e.code = SLIP_ERR_INVALID_ARG;
      e.region_id = d.sig_region;
      e.offset = d.sig_offset;
      e.length = 8;
      publish_error(p, e, q);
      return SLIP_OK;
    }
  }
  slip_status st = SLIP_OK;
  if (write && d.length > 0) {
    const slip_region_entry *dr = slip_region_find(p->dst.data(), n_dst, d.dst_region);
    const slip_region_entry *sr = slip_region_find(p->src.data(), n_src, d.src_region);
    st = p->ops.copy(p->ops.state, (char *)dr->ptr + d.dst_offset, (const char *)sr->ptr + d.src_offset,
                     d.length);
    if (st != SLIP_OK) return st;
  }
  if (signal) {
    const slip_region_entry *gr = slip_region_find(p->dst.data(), n_dst, d.sig_region);
    st = p->ops.signal_add(p->ops.state, (uint64_t *)((char *)gr->ptr + d.sig_offset), d.sig_add, gr->flags);
  }
  return st;
}

static void run(slip_proxy *p) {
  std::vector<uint64_t> tail(p->nqueues, 0);
  for (uint32_t q = 0; q < p->nqueues; q++) tail[q] = load_acquire(&p->ctrls[q]->tail);
  std::vector<uint64_t> heads(p->nqueues);
  unsigned idle = 0;
  while (!p->stop.load(std::memory_order_acquire)) {
    bool any = false;
    const uint64_t t0 = mono_ns();
    for (uint32_t q = 0; q < p->nqueues; q++) {
      uint64_t head = load_acquire(&p->ctrls[q]->head);
      heads[q] = head;
      for (uint64_t i = tail[q]; i < head; i++) {
        slip_proxy_desc d;
        memcpy(&d, &p->rings[q][i & (p->depth - 1)], sizeof d);
        if (d.lap != SLIP_PROXY_LAP(i, p->depth)) {
          slip_dev_error e;
          memset(&e, 0, sizeof e);
          e.code = SLIP_ERR_BAD_DESCRIPTOR;
          e.offset = i;                       // the ring index
          e.limit = SLIP_PROXY_LAP(i, p->depth);  // the lap expected
          e.length = d.lap;                   // the lap found
          publish_error(p, e, q);
          any = true;
          continue;
        }
        if (execute(p, q, d) != SLIP_OK) {
          // The executor itself failed (CUDA error): record it and stop consuming.
          slip_dev_error e;
          memset(&e, 0, sizeof e);
          e.code = SLIP_ERR_CUDA;
          e.region_id = d.dst_region;
          e.offset = d.dst_offset;
          e.length = d.length;
          publish_error(p, e, q);
          p->stop.store(true);
          break;
        }
        any = true;
      }
    }
    if (any) {
      const uint64_t t1 = mono_ns();
      // Copies and signals are complete before the producer may reuse ring slots or sources.
      if (p->ops.flush(p->ops.state) != SLIP_OK) {
        slip_dev_error e;
        memset(&e, 0, sizeof e);
        e.code = SLIP_ERR_CUDA;
        publish_error(p, e, 0);
        break;
      }
      uint64_t n = 0;
      for (uint32_t q = 0; q < p->nqueues; q++) {
        n += heads[q] - tail[q];
        tail[q] = heads[q];
        store_release(&p->ctrls[q]->tail, tail[q]);
      }
      p->executed.fetch_add(n, std::memory_order_relaxed);
      p->sweeps.fetch_add(1, std::memory_order_relaxed);
      p->issue_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
      p->flush_ns.fetch_add(mono_ns() - t1, std::memory_order_relaxed);
      idle = 0;
    } else if (++idle > 1024) {
      sched_yield();
    }
  }
}

extern "C" slip_status slip_proxy_create(const slip_proxy_exec_ops *ops, uint32_t nqueues, uint32_t depth,
                                         slip_proxy_desc *const *rings, slip_proxy_ctrl *const *ctrls,
                                         slip_dev_error *err, const slip_region_entry *src, uint32_t nsrc,
                                         const slip_region_entry *dst, uint32_t ndst, slip_proxy **out) {
  slip_status st = SLIP_OK;
  slip_proxy *p = nullptr;
  if (!ops || !ops->copy || !ops->signal_add || !ops->flush || !rings || !ctrls || !err || !out)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_proxy_create: null argument");
  if (nqueues == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_proxy_create: nqueues is 0");
  if (depth == 0 || (depth & (depth - 1)) != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "ring depth %u is not a power of two", depth);
  p = new slip_proxy();
  p->ops = *ops;
  p->nqueues = nqueues;
  p->depth = depth;
  p->rings.assign(rings, rings + nqueues);
  p->ctrls.assign(ctrls, ctrls + nqueues);
  p->err = err;
  p->src.assign(src, src + nsrc);
  p->dst.assign(dst, dst + ndst);
  p->thread = std::thread(run, p);
  *out = p;
  p = nullptr;
done:
  delete p;
  return st;
}

extern "C" void slip_proxy_destroy(slip_proxy *p) {
  if (!p) return;
  p->stop.store(true, std::memory_order_release);
  if (p->thread.joinable()) p->thread.join();
  delete p;
}

extern "C" uint64_t slip_proxy_executed(const slip_proxy *p) {
  return p ? p->executed.load(std::memory_order_relaxed) : 0;
}

extern "C" void slip_proxy_get_stats(const slip_proxy *p, slip_proxy_stats *out) {
  memset(out, 0, sizeof *out);
  if (!p) return;
  out->descriptors = p->executed.load(std::memory_order_relaxed);
  out->sweeps = p->sweeps.load(std::memory_order_relaxed);
  out->issue_ns = p->issue_ns.load(std::memory_order_relaxed);
  out->flush_ns = p->flush_ns.load(std::memory_order_relaxed);
}

extern "C" slip_status slip_proxy_post(slip_proxy_desc *ring, slip_proxy_ctrl *ctrl, uint32_t depth,
                                       uint64_t *head, const slip_proxy_desc *d) {
  // Back-pressure: wait (at most ~10 s) for the consumer to free a slot.
  for (long spins = 0; *head - load_acquire(&ctrl->tail) >= depth; spins++) {
    if (spins > 10L * 1000 * 1000)
      return slip_set_error(SLIP_ERR_TIMEOUT, "proxy ring full for 10 s (head %llu, depth %u): is the executor running?",
                            (unsigned long long)*head, depth);
    if (spins > 1000) usleep(1);
  }
  slip_proxy_desc *slot = &ring[*head & (depth - 1)];
  memcpy(slot, d, sizeof *d);
  slot->lap = SLIP_PROXY_LAP(*head, depth);
  (*head)++;
  return SLIP_OK;
}

extern "C" void slip_proxy_publish(slip_proxy_ctrl *ctrl, uint64_t head) { store_release(&ctrl->head, head); }
