// The resident serving kernel and its host side (slipstream/serve.h). A few CTAs stay on the
// GPU; each takes the next published request of a ring, checks it against the reader entry and
// the directory, pushes its blocks into the reader's landing region with 16-byte stores, writes
// the block table, and answers in the ring after a system-scope fence. A CTA that finds nothing
// for idle_ns leaves, so an idle executor holds no SM; the host launches the kernel again when a
// ring has work (slip_server_start).
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "check.h"
#include "cuda_objects.h"
#include "slipstream/device/copy.cuh"
#include "slipstream/device/sync.cuh"
#include "slipstream/device/write_api.cuh"
#include "slipstream/serve.h"

namespace {

using slip::sync::fence_sys;
using slip::sync::globaltimer_ns;
using slip::sync::ld_acquire_sys;
using slip::sync::st_release_sys;

static_assert(sizeof(slip_serve_ring_header) == SLIP_SERVE_RING_HEADER, "ring header");
static_assert(sizeof(slip_serve_request) == SLIP_SERVE_SLOT_BYTES, "request slot");
static_assert(sizeof(slip_serve_done) == 64, "answer");
static_assert(sizeof(slip_serve_output) == 128, "directory entry");
static_assert(sizeof(slip_serve_reader) == 128, "reader entry");

__device__ __forceinline__ slip_serve_request *slot_of(const slip_serve_reader &r, uint64_t t) {
  return (slip_serve_request *)(uintptr_t)(r.ring + SLIP_SERVE_RING_HEADER +
                                           (t & (r.nslots - 1)) * (uint64_t)SLIP_SERVE_SLOT_BYTES);
}
__device__ __forceinline__ slip_serve_done *done_of(const slip_serve_reader &r, uint64_t t) {
  return (slip_serve_done *)(uintptr_t)(r.ring + SLIP_SERVE_RING_HEADER + (uint64_t)r.nslots * SLIP_SERVE_SLOT_BYTES +
                                        (t & (r.nslots - 1)) * sizeof(slip_serve_done));
}

__device__ __forceinline__ uint32_t ld_u32(const uint32_t *p) { return ld_acquire_sys(p); }
__device__ __forceinline__ uint64_t ld_u64(const uint64_t *p) { return ld_acquire_sys(p); }

/* The leader tries to take the next published ticket of reader r; true with *ticket set. */
__device__ bool try_take(slip_serve_reader *r, uint64_t *ticket) {
  if (ld_u32(&r->state) != SLIP_SERVE_READER_LIVE) return false;
  const uint64_t t = ld_u64(&r->taken);
  if (ld_acquire_sys(&slot_of(*r, t)->seq) != t + 1) return false;
  if (atomicCAS((unsigned long long *)&r->taken, t, t + 1) != t) return false;  // another CTA took it
  *ticket = t;
  return true;
}

/* Directory entry of (shuffle, map), pinned; null when it is not there or not live. */
__device__ slip_serve_output *pin_output(const slip_serve_launch &a, uint32_t shuffle, uint64_t map) {
  const uint32_t mask = a.dir_slots - 1;
  uint32_t i = slip_serve_hash(shuffle, map, a.dir_slots);
  for (uint32_t probe = 0; probe < a.dir_slots; probe++, i = (i + 1) & mask) {
    slip_serve_output *e = &a.dir[i];
    const uint32_t state = ld_u32(&e->state);
    if (state == SLIP_SERVE_FREE) return nullptr;  // the probe sequence ends at a never-used slot
    // Tombstones (REVOKED) and other keys: the key may sit further on.
    if (state != SLIP_SERVE_LIVE || ld_u64(&e->map_id) != map || ld_u32(&e->shuffle_id) != shuffle) continue;
    atomicAdd(&e->pins, 1u);
    __threadfence();
    // Revoked between the reads, or revoked and the slot entered again for another output: let go.
    if (ld_u32(&e->state) != SLIP_SERVE_LIVE || ld_u64(&e->map_id) != map || ld_u32(&e->shuffle_id) != shuffle) {
      atomicSub(&e->pins, 1u);
      return nullptr;
    }
    return e;
  }
  return nullptr;
}

struct Verdict {
  int status;
  uint32_t block;
  uint64_t value;
};

/* One block's checks (one thread per block). src/len are set when it passes. */
__device__ Verdict check_block(const slip_serve_launch &a, const slip_serve_reader &r, const slip_serve_request &q,
                               uint32_t i, slip_serve_output **out, const char **src, uint64_t *len, uint64_t *rows) {
  const slip_serve_block &b = q.blocks[i];
  const uint64_t table_end = q.table_offset + SLIP_SERVE_TABLE_HEADER + (uint64_t)q.nblocks * SLIP_SERVE_TABLE_RECORD;
  if ((b.dst_offset & 15u) != 0) return {SLIP_ERR_INVALID_ARG, i, b.dst_offset};
  if (b.dst_offset > r.landing_len || b.capacity > r.landing_len - b.dst_offset) return {SLIP_ERR_OUT_OF_RANGE, i, b.dst_offset};
  if (b.dst_offset < table_end && q.table_offset < b.dst_offset + b.capacity && b.capacity > 0)
    return {SLIP_ERR_INVALID_ARG, i, b.dst_offset};  // overlaps the table
  if ((q.flags & SLIP_SERVE_SIGNAL) && b.capacity > 0 && b.dst_offset < q.signal_offset + 8 &&
      q.signal_offset < b.dst_offset + b.capacity)
    return {SLIP_ERR_INVALID_ARG, i, b.dst_offset};  // overlaps the signal
  for (uint32_t j = 0; j < q.nblocks; j++) {
    const slip_serve_block &o = q.blocks[j];
    if (j != i && b.capacity > 0 && o.capacity > 0 && b.dst_offset < o.dst_offset + o.capacity &&
        o.dst_offset < b.dst_offset + b.capacity)
      return {SLIP_ERR_INVALID_ARG, i, b.dst_offset};  // overlaps another block
  }
  slip_serve_output *e = pin_output(a, q.shuffle_id, b.map_id);
  if (!e) return {SLIP_ERR_BAD_REGION, i, b.map_id};
  *out = e;
  if (b.partition >= e->nparts) return {SLIP_ERR_OUT_OF_RANGE, i, b.partition};
  const uint64_t *offs = (const uint64_t *)(uintptr_t)e->offsets;
  const uint64_t begin = offs[b.partition], end = offs[b.partition + 1];
  if (end < begin) return {SLIP_ERR_BAD_DESCRIPTOR, i, b.partition};
  if (end - begin > b.capacity) return {SLIP_ERR_OUT_OF_RANGE, i, end - begin};
  *src = (const char *)(uintptr_t)e->base + begin;
  *len = end - begin;
  *rows = e->counts ? ((const uint64_t *)(uintptr_t)e->counts)[b.partition] : 0;
  return {SLIP_OK, i, 0};
}

/* The CTA copy of every request and chunk (slipstream/device/copy.cuh). */
__device__ __forceinline__ void cta_copy(char *dst, const char *src, uint64_t len) {
  slip::copy::cta_copy<4>(dst, src, len);
}

/* A request's copy shared among CTAs: its blocks, and a word that hands out chunks,
 * gen (16 bits) | nchunks (24) | next (24), taken with CAS so a chunk always belongs to the
 * generation it was counted in. The CTA that armed it waits until `done` reaches nchunks. */
struct Job {
  unsigned long long word;
  unsigned int done;
  unsigned int nblocks;
  uint64_t chunk_bytes;  /* this request's chunk: at least slip_serve_launch.chunk_bytes */
  const char *src[SLIP_SERVE_MAX_BLOCKS];
  char *dst[SLIP_SERVE_MAX_BLOCKS];
  uint64_t len[SLIP_SERVE_MAX_BLOCKS];
  uint32_t first_chunk[SLIP_SERVE_MAX_BLOCKS + 1];
};

constexpr unsigned long long kChunkField = (1ull << 24) - 1;

/* The CTAs' own words (device memory, before the jobs; zeroed at each launch). One idle CTA at a
 * time holds the poller token and reads the rings and the host's stop word (host memory, over
 * PCIe); the others watch device memory only (the jobs, and `stop`, which the poller copies from
 * the host), so the rings' traffic does not grow with the CTAs. The token is a hint: tickets are
 * still taken with a CAS on the reader entry. */
struct CtaWords {
  unsigned int poller;          /* 0: free; else the holder's CTA index + 1 */
  unsigned int stop;            /* 1 once the poller saw slip_serve_ctl.stop */
  unsigned long long last_work; /* %globaltimer when a request was last taken: CTAs leave when the
                                 * server, not only they, found nothing for idle_ns */
};
constexpr size_t kCtaWordsBytes = 128;
static_assert(sizeof(CtaWords) <= kCtaWordsBytes, "CTA words");

__device__ __forceinline__ CtaWords *cta_words(const slip_serve_launch &a) { return (CtaWords *)a.jobs; }
/* Thread 0: whether this CTA holds the poller token or just took it (a plain read before the CAS,
 * so idle CTAs do not keep the token's line busy with atomics). */
__device__ __forceinline__ bool holds_or_takes(CtaWords *w, unsigned int me) {
  const unsigned int p = *(volatile unsigned int *)&w->poller;
  return p == me || (p == 0 && atomicCAS(&w->poller, 0u, me) == 0u);
}
/* How long neither this CTA (since `since`) nor the server took work. */
__device__ __forceinline__ uint64_t idle_for(CtaWords *w, uint64_t since) {
  const uint64_t last = *(volatile unsigned long long *)&w->last_work;
  return globaltimer_ns() - (last > since ? last : since);
}
__device__ __forceinline__ Job *jobs_of(const slip_serve_launch &a) {
  return (Job *)((char *)a.jobs + kCtaWordsBytes);
}

__device__ __forceinline__ uint32_t word_next(unsigned long long w) { return (uint32_t)(w & kChunkField); }
__device__ __forceinline__ uint32_t word_chunks(unsigned long long w) { return (uint32_t)((w >> 24) & kChunkField); }

/* Thread 0: takes the next chunk of `job`; true with *chunk set. */
__device__ bool take_chunk(Job *job, uint32_t *chunk) {
  unsigned long long w = *(volatile unsigned long long *)&job->word;
  while (word_next(w) < word_chunks(w)) {
    const unsigned long long seen = atomicCAS(&job->word, w, w + 1);
    if (seen == w) {
      __threadfence();  // the job as armed before this word: read after the take
      *chunk = word_next(w);
      return true;
    }
    w = seen;
  }
  return false;
}

/* The whole CTA copies chunk c of `job` (thread 0 took it), then counts it done (after a system
 * fence, so the CTA that answers sees its bytes before its answer is released). */
__device__ void copy_chunk(Job *job, uint32_t c) {
  __shared__ const char *src;
  __shared__ char *dst;
  __shared__ uint64_t len;
  if (threadIdx.x == 0) {
    // Read through L2: the job was written by another SM after this one may have cached it.
    volatile Job *j = job;
    uint32_t b = 0;
    const uint32_t nb = j->nblocks;
    while (b + 1 < nb && j->first_chunk[b + 1] <= c) b++;
    const uint64_t chunk_bytes = j->chunk_bytes;
    const uint64_t off = (uint64_t)(c - j->first_chunk[b]) * chunk_bytes;
    const uint64_t blen = j->len[b];
    src = j->src[b] + off;
    dst = j->dst[b] + off;
    len = blen - off < chunk_bytes ? blen - off : chunk_bytes;
  }
  __syncthreads();
  cta_copy(dst, src, len);
  __syncthreads();
  if (threadIdx.x == 0) {
    fence_sys();
    atomicAdd(&job->done, 1u);
  }
}

/* Thread 0: a chunk of another CTA's job, if one has any left; true with *which and *chunk set. */
__device__ bool find_help(const slip_serve_launch &a, uint32_t *which, uint32_t *chunk) {
  Job *jobs = jobs_of(a);
  for (uint32_t k = 1; k < gridDim.x; k++) {
    const uint32_t j = (blockIdx.x + k) % gridDim.x;
    if (take_chunk(&jobs[j], chunk)) {
      *which = j;
      return true;
    }
  }
  return false;
}

/* Word pair k of a request's block table (the host path's BlockTable): k = 0 the header (request
 * id; record count and magic), k = 1 + i block i's record (bytes; checksum 0 in the low word, rows
 * in the high word). */
__device__ __forceinline__ void table_words(uint64_t *tb, uint32_t k, uint64_t request_id, uint32_t nb,
                                            const uint64_t *lens, const uint64_t *rowss) {
  if (k == 0) {
    tb[0] = request_id;
    tb[1] = (uint64_t)nb | (uint64_t)SLIP_SERVE_TABLE_MAGIC << 32;
  } else {
    tb[2 * k] = lens[k - 1];
    tb[2 * k + 1] = rowss[k - 1] << 32;
  }
}

__device__ uint64_t monotonic_now(const slip_serve_launch &a) {
  return (uint64_t)((int64_t)globaltimer_ns() - a.clock_offset_ns);
}

#if SLIP_HAVE_GPUNETIO
/* Caller holds the queue's lock: the answer to ticket t, as this copy of the ring holds it, posted
 * into the remote reader's copy: its bytes after seq as an RDMA write, then seq as a fetch-add that
 * takes the slot's word from the previous lap's ticket + 1 (0 on the first) to t + 1 (only these
 * answers write it). A responder executes an atomic after the writes before it on the queue pair,
 * so the reader sees a whole answer once it sees seq. */
__device__ int post_answer_locked(slip_dev_queue &dq, const slip_serve_reader &rd, uint64_t t) {
  namespace gn = slip::dev::gpunetio;
  const uint64_t off = SLIP_SERVE_RING_HEADER + (uint64_t)rd.nslots * SLIP_SERVE_SLOT_BYTES +
                       (t & (rd.nslots - 1)) * sizeof(slip_serve_done);
  doca_gpu_dev_verbs_addr l, r;
  l.key = gn::mkey(rd.ring_mkey);
  r.key = gn::mkey(rd.mirror_mkey);
  l.addr = SLIP_IOVA(rd.ring_nic_id, off + 8);
  r.addr = SLIP_IOVA(rd.mirror_id, off + 8);
  const int p = gn::post_write_at(dq, r, l, sizeof(slip_serve_done) - 8);
  if (p != SLIP_OK) return p;
  r.addr = SLIP_IOVA(rd.mirror_id, off);
  return gn::post_add_at(dq, r, slip_serve_seq_step(t, rd.nslots));
}
#endif

/* Thread 0, a refused request of a remote reader: its answer alone (the caller wrote it into this
 * copy of the ring), without waiting for its completion (the slot's source is rewritten only once
 * the reader read this answer, and a later batch's wait covers the queue pair's slots). */
__device__ void nic_answer(const slip_serve_reader &rd, uint64_t t) {
#if SLIP_HAVE_GPUNETIO
  namespace gn = slip::dev::gpunetio;
  slip_dev_queue &dq = *(slip_dev_queue *)(uintptr_t)rd.queue;
  if (dq.backend != SLIP_BACKEND_GPUNETIO) return;
  gn::Lock lock(dq);
  if (post_answer_locked(dq, rd, t) == SLIP_OK) (void)gn::commit_locked(dq);
#else
  (void)rd; (void)t;
#endif
}

/* Thread 0, gpunetio readers: the request's blocks, its table (built in this CTA's staging slot)
 * and, when asked, the signal's fetch-add as one batch on the reader's queue pair; one commit, then
 * the wait for the batch's completion. For a remote reader the batch ends with the answer (`done`,
 * written into this copy of the ring first, for ticket t); *answered says it was posted. The map outputs stay pinned until it returns, since the NIC
 * reads them until then. A failed post still commits what was built before it (never left for the
 * next request's doorbell) and waits for it. *broken: the queue pair failed (a post, an error
 * completion, or no completion in time): it stays in the error state, as a NIC's does. */
__device__ Verdict nic_push(const slip_serve_launch &a, const slip_serve_reader &rd, const slip_serve_request &q,
                            uint32_t nb, slip_serve_output *const *outs, const char *const *srcs, const uint64_t *lens,
                            const uint64_t *rowss, uint64_t total, uint64_t t, slip_serve_done *done,
                            uint64_t taken_at, uint64_t copy_at, bool *broken, bool *answered) {
  *broken = false;
  *answered = false;
#if SLIP_HAVE_GPUNETIO
  namespace dev = slip::dev;
  namespace gn = slip::dev::gpunetio;
  slip_dev_queue &dq = *(slip_dev_queue *)(uintptr_t)rd.queue;
  const uint64_t table_bytes = SLIP_SERVE_TABLE_HEADER + (uint64_t)nb * SLIP_SERVE_TABLE_RECORD;
  const dev::Addr stage{rd.staging_index, (uint64_t)blockIdx.x * SLIP_SERVE_STAGING_BYTES};
  const dev::Thread one;
  if (dq.backend != SLIP_BACKEND_GPUNETIO) return {SLIP_ERR_UNSUPPORTED, nb, dq.backend};
  // The table's entries are what the host set: the landing covers the reader's landing_len, the
  // staging slot is in a local region.
  int st = dev::detail::check(one, dq, dev::Addr{rd.landing_index, 0}, rd.landing_len, SLIP_DEV_REGION_WRITABLE);
  if (st != SLIP_OK) return {st, nb, rd.landing_len};
  st = dev::detail::check(one, dq, stage, SLIP_SERVE_STAGING_BYTES, SLIP_DEV_REGION_READABLE);
  if (st != SLIP_OK) return {st, nb, stage.offset};
  for (uint32_t i = 0; i < nb; i++)
    if (lens[i] > 0 && (outs[i]->nic_id == SLIP_SERVE_NO_NIC || (rd.link_keys && outs[i]->link_key == 0)))
      return {SLIP_ERR_BAD_REGION, i, q.blocks[i].map_id};
  uint64_t *tb = (uint64_t *)dev::detail::ptr(dq, stage);
  for (uint32_t k = 0; k <= nb; k++) table_words(tb, k, q.request_id, nb, lens, rowss);
  Verdict v{SLIP_OK, nb, 0};
  uint64_t ticket;
  {
    gn::Lock lock(dq);
    for (uint32_t i = 0; i < nb && v.status == SLIP_OK; i++) {
      if (lens[i] == 0) continue;
      const slip_serve_output &o = *outs[i];
      doca_gpu_dev_verbs_addr l;
      l.addr = SLIP_IOVA(o.nic_id, o.nic_offset + (uint64_t)(srcs[i] - (const char *)(uintptr_t)o.base));
      l.key = gn::mkey(rd.link_keys ? o.link_key : o.nic_key);
      const int p = gn::post_write_at(dq, gn::addr(dq, dev::Addr{rd.landing_index, q.blocks[i].dst_offset}), l, lens[i]);
      if (p != SLIP_OK) v = {p, i, lens[i]};
    }
    if (v.status == SLIP_OK) {
      const int p = gn::post_write(dq, dev::Addr{rd.landing_index, q.table_offset}, stage, table_bytes);
      if (p != SLIP_OK) v = {p, nb, table_bytes};
    }
    if (v.status == SLIP_OK && (q.flags & SLIP_SERVE_SIGNAL)) {
      const uint64_t pieces = q.flags >> 8;
      const int p = gn::post_signal(dq, dev::Addr{rd.landing_index, q.signal_offset}, pieces << 40 | (total + table_bytes));
      if (p != SLIP_OK) v = {p, nb, q.signal_offset};
    }
    if (v.status == SLIP_OK && rd.mirror) {
      // The answer the batch delivers if it completes (a failed batch delivers nothing after the
      // failure: the reader's deadline covers it).
      const uint64_t now = monotonic_now(a);
      done->status = SLIP_OK;
      done->block = nb;
      done->bytes = total;
      done->value = 0;
      done->taken_ns = taken_at;
      done->copy_ns = copy_at;
      done->copied_ns = now;
      done->answered_ns = now;
      st_release_sys(&done->seq, t + 1);
      fence_sys();  // the answer, in this host's memory, before the NIC reads it
      const int p = post_answer_locked(dq, rd, t);
      if (p != SLIP_OK) v = {p, nb, 0};
      else *answered = true;
    }
    ticket = gn::commit_locked(dq);
  }
  const int why = dev::wait(one, dq, ticket);  // the batch's completion, or the set's first error
  *broken = v.status != SLIP_OK || why != SLIP_OK;
  if (v.status != SLIP_OK) return v;
  return {why, nb, why == SLIP_OK ? 0 : ticket};
#else
  (void)a; (void)rd; (void)q; (void)outs; (void)srcs; (void)lens; (void)rowss; (void)total; (void)t; (void)done;
  (void)taken_at; (void)copy_at;
  *broken = false;
  *answered = false;
  return {SLIP_ERR_UNSUPPORTED, nb, 0};
#endif
}

/* Serves reader r's ticket t with the whole CTA. */
__device__ void serve_one(const slip_serve_launch &a, slip_serve_reader *r, uint64_t t) {
  __shared__ __align__(16) slip_serve_request q;  // read in 16-byte pieces
  __shared__ slip_serve_output *outs[SLIP_SERVE_MAX_BLOCKS];
  __shared__ const char *srcs[SLIP_SERVE_MAX_BLOCKS];
  __shared__ uint64_t lens[SLIP_SERVE_MAX_BLOCKS];
  __shared__ uint64_t rowss[SLIP_SERVE_MAX_BLOCKS];
  __shared__ Verdict first;
  __shared__ uint64_t total;
  __shared__ uint64_t taken_at, copy_at, copied_at;
  // The request (published before its seq, which the leader read with acquire): volatile loads,
  // so no line cached before the publish is used.
  const int4 *in = (const int4 *)slot_of(*r, t);
  int4 *mine = (int4 *)&q;
  for (unsigned k = threadIdx.x; k < SLIP_SERVE_SLOT_BYTES / 16; k += blockDim.x) mine[k] = __ldcv(in + k);
  if (threadIdx.x == 0) {
    first = {SLIP_OK, 0, 0};
    total = 0;
    taken_at = monotonic_now(a);
    copy_at = 0;
    copied_at = 0;
  }
  __syncthreads();
  const slip_serve_reader rd = *r;
  if (threadIdx.x == 0) {
    const uint64_t table_end_ = q.table_offset + SLIP_SERVE_TABLE_HEADER + (uint64_t)q.nblocks * SLIP_SERVE_TABLE_RECORD;
    if (q.magic != SLIP_SERVE_REQ_MAGIC) first = {SLIP_ERR_BAD_DESCRIPTOR, 0, q.magic};
    else if ((q.flags & 0xffu & ~SLIP_SERVE_SIGNAL) != 0 || (!(q.flags & SLIP_SERVE_SIGNAL) && q.flags != 0))
      first = {SLIP_ERR_BAD_DESCRIPTOR, 0, q.flags};
    else if ((q.flags & SLIP_SERVE_SIGNAL) &&
             ((q.signal_offset & 7u) != 0 || q.signal_offset > rd.landing_len || rd.landing_len - q.signal_offset < 8 ||
              (q.signal_offset < table_end_ && q.table_offset < q.signal_offset + 8)))
      first = {SLIP_ERR_OUT_OF_RANGE, q.nblocks, q.signal_offset};
    else if (q.nblocks == 0 || q.nblocks > SLIP_SERVE_MAX_BLOCKS) first = {SLIP_ERR_BAD_DESCRIPTOR, 0, q.nblocks};
    else if (q.landing_key != rd.landing_key) first = {SLIP_ERR_BAD_KEY, 0, q.landing_key};
    else if ((q.table_offset & 15u) != 0) first = {SLIP_ERR_INVALID_ARG, q.nblocks, q.table_offset};
    else if (q.table_offset > rd.landing_len ||
             SLIP_SERVE_TABLE_HEADER + (uint64_t)q.nblocks * SLIP_SERVE_TABLE_RECORD > rd.landing_len - q.table_offset)
      first = {SLIP_ERR_OUT_OF_RANGE, q.nblocks, q.table_offset};
    else if (monotonic_now(a) > q.deadline_ns) first = {SLIP_ERR_TIMEOUT, q.nblocks, q.deadline_ns};
  }
  __syncthreads();
  const uint32_t nb = first.status == SLIP_OK ? q.nblocks : 0;
  __syncthreads();  // every thread has read the header's verdict before a block check replaces it
  // Block checks, one thread each (at most 30: one warp).
  if (threadIdx.x < nb) {
    outs[threadIdx.x] = nullptr;
    Verdict v = check_block(a, rd, q, threadIdx.x, &outs[threadIdx.x], &srcs[threadIdx.x], &lens[threadIdx.x],
                            &rowss[threadIdx.x]);
    if (v.status == SLIP_OK) atomicAdd((unsigned long long *)&total, (unsigned long long)lens[threadIdx.x]);
    // The lowest failing block's verdict (threads 0..nb-1 are lanes of the first warp).
    const unsigned lanes = nb >= 32 ? 0xffffffffu : (1u << nb) - 1u;
    const unsigned failing = __ballot_sync(lanes, v.status != SLIP_OK);
    if (failing != 0 && threadIdx.x == (unsigned)(__ffs(failing) - 1)) first = v;
  }
  __syncthreads();
  char *landing = (char *)(uintptr_t)rd.landing;
  if (threadIdx.x == 0 && first.status == SLIP_OK) copy_at = monotonic_now(a);
  const bool nic = rd.queue != 0;
  bool broken = false;    // thread 0: the reader's queue pair failed
  bool answered = false;  // thread 0: a remote reader's answer went with the batch
  if (nic) {
    if (threadIdx.x == 0 && first.status == SLIP_OK) {
      first = nic_push(a, rd, q, nb, outs, srcs, lens, rowss, total, t, done_of(rd, t), taken_at, copy_at, &broken,
                       &answered);
      copied_at = monotonic_now(a);
    }
    __syncthreads();
  } else if (first.status == SLIP_OK && gridDim.x > 1 && total > a.chunk_bytes) {
    // Shared: arm this CTA's job, copy chunks with whoever helps, wait for the last one.
    Job *job = &jobs_of(a)[blockIdx.x];
    __shared__ uint32_t chunks, c;
    __shared__ bool got;
    if (threadIdx.x == 0) {
      // About four chunks per CTA, none under the launch's chunk: a chunk's handing out (a CAS,
      // the job's words, a system fence) stays small beside its copy.
      uint64_t cb = (total / (4ull * gridDim.x) + 15) & ~15ull;
      if (cb < a.chunk_bytes) cb = a.chunk_bytes;
      job->chunk_bytes = cb;
      uint32_t n = 0;
      for (uint32_t i = 0; i < nb; i++) {
        job->src[i] = srcs[i];
        job->dst[i] = landing + q.blocks[i].dst_offset;
        job->len[i] = lens[i];
        job->first_chunk[i] = n;
        n += (uint32_t)((lens[i] + cb - 1) / cb);
      }
      job->first_chunk[nb] = n;
      job->nblocks = nb;
      job->done = 0;
      chunks = n;
      __threadfence();  // the job before the word that hands it out
      const unsigned long long gen = (*(volatile unsigned long long *)&job->word >> 48) + 1;
      atomicExch(&job->word, (gen & 0xffffull) << 48 | (unsigned long long)n << 24);
    }
    __syncthreads();
    for (;;) {
      if (threadIdx.x == 0) got = take_chunk(job, &c);
      __syncthreads();
      if (!got) break;
      copy_chunk(job, c);
    }
    if (threadIdx.x == 0) {
      slip::sync::Backoff wait;
      while (*(volatile unsigned int *)&job->done != chunks) wait.pause();
      __threadfence();
    }
    __syncthreads();
  } else if (first.status == SLIP_OK) {
    for (uint32_t i = 0; i < nb; i++) cta_copy(landing + q.blocks[i].dst_offset, srcs[i], lens[i]);
  }
  if (first.status == SLIP_OK && !nic) {
    if (threadIdx.x <= nb)
      table_words((uint64_t *)(landing + q.table_offset), threadIdx.x, q.request_id, nb, lens, rowss);
    __syncthreads();  // the blocks and the table before the signal
    if (threadIdx.x == 0) copied_at = monotonic_now(a);
    if (threadIdx.x == 0 && (q.flags & SLIP_SERVE_SIGNAL)) {
      fence_sys();  // a reader may poll the signal from another process, with copies
      const uint64_t table_bytes = SLIP_SERVE_TABLE_HEADER + (uint64_t)nb * SLIP_SERVE_TABLE_RECORD;
      const uint64_t pieces = q.flags >> 8;
      *(volatile uint64_t *)(landing + q.signal_offset) = pieces << 40 | (total + table_bytes);
    }
  }
  __syncthreads();
  if (threadIdx.x < nb && outs[threadIdx.x]) atomicSub(&outs[threadIdx.x]->pins, 1u);
  if (threadIdx.x == 0 && !(answered && first.status == SLIP_OK)) {
    slip_serve_done *d = done_of(rd, t);
    fence_sys();  // the pushed bytes and the table before the answer
    d->status = first.status;
    d->block = first.status == SLIP_OK ? nb : first.block;
    d->bytes = first.status == SLIP_OK ? total : 0;
    d->value = first.value;
    d->taken_ns = taken_at;
    d->copy_ns = copy_at;
    d->copied_ns = copied_at;
    d->answered_ns = monotonic_now(a);
    st_release_sys(&d->seq, t + 1);
    // A remote reader's refusal goes to its copy of the ring (a failed queue pair delivers nothing).
    if (rd.mirror && !answered && !broken) {
      fence_sys();
      nic_answer(rd, t);
    }
  }
  if (threadIdx.x == 0) {
    if (broken) {
      // The reader's queue pair is in the error state: no more requests are taken from its ring,
      // and its header says the ring is no longer served (its requests go the host-driven way; the
      // host sees it too and does not wake the kernel for them).
      atomicExch(&r->state, (unsigned)SLIP_SERVE_READER_OFF);
      st_release_sys(&((slip_serve_ring_header *)(uintptr_t)rd.ring)->holder_pid, (uint64_t)0);
    }
    if (first.status == SLIP_OK) {
      atomicAdd((unsigned long long *)&a.stats->served, 1ull);
      atomicAdd((unsigned long long *)&a.stats->bytes, (unsigned long long)total);
    } else {
      atomicAdd((unsigned long long *)&a.stats->failed, 1ull);
    }
  }
  __syncthreads();
}

}  // namespace

