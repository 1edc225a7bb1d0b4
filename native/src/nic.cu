// The gpunetio NIC API (slipstream/gpunetio_nic.h): argument checks, the registration table, and
// each link's fetch-add sink, over the two kinds of NIC of nic_impl.h.
#include <cuda_runtime.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "check.h"
#include "nic_impl.h"
#include "nic_qp.h"
#include "slipstream/gpunetio_nic.h"
#include "slipstream/softnic.h"

namespace {
constexpr const char *kSoftName = "softnic";

struct Reg {
  uint32_t id, mkey;
};

enum : uint8_t { kUnclaimed = 0, kDeviceDriven = 1, kHostDriven = 2 };

// A queue pair the host posts on: its rings (slip_host_qp) and the producer's counts, as the
// device write API keeps them (gpunetio.cuh), under one mutex.
struct HostQp {
  std::mutex mu;
  bool ready = false;
  slip_host_qp view{};
  uint64_t pi = 0;       // WQEs posted
  uint64_t head = 0;     // WQEs known complete
  uint64_t asked = 0;    // CQEs asked for
  uint64_t ci = 0;       // CQEs consumed
  bool failed = false;
  uint8_t syndrome = 0;
};

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
}  // namespace

struct slip_nic {
  hw_nic *hw = nullptr;
  soft_nic *soft = nullptr;
  int device = 0;
  std::string name;
  mutable std::mutex mu;  // guards regs
  std::vector<Reg> regs;
};

struct slip_nic_link {
  slip_nic *nic = nullptr;
  hw_nic_link *hw = nullptr;
  soft_nic_link *soft = nullptr;
  uint32_t nq = 0;
  uint64_t *d_sink = nullptr;  // nq x 8 bytes: the values fetch-adds return
  uint32_t sink_mkey = 0;
  bool hw_sink = false;        // sink_mkey is a registration of the hardware NIC's
  std::unique_ptr<std::atomic<uint8_t>[]> claim;  // per queue pair: kUnclaimed, kDeviceDriven, kHostDriven
  std::unique_ptr<HostQp[]> host;                 // per queue pair: its host producer, once claimed
};

namespace {
slip_status reg(slip_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  return n->soft ? soft_nic_reg(n->soft, ptr, len, id, mkey) : hw_nic_reg(n->hw, ptr, len, id, mkey);
}
void dereg(slip_nic *n, uint32_t id, uint32_t mkey) {
  if (n->soft)
    soft_nic_dereg(n->soft, id, mkey);
  else
    hw_nic_dereg(n->hw, mkey);
}
}  // namespace

extern "C" const char *slip_nic_impl(void) { return hw_nic_impl(); }
extern "C" slip_status slip_nic_probe(void) { return hw_nic_probe(); }

extern "C" slip_status slip_nic_open(const char *ibdev, int port, int gid_index, int device, int doorbell,
                                     slip_nic **out) {
  slip_status st = SLIP_OK;
  slip_nic *n = nullptr;
  SLIP_CHECK(slip_nic_check_open(ibdev, port, gid_index, doorbell, out));
  *out = nullptr;
  n = new slip_nic();
  n->device = device;
  if (strcmp(ibdev, kSoftName) == 0) {
    if (doorbell == SLIP_NIC_DOORBELL_GPU)
      SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "the software NIC has no doorbell register for the GPU to write (doorbell "
                "mode gpu); expected auto or host");
    SLIP_CHECK(soft_nic_open(device, &n->soft));
    n->name = kSoftName;
  } else {
    SLIP_CHECK(hw_nic_open(ibdev, port, gid_index, device, doorbell, &n->hw));
    n->name = hw_nic_impl();
  }
  *out = n;
  n = nullptr;
done:
  slip_nic_close(n);
  return st;
}

extern "C" void slip_nic_close(slip_nic *n) {
  if (!n) return;
  if (n->soft) soft_nic_close(n->soft);
  if (n->hw) hw_nic_close(n->hw);
  delete n;
}

extern "C" const char *slip_nic_kind(const slip_nic *n) { return n ? n->name.c_str() : "none"; }

namespace {
// A registration made: the NIC's table, which slip_nic_link_mkey and slip_nic_dereg read.
void record(slip_nic *n, uint32_t id, uint32_t mkey) {
  std::lock_guard<std::mutex> g(n->mu);
  n->regs.push_back({id, mkey});
}
}  // namespace

extern "C" slip_status slip_nic_reg(slip_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  SLIP_CHECK(slip_nic_check_reg(n, ptr, len, id, mkey));
  SLIP_CHECK(reg(n, ptr, len, id, mkey));
  record(n, id, *mkey);
done:
  return st;
}

