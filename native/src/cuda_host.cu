// Host side of the GPU backends: device contexts, registered regions (device memory exported
// through CUDA IPC, host memory through POSIX shared memory pinned in each process), imported
// peer regions, and the queue sets handed to push kernels (nvlink, proxy and gpunetio backends;
// gpunetio's queue pairs are built in gpunetio_host.cu).
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "check.h"
#include "cuda_exec.h"
#include "gpunetio.h"
#include "slipstream/device/sync.cuh"
#include "slipstream/host.h"

struct slip_ctx {
  int device;
  // Every region registered on this context (its protection domain, as a NIC sees one): the
  // software NIC of a gpunetio set resolves the source regions its WQEs name here, so a set's
  // source slots can change between pushes without re-registering anything.
  std::mutex mu;
  std::vector<slip_region_entry> registered;
};

struct slip_region {
  slip_ctx *ctx;
  int kind;
  uint32_t id;
  uint64_t key;
  uint64_t length;
  void *dptr;   // device pointer (host memory: device alias)
  void *hptr;   // host pointer (host memory only)
  char shm_name[SLIP_SHM_NAME_MAX];
};

struct slip_remote {
  slip_ctx *ctx;
  slip_region_desc desc;
  void *dptr;
  void *hptr;
  bool opened_ipc;  // cudaIpcCloseMemHandle on destroy
  bool alias;       // view of a local region: nothing to unmap
};

extern "C" slip_status slip_cuda_probe(int *count) {
  slip_status st = SLIP_OK;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (count) *count = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    SLIP_FAIL(SLIP_ERR_NO_DEVICE, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
  }
  if (n == 0) SLIP_FAIL(SLIP_ERR_NO_DEVICE, "the CUDA driver reports no GPU");
  if (count) *count = n;
done:
  return st;
}

extern "C" slip_status slip_ctx_create(int device, slip_ctx **out) {
  slip_status st = SLIP_OK;
  int n = 0;
  if (!out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_ctx_create: out is null");
  SLIP_CHECK(slip_cuda_probe(&n));
  if (device < 0 || device >= n) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "device %d out of range (0..%d)", device, n - 1);
  SLIP_CUDA_CHECK(cudaSetDevice(device));
  SLIP_CUDA_CHECK(cudaFree(nullptr));  // creates (retains) the device's primary context now
  *out = new slip_ctx();
  (*out)->device = device;
done:
  return st;
}

extern "C" void slip_ctx_destroy(slip_ctx *ctx) { delete ctx; }
extern "C" int slip_ctx_device(const slip_ctx *ctx) { return ctx ? ctx->device : -1; }

// The registered region of `id` whose memory key (low 32 bits of its key) is `mkey`, else any
// region of that id (its key then fails the caller's check); 0 when none is. Entries carry the
// memory key.
int slip_ctx_find_registered(void *state, uint32_t id, uint32_t mkey, slip_region_entry *out) {
  slip_ctx *ctx = (slip_ctx *)state;
  std::lock_guard<std::mutex> g(ctx->mu);
  int found = 0;
  for (const slip_region_entry &e : ctx->registered) {
    if (e.id != id) continue;
    *out = e;
    out->key = SLIP_MKEY(e.key);
    found = 1;
    if (SLIP_MKEY(e.key) == mkey) break;
  }
  return found;
}

static slip_status random_key(uint64_t *key) {
  slip_status st = SLIP_OK;
  ssize_t n = getrandom(key, sizeof *key, 0);
  SLIP_SYS_CHECK(n == (ssize_t)sizeof *key, "getrandom");
done:
  return st;
}

