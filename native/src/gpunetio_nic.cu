// gpunetio on a real ConnectX NIC through the DOCA GPUNetIO host library (slipstream/gpunetio_nic.h,
// implementation "doca"). Built only with -DSLIP_GPUNETIO_HOST_ROOT; compiled, never run here (no
// RDMA device on the CI or GPU machines). The library creates each queue pair and its completion
// queue in GPU memory (DevX umem); connection follows the verbs state machine (RESET, INIT, RTR,
// RTS) with a random 24-bit PSN per queue pair.
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "host/doca_gpunetio_high_level.h"
#include "host/doca_verbs.h"

#include "check.h"
#include "nic_progress.h"
#include "nic_qp.h"
#include "nic_impl.h"
#include "slipstream/gpunetio_nic.h"

#define SLIP_DOCA_CHECK(call)                                                                                \
  do {                                                                                                       \
    doca_error_t e_ = (call);                                                                                \
    if (e_ != DOCA_SUCCESS) SLIP_FAIL(SLIP_ERR_OS, "%s failed: DOCA error %d at %s:%d", #call, (int)e_, __FILE__, __LINE__); \
  } while (0)

struct hw_nic {
  int device = 0, port = 1, gid_index = 0, doorbell = SLIP_NIC_DOORBELL_AUTO;
  ibv_context *ib = nullptr;
  ibv_pd *pd = nullptr;
  ibv_port_attr port_attr;
  ibv_gid gid;
  doca_gpu *gdev = nullptr;
  std::vector<ibv_mr *> mrs;
  std::unique_ptr<NicProgress<hw_nic_link>> progress;  // host-rung links; made by slip_nic_open
};

struct hw_nic_link {
  hw_nic *nic = nullptr;
  int doorbell = SLIP_NIC_DOORBELL_HOST;
  std::vector<doca_gpu_verbs_qp_hl *> qps;
  std::vector<uint32_t> psn;
  std::vector<bool> connected;
  doca_verbs_ah_attr *ah = nullptr;
};

namespace {
// CPU proxy: the library rings what the device published (it does not say whether it rang).
bool ring_host_doorbells(hw_nic_link *l) {
  for (doca_gpu_verbs_qp_hl *q : l->qps) (void)doca_gpu_verbs_cpu_proxy_progress(q->qp_gverbs);
  return true;
}
}  // namespace

const char *hw_nic_impl(void) { return "doca"; }
slip_status hw_nic_probe(void) { return SLIP_OK; }

void hw_nic_close(hw_nic *n) {
  if (!n) return;
  n->progress.reset();  // joins its thread
  for (ibv_mr *mr : n->mrs) ibv_dereg_mr(mr);
  if (n->gdev) (void)doca_gpu_destroy(n->gdev);
  if (n->pd) ibv_dealloc_pd(n->pd);
  if (n->ib) ibv_close_device(n->ib);
  delete n;
}

slip_status hw_nic_open(const char *ibdev, int port, int gid_index, int device, int doorbell,
                                     hw_nic **out) {
  slip_status st = SLIP_OK;
  hw_nic *n = nullptr;
  ibv_device **list = nullptr;
  int ndev = 0;
  char bus[32];
  std::string found;
  SLIP_CHECK(slip_nic_check_open(ibdev, port, gid_index, doorbell, out));
  n = new hw_nic();
  n->device = device;
  n->port = port;
  n->gid_index = gid_index;
  n->doorbell = doorbell;
  n->progress.reset(new NicProgress<hw_nic_link>(ring_host_doorbells));
  SLIP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  list = ibv_get_device_list(&ndev);
  SLIP_SYS_CHECK(list != nullptr, "ibv_get_device_list");
  for (int i = 0; i < ndev && !n->ib; i++) {
    found += std::string(found.empty() ? "" : ", ") + ibv_get_device_name(list[i]);
    if (!*ibdev || !strcmp(ibv_get_device_name(list[i]), ibdev)) n->ib = ibv_open_device(list[i]);  // "": the first
  }
  if (!n->ib) SLIP_FAIL(SLIP_ERR_NO_DEVICE, "RDMA device %s not found (%d found%s%s)", ibdev, ndev, ndev ? ": " : "",
                        found.c_str());
  n->pd = ibv_alloc_pd(n->ib);
  SLIP_SYS_CHECK(n->pd != nullptr, "ibv_alloc_pd");
  SLIP_SYS_CHECK(ibv_query_port(n->ib, (uint8_t)port, &n->port_attr) == 0, "ibv_query_port");
  SLIP_SYS_CHECK(ibv_query_gid(n->ib, (uint8_t)port, gid_index, &n->gid) == 0, "ibv_query_gid");
  SLIP_DOCA_CHECK(doca_gpu_create(bus, &n->gdev));
  *out = n;
  n = nullptr;
done:
  if (list) ibv_free_device_list(list);
  hw_nic_close(n);
  return st;
}

void hw_nic_link_destroy(hw_nic_link *l) {
  if (!l) return;
  hw_nic *n = l->nic;
  n->progress->remove(l);
  for (doca_gpu_verbs_qp_hl *q : l->qps)
    if (q) (void)doca_gpu_verbs_destroy_qp_hl(q);
  if (l->ah) (void)doca_verbs_ah_attr_destroy(l->ah);
  delete l;
}

slip_status hw_nic_link_create(hw_nic *n, uint32_t nq, uint32_t depth, hw_nic_link **out) {
  slip_status st = SLIP_OK;
  hw_nic_link *l = nullptr;
  doca_gpu_verbs_qp_init_attr_hl attr;
  SLIP_CHECK(slip_nic_check_link(n, nq, depth, out));
  l = new hw_nic_link();
  l->nic = n;
  memset(&attr, 0, sizeof attr);
  attr.gpu_dev = n->gdev;
  attr.ibpd = n->pd;
  attr.sq_nwqe = (uint16_t)depth;
  attr.nic_handler = n->doorbell == SLIP_NIC_DOORBELL_HOST  ? DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY
                     : n->doorbell == SLIP_NIC_DOORBELL_GPU ? DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB
                                                            : DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO;
  attr.mreg_type = DOCA_GPUNETIO_VERBS_MEM_REG_TYPE_DEFAULT;
  l->qps.assign(nq, nullptr);
  l->psn.assign(nq, 0);
  l->connected.assign(nq, false);
  for (uint32_t q = 0; q < nq; q++) {
    uint32_t r;
    SLIP_DOCA_CHECK(doca_gpu_verbs_create_qp_hl(&attr, &l->qps[q]));
    SLIP_SYS_CHECK(getrandom(&r, sizeof r, 0) == (ssize_t)sizeof r, "getrandom");
    l->psn[q] = r & 0xffffffu;
  }
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_create(n->ib, &l->ah));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_sl(l->ah, 0));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_traffic_class(l->ah, 0));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_addr_type(l->ah, n->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND
                                                              ? DOCA_VERBS_ADDR_TYPE_IB_NO_GRH
                                                              : DOCA_VERBS_ADDR_TYPE_IPv4));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_sgid_index(l->ah, (uint8_t)n->gid_index));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_hop_limit(l->ah, 255));
  l->doorbell = l->qps[0]->nic_handler == DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY ? SLIP_NIC_DOORBELL_HOST
                                                                                     : SLIP_NIC_DOORBELL_GPU;
  if (l->doorbell == SLIP_NIC_DOORBELL_HOST) n->progress->add(l);
  *out = l;
  l = nullptr;