extern "C" __global__ void slip_serve_kernel(const slip_serve_launch *__restrict__ la) {
  const slip_serve_launch a = *la;
  __shared__ int action;  // 0 wait, 1 serve, 2 leave, 3 help another CTA's copy
  __shared__ uint32_t which;
  __shared__ uint64_t ticket;
  __shared__ uint32_t chunk;
  uint64_t idle_since = globaltimer_ns();
  uint32_t next = blockIdx.x % (a.nreaders ? a.nreaders : 1);
  slip::sync::Backoff backoff;
  CtaWords *words = cta_words(a);
  const unsigned int me = blockIdx.x + 1;
  bool polling = false;  // thread 0: this CTA held the poller token in its last pass
  uint32_t polls = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      action = 0;
      polling = false;
      uint32_t j = 0, c = 0;
      if (*(volatile unsigned int *)&words->stop != 0) {
        action = 2;
      } else if (find_help(a, &j, &c)) {
        action = 3;
        which = j;
        chunk = c;
        if (*(volatile unsigned int *)&words->poller == me) atomicExch(&words->poller, 0u);  // another polls
      } else if (holds_or_takes(words, me)) {
        // The poller: the rings, and every 32nd pass the host's stop word (each a PCIe read).
        polling = true;
        if ((polls++ & 31u) == 0 && ld_acquire_sys(&a.ctl->stop) != 0) {
          atomicExch(&words->stop, 1u);
          action = 2;
        }
        for (uint32_t k = 0; k < a.nreaders && action == 0; k++) {
          const uint32_t ri = (next + k) % a.nreaders;
          uint64_t tk;
          if (try_take(&a.readers[ri], &tk)) {
            action = 1;
            which = ri;
            ticket = tk;
            next = (ri + 1) % a.nreaders;
            atomicMax(&words->last_work, (unsigned long long)globaltimer_ns());
          }
        }
        if (action == 0 && idle_for(words, idle_since) > a.idle_ns) action = 2;
        // Serving or leaving: another idle CTA polls meanwhile.
        if (action != 0) {
          atomicExch(&words->poller, 0u);
          polls = 0;
        }
      } else if (idle_for(words, idle_since) > a.idle_ns) {
        action = 2;
      }
    }
    __syncthreads();
    const int act = action;
    if (act == 2) break;
    if (act == 1) {
      serve_one(a, &a.readers[which], ticket);
      idle_since = globaltimer_ns();
      backoff = slip::sync::Backoff();
    } else if (act == 3) {
      // Stays with the job while it has chunks (no ring or stop read between them).
      Job *job = &jobs_of(a)[which];
      __shared__ bool more;
      uint32_t c = chunk;
      for (;;) {
        copy_chunk(job, c);
        if (threadIdx.x == 0) more = take_chunk(job, &chunk);
        __syncthreads();
        if (!more) break;
        c = chunk;
        __syncthreads();  // every thread has read the chunk before thread 0 takes the next
      }
      idle_since = globaltimer_ns();
      backoff = slip::sync::Backoff();
    } else if (threadIdx.x == 0) {
      // The poller looks again at once (a request's wait is this loop); the others back off.
      if (polling) __nanosleep(32);
      else backoff.pause();
    }
    __syncthreads();
  }
  // The last CTA out says so in host memory (its answers were released before).
  if (threadIdx.x == 0 && atomicSub(&a.stats->live, 1u) == 1u) {
    fence_sys();
    *(volatile uint32_t *)&a.ctl->live = 0;
  }
}