extern "C" slip_status slip_region_create(slip_ctx *ctx, int kind, uint64_t length, uint32_t id, slip_region **out) {
  slip_status st = SLIP_OK;
  slip_region *r = nullptr;
  int fd = -1;
  if (!ctx || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_region_create: null argument");
  if (length == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "region %u: length 0", id);
  if (kind != SLIP_MEM_DEVICE && kind != SLIP_MEM_HOST_SHM)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "region %u: memory kind %d, expected %d (device) or %d (host shm)", id, kind,
              SLIP_MEM_DEVICE, SLIP_MEM_HOST_SHM);
  r = new slip_region();
  r->ctx = ctx;
  r->kind = kind;
  r->id = id;
  r->length = length;
  SLIP_CHECK(random_key(&r->key));
  SLIP_CUDA_CHECK(cudaSetDevice(ctx->device));
  if (kind == SLIP_MEM_DEVICE) {
    SLIP_CUDA_CHECK(cudaMalloc(&r->dptr, length));
  } else {
    snprintf(r->shm_name, sizeof r->shm_name, "/slip-%d-%u-%08x", (int)getpid(), id, (unsigned)(r->key & 0xffffffffu));
    fd = shm_open(r->shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
    SLIP_SYS_CHECK(fd >= 0, "shm_open");
    SLIP_SYS_CHECK(ftruncate(fd, (off_t)length) == 0, "ftruncate");
    r->hptr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    SLIP_SYS_CHECK(r->hptr != MAP_FAILED, "mmap");
    SLIP_CUDA_CHECK(cudaHostRegister(r->hptr, length, cudaHostRegisterMapped | cudaHostRegisterPortable));
    SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&r->dptr, r->hptr, 0));
  }
  {
    std::lock_guard<std::mutex> g(ctx->mu);
    ctx->registered.push_back({r->id,
                               SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE |
                                   (kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u),
                               r->key, r->length, r->dptr});
  }
  *out = r;
  r = nullptr;
done:
  if (fd >= 0) close(fd);
  if (r) {
    if (r->hptr && r->hptr != MAP_FAILED) munmap(r->hptr, length);
    if (r->shm_name[0]) shm_unlink(r->shm_name);
    delete r;
  }
  return st;
}

extern "C" void slip_region_destroy(slip_region *r) {
  if (!r) return;
  {
    std::lock_guard<std::mutex> g(r->ctx->mu);
    auto &v = r->ctx->registered;
    for (size_t i = 0; i < v.size(); i++)
      if (v[i].ptr == r->dptr && v[i].id == r->id) {
        v.erase(v.begin() + (long)i);
        break;
      }
  }
  (void)cudaSetDevice(r->ctx->device);
  if (r->kind == SLIP_MEM_DEVICE) {
    (void)cudaFree(r->dptr);
  } else {
    (void)cudaHostUnregister(r->hptr);
    munmap(r->hptr, r->length);
    shm_unlink(r->shm_name);
  }
  delete r;
}

extern "C" void *slip_region_ptr(const slip_region *r) { return r ? r->dptr : nullptr; }
extern "C" void *slip_region_host_ptr(const slip_region *r) { return r ? r->hptr : nullptr; }
extern "C" uint64_t slip_region_length(const slip_region *r) { return r ? r->length : 0; }
extern "C" uint32_t slip_region_id(const slip_region *r) { return r ? r->id : 0; }
extern "C" uint64_t slip_region_key(const slip_region *r) { return r ? r->key : 0; }

extern "C" slip_status slip_region_export(const slip_region *r, slip_region_desc *d) {
  slip_status st = SLIP_OK;
  if (!r || !d) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_region_export: null argument");
  memset(d, 0, sizeof *d);
  d->magic = SLIP_REGION_DESC_MAGIC;
  d->version = SLIP_REGION_DESC_VERSION;
  d->kind = (uint16_t)r->kind;
  d->id = r->id;
  d->device = r->kind == SLIP_MEM_DEVICE ? r->ctx->device : -1;
  d->key = r->key;
  d->length = r->length;
  d->owner_pid = (uint64_t)getpid();
  if (r->kind == SLIP_MEM_DEVICE) {
    cudaIpcMemHandle_t h;
    SLIP_CUDA_CHECK(cudaSetDevice(r->ctx->device));
    SLIP_CUDA_CHECK(cudaIpcGetMemHandle(&h, r->dptr));
    static_assert(sizeof h <= sizeof d->ipc_handle, "IPC handle does not fit the descriptor");
    memcpy(d->ipc_handle, &h, sizeof h);
  } else {
    memcpy(d->shm_name, r->shm_name, sizeof d->shm_name);
  }
done:
  return st;
}

static_assert(sizeof(slip_region_desc) == 192, "slip_region_desc is a wire format: 192 bytes");

