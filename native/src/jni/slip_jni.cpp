// JNI binding of the native host API (include/slipstream/host.h) for dev.slipstream.gpu.SlipNative.
//
// Conventions (docs/gpu.md, STYLE.md): natives are registered in JNI_OnLoad, the exception classes
// they throw are cached there as global references, handles travel as jlong, results that are
// not a status travel through a caller-provided long[]/byte[]. Library failures come back as a
// slip_status code with the text in slip_last_error() (per thread: the Java wrapper reads it on the
// same thread right after the call). Misuse of the binding itself (a null or short array) throws
// IllegalArgumentException naming what was got and what was expected, and the function returns
// at once.
#include <jni.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "slipstream/gpunetio_nic.h"
#include "slipstream/host.h"
#include "slipstream/softnic.h"
#include "slipstream/kernels.h"
#include "slipstream/serve.h"

namespace {

const char *const kClass = "dev/slipstream/gpu/SlipNative";
jclass g_iae = nullptr;  // java.lang.IllegalArgumentException (global reference)

// Throws IllegalArgumentException with a printf-style message. The caller returns right after.
void throw_iae(JNIEnv *env, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void throw_iae(JNIEnv *env, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  env->ThrowNew(g_iae, msg);
}

// A Java string's modified UTF-8 bytes for the length of a call. A null string throws
// IllegalArgumentException with `null_message`; either way, or on OutOfMemoryError, the object is
// false and an exception is pending: the caller returns right after.
class Utf8 {
 public:
  Utf8(JNIEnv *env, jstring s, const char *null_message) : env_(env), s_(s) {
    if (s == nullptr)
      throw_iae(env, "%s", null_message);
    else
      p_ = env->GetStringUTFChars(s, nullptr);
  }
  Utf8(const Utf8 &) = delete;
  Utf8 &operator=(const Utf8 &) = delete;
  ~Utf8() {
    if (p_) env_->ReleaseStringUTFChars(s_, p_);
  }
  explicit operator bool() const { return p_ != nullptr; }
  const char *c_str() const { return p_; }

 private:
  JNIEnv *env_;
  jstring s_;
  const char *p_ = nullptr;
};

// True if `a` is a non-null array of at least `min` elements; otherwise throws and returns false.
bool check_array(JNIEnv *env, jarray a, jsize min, const char *what) {
  if (a == nullptr) {
    throw_iae(env, "%s: null array, expected at least %d elements", what, (int)min);
    return false;
  }
  jsize n = env->GetArrayLength(a);
  if (n < min) {
    throw_iae(env, "%s: %d elements, expected at least %d", what, (int)n, (int)min);
    return false;
  }
  return true;
}

template <typename T>
T *handle(jlong h) {
  return reinterpret_cast<T *>(static_cast<intptr_t>(h));
}

// The native pointers behind a Java array of handles (one extra slot, so an empty array still has data()).
template <typename T>
std::vector<const T *> handles_of(JNIEnv *env, jlongArray a) {
  const jsize n = env->GetArrayLength(a);
  std::vector<jlong> h((size_t)n + 1);
  env->GetLongArrayRegion(a, 0, n, h.data());
  std::vector<const T *> p((size_t)n + 1);
  for (jsize i = 0; i < n; i++) p[(size_t)i] = handle<T>(h[(size_t)i]);
  return p;
}
template <typename T>
jlong to_handle(T *p) {
  return static_cast<jlong>(reinterpret_cast<intptr_t>(p));
}

// Stores one long into out[0].
void put_long(JNIEnv *env, jlongArray out, jlong v) { env->SetLongArrayRegion(out, 0, 1, &v); }

// ---- errors, probe, layout ----

jstring JNICALL lastError(JNIEnv *env, jclass) { return env->NewStringUTF(slip_last_error()); }

jstring JNICALL statusName(JNIEnv *env, jclass, jint code) {
  return env->NewStringUTF(slip_status_name(static_cast<slip_status>(code)));
}

jint JNICALL probe(JNIEnv *env, jclass, jintArray count) {
  if (!check_array(env, count, 1, "probe count")) return 0;
  int n = 0;
  slip_status st = slip_cuda_probe(&n);
  jint v = n;
  env->SetIntArrayRegion(count, 0, 1, &v);
  return st;
}

// SLIP_OK when this build has the gpunetio backend (host side and kernels), else why not.
jint JNICALL gpunetioProbe(JNIEnv *, jclass) { return slip_gpunetio_probe(); }

// Structs of the kernel launch ABI (kernels.h) that Java encodes itself, beside the ones in
// slip_abi_layout() (slipstream/abi.h).
#define SLIP_F(T, f) {#T, #f, (uint32_t)offsetof(T, f), (uint32_t)sizeof(((T *)nullptr)->f)}
#define SLIP_S(T) {#T, "", 0u, (uint32_t)sizeof(T)}
const slip_layout_field kLaunchLayout[] = {
    SLIP_S(slip_push_queue_cfg),
    SLIP_F(slip_push_queue_cfg, src_region), SLIP_F(slip_push_queue_cfg, dst_region),
    SLIP_F(slip_push_queue_cfg, sig_region), SLIP_F(slip_push_queue_cfg, reserved),
    SLIP_F(slip_push_queue_cfg, sig_offset),
    SLIP_S(slip_push_item),
    SLIP_F(slip_push_item, src_offset), SLIP_F(slip_push_item, dst_offset), SLIP_F(slip_push_item, length),
    SLIP_S(slip_dev_queue),
    SLIP_S(slip_push_launch),
    SLIP_F(slip_push_launch, queues), SLIP_F(slip_push_launch, cfgs), SLIP_F(slip_push_launch, items),
    SLIP_F(slip_push_launch, item_start), SLIP_F(slip_push_launch, status), SLIP_F(slip_push_launch, batch),
    // The resident server's ring (slipstream/serve.h), which Java's ServeRing writes and reads.
    SLIP_S(slip_serve_ring_header),
    SLIP_F(slip_serve_ring_header, magic), SLIP_F(slip_serve_ring_header, version),
    SLIP_F(slip_serve_ring_header, nslots), SLIP_F(slip_serve_ring_header, slot_bytes),
    SLIP_F(slip_serve_ring_header, reader_pid), SLIP_F(slip_serve_ring_header, holder_pid),
    SLIP_S(slip_serve_request),
    SLIP_F(slip_serve_request, seq), SLIP_F(slip_serve_request, request_id), SLIP_F(slip_serve_request, magic),
    SLIP_F(slip_serve_request, nblocks), SLIP_F(slip_serve_request, shuffle_id), SLIP_F(slip_serve_request, flags),
    SLIP_F(slip_serve_request, landing_key), SLIP_F(slip_serve_request, table_offset),
    SLIP_F(slip_serve_request, deadline_ns), SLIP_F(slip_serve_request, signal_offset),
    SLIP_F(slip_serve_request, blocks),
    SLIP_S(slip_serve_block),
    SLIP_F(slip_serve_block, map_id), SLIP_F(slip_serve_block, partition), SLIP_F(slip_serve_block, dst_offset),
    SLIP_F(slip_serve_block, capacity),
    SLIP_S(slip_serve_done),
    SLIP_F(slip_serve_done, seq), SLIP_F(slip_serve_done, status), SLIP_F(slip_serve_done, block),
    SLIP_F(slip_serve_done, bytes), SLIP_F(slip_serve_done, value), SLIP_F(slip_serve_done, taken_ns),
    SLIP_F(slip_serve_done, copy_ns), SLIP_F(slip_serve_done, copied_ns), SLIP_F(slip_serve_done, answered_ns),
};
#undef SLIP_F
#undef SLIP_S

// One line per entry: "type field offset size" (field "-" for the struct's own size).
jstring JNICALL abiLayout(JNIEnv *env, jclass) {
  std::string text;
  char line[160];
  uint32_t n = 0;
  const slip_layout_field *t = slip_abi_layout(&n);
  auto add = [&](const slip_layout_field &f) {
    snprintf(line, sizeof line, "%s %s %u %u\n", f.type, f.field[0] ? f.field : "-", f.offset, f.size);
    text += line;
  };
  for (uint32_t i = 0; i < n; i++) add(t[i]);
  for (const slip_layout_field &f : kLaunchLayout) add(f);
  return env->NewStringUTF(text.c_str());
}

// ---- contexts ----

jint JNICALL ctxCreate(JNIEnv *env, jclass, jint device, jlongArray out) {
  if (!check_array(env, out, 1, "ctxCreate out")) return 0;
  slip_ctx *ctx = nullptr;
  slip_status st = slip_ctx_create(device, &ctx);
  if (st == SLIP_OK) put_long(env, out, to_handle(ctx));
  return st;
}

void JNICALL ctxDestroy(JNIEnv *, jclass, jlong ctx) { slip_ctx_destroy(handle<slip_ctx>(ctx)); }

// ---- local regions ----

jint JNICALL regionCreate(JNIEnv *env, jclass, jlong ctx, jint kind, jlong length, jint id, jlongArray out) {
  if (!check_array(env, out, 1, "regionCreate out")) return 0;
  if (length <= 0) {
    throw_iae(env, "region %u: length %lld, expected > 0", (unsigned)id, (long long)length);
    return 0;
  }
  slip_region *r = nullptr;
  slip_status st = slip_region_create(handle<slip_ctx>(ctx), kind, (uint64_t)length, (uint32_t)id, &r);
  if (st == SLIP_OK) put_long(env, out, to_handle(r));
  return st;
}

void JNICALL regionDestroy(JNIEnv *, jclass, jlong r) { slip_region_destroy(handle<slip_region>(r)); }

// info[0..4] = device pointer, host pointer (0 unless host memory), length, id, key.
void JNICALL regionInfo(JNIEnv *env, jclass, jlong h, jlongArray info) {
  if (!check_array(env, info, 5, "regionInfo out")) return;
  const slip_region *r = handle<slip_region>(h);
  jlong v[5] = {to_handle(slip_region_ptr(r)), to_handle(slip_region_host_ptr(r)), (jlong)slip_region_length(r),
                (jlong)slip_region_id(r), (jlong)slip_region_key(r)};
  env->SetLongArrayRegion(info, 0, 5, v);
}

jint JNICALL regionExport(JNIEnv *env, jclass, jlong r, jbyteArray out) {
  if (!check_array(env, out, (jsize)sizeof(slip_region_desc), "region descriptor buffer")) return 0;
  slip_region_desc d;
  slip_status st = slip_region_export(handle<slip_region>(r), &d);
  if (st == SLIP_OK) env->SetByteArrayRegion(out, 0, (jsize)sizeof d, reinterpret_cast<const jbyte *>(&d));
  return st;
}

// Runs the native descriptor checks on `len` bytes of `buf` (the import path's parser, without
// mapping anything); on success writes the parsed descriptor back into out (192 bytes).
jint JNICALL regionDescParse(JNIEnv *env, jclass, jbyteArray buf, jint len, jbyteArray out) {
  if (!check_array(env, buf, len < 0 ? 0 : len, "descriptor bytes")) return 0;
  if (len < 0) {
    throw_iae(env, "descriptor length %d, expected >= 0", (int)len);
    return 0;
  }
  if (!check_array(env, out, (jsize)sizeof(slip_region_desc), "parsed descriptor buffer")) return 0;
  std::vector<jbyte> bytes((size_t)len + 1);  // +1: a zero-length array still has a valid pointer
  env->GetByteArrayRegion(buf, 0, len, bytes.data());
  slip_region_desc d;
  slip_status st = slip_region_desc_parse(bytes.data(), (size_t)len, &d);
  if (st == SLIP_OK) env->SetByteArrayRegion(out, 0, (jsize)sizeof d, reinterpret_cast<const jbyte *>(&d));
  return st;
}

// ---- remote regions ----

jint JNICALL remoteImport(JNIEnv *env, jclass, jlong ctx, jbyteArray desc, jlongArray out) {
  if (!check_array(env, desc, 0, "descriptor bytes")) return 0;
  if (!check_array(env, out, 1, "remoteImport out")) return 0;
  jsize n = env->GetArrayLength(desc);
  std::vector<jbyte> bytes((size_t)n + 1);
  env->GetByteArrayRegion(desc, 0, n, bytes.data());
  slip_remote *r = nullptr;
  slip_status st = slip_remote_import(handle<slip_ctx>(ctx), bytes.data(), (size_t)n, &r);
  if (st == SLIP_OK) put_long(env, out, to_handle(r));
  return st;
}

jint JNICALL remoteAlias(JNIEnv *env, jclass, jlong local, jlongArray out) {
  if (!check_array(env, out, 1, "remoteAlias out")) return 0;
  slip_remote *r = nullptr;
  slip_status st = slip_remote_alias(handle<slip_region>(local), &r);
  if (st == SLIP_OK) put_long(env, out, to_handle(r));
  return st;
}

void JNICALL remoteDestroy(JNIEnv *, jclass, jlong r) { slip_remote_destroy(handle<slip_remote>(r)); }

// info[0..3] = device pointer, host pointer (0 unless host memory), length, id.
void JNICALL remoteInfo(JNIEnv *env, jclass, jlong h, jlongArray info) {
  if (!check_array(env, info, 4, "remoteInfo out")) return;
  const slip_remote *r = handle<slip_remote>(h);
  jlong v[4] = {to_handle(slip_remote_ptr(r)), to_handle(slip_remote_host_ptr(r)), (jlong)slip_remote_length(r),
                (jlong)slip_remote_id(r)};
  env->SetLongArrayRegion(info, 0, 4, v);
}

jint JNICALL remoteCheck(JNIEnv *, jclass, jlong r, jint id, jlong key, jlong offset, jlong length) {
  return slip_remote_check(handle<slip_remote>(r), (uint32_t)id, (uint64_t)key, (uint64_t)offset, (uint64_t)length);
}

// ---- queue sets ----

jint JNICALL queueSetCreate(JNIEnv *env, jclass, jlong ctx, jint backend, jint nqueues, jint depth,
                            jlongArray locals, jlongArray remotes, jlongArray out) {
  if (!check_array(env, locals, 0, "local region handles")) return 0;
  if (!check_array(env, remotes, 0, "remote region handles")) return 0;
  if (!check_array(env, out, 1, "queueSetCreate out")) return 0;
  if (nqueues <= 0 || depth < 0) {
    throw_iae(env, "queue set: %d queues of depth %d, expected > 0 queues and depth >= 0", (int)nqueues, (int)depth);
    return 0;
  }
  const jsize nl = env->GetArrayLength(locals), nr = env->GetArrayLength(remotes);
  std::vector<const slip_region *> pl = handles_of<slip_region>(env, locals);
  std::vector<const slip_remote *> pr = handles_of<slip_remote>(env, remotes);
  slip_queueset *qs = nullptr;
  slip_status st = slip_queueset_create(handle<slip_ctx>(ctx), backend, (uint32_t)nqueues, (uint32_t)depth,
                                        pl.data(), (uint32_t)nl, pr.data(), (uint32_t)nr, &qs);
  if (st == SLIP_OK) put_long(env, out, to_handle(qs));
  return st;
}

void JNICALL queueSetDestroy(JNIEnv *, jclass, jlong qs) { slip_queueset_destroy(handle<slip_queueset>(qs)); }

jlong JNICALL queueSetDevice(JNIEnv *, jclass, jlong qs) {
  return to_handle(slip_queueset_device(handle<slip_queueset>(qs)));
}

jint JNICALL queueSetCheck(JNIEnv *, jclass, jlong qs, jboolean clear) {
  return slip_queueset_check(handle<slip_queueset>(qs), clear ? 1 : 0);
}

jint JNICALL queueSetSetLocals(JNIEnv *env, jclass, jlong qs, jint first, jlongArray regions) {
  if (!check_array(env, regions, 0, "queueSetSetLocals regions")) return SLIP_ERR_INVALID_ARG;
  if (first < 0) {
    throw_iae(env, "queue set local entry %d, expected >= 0", (int)first);
    return SLIP_ERR_INVALID_ARG;
  }
  const jsize n = env->GetArrayLength(regions);
  std::vector<const slip_region *> p = handles_of<slip_region>(env, regions);
  return slip_queueset_set_locals(handle<slip_queueset>(qs), (uint32_t)first, p.data(), (uint32_t)n);
}

jint JNICALL queueSetStageLocals(JNIEnv *env, jclass, jlong qs, jint first, jlongArray regions, jbyteArray image,
                                jlongArray dst) {
  if (!check_array(env, regions, 0, "queueSetStageLocals regions")) return SLIP_ERR_INVALID_ARG;
  const jsize n = env->GetArrayLength(regions);
  if (!check_array(env, image, (jsize)(n * (jsize)sizeof(slip_dev_region)), "queueSetStageLocals image") ||
      !check_array(env, dst, 1, "queueSetStageLocals dst"))
    return SLIP_ERR_INVALID_ARG;
  if (first < 0) {
    throw_iae(env, "queue set local entry %d, expected >= 0", (int)first);
    return SLIP_ERR_INVALID_ARG;
  }
  std::vector<const slip_region *> p = handles_of<slip_region>(env, regions);
  std::vector<slip_dev_region> img((size_t)n + 1);
  uint64_t at = 0;
  slip_status st = slip_queueset_stage_locals(handle<slip_queueset>(qs), (uint32_t)first, p.data(), (uint32_t)n,
                                              img.data(), img.size() * sizeof(slip_dev_region), &at);
  if (st == SLIP_OK) {
    env->SetByteArrayRegion(image, 0, (jsize)(n * (jsize)sizeof(slip_dev_region)),
                            reinterpret_cast<const jbyte *>(img.data()));
    put_long(env, dst, (jlong)at);
  }
  return st;
}

// ---- partition (src/partition.cu) ----

// out[0] = slip_partition_out_bound, out[1] = slip_partition_scratch_bytes for rows of an int64 key
// and payload columns of the given widths into nparts blocks.
jint JNICALL partitionBounds(JNIEnv *env, jclass, jintArray widths, jlong rows, jint nparts, jlongArray out) {
  if (!check_array(env, widths, 0, "column widths")) return 0;
  if (!check_array(env, out, 2, "partitionBounds out")) return 0;
  const jsize nc = env->GetArrayLength(widths);
  if (nc > SLIP_PARTITION_MAX_COLS || rows < 0 || nparts <= 0 || nparts > SLIP_PARTITION_MAX_PARTS) {
    throw_iae(env, "partition of %lld rows, %d payload columns into %d partitions; expected rows >= 0, at most %d "
              "columns and 1..%d partitions", (long long)rows, (int)nc, (int)nparts, SLIP_PARTITION_MAX_COLS,
              SLIP_PARTITION_MAX_PARTS);
    return 0;
  }
  slip_batch b;
  memset(&b, 0, sizeof b);
  b.rows = (uint64_t)rows;
  b.ncols = (uint32_t)nc;
  jint w[SLIP_PARTITION_MAX_COLS] = {0};
  env->GetIntArrayRegion(widths, 0, nc, w);
  for (jsize c = 0; c < nc; c++) b.widths[c] = (uint32_t)w[c];
  jlong v[2] = {(jlong)slip_partition_out_bound(&b, (uint32_t)nparts),
                (jlong)slip_partition_scratch_bytes((uint64_t)rows, (uint32_t)nparts)};
  env->SetLongArrayRegion(out, 0, 2, v);
  return SLIP_OK;
}

// Runs slip_partition on device `device` (the caller's primary context) on a fresh non-blocking
// stream and polls it until done or timeoutMs passes (SLIP_ERR_TIMEOUT; the stream is then left to
// finish, its buffers must not be freed). Device pointers travel as jlong.
jint JNICALL partitionRun(JNIEnv *env, jclass, jint device, jlong keys, jlong rows, jintArray widths,
                          jlongArray cols, jint nparts, jlong out, jlong outCap, jlong offsets, jlong counts,
                          jlong scratch, jlong scratchBytes, jlong timeoutMs) {
  if (!check_array(env, widths, 0, "column widths")) return 0;
  const jsize nc = env->GetArrayLength(widths);
  if (!check_array(env, cols, nc, "column pointers")) return 0;
  if (nc > SLIP_PARTITION_MAX_COLS || rows < 0 || nparts <= 0 || outCap < 0 || scratchBytes < 0 || timeoutMs <= 0) {
    throw_iae(env, "partition of %lld rows, %d payload columns into %d partitions (timeout %lld ms); expected rows "
              ">= 0, at most %d columns, partitions > 0 and a timeout > 0", (long long)rows, (int)nc, (int)nparts,
              (long long)timeoutMs, SLIP_PARTITION_MAX_COLS);
    return 0;
  }
  slip_batch b;
  memset(&b, 0, sizeof b);
  b.keys = handle<const int64_t>(keys);
  b.rows = (uint64_t)rows;
  b.ncols = (uint32_t)nc;
  jint w[SLIP_PARTITION_MAX_COLS] = {0};
  jlong p[SLIP_PARTITION_MAX_COLS] = {0};
  env->GetIntArrayRegion(widths, 0, nc, w);
  env->GetLongArrayRegion(cols, 0, nc, p);
  for (jsize c = 0; c < nc; c++) {
    b.widths[c] = (uint32_t)w[c];
    b.cols[c] = handle<const void>(p[c]);
  }
  cudaStream_t stream = nullptr;
  cudaError_t ce = cudaSetDevice(device);
  if (ce != cudaSuccess) return slip_set_error(SLIP_ERR_CUDA, "cudaSetDevice(%d): %s", (int)device, cudaGetErrorString(ce));
  ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (ce != cudaSuccess) return slip_set_error(SLIP_ERR_CUDA, "cudaStreamCreateWithFlags: %s", cudaGetErrorString(ce));
  slip_status st = slip_partition(&b, (uint32_t)nparts, handle<void>(out), (uint64_t)outCap, handle<uint64_t>(offsets),
                                  handle<uint64_t>(counts), handle<void>(scratch), (uint64_t)scratchBytes, stream);
  if (st == SLIP_OK) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
      ce = cudaStreamQuery(stream);
      if (ce == cudaSuccess) break;
      if (ce != cudaErrorNotReady) {
        st = slip_set_error(SLIP_ERR_CUDA, "slip_partition (cudaStreamQuery): %s", cudaGetErrorString(ce));
        break;
      }
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000LL > timeoutMs) {
        st = slip_set_error(SLIP_ERR_TIMEOUT, "slip_partition still running after %lld ms", (long long)timeoutMs);
        break;
      }
      sched_yield();
    }
  }
  cudaStreamDestroy(stream);  // work still queued completes before the stream's resources go
  return st;
}