extern "C" __global__ void slip_serve_clock_kernel(uint64_t *out) { *out = globaltimer_ns(); }

struct slip_server {
  slip_ctx *ctx;
  std::mutex mu;
  uint32_t max_readers, dir_slots, ctas, threads;
  uint64_t idle_ns;
  cudaStream_t kernel_stream = nullptr;
  cudaStream_t copy_stream = nullptr;
  slip_serve_reader *d_readers = nullptr;
  slip_serve_output *d_dir = nullptr;
  slip_serve_stats *d_stats = nullptr;
  slip_serve_launch *d_launch = nullptr;
  void *d_jobs = nullptr;
  slip_serve_ctl *ctl = nullptr;  // mapped pinned
  slip_serve_ctl *d_ctl = nullptr;
  uint64_t *clock_host = nullptr;  // mapped pinned
  uint64_t *d_clock = nullptr;
  std::vector<slip_serve_output> dir;  // the host's copy of every entry
  std::vector<uint8_t> reusable;       // per slot: a tombstone no push reads any more (revoke returned)
  std::vector<const uint8_t *> rings;  // per reader entry: its ring's host memory (null: off)
  std::vector<uint32_t> ring_slots;
  std::vector<uint64_t> parked_taken;  // per reader: tickets taken, read once the kernel left
  bool taken_known = false;            // parked_taken is valid (the kernel is not resident)
};