extern "C" slip_status slip_remote_import(slip_ctx *ctx, const void *buf, size_t len, slip_remote **out) {
  slip_status st = SLIP_OK;
  slip_remote *r = nullptr;
  int fd = -1;
  slip_region_desc d;
  if (!ctx || !buf || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_remote_import: null argument");
  SLIP_CHECK(slip_region_desc_parse(buf, len, &d));
  if (d.owner_pid == (uint64_t)getpid())
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "region %u was exported by this process (pid %" PRIu64 "): use slip_remote_alias",
              d.id, d.owner_pid);
  r = new slip_remote();
  r->ctx = ctx;
  r->desc = d;
  SLIP_CUDA_CHECK(cudaSetDevice(ctx->device));
  if (d.kind == SLIP_MEM_DEVICE) {
    cudaIpcMemHandle_t h;
    memcpy(&h, d.ipc_handle, sizeof h);
    SLIP_CUDA_CHECK(cudaIpcOpenMemHandle(&r->dptr, h, cudaIpcMemLazyEnablePeerAccess));
    r->opened_ipc = true;
  } else {
    fd = shm_open(d.shm_name, O_RDWR, 0);
    SLIP_SYS_CHECK(fd >= 0, "shm_open");
    struct stat sb;
    SLIP_SYS_CHECK(fstat(fd, &sb) == 0, "fstat");
    if ((uint64_t)sb.st_size < d.length)
      SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "region %u: descriptor length %" PRIu64 " exceeds the shared memory (%" PRIu64 " bytes)",
                d.id, d.length, (uint64_t)sb.st_size);
    r->hptr = mmap(nullptr, d.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    SLIP_SYS_CHECK(r->hptr != MAP_FAILED, "mmap");
    SLIP_CUDA_CHECK(cudaHostRegister(r->hptr, d.length, cudaHostRegisterMapped | cudaHostRegisterPortable));
    SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&r->dptr, r->hptr, 0));
  }
  *out = r;
  r = nullptr;
done:
  if (fd >= 0) close(fd);
  if (r) {
    if (r->hptr && r->hptr != MAP_FAILED) munmap(r->hptr, r->desc.length);
    if (r->opened_ipc) (void)cudaIpcCloseMemHandle(r->dptr);
    delete r;
  }
  return st;
}

