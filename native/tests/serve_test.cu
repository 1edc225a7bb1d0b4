// GPU test of the resident serving kernel (slipstream/serve.h), in one process: a host thread is
// the reader (it writes requests into a ring in mapped pinned memory and watches the answers
// there), the GPU's kernel is the holder, serving map outputs from its directory into a landing
// buffer. Checks: blocks and table land byte-exact; every failed check is answered with its code
// and writes nothing; a revoked output is no longer served; the kernel leaves when idle and serves
// again once a request wakes it; ring files are checked when attached; two readers' rings are
// served together. `serve_test bench` measures the
// time from a request's publish to its answer (the software cost of a request: small blocks).
// `serve_test --gpunetio` runs the same checks with the reader pushed to over gpunetio (the
// kernel posts RDMA writes on a queue pair the software NIC executes), and the NIC's own: an
// output with a forged memory key fails with the NIC's error and a reader served by stores beside
// it is not disturbed; an output not registered for the NIC is refused. `serve_test --remote` runs
// them with reader 0 on "another machine": two software NICs linked to each other, each ring in two
// copies (shared files registered on each side's NIC), the reader posting its requests as RDMA
// writes from the host and the kernel answering into the reader's copy; and the remote path's own
// checks: a request written with a forged key of the holder's ring fails at the NIC and reaches
// nothing, a forged output key loses the reader's queue pair and so its answer.
#include <fcntl.h>
#include <sys/mman.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "serve_common.cuh"

namespace {

using namespace serve_test;

constexpr uint32_t kParts = 8;
constexpr uint64_t kLanding = 4ull << 20;
constexpr uint8_t kUntouched = 0xEE;

__global__ void fill(uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = (uint8_t)(slip_hash64(i + seed) >> 17);
}

/* A map output on the device: nparts blocks of the given sizes, their offsets and row counts. */
struct Output {
  slip_region *region = nullptr;  // registered on the context, so the software NIC can read it
  uint8_t *d_bytes = nullptr;
  uint64_t *d_offsets = nullptr;
  uint64_t *d_counts = nullptr;
  std::vector<uint64_t> offsets, counts;
  std::vector<uint8_t> host;
  uint32_t link_key = 0;  // remote mode: the memory key of `region` on the holder's NIC
  void make(slip_ctx *ctx, uint32_t id, const std::vector<uint64_t> &sizes, uint64_t seed) {
    offsets.assign(1, 0);
    for (uint64_t s : sizes) offsets.push_back(offsets.back() + (s + 15) / 16 * 16);
    for (size_t p = 0; p < sizes.size(); p++) counts.push_back(sizes[p] / 8);
    const uint64_t total = std::max<uint64_t>(offsets.back(), 16);
    T_SLIP(slip_region_create(ctx, SLIP_MEM_DEVICE, total, id, &region));
    d_bytes = (uint8_t *)slip_region_ptr(region);
    fill<<<64, 256>>>(d_bytes, total, seed);
    T_LAUNCH();
    T_CUDA(cudaMalloc(&d_offsets, offsets.size() * 8));
    T_CUDA(cudaMalloc(&d_counts, counts.size() * 8));
    T_CUDA(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * 8, cudaMemcpyHostToDevice));
    T_CUDA(cudaMemcpy(d_counts, counts.data(), counts.size() * 8, cudaMemcpyHostToDevice));
    host.resize(total);
    T_CUDA(cudaMemcpy(host.data(), d_bytes, total, cudaMemcpyDeviceToHost));
    // Blocks are their partition's bytes, which the offsets round up to 16: the padding is part of
    // neither; the test's sizes are multiples of 16 so a block is exactly its offsets' span.
  }
};

/* Enters output o as (shuffle, map), with its region for gpunetio readers: its key on the context
 * (the software NIC's local queue sets) and, in remote mode, on the holder's NIC (link queue pairs). */
slip_status put(slip_server *s, uint32_t shuffle, uint64_t map, const Output &o, bool nic = true) {
  return slip_server_put_output(s, shuffle, map, (uint64_t)(uintptr_t)o.d_bytes, (uint64_t)(uintptr_t)o.d_offsets,
                                (uint64_t)(uintptr_t)o.d_counts, (uint32_t)o.offsets.size() - 1,
                                nic ? slip_region_id(o.region) : SLIP_SERVE_NO_NIC,
                                nic ? (uint32_t)slip_region_key(o.region) : 0u, 0, nic ? o.link_key : 0u);
}

struct Rig {
  slip_ctx *ctx = nullptr;
  slip_server *server = nullptr;
  bool gpunetio = false;  // reader 0 is pushed to over gpunetio
  slip_region *landing_region = nullptr;
  slip_region *staging = nullptr;
  slip_remote *landing_remote = nullptr;
  slip_queueset *qs = nullptr;
  uint8_t *d_landing = nullptr;
  Ring ring;
  Output out0, out1;
  std::vector<uint8_t> landing;
  // remote mode: the holder's NIC and the reader's, a link each way (queue pair 0: the kernel's on
  // the holder's link, the reader's host's on the reader's), and the holder's copy of ring 0.
  bool remote = false;
  slip_nic *nic_h = nullptr, *nic_r = nullptr;
  slip_nic_link *link_h = nullptr, *link_r = nullptr;
  slip_serve_ring_map *holder_copy = nullptr;
  std::string holder_path, reader_path;
  uint8_t *reader_copy = nullptr;
  uint64_t ring_bytes = 0;