done:
  hw_nic_link_destroy(l);
  return st;
}

slip_status hw_nic_qp_info_get(const hw_nic_link *l, uint32_t q, slip_nic_qp_info *out) {
  slip_status st = SLIP_OK;
  if (!l || !out || q >= l->qps.size()) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_qp_info_get: queue pair %u", q);
  memset(out, 0, sizeof *out);
  out->magic = SLIP_NIC_QP_INFO_MAGIC;
  out->version = SLIP_NIC_QP_INFO_VERSION;
  out->addr_type = l->nic->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? SLIP_NIC_ADDR_IB : SLIP_NIC_ADDR_ROCE;
  out->qpn = doca_verbs_qp_get_qpn(l->qps[q]->qp);
  out->lid = l->nic->port_attr.lid;
  memcpy(out->gid, l->nic->gid.raw, sizeof out->gid);
  out->mtu = (uint32_t)l->nic->port_attr.active_mtu;
  out->psn = l->psn[q];
done:
  return st;
}

slip_status hw_nic_connect(hw_nic_link *l, uint32_t q, const slip_nic_qp_info *peer) {
  slip_status st = SLIP_OK;
  doca_verbs_qp_attr *a = nullptr;
  doca_verbs_gid g;
  doca_verbs_qp *qp;
  uint32_t mtu;
  slip_nic_qp_info p;
  hw_nic *n;
  if (!l || !peer || q >= l->qps.size()) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_connect: queue pair %u", q);
  SLIP_CHECK(slip_nic_qp_info_parse(peer, sizeof *peer, &p));
  if (l->connected[q]) SLIP_FAIL(SLIP_ERR_STATE, "queue pair %u is already connected (a new peer needs a new link)", q);
  n = l->nic;
  qp = l->qps[q]->qp;
  mtu = p.mtu < (uint32_t)n->port_attr.active_mtu ? p.mtu : (uint32_t)n->port_attr.active_mtu;
  memcpy(g.raw, p.gid, sizeof g.raw);
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_gid(l->ah, g));
  SLIP_DOCA_CHECK(doca_verbs_ah_attr_set_dlid(l->ah, p.lid));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_create(&a));
  // IBV_MTU_256..4096 are 1..5; DOCA's enum counts from 0.
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_path_mtu(a, (doca_verbs_mtu_size)(mtu - 1)));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_rq_psn(a, p.psn));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_sq_psn(a, l->psn[q]));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_port_num(a, n->port));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_ack_timeout(a, 20));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_retry_cnt(a, 7));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_rnr_retry(a, 7));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_min_rnr_timer(a, 12));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_allow_remote_write(a, 1));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_allow_remote_read(a, 1));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_allow_remote_atomic(a, DOCA_VERBS_QP_ATOMIC_MODE_IB_SPEC));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_ah_attr(a, l->ah));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_dest_qp_num(a, p.qpn));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_pkey_index(a, 0));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_INIT));
  SLIP_DOCA_CHECK(doca_verbs_qp_modify(qp, a,
                                       DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_WRITE |
                                           DOCA_VERBS_QP_ATTR_ALLOW_REMOTE_READ | DOCA_VERBS_QP_ATTR_PKEY_INDEX |
                                           DOCA_VERBS_QP_ATTR_PORT_NUM));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_RTR));
  SLIP_DOCA_CHECK(doca_verbs_qp_modify(qp, a,
                                       DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_RQ_PSN |
                                           DOCA_VERBS_QP_ATTR_DEST_QP_NUM | DOCA_VERBS_QP_ATTR_PATH_MTU |
                                           DOCA_VERBS_QP_ATTR_AH_ATTR | DOCA_VERBS_QP_ATTR_MIN_RNR_TIMER));
  SLIP_DOCA_CHECK(doca_verbs_qp_attr_set_next_state(a, DOCA_VERBS_QP_STATE_RTS));
  SLIP_DOCA_CHECK(doca_verbs_qp_modify(qp, a,
                                       DOCA_VERBS_QP_ATTR_NEXT_STATE | DOCA_VERBS_QP_ATTR_SQ_PSN |
                                           DOCA_VERBS_QP_ATTR_ACK_TIMEOUT | DOCA_VERBS_QP_ATTR_RETRY_CNT |
                                           DOCA_VERBS_QP_ATTR_RNR_RETRY));
  l->connected[q] = true;
