// The software NIC of the gpunetio backend (see slipstream/softnic.h): mlx5 WQE decoding, CQE
// writing, and the threads that execute GPUNetIO CPU-proxy queue pairs.
//
// Per sweep, over the thread's queue pairs: read the producer count each device queue published
// (acquire), decode and check the new WQEs, hand all their copies and atomics to the executor in
// one call that returns once they completed, then write the CQEs the WQEs asked for, in WQE order.
// A CQE therefore means what it means on a NIC: the operation and every one before it on its queue
// pair have completed at the target, and their sources may be reused.
#include <sched.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "check.h"
#include "slipstream/softnic.h"

namespace {

uint32_t be32_at(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
uint64_t be64_at(const uint8_t *p) { return (uint64_t)be32_at(p) << 32 | be32_at(p + 4); }
void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
void put_be16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

uint64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint8_t owner_bit(uint64_t index, uint32_t cqe_num) { return (uint8_t)((index / cqe_num) & 1u); }

}  // namespace

extern "C" slip_status slip_wqe_decode(const void *wqe64, slip_wqe *w) {
  const uint8_t *p = (const uint8_t *)wqe64;
  memset(w, 0, sizeof *w);
  const uint32_t oio = be32_at(p + SLIP_WQE_CTRL_OPMOD_IDX_OPCODE), qd = be32_at(p + SLIP_WQE_CTRL_QPN_DS);
  w->opcode = (uint8_t)oio;
  w->index = (uint16_t)(oio >> 8);
  w->opmod = (uint8_t)(oio >> 24);
  w->qpn = qd >> 8;
  w->ds = (uint8_t)(qd & 0x3f);
  w->fm_ce_se = p[SLIP_WQE_CTRL_FM_CE_SE];
  switch (w->opcode) {
    case SLIP_MLX5_OPCODE_NOP:
      if (w->ds != 1)
        return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "NOP WQE %u with %u segments, expected 1", w->index, w->ds);
      return SLIP_OK;
    case SLIP_MLX5_OPCODE_RDMA_WRITE: {
      w->raddr = be64_at(p + SLIP_WQE_RADDR);
      w->rkey = be32_at(p + SLIP_WQE_RKEY);
      const uint32_t bc = be32_at(p + SLIP_WQE_DSEG0 + SLIP_DSEG_BYTE_COUNT);
      if (bc & SLIP_MLX5_INLINE_SEG) {
        // Inline data: 4-byte header, then the bytes, within the segments the DS count covers.
        w->inline_bytes = bc & ~SLIP_MLX5_INLINE_SEG;
        const uint32_t room = w->ds >= 2 ? (uint32_t)(w->ds - 2) * 16 - 4 : 0;
        if (w->ds < 3 || w->ds > 4 || w->inline_bytes > room)
          return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR,
                                "inline RDMA write WQE %u: %u bytes in %u segments, expected at most %u bytes in 3 or 4",
                                w->index, w->inline_bytes, w->ds, w->ds >= 3 && w->ds <= 4 ? room : 44u);
        memcpy(w->inline_data, p + SLIP_WQE_DSEG0 + 4, w->inline_bytes);
        return SLIP_OK;
      }
      if (w->ds != 3 && w->ds != 4)
        return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "RDMA write WQE %u with %u segments, expected 3 or 4",
                              w->index, w->ds);
      w->nseg = w->ds - 2u;
      for (uint32_t s = 0; s < w->nseg; s++) {
        const uint8_t *d = p + SLIP_WQE_DSEG0 + 16 * s;
        w->seg[s].bytes = be32_at(d + SLIP_DSEG_BYTE_COUNT);
        w->seg[s].lkey = be32_at(d + SLIP_DSEG_LKEY);
        w->seg[s].addr = be64_at(d + SLIP_DSEG_ADDR);
      }
      return SLIP_OK;
    }
    case SLIP_MLX5_OPCODE_ATOMIC_FA: {
      if (w->ds != 4)
        return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "atomic WQE %u with %u segments, expected 4", w->index, w->ds);
      w->raddr = be64_at(p + SLIP_WQE_RADDR);
      w->rkey = be32_at(p + SLIP_WQE_RKEY);
      w->swap_add = be64_at(p + SLIP_WQE_ATOMIC_SWAP_ADD);
      w->compare = be64_at(p + SLIP_WQE_ATOMIC_COMPARE);
      w->nseg = 1;
      w->seg[0].bytes = be32_at(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_BYTE_COUNT);
      w->seg[0].lkey = be32_at(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_LKEY);
      w->seg[0].addr = be64_at(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_ADDR);
      return SLIP_OK;
    }
    default:
      return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR,
                            "WQE %u: opcode 0x%02x, expected NOP (0x00), RDMA_WRITE (0x08) or ATOMIC_FA (0x12)",
                            w->index, w->opcode);
  }
}