// ---- gpunetio on a NIC (slipstream/gpunetio_nic.h) ----

jstring JNICALL nicImpl(JNIEnv *env, jclass) { return env->NewStringUTF(slip_nic_impl()); }
jint JNICALL nicProbe(JNIEnv *, jclass) { return slip_nic_probe(); }

jint JNICALL nicQpInfoParse(JNIEnv *env, jclass, jbyteArray rec) {
  if (!check_array(env, rec, 0, "queue-pair record")) return 0;
  std::vector<jbyte> b((size_t)env->GetArrayLength(rec));
  env->GetByteArrayRegion(rec, 0, (jsize)b.size(), b.data());
  slip_nic_qp_info out;
  return slip_nic_qp_info_parse(b.data(), b.size(), &out);
}

jint JNICALL nicOpen(JNIEnv *env, jclass, jstring ibdev, jint port, jint gid, jint device, jint doorbell, jlongArray out) {
  if (!check_array(env, out, 1, "NIC handle out")) return 0;
  const Utf8 name(env, ibdev, "RDMA device name: null, expected a name (empty: the first mlx5 device)");
  if (!name) return 0;
  slip_nic *n = nullptr;
  const slip_status st = slip_nic_open(name.c_str(), port, gid, device, doorbell, &n);
  jlong h = (jlong)(uintptr_t)n;
  if (st == SLIP_OK) env->SetLongArrayRegion(out, 0, 1, &h);
  return st;
}

