// Queue sets of the CUDA host API (slipstream/host.h): the device queues, region table and error
// records a push kernel is given, over one backend: nvlink stores, the proxy executor, or gpunetio
// queue pairs (the software NIC's own, or a NIC link's: slipstream/gpunetio_nic.h).
#include <cuda_runtime.h>
#include <string.h>

#include <vector>

#include "check.h"
#include "cuda_exec.h"
#include "cuda_objects.h"
#include "gpunetio.h"
#include "nic_impl.h"
#include "nic_qp.h"
#include "slipstream/device/sync.cuh"
#include "slipstream/gpunetio_nic.h"
#include "slipstream/host.h"
#include "slipstream/softnic.h"

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
  slip_nic_link *link = nullptr;       // gpunetio over a NIC link: whose queue pairs the queues use (not owned)
  const slip_dev_error *link_err = nullptr;  // the link's error record, when its NIC keeps one
};

namespace {
// The set's device table (a copy of qs->table) and its two error records.
slip_status alloc_records(slip_queueset *qs) {
  slip_status st = SLIP_OK;
  SLIP_CUDA_CHECK(cudaSetDevice(qs->ctx->device));
  if (!qs->table.empty()) {
    SLIP_CUDA_CHECK(cudaMalloc(&qs->d_table, qs->table.size() * sizeof(slip_dev_region)));
    SLIP_CUDA_CHECK(cudaMemcpy(qs->d_table, qs->table.data(), qs->table.size() * sizeof(slip_dev_region),
                               cudaMemcpyHostToDevice));
  }
  SLIP_CUDA_CHECK(cudaMalloc(&qs->d_error, sizeof(slip_dev_error)));
  SLIP_CUDA_CHECK(cudaMemset(qs->d_error, 0, sizeof(slip_dev_error)));
  SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_perror, sizeof(slip_dev_error), cudaHostAllocMapped | cudaHostAllocPortable));
  memset(qs->h_perror, 0, sizeof(slip_dev_error));
done:
  return st;
}