extern "C" void slip_wqe_encode_write(void *wqe64, uint16_t index, uint32_t qpn, int cqe, uint64_t raddr,
                                      uint32_t rkey, uint64_t laddr, uint32_t lkey, uint32_t bytes) {
  uint8_t *p = (uint8_t *)wqe64;
  memset(p, 0, SLIP_MLX5_WQE_BYTES);
  put_be32(p + SLIP_WQE_CTRL_OPMOD_IDX_OPCODE, (uint32_t)index << 8 | SLIP_MLX5_OPCODE_RDMA_WRITE);
  put_be32(p + SLIP_WQE_CTRL_QPN_DS, (qpn & 0xffffffu) << 8 | 3u);  // control, remote address, one data segment
  p[SLIP_WQE_CTRL_FM_CE_SE] = cqe ? 0x08 : 0x00;  // CE: CQE always (2 << 2), or on error only (0)
  put_be32(p + SLIP_WQE_RADDR, (uint32_t)(raddr >> 32));
  put_be32(p + SLIP_WQE_RADDR + 4, (uint32_t)raddr);
  put_be32(p + SLIP_WQE_RKEY, rkey);
  put_be32(p + SLIP_WQE_DSEG0 + SLIP_DSEG_BYTE_COUNT, bytes & ~SLIP_MLX5_INLINE_SEG);
  put_be32(p + SLIP_WQE_DSEG0 + SLIP_DSEG_LKEY, lkey);
  put_be32(p + SLIP_WQE_DSEG0 + SLIP_DSEG_ADDR, (uint32_t)(laddr >> 32));
  put_be32(p + SLIP_WQE_DSEG0 + SLIP_DSEG_ADDR + 4, (uint32_t)laddr);
}

extern "C" void slip_wqe_encode_fadd(void *wqe64, uint16_t index, uint32_t qpn, int cqe, uint64_t raddr,
                                     uint32_t rkey, uint64_t laddr, uint32_t lkey, uint64_t add) {
  uint8_t *p = (uint8_t *)wqe64;
  memset(p, 0, SLIP_MLX5_WQE_BYTES);
  put_be32(p + SLIP_WQE_CTRL_OPMOD_IDX_OPCODE, (uint32_t)index << 8 | SLIP_MLX5_OPCODE_ATOMIC_FA);
  put_be32(p + SLIP_WQE_CTRL_QPN_DS, (qpn & 0xffffffu) << 8 | 4u);  // control, remote address, atomic, data
  p[SLIP_WQE_CTRL_FM_CE_SE] = cqe ? 0x08 : 0x00;
  put_be32(p + SLIP_WQE_RADDR, (uint32_t)(raddr >> 32));
  put_be32(p + SLIP_WQE_RADDR + 4, (uint32_t)raddr);
  put_be32(p + SLIP_WQE_RKEY, rkey);
  put_be32(p + SLIP_WQE_ATOMIC_SWAP_ADD, (uint32_t)(add >> 32));
  put_be32(p + SLIP_WQE_ATOMIC_SWAP_ADD + 4, (uint32_t)add);
  put_be32(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_BYTE_COUNT, 8);
  put_be32(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_LKEY, lkey);
  put_be32(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_ADDR, (uint32_t)(laddr >> 32));
  put_be32(p + SLIP_WQE_ATOMIC_DSEG + SLIP_DSEG_ADDR + 4, (uint32_t)laddr);
}

extern "C" uint64_t slip_wqe_write_bytes(const slip_wqe *w) {
  if (w->inline_bytes) return w->inline_bytes;
  uint64_t n = 0;
  for (uint32_t s = 0; s < w->nseg; s++) n += w->seg[s].bytes;
  return n;
}

static void cqe_publish(uint8_t *c, uint8_t opcode, uint64_t index, uint32_t cqe_num) {
  __atomic_store_n(&c[SLIP_CQE_OP_OWN], (uint8_t)(opcode << 4 | owner_bit(index, cqe_num)), __ATOMIC_RELEASE);
}

extern "C" void slip_cqe_write(void *cqe64, uint64_t index, uint32_t cqe_num, uint16_t wqe_counter, uint32_t qpn,
                               uint32_t byte_cnt) {
  uint8_t *c = (uint8_t *)cqe64;
  memset(c, 0, SLIP_CQE_OP_OWN);
  put_be32(c + SLIP_CQE_BYTE_CNT, byte_cnt);
  put_be32(c + SLIP_CQE_SOP_DROP_QPN, qpn & 0xffffffu);
  put_be16(c + SLIP_CQE_WQE_COUNTER, wqe_counter);
  cqe_publish(c, SLIP_MLX5_CQE_REQ, index, cqe_num);
}