void JNICALL nicClose(JNIEnv *, jclass, jlong n) { slip_nic_close(handle<slip_nic>(n)); }

jint JNICALL nicReg(JNIEnv *env, jclass, jlong n, jlong ptr, jlong len, jint id, jintArray mkey) {
  if (!check_array(env, mkey, 1, "memory key out")) return 0;
  uint32_t k = 0;
  const slip_status st = slip_nic_reg(handle<slip_nic>(n), (void *)(uintptr_t)ptr, (uint64_t)len, (uint32_t)id, &k);
  jint v = (jint)k;
  if (st == SLIP_OK) env->SetIntArrayRegion(mkey, 0, 1, &v);
  return st;
}

jint JNICALL nicLinkCreate(JNIEnv *env, jclass, jlong n, jint nq, jint depth, jlongArray out) {
  if (!check_array(env, out, 1, "link handle out")) return 0;
  if (nq <= 0 || depth <= 0) {
    throw_iae(env, "link of %d queue pairs of depth %d, expected both > 0", (int)nq, (int)depth);
    return 0;
  }
  slip_nic_link *l = nullptr;
  const slip_status st = slip_nic_link_create(handle<slip_nic>(n), (uint32_t)nq, (uint32_t)depth, &l);
  jlong h = (jlong)(uintptr_t)l;
  if (st == SLIP_OK) env->SetLongArrayRegion(out, 0, 1, &h);
  return st;
}

