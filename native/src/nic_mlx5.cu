// gpunetio queue pairs on rdma-core's mlx5 direct verbs (slipstream/gpunetio_nic.h, implementation
// "mlx5"). Written for ConnectX NICs; compiled and linked everywhere rdma-core's headers are,
// never run on a real NIC by this project's CI or GPU machine (no RDMA device there).
//
// The library links against neither libibverbs nor libmlx5: their entry points are loaded on first
// use, so it loads on machines without rdma-core and slip_nic_probe says what is missing.
//
// Queue pairs are ordinary reliable-connected verbs queue pairs whose memory the GPU can reach:
//  - a parent domain's allocator hands libmlx5 pinned host pages registered with CUDA as mapped
//    memory for the send queue, the completion queue and their doorbell records, so the device
//    write API writes WQEs and reads CQEs through mapped addresses (libmlx5 still lays them out);
//  - the NIC's doorbell register (the UAR page libmlx5 mapped) is registered with CUDA as I/O memory
//    so the GPU rings it; where the platform refuses that, a host progress thread rings it from the
//    producer index the device publishes (GPUNetIO's CPU-proxy protocol);
//  - the completion queue ignores overrun (the device reads only the one CQE per batch it asked
//    for, at a known index, and never moves the consumer index), and its CQEs start invalid with
//    the owner bit of the previous lap, so that a CQE counts only once the NIC wrote it.
// Connection follows the verbs state machine (RESET, INIT, RTR, RTS) with a random 24-bit PSN per
// queue pair; memory is registered with iova = region id << 40 and strict ordering.
#include <cuda.h>
#include <dlfcn.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "nic_progress.h"
#include "nic_qp.h"
#include "nic_impl.h"
#include "slipstream/gpunetio_nic.h"
#include "slipstream/softnic.h"

