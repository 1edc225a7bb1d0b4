// Host side of the GPU backends: device contexts, registered regions (device memory exported
// through CUDA IPC, host memory through POSIX shared memory pinned in each process) and imported
// peer regions. The queue sets handed to push kernels are in queueset.cu.
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
#include <map>
#include <string>
#include <mutex>
#include <vector>

#include "check.h"
#include "cuda_exec.h"
#include "cuda_objects.h"
#include "gpunetio.h"
#include "slipstream/device/sync.cuh"
#include "slipstream/host.h"

namespace {
struct IpcMapping {
  void *base = nullptr;
  uint32_t users = 0;
};
std::mutex g_ipc_mu;
std::map<std::string, IpcMapping> g_ipc;  // (device, handle bytes) -> mapping

std::string ipc_key(int device, const cudaIpcMemHandle_t &h) {
  return std::to_string(device) + ":" + std::string((const char *)&h, sizeof h);
}
}  // namespace

slip_status slip_ipc_map(int device, const cudaIpcMemHandle_t &h, void **base) {
  slip_status st = SLIP_OK;
  std::lock_guard<std::mutex> g(g_ipc_mu);
  IpcMapping &m = g_ipc[ipc_key(device, h)];
  if (!m.base) {
    SLIP_CUDA_CHECK(cudaSetDevice(device));
    SLIP_CUDA_CHECK(cudaIpcOpenMemHandle(&m.base, h, cudaIpcMemLazyEnablePeerAccess));
  }
  m.users++;
  *base = m.base;
done:
  if (st != SLIP_OK) g_ipc.erase(ipc_key(device, h));
  return st;
}

void slip_ipc_unmap(int device, void *base) {
  std::lock_guard<std::mutex> g(g_ipc_mu);
  const std::string prefix = std::to_string(device) + ":";
  for (auto it = g_ipc.begin(); it != g_ipc.end(); ++it) {
    if (it->second.base != base || it->first.compare(0, prefix.size(), prefix) != 0) continue;
    if (--it->second.users == 0) {
      (void)cudaSetDevice(device);
      (void)cudaIpcCloseMemHandle(base);
      g_ipc.erase(it);
    }
    return;
  }
}

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
    SLIP_CHECK(slip_ipc_map(ctx->device, h, &r->dptr));
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
    if (r->opened_ipc) slip_ipc_unmap(ctx->device, r->dptr);
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
      slip_ipc_unmap(r->ctx->device, r->dptr);
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


extern "C" slip_status slip_remote_check(const slip_remote *r, uint32_t id, uint64_t key, uint64_t offset,
                                         uint64_t length) {
  slip_status st = SLIP_OK;
  slip_dev_error e;
  char text[256];
  memset(&e, 0, sizeof e);
  if (!r) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_remote_check: null region");
  {
    slip_region_entry ent = slip_remote_entry(r);
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

slip_region_entry slip_remote_entry(const slip_remote *r) {
  slip_region_entry e;
  e.id = r->desc.id;
  e.flags = SLIP_DEV_REGION_WRITABLE | (r->desc.kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u);
  e.key = r->desc.key;
  e.length = r->desc.length;
  e.ptr = r->dptr;
  return e;
}