void JNICALL nicLinkDestroy(JNIEnv *, jclass, jlong l) { slip_nic_link_destroy(handle<slip_nic_link>(l)); }

jint JNICALL nicQpInfo(JNIEnv *env, jclass, jlong l, jint q, jbyteArray out) {
  if (!check_array(env, out, (jsize)sizeof(slip_nic_qp_info), "queue-pair record out")) return 0;
  slip_nic_qp_info v;
  const slip_status st = slip_nic_qp_info_get(handle<slip_nic_link>(l), (uint32_t)q, &v);
  if (st == SLIP_OK) env->SetByteArrayRegion(out, 0, (jsize)sizeof v, reinterpret_cast<const jbyte *>(&v));
  return st;
}

jint JNICALL nicConnect(JNIEnv *env, jclass, jlong l, jint q, jbyteArray rec) {
  if (!check_array(env, rec, (jsize)sizeof(slip_nic_qp_info), "peer queue-pair record")) return 0;
  slip_nic_qp_info v;
  env->GetByteArrayRegion(rec, 0, (jsize)sizeof v, reinterpret_cast<jbyte *>(&v));
  return slip_nic_connect(handle<slip_nic_link>(l), (uint32_t)q, &v);
}

jint JNICALL nicLinkDoorbell(JNIEnv *, jclass, jlong l) { return slip_nic_link_doorbell(handle<slip_nic_link>(l)); }