extern "C" void slip_cqe_write_error(void *cqe64, uint64_t index, uint32_t cqe_num, uint16_t wqe_counter,
                                     uint32_t qpn, uint8_t wqe_opcode, uint8_t syndrome) {
  uint8_t *c = (uint8_t *)cqe64;
  memset(c, 0, SLIP_CQE_OP_OWN);
  c[SLIP_CQE_SYNDROME] = syndrome;
  put_be32(c + SLIP_CQE_SOP_DROP_QPN, (uint32_t)wqe_opcode << 24 | (qpn & 0xffffffu));
  put_be16(c + SLIP_CQE_WQE_COUNTER, wqe_counter);
  cqe_publish(c, SLIP_MLX5_CQE_REQ_ERR, index, cqe_num);
}

extern "C" void slip_cq_init(void *cq, uint32_t cqe_num) {
  uint8_t *c = (uint8_t *)cq;
  memset(c, 0, (size_t)cqe_num * SLIP_MLX5_CQE_BYTES);
  for (uint32_t i = 0; i < cqe_num; i++) c[(size_t)i * SLIP_MLX5_CQE_BYTES + SLIP_CQE_OP_OWN] = SLIP_MLX5_CQE_INVALID << 4 | 1;
}

extern "C" void slip_cqe_read(const void *cqe64, uint8_t *owner, uint8_t *opcode, uint16_t *wqe_counter,
                              uint8_t *syndrome) {
  const uint8_t *c = (const uint8_t *)cqe64;
  const uint8_t op_own = __atomic_load_n(&c[SLIP_CQE_OP_OWN], __ATOMIC_ACQUIRE);
  if (owner) *owner = op_own & 1u;
  if (opcode) *opcode = op_own >> 4;
  if (wqe_counter) *wqe_counter = (uint16_t)(c[SLIP_CQE_WQE_COUNTER] << 8 | c[SLIP_CQE_WQE_COUNTER + 1]);
  if (syndrome) *syndrome = c[SLIP_CQE_SYNDROME];
}

// ---------------------------------------------------------------------------------------------
// The NIC threads

namespace {
constexpr uint8_t kCqUpdate = 0x08;  // fm_ce_se: CE = 2 (CQE always) << 2

// One completion to write after the sweep's executor call.
struct Pending {
  slip_softnic *nic;
  uint32_t qp;
  uint64_t index;
  uint8_t wqe_opcode;
  uint8_t syndrome;  // 0: success
  bool cqe;          // the WQE asked for a CQE (error CQEs are written regardless)
  uint32_t bytes;
};

}  // namespace

// One NIC (a protection domain's queue pairs, tables and error record), served by its engine's
// threads: queue pair q by worker (first_worker + q) % threads.
struct slip_softnic {
  slip_softnic_engine *engine = nullptr;
  uint32_t first_worker = 0;
  std::vector<slip_softnic_qp> qps;
  std::vector<uint64_t> ci;        // WQEs consumed per queue pair (owned by its worker)
  std::vector<uint64_t> next;      // WQEs read in the current sweep (owned by its worker)
  std::vector<uint64_t> cqi;       // CQEs written per queue pair (owned by its worker)
  std::vector<uint8_t> in_error;   // per queue pair (owned by its worker)
  slip_dev_error *err = nullptr;
  std::vector<slip_region_entry> local, remote;
  slip_softnic_pd pd = {nullptr, nullptr};
  slip_softnic_pd rpd = {nullptr, nullptr};  // the responder's registrations (a link)
  std::atomic<uint64_t> reset_requests{0};
  std::unique_ptr<std::atomic<uint64_t>[]> resets_done;  // per worker
  std::atomic<uint64_t> wqes{0}, cqes{0}, errors{0}, sweeps{0}, issue_ns{0}, run_ns{0};
  std::atomic<uint32_t> first_syndrome{0};
};

namespace {
struct Worker {
  uint32_t id = 0;
  slip_softnic_ops ops;
  std::thread thread;
};
}  // namespace

struct slip_softnic_engine {
  std::shared_mutex mu;                  // workers sweep under it shared; NICs come and go exclusive
  std::atomic<uint32_t> writers{0};      // NICs waiting to come or go: workers let them in first
  std::vector<slip_softnic *> nics;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<bool> stop{false};
  uint32_t next_first = 0;
};

