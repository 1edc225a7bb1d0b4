// The gpunetio NIC API (slipstream/gpunetio_nic.h): argument checks, the registration table, and
// each link's fetch-add sink, over the two kinds of NIC of nic_impl.h.
#include <cuda_runtime.h>
#include <string.h>

#include <mutex>
#include <string>
#include <vector>

#include "check.h"
#include "nic_impl.h"
#include "nic_qp.h"
#include "slipstream/gpunetio_nic.h"

namespace {
constexpr const char *kSoftName = "softnic";

struct Reg {
  uint32_t id, mkey;
};
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

extern "C" slip_status slip_nic_reg(slip_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  SLIP_CHECK(slip_nic_check_reg(n, ptr, len, id, mkey));
  SLIP_CHECK(reg(n, ptr, len, id, mkey));
  {
    std::lock_guard<std::mutex> g(n->mu);
    n->regs.push_back({id, *mkey});
  }
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
  return l->soft ? soft_nic_dev_qp(l->soft, q) : hw_nic_dev_qp(l->hw, q);
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