namespace {

// ---- rdma-core, loaded at run time ----
struct Verbs {
  decltype(&ibv_get_device_list) get_device_list = nullptr;
  decltype(&ibv_free_device_list) free_device_list = nullptr;
  decltype(&ibv_get_device_name) get_device_name = nullptr;
  decltype(&ibv_open_device) open_device = nullptr;
  decltype(&ibv_close_device) close_device = nullptr;
  decltype(&ibv_query_device) query_device = nullptr;
  decltype(&ibv_query_port) query_port_compat = nullptr;  // the real symbol, not verbs.h's macro
  decltype(&ibv_query_gid) query_gid = nullptr;
  decltype(&ibv_alloc_pd) alloc_pd = nullptr;
  decltype(&ibv_dealloc_pd) dealloc_pd = nullptr;
  decltype(&ibv_create_qp) create_qp = nullptr;
  decltype(&ibv_modify_qp) modify_qp = nullptr;
  decltype(&ibv_destroy_qp) destroy_qp = nullptr;
  decltype(&ibv_destroy_cq) destroy_cq = nullptr;
  decltype(&ibv_reg_mr_iova2) reg_mr_iova2 = nullptr;
  decltype(&ibv_reg_dmabuf_mr) reg_dmabuf_mr = nullptr;  // optional (rdma-core 34+)
  decltype(&ibv_dereg_mr) dereg_mr = nullptr;
  decltype(&mlx5dv_is_supported) dv_is_supported = nullptr;
  decltype(&mlx5dv_create_cq) dv_create_cq = nullptr;
  decltype(&mlx5dv_init_obj) dv_init_obj = nullptr;
};

Verbs g_verbs;
std::string g_verbs_error;  // empty when every entry point was found
std::once_flag g_verbs_once;

template <class F>
bool load(void *lib, const char *name, F *out, std::string *missing) {
  *out = (F)dlsym(lib, name);
  if (!*out && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

void load_verbs() {
  // RTLD_GLOBAL: libibverbs loads its mlx5 provider, which resolves against both.
  void *ibv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!ibv) {
    g_verbs_error = std::string("libibverbs.so.1 cannot be loaded (") + dlerror() +
                    "); install rdma-core (Debian/Ubuntu: ibverbs-providers and libibverbs1)";
    return;
  }
  void *mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!mlx5) {
    g_verbs_error = std::string("libmlx5.so.1 cannot be loaded (") + dlerror() +
                    "); install rdma-core's mlx5 provider (Debian/Ubuntu: ibverbs-providers)";
    return;
  }
  std::string missing;
  Verbs &v = g_verbs;
  load(ibv, "ibv_get_device_list", &v.get_device_list, &missing);
  load(ibv, "ibv_free_device_list", &v.free_device_list, &missing);
  load(ibv, "ibv_get_device_name", &v.get_device_name, &missing);
  load(ibv, "ibv_open_device", &v.open_device, &missing);
  load(ibv, "ibv_close_device", &v.close_device, &missing);
  load(ibv, "ibv_query_device", &v.query_device, &missing);
  load(ibv, "ibv_query_port", &v.query_port_compat, &missing);
  load(ibv, "ibv_query_gid", &v.query_gid, &missing);
  load(ibv, "ibv_alloc_pd", &v.alloc_pd, &missing);
  load(ibv, "ibv_dealloc_pd", &v.dealloc_pd, &missing);
  load(ibv, "ibv_create_qp", &v.create_qp, &missing);
  load(ibv, "ibv_modify_qp", &v.modify_qp, &missing);
  load(ibv, "ibv_destroy_qp", &v.destroy_qp, &missing);
  load(ibv, "ibv_destroy_cq", &v.destroy_cq, &missing);
  load(ibv, "ibv_reg_mr_iova2", &v.reg_mr_iova2, &missing);
  load(ibv, "ibv_reg_dmabuf_mr", &v.reg_dmabuf_mr, nullptr);
  load(ibv, "ibv_dereg_mr", &v.dereg_mr, &missing);
  load(mlx5, "mlx5dv_is_supported", &v.dv_is_supported, &missing);
  load(mlx5, "mlx5dv_create_cq", &v.dv_create_cq, &missing);
  load(mlx5, "mlx5dv_init_obj", &v.dv_init_obj, &missing);
  if (!missing.empty()) g_verbs_error = "rdma-core is too old: missing " + missing + " (rdma-core 29 or later needed)";
}

slip_status verbs(const Verbs **out) {
  std::call_once(g_verbs_once, load_verbs);
  if (!g_verbs_error.empty()) return slip_set_error(SLIP_ERR_UNSUPPORTED, "gpunetio on a NIC: %s", g_verbs_error.c_str());
  *out = &g_verbs;
  return SLIP_OK;
}

// verbs.h's ibv_query_port is an inline wrapper that calls the provider's op; written out here so
// that no symbol of libibverbs is linked.
int query_port(const Verbs *v, ibv_context *c, uint8_t port, ibv_port_attr *a) {
  memset(a, 0, sizeof *a);
  verbs_context *vc = verbs_get_ctx_op(c, query_port);
  if (vc) return vc->query_port(c, port, a, sizeof *a);
  return v->query_port_compat(c, port, (struct _compat_ibv_port_attr *)a);
}

ibv_pd *alloc_parent_domain(ibv_context *c, ibv_parent_domain_init_attr *attr) {
  verbs_context *vc = verbs_get_ctx_op(c, alloc_parent_domain);
  if (!vc) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return vc->alloc_parent_domain(c, attr);
}

// cuMemGetHandleForAddressRange through the runtime (the library does not link libcuda).
using MemHandleFn = CUresult (*)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
MemHandleFn mem_handle_fn() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return (MemHandleFn)fn;
}

size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }
uint32_t be32(uint32_t v) { return __builtin_bswap32(v); }

}  // namespace

// ---- NIC, links, queue pairs ----
struct NicQp {
  ibv_cq_ex *cq = nullptr;
  ibv_qp *qp = nullptr;
  mlx5dv_qp dq;
  mlx5dv_cq dc;
  uint32_t psn = 0;
  void *d_qp = nullptr;             // doca_gpu_dev_verbs_qp in device memory
  uint64_t *proxy_word = nullptr;   // host doorbell: the producer index the device publishes (mapped)
  uint64_t rung = 0;                // host doorbell: the last producer index rung
  void *uar_page = nullptr;         // GPU doorbell: the UAR page registered with CUDA
  bool connected = false;           // set under the progress thread's mutex
};