namespace {

/* Smallest chunk of a shared copy: a 1 MiB request spreads over 8 CTAs; a larger one gets larger
 * chunks (about four per CTA). */
constexpr uint64_t kChunkBytes = 128 * 1024;

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One copy on the server's copy stream, finished when this returns (it never waits for the kernel). */
slip_status copy_now(slip_server *s, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  slip_status st = SLIP_OK;
  SLIP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s->copy_stream));
  SLIP_CUDA_CHECK(cudaStreamSynchronize(s->copy_stream));
done:
  return st;
}

/* Writes an entry the kernel may read at any time: every word but the leading state first, then
 * the state (one aligned 4-byte store, so the kernel sees all of it or the old state). */
slip_status publish_entry(slip_server *s, void *d_entry, const void *entry, size_t bytes) {
  slip_status st = copy_now(s, (char *)d_entry + 4, (const char *)entry + 4, bytes - 4, cudaMemcpyHostToDevice);
  return st == SLIP_OK ? copy_now(s, d_entry, entry, 4, cudaMemcpyHostToDevice) : st;
}

slip_status set_state(slip_server *s, uint32_t *d_state, uint32_t state) {
  return copy_now(s, d_state, &state, 4, cudaMemcpyHostToDevice);
}

int find_live(const slip_server *s, uint32_t shuffle, uint64_t map) {
  const uint32_t mask = s->dir_slots - 1;
  uint32_t i = slip_serve_hash(shuffle, map, s->dir_slots);
  for (uint32_t probe = 0; probe < s->dir_slots; probe++, i = (i + 1) & mask) {
    const slip_serve_output &e = s->dir[i];
    if (e.state == SLIP_SERVE_FREE) return -1;
    if (e.state == SLIP_SERVE_LIVE && e.shuffle_id == shuffle && e.map_id == map) return (int)i;
  }
  return -1;
}

}  // namespace