extern "C" slip_status slip_nic_reg_file(slip_nic *n, void *host, uint64_t len, uint32_t id, const char *path,
                                         uint32_t *mkey) {
  slip_status st = SLIP_OK;
  SLIP_CHECK(slip_nic_check_reg(n, host, len, id, mkey));
  if (!path || !*path) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_reg_file: region %u without its file's path", id);
  // A ConnectX NIC registers host memory as it is; only the software NIC's peers need the file.
  SLIP_CHECK(n->soft ? soft_nic_reg_file(n->soft, host, len, id, path, mkey) : hw_nic_reg(n->hw, host, len, id, mkey));
  record(n, id, *mkey);
done:
  return st;
}

extern "C" slip_status slip_nic_dereg(slip_nic *n, uint32_t id, uint32_t mkey) {
  if (!n) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_dereg: null NIC");
  {
    std::lock_guard<std::mutex> g(n->mu);
    auto it = n->regs.begin();
    while (it != n->regs.end() && !(it->id == id && it->mkey == mkey)) ++it;
    if (it == n->regs.end())
      return slip_set_error(SLIP_ERR_BAD_REGION, "%s: region %u with memory key 0x%x is not registered",
                            n->name.c_str(), id, mkey);
    n->regs.erase(it);
  }
  dereg(n, id, mkey);
  return SLIP_OK;
}

extern "C" void slip_nic_link_destroy(slip_nic_link *l) {
  if (!l) return;
  if (l->soft) soft_nic_link_destroy(l->soft);
  if (l->hw) hw_nic_link_destroy(l->hw);
  if (l->hw_sink) hw_nic_dereg(l->nic->hw, l->sink_mkey);
  if (l->d_sink) {
    (void)cudaSetDevice(l->nic->device);
    (void)cudaFree(l->d_sink);
  }
  delete l;
}

extern "C" slip_status slip_nic_link_create(slip_nic *n, uint32_t nq, uint32_t depth, slip_nic_link **out) {
  slip_status st = SLIP_OK;
  slip_nic_link *l = nullptr;
  SLIP_CHECK(slip_nic_check_link(n, nq, depth, out));
  *out = nullptr;
  l = new slip_nic_link();
  l->nic = n;
  l->nq = nq;
  l->claim.reset(new std::atomic<uint8_t>[nq]);
  for (uint32_t q = 0; q < nq; q++) l->claim[q].store(kUnclaimed);
  l->host.reset(new HostQp[nq]);
  if (n->soft) {
    SLIP_CHECK(soft_nic_link_create(n->soft, nq, depth, &l->soft));
    l->sink_mkey = soft_nic_link_sink_key(l->soft);  // the software NIC's queue pairs come with one
  } else {
    SLIP_CUDA_CHECK(cudaSetDevice(n->device));
    SLIP_CUDA_CHECK(cudaMalloc(&l->d_sink, nq * sizeof(uint64_t)));
    SLIP_CUDA_CHECK(cudaMemset(l->d_sink, 0, nq * sizeof(uint64_t)));
    SLIP_CHECK(hw_nic_reg(n->hw, l->d_sink, nq * sizeof(uint64_t), SLIP_NIC_SINK_ID, &l->sink_mkey));
    l->hw_sink = true;
    SLIP_CHECK(hw_nic_link_create(n->hw, nq, depth, &l->hw));
  }
  *out = l;
  l = nullptr;
done:
  slip_nic_link_destroy(l);
  return st;
}

extern "C" slip_status slip_nic_qp_info_get(const slip_nic_link *l, uint32_t q, slip_nic_qp_info *out) {
  if (!l || !out || q >= l->nq)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_qp_info_get: queue pair %u of %u", q, l ? l->nq : 0);
  return l->soft ? soft_nic_qp_info_get(l->soft, q, out) : hw_nic_qp_info_get(l->hw, q, out);
}

extern "C" slip_status slip_nic_connect(slip_nic_link *l, uint32_t q, const slip_nic_qp_info *peer) {
  slip_status st = SLIP_OK;
  slip_nic_qp_info p;
  if (!l || !peer || q >= l->nq)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_connect: queue pair %u of %u", q, l ? l->nq : 0);
  SLIP_CHECK(slip_nic_qp_info_parse(peer, sizeof *peer, &p));
  SLIP_CHECK(l->soft ? soft_nic_connect(l->soft, q, &p) : hw_nic_connect(l->hw, q, &p));
done:
  return st;
}

extern "C" void *slip_nic_dev_qp(const slip_nic_link *l, uint32_t q) {
  if (!l || q >= l->nq) return nullptr;
  uint8_t c = kUnclaimed;
  if (!l->claim[q].compare_exchange_strong(c, kDeviceDriven) && c != kDeviceDriven) return nullptr;  // the host's
  return l->soft ? soft_nic_dev_qp(l->soft, q) : hw_nic_dev_qp(l->hw, q);
}