struct hw_nic_link {
  hw_nic *nic = nullptr;
  int doorbell = SLIP_NIC_DOORBELL_HOST;
  std::vector<NicQp> qps;
};

struct hw_nic {
  const Verbs *v = nullptr;
  int device = 0, port = 1, gid_index = 0, doorbell = SLIP_NIC_DOORBELL_AUTO;
  std::string name;
  ibv_context *ib = nullptr;
  ibv_pd *pd = nullptr;
  ibv_pd *pdom = nullptr;  // parent domain: queue memory from the allocator below
  ibv_port_attr port_attr;
  ibv_gid gid;
  uint8_t rd_atomic = 1;   // outstanding fetch-adds per queue pair, both directions
  std::vector<ibv_mr *> mrs;
  std::mutex m;            // guards uar_users and alloc_error
  std::map<void *, int> uar_users;  // UAR pages registered with CUDA, and their queue pairs
  std::string alloc_error;
  std::unique_ptr<NicProgress<hw_nic_link>> progress;  // host-rung links; made by slip_nic_open
};

namespace {

// Parent-domain allocator: libmlx5's queue buffers and doorbell records in pinned host pages the
// GPU can address. Anything else keeps libmlx5's own allocation.
void *queue_alloc(ibv_pd *, void *ctx, size_t size, size_t alignment, uint64_t type) {
  hw_nic *n = (hw_nic *)ctx;
  if (type != MLX5DV_RES_TYPE_QP && type != MLX5DV_RES_TYPE_CQ && type != MLX5DV_RES_TYPE_DBR)
    return IBV_ALLOCATOR_USE_DEFAULT;
  const size_t page = page_size();
  if (alignment > page) return IBV_ALLOCATOR_USE_DEFAULT;
  const size_t len = (size + page - 1) / page * page;
  void *p = nullptr;
  if (posix_memalign(&p, page, len) != 0) return nullptr;
  memset(p, 0, len);
  const cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    std::lock_guard<std::mutex> g(n->m);
    n->alloc_error = std::string("cudaHostRegister of ") + std::to_string(len) + " bytes of queue memory: " +
                     cudaGetErrorString(e);
    free(p);
    return nullptr;
  }
  return p;
}

void queue_free(ibv_pd *, void *, void *ptr, uint64_t) {
  if (!ptr || ptr == IBV_ALLOCATOR_USE_DEFAULT) return;
  (void)cudaHostUnregister(ptr);
  free(ptr);
}

// The GPU's address of host memory libmlx5 placed through queue_alloc.
slip_status gpu_view(const hw_nic *n, void *host, const char *what, void **dev) {
  const cudaError_t e = cudaHostGetDevicePointer(dev, host, 0);
  if (e == cudaSuccess) return SLIP_OK;
  (void)cudaGetLastError();
  return slip_set_error(SLIP_ERR_UNSUPPORTED,
                        "%s: %s of %s is not GPU-mapped memory (%s): this libmlx5 did not take the parent domain's "
                        "allocator for it (rdma-core 32 or later does)",
                        n->name.c_str(), what, "the queue pair", cudaGetErrorString(e));
}

// Host doorbell: rings what the device published on the link's connected queue pairs.
bool ring_host_doorbells(hw_nic_link *l) {
  bool rang = false;
  for (NicQp &q : l->qps) {
    if (!q.connected) continue;
    const uint64_t pi = __atomic_load_n(q.proxy_word, __ATOMIC_ACQUIRE);
    if (pi == q.rung) continue;
    // Doorbell record first, then the register: the NIC reads the record when it recovers.
    __atomic_store_n(&q.dq.dbrec[MLX5_SND_DBR], be32((uint32_t)pi & 0xffffu), __ATOMIC_RELEASE);
    uint32_t ctrl[2] = {be32((uint32_t)pi << 8), be32(q.qp->qp_num << 8)};
    uint64_t word;
    memcpy(&word, ctrl, sizeof word);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)q.dq.bf.reg = word;
    q.rung = pi;
    rang = true;
  }
  return rang;
}