extern "C" slip_status slip_server_create(slip_ctx *ctx, uint32_t max_readers, uint32_t dir_slots, uint32_t ctas,
                                          uint32_t threads, uint64_t idle_ns, slip_server **out) {
  slip_status st = SLIP_OK;
  slip_server *s = nullptr;
  if (!ctx || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_create: null argument");
  *out = nullptr;
  if (max_readers == 0 || max_readers > 1024)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_create: %u readers, expected 1..1024", max_readers);
  if (dir_slots < 2 || (dir_slots & (dir_slots - 1)) != 0 || dir_slots > (1u << 24))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_create: %u directory slots, expected a power of two in 2..2^24",
              dir_slots);
  if (ctas == 0 || ctas > 1024) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_create: %u CTAs, expected 1..1024", ctas);
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_create: %u threads, expected a multiple of 32 in 32..1024", threads);
  s = new slip_server();
  s->ctx = ctx;
  s->max_readers = max_readers;
  s->dir_slots = dir_slots;
  s->ctas = ctas;
  s->threads = threads;
  s->idle_ns = idle_ns;
  s->dir.assign(dir_slots, slip_serve_output{});
  s->reusable.assign(dir_slots, 0);
  s->rings.assign(max_readers, nullptr);
  s->ring_slots.assign(max_readers, 0);
  s->parked_taken.assign(max_readers, 0);
  SLIP_CUDA_CHECK(cudaSetDevice(ctx->device));
  SLIP_CUDA_CHECK(cudaStreamCreateWithFlags(&s->kernel_stream, cudaStreamNonBlocking));
  SLIP_CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
  SLIP_CUDA_CHECK(cudaMalloc(&s->d_readers, sizeof(slip_serve_reader) * max_readers));
  SLIP_CUDA_CHECK(cudaMemset(s->d_readers, 0, sizeof(slip_serve_reader) * max_readers));
  SLIP_CUDA_CHECK(cudaMalloc(&s->d_dir, sizeof(slip_serve_output) * dir_slots));
  SLIP_CUDA_CHECK(cudaMemset(s->d_dir, 0, sizeof(slip_serve_output) * dir_slots));
  SLIP_CUDA_CHECK(cudaMalloc(&s->d_stats, sizeof(slip_serve_stats)));
  SLIP_CUDA_CHECK(cudaMemset(s->d_stats, 0, sizeof(slip_serve_stats)));
  SLIP_CUDA_CHECK(cudaMalloc(&s->d_launch, sizeof(slip_serve_launch)));
  SLIP_CUDA_CHECK(cudaMalloc(&s->d_jobs, kCtaWordsBytes + sizeof(Job) * ctas));
  SLIP_CUDA_CHECK(cudaMemset(s->d_jobs, 0, kCtaWordsBytes + sizeof(Job) * ctas));
  SLIP_CUDA_CHECK(cudaHostAlloc(&s->ctl, sizeof(slip_serve_ctl), cudaHostAllocMapped));
  memset(s->ctl, 0, sizeof(slip_serve_ctl));
  SLIP_CUDA_CHECK(cudaHostGetDevicePointer((void **)&s->d_ctl, s->ctl, 0));
  SLIP_CUDA_CHECK(cudaHostAlloc(&s->clock_host, sizeof(uint64_t), cudaHostAllocMapped));
  SLIP_CUDA_CHECK(cudaHostGetDevicePointer((void **)&s->d_clock, s->clock_host, 0));
  SLIP_CUDA_CHECK(cudaDeviceSynchronize());
  *out = s;
  s = nullptr;
done:
  if (s) slip_server_destroy(s);
  return st;
}