int slip_nic_link_host_driven(const slip_nic_link *l, uint32_t q) {
  return l && q < l->nq && l->claim[q].load() == kHostDriven;
}

namespace {
// Caller holds h.mu: consumes the CQEs that arrived (owner bit of their lap), as the device does.
void reap(HostQp &h) {
  const slip_host_qp &v = h.view;
  while (h.ci < h.asked) {
    const uint8_t *c = v.cq + (h.ci & (v.cqe_num - 1)) * SLIP_MLX5_CQE_BYTES;
    uint8_t owner, opcode, synd;
    uint16_t counter;
    slip_cqe_read(c, &owner, &opcode, &counter, &synd);
    if (opcode == SLIP_MLX5_CQE_INVALID || owner != ((h.ci / v.cqe_num) & 1u)) break;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (opcode == SLIP_MLX5_CQE_REQ_ERR) {
      if (!h.failed) h.syndrome = synd;
      h.failed = true;
    }
    // The counter is the low 16 bits of the WQE it completes, one of the last wqe_num posted.
    const uint64_t done = h.pi - (uint16_t)((uint16_t)(h.pi - 1) - counter);
    if (done > h.head) h.head = done;
    h.ci++;
    if (v.cq_dbrec) __atomic_store_n(v.cq_dbrec, __builtin_bswap32((uint32_t)h.ci & 0xffffffu), __ATOMIC_RELEASE);
  }
}

slip_status failed_status(const slip_nic_link *l, uint32_t q, const HostQp &h) {
  return slip_set_error(SLIP_ERR_PEER, "%s: queue pair %u failed (%s, syndrome 0x%02x): it is in the error state "
                        "and posts nothing more", l->nic->name.c_str(), q, slip_mlx5_syndrome_name(h.syndrome),
                        h.syndrome);
}

// The host producer of queue pair q, claimed for the host on first use.
slip_status host_qp(slip_nic_link *l, uint32_t q, HostQp **out) {
  slip_status st = SLIP_OK;
  uint8_t c = kUnclaimed;
  if (!l || q >= l->nq) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: queue pair %u of %u", q, l ? l->nq : 0);
  if (!l->claim[q].compare_exchange_strong(c, kHostDriven) && c != kHostDriven)
    SLIP_FAIL(SLIP_ERR_STATE, "%s: queue pair %u is driven by the GPU (a queue set posts on it), expected a queue "
              "pair only the host posts on", l->nic->name.c_str(), q);
  *out = &l->host[q];
done:
  return st;
}
}  // namespace

extern "C" slip_status slip_nic_host_post(slip_nic_link *l, uint32_t q, const slip_nic_op *w, uint32_t n,
                                          uint64_t timeout_ns) {
  slip_status st = SLIP_OK;
  HostQp *hp = nullptr;
  SLIP_CHECK(host_qp(l, q, &hp));
  if (!w || n == 0 || n > 64) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: %u operations, expected 1..64", n);
  for (uint32_t i = 0; i < n; i++) {
    const slip_nic_op &o = w[i];
    if (o.op != SLIP_NIC_OP_WRITE && o.op != SLIP_NIC_OP_FETCH_ADD)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: operation %u is %u, expected %d (write) or %d (fetch-add)", i, o.op,
                SLIP_NIC_OP_WRITE, SLIP_NIC_OP_FETCH_ADD);
    if (o.remote_id >= SLIP_NIC_SINK_ID || o.remote_offset >= (1ull << SLIP_IOVA_SHIFT))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: operation %u to region %u + %llu, expected a region id below %u and "
                "an offset below 2^%d", i, o.remote_id, (unsigned long long)o.remote_offset, SLIP_NIC_SINK_ID,
                SLIP_IOVA_SHIFT);
    if (o.op == SLIP_NIC_OP_FETCH_ADD && (o.length != 8 || (o.remote_offset & 7u) != 0))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: fetch-add %u of %llu bytes at offset %llu, expected 8 bytes, 8-byte "
                "aligned", i, (unsigned long long)o.length, (unsigned long long)o.remote_offset);
    if (o.op == SLIP_NIC_OP_WRITE && (o.length == 0 || o.length > (1ull << 30) || o.local_id >= SLIP_NIC_SINK_ID ||
                                      o.local_offset >= (1ull << SLIP_IOVA_SHIFT)))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: write %u of %llu bytes from region %u + %llu, expected 1..2^30 "
                "bytes from a region id below %u at an offset below 2^%d", i, (unsigned long long)o.length,
                o.local_id, (unsigned long long)o.local_offset, SLIP_NIC_SINK_ID, SLIP_IOVA_SHIFT);
  }
  {
    HostQp &h = *hp;
    std::lock_guard<std::mutex> g(h.mu);
    if (!h.ready) {
      SLIP_CHECK(l->soft ? soft_nic_host_qp(l->soft, q, &h.view) : hw_nic_host_qp(l->hw, q, &h.view));
      h.ready = true;
    }
    if (n > h.view.wqe_num) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "host post: %u writes on a send queue of %u", n, h.view.wqe_num);
    reap(h);
    const uint64_t t0 = now_ns();
    while (!h.failed && h.pi + n - h.head > h.view.wqe_num) {
      if (now_ns() - t0 > timeout_ns)
        SLIP_FAIL(SLIP_ERR_TIMEOUT, "%s: queue pair %u: no room for %u writes in %llu ns (%llu posted, %llu "
                  "complete, %u slots)", l->nic->name.c_str(), q, n, (unsigned long long)timeout_ns,
                  (unsigned long long)h.pi, (unsigned long long)h.head, h.view.wqe_num);
      sched_yield();
      reap(h);
    }
    if (h.failed) {
      st = failed_status(l, q, h);
      goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t idx = h.pi + i;
      uint8_t *wqe = h.view.sq + (idx & (h.view.wqe_num - 1)) * SLIP_MLX5_WQE_BYTES;
      const uint64_t raddr = SLIP_IOVA(w[i].remote_id, w[i].remote_offset);
      if (w[i].op == SLIP_NIC_OP_WRITE)
        slip_wqe_encode_write(wqe, (uint16_t)idx, h.view.qpn, i == n - 1, raddr, w[i].remote_mkey,
                              SLIP_IOVA(w[i].local_id, w[i].local_offset), w[i].local_mkey, (uint32_t)w[i].length);
      else  // the old value goes to this queue pair's 8 bytes of the link's sink
        slip_wqe_encode_fadd(wqe, (uint16_t)idx, h.view.qpn, i == n - 1, raddr, w[i].remote_mkey,
                             SLIP_IOVA(SLIP_NIC_SINK_ID, (uint64_t)q * 8), l->sink_mkey, w[i].add);
    }
    h.pi += n;
    h.asked++;
    __atomic_thread_fence(__ATOMIC_RELEASE);  // the WQEs, and the source bytes, before the NIC sees them
    h.view.publish(h.view.state, h.pi);
  }