namespace {
void publish_error(slip_softnic *n, const slip_dev_error &e, uint32_t qp) {
  n->errors.fetch_add(1, std::memory_order_relaxed);
  slip_dev_error_publish(n->err, &e, qp);
}

// Checks a remote (rkey) range: the create call's table first, then the responder's
// registrations; on success *hit is the region. Fills e and the syndrome on failure.
bool check_remote(const slip_softnic *n, uint64_t raddr, uint32_t rkey, uint64_t len, slip_dev_error *e,
                  uint8_t *synd, slip_region_entry *hit) {
  const uint32_t id = SLIP_IOVA_ID(raddr);
  const slip_region_entry *t = n->remote.data();
  uint32_t nt = (uint32_t)n->remote.size();
  if (!slip_region_find(t, nt, id) && n->rpd.find) {
    const int found = n->rpd.find(n->rpd.state, id, rkey, hit);
    if (found < 0) {
      e->code = SLIP_ERR_PEER;
      e->region_id = id;
      e->offset = SLIP_IOVA_OFFSET(raddr);
      e->length = len;
      *synd = SLIP_MLX5_SYND_TRANSPORT_RETRY_EXC_ERR;
      return false;
    }
    if (found > 0) {
      t = hit;
      nt = 1;
    }
  }
  if (slip_region_validate(t, nt, id, 1, rkey, SLIP_IOVA_OFFSET(raddr), len, SLIP_DEV_REGION_WRITABLE, e) == SLIP_OK) {
    *hit = *slip_region_find(t, nt, id);
    return true;
  }
  *synd = SLIP_MLX5_SYND_REMOTE_ACCESS_ERR;
  return false;
}
// The local region: the create call's table first, then the protection domain. On success *at is
// where the range starts.
bool check_local(const slip_softnic *n, uint64_t laddr, uint32_t lkey, uint64_t len, int need, slip_dev_error *e,
                 uint8_t *synd, char **at) {
  const uint32_t id = SLIP_IOVA_ID(laddr);
  const slip_region_entry *t = n->local.data();
  uint32_t nt = (uint32_t)n->local.size();
  slip_region_entry one;
  if (!slip_region_find(t, nt, id) && n->pd.find && n->pd.find(n->pd.state, id, lkey, &one)) {
    t = &one;
    nt = 1;
  }
  if (slip_region_validate(t, nt, id, 1, lkey, SLIP_IOVA_OFFSET(laddr), len, need, e) == SLIP_OK) {
    *at = (char *)slip_region_find(t, nt, id)->ptr + SLIP_IOVA_OFFSET(laddr);
    return true;
  }
  *synd = SLIP_MLX5_SYND_LOCAL_PROT_ERR;
  return false;
}
// Checks every address of one decoded WQE, then adds its copies or its fetch-add to the sweep. A
// WQE that fails its checks adds nothing and sets *synd and e.
void admit(const slip_softnic *n, const slip_wqe &w, const uint8_t *slot, std::vector<slip_softnic_copy> &copies,
           std::vector<slip_softnic_add> &adds, slip_dev_error *e, uint8_t *synd) {
  switch (w.opcode) {
    case SLIP_MLX5_OPCODE_NOP:
      return;
    case SLIP_MLX5_OPCODE_RDMA_WRITE: {
      const uint64_t total = slip_wqe_write_bytes(&w);
      slip_region_entry to;
      if (!check_remote(n, w.raddr, w.rkey, total, e, synd, &to)) return;
      char *src[2] = {nullptr, nullptr};
      for (uint32_t s = 0; s < w.nseg; s++)
        if (!check_local(n, w.seg[s].addr, w.seg[s].lkey, w.seg[s].bytes, SLIP_DEV_REGION_READABLE, e, synd, &src[s]))
          return;
      char *dst = (char *)to.ptr + SLIP_IOVA_OFFSET(w.raddr);
      if (w.inline_bytes) {  // from the WQE slot itself: it stays valid until its completion is known
        copies.push_back({dst, slot + SLIP_WQE_DSEG0 + 4, w.inline_bytes});
        return;
      }
      for (uint32_t s = 0; s < w.nseg; s++) {
        if (w.seg[s].bytes == 0) continue;
        copies.push_back({dst, src[s], w.seg[s].bytes});
        dst += w.seg[s].bytes;
      }
      return;
    }
    case SLIP_MLX5_OPCODE_ATOMIC_FA: {
      if (w.seg[0].bytes != 8) {
        e->code = SLIP_ERR_BAD_DESCRIPTOR;
        e->length = w.seg[0].bytes;  // got
        e->limit = 8;                // expected
        *synd = SLIP_MLX5_SYND_LOCAL_LENGTH_ERR;
        return;
      }
      slip_region_entry to;
      if (!check_remote(n, w.raddr, w.rkey, 8, e, synd, &to)) return;
      char *result = nullptr;
      if (!check_local(n, w.seg[0].addr, w.seg[0].lkey, 8, SLIP_DEV_REGION_WRITABLE, e, synd, &result)) return;
      if (SLIP_IOVA_OFFSET(w.raddr) % 8 != 0 || SLIP_IOVA_OFFSET(w.seg[0].addr) % 8 != 0) {
        e->code = SLIP_ERR_INVALID_ARG;
        e->region_id = SLIP_IOVA_ID(w.raddr);
        e->offset = SLIP_IOVA_OFFSET(w.raddr);
        e->length = 8;
        e->limit = 8;
        *synd = SLIP_MLX5_SYND_REMOTE_ACCESS_ERR;
        return;
      }
      adds.push_back({(uint64_t *)((char *)to.ptr + SLIP_IOVA_OFFSET(w.raddr)), (uint64_t *)result, w.swap_add,
                      to.flags, 0});
      return;
    }
    default:
      *synd = SLIP_MLX5_SYND_LOCAL_QP_OP_ERR;  // slip_wqe_decode admits no other opcode
      e->code = SLIP_ERR_BAD_DESCRIPTOR;
      return;
  }
}

// Reads slot `index` once its control segment carries that index: the device stores a WQE's
// segments before it publishes the producer count (with a system-scope fence), but a stale slot
// (from the previous lap) must never be executed. Gives up after 1 s (a producer that broke the
// protocol).
bool read_wqe(const slip_softnic_qp &qp, uint64_t index, uint8_t *out) {
  const uint8_t *slot = (const uint8_t *)qp.sq + (index & (qp.wqe_num - 1)) * SLIP_MLX5_WQE_BYTES;
  const uint64_t t0 = mono_ns();
  for (unsigned spin = 0;; spin++) {
    const uint32_t raw = __atomic_load_n((const uint32_t *)slot, __ATOMIC_ACQUIRE);
    memcpy(out, slot, SLIP_MLX5_WQE_BYTES);
    memcpy(out, &raw, 4);
    if ((uint16_t)(be32_at(out) >> 8) == (uint16_t)index) return true;
    if ((spin & 1023) == 1023 && mono_ns() - t0 > 1000000000ull) return false;
  }
}

// Stamps every SQ slot with an index of the previous lap and hands every CQE to the NIC.
void init_rings(const slip_softnic_qp &qp) {
  for (uint32_t s = 0; s < qp.wqe_num; s++)
    put_be32((uint8_t *)qp.sq + (size_t)s * SLIP_MLX5_WQE_BYTES, ((s + qp.wqe_num) & 0xffffu) << 8);
  slip_cq_init(qp.cq, qp.cqe_num);
}

// Decodes, checks and admits the WQEs [from, to) of queue pair q into the sweep.
void gather(slip_softnic *n, uint32_t q, uint64_t from, uint64_t to, bool fatal, std::vector<Pending> &pending,
            std::vector<slip_softnic_copy> &copies, std::vector<slip_softnic_add> &adds) {
  const slip_softnic_qp &qp = n->qps[q];
  for (uint64_t i = from; i < to; i++) {
    const uint8_t *slot = (const uint8_t *)qp.sq + (i & (qp.wqe_num - 1)) * SLIP_MLX5_WQE_BYTES;
    uint8_t raw[SLIP_MLX5_WQE_BYTES];
    slip_wqe w;
    slip_dev_error e;
    memset(&e, 0, sizeof e);
    uint8_t synd = 0;
    Pending pd = {n, q, i, 0, 0, true, 0};
    if (n->in_error[q] || fatal) {
      pd.syndrome = SLIP_MLX5_SYND_WR_FLUSH_ERR;
      pd.wqe_opcode = slot[3];
      pd.cqe = (slot[SLIP_WQE_CTRL_FM_CE_SE] & kCqUpdate) != 0;
      pending.push_back(pd);
      continue;
    }
    if (!read_wqe(qp, i, raw)) {
      e.code = SLIP_ERR_BAD_DESCRIPTOR;
      e.offset = i;                              // the WQE index
      e.limit = (uint16_t)i;                     // the index expected in the slot
      e.length = (uint16_t)(be32_at(raw) >> 8);  // the index found
      synd = SLIP_MLX5_SYND_LOCAL_QP_OP_ERR;
    } else if (slip_wqe_decode(raw, &w) != SLIP_OK) {
      e.code = SLIP_ERR_BAD_DESCRIPTOR;
      e.offset = i;
      e.limit = raw[3];
      synd = SLIP_MLX5_SYND_LOCAL_QP_OP_ERR;
    } else if (w.qpn != qp.qpn) {
      e.code = SLIP_ERR_BAD_DESCRIPTOR;
      e.offset = i;
      e.length = w.qpn;  // got
      e.limit = qp.qpn;  // expected
      synd = SLIP_MLX5_SYND_LOCAL_QP_OP_ERR;
    } else {
      pd.wqe_opcode = w.opcode;
      pd.cqe = (w.fm_ce_se & kCqUpdate) != 0;
      admit(n, w, slot, copies, adds, &e, &synd);
      if (synd == 0) pd.bytes = w.opcode == SLIP_MLX5_OPCODE_RDMA_WRITE ? (uint32_t)slip_wqe_write_bytes(&w) : 8u;
    }
    if (synd != 0) {
      pd.wqe_opcode = raw[3];
      pd.syndrome = synd;
      uint32_t none = 0;
      n->first_syndrome.compare_exchange_strong(none, synd);
      n->in_error[q] = 1;
      publish_error(n, e, q);
    }
    pending.push_back(pd);
  }
}

bool mine(const slip_softnic *n, uint32_t q, const Worker &wk) {
  return (n->first_worker + q) % (uint32_t)n->engine->workers.size() == wk.id;
}

void reset_qps(slip_softnic *n, const Worker &wk) {
  for (uint32_t q = 0; q < n->qps.size(); q++) {
    if (!mine(n, q, wk)) continue;
    init_rings(n->qps[q]);
    n->ci[q] = 0;
    n->cqi[q] = 0;
    n->in_error[q] = 0;
  }
}

// Writes the CQEs of one sweep, in WQE order per queue pair; fatal: the executor failed.
void complete(const std::vector<Pending> &pending, bool fatal) {
  for (const Pending &pd : pending) {
    slip_softnic *n = pd.nic;
    const slip_softnic_qp &qp = n->qps[pd.qp];
    const bool ok = pd.syndrome == 0 && !fatal;
    // An error CQE is written for a WQE that failed (or every WQE, once the executor failed);
    // a flushed or successful WQE gets one only when it asked.
    const bool failed_here = pd.syndrome != 0 && pd.syndrome != SLIP_MLX5_SYND_WR_FLUSH_ERR;
    if (pd.cqe || failed_here || fatal) {
      void *cqe = (uint8_t *)qp.cq + (n->cqi[pd.qp] & (qp.cqe_num - 1)) * SLIP_MLX5_CQE_BYTES;
      if (ok)
        slip_cqe_write(cqe, n->cqi[pd.qp], qp.cqe_num, (uint16_t)pd.index, qp.qpn, pd.bytes);
      else
        slip_cqe_write_error(cqe, n->cqi[pd.qp], qp.cqe_num, (uint16_t)pd.index, qp.qpn, pd.wqe_opcode,
                             pd.syndrome ? pd.syndrome : (uint8_t)SLIP_MLX5_SYND_WR_FLUSH_ERR);
      n->cqi[pd.qp]++;
      n->cqes.fetch_add(1, std::memory_order_relaxed);
    }
    n->ci[pd.qp] = pd.index + 1;
    n->wqes.fetch_add(1, std::memory_order_relaxed);
  }
}

void run(slip_softnic_engine *en, Worker *wk) {
  constexpr uint64_t kQuietNs = 5000, kGatherNs = 200000;
  std::vector<Pending> pending;
  std::vector<slip_softnic_copy> copies;
  std::vector<slip_softnic_add> adds;
  std::vector<slip_softnic *> swept;
  unsigned idle = 0;
  while (!en->stop.load(std::memory_order_acquire)) {
    bool found = false;
    // A reader-preferring lock would let the sweeps, back to back, hold a NIC's creation or
    // destruction off for ever.
    while (en->writers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    {
      std::shared_lock<std::shared_mutex> lock(en->mu);
      for (slip_softnic *n : en->nics) {
        const uint64_t resets = n->reset_requests.load(std::memory_order_acquire);
        if (resets != n->resets_done[wk->id].load(std::memory_order_relaxed)) {
          reset_qps(n, *wk);
          n->resets_done[wk->id].store(resets, std::memory_order_release);
        }
      }
      pending.clear();
      copies.clear();
      adds.clear();
      const uint64_t t0 = mono_ns();
      for (slip_softnic *n : en->nics)
        for (uint32_t q = 0; q < n->qps.size(); q++)
          if (mine(n, q, *wk)) n->next[q] = n->ci[q];
      // Passes over the thread's queue pairs of every NIC until none has posted anything for
      // kQuietNs (at most kGatherNs): WQEs that arrive meanwhile, from any of them, join the same
      // executor call instead of each paying for one.
      uint64_t last_found = t0;
      for (;;) {
        const size_t found_before = pending.size();
        for (slip_softnic *n : en->nics)
          for (uint32_t q = 0; q < n->qps.size(); q++) {
            if (!mine(n, q, *wk)) continue;
            const uint64_t pi = __atomic_load_n(n->qps[q].pi, __ATOMIC_ACQUIRE);
            if (pi <= n->next[q]) continue;
            gather(n, q, n->next[q], pi, false, pending, copies, adds);
            n->next[q] = pi;
          }
        const uint64_t now = mono_ns();
        if (pending.size() != found_before) last_found = now;
        if (pending.empty() || now - last_found > kQuietNs || now - t0 > kGatherNs) break;
      }
      if (!pending.empty()) {
        found = true;
        const uint64_t t1 = mono_ns();
        bool fatal = false;
        if ((!copies.empty() || !adds.empty()) &&
            wk->ops.run(wk->ops.state, copies.data(), (uint32_t)copies.size(), adds.data(), (uint32_t)adds.size()) !=
                SLIP_OK) {
          // The executor failed: nothing of this sweep is known to have landed. Its WQEs and every
          // later one of these queue pairs complete with flush errors.
          slip_dev_error e;
          memset(&e, 0, sizeof e);
          e.code = SLIP_ERR_CUDA;
          for (const Pending &pd : pending) publish_error(pd.nic, e, pd.qp);
          fatal = true;
        }
        complete(pending, fatal);
        swept.clear();
        for (const Pending &pd : pending)
          if (swept.empty() || swept.back() != pd.nic) swept.push_back(pd.nic);
        std::sort(swept.begin(), swept.end());
        swept.erase(std::unique(swept.begin(), swept.end()), swept.end());
        const uint64_t t2 = mono_ns();
        for (slip_softnic *n : swept) {
          if (fatal)
            for (uint32_t q = 0; q < n->qps.size(); q++)
              if (mine(n, q, *wk)) n->in_error[q] = 1;
          n->sweeps.fetch_add(1, std::memory_order_relaxed);
          n->issue_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
          n->run_ns.fetch_add(t2 - t1, std::memory_order_relaxed);
        }
      }
    }
    if (found) {
      idle = 0;
      continue;
    }
    // Idle: spin, then yield, then (after 65536 empty sweeps) nap 20 us between looks, so that an
    // idle NIC costs little CPU.
    if (++idle > 1024) {
      if (idle > (1u << 16)) {
        struct timespec nap = {0, 20000};
        nanosleep(&nap, nullptr);
      } else {
        sched_yield();
      }
    }
  }
}

}  // namespace

extern "C" slip_status slip_softnic_engine_create(const slip_softnic_ops *ops, uint32_t nthreads,
                                                  slip_softnic_engine **out) {
  slip_status st = SLIP_OK;
  slip_softnic_engine *en = nullptr;
  if (!ops || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_softnic_engine_create: null argument");
  if (nthreads == 0 || nthreads > 64)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_softnic_engine_create: %u threads, expected 1..64", nthreads);
  for (uint32_t t = 0; t < nthreads; t++)
    if (!ops[t].run) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_softnic_engine_create: thread %u has no run operation", t);
  en = new slip_softnic_engine();
  for (uint32_t t = 0; t < nthreads; t++) {
    en->workers.emplace_back(new Worker());
    en->workers.back()->id = t;
    en->workers.back()->ops = ops[t];
  }
  for (auto &w : en->workers) w->thread = std::thread(run, en, w.get());
  *out = en;
  en = nullptr;
done:
  delete en;
  return st;
}

extern "C" void slip_softnic_engine_destroy(slip_softnic_engine *en) {
  if (!en) return;
  en->stop.store(true, std::memory_order_release);
  for (auto &w : en->workers)
    if (w->thread.joinable()) w->thread.join();
  delete en;
}

extern "C" slip_status slip_softnic_create(slip_softnic_engine *en, uint32_t nqps, const slip_softnic_qp *qps,
                                           slip_dev_error *err, const slip_region_entry *local, uint32_t nlocal,
                                           const slip_softnic_pd *pd, const slip_region_entry *remote,
                                           uint32_t nremote, const slip_softnic_pd *rpd, slip_softnic **out) {
  slip_status st = SLIP_OK;
  slip_softnic *n = nullptr;
  if (!en || !qps || !err || !out || (nlocal && !local) || (nremote && !remote))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_softnic_create: null argument");
  if (nqps == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_softnic_create: no queue pairs");
  for (uint32_t q = 0; q < nqps; q++) {
    const slip_softnic_qp &qp = qps[q];
    if (!qp.sq || !qp.cq || !qp.pi) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "queue pair %u: null ring", q);
    if (qp.wqe_num < 2 || (qp.wqe_num & (qp.wqe_num - 1)) != 0)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "queue pair %u: %u WQEs, expected a power of two >= 2", q, qp.wqe_num);
    if (qp.cqe_num < qp.wqe_num || (qp.cqe_num & (qp.cqe_num - 1)) != 0)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "queue pair %u: %u CQEs, expected a power of two >= %u (one per WQE)", q,
                qp.cqe_num, qp.wqe_num);
  }
  for (uint32_t i = 0; i < nlocal + nremote; i++) {
    const slip_region_entry &r = i < nlocal ? local[i] : remote[i - nlocal];
    if (r.id > SLIP_IOVA_MAX_ID)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "region id %u, expected at most %u (iova = id << %d)", r.id, SLIP_IOVA_MAX_ID,
                SLIP_IOVA_SHIFT);
    if (r.length > (1ull << SLIP_IOVA_SHIFT))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "region %u: length %llu, expected at most 2^%d", r.id,
                (unsigned long long)r.length, SLIP_IOVA_SHIFT);
  }
  // No slot may read as written before the device writes it, and no CQE as completed.
  for (uint32_t q = 0; q < nqps; q++) init_rings(qps[q]);
  n = new slip_softnic();
  n->engine = en;
  n->qps.assign(qps, qps + nqps);
  n->ci.assign(nqps, 0);
  n->next.assign(nqps, 0);
  n->cqi.assign(nqps, 0);
  n->in_error.assign(nqps, 0);
  n->err = err;
  n->local.assign(local, local + nlocal);
  n->remote.assign(remote, remote + nremote);
  if (pd) n->pd = *pd;
  if (rpd) n->rpd = *rpd;
  n->resets_done.reset(new std::atomic<uint64_t>[en->workers.size()]);
  for (size_t w = 0; w < en->workers.size(); w++) n->resets_done[w].store(0);
  {
    en->writers.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock<std::shared_mutex> lock(en->mu);
    en->writers.fetch_sub(1, std::memory_order_acq_rel);
    n->first_worker = en->next_first;
    en->next_first = (en->next_first + nqps) % (uint32_t)en->workers.size();
    en->nics.push_back(n);
  }
  *out = n;
  n = nullptr;