jint JNICALL nicDereg(JNIEnv *, jclass, jlong n, jint id, jint mkey) {
  return slip_nic_dereg(handle<slip_nic>(n), (uint32_t)id, (uint32_t)mkey);
}

jstring JNICALL nicKind(JNIEnv *env, jclass, jlong n) { return env->NewStringUTF(slip_nic_kind(handle<slip_nic>(n))); }

// A queue set over queue pairs [first, first + nqueues) of a link; the peer's regions as
// (id, mkey, length) triples.
jint JNICALL queueSetCreateLink(JNIEnv *env, jclass, jlong ctx, jlong link, jint first, jint nqueues,
                                jlongArray locals, jlongArray peers, jlongArray out) {
  if (!check_array(env, locals, 0, "local region handles")) return 0;
  if (!check_array(env, peers, 0, "peer regions")) return 0;
  if (!check_array(env, out, 1, "queueSetCreateLink out")) return 0;
  const jsize np = env->GetArrayLength(peers);
  if (first < 0 || nqueues <= 0 || np % 3 != 0) {
    throw_iae(env, "link queue set: queue pairs %d + %d, %d peer words; expected first >= 0, > 0 queue pairs and "
              "(id, mkey, length) triples", (int)first, (int)nqueues, (int)np);
    return 0;
  }
  const jsize nl = env->GetArrayLength(locals);
  std::vector<const slip_region *> pl = handles_of<slip_region>(env, locals);
  std::vector<jlong> words((size_t)np);
  env->GetLongArrayRegion(peers, 0, np, words.data());
  std::vector<slip_nic_remote> pr((size_t)np / 3);
  for (size_t i = 0; i < pr.size(); i++)
    pr[i] = {(uint32_t)words[3 * i], (uint32_t)words[3 * i + 1], (uint64_t)words[3 * i + 2]};
  slip_queueset *qs = nullptr;
  const slip_status st = slip_queueset_create_link(handle<slip_ctx>(ctx), handle<slip_nic_link>(link), (uint32_t)first,
                                                   (uint32_t)nqueues, pl.data(), (uint32_t)nl, pr.data(),
                                                   (uint32_t)pr.size(), &qs);
  if (st == SLIP_OK) put_long(env, out, to_handle(qs));
  return st;
}