done:
  return st;
}

extern "C" slip_status slip_nic_host_drain(slip_nic_link *l, uint32_t q, uint64_t timeout_ns) {
  slip_status st = SLIP_OK;
  HostQp *hp = nullptr;
  SLIP_CHECK(host_qp(l, q, &hp));
  {
    HostQp &h = *hp;
    const uint64_t t0 = now_ns();
    for (;;) {
      {
        std::lock_guard<std::mutex> g(h.mu);
        if (h.ready) reap(h);
        if (h.failed) {
          st = failed_status(l, q, h);
          goto done;
        }
        if (!h.ready || h.ci == h.asked) break;
        if (now_ns() - t0 > timeout_ns)
          SLIP_FAIL(SLIP_ERR_TIMEOUT, "%s: queue pair %u: %llu of %llu completions after %llu ns",
                    l->nic->name.c_str(), q, (unsigned long long)h.ci, (unsigned long long)h.asked,
                    (unsigned long long)timeout_ns);
      }
      sched_yield();
    }
  }
done:
  return st;
}

extern "C" int slip_nic_link_doorbell(const slip_nic_link *l) {
  if (!l || l->soft) return SLIP_NIC_DOORBELL_HOST;
  return hw_nic_link_doorbell(l->hw);
}

extern "C" uint32_t slip_nic_link_size(const slip_nic_link *l) { return l ? l->nq : 0; }
extern "C" uint32_t slip_nic_link_sink_key(const slip_nic_link *l) { return l ? l->sink_mkey : 0; }

extern "C" slip_status slip_nic_link_mkey(const slip_nic_link *l, uint32_t id, uint32_t *mkey) {
  if (!l || !mkey) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_link_mkey: null argument");
  std::lock_guard<std::mutex> g(l->nic->mu);
  // The latest registration of the id (a region freed and made again under its id registers anew).
  for (auto it = l->nic->regs.rbegin(); it != l->nic->regs.rend(); ++it)
    if (it->id == id) {
      *mkey = it->mkey;
      return SLIP_OK;
    }
  return slip_set_error(SLIP_ERR_BAD_REGION, "region %u is not registered with NIC %s (a region a queue pair reads "
                        "or writes is registered once, before its first use)", id, l->nic->name.c_str());
}

extern "C" void slip_nic_link_error(slip_nic_link *l, slip_dev_error *out, uint32_t *syndrome, int clear) {
  *out = slip_dev_error{};
  *syndrome = 0;
  if (l && l->soft) soft_nic_link_error(l->soft, out, syndrome, clear);
}

const slip_dev_error *slip_nic_link_error_record(const slip_nic_link *l) {
  return l && l->soft ? soft_nic_link_error_record(l->soft) : nullptr;
}