done:
  if (a) (void)doca_verbs_qp_attr_destroy(a);
  return st;
}

slip_status hw_nic_reg(hw_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  ibv_mr *mr = nullptr;
  cudaPointerAttributes pa;
  // Strict ordering (no IBV_ACCESS_RELAXED_ORDERING): a signal must not pass the data before it.
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  SLIP_CUDA_CHECK(cudaPointerGetAttributes(&pa, ptr));
  if (pa.type == cudaMemoryTypeDevice) {
    int fd = -1;
    // dma-buf first (kernel >= 6.1, no nvidia-peermem needed), then peer memory.
    if (doca_gpu_dmabuf_fd(n->gdev, ptr, len, &fd) == DOCA_SUCCESS && fd >= 0)
      mr = ibv_reg_dmabuf_mr(n->pd, 0, len, SLIP_IOVA(id, 0), fd, access);
  }
  if (!mr) mr = ibv_reg_mr_iova2(n->pd, ptr, len, SLIP_IOVA(id, 0), (unsigned)access);
  SLIP_SYS_CHECK(mr != nullptr, "ibv_reg_mr_iova2");
  st = slip_nic_check_keys(id, mr->lkey, mr->rkey);
  if (st != SLIP_OK) {
    ibv_dereg_mr(mr);
    goto done;
  }
  n->mrs.push_back(mr);
  *mkey = mr->rkey;
done:
  return st;
}

void hw_nic_dereg(hw_nic *n, uint32_t mkey) {
  for (auto it = n->mrs.begin(); it != n->mrs.end(); ++it)
    if ((*it)->rkey == mkey) {
      ibv_dereg_mr(*it);
      n->mrs.erase(it);
      return;
    }
}

void *hw_nic_dev_qp(const hw_nic_link *l, uint32_t q) {
  doca_gpu_dev_verbs_qp *d = nullptr;
  if (!l || q >= l->qps.size() || doca_gpu_verbs_get_qp_dev(l->qps[q]->qp_gverbs, &d) != DOCA_SUCCESS) return nullptr;
  return d;
}

int hw_nic_link_doorbell(const hw_nic_link *l) { return l ? l->doorbell : SLIP_NIC_DOORBELL_HOST; }

slip_status hw_nic_host_qp(hw_nic_link *, uint32_t, slip_host_qp *) {
  // DOCA places this implementation's rings in GPU memory (DevX umem): no host producer.
  return slip_set_error(SLIP_ERR_UNSUPPORTED, "host-posted writes on the DOCA GPUNetIO host library's queue pairs: "
                        "their rings are in GPU memory; build with rdma-core's mlx5 (the default) for them");
}