extern "C" slip_status slip_remote_alias(const slip_region *local, slip_remote **out) {
  slip_status st = SLIP_OK;
  slip_remote *r = nullptr;
  if (!local || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_remote_alias: null argument");
  r = new slip_remote();
  r->ctx = local->ctx;
  SLIP_CHECK(slip_region_export(local, &r->desc));
  r->dptr = local->dptr;
  r->hptr = local->hptr;
  r->alias = true;
  *out = r;
  r = nullptr;
done:
  delete r;
  return st;
}

extern "C" void slip_remote_destroy(slip_remote *r) {
  if (!r) return;
  if (!r->alias) {
    (void)cudaSetDevice(r->ctx->device);
    if (r->desc.kind == SLIP_MEM_DEVICE) {
      (void)cudaIpcCloseMemHandle(r->dptr);
    } else {
      (void)cudaHostUnregister(r->hptr);
      munmap(r->hptr, r->desc.length);
    }
  }
  delete r;
}

extern "C" void *slip_remote_ptr(const slip_remote *r) { return r ? r->dptr : nullptr; }
extern "C" void *slip_remote_host_ptr(const slip_remote *r) { return r ? r->hptr : nullptr; }
extern "C" uint32_t slip_remote_id(const slip_remote *r) { return r ? r->desc.id : 0; }
extern "C" uint64_t slip_remote_length(const slip_remote *r) { return r ? r->desc.length : 0; }

static slip_region_entry remote_entry(const slip_remote *r) {
  slip_region_entry e;
  e.id = r->desc.id;
  e.flags = SLIP_DEV_REGION_WRITABLE | (r->desc.kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u);
  e.key = r->desc.key;
  e.length = r->desc.length;
  e.ptr = r->dptr;
  return e;
}

extern "C" slip_status slip_remote_check(const slip_remote *r, uint32_t id, uint64_t key, uint64_t offset,
                                         uint64_t length) {
  slip_status st = SLIP_OK;
  slip_dev_error e;
  char text[256];
  memset(&e, 0, sizeof e);
  if (!r) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_remote_check: null region");
  {
    slip_region_entry ent = remote_entry(r);
    if (slip_region_validate(&ent, 1, id, 1, key, offset, length, SLIP_DEV_REGION_WRITABLE, &e) != SLIP_OK) {
      slip_dev_error_format(&e, text, sizeof text);
      // "queue 0: " prefix is meaningless for a host-side request check: drop it.
      const char *msg = strncmp(text, "queue 0: ", 9) == 0 ? text + 9 : text;
      SLIP_FAIL((slip_status)e.code, "write request rejected: %s", msg);
    }
  }
done:
  return st;
}

// ---------------------------------------------------------------------------------------------
// Queue sets

namespace {
__global__ void signal_add_kernel(uint64_t *sig, uint64_t add, int host_slot) {
  if (host_slot) {
    // Single-writer slot in host memory: plain read-modify-write (GPU atomics on host memory are
    // not atomic for the CPU over PCIe), released at system scope.
    slip::sync::st_release_sys(sig, slip::sync::ld_volatile(sig) + add);
  } else {
    slip::sync::red_add_release_sys(sig, add);
  }
}

slip_status exec_signal(void *state, uint64_t *sig, uint64_t add, uint32_t flags) {
  slip_status st = SLIP_OK;
  CudaExec *x = (CudaExec *)state;
  SLIP_CHECK(cuda_exec_bind(x));
  // Stream order puts the signal after every copy issued before it on this executor.
  signal_add_kernel<<<1, 1, 0, x->stream>>>(sig, add, (flags & SLIP_DEV_REGION_HOST) ? 1 : 0);
  SLIP_LAUNCH_CHECK();
done:
  return st;
}

}  // namespace

struct slip_queueset {
  slip_ctx *ctx = nullptr;
  int backend = 0;
  uint32_t nqueues = 0;
  uint32_t depth = 0;
  uint32_t nlocals = 0;
  std::vector<slip_dev_region> table;  // host copy of the device table
  slip_dev_region *d_table = nullptr;
  slip_dev_queue *d_queues = nullptr;
  slip_dev_error *d_error = nullptr;   // device-found errors
  slip_dev_error *h_perror = nullptr;  // errors found by the proxy or the software NIC (pinned, mapped)
  slip_proxy_desc *h_rings = nullptr;  // pinned, mapped
  slip_proxy_ctrl *h_ctrls = nullptr;  // pinned, mapped
  CudaExec *exec = nullptr;
  slip_proxy *proxy = nullptr;
  slip_gpunetio *nic = nullptr;        // gpunetio: queue pairs and the software NIC
};

extern "C" void slip_queueset_destroy(slip_queueset *qs) {
  if (!qs) return;
  slip_proxy_destroy(qs->proxy);  // joins the executor before its memory goes away
  slip_gpunetio_destroy(qs->nic);
  (void)cudaSetDevice(qs->ctx->device);
  cuda_exec_destroy(qs->exec);
  (void)cudaFree(qs->d_table);
  (void)cudaFree(qs->d_queues);
  (void)cudaFree(qs->d_error);
  (void)cudaFreeHost(qs->h_perror);
  (void)cudaFreeHost(qs->h_rings);
  (void)cudaFreeHost(qs->h_ctrls);
  delete qs;
}

extern "C" slip_status slip_queueset_create(slip_ctx *ctx, int backend, uint32_t nqueues, uint32_t depth,
                                            const slip_region *const *locals, uint32_t nlocals,
                                            const slip_remote *const *remotes, uint32_t nremotes,
                                            slip_queueset **out) {
  slip_status st = SLIP_OK;
  slip_queueset *qs = nullptr;
  std::vector<slip_dev_queue> queues;
  std::vector<slip_region_entry> src, dst;
  uint64_t *warm = nullptr;
  if (!ctx || !out || (nlocals && !locals) || (nremotes && !remotes))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_queueset_create: null argument");
  if (nqueues == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_queueset_create: nqueues is 0");
  if (backend != SLIP_BACKEND_NVLINK && backend != SLIP_BACKEND_PROXY && backend != SLIP_BACKEND_GPUNETIO)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "backend %d, expected %d (nvlink), %d (proxy) or %d (gpunetio)", backend,
              SLIP_BACKEND_NVLINK, SLIP_BACKEND_PROXY, SLIP_BACKEND_GPUNETIO);
  if (backend == SLIP_BACKEND_PROXY && (depth < 2 || (depth & (depth - 1)) != 0))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "proxy ring depth %u, expected a power of two >= 2", depth);
  qs = new slip_queueset();
  qs->ctx = ctx;
  qs->backend = backend;
  qs->nqueues = nqueues;
  qs->depth = backend == SLIP_BACKEND_NVLINK ? 0 : depth;
  qs->nlocals = nlocals;
  for (uint32_t i = 0; i < nlocals; i++) {
    const slip_region *r = locals[i];
    if (!r) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "local region %u is null", i);
    uint32_t host = r->kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u;
    qs->table.push_back({(uint64_t)(uintptr_t)r->dptr, r->length, r->key, r->id,
                         SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE | host});
    src.push_back({r->id, SLIP_DEV_REGION_READABLE | host, r->key, r->length, r->dptr});
  }
  for (uint32_t i = 0; i < nremotes; i++) {
    const slip_remote *r = remotes[i];
    if (!r) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "remote region %u is null", i);
    slip_region_entry e = remote_entry(r);
    qs->table.push_back({(uint64_t)(uintptr_t)r->dptr, e.length, e.key, e.id, e.flags});
    dst.push_back(e);
  }
  for (size_t i = 0; i < qs->table.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (qs->table[i].id == qs->table[j].id && i >= nlocals && j >= nlocals)
        SLIP_FAIL(SLIP_ERR_INVALID_ARG, "remote region id %u appears twice in one queue set", qs->table[i].id);
  SLIP_CUDA_CHECK(cudaSetDevice(ctx->device));
  if (!qs->table.empty()) {
    SLIP_CUDA_CHECK(cudaMalloc(&qs->d_table, qs->table.size() * sizeof(slip_dev_region)));
    SLIP_CUDA_CHECK(cudaMemcpy(qs->d_table, qs->table.data(), qs->table.size() * sizeof(slip_dev_region),
                               cudaMemcpyHostToDevice));
  }
  SLIP_CUDA_CHECK(cudaMalloc(&qs->d_error, sizeof(slip_dev_error)));
  SLIP_CUDA_CHECK(cudaMemset(qs->d_error, 0, sizeof(slip_dev_error)));
  SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_perror, sizeof(slip_dev_error), cudaHostAllocMapped | cudaHostAllocPortable));
  memset(qs->h_perror, 0, sizeof(slip_dev_error));
  if (backend == SLIP_BACKEND_PROXY) {
    SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_rings, (size_t)nqueues * depth * sizeof(slip_proxy_desc),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_ctrls, (size_t)nqueues * sizeof(slip_proxy_ctrl),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    memset(qs->h_ctrls, 0, (size_t)nqueues * sizeof(slip_proxy_ctrl));
  }
  if (backend == SLIP_BACKEND_GPUNETIO)
    SLIP_CHECK(slip_gpunetio_create(ctx->device, nqueues, depth, src.data(), (uint32_t)src.size(), dst.data(),
                                    (uint32_t)dst.size(), {slip_ctx_find_registered, ctx}, qs->h_perror, &qs->nic));
  queues.resize(nqueues);
  for (uint32_t q = 0; q < nqueues; q++) {
    slip_dev_queue &dq = queues[q];
    memset(&dq, 0, sizeof dq);
    dq.backend = (uint32_t)backend;
    dq.index = q;
    dq.nregions = (uint32_t)qs->table.size();
    dq.depth = qs->depth;
    dq.regions = qs->d_table;
    dq.error = qs->d_error;
    void *p = nullptr;
    SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&p, qs->h_perror, 0));
    dq.proxy_error = (const slip_dev_error *)p;
    if (backend == SLIP_BACKEND_PROXY) {
      SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&p, qs->h_rings + (size_t)q * depth, 0));
      dq.ring = (slip_proxy_desc *)p;
      SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&p, qs->h_ctrls + q, 0));
      dq.ctrl = (slip_proxy_ctrl *)p;
    }
    if (backend == SLIP_BACKEND_GPUNETIO) {
      dq.nic_qp = slip_gpunetio_qp(qs->nic, q);
      dq.nic_sink_key = slip_gpunetio_sink_key(qs->nic);
    }
  }
  SLIP_CUDA_CHECK(cudaMalloc(&qs->d_queues, nqueues * sizeof(slip_dev_queue)));
  SLIP_CUDA_CHECK(cudaMemcpy(qs->d_queues, queues.data(), nqueues * sizeof(slip_dev_queue), cudaMemcpyHostToDevice));
  if (backend == SLIP_BACKEND_PROXY) {
    std::vector<slip_proxy_desc *> rings(nqueues);
    std::vector<slip_proxy_ctrl *> ctrls(nqueues);
    for (uint32_t q = 0; q < nqueues; q++) {
      rings[q] = qs->h_rings + (size_t)q * depth;
      ctrls[q] = qs->h_ctrls + q;
    }
    SLIP_CHECK(cuda_exec_create(ctx->device, &qs->exec));
    // Load the signal kernel now. With lazy module loading (the CUDA 12+ default) its first launch
    // would load the module while a push kernel spins waiting for that very signal: a deadlock.
    SLIP_CUDA_CHECK(cudaMalloc(&warm, sizeof(uint64_t)));
    signal_add_kernel<<<1, 1, 0, qs->exec->stream>>>(warm, 0, 0);
    SLIP_LAUNCH_CHECK();
    SLIP_CUDA_CHECK(cudaStreamSynchronize(qs->exec->stream));
    slip_proxy_exec_ops ops = {cuda_exec_copy, exec_signal, cuda_exec_flush, qs->exec};
    SLIP_CHECK(slip_proxy_create(&ops, nqueues, depth, rings.data(), ctrls.data(), qs->h_perror, src.data(),
                                 (uint32_t)src.size(), dst.data(), (uint32_t)dst.size(), &qs->proxy));
  }
  *out = qs;
  qs = nullptr;