namespace {
/* A remote reader's two copies of its ring, as the NICs name them. */
struct Mirror {
  uint32_t ring_nic_id, ring_mkey, mirror_id, mirror_mkey;
};

/* One reader entry, stores (queue 0: landing_dev) or gpunetio (queue_dev), remote with `mirror`. */
slip_status set_reader(slip_server *s, uint32_t index, uint64_t ring_dev, const void *ring_host, uint64_t landing_dev,
                       uint64_t queue_dev, uint32_t landing_index, uint32_t staging_index, uint64_t landing_len,
                       uint64_t landing_key, const Mirror *mirror = nullptr) {
  slip_status st = SLIP_OK;
  slip_serve_reader r{};
  const slip_serve_ring_header *h = (const slip_serve_ring_header *)ring_host;
  if (!s || !ring_dev || !h || (!landing_dev && !queue_dev))
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader: null argument");
  if (queue_dev && (queue_dev % alignof(slip_dev_queue)) != 0)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader_nic: queue at 0x%llx, expected %zu-byte alignment",
              (unsigned long long)queue_dev, alignof(slip_dev_queue));
  if (queue_dev && landing_index == staging_index)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader_nic: landing and staging both table entry %u",
              landing_index);
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (index >= s->max_readers)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader: reader %u, expected below %u", index, s->max_readers);
    if (h->magic != SLIP_SERVE_RING_MAGIC || h->version != SLIP_SERVE_VERSION || h->slot_bytes != SLIP_SERVE_SLOT_BYTES)
      SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR,
                "slip_server_set_reader: ring header magic 0x%x version %u slot %u bytes, expected 0x%x, %u, %u",
                h->magic, h->version, h->slot_bytes, SLIP_SERVE_RING_MAGIC, SLIP_SERVE_VERSION, SLIP_SERVE_SLOT_BYTES);
    if (h->nslots == 0 || (h->nslots & (h->nslots - 1)) != 0 || h->nslots > SLIP_SERVE_MAX_SLOTS)
      SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "slip_server_set_reader: ring of %u slots, expected a power of two up to %u",
                h->nslots, SLIP_SERVE_MAX_SLOTS);
    if (landing_dev & 15u)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader: landing at 0x%llx, expected 16-byte alignment",
                (unsigned long long)landing_dev);
    r.ring = ring_dev;
    r.landing = landing_dev;
    r.queue = queue_dev;
    r.landing_index = landing_index;
    r.staging_index = staging_index;
    r.landing_len = landing_len;
    r.landing_key = landing_key;
    r.nslots = h->nslots;
    r.state = SLIP_SERVE_READER_LIVE;
    r.taken = 0;
    if (mirror) {
      if (mirror->ring_nic_id >= (1u << 24) - 1 || mirror->mirror_id >= (1u << 24) - 1 || !mirror->ring_mkey ||
          !mirror->mirror_mkey)
        SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_set_reader_remote: ring region %u (key 0x%x) and reader's copy %u "
                  "(key 0x%x), expected NIC region ids below 2^24 - 1 and nonzero memory keys", mirror->ring_nic_id,
                  mirror->ring_mkey, mirror->mirror_id, mirror->mirror_mkey);
      r.mirror = 1;
      r.ring_nic_id = mirror->ring_nic_id;
      r.ring_mkey = mirror->ring_mkey;
      r.mirror_id = mirror->mirror_id;
      r.mirror_mkey = mirror->mirror_mkey;
      r.link_keys = 1;
    }
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    SLIP_CHECK(set_state(s, &s->d_readers[index].state, SLIP_SERVE_READER_OFF));
    SLIP_CHECK(publish_entry(s, &s->d_readers[index], &r, sizeof(r)));
    s->rings[index] = (const uint8_t *)ring_host;
    s->ring_slots[index] = h->nslots;
    s->parked_taken[index] = 0;
  }
done:
  return st;
}
}  // namespace

extern "C" slip_status slip_server_set_reader(slip_server *s, uint32_t index, uint64_t ring_dev, const void *ring_host,
                                              uint64_t landing_dev, uint64_t landing_len, uint64_t landing_key) {
  if (!landing_dev) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_server_set_reader: null landing");
  return set_reader(s, index, ring_dev, ring_host, landing_dev, 0, 0, 0, landing_len, landing_key);
}

extern "C" slip_status slip_server_set_reader_nic(slip_server *s, uint32_t index, uint64_t ring_dev,
                                                  const void *ring_host, uint64_t queue_dev, uint32_t landing_index,
                                                  uint32_t staging_index, uint64_t landing_len, uint64_t landing_key) {
  if (!queue_dev) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_server_set_reader_nic: null queue");
  return set_reader(s, index, ring_dev, ring_host, 0, queue_dev, landing_index, staging_index, landing_len,
                    landing_key);
}