// ---- resident server (slipstream/serve.h) ----

jint JNICALL serverCreate(JNIEnv *env, jclass, jlong ctx, jint readers, jint dirSlots, jint ctas, jint threads,
                          jlong idleNs, jlongArray out) {
  if (!check_array(env, out, 1, "serverCreate out")) return 0;
  if (readers < 0 || dirSlots < 0 || ctas < 0 || threads < 0 || idleNs < 0) {
    throw_iae(env, "serverCreate: %d readers, %d directory slots, %d CTAs, %d threads, idle %lld ns: expected none negative",
              (int)readers, (int)dirSlots, (int)ctas, (int)threads, (long long)idleNs);
    return 0;
  }
  slip_server *s = nullptr;
  const slip_status st = slip_server_create(handle<slip_ctx>(ctx), (uint32_t)readers, (uint32_t)dirSlots,
                                            (uint32_t)ctas, (uint32_t)threads, (uint64_t)idleNs, &s);
  if (st == SLIP_OK) put_long(env, out, to_handle(s));
  return st;
}

jint JNICALL serverSetReader(JNIEnv *, jclass, jlong s, jint index, jlong ring, jlong landing, jlong landingLen,
                             jlong landingKey) {
  slip_serve_ring_map *m = handle<slip_serve_ring_map>(ring);
  return slip_server_set_reader(handle<slip_server>(s), (uint32_t)index, slip_serve_ring_device(m),
                                slip_serve_ring_host(m), (uint64_t)landing, (uint64_t)landingLen,
                                (uint64_t)landingKey);
}

jint JNICALL serverSetReaderNic(JNIEnv *, jclass, jlong s, jint index, jlong ring, jlong queue, jint landingIndex,
                                jint stagingIndex, jlong landingLen, jlong landingKey) {
  slip_serve_ring_map *m = handle<slip_serve_ring_map>(ring);
  return slip_server_set_reader_nic(handle<slip_server>(s), (uint32_t)index, slip_serve_ring_device(m),
                                    slip_serve_ring_host(m), (uint64_t)queue, (uint32_t)landingIndex,
                                    (uint32_t)stagingIndex, (uint64_t)landingLen, (uint64_t)landingKey);
}

jint JNICALL serverClearReader(JNIEnv *, jclass, jlong s, jint index) {
  return slip_server_clear_reader(handle<slip_server>(s), (uint32_t)index);
}

jint JNICALL serverPutOutput(JNIEnv *, jclass, jlong s, jint shuffle, jlong map, jlong base, jlong offsets,
                             jlong counts, jint nparts, jint nicId, jint nicKey, jlong nicOffset, jint linkKey) {
  return slip_server_put_output(handle<slip_server>(s), (uint32_t)shuffle, (uint64_t)map, (uint64_t)base,
                                (uint64_t)offsets, (uint64_t)counts, (uint32_t)nparts, (uint32_t)nicId,
                                (uint32_t)nicKey, (uint64_t)nicOffset, (uint32_t)linkKey);
}

