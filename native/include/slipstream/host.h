/*
 * Slipstream native host API (C, JNI-ready: opaque handles, status codes, no callbacks into Java).
 *
 * Threading: every object belongs to the thread that created it unless a function says otherwise;
 * slip_last_error() is per thread. Ownership: *_create / *_destroy and *_import / *_destroy are
 * symmetric; destroy functions accept NULL and are idempotent per handle.
 */
#ifndef SLIP_NATIVE_H
#define SLIP_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include "slipstream/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---- */
const char *slip_status_name(slip_status s);   /* "SLIP_ERR_OUT_OF_RANGE" */
const char *slip_last_error(void);             /* detail of the last failure on this thread */
slip_status slip_set_error(slip_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- layout of the shared structs, for the Java codec's layout test (STYLE.md) ----
 * One entry per field ({type, field, offset, size}) plus one per struct with field "" and the
 * struct's size as `size`. */
typedef struct slip_layout_field {
  const char *type;
  const char *field;
  uint32_t offset;
  uint32_t size;
} slip_layout_field;
const slip_layout_field *slip_abi_layout(uint32_t *count);

/* ---- CUDA presence ---- */
/* Number of usable GPUs in *count, or SLIP_ERR_NO_DEVICE with the reason in slip_last_error(). */
slip_status slip_cuda_probe(int *count);

/* ---- device context ---- */
typedef struct slip_ctx slip_ctx;
slip_status slip_ctx_create(int device, slip_ctx **out);  /* retains the primary context */
void slip_ctx_destroy(slip_ctx *ctx);
int slip_ctx_device(const slip_ctx *ctx);

/* ---- local registered regions ---- */
typedef struct slip_region slip_region;
/* Allocates `length` bytes of `kind` (SLIP_MEM_DEVICE or SLIP_MEM_HOST_SHM) and registers it
 * under `id` with a fresh random key. */
slip_status slip_region_create(slip_ctx *ctx, int kind, uint64_t length, uint32_t id, slip_region **out);
void slip_region_destroy(slip_region *r);
void *slip_region_ptr(const slip_region *r);      /* device pointer (host memory: its device alias) */
void *slip_region_host_ptr(const slip_region *r); /* host pointer for SLIP_MEM_HOST_SHM, else NULL */
uint64_t slip_region_length(const slip_region *r);
uint32_t slip_region_id(const slip_region *r);
uint64_t slip_region_key(const slip_region *r);
slip_status slip_region_export(const slip_region *r, slip_region_desc *out);

/* Checks a received descriptor (size, magic, version, kind, length, name) without mapping it. */
slip_status slip_region_desc_parse(const void *buf, size_t len, slip_region_desc *out);
/* CPU-side wait on a signal word (host memory): SLIP_OK once *sig >= value, else SLIP_ERR_TIMEOUT. */
slip_status slip_signal_wait_ge(const uint64_t *sig, uint64_t value, uint64_t timeout_ns);

/* ---- remote regions (imported from a peer's descriptor) ---- */
typedef struct slip_remote slip_remote;
/* Validates the descriptor (magic, version, kind, length, owner) and maps the memory. */
slip_status slip_remote_import(slip_ctx *ctx, const void *desc, size_t desc_len, slip_remote **out);
void slip_remote_destroy(slip_remote *r);
void *slip_remote_ptr(const slip_remote *r);      /* address usable by this process's GPU */
void *slip_remote_host_ptr(const slip_remote *r); /* host alias for SLIP_MEM_HOST_SHM */
uint32_t slip_remote_id(const slip_remote *r);
uint64_t slip_remote_length(const slip_remote *r);
/* A remote view of a local region (the loopback destination: a rank writing its own partition). */
slip_status slip_remote_alias(const slip_region *local, slip_remote **out);
/* Checks a write request {region id, key, offset, length} against the imported region. */
slip_status slip_remote_check(const slip_remote *r, uint32_t id, uint64_t key, uint64_t offset, uint64_t length);

/* ---- region check used by every executor (pure, CPU-testable) ---- */
typedef struct slip_region_entry {
  uint32_t id;
  uint32_t flags;     /* SLIP_DEV_REGION_* */
  uint64_t key;
  uint64_t length;
  void *ptr;          /* where the executor reads or writes */
} slip_region_entry;
const slip_region_entry *slip_region_find(const slip_region_entry *table, uint32_t n, uint32_t id);
/* key_check: 0 to skip the key (local source regions). Fills *err on failure. */
slip_status slip_region_validate(const slip_region_entry *table, uint32_t n, uint32_t id, int key_check,
                                 uint64_t key, uint64_t offset, uint64_t length, int need_flag,
                                 slip_dev_error *err);
/* Records `e` as the first error of queue `queue` in a shared record (proxy executor, software
 * NIC): the first reporter claims it, fills it, and publishes `code` last with release; later
 * reports are dropped. */
void slip_dev_error_publish(slip_dev_error *rec, const slip_dev_error *e, uint32_t queue);
/* Formats a queue error record as text ("offset 4096 + length 512 outside region 7 (length 4096)"). */
void slip_dev_error_format(const slip_dev_error *e, char *buf, size_t n);

/* ---- proxy executor (the CPU side of the proxy backend) ---- */
typedef struct slip_proxy_exec_ops {
  /* Copy `len` bytes; must be ordered before later copies/signals issued through these ops. */
  slip_status (*copy)(void *state, void *dst, const void *src, uint64_t len);
  /* flags: the signal region's SLIP_DEV_REGION_* (HOST: single-writer slot in host memory). */
  slip_status (*signal_add)(void *state, uint64_t *sig, uint64_t add, uint32_t flags);
  /* Wait until every copy and signal issued so far has completed. */
  slip_status (*flush)(void *state);
  void *state;
} slip_proxy_exec_ops;
typedef struct slip_proxy slip_proxy;
/* Starts one CPU thread that consumes `nqueues` rings. ring[q] has `depth` slots, ctrl[q] and
 * `err` are shared with the producer (host pointers). src/dst tables are copied. */
slip_status slip_proxy_create(const slip_proxy_exec_ops *ops, uint32_t nqueues, uint32_t depth,
                              slip_proxy_desc *const *rings, slip_proxy_ctrl *const *ctrls,
                              slip_dev_error *err,
                              const slip_region_entry *src, uint32_t nsrc,
                              const slip_region_entry *dst, uint32_t ndst, slip_proxy **out);
void slip_proxy_destroy(slip_proxy *p);   /* stops and joins the thread */
uint64_t slip_proxy_executed(const slip_proxy *p);  /* descriptors consumed, errors included */
/* Executor thread counters (benchmarks): sweeps that found work, nanoseconds spent issuing
 * descriptors and waiting in flush. */
typedef struct slip_proxy_stats {
  uint64_t descriptors, sweeps, issue_ns, flush_ns;
} slip_proxy_stats;
void slip_proxy_get_stats(const slip_proxy *p, slip_proxy_stats *out);
/* Host-side producer helpers (CPU tests, and the host transport later). */
slip_status slip_proxy_post(slip_proxy_desc *ring, slip_proxy_ctrl *ctrl, uint32_t depth,
                            uint64_t *head, const slip_proxy_desc *d);
void slip_proxy_publish(slip_proxy_ctrl *ctrl, uint64_t head);

/* ---- queue sets (what a push kernel is given) ---- */
typedef struct slip_queueset slip_queueset;
/* Builds `nqueues` device queues of `backend` over the given local (source) and remote
 * (destination) regions. Proxy: also pins the rings and starts the executor thread (CUDA copies
 * on a private stream). gpunetio: builds one DOCA GPUNetIO queue pair per queue in CPU-proxy mode
 * and starts the software NIC thread (slipstream/softnic.h); SLIP_ERR_UNSUPPORTED with the reason
 * when the library was built without the GPUNetIO device headers; region ids below 2^24 - 1.
 * depth: proxy ring slots or gpunetio send-queue WQEs (power of two), ignored for nvlink. */
slip_status slip_queueset_create(slip_ctx *ctx, int backend, uint32_t nqueues, uint32_t depth,
                                 const slip_region *const *locals, uint32_t nlocals,
                                 const slip_remote *const *remotes, uint32_t nremotes,
                                 slip_queueset **out);
void slip_queueset_destroy(slip_queueset *qs);
slip_dev_queue *slip_queueset_device(const slip_queueset *qs);  /* device array of nqueues */
uint32_t slip_queueset_size(const slip_queueset *qs);
/* Proxy executor counters (zeros for other backends). */
void slip_queueset_proxy_stats(const slip_queueset *qs, slip_proxy_stats *out);
/* Overrides the key that device code will present for table entry `index` (tests of forged
 * requests: the proxy executor and the software NIC must reject it). */
slip_status slip_queueset_set_key(slip_queueset *qs, uint32_t index, uint64_t key);
/* Replaces local table entries [first, first + n) with `regions` (nvlink and gpunetio sets: the
 * software NIC finds any region registered on the context; the proxy executor keeps its own copy of
 * the table, so proxy sets answer SLIP_ERR_UNSUPPORTED),
 * so one set serves pushes from changing sources. Only while no kernel uses the set: the copy to
 * the device table is synchronous and not ordered against running kernels. */
slip_status slip_queueset_set_locals(slip_queueset *qs, uint32_t first, const slip_region *const *regions,
                                     uint32_t n);
/* As slip_queueset_set_locals, but leaves the copy to the caller so it can be ordered on the stream
 * of the push that uses the entries: updates the host copy of entries [first, first + n), writes
 * their device image (n * sizeof(slip_dev_region) bytes) to `image` (at least `image_bytes` long) and
 * the device address of entry `first` to `*dst`. The caller copies `image` to `*dst` before the next
 * push on the same stream, and only while no kernel on another stream uses the set. */
slip_status slip_queueset_stage_locals(slip_queueset *qs, uint32_t first, const slip_region *const *regions,
                                       uint32_t n, void *image, uint64_t image_bytes, uint64_t *dst);
/* SLIP_OK, or the first error completion reported by a kernel or the executor, with its text in
 * slip_last_error(). clear != 0 resets the record, and resets a gpunetio set's queue pairs (as a QP
 * reset and reconnect does): only while no kernel uses the set. */
slip_status slip_queueset_check(slip_queueset *qs, int clear);

/* ---- out-of-band exchange helpers (tests and benchmarks; Spark RPC does this in production) ---- */
slip_status slip_oob_send(int fd, const void *buf, size_t len);
slip_status slip_oob_recv(int fd, void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SLIP_NATIVE_H */