  // Copies and sets on the legacy default stream: they do not wait for the resident kernel's
  // stream (non-blocking), which a device-wide synchronisation would, until the kernel leaves.
  void reset_landing() {
    T_CUDA(cudaMemset(d_landing, kUntouched, kLanding));
    T_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void read_landing() {
    landing.resize(kLanding);
    T_CUDA(cudaMemcpy(landing.data(), d_landing, kLanding, cudaMemcpyDeviceToHost));
  }
  bool untouched() {
    read_landing();
    return std::all_of(landing.begin(), landing.end(), [](uint8_t b) { return b == kUntouched; });
  }
};

/* The served request lands byte-exact with its table; the rest of the landing is untouched. */
void served_blocks_land_exactly(Rig &r) {
  r.reset_landing();
  slip_serve_request q = request(101, 7, 0);
  // map 10: partitions 0, 3, 7; map 11: partition 1 (an empty block too).
  add_block(q, 10, 0, 4096, 64 * 1024);
  add_block(q, 10, 3, 128 * 1024, 256 * 1024);
  add_block(q, 10, 7, 512 * 1024, 16);
  add_block(q, 11, 1, 1 << 20, 1 << 20);
  const uint64_t posted = mono_ns();
  const uint64_t t = r.ring.post(q);
  slip_serve_done d{};
  EXPECT(r.ring.wait(t, &d), "no answer to ticket %" PRIu64, t);
  const uint64_t seen = mono_ns();
  EXPECT(d.status == SLIP_OK, "status %d (block %u, value %" PRIu64 ")", d.status, d.block, d.value);
  // The answer's instants are in order and, within the launch clock offset's error (half the span
  // of a tiny kernel's launch and sync: microseconds, more under a sanitizer), between the post and
  // the answer seen.
  const uint64_t slack = 2000000;
  EXPECT(d.taken_ns != 0 && d.taken_ns <= d.copy_ns && d.copy_ns <= d.copied_ns && d.copied_ns <= d.answered_ns,
         "answer instants out of order: taken %" PRIu64 ", copy %" PRIu64 ", copied %" PRIu64 ", answered %" PRIu64,
         d.taken_ns, d.copy_ns, d.copied_ns, d.answered_ns);
  EXPECT(d.taken_ns + slack >= posted && d.answered_ns <= seen + slack,
         "answer instants %" PRIu64 "..%" PRIu64 " outside the post at %" PRIu64 " and the answer seen at %" PRIu64,
         d.taken_ns, d.answered_ns, posted, seen);
  r.read_landing();
  uint64_t total = 0;
  const Output *outs[4] = {&r.out0, &r.out0, &r.out0, &r.out1};
  for (uint32_t i = 0; i < q.nblocks; i++) {
    const slip_serve_block &b = q.blocks[i];
    const Output &o = *outs[i];
    const uint64_t len = o.offsets[b.partition + 1] - o.offsets[b.partition];
    total += len;
    EXPECT(memcmp(r.landing.data() + b.dst_offset, o.host.data() + o.offsets[b.partition], len) == 0,
           "block %u: bytes differ", i);
    if (len < b.capacity)
      EXPECT(r.landing[b.dst_offset + len] == kUntouched, "block %u: a byte past its %" PRIu64 " bytes was written", i,
             len);
  }
  EXPECT(d.bytes == total, "answer says %" PRIu64 " bytes, pushed %" PRIu64, d.bytes, total);
  const uint64_t *tb = (const uint64_t *)r.landing.data();
  EXPECT(tb[0] == 101, "table names request %" PRIu64 ", expected 101", tb[0]);
  EXPECT((tb[1] >> 32) == SLIP_SERVE_TABLE_MAGIC && (uint32_t)tb[1] == q.nblocks, "table header 0x%" PRIx64, tb[1]);
  for (uint32_t i = 0; i < q.nblocks; i++) {
    const Output &o = *outs[i];
    const uint32_t p = q.blocks[i].partition;
    EXPECT(tb[2 + 2 * i] == o.offsets[p + 1] - o.offsets[p], "table record %u: %" PRIu64 " bytes", i, tb[2 + 2 * i]);
    EXPECT((tb[3 + 2 * i] >> 32) == o.counts[p], "table record %u: %" PRIu64 " rows, expected %" PRIu64, i,
           tb[3 + 2 * i] >> 32, o.counts[p]);
  }
  EXPECT(r.landing[SLIP_SERVE_TABLE_HEADER + 4 * SLIP_SERVE_TABLE_RECORD] == kUntouched, "bytes after the table written");
}

/* Each bad request is answered with the check's code and writes nothing. */
void failed_checks_write_nothing(Rig &r) {
  struct Case {
    const char *name;
    int status;
    slip_serve_request q;
  };
  std::vector<Case> cases;
  auto base = [] {
    slip_serve_request q = request(200, 7, 0);
    add_block(q, 10, 2, 4096, 64 * 1024);
    return q;
  };
  slip_serve_request q;
  q = base(); q.magic = 0x1234; cases.push_back({"wrong magic", SLIP_ERR_BAD_DESCRIPTOR, q});
  q = base(); q.nblocks = SLIP_SERVE_MAX_BLOCKS + 1; cases.push_back({"too many blocks", SLIP_ERR_BAD_DESCRIPTOR, q});
  q = base(); q.landing_key ^= 1; cases.push_back({"forged landing key", SLIP_ERR_BAD_KEY, q});
  q = base(); q.table_offset = kLanding - 16; cases.push_back({"table past the landing", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.table_offset = 8; cases.push_back({"misaligned table", SLIP_ERR_INVALID_ARG, q});
  q = base(); q.blocks[0].dst_offset = kLanding - 4096; cases.push_back({"block past the landing", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.blocks[0].dst_offset = 4104; cases.push_back({"misaligned block", SLIP_ERR_INVALID_ARG, q});
  q = base(); q.blocks[0].dst_offset = 0; cases.push_back({"block over the table", SLIP_ERR_INVALID_ARG, q});
  q = base(); add_block(q, 10, 3, 8192, 64 * 1024); cases.push_back({"blocks overlap", SLIP_ERR_INVALID_ARG, q});
  q = base(); q.blocks[0].map_id = 99; cases.push_back({"unknown map output", SLIP_ERR_BAD_REGION, q});
  q = base(); q.shuffle_id = 8; cases.push_back({"unknown shuffle", SLIP_ERR_BAD_REGION, q});
  q = base(); q.blocks[0].partition = kParts; cases.push_back({"partition out of range", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.blocks[0].capacity = 16; cases.push_back({"block larger than its capacity", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.deadline_ns = mono_ns() - 1000; cases.push_back({"past its deadline", SLIP_ERR_TIMEOUT, q});
  q = base(); q.flags = 2; cases.push_back({"unknown flag", SLIP_ERR_BAD_DESCRIPTOR, q});
  q = base(); q.flags = 5u << 8; cases.push_back({"signal pieces without the flag", SLIP_ERR_BAD_DESCRIPTOR, q});
  q = base(); q.flags = SLIP_SERVE_SIGNAL | 2u << 8; q.signal_offset = 4;
  cases.push_back({"misaligned signal", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.flags = SLIP_SERVE_SIGNAL | 2u << 8; q.signal_offset = 24;
  cases.push_back({"signal over the table", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.flags = SLIP_SERVE_SIGNAL | 2u << 8; q.signal_offset = kLanding - 4;
  cases.push_back({"signal past the landing", SLIP_ERR_OUT_OF_RANGE, q});
  q = base(); q.flags = SLIP_SERVE_SIGNAL | 2u << 8; q.signal_offset = 8192;
  cases.push_back({"signal over a block", SLIP_ERR_INVALID_ARG, q});
  // A good block before a bad one: nothing of the request is written.
  q = base(); add_block(q, 10, 4, 1 << 20, 16); cases.push_back({"second block too large", SLIP_ERR_OUT_OF_RANGE, q});
  for (const Case &c : cases) {
    r.reset_landing();
    const uint64_t t = r.ring.post(c.q);
    slip_serve_done d{};
    EXPECT(r.ring.wait(t, &d), "%s: no answer", c.name);
    EXPECT(d.status == c.status, "%s: status %d (%s), expected %d", c.name, d.status,
           slip_status_name((slip_status)d.status), c.status);
    EXPECT(r.untouched(), "%s: the landing buffer was written", c.name);
    EXPECT(d.taken_ns != 0 && d.copy_ns == 0 && d.copied_ns == 0 && d.answered_ns >= d.taken_ns,
           "%s: answer instants taken %" PRIu64 ", copy %" PRIu64 ", copied %" PRIu64 ", answered %" PRIu64
           ", expected no copy",
           c.name, d.taken_ns, d.copy_ns, d.copied_ns, d.answered_ns);
  }
  printf("serve: %zu refused requests answered with their check's code, nothing written\n", cases.size());
}

/* With SLIP_SERVE_SIGNAL the signal word follows the table: its pieces above block and table bytes. */
void signal_word_is_written_when_asked(Rig &r) {
  r.reset_landing();
  slip_serve_request q = request(150, 7, 0);
  add_block(q, 10, 2, 4096, 64 * 1024);
  q.flags = SLIP_SERVE_SIGNAL | 9u << 8;
  q.signal_offset = 2048;
  // Readers zero the word with the rest of their range (a gpunetio push adds to it).
  T_CUDA(cudaMemset(r.d_landing + 2048, 0, 8));
  T_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  const uint64_t t = r.ring.post(q);
  slip_serve_done d{};
  EXPECT(r.ring.wait(t, &d) && d.status == SLIP_OK, "status %d", d.status);
  r.read_landing();
  uint64_t sig = 0;
  memcpy(&sig, r.landing.data() + 2048, 8);
  const uint64_t want = 9ull << 40 | (d.bytes + SLIP_SERVE_TABLE_HEADER + SLIP_SERVE_TABLE_RECORD);
  EXPECT(sig == want, "signal 0x%" PRIx64 ", expected 0x%" PRIx64, sig, want);
  EXPECT(r.landing[2048 + 8] == kUntouched, "a byte past the signal was written");
}

void revoked_output_is_not_served(Rig &r) {
  T_SLIP(slip_server_revoke_output(r.server, 7, 11, 1000000000ull));
  r.reset_landing();
  slip_serve_request q = request(300, 7, 0);
  add_block(q, 11, 1, 4096, 1 << 20);
  const uint64_t t = r.ring.post(q);
  slip_serve_done d{};
  EXPECT(r.ring.wait(t, &d), "no answer");
  EXPECT(d.status == SLIP_ERR_BAD_REGION, "revoked output served: status %d", d.status);
  EXPECT(r.untouched(), "a revoked output was written");
  EXPECT(slip_server_revoke_output(r.server, 7, 11, 1000) == SLIP_ERR_BAD_REGION, "revoked twice");
  // Back in the directory (another slot: the old one is a tombstone), served again.
  T_SLIP(put(r.server, 7, 11, r.out1));
  const uint64_t t2 = r.ring.post(q);
  EXPECT(r.ring.wait(t2, &d) && d.status == SLIP_OK, "entered again: status %d", d.status);
}

/* Revoked slots are taken again: far more outputs than the directory has slots come and go, and
 * the last one entered is served its own bytes (not another output's from the same slot). */
void directory_slots_are_taken_again(Rig &r) {
  for (uint64_t k = 0; k < 300; k++) {
    const Output &o = (k & 1) ? r.out1 : r.out0;
    T_SLIP(put(r.server, 50, 1000 + k, o));
    if (k % 50 == 0 || k == 299) {
      r.reset_landing();
      slip_serve_request q = request(500 + k, 50, 0);
      add_block(q, 1000 + k, 1, 4096, 1 << 20);
      const uint64_t t = r.ring.post(q);
      slip_serve_done d{};
      EXPECT(r.ring.wait(t, &d) && d.status == SLIP_OK, "output %" PRIu64 ": status %d", k, d.status);
      r.read_landing();
      const uint64_t len = o.offsets[2] - o.offsets[1];
      EXPECT(d.bytes == len && memcmp(r.landing.data() + 4096, o.host.data() + o.offsets[1], len) == 0,
             "output %" PRIu64 ": %" PRIu64 " bytes served, expected its own %" PRIu64, k, d.bytes, len);
    }
    if (k < 299) T_SLIP(slip_server_revoke_output(r.server, 50, 1000 + k, 1000000000ull));
  }
  T_SLIP(slip_server_revoke_output(r.server, 50, 1299, 1000000000ull));
  printf("serve: 300 outputs entered and revoked in a directory of 64 slots\n");
}

void idle_kernel_leaves_and_a_request_wakes_it(Rig &r, uint64_t idle_ns) {
  const uint64_t t0 = mono_ns();
  while (slip_server_resident(r.server) && mono_ns() - t0 < 20 * idle_ns + 1000000000ull) usleep(100);
  EXPECT(!slip_server_resident(r.server), "still resident %" PRIu64 " ns after its last request", mono_ns() - t0);
  slip_serve_request q = request(400, 7, 0);
  add_block(q, 10, 5, 4096, 128 * 1024);
  int launched = 0;
  T_SLIP(slip_server_wake(r.server, &launched));
  EXPECT(launched == 0, "woken with no request in any ring");
  const uint64_t t = r.ring.post(q);
  r.ring.flush();  // a remote reader's request is in the holder's copy of the ring
  T_SLIP(slip_server_wake(r.server, &launched));
  EXPECT(launched == 1, "a request after idle did not wake the kernel");
  T_SLIP(slip_server_wake(r.server, &launched));
  EXPECT(launched == 0, "woken twice");
  slip_serve_done d{};
  EXPECT(r.ring.wait(t, &d) && d.status == SLIP_OK, "after a start: status %d", d.status);
}

/* A file that is not a ring, or is not the size its header says, is refused when a holder attaches it. */
void forged_ring_files_are_refused(Rig &r) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/slipstream-serve-test-%d", (int)getpid());
  slip_serve_ring_header h{};
  h.magic = SLIP_SERVE_RING_MAGIC;
  h.version = SLIP_SERVE_VERSION;
  h.nslots = 16;
  h.slot_bytes = SLIP_SERVE_SLOT_BYTES;
  struct Case {
    const char *name;
    slip_serve_ring_header header;
    uint64_t bytes;
    slip_status want;
  };
  slip_serve_ring_header bad_magic = h, bad_slots = h;
  bad_magic.magic ^= 1;
  bad_slots.nslots = 24;
  const Case cases[] = {
      {"good", h, slip_serve_ring_bytes(16), SLIP_OK},
      {"wrong magic", bad_magic, slip_serve_ring_bytes(16), SLIP_ERR_BAD_DESCRIPTOR},
      {"24 slots", bad_slots, slip_serve_ring_bytes(24), SLIP_ERR_BAD_DESCRIPTOR},
      {"short file", h, slip_serve_ring_bytes(16) - 32, SLIP_ERR_BAD_DESCRIPTOR},
      {"header only", h, SLIP_SERVE_RING_HEADER / 2, SLIP_ERR_BAD_DESCRIPTOR},
  };
  for (const Case &c : cases) {
    FILE *f = fopen(path, "wb");
    EXPECT(f != nullptr, "cannot make %s", path);
    if (!f) return;
    std::vector<uint8_t> bytes(c.bytes, 0);
    memcpy(bytes.data(), &c.header, std::min<size_t>(sizeof c.header, bytes.size()));
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
    slip_serve_ring_map *m = nullptr;
    const slip_status st = slip_serve_ring_attach(r.ctx, path, &m);
    EXPECT(st == c.want, "%s: status %d, expected %d (%s)", c.name, st, c.want, slip_last_error());
    EXPECT((m != nullptr) == (c.want == SLIP_OK), "%s: handle %p", c.name, (void *)m);
    EXPECT(!m || (slip_serve_ring_host(m) && slip_serve_ring_device(m)), "%s: no addresses", c.name);
    slip_serve_ring_detach(m);
  }
  unlink(path);
  EXPECT(slip_serve_ring_attach(r.ctx, path, nullptr) == SLIP_ERR_INVALID_ARG, "null out accepted");
  slip_serve_ring_map *m = nullptr;
  EXPECT(slip_serve_ring_attach(r.ctx, path, &m) == SLIP_ERR_INVALID_ARG && !m, "a missing file attached");
  printf("serve: ring files checked when attached (%zu cases)\n", sizeof cases / sizeof cases[0]);
}

void two_readers_are_served_together(Rig &r) {
  Ring second;
  uint8_t *d_landing2 = nullptr;
  T_SLIP(slip_server_stop(r.server));  // allocations below may wait for the device
  second.make(16);
  T_CUDA(cudaMalloc(&d_landing2, kLanding));
  T_SLIP(slip_server_set_reader(r.server, 1, second.dev, second.host, (uint64_t)(uintptr_t)d_landing2, kLanding, kKey));
  T_SLIP(slip_server_start(r.server, nullptr));
  // Tickets posted and not yet answered, per ring: a slot is reused only after its answer was read
  // (a later lap's answer replaces it).
  std::vector<uint64_t> open1, open2;
  int ok = 0;
  auto settle = [&ok](Ring &ring, std::vector<uint64_t> &open, size_t keep) {
    while (open.size() > keep) {
      slip_serve_done d{};
      const bool got = ring.wait(open.front(), &d);
      EXPECT(got, "ticket %" PRIu64 ": no answer", open.front());
      ok += got && d.status == SLIP_OK;
      open.erase(open.begin());
    }
  };
  for (int i = 0; i < 64; i++) {
    slip_serve_request q = request(500 + i, 7, 0);
    add_block(q, 10, (uint32_t)(i % kParts), 4096 + (uint64_t)(i % 4) * (512 << 10), 256 * 1024);
    Ring &ring = i % 2 ? second : r.ring;
    std::vector<uint64_t> &open = i % 2 ? open2 : open1;
    settle(ring, open, ring.nslots - 1);
    open.push_back(ring.post(q));
  }
  settle(r.ring, open1, 0);
  settle(second, open2, 0);
  EXPECT(ok == 64, "%d of 64 requests of two readers served", ok);
  T_SLIP(slip_server_stop(r.server));
  T_SLIP(slip_server_clear_reader(r.server, 1));
  T_CUDA(cudaFree(d_landing2));
  T_CUDA(cudaFreeHost(second.host));
}

/* gpunetio reader: an output not registered for the NIC is refused before anything is posted; an
 * output whose memory key is forged fails at the NIC (the responder's key check) and the reader's
 * landing is not written. The queue pair is in the error state afterwards, as on a NIC: the kernel
 * takes no more requests from that ring and says in its header that it is not served; the host does
 * not wake the kernel for it. Once the entry is set again over a new queue pair (a fresh ring), the
 * reader is served again. */
void nic_checks(Rig &r) {
  slip_serve_request q = request(700, 12, 0);
  add_block(q, 60, 1, 4096, 1 << 20);
  r.reset_landing();
  T_SLIP(put(r.server, 12, 60, r.out1, false));
  uint64_t t = r.ring.post(q);
  slip_serve_done d{};
  EXPECT(r.ring.wait(t, &d), "unregistered output: no answer");
  EXPECT(d.status == SLIP_ERR_BAD_REGION && d.block == 0 && d.value == 60,
         "unregistered output: status %d block %u value %" PRIu64 ", expected %d, 0, 60", d.status, d.block, d.value,
         SLIP_ERR_BAD_REGION);
  EXPECT(r.untouched(), "unregistered output: the landing was written");
  T_SLIP(slip_server_revoke_output(r.server, 12, 60, 1000000000ull));
  T_SLIP(slip_server_put_output(r.server, 12, 61, (uint64_t)(uintptr_t)r.out1.d_bytes,
                                (uint64_t)(uintptr_t)r.out1.d_offsets, 0, kParts, slip_region_id(r.out1.region),
                                (uint32_t)slip_region_key(r.out1.region) ^ 0x40u, 0, 0));
  q.blocks[0].map_id = 61;
  q.request_id = 701;
  t = r.ring.post(q);
  EXPECT(r.ring.wait(t, &d), "forged key: no answer");
  EXPECT(d.status == SLIP_ERR_BAD_KEY || d.status == SLIP_ERR_PEER, "forged key: status %d (%s), expected %d or %d",
         d.status, slip_status_name((slip_status)d.status), SLIP_ERR_BAD_KEY, SLIP_ERR_PEER);
  EXPECT(r.untouched(), "forged key: the landing was written");
  const auto *h = (const slip_serve_ring_header *)r.ring.host;
  EXPECT(__atomic_load_n(&h->holder_pid, __ATOMIC_ACQUIRE) == 0, "after the error the ring still says it is served");
  q.request_id = 703;
  t = r.ring.post(q);
  EXPECT(!r.ring.wait(t, &d, 200000000ull), "a ring let go of was served: status %d", d.status);
  T_SLIP(slip_server_stop(r.server));
  int launched = 0;
  T_SLIP(slip_server_wake(r.server, &launched));
  EXPECT(launched == 0, "woken for a ring the kernel let go of");
  EXPECT(slip_queueset_check(r.qs, 0) != SLIP_OK, "forged key: the queue set recorded no error");
  printf("serve: forged key refused by the NIC: %s\n", slip_last_error());
  T_SLIP(slip_server_revoke_output(r.server, 12, 61, 1000000000ull));
  // Served again over a new queue pair (a failed one is replaced, as a NIC link is), from a fresh ring.
  slip_queueset *old = r.qs;
  const slip_region *locals[1] = {r.staging};
  const slip_remote *remotes[1] = {r.landing_remote};
  T_SLIP(slip_queueset_create(r.ctx, SLIP_BACKEND_GPUNETIO, 1, 1024, locals, 1, remotes, 1, &r.qs));
  r.ring.make(64);
  T_SLIP(slip_server_set_reader_nic(r.server, 0, r.ring.dev, r.ring.host,
                                    (uint64_t)(uintptr_t)slip_queueset_device(r.qs), 1, 0, kLanding, kKey));
  slip_queueset_destroy(old);
  T_SLIP(slip_server_start(r.server, nullptr));
  q.blocks[0].map_id = 11;
  q.shuffle_id = 7;
  q.request_id = 702;
  t = r.ring.post(q);
  const bool answered = r.ring.wait(t, &d);
  const slip_status qst = slip_queueset_check(r.qs, 0);
  EXPECT(answered, "over a new queue pair: no answer");
  EXPECT(!answered || d.status == SLIP_OK, "over a new queue pair: status %d block %u value 0x%" PRIx64 "; queue set: %s",
         d.status, d.block, d.value, qst == SLIP_OK ? "no error" : slip_last_error());
  r.read_landing();
  const uint64_t len = r.out1.offsets[2] - r.out1.offsets[1];
  EXPECT(d.bytes == len && memcmp(r.landing.data() + 4096, r.out1.host.data() + r.out1.offsets[1], len) == 0,
         "over a new queue pair: %" PRIu64 " bytes, expected %" PRIu64 " landed exactly", d.bytes, len);
  printf("serve: gpunetio checks of the NIC done\n");
}

/* remote reader: an output whose memory key is forged fails at the holder's NIC, so the reader's
 * queue pair fails and the request's answer, which went in its batch, never reaches the reader (its
 * deadline would send it the host-driven way); the kernel lets go of the ring. A request written
 * into the holder's ring with a forged key of that ring fails at the reader's NIC with the remote
 * access error and writes nothing there, and its queue pair posts nothing more. A queue pair the
 * host posts on is refused to a queue set. */
void remote_checks(Rig &r) {
  slip_serve_request q = request(800, 12, 0);
  add_block(q, 61, 1, 4096, 1 << 20);
  r.reset_landing();
  T_SLIP(slip_server_put_output(r.server, 12, 61, (uint64_t)(uintptr_t)r.out1.d_bytes,
                                (uint64_t)(uintptr_t)r.out1.d_offsets, 0, kParts, slip_region_id(r.out1.region),
                                (uint32_t)slip_region_key(r.out1.region), 0, r.out1.link_key ^ 0x40u));
  uint64_t t = r.ring.post(q);
  EXPECT(r.ring.posted == SLIP_OK, "post: %s", slip_last_error());
  slip_serve_done d{};
  EXPECT(!r.ring.wait(t, &d, 300000000ull), "forged output key: an answer reached the reader (status %d)", d.status);
  EXPECT(r.untouched(), "forged output key: the landing was written");
  const auto *h = (const slip_serve_ring_header *)slip_serve_ring_host(r.holder_copy);
  EXPECT(__atomic_load_n(&h->holder_pid, __ATOMIC_ACQUIRE) == 0, "after the error the ring still says it is served");
  EXPECT(slip_queueset_check(r.qs, 0) != SLIP_OK, "forged output key: the queue set recorded no error");
  printf("serve: remote reader, forged output key refused by the NIC: %s\n", slip_last_error());
  T_SLIP(slip_server_stop(r.server));
  T_SLIP(slip_server_revoke_output(r.server, 12, 61, 1000000000ull));

  // The holder's copy of the next slot, before a write with a forged key of it.
  const uint8_t *hc = (const uint8_t *)slip_serve_ring_host(r.holder_copy);
  const uint64_t slot_off = SLIP_SERVE_RING_HEADER + (r.ring.next & (r.ring.nslots - 1)) * SLIP_SERVE_SLOT_BYTES;
  std::vector<uint8_t> before(hc + slot_off, hc + slot_off + SLIP_SERVE_SLOT_BYTES);
  r.ring.remote_mkey ^= 0x40u;
  q.request_id = 801;
  r.ring.post(q);
  const slip_status drained = slip_nic_host_drain(r.link_r, 0, 2000000000ull);
  EXPECT(drained == SLIP_ERR_PEER && strstr(slip_last_error(), "remote access error"),
         "forged ring key: drain %d (%s), expected SLIP_ERR_PEER with the remote access error", drained,
         slip_last_error());
  EXPECT(memcmp(before.data(), hc + slot_off, SLIP_SERVE_SLOT_BYTES) == 0, "forged ring key: the holder's ring was written");
  r.ring.remote_mkey ^= 0x40u;
  r.ring.post(q);
  EXPECT(r.ring.posted == SLIP_ERR_PEER, "a failed queue pair posted again: %d", r.ring.posted);
  slip_queueset *qs = nullptr;
  slip_nic_remote any = {slip_region_id(r.landing_region), 1, 4096};
  EXPECT(slip_queueset_create_link(r.ctx, r.link_r, 0, 1, nullptr, 0, &any, 1, &qs) == SLIP_ERR_STATE &&
             strstr(slip_last_error(), "posted on by the host"),
         "a host-driven queue pair given to a queue set: %s", slip_last_error());
  printf("serve: remote reader, forged ring key refused by the NIC, nothing written\n");
}

/* Publish-to-answer times of n single-block requests of `bytes`, one at a time. */
void bench(Rig &r, uint64_t bytes, int n) {
  std::vector<double> us, copy_us, rest_us;
  for (int i = 0; i < n; i++) {
    slip_serve_request q = request(1000 + i, 9, 0);
    add_block(q, 20, 0, 4096, bytes);
    const uint64_t t0 = mono_ns();
    const uint64_t t = r.ring.post(q);
    slip_serve_done d{};
    if (!r.ring.wait(t, &d) || d.status != SLIP_OK) {
      EXPECT(false, "bench request %d: status %d", i, d.status);
      return;
    }
    const double total = (mono_ns() - t0) / 1000.0;
    const double copy = (d.copied_ns - d.copy_ns) / 1000.0;
    us.push_back(total);
    copy_us.push_back(copy);
    rest_us.push_back(total - copy);
  }
  std::sort(us.begin(), us.end());
  std::sort(copy_us.begin(), copy_us.end());
  std::sort(rest_us.begin(), rest_us.end());
  printf("serve bench: %" PRIu64 " B blocks, %d requests one at a time: publish to answer median %.2f us, p10 %.2f, "
         "p90 %.2f, p99 %.2f; the kernel's copy (and table) median %.2f us; the rest median %.2f us, p90 %.2f\n",
         bytes, n, us[n / 2], us[n / 10], us[n * 9 / 10], us[n * 99 / 100], copy_us[n / 2], rest_us[n / 2],
         rest_us[n * 9 / 10]);
}

/* Makes `path` as a ring file of n slots (formatted as its maker does) and maps it; *bytes its size. */
uint8_t *make_ring_file(const std::string &path, uint32_t n, uint64_t *bytes) {
  *bytes = slip_serve_ring_bytes(n);
  unlink(path.c_str());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  EXPECT(fd >= 0 && ftruncate(fd, (off_t)*bytes) == 0, "cannot make %s", path.c_str());
  void *m = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  EXPECT(m != MAP_FAILED, "cannot map %s", path.c_str());
  if (m != MAP_FAILED) format_header(m, n);
  return (uint8_t *)m;
}

/* Reader 0 on another "machine": the reader's NIC has the landing region and its copy of the ring;
 * the holder's NIC has the outputs, the staging region and the holder's copy. */
void setup_remote(Rig &r, uint32_t ctas, uint64_t landing_len, Output *bench_out) {
  constexpr uint32_t kRingId = 40, kMirrorId = 41;
  T_SLIP(slip_nic_open("softnic", 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &r.nic_h));
  T_SLIP(slip_nic_open("softnic", 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &r.nic_r));
  T_SLIP(slip_nic_link_create(r.nic_h, 1, 1024, &r.link_h));
  T_SLIP(slip_nic_link_create(r.nic_r, 1, 1024, &r.link_r));
  slip_nic_qp_info ih, ir;
  T_SLIP(slip_nic_qp_info_get(r.link_h, 0, &ih));
  T_SLIP(slip_nic_qp_info_get(r.link_r, 0, &ir));
  T_SLIP(slip_nic_connect(r.link_h, 0, &ir));
  T_SLIP(slip_nic_connect(r.link_r, 0, &ih));
  uint32_t mkey = 0, landing_mkey = 0;
  for (Output *o : {&r.out0, &r.out1, bench_out})
    if (o) T_SLIP(slip_nic_reg(r.nic_h, o->d_bytes, slip_region_length(o->region), slip_region_id(o->region), &o->link_key));
  T_SLIP(slip_region_create(r.ctx, SLIP_MEM_DEVICE, (uint64_t)ctas * SLIP_SERVE_STAGING_BYTES, 31, &r.staging));
  T_SLIP(slip_nic_reg(r.nic_h, slip_region_ptr(r.staging), slip_region_length(r.staging), 31, &mkey));
  T_SLIP(slip_nic_reg(r.nic_r, r.d_landing, landing_len, slip_region_id(r.landing_region), &landing_mkey));
  // The rings: the holder's copy attached as a holder attaches a ring file; the reader's mapped and
  // registered with the GPU here (the software NIC's engine copies through it).
  const std::string base = "/dev/shm/slipstream-serve-test-" + std::to_string(getpid());
  r.holder_path = base + "-holder";
  r.reader_path = base + "-reader";
  uint8_t *hm = make_ring_file(r.holder_path, 64, &r.ring_bytes);
  munmap(hm, r.ring_bytes);
  T_SLIP(slip_serve_ring_attach(r.ctx, r.holder_path.c_str(), &r.holder_copy));
  r.reader_copy = make_ring_file(r.reader_path, 64, &r.ring_bytes);
  T_CUDA(cudaHostRegister(r.reader_copy, r.ring_bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void *rdev = nullptr;
  T_CUDA(cudaHostGetDevicePointer(&rdev, r.reader_copy, 0));
  r.ring.format(r.reader_copy, (uint64_t)(uintptr_t)rdev, 64);
  uint32_t ring_mkey = 0, mirror_mkey = 0;
  EXPECT(slip_nic_reg_file(r.nic_h, slip_serve_ring_host(r.holder_copy), r.ring_bytes, kRingId,
                           (base + "-missing").c_str(), &ring_mkey) == SLIP_ERR_INVALID_ARG &&
             strstr(slip_last_error(), "-missing"),
         "a ring registered with a file that is not there: %s", slip_last_error());
  std::vector<uint8_t> unpinned(4096);
  EXPECT(slip_nic_reg_file(r.nic_h, unpinned.data(), 4096, kRingId, r.holder_path.c_str(), &ring_mkey) ==
             SLIP_ERR_INVALID_ARG && strstr(slip_last_error(), "not host memory registered with the GPU"),
         "host memory the GPU cannot address registered: %s", slip_last_error());
  T_SLIP(slip_nic_reg_file(r.nic_h, slip_serve_ring_host(r.holder_copy), r.ring_bytes, kRingId, r.holder_path.c_str(),
                           &ring_mkey));
  T_SLIP(slip_nic_reg_file(r.nic_r, r.reader_copy, r.ring_bytes, kMirrorId, r.reader_path.c_str(), &mirror_mkey));
  r.ring.link = r.link_r;
  r.ring.qp = 0;
  r.ring.local_id = kMirrorId;
  r.ring.local_mkey = mirror_mkey;
  r.ring.remote_id = kRingId;
  r.ring.remote_mkey = ring_mkey;
  // Table of the holder's queue: 0 its staging region, 1 the reader's landing region.
  const slip_region *locals[1] = {r.staging};
  const slip_nic_remote landing = {slip_region_id(r.landing_region), landing_mkey, landing_len};
  T_SLIP(slip_queueset_create_link(r.ctx, r.link_h, 0, 1, locals, 1, &landing, 1, &r.qs));
  const uint64_t qdev = (uint64_t)(uintptr_t)slip_queueset_device(r.qs);
  EXPECT(slip_server_set_reader_remote(r.server, 0, slip_serve_ring_device(r.holder_copy),
                                       slip_serve_ring_host(r.holder_copy), qdev, 1, 0, landing_len, kKey, kRingId, 0,
                                       kMirrorId, mirror_mkey) == SLIP_ERR_INVALID_ARG,
         "a remote reader without its ring's memory key accepted");
  T_SLIP(slip_server_set_reader_remote(r.server, 0, slip_serve_ring_device(r.holder_copy),
                                       slip_serve_ring_host(r.holder_copy), qdev, 1, 0, landing_len, kKey, kRingId,
                                       ring_mkey, kMirrorId, mirror_mkey));
  slip_serve_ring_ack(r.holder_copy);
}

void teardown_remote(Rig &r) {
  slip_nic_link_destroy(r.link_h);
  slip_nic_link_destroy(r.link_r);
  slip_serve_ring_detach(r.holder_copy);
  (void)cudaHostUnregister(r.reader_copy);
  munmap(r.reader_copy, r.ring_bytes);
  slip_nic_close(r.nic_h);
  slip_nic_close(r.nic_r);
  unlink(r.holder_path.c_str());
  unlink(r.reader_path.c_str());
}

}  // namespace

int main(int argc, char **argv) {
  // serve_test [bench] [--gpunetio | --remote] [--ctas N] [--threads N]: the server's CTAs (2 unless
  // given; a request over 128 KiB is copied by all of them), threads per CTA (256), and whether
  // reader 0 is pushed to over gpunetio (the software NIC) instead of with stores, and is on another
  // "machine" (two software NICs, rings in two copies).
  bool do_bench = false, gpunetio = false, remote = false;
  uint32_t ctas = 2, threads = 256;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "bench") == 0) {
      do_bench = true;
    } else if (strcmp(argv[i], "--gpunetio") == 0) {
      gpunetio = true;
    } else if (strcmp(argv[i], "--remote") == 0) {
      gpunetio = remote = true;
    } else if (strcmp(argv[i], "--ctas") == 0 && i + 1 < argc) {
      ctas = (uint32_t)strtoul(argv[++i], nullptr, 10);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = (uint32_t)strtoul(argv[++i], nullptr, 10);
    } else {
      fprintf(stderr, "serve_test: unknown argument %s, expected bench, --gpunetio, --remote, --ctas N or --threads N\n",
              argv[i]);
      return 2;
    }
  }
  int ngpus = 0;
  if (slip_cuda_probe(&ngpus) != SLIP_OK || ngpus == 0) {
    printf("SKIP: %s\n", slip_last_error());
    return 77;
  }
#if !SLIP_HAVE_GPUNETIO
  if (gpunetio) {
    printf("SKIP: built without the GPUNetIO device headers (SLIP_GPUNETIO_INCLUDE)\n");
    return 77;
  }
#endif
  Rig r;
  r.gpunetio = gpunetio;
  r.remote = remote;
  T_SLIP(slip_ctx_create(0, &r.ctx));
  const uint64_t idle_ns = do_bench ? 10000000000ull : 20000000ull;
  T_SLIP(slip_server_create(r.ctx, 4, 64, ctas, threads, idle_ns, &r.server));
  printf("serve: %u CTAs x %u threads, reader 0 pushed to %s\n", ctas, threads,
         remote ? "from another software NIC's host (rings in two copies)"
                : gpunetio ? "over gpunetio (software NIC)" : "with stores");
  // The bench's largest request (16 MiB) needs a landing region larger than the tests'.
  const uint64_t landing_len = do_bench ? kLanding + (16ull << 20) : kLanding;
  T_SLIP(slip_region_create(r.ctx, SLIP_MEM_DEVICE, landing_len, 30, &r.landing_region));
  r.d_landing = (uint8_t *)slip_region_ptr(r.landing_region);
  std::vector<uint64_t> sizes0, sizes1;
  for (uint32_t p = 0; p < kParts; p++) sizes0.push_back(p == 7 ? 16 : (uint64_t)(p + 1) * 16 * 1000);
  for (uint32_t p = 0; p < kParts; p++) sizes1.push_back(p == 1 ? 1000000 : 0);
  r.out0.make(r.ctx, 20, sizes0, 1);
  r.out1.make(r.ctx, 21, sizes1, 2);
  Output bench_out;
  if (do_bench) bench_out.make(r.ctx, 22, {16 << 20}, 3);
  if (!remote) r.ring.make(64);
  T_CUDA(cudaDeviceSynchronize());
  if (remote) {
    setup_remote(r, ctas, landing_len, do_bench ? &bench_out : nullptr);
  } else if (gpunetio) {
    // Table: 0 the staging region (a slot per CTA), 1 the landing region (this process's own,
    // aliased: the software NIC writes it as it would a peer's).
    T_SLIP(slip_region_create(r.ctx, SLIP_MEM_DEVICE, (uint64_t)ctas * SLIP_SERVE_STAGING_BYTES, 31, &r.staging));
    T_SLIP(slip_remote_alias(r.landing_region, &r.landing_remote));
    const slip_region *locals[1] = {r.staging};
    const slip_remote *remotes[1] = {r.landing_remote};
    T_SLIP(slip_queueset_create(r.ctx, SLIP_BACKEND_GPUNETIO, 1, 1024, locals, 1, remotes, 1, &r.qs));
    const uint64_t qdev = (uint64_t)(uintptr_t)slip_queueset_device(r.qs);
    EXPECT(slip_server_set_reader_nic(r.server, 0, r.ring.dev, r.ring.host, qdev, 1, 1, landing_len, kKey) ==
               SLIP_ERR_INVALID_ARG,
           "landing and staging on one table entry accepted");
    T_SLIP(slip_server_set_reader_nic(r.server, 0, r.ring.dev, r.ring.host, qdev, 1, 0, landing_len, kKey));
  } else {
    T_SLIP(slip_server_set_reader(r.server, 0, r.ring.dev, r.ring.host, (uint64_t)(uintptr_t)r.d_landing, landing_len,
                                  kKey));
  }
  T_SLIP(put(r.server, 7, 10, r.out0));
  T_SLIP(put(r.server, 7, 11, r.out1));
  EXPECT(put(r.server, 7, 10, r.out0) == SLIP_ERR_STATE, "an output entered twice");
  slip_serve_ring_header bad = *(slip_serve_ring_header *)r.ring.host;
  bad.nslots = 3;
  EXPECT(slip_server_set_reader(r.server, 2, r.ring.dev, &bad, (uint64_t)(uintptr_t)r.d_landing, kLanding, kKey) ==
             SLIP_ERR_BAD_DESCRIPTOR,
         "a ring of 3 slots accepted");
  forged_ring_files_are_refused(r);
  int launched = 0;
  T_SLIP(slip_server_start(r.server, &launched));
  EXPECT(launched == 1 && slip_server_resident(r.server), "not resident after start");
  if (do_bench) {
    // Map output of shuffle 9: one 16 MiB block; the requests take the first `bytes` of it.
    std::vector<uint64_t> offs = {0, 0};
    for (uint64_t bytes : {16ull, 4096ull, 65536ull, 1ull << 20, 16ull << 20}) {
      offs[1] = bytes;
      T_CUDA(cudaMemcpy(bench_out.d_offsets, offs.data(), 16, cudaMemcpyHostToDevice));
      T_SLIP(put(r.server, 9, 20, bench_out));
      bench(r, bytes, bytes > (1u << 20) ? 500 : 2000);
      T_SLIP(slip_server_revoke_output(r.server, 9, 20, 1000000000ull));
    }
  } else {
    served_blocks_land_exactly(r);
    failed_checks_write_nothing(r);
    signal_word_is_written_when_asked(r);
    revoked_output_is_not_served(r);
    directory_slots_are_taken_again(r);
    idle_kernel_leaves_and_a_request_wakes_it(r, idle_ns);
    two_readers_are_served_together(r);
    if (remote) {
      T_SLIP(slip_server_start(r.server, nullptr));
      remote_checks(r);
    } else if (gpunetio) {
      T_SLIP(slip_server_start(r.server, nullptr));
      nic_checks(r);
    }
  }
  slip_serve_stats stats;
  T_SLIP(slip_server_stats(r.server, &stats));
  printf("serve: %" PRIu64 " requests served, %" PRIu64 " refused, %" PRIu64 " bytes pushed\n", stats.served,
         stats.failed, stats.bytes);
  T_SLIP(slip_server_stop(r.server));
  EXPECT(!slip_server_resident(r.server), "resident after stop");
  slip_server_destroy(r.server);
  slip_queueset_destroy(r.qs);
  if (remote) teardown_remote(r);
  slip_remote_destroy(r.landing_remote);
  slip_region_destroy(r.staging);
  slip_region_destroy(r.landing_region);
  slip_ctx_destroy(r.ctx);
  return check_report("serve_test");
}