done:
  if (warm) (void)cudaFree(warm);
  slip_queueset_destroy(qs);
  return st;
}

extern "C" slip_dev_queue *slip_queueset_device(const slip_queueset *qs) { return qs ? qs->d_queues : nullptr; }
extern "C" uint32_t slip_queueset_size(const slip_queueset *qs) { return qs ? qs->nqueues : 0; }

extern "C" void slip_queueset_proxy_stats(const slip_queueset *qs, slip_proxy_stats *out) {
  slip_proxy_get_stats(qs ? qs->proxy : nullptr, out);
}

extern "C" void slip_queueset_nic_stats(const slip_queueset *qs, slip_softnic_stats *out) {
  slip_gpunetio_stats(qs ? qs->nic : nullptr, out);
}

extern "C" slip_status slip_queueset_set_key(slip_queueset *qs, uint32_t index, uint64_t key) {
  slip_status st = SLIP_OK;
  if (!qs || index >= qs->table.size())
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "table index %u, expected < %zu", index, qs ? qs->table.size() : (size_t)0);
  qs->table[index].key = key;
  SLIP_CUDA_CHECK(cudaSetDevice(qs->ctx->device));
  SLIP_CUDA_CHECK(cudaMemcpy(&qs->d_table[index], &qs->table[index], sizeof(slip_dev_region), cudaMemcpyHostToDevice));