done:
  delete n;
  return st;
}

extern "C" void slip_softnic_destroy(slip_softnic *n) {
  if (!n) return;
  {
    // Once it is out of the list no worker looks at it: they sweep under the shared lock.
    n->engine->writers.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock<std::shared_mutex> lock(n->engine->mu);
    n->engine->writers.fetch_sub(1, std::memory_order_acq_rel);
    auto &v = n->engine->nics;
    v.erase(std::remove(v.begin(), v.end(), n), v.end());
  }
  delete n;
}

extern "C" void slip_softnic_reset(slip_softnic *n) {
  if (!n) return;
  // Synchronous: a WQE posted after this returns is read by a sweep that started after the reset.
  const uint64_t want = n->reset_requests.fetch_add(1, std::memory_order_acq_rel) + 1;
  n->first_syndrome.store(0);
  for (size_t w = 0; w < n->engine->workers.size(); w++)
    while (n->resets_done[w].load(std::memory_order_acquire) < want && !n->engine->stop.load(std::memory_order_acquire))
      std::this_thread::yield();
}

extern "C" void slip_softnic_get_stats(const slip_softnic *n, slip_softnic_stats *out) {
  memset(out, 0, sizeof *out);
  if (!n) return;
  out->wqes = n->wqes.load(std::memory_order_relaxed);
  out->cqes = n->cqes.load(std::memory_order_relaxed);
  out->errors = n->errors.load(std::memory_order_relaxed);
  out->sweeps = n->sweeps.load(std::memory_order_relaxed);
  out->issue_ns = n->issue_ns.load(std::memory_order_relaxed);
  out->run_ns = n->run_ns.load(std::memory_order_relaxed);
  out->first_syndrome = n->first_syndrome.load();
}

extern "C" const char *slip_mlx5_syndrome_name(uint32_t syndrome) {
  switch (syndrome) {
    case SLIP_MLX5_SYND_LOCAL_LENGTH_ERR: return "local length error";
    case SLIP_MLX5_SYND_LOCAL_QP_OP_ERR: return "local QP operation error";
    case SLIP_MLX5_SYND_LOCAL_PROT_ERR: return "local protection error";
    case SLIP_MLX5_SYND_WR_FLUSH_ERR: return "work request flushed error";
    case SLIP_MLX5_SYND_REMOTE_ACCESS_ERR: return "remote access error";
    case SLIP_MLX5_SYND_REMOTE_OP_ERR: return "remote operation error";
    case SLIP_MLX5_SYND_TRANSPORT_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "unknown syndrome";
  }
}