extern "C" slip_status slip_server_set_reader_remote(slip_server *s, uint32_t index, uint64_t ring_dev,
                                                     const void *ring_host, uint64_t queue_dev, uint32_t landing_index,
                                                     uint32_t staging_index, uint64_t landing_len, uint64_t landing_key,
                                                     uint32_t ring_nic_id, uint32_t ring_mkey, uint32_t mirror_id,
                                                     uint32_t mirror_mkey) {
  if (!queue_dev) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_server_set_reader_remote: null queue");
  const Mirror m{ring_nic_id, ring_mkey, mirror_id, mirror_mkey};
  return set_reader(s, index, ring_dev, ring_host, 0, queue_dev, landing_index, staging_index, landing_len,
                    landing_key, &m);
}

extern "C" slip_status slip_server_clear_reader(slip_server *s, uint32_t index) {
  slip_status st = SLIP_OK;
  if (!s) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_clear_reader: null server");
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (index >= s->max_readers)
      SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_clear_reader: reader %u, expected below %u", index, s->max_readers);
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    SLIP_CHECK(set_state(s, &s->d_readers[index].state, SLIP_SERVE_READER_OFF));
    s->rings[index] = nullptr;
  }
done:
  return st;
}

extern "C" slip_status slip_server_put_output(slip_server *s, uint32_t shuffle_id, uint64_t map_id, uint64_t base,
                                              uint64_t offsets_dev, uint64_t counts_dev, uint32_t nparts,
                                              uint32_t nic_id, uint32_t nic_key, uint64_t nic_offset,
                                              uint32_t link_key) {
  slip_status st = SLIP_OK;
  if (!s || !base || !offsets_dev) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_put_output: null argument");
  if (nparts == 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_put_output: 0 partitions");
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (find_live(s, shuffle_id, map_id) >= 0)
      SLIP_FAIL(SLIP_ERR_STATE, "slip_server_put_output: shuffle %u map %llu is already in the directory", shuffle_id,
                (unsigned long long)map_id);
    // The first free slot or reusable tombstone on the key's probe sequence.
    const uint32_t mask = s->dir_slots - 1;
    uint32_t i = slip_serve_hash(shuffle_id, map_id, s->dir_slots);
    uint32_t probe = 0;
    for (; probe < s->dir_slots && s->dir[i].state != SLIP_SERVE_FREE && !s->reusable[i]; probe++) i = (i + 1) & mask;
    if (probe == s->dir_slots)
      SLIP_FAIL(SLIP_ERR_NO_MEMORY, "slip_server_put_output: no free slot among the directory's %u", s->dir_slots);
    slip_serve_output e{};
    e.state = SLIP_SERVE_LIVE;
    e.shuffle_id = shuffle_id;
    e.map_id = map_id;
    e.base = base;
    e.offsets = offsets_dev;
    e.counts = counts_dev;
    e.nparts = nparts;
    e.pins = 0;
    e.nic_id = nic_id;
    e.nic_key = nic_key;
    e.nic_offset = nic_offset;
    e.link_key = link_key;
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    // The words after the pins, then those up to the pins, which only the kernel changes (a push
    // that looked at the old entry may still let go of its pin), then the state.
    SLIP_CHECK(copy_now(s, &s->d_dir[i].nic_id, &e.nic_id, sizeof(slip_serve_output) - offsetof(slip_serve_output, nic_id),
                        cudaMemcpyHostToDevice));
    SLIP_CHECK(publish_entry(s, &s->d_dir[i], &e, offsetof(slip_serve_output, pins)));
    s->dir[i] = e;
    s->reusable[i] = 0;
  }
done:
  return st;
}

extern "C" slip_status slip_server_revoke_output(slip_server *s, uint32_t shuffle_id, uint64_t map_id,
                                                 uint64_t timeout_ns) {
  slip_status st = SLIP_OK;
  if (!s) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_revoke_output: null server");
  {
    std::lock_guard<std::mutex> g(s->mu);
    const int i = find_live(s, shuffle_id, map_id);
    if (i < 0)
      SLIP_FAIL(SLIP_ERR_BAD_REGION, "slip_server_revoke_output: shuffle %u map %llu is not in the directory", shuffle_id,
                (unsigned long long)map_id);
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    SLIP_CHECK(set_state(s, &s->d_dir[i].state, SLIP_SERVE_REVOKED));
    s->dir[i].state = SLIP_SERVE_REVOKED;
    const uint64_t t0 = mono_ns();
    for (;;) {
      uint32_t pins = 0;
      SLIP_CHECK(copy_now(s, &pins, &s->d_dir[i].pins, 4, cudaMemcpyDeviceToHost));
      if (pins == 0) {
        s->reusable[i] = 1;
        break;
      }
      if (mono_ns() - t0 > timeout_ns)
        SLIP_FAIL(SLIP_ERR_TIMEOUT, "slip_server_revoke_output: shuffle %u map %llu still read by %u pushes after %llu ns",
                  shuffle_id, (unsigned long long)map_id, pins, (unsigned long long)timeout_ns);
    }
  }
done:
  return st;
}

extern "C" int slip_server_resident(const slip_server *s) {
  return s && *(volatile const uint32_t *)&s->ctl->live != 0;
}

namespace {

/* Launches the kernel (the caller holds s->mu and saw it not resident). */
slip_status launch_locked(slip_server *s, int *launched) {
  slip_status st = SLIP_OK;
  {
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    // The clock offset: %globaltimer read between two CLOCK_MONOTONIC reads, the tightest of up to
    // four tries (the first launch of the process may load the module); good to half that span.
    int64_t offset = 0;
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 4 && best > 20000; k++) {
      const uint64_t t0 = mono_ns();
      slip_serve_clock_kernel<<<1, 1, 0, s->copy_stream>>>(s->d_clock);
      SLIP_LAUNCH_CHECK();
      SLIP_CUDA_CHECK(cudaStreamSynchronize(s->copy_stream));
      const uint64_t t1 = mono_ns();
      if (t1 - t0 < best) {
        best = t1 - t0;
        offset = (int64_t)*(volatile uint64_t *)s->clock_host - (int64_t)(t0 / 2 + t1 / 2);
      }
    }
    slip_serve_launch la{};
    la.readers = s->d_readers;
    la.dir = s->d_dir;
    la.ctl = s->d_ctl;
    la.stats = s->d_stats;
    la.nreaders = s->max_readers;
    la.dir_slots = s->dir_slots;
    la.idle_ns = s->idle_ns;
    la.jobs = s->d_jobs;
    la.chunk_bytes = kChunkBytes;
    la.clock_offset_ns = offset;
    const uint32_t live = s->ctas;
    SLIP_CUDA_CHECK(cudaMemcpyAsync(s->d_launch, &la, sizeof(la), cudaMemcpyHostToDevice, s->copy_stream));
    SLIP_CUDA_CHECK(cudaMemcpyAsync(&s->d_stats->live, &live, 4, cudaMemcpyHostToDevice, s->copy_stream));
    SLIP_CUDA_CHECK(cudaMemsetAsync(s->d_jobs, 0, kCtaWordsBytes, s->copy_stream));  // no poller, no stop
    SLIP_CUDA_CHECK(cudaStreamSynchronize(s->copy_stream));
    *(volatile uint32_t *)&s->ctl->stop = 0;
    *(volatile uint32_t *)&s->ctl->live = live;
    s->taken_known = false;
    slip_serve_kernel<<<s->ctas, s->threads, 0, s->kernel_stream>>>(s->d_launch);
    SLIP_LAUNCH_CHECK();
    if (launched) *launched = 1;
  }
done:
  return st;
}

}  // namespace