done:
  return st;
}

extern "C" slip_status slip_queueset_stage_locals(slip_queueset *qs, uint32_t first,
                                                  const slip_region *const *regions, uint32_t n, void *image,
                                                  uint64_t image_bytes, uint64_t *dst) {
  slip_status st = SLIP_OK;
  if (!qs || (n && !regions) || (n && !image) || !dst)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_queueset_stage_locals: null argument");
  if (qs->backend != SLIP_BACKEND_NVLINK && qs->backend != SLIP_BACKEND_GPUNETIO)
    SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "slip_queueset_stage_locals: backend %d, expected %d (nvlink) or %d (gpunetio: its "
              "NIC finds any registered region); the proxy executor keeps its own copy of the table", qs->backend,
              SLIP_BACKEND_NVLINK, SLIP_BACKEND_GPUNETIO);
  if ((uint64_t)first + n > qs->nlocals)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "local table entries %u + %u, expected within the %u local entries", first, n,
              qs->nlocals);
  if (image_bytes < (uint64_t)n * sizeof(slip_dev_region))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "table image of %llu bytes for %u entries, expected at least %llu",
              (unsigned long long)image_bytes, n, (unsigned long long)((uint64_t)n * sizeof(slip_dev_region)));
  for (uint32_t i = 0; i < n; i++)
    if (!regions[i]) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "local region %u is null", first + i);
  for (uint32_t i = 0; i < n; i++) {
    const slip_region *r = regions[i];
    uint32_t host = r->kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u;
    qs->table[first + i] = {(uint64_t)(uintptr_t)r->dptr, r->length, r->key, r->id,
                            SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE | host};
  }
  if (n) memcpy(image, &qs->table[first], n * sizeof(slip_dev_region));
  *dst = (uint64_t)(uintptr_t)&qs->d_table[first];