void qp_destroy(hw_nic *n, NicQp &q) {
  if (q.uar_page) {
    std::lock_guard<std::mutex> g(n->m);
    if (--n->uar_users[q.uar_page] == 0) {
      (void)cudaHostUnregister(q.uar_page);
      n->uar_users.erase(q.uar_page);
    }
  }
  if (q.qp) n->v->destroy_qp(q.qp);
  if (q.cq) n->v->destroy_cq(ibv_cq_ex_to_cq(q.cq));
  (void)cudaFree(q.d_qp);
  (void)cudaFreeHost(q.proxy_word);
  q = NicQp();
}

// Creates one queue pair in RESET and its device struct.
slip_status qp_create(hw_nic *n, uint32_t depth, int doorbell, NicQp *q) {
  slip_status st = SLIP_OK;
  ibv_cq_init_attr_ex ca;
  mlx5dv_cq_init_attr dca;
  ibv_qp_init_attr qa;
  mlx5dv_obj obj;
  slip_qp_layout l;
  std::vector<uint8_t> h(slip_dev_qp_size());
  uint8_t *cqe;
  memset(&ca, 0, sizeof ca);
  ca.cqe = depth;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  ca.parent_domain = n->pdom;
  memset(&dca, 0, sizeof dca);
  dca.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dca.cqe_size = SLIP_MLX5_CQE_BYTES;
  q->cq = n->v->dv_create_cq(n->ib, &ca, &dca);
  SLIP_SYS_CHECK(q->cq != nullptr, "mlx5dv_create_cq (overrun ignored, 64-byte CQEs, parent domain)");
  memset(&qa, 0, sizeof qa);
  qa.send_cq = ibv_cq_ex_to_cq(q->cq);
  qa.recv_cq = ibv_cq_ex_to_cq(q->cq);
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 0;
  qa.cap.max_send_wr = depth;
  qa.cap.max_send_sge = 1;  // with RC's atomic segment: one 64-byte WQE per post
  qa.cap.max_recv_wr = 0;
  qa.cap.max_recv_sge = 1;
  q->qp = n->v->create_qp(n->pdom, &qa);
  SLIP_SYS_CHECK(q->qp != nullptr, "ibv_create_qp (RC, parent domain)");
  memset(&obj, 0, sizeof obj);
  memset(&q->dq, 0, sizeof q->dq);
  memset(&q->dc, 0, sizeof q->dc);
  obj.qp.in = q->qp;
  obj.qp.out = &q->dq;
  obj.cq.in = ibv_cq_ex_to_cq(q->cq);
  obj.cq.out = &q->dc;
  if (n->v->dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) != 0)
    SLIP_FAIL(SLIP_ERR_OS, "%s: mlx5dv_init_obj failed: %s", n->name.c_str(), strerror(errno));
  if (q->dq.sq.stride != SLIP_MLX5_WQE_BYTES || q->dq.sq.wqe_cnt < depth || q->dq.sq.wqe_cnt > 32768)
    SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "%s: send queue of %u WQEs of %u bytes, expected at least %u of %d bytes",
              n->name.c_str(), q->dq.sq.wqe_cnt, q->dq.sq.stride, depth, SLIP_MLX5_WQE_BYTES);
  if (q->dc.cqe_size != SLIP_MLX5_CQE_BYTES || (q->dc.cqe_cnt & (q->dc.cqe_cnt - 1)) != 0)
    SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "%s: completion queue of %u CQEs of %u bytes, expected a power of two of %d bytes",
              n->name.c_str(), q->dc.cqe_cnt, q->dc.cqe_size, SLIP_MLX5_CQE_BYTES);
  // Invalid, owner bit of the lap before the first: the device takes a CQE only once written.
  cqe = (uint8_t *)q->dc.buf;
  for (uint32_t i = 0; i < q->dc.cqe_cnt; i++) cqe[i * SLIP_MLX5_CQE_BYTES + SLIP_CQE_OP_OWN] = SLIP_MLX5_CQE_INVALID << 4 | 1;
  {
    uint32_t r;
    SLIP_SYS_CHECK(getrandom(&r, sizeof r, 0) == (ssize_t)sizeof r, "getrandom");
    q->psn = r & 0xffffffu;
  }
  memset(&l, 0, sizeof l);
  l.qpn = q->qp->qp_num;
  l.sq_wqe_cnt = q->dq.sq.wqe_cnt;
  l.cqn = q->dc.cqn;
  l.cqe_cnt = q->dc.cqe_cnt;
  l.rings_in_host = 1;
  SLIP_CHECK(gpu_view(n, q->dq.sq.buf, "the send queue", &l.sq_wqes));
  SLIP_CHECK(gpu_view(n, &q->dq.dbrec[MLX5_SND_DBR], "the send doorbell record", &l.sq_dbrec));
  SLIP_CHECK(gpu_view(n, q->dc.buf, "the completion queue", &l.cqes));
  SLIP_CHECK(gpu_view(n, q->dc.dbrec, "the completion doorbell record", &l.cq_dbrec));
  if (doorbell != SLIP_NIC_DOORBELL_HOST) {
    // The UAR page as I/O memory; pages shared by several queue pairs are registered once.
    void *page = (void *)((uintptr_t)q->dq.bf.reg & ~(uintptr_t)(page_size() - 1));
    void *dpage = nullptr;
    cudaError_t e = cudaSuccess;
    std::lock_guard<std::mutex> g(n->m);
    if (n->uar_users[page] == 0)
      e = cudaHostRegister(page, page_size(), cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dpage, page, 0);
    if (e == cudaSuccess) {
      n->uar_users[page]++;
      q->uar_page = page;
      l.sq_db = (uint8_t *)dpage + ((uintptr_t)q->dq.bf.reg - (uintptr_t)page);
      l.gpu_doorbell = 1;
    } else {
      (void)cudaGetLastError();
      if (n->uar_users[page] == 0) n->uar_users.erase(page);
      if (doorbell == SLIP_NIC_DOORBELL_GPU)
        SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "%s: the doorbell register cannot be mapped into the GPU (%s); use the host "
                  "doorbell (SLIP_NIC_DOORBELL_HOST) on this platform", n->name.c_str(), cudaGetErrorString(e));
    }
  }
  if (!l.gpu_doorbell) {
    SLIP_CUDA_CHECK(cudaHostAlloc(&q->proxy_word, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    *q->proxy_word = 0;
    SLIP_CHECK(gpu_view(n, q->proxy_word, "the proxy doorbell word", &l.sq_db));
  }
  SLIP_CHECK(slip_dev_qp_init(&l, h.data()));
  SLIP_CUDA_CHECK(cudaMalloc(&q->d_qp, h.size()));
  SLIP_CUDA_CHECK(cudaMemcpy(q->d_qp, h.data(), h.size(), cudaMemcpyHostToDevice));
done:
  return st;
}

}  // namespace