jint JNICALL serverRevokeOutput(JNIEnv *, jclass, jlong s, jint shuffle, jlong map, jlong timeoutNs) {
  return slip_server_revoke_output(handle<slip_server>(s), (uint32_t)shuffle, (uint64_t)map, (uint64_t)timeoutNs);
}

// Returns the status; launched[0] is 1 when the kernel was launched.
jint JNICALL serverStart(JNIEnv *env, jclass, jlong s, jboolean onlyIfWork, jintArray launched) {
  if (!check_array(env, launched, 1, "serverStart launched")) return 0;
  int l = 0;
  const slip_status st = onlyIfWork ? slip_server_wake(handle<slip_server>(s), &l)
                                    : slip_server_start(handle<slip_server>(s), &l);
  jint v = l;
  env->SetIntArrayRegion(launched, 0, 1, &v);
  return st;
}

jboolean JNICALL serverResident(JNIEnv *, jclass, jlong s) {
  return slip_server_resident(handle<slip_server>(s)) ? JNI_TRUE : JNI_FALSE;
}

jint JNICALL serverStop(JNIEnv *, jclass, jlong s) { return slip_server_stop(handle<slip_server>(s)); }

// out: served, failed, bytes, CTAs resident.
jint JNICALL serverStats(JNIEnv *env, jclass, jlong s, jlongArray out) {
  if (!check_array(env, out, 4, "serverStats out")) return 0;
  slip_serve_stats stats{};
  const slip_status st = slip_server_stats(handle<slip_server>(s), &stats);
  if (st == SLIP_OK) {
    const jlong v[4] = {(jlong)stats.served, (jlong)stats.failed, (jlong)stats.bytes, (jlong)stats.live};
    env->SetLongArrayRegion(out, 0, 4, v);
  }
  return st;
}

void JNICALL serverDestroy(JNIEnv *, jclass, jlong s) { slip_server_destroy(handle<slip_server>(s)); }

jint JNICALL ringAttach(JNIEnv *env, jclass, jlong ctx, jstring path, jlongArray out) {
  if (!check_array(env, out, 1, "ringAttach out")) return 0;
  const Utf8 p(env, path, "ringAttach: null path, expected a ring file's path");
  if (!p) return 0;
  slip_serve_ring_map *m = nullptr;
  const slip_status st = slip_serve_ring_attach(handle<slip_ctx>(ctx), p.c_str(), &m);
  if (st == SLIP_OK) put_long(env, out, to_handle(m));
  return st;
}

void JNICALL ringDetach(JNIEnv *, jclass, jlong m) { slip_serve_ring_detach(handle<slip_serve_ring_map>(m)); }

void JNICALL ringAck(JNIEnv *, jclass, jlong m) { slip_serve_ring_ack(handle<slip_serve_ring_map>(m)); }

jlong JNICALL ringHost(JNIEnv *, jclass, jlong m) {
  return (jlong)(uintptr_t)slip_serve_ring_host(handle<slip_serve_ring_map>(m));
}

jint JNICALL serverSetReaderRemote(JNIEnv *, jclass, jlong s, jint index, jlong ring, jlong queue, jint landingIndex,
                                   jint stagingIndex, jlong landingLen, jlong landingKey, jint ringId, jint ringKey,
                                   jint mirrorId, jint mirrorKey) {
  slip_serve_ring_map *m = handle<slip_serve_ring_map>(ring);
  return slip_server_set_reader_remote(handle<slip_server>(s), (uint32_t)index, slip_serve_ring_device(m),
                                       slip_serve_ring_host(m), (uint64_t)queue, (uint32_t)landingIndex,
                                       (uint32_t)stagingIndex, (uint64_t)landingLen, (uint64_t)landingKey,
                                       (uint32_t)ringId, (uint32_t)ringKey, (uint32_t)mirrorId, (uint32_t)mirrorKey);
}

jint JNICALL nicRegFile(JNIEnv *env, jclass, jlong n, jlong ptr, jlong len, jint id, jstring path, jintArray mkey) {
  if (!check_array(env, mkey, 1, "memory key out")) return 0;
  const Utf8 p(env, path, "nicRegFile: null path, expected the file the region maps");
  if (!p) return 0;
  uint32_t k = 0;
  const slip_status st =
      slip_nic_reg_file(handle<slip_nic>(n), (void *)(uintptr_t)ptr, (uint64_t)len, (uint32_t)id, p.c_str(), &k);
  jint v = (jint)k;
  if (st == SLIP_OK) env->SetIntArrayRegion(mkey, 0, 1, &v);
  return st;
}

/* ops: n records of 9 longs (op, local id, local key, remote id, remote key, local offset, remote
 * offset, length, add), as slip_nic_op. */
jint JNICALL nicHostPost(JNIEnv *env, jclass, jlong l, jint q, jlongArray ops, jint n, jlong timeoutNs) {
  constexpr int kFields = 9;
  if (n <= 0 || n > 64) {
    throw_iae(env, "nicHostPost: %d operations, expected 1..64", (int)n);
    return 0;
  }
  if (!check_array(env, ops, n * kFields, "nicHostPost operations")) return 0;
  jlong v[64 * kFields];
  env->GetLongArrayRegion(ops, 0, n * kFields, v);
  slip_nic_op o[64];
  for (int i = 0; i < n; i++) {
    const jlong *f = v + i * kFields;
    o[i] = slip_nic_op{(uint32_t)f[0], (uint32_t)f[1], (uint32_t)f[2], (uint32_t)f[3], (uint32_t)f[4], 0,
                       (uint64_t)f[5], (uint64_t)f[6], (uint64_t)f[7], (uint64_t)f[8]};
  }
  return slip_nic_host_post(handle<slip_nic_link>(l), (uint32_t)q, o, (uint32_t)n, (uint64_t)timeoutNs);
}