extern "C" slip_status slip_server_start(slip_server *s, int *launched) {
  slip_status st = SLIP_OK;
  if (launched) *launched = 0;
  if (!s) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_start: null server");
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (!slip_server_resident(s)) SLIP_CHECK(launch_locked(s, launched));
  }
done:
  return st;
}

extern "C" slip_status slip_server_wake(slip_server *s, int *launched) {
  slip_status st = SLIP_OK;
  if (launched) *launched = 0;
  if (!s) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_wake: null server");
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (slip_server_resident(s)) goto done;
    if (!s->taken_known) {
      // The last CTA fenced its entries before it cleared ctl->live: the counters are final.
      std::vector<slip_serve_reader> rs(s->max_readers);
      SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
      SLIP_CHECK(copy_now(s, rs.data(), s->d_readers, sizeof(slip_serve_reader) * s->max_readers,
                          cudaMemcpyDeviceToHost));
      for (uint32_t i = 0; i < s->max_readers; i++) s->parked_taken[i] = rs[i].taken;
      s->taken_known = true;
    }
    for (uint32_t i = 0; i < s->max_readers; i++) {
      const uint8_t *ring = s->rings[i];
      if (!ring) continue;
      // A ring the kernel let go of (its reader's queue pair failed) is not served any more.
      if (__atomic_load_n(&((const slip_serve_ring_header *)ring)->holder_pid, __ATOMIC_ACQUIRE) == 0) continue;
      const uint64_t t = s->parked_taken[i];
      const slip_serve_request *q =
          (const slip_serve_request *)(ring + SLIP_SERVE_RING_HEADER +
                                       (t & (s->ring_slots[i] - 1)) * (uint64_t)SLIP_SERVE_SLOT_BYTES);
      if (__atomic_load_n(&q->seq, __ATOMIC_ACQUIRE) == t + 1) {
        SLIP_CHECK(launch_locked(s, launched));
        break;
      }
    }
  }
done:
  return st;
}

extern "C" slip_status slip_server_stop(slip_server *s) {
  slip_status st = SLIP_OK;
  if (!s) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_stop: null server");
  {
    std::lock_guard<std::mutex> g(s->mu);
    SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
    *(volatile uint32_t *)&s->ctl->stop = 1;
    SLIP_CUDA_CHECK(cudaStreamSynchronize(s->kernel_stream));
  }
done:
  return st;
}

extern "C" slip_status slip_server_stats(slip_server *s, slip_serve_stats *out) {
  slip_status st = SLIP_OK;
  if (!s || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_server_stats: null argument");
  SLIP_CUDA_CHECK(cudaSetDevice(s->ctx->device));
  SLIP_CHECK(copy_now(s, out, s->d_stats, sizeof(*out), cudaMemcpyDeviceToHost));
done:
  return st;
}

extern "C" void slip_server_destroy(slip_server *s) {
  if (!s) return;
  if (s->ctl) {
    *(volatile uint32_t *)&s->ctl->stop = 1;
    if (s->kernel_stream) cudaStreamSynchronize(s->kernel_stream);
  }
  cudaFree(s->d_readers);
  cudaFree(s->d_dir);
  cudaFree(s->d_stats);
  cudaFree(s->d_launch);
  cudaFree(s->d_jobs);
  if (s->ctl) cudaFreeHost(s->ctl);
  if (s->clock_host) cudaFreeHost(s->clock_host);
  if (s->kernel_stream) cudaStreamDestroy(s->kernel_stream);
  if (s->copy_stream) cudaStreamDestroy(s->copy_stream);
  delete s;
}

struct slip_serve_ring_map {
  uint8_t *host = nullptr;
  uint64_t bytes = 0;
  uint64_t dev = 0;
  bool registered = false;
};

extern "C" slip_status slip_serve_ring_attach(slip_ctx *ctx, const char *path, slip_serve_ring_map **out) {
  slip_status st = SLIP_OK;
  slip_serve_ring_map *m = nullptr;
  int fd = -1;
  struct stat sb{};
  slip_serve_ring_header h{};
  void *dev = nullptr;
  if (!ctx || !path || !out) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_serve_ring_attach: null argument");
  *out = nullptr;
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_serve_ring_attach: cannot open %s: errno %d", path, errno);
  if (fstat(fd, &sb) != 0) SLIP_FAIL(SLIP_ERR_INVALID_ARG, "slip_serve_ring_attach: cannot stat %s: errno %d", path, errno);
  if ((uint64_t)sb.st_size < sizeof h)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "slip_serve_ring_attach: %s has %lld bytes, expected at least a %u-byte header",
              path, (long long)sb.st_size, SLIP_SERVE_RING_HEADER);
  if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "slip_serve_ring_attach: cannot read the header of %s", path);
  if (h.magic != SLIP_SERVE_RING_MAGIC || h.version != SLIP_SERVE_VERSION || h.slot_bytes != SLIP_SERVE_SLOT_BYTES)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR,
              "slip_serve_ring_attach: %s has magic 0x%x version %u slot %u bytes, expected 0x%x, %u, %u", path, h.magic,
              h.version, h.slot_bytes, SLIP_SERVE_RING_MAGIC, SLIP_SERVE_VERSION, SLIP_SERVE_SLOT_BYTES);
  if (h.nslots == 0 || (h.nslots & (h.nslots - 1)) != 0 || h.nslots > SLIP_SERVE_MAX_SLOTS)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "slip_serve_ring_attach: %s has %u slots, expected a power of two up to %u", path,
              h.nslots, SLIP_SERVE_MAX_SLOTS);
  if ((uint64_t)sb.st_size != slip_serve_ring_bytes(h.nslots))
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "slip_serve_ring_attach: %s has %lld bytes, expected %llu for %u slots", path,
              (long long)sb.st_size, (unsigned long long)slip_serve_ring_bytes(h.nslots), h.nslots);
  m = new slip_serve_ring_map();
  m->bytes = (uint64_t)sb.st_size;
  {
    void *mem = mmap(nullptr, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) SLIP_FAIL(SLIP_ERR_NO_MEMORY, "slip_serve_ring_attach: cannot map %s: errno %d", path, errno);
    m->host = (uint8_t *)mem;
  }
  SLIP_CUDA_CHECK(cudaSetDevice(ctx->device));
  SLIP_CUDA_CHECK(cudaHostRegister(m->host, m->bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  m->registered = true;
  SLIP_CUDA_CHECK(cudaHostGetDevicePointer(&dev, m->host, 0));
  m->dev = (uint64_t)(uintptr_t)dev;
  *out = m;
  m = nullptr;
done:
  if (fd >= 0) close(fd);
  if (m) slip_serve_ring_detach(m);
  return st;
}

extern "C" void *slip_serve_ring_host(const slip_serve_ring_map *m) { return m ? m->host : nullptr; }

extern "C" uint64_t slip_serve_ring_device(const slip_serve_ring_map *m) { return m ? m->dev : 0; }

extern "C" void slip_serve_ring_detach(slip_serve_ring_map *m) {
  if (!m) return;
  if (m->registered) cudaHostUnregister(m->host);
  if (m->host) munmap(m->host, m->bytes);
  delete m;
}

extern "C" void slip_serve_ring_ack(slip_serve_ring_map *m) {
  if (!m) return;
  __atomic_store_n(&((slip_serve_ring_header *)m->host)->holder_pid, (uint64_t)getpid(), __ATOMIC_RELEASE);
}