const char *hw_nic_impl(void) { return "mlx5"; }

slip_status hw_nic_probe(void) {
  const Verbs *v = nullptr;
  return verbs(&v);
}

void hw_nic_close(hw_nic *n) {
  if (!n) return;
  n->progress.reset();  // joins its thread
  for (ibv_mr *mr : n->mrs) n->v->dereg_mr(mr);
  if (n->pdom) n->v->dealloc_pd(n->pdom);
  if (n->pd) n->v->dealloc_pd(n->pd);
  if (n->ib) n->v->close_device(n->ib);
  delete n;
}

slip_status hw_nic_open(const char *ibdev, int port, int gid_index, int device, int doorbell,
                                     hw_nic **out) {
  slip_status st = SLIP_OK;
  const Verbs *v = nullptr;
  hw_nic *n = nullptr;
  ibv_device **list = nullptr;
  int ndev = 0;
  std::string found;
  ibv_device_attr da;
  ibv_parent_domain_init_attr pa;
  SLIP_CHECK(slip_nic_check_open(ibdev, port, gid_index, doorbell, out));
  SLIP_CHECK(verbs(&v));
  list = v->get_device_list(&ndev);
  if (!list) ndev = 0;
  n = new hw_nic();
  n->v = v;
  n->device = device;
  n->port = port;
  n->gid_index = gid_index;
  n->doorbell = doorbell;
  n->name = std::string(ibdev) + " port " + std::to_string(port);
  n->progress.reset(new NicProgress<hw_nic_link>(ring_host_doorbells));
  for (int i = 0; i < ndev && !n->ib; i++) {
    const char *name = v->get_device_name(list[i]);
    found += std::string(found.empty() ? "" : ", ") + name;
    if (*ibdev ? strcmp(name, ibdev) != 0 : !v->dv_is_supported(list[i])) continue;  // "": the first mlx5 device
    if (!v->dv_is_supported(list[i])) SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "RDMA device %s is not an mlx5 (ConnectX) device", ibdev);
    n->ib = v->open_device(list[i]);
    SLIP_SYS_CHECK(n->ib != nullptr, "ibv_open_device");
    n->name = std::string(name) + " port " + std::to_string(port);
  }
  if (!n->ib)
    SLIP_FAIL(SLIP_ERR_NO_DEVICE, "RDMA device %s not found (%d found%s%s)", *ibdev ? ibdev : "of the mlx5 kind", ndev,
              ndev ? ": " : "", found.c_str());
  SLIP_SYS_CHECK(query_port(v, n->ib, (uint8_t)port, &n->port_attr) == 0, "ibv_query_port");
  if (n->port_attr.state != IBV_PORT_ACTIVE)
    SLIP_FAIL(SLIP_ERR_STATE, "%s is not active (state %d, expected %d: IBV_PORT_ACTIVE)", n->name.c_str(),
              (int)n->port_attr.state, (int)IBV_PORT_ACTIVE);
  SLIP_SYS_CHECK(v->query_gid(n->ib, (uint8_t)port, gid_index, &n->gid) == 0, "ibv_query_gid");
  SLIP_SYS_CHECK(v->query_device(n->ib, &da) == 0, "ibv_query_device");
  {
    int ra = da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom : da.max_qp_init_rd_atom;
    n->rd_atomic = (uint8_t)(ra < 1 ? 1 : ra > 16 ? 16 : ra);
  }
  SLIP_CUDA_CHECK(cudaSetDevice(device));
  n->pd = v->alloc_pd(n->ib);
  SLIP_SYS_CHECK(n->pd != nullptr, "ibv_alloc_pd");
  memset(&pa, 0, sizeof pa);
  pa.pd = n->pd;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = queue_alloc;
  pa.free = queue_free;
  pa.pd_context = n;
  n->pdom = alloc_parent_domain(n->ib, &pa);
  SLIP_SYS_CHECK(n->pdom != nullptr, "ibv_alloc_parent_domain (custom allocators)");
  *out = n;
  n = nullptr;