jint JNICALL nicHostDrain(JNIEnv *, jclass, jlong l, jint q, jlong timeoutNs) {
  return slip_nic_host_drain(handle<slip_nic_link>(l), (uint32_t)q, (uint64_t)timeoutNs);
}

#define M(name, sig) {const_cast<char *>(#name), const_cast<char *>(sig), reinterpret_cast<void *>(name)}
const JNINativeMethod kMethods[] = {
    M(lastError, "()Ljava/lang/String;"),
    M(statusName, "(I)Ljava/lang/String;"),
    M(probe, "([I)I"),
    M(gpunetioProbe, "()I"),
    M(nicImpl, "()Ljava/lang/String;"),
    M(nicProbe, "()I"),
    M(nicQpInfoParse, "([B)I"),
    M(nicOpen, "(Ljava/lang/String;IIII[J)I"),
    M(nicClose, "(J)V"),
    M(nicReg, "(JJJI[I)I"),
    M(nicLinkCreate, "(JII[J)I"),
    M(nicLinkDestroy, "(J)V"),
    M(nicQpInfo, "(JI[B)I"),
    M(nicConnect, "(JI[B)I"),
    M(nicLinkDoorbell, "(J)I"),
    M(nicDereg, "(JII)I"),
    M(nicKind, "(J)Ljava/lang/String;"),
    M(queueSetCreateLink, "(JJII[J[J[J)I"),
    M(abiLayout, "()Ljava/lang/String;"),
    M(ctxCreate, "(I[J)I"),
    M(ctxDestroy, "(J)V"),
    M(regionCreate, "(JIJI[J)I"),
    M(regionDestroy, "(J)V"),
    M(regionInfo, "(J[J)V"),
    M(regionExport, "(J[B)I"),
    M(regionDescParse, "([BI[B)I"),
    M(remoteImport, "(J[B[J)I"),
    M(remoteAlias, "(J[J)I"),
    M(remoteDestroy, "(J)V"),
    M(remoteInfo, "(J[J)V"),
    M(remoteCheck, "(JIJJJ)I"),
    M(queueSetCreate, "(JIII[J[J[J)I"),
    M(queueSetDestroy, "(J)V"),
    M(queueSetDevice, "(J)J"),
    M(queueSetCheck, "(JZ)I"),
    M(queueSetSetLocals, "(JI[J)I"),
    M(queueSetStageLocals, "(JI[J[B[J)I"),
    M(partitionBounds, "([IJI[J)I"),
    M(partitionRun, "(IJJ[I[JIJJJJJJJ)I"),
    M(serverCreate, "(JIIIIJ[J)I"),
    M(serverSetReader, "(JIJJJJ)I"),
    M(serverSetReaderNic, "(JIJJIIJJ)I"),
    M(serverClearReader, "(JI)I"),
    M(serverPutOutput, "(JIJJJJIIIJI)I"),
    M(serverRevokeOutput, "(JIJJ)I"),
    M(serverStart, "(JZ[I)I"),
    M(serverResident, "(J)Z"),
    M(serverStop, "(J)I"),
    M(serverStats, "(J[J)I"),
    M(serverDestroy, "(J)V"),
    M(ringAttach, "(JLjava/lang/String;[J)I"),
    M(ringDetach, "(J)V"),
    M(ringAck, "(J)V"),
    M(ringHost, "(J)J"),
    M(serverSetReaderRemote, "(JIJJIIJJIIII)I"),
    M(nicRegFile, "(JJJILjava/lang/String;[I)I"),
    M(nicHostPost, "(JI[JIJ)I"),
    M(nicHostDrain, "(JIJ)I"),
};
#undef M

}  // namespace

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *) {
  JNIEnv *env = nullptr;
  jint rc = JNI_ERR;
  jclass iae = nullptr, cls = nullptr;
  if (vm->GetEnv(reinterpret_cast<void **>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  iae = env->FindClass("java/lang/IllegalArgumentException");
  if (iae == nullptr) goto done;
  g_iae = static_cast<jclass>(env->NewGlobalRef(iae));
  if (g_iae == nullptr) goto done;
  cls = env->FindClass(kClass);
  if (cls == nullptr) goto done;  // NoClassDefFoundError is pending: the loader reports it
  if (env->RegisterNatives(cls, kMethods, (jint)(sizeof kMethods / sizeof kMethods[0])) != JNI_OK) goto done;
  rc = JNI_VERSION_1_8;
done:
  if (iae) env->DeleteLocalRef(iae);
  if (cls) env->DeleteLocalRef(cls);
  if (rc == JNI_ERR && g_iae) {
    env->DeleteGlobalRef(g_iae);
    g_iae = nullptr;
  }
  return rc;
}

extern "C" JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *) {
  JNIEnv *env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void **>(&env), JNI_VERSION_1_8) != JNI_OK) return;
  if (g_iae) env->DeleteGlobalRef(g_iae);
  g_iae = nullptr;
}