done:
  return st;
}

extern "C" slip_status slip_queueset_set_locals(slip_queueset *qs, uint32_t first, const slip_region *const *regions,
                                                uint32_t n) {
  slip_status st = SLIP_OK;
  std::vector<slip_dev_region> image(n ? n : 1);
  uint64_t dst = 0;
  SLIP_CHECK(slip_queueset_stage_locals(qs, first, regions, n, image.data(), image.size() * sizeof(slip_dev_region),
                                        &dst));
  if (n == 0) goto done;
  SLIP_CUDA_CHECK(cudaSetDevice(qs->ctx->device));
  SLIP_CUDA_CHECK(cudaMemcpy((void *)(uintptr_t)dst, image.data(), n * sizeof(slip_dev_region),
                             cudaMemcpyHostToDevice));
  // A copy from pageable memory may return before its DMA is done; the next push runs on a
  // non-blocking stream that would not wait for it.
  SLIP_CUDA_CHECK(cudaStreamSynchronize(0));
done:
  return st;
}

extern "C" slip_status slip_queueset_check(slip_queueset *qs, int clear) {
  slip_status st = SLIP_OK;
  slip_softnic_stats nic;
  slip_dev_error e;
  char text[256];
  if (!qs) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_queueset_check: null queue set");
  slip_gpunetio_stats(qs->nic, &nic);  // before a reset clears its syndrome
  SLIP_CUDA_CHECK(cudaSetDevice(qs->ctx->device));
  SLIP_CUDA_CHECK(cudaMemcpy(&e, qs->d_error, sizeof e, cudaMemcpyDeviceToHost));
  if (e.code == 0) {
    // The executor publishes `code` last with release; acquire it first.
    uint32_t code = __atomic_load_n(&qs->h_perror->code, __ATOMIC_ACQUIRE);
    memcpy(&e, qs->h_perror, sizeof e);
    e.code = code;
  }
  if (clear) {
    SLIP_CUDA_CHECK(cudaMemset(qs->d_error, 0, sizeof e));
    memset(qs->h_perror, 0, sizeof e);
    if (qs->nic) {
      // Its queue pairs are reset and reconnected (a batch that failed left a CQE the device does
      // not count), and the device's count of completed WQEs with them.
      SLIP_CHECK(slip_gpunetio_reset(qs->nic));
      for (uint32_t q = 0; q < qs->nqueues; q++) SLIP_CUDA_CHECK(cudaMemset(&qs->d_queues[q].head, 0, sizeof(uint64_t)));
    }
  }
  if (e.code != 0) {
    slip_dev_error_format(&e, text, sizeof text);
    if (nic.first_syndrome != 0)
      SLIP_FAIL((slip_status)e.code, "error completion: %s (CQE syndrome 0x%02x, %s)", text, nic.first_syndrome,
                slip_mlx5_syndrome_name(nic.first_syndrome));
    SLIP_FAIL((slip_status)e.code, "error completion: %s", text);
  }
done:
  return st;
}