done:
  if (list) v->free_device_list(list);
  hw_nic_close(n);
  return st;
}

slip_status hw_nic_reg(hw_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  ibv_mr *mr = nullptr;
  cudaPointerAttributes pa;
  // Strict ordering (no IBV_ACCESS_RELAXED_ORDERING): a signal must not pass the data before it.
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  SLIP_CUDA_CHECK(cudaPointerGetAttributes(&pa, ptr));
  if (pa.type == cudaMemoryTypeDevice && n->v->reg_dmabuf_mr) {
    // dma-buf first (kernel 6.1+ with the open GPU kernel modules; no nvidia-peermem needed).
    int fd = -1;
    const uintptr_t base = (uintptr_t)ptr & ~(uintptr_t)(page_size() - 1);
    const size_t span = ((uintptr_t)ptr + len - base + page_size() - 1) / page_size() * page_size();
    auto get_handle = mem_handle_fn();
    if (get_handle &&
        get_handle(&fd, (CUdeviceptr)base, span, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS && fd >= 0) {
      mr = n->v->reg_dmabuf_mr(n->pd, (uintptr_t)ptr - base, len, SLIP_IOVA(id, 0), fd, access);
      close(fd);
    }
  }
  // Host memory, or device memory through nvidia-peermem.
  if (!mr) mr = n->v->reg_mr_iova2(n->pd, ptr, len, SLIP_IOVA(id, 0), (unsigned)access);
  SLIP_SYS_CHECK(mr != nullptr, "ibv_reg_mr_iova2");
  st = slip_nic_check_keys(id, mr->lkey, mr->rkey);
  if (st != SLIP_OK) {
    n->v->dereg_mr(mr);
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
      n->v->dereg_mr(*it);
      n->mrs.erase(it);
      return;
    }
}

void hw_nic_link_destroy(hw_nic_link *l) {
  if (!l) return;
  hw_nic *n = l->nic;
  n->progress->remove(l);
  for (NicQp &q : l->qps) qp_destroy(n, q);
  delete l;
}

slip_status hw_nic_link_create(hw_nic *n, uint32_t nq, uint32_t depth, hw_nic_link **out) {
  slip_status st = SLIP_OK;
  hw_nic_link *l = nullptr;
  SLIP_CHECK(slip_nic_check_link(n, nq, depth, out));
  if (slip_dev_qp_size() == 0) SLIP_CHECK(slip_dev_qp_init(nullptr, nullptr));  // says why (no device headers)
  SLIP_CUDA_CHECK(cudaSetDevice(n->device));
  l = new hw_nic_link();
  l->nic = n;
  l->qps.resize(nq);
  for (uint32_t q = 0; q < nq; q++) {
    st = qp_create(n, depth, n->doorbell, &l->qps[q]);
    if (st != SLIP_OK) {
      std::lock_guard<std::mutex> g(n->m);
      if (!n->alloc_error.empty()) {
        std::string first = slip_last_error();  // "SLIP_ERR_...: text": the text, with the allocator's reason
        const size_t colon = first.find(": ");
        if (colon != std::string::npos) first = first.substr(colon + 2);
        st = slip_set_error(st, "%s; %s", first.c_str(), n->alloc_error.c_str());
      }
      goto done;
    }
  }
  l->doorbell = l->qps[0].proxy_word ? SLIP_NIC_DOORBELL_HOST : SLIP_NIC_DOORBELL_GPU;
  if (l->doorbell == SLIP_NIC_DOORBELL_HOST) n->progress->add(l);
  *out = l;
  l = nullptr;
done:
  hw_nic_link_destroy(l);
  return st;
}

slip_status hw_nic_qp_info_get(const hw_nic_link *l, uint32_t q, slip_nic_qp_info *out) {
  slip_status st = SLIP_OK;
  const hw_nic *n;
  if (!l || !out || q >= l->qps.size()) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_qp_info_get: queue pair %u", q);
  n = l->nic;
  memset(out, 0, sizeof *out);
  out->magic = SLIP_NIC_QP_INFO_MAGIC;
  out->version = SLIP_NIC_QP_INFO_VERSION;
  out->addr_type = n->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? SLIP_NIC_ADDR_IB : SLIP_NIC_ADDR_ROCE;
  out->qpn = l->qps[q].qp->qp_num;
  out->lid = n->port_attr.lid;
  memcpy(out->gid, n->gid.raw, sizeof out->gid);
  out->mtu = (uint32_t)n->port_attr.active_mtu;
  out->psn = l->qps[q].psn;
done:
  return st;
}

slip_status hw_nic_connect(hw_nic_link *l, uint32_t q, const slip_nic_qp_info *peer) {
  slip_status st = SLIP_OK;
  hw_nic *n;
  slip_nic_qp_info p;
  ibv_qp_attr a;
  NicQp *qp;
  if (!l || !peer || q >= l->qps.size()) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_nic_connect: queue pair %u", q);
  SLIP_CHECK(slip_nic_qp_info_parse(peer, sizeof *peer, &p));
  n = l->nic;
  qp = &l->qps[q];
  if (qp->connected) SLIP_FAIL(SLIP_ERR_STATE, "%s: queue pair %u is already connected (a new peer needs a new link)",
                               n->name.c_str(), qp->qp->qp_num);
  if ((p.addr_type == SLIP_NIC_ADDR_IB) != (n->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND))
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "%s: peer queue pair %u is %s, this port is %s", n->name.c_str(), p.qpn,
              p.addr_type == SLIP_NIC_ADDR_IB ? "InfiniBand" : "RoCE",
              n->port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "RoCE");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)n->port;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  errno = n->v->modify_qp(qp->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  SLIP_SYS_CHECK(errno == 0, "ibv_modify_qp to INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (ibv_mtu)(p.mtu < (uint32_t)n->port_attr.active_mtu ? p.mtu : (uint32_t)n->port_attr.active_mtu);
  a.dest_qp_num = p.qpn;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = n->rd_atomic;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)n->port;
  a.ah_attr.sl = 0;
  if (p.addr_type == SLIP_NIC_ADDR_IB) {
    a.ah_attr.dlid = (uint16_t)p.lid;
  } else {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, p.gid, sizeof p.gid);
    a.ah_attr.grh.sgid_index = (uint8_t)n->gid_index;
    a.ah_attr.grh.hop_limit = 255;
  }
  errno = n->v->modify_qp(qp->qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  SLIP_SYS_CHECK(errno == 0, "ibv_modify_qp to RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 us * 2^14: about 67 ms per try
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = qp->psn;
  a.max_rd_atomic = n->rd_atomic;
  errno = n->v->modify_qp(qp->qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                              IBV_QP_MAX_QP_RD_ATOMIC);
  SLIP_SYS_CHECK(errno == 0, "ibv_modify_qp to RTS");
  {
    std::lock_guard<std::mutex> g(n->progress->mutex());
    qp->connected = true;
  }
done:
  return st;
}

void *hw_nic_dev_qp(const hw_nic_link *l, uint32_t q) {
  return l && q < l->qps.size() ? l->qps[q].d_qp : nullptr;
}

int hw_nic_link_doorbell(const hw_nic_link *l) { return l ? l->doorbell : SLIP_NIC_DOORBELL_HOST; }

namespace {
// A host producer's doorbell on a queue pair the GPU would ring itself: the doorbell record, then
// the register, as ring_host_doorbells does for the device's producer index.
void publish_mlx5(void *state, uint64_t pi) {
  NicQp &q = *(NicQp *)state;
  if (q.proxy_word) {
    __atomic_store_n(q.proxy_word, pi, __ATOMIC_RELEASE);  // the progress thread rings it
    return;
  }
  __atomic_store_n(&q.dq.dbrec[MLX5_SND_DBR], be32((uint32_t)pi & 0xffffu), __ATOMIC_RELEASE);
  uint32_t ctrl[2] = {be32((uint32_t)pi << 8), be32(q.qp->qp_num << 8)};
  uint64_t word;
  memcpy(&word, ctrl, sizeof word);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *(volatile uint64_t *)q.dq.bf.reg = word;
}
}  // namespace

slip_status hw_nic_host_qp(hw_nic_link *l, uint32_t q, slip_host_qp *out) {
  if (!l || q >= l->qps.size() || !l->qps[q].connected)
    return slip_set_error(SLIP_ERR_STATE, "queue pair %u of the link is not connected", q);
  NicQp &p = l->qps[q];
  *out = slip_host_qp{};
  out->sq = (uint8_t *)p.dq.sq.buf;
  out->wqe_num = p.dq.sq.wqe_cnt;
  out->qpn = p.qp->qp_num;
  out->cq = (const uint8_t *)p.dc.buf;
  out->cqe_num = p.dc.cqe_cnt;
  out->cq_dbrec = (uint32_t *)p.dc.dbrec;
  out->publish = publish_mlx5;
  out->state = &p;
  return SLIP_OK;
}