// A local region's table entry; over a NIC link its key is the region's memory key on that NIC.
slip_status local_entry(const slip_queueset *qs, const slip_region *r, slip_dev_region *out) {
  slip_status st = SLIP_OK;
  const uint32_t host = r->kind == SLIP_MEM_HOST_SHM ? (uint32_t)SLIP_DEV_REGION_HOST : 0u;
  uint64_t key = r->key;
  if (qs->link) {
    uint32_t mkey = 0;
    SLIP_CHECK(slip_nic_link_mkey(qs->link, r->id, &mkey));
    key = mkey;
  }
  *out = {(uint64_t)(uintptr_t)r->dptr, r->length, key, r->id,
          SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE | host};
done:
  return st;
}
}  // namespace

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
    slip_region_entry e = slip_remote_entry(r);
    qs->table.push_back({(uint64_t)(uintptr_t)r->dptr, e.length, e.key, e.id, e.flags});
    dst.push_back(e);
  }
  for (size_t i = 0; i < qs->table.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (qs->table[i].id == qs->table[j].id && i >= nlocals && j >= nlocals)
        SLIP_FAIL(SLIP_ERR_INVALID_ARG, "remote region id %u appears twice in one queue set", qs->table[i].id);
  SLIP_CHECK(alloc_records(qs));
  if (backend == SLIP_BACKEND_PROXY) {
    SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_rings, (size_t)nqueues * depth * sizeof(slip_proxy_desc),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    SLIP_CUDA_CHECK(cudaHostAlloc(&qs->h_ctrls, (size_t)nqueues * sizeof(slip_proxy_ctrl),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    memset(qs->h_ctrls, 0, (size_t)nqueues * sizeof(slip_proxy_ctrl));
  }
  if (backend == SLIP_BACKEND_GPUNETIO)
    SLIP_CHECK(slip_gpunetio_create(ctx->device, nqueues, depth, src.data(), (uint32_t)src.size(), dst.data(),
                                    (uint32_t)dst.size(), {slip_ctx_find_registered, ctx}, qs->h_perror, 0, nullptr,
                                    &qs->nic));
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
    slip_dev_region e;
    SLIP_CHECK(local_entry(qs, regions[i], &e));
    qs->table[first + i] = e;
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
  if (qs->link) {
    slip_dev_error le;
    uint32_t synd = 0;
    slip_nic_link_error(qs->link, &le, &synd, clear);
    if (e.code == 0) e = le;
    if (synd) nic.first_syndrome = synd;
  }
  if (e.code == 0) {
    // The executor publishes `code` last with release; acquire it first.
    uint32_t code = __atomic_load_n(&qs->h_perror->code, __ATOMIC_ACQUIRE);
    memcpy(&e, qs->h_perror, sizeof e);
    e.code = code;
  }
  if (clear) {
    if (qs->nic) {
      // Its queue pairs are reset and reconnected (a batch that failed left a CQE the device does
      // not count), and the device's count of completed WQEs with them. First: until the reset,
      // the NIC may look at the failed queue pair's WQEs again and record their error again.
      SLIP_CHECK(slip_gpunetio_reset(qs->nic));
      for (uint32_t q = 0; q < qs->nqueues; q++) SLIP_CUDA_CHECK(cudaMemset(&qs->d_queues[q].head, 0, sizeof(uint64_t)));
    }
    SLIP_CUDA_CHECK(cudaMemset(qs->d_error, 0, sizeof e));
    memset(qs->h_perror, 0, sizeof e);
  }
  if (e.code != 0) {
    slip_dev_error_format(&e, text, sizeof text);
    if (qs->link && nic.first_syndrome != 0)
      SLIP_FAIL((slip_status)e.code, "error completion: %s (CQE syndrome 0x%02x, %s); the link's queue pairs are in "
                "the error state until the link is replaced", text, nic.first_syndrome,
                slip_mlx5_syndrome_name(nic.first_syndrome));
    if (nic.first_syndrome != 0)
      SLIP_FAIL((slip_status)e.code, "error completion: %s (CQE syndrome 0x%02x, %s)", text, nic.first_syndrome,
                slip_mlx5_syndrome_name(nic.first_syndrome));
    SLIP_FAIL((slip_status)e.code, "error completion: %s", text);
  }
done:
  return st;
}

extern "C" slip_status slip_queueset_create_link(slip_ctx *ctx, slip_nic_link *link, uint32_t first_qp,
                                                 uint32_t nqueues, const slip_region *const *locals, uint32_t nlocals,
                                                 const slip_nic_remote *remotes, uint32_t nremotes,
                                                 slip_queueset **out) {
  slip_status st = SLIP_OK;
  slip_queueset *qs = nullptr;
  std::vector<slip_dev_queue> queues;
  if (!ctx || !link || !out || (nlocals && !locals) || (nremotes && !remotes))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_queueset_create_link: null argument");
  if (nqueues == 0 || (uint64_t)first_qp + nqueues > slip_nic_link_size(link))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "queue pairs %u + %u of a link of %u, expected 1 or more within the link",
              first_qp, nqueues, slip_nic_link_size(link));
  qs = new slip_queueset();
  qs->ctx = ctx;
  qs->backend = SLIP_BACKEND_GPUNETIO;
  qs->nqueues = nqueues;
  qs->nlocals = nlocals;
  qs->link = link;
  qs->link_err = slip_nic_link_error_record(link);
  for (uint32_t i = 0; i < nlocals; i++) {
    slip_dev_region e;
    if (!locals[i]) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "local region %u is null", i);
    SLIP_CHECK(local_entry(qs, locals[i], &e));
    qs->table.push_back(e);
  }
  for (uint32_t i = 0; i < nremotes; i++) {
    const slip_nic_remote &r = remotes[i];
    if (r.id >= SLIP_NIC_SINK_ID || r.length == 0 || r.length > (1ull << SLIP_IOVA_SHIFT))
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "peer region %u of %llu bytes, expected id < %u and 1..2^%d bytes", r.id,
                (unsigned long long)r.length, SLIP_NIC_SINK_ID, SLIP_IOVA_SHIFT);
    for (uint32_t j = 0; j < i; j++)
      if (remotes[j].id == r.id) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "peer region id %u appears twice in one queue set", r.id);
    // The peer's memory is only an (id, key, length) here: its NIC resolves it.
    qs->table.push_back({0, r.length, r.mkey, r.id, SLIP_DEV_REGION_WRITABLE});
  }
  SLIP_CHECK(alloc_records(qs));
  queues.resize(nqueues);
  for (uint32_t q = 0; q < nqueues; q++) {
    slip_dev_queue &dq = queues[q];
    void *p = nullptr;
    memset(&dq, 0, sizeof dq);
    dq.backend = SLIP_BACKEND_GPUNETIO;
    dq.index = q;
    dq.nregions = (uint32_t)qs->table.size();
    dq.regions = qs->d_table;
    dq.error = qs->d_error;
    SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&p, (void *)(qs->link_err ? qs->link_err : qs->h_perror), 0));
    dq.proxy_error = (const slip_dev_error *)p;
    if (slip_nic_link_host_driven(link, first_qp + q))
      SLIP_FAIL(SLIP_ERR_STATE, "queue pair %u of the link is posted on by the host (slip_nic_host_post), expected one "
                "only the GPU drives", first_qp + q);
    dq.nic_qp = slip_nic_dev_qp(link, first_qp + q);
    if (!dq.nic_qp)
      SLIP_FAIL(SLIP_ERR_STATE, "queue pair %u of the link is not connected (or this build has no GPUNetIO device "
                "headers)", first_qp + q);
    dq.nic_sink_key = slip_nic_link_sink_key(link);
    // Queue pairs a set before this one used: their WQEs so far are complete.
    SLIP_CHECK(slip_dev_qp_submitted(dq.nic_qp, &dq.head));
  }
  SLIP_CUDA_CHECK(cudaMalloc(&qs->d_queues, nqueues * sizeof(slip_dev_queue)));
  SLIP_CUDA_CHECK(cudaMemcpy(qs->d_queues, queues.data(), nqueues * sizeof(slip_dev_queue), cudaMemcpyHostToDevice));
  *out = qs;
  qs = nullptr;
done:
  slip_queueset_destroy(qs);
  return st;
}
