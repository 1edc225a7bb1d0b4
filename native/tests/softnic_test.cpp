// CPU-only tests of the gpunetio software NIC: the mlx5 WQE decoder and CQE writer, and the NIC
// thread driven by a host producer that writes WQEs the way DOCA GPUNetIO's device code does
// (its own big-endian encoder, written from the mlx5 layout, not from the decoder). Covers
// delivery, inline writes, fetch-add with the fetched value returned big-endian, owner bits over
// several laps, signal-after-data ordering, and the error paths: wrong rkey or lkey, out-of-range,
// unknown opcode, wrong QP number, a stale slot; each gives an error CQE with its syndrome, writes
// nothing, and flushes the rest of the queue pair until it is cleared.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <thread>
#include <vector>

#include "slipstream/gpunetio_nic.h"
#include "slipstream/softnic.h"

#include "check.h"

namespace {

// ---- a producer's encoder (the PRM layout, as DOCA's wqe_prepare_* writes it) ----
void be32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}
void be64(uint8_t *p, uint64_t v) {
  be32(p, (uint32_t)(v >> 32));
  be32(p + 4, (uint32_t)v);
}
void ctrl(uint8_t *w, uint16_t idx, uint8_t opcode, uint32_t qpn, uint8_t ds) {
  memset(w, 0, 64);
  be32(w, (uint32_t)idx << 8 | opcode);
  be32(w + 4, qpn << 8 | ds);
  w[11] = 0x8;  // CQ update (cleared by Rig::unsignalled)
}
void enc_write(uint8_t *w, uint16_t idx, uint32_t qpn, uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey,
               uint32_t bytes) {
  ctrl(w, idx, 0x08, qpn, 3);
  be64(w + 16, raddr);
  be32(w + 24, rkey);
  be32(w + 32, bytes);
  be32(w + 36, lkey);
  be64(w + 40, laddr);
}
void enc_inline(uint8_t *w, uint16_t idx, uint32_t qpn, uint64_t raddr, uint32_t rkey, const void *data,
                uint32_t bytes) {
  ctrl(w, idx, 0x08, qpn, bytes > 12 ? 4 : 3);
  be64(w + 16, raddr);
  be32(w + 24, rkey);
  be32(w + 32, bytes | 0x80000000u);
  memcpy(w + 36, data, bytes);
}
void enc_fadd(uint8_t *w, uint16_t idx, uint32_t qpn, uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey,
              uint64_t add) {
  ctrl(w, idx, 0x12, qpn, 4);
  be64(w + 16, raddr);
  be32(w + 24, rkey);
  be64(w + 32, add);
  be64(w + 40, add);
  be32(w + 48, 8);
  be32(w + 52, lkey);
  be64(w + 56, laddr);
}
void enc_nop(uint8_t *w, uint16_t idx, uint32_t qpn) { ctrl(w, idx, 0x00, qpn, 1); }

// ---- executor: memcpy and CPU atomics; counts its calls ----
std::atomic<uint64_t> g_runs{0};
slip_status h_run(void *, const slip_softnic_copy *copies, uint32_t ncopies, const slip_softnic_add *adds,
                  uint32_t nadds) {
  for (uint32_t i = 0; i < ncopies; i++) memcpy(copies[i].dst, copies[i].src, copies[i].len);
  for (uint32_t i = 0; i < nadds; i++) {
    const uint64_t old = __atomic_fetch_add(adds[i].target, adds[i].add, __ATOMIC_RELEASE);
    be64((uint8_t *)adds[i].result, old);
  }
  g_runs++;
  return SLIP_OK;
}

constexpr uint32_t kQpn = 0x1234, kSrcId = 1, kSinkId = 2, kDstId = 7, kSigId = 8;
constexpr uint32_t kSrcKey = 0x11110001, kSinkKey = 0x22220002, kDstKey = 0xA5A5F00D, kSigKey = 0x5151C0DE;

struct Rig {
  uint32_t wqes;
  std::vector<uint8_t> sq, cq, src, dst;
  uint64_t sink[4] = {0, 0, 0, 0};
  uint64_t sig[4] = {0, 0, 0, 0};
  uint64_t pi = 0;
  uint64_t posted = 0;
  bool selective = false;  // CQEs only for some WQEs: the test waits for each batch itself
  slip_dev_error err;
  slip_softnic_engine *engine = nullptr;
  slip_softnic *nic = nullptr;
  Rig(uint32_t nwqe, size_t src_len, size_t dst_len)
      : wqes(nwqe), sq(nwqe * 64), cq(nwqe * 64), src(src_len), dst(dst_len, 0xEE) {
    memset(&err, 0, sizeof err);
    for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 131 + 7);
    slip_cq_init(cq.data(), nwqe);
    slip_region_entry local[2] = {{kSrcId, SLIP_DEV_REGION_READABLE, kSrcKey, src.size(), src.data()},
                                  {kSinkId, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE, kSinkKey, sizeof sink,
                                   sink}};
    slip_region_entry remote[2] = {{kDstId, SLIP_DEV_REGION_WRITABLE, kDstKey, dst.size(), dst.data()},
                                   {kSigId, SLIP_DEV_REGION_WRITABLE | SLIP_DEV_REGION_HOST, kSigKey, sizeof sig, sig}};
    slip_softnic_ops ops = {h_run, nullptr};
    slip_softnic_qp qp = {sq.data(), nwqe, kQpn, &pi, cq.data(), nwqe};
    EXPECT(slip_softnic_engine_create(&ops, 1, &engine) == SLIP_OK, "%s", slip_last_error());
    EXPECT(slip_softnic_create(engine, 1, &qp, &err, local, 2, nullptr, remote, 2, nullptr, &nic) == SLIP_OK, "%s",
           slip_last_error());
  }
  // A QP reset and reconnect: the producer starts again from 0.
  void reset() {
    __atomic_store_n(&pi, 0, __ATOMIC_RELEASE);
    posted = 0;
    slip_softnic_reset(nic);
  }
  // Clears the completion request of WQE idx (before it is published).
  void unsignalled(uint64_t idx) { sq[(idx % wqes) * 64 + 11] = 0; }
  ~Rig() {
    slip_softnic_destroy(nic);
    slip_softnic_engine_destroy(engine);
  }
  bool completed(uint64_t idx) const {
    uint8_t owner, op;
    slip_cqe_read(&cq[(idx % wqes) * 64], &owner, &op, nullptr, nullptr);
    return op != SLIP_MLX5_CQE_INVALID && owner == ((idx / wqes) & 1);
  }
  // Waits for completion of WQE idx, as doca_gpu_dev_verbs_poll_cq_at does on sm_90 (owner bit).
  void wait(uint64_t idx) {
    for (long spins = 0; !completed(idx); spins++)
      if (spins > 2000000000L) {
        fprintf(stderr, "no CQE for WQE %llu\n", (unsigned long long)idx);
        abort();
      }
  }
  // Reserves a slot (waiting for the CQE of the WQE one lap earlier, as the device does).
  uint8_t *slot(uint64_t *idx) {
    *idx = posted++;
    if (*idx >= wqes && !selective) wait(*idx - wqes);
    return &sq[(*idx % wqes) * 64];
  }
  void publish() { __atomic_store_n(&pi, posted, __ATOMIC_RELEASE); }
  uint64_t write(uint64_t dst_off, uint64_t src_off, uint32_t len, uint32_t rkey = kDstKey, uint32_t lkey = kSrcKey,
                 uint32_t dst_id = kDstId) {
    uint64_t i;
    uint8_t *w = slot(&i);
    enc_write(w, (uint16_t)i, kQpn, SLIP_IOVA(dst_id, dst_off), rkey, SLIP_IOVA(kSrcId, src_off), lkey, len);
    return i;
  }
  uint64_t fadd(uint64_t add, uint32_t rkey = kSigKey, uint64_t sig_off = 0) {
    uint64_t i;
    uint8_t *w = slot(&i);
    enc_fadd(w, (uint16_t)i, kQpn, SLIP_IOVA(kSigId, sig_off), rkey, SLIP_IOVA(kSinkId, 8), kSinkKey, add);
    return i;
  }
  // CQE number k (one per WQE that asked, or that failed) completes WQE idx.
  void expect_cqe_at(uint64_t k, uint64_t idx, uint8_t opcode, uint8_t synd, const char *what) {
    wait(k);
    uint8_t owner, op, s;
    uint16_t counter;
    slip_cqe_read(&cq[(k % wqes) * 64], &owner, &op, &counter, &s);
    EXPECT(op == opcode && counter == (uint16_t)idx && (opcode == 0 || s == synd),
           "%s: CQE %llu: opcode 0x%x counter %u syndrome 0x%x, expected opcode 0x%x counter %u syndrome 0x%x", what,
           (unsigned long long)k, op, counter, s, opcode, (unsigned)(uint16_t)idx, synd);
  }
  void expect_cqe(uint64_t idx, uint8_t opcode, uint8_t synd, const char *what) {
    wait(idx);
    uint8_t owner, op, s;
    uint16_t counter;
    slip_cqe_read(&cq[(idx % wqes) * 64], &owner, &op, &counter, &s);
    EXPECT(op == opcode && counter == (uint16_t)idx && owner == ((idx / wqes) & 1) && (opcode == 0 || s == synd),
           "%s: CQE %llu: opcode 0x%x counter %u owner %u syndrome 0x%x, expected opcode 0x%x syndrome 0x%x", what,
           (unsigned long long)idx, op, counter, owner, s, opcode, synd);
  }
  size_t dst_written() const {
    size_t n = 0;
    for (uint8_t c : dst) n += c != 0xEE;
    return n;
  }
};

void test_codec() {
  uint8_t w[64];
  slip_wqe d;
  enc_write(w, 0xBEEF, kQpn, SLIP_IOVA(kDstId, 4097), kDstKey, SLIP_IOVA(kSrcId, 3), kSrcKey, 1000003);
  EXPECT(slip_wqe_decode(w, &d) == SLIP_OK, "%s", slip_last_error());
  EXPECT(d.opcode == 0x08 && d.index == 0xBEEF && d.qpn == kQpn && d.ds == 3 && d.nseg == 1, "ctrl decoded wrong");
  EXPECT(d.raddr == SLIP_IOVA(kDstId, 4097) && d.rkey == kDstKey, "raddr 0x%llx rkey 0x%x",
         (unsigned long long)d.raddr, d.rkey);
  EXPECT(d.seg[0].bytes == 1000003 && d.seg[0].lkey == kSrcKey && d.seg[0].addr == SLIP_IOVA(kSrcId, 3), "dseg");
  // The host producer's encoder (slipstream/softnic.h) writes the same bytes as this test's.
  uint8_t mine[64];
  slip_wqe_encode_write(mine, 0xBEEF, kQpn, 1, SLIP_IOVA(kDstId, 4097), kDstKey, SLIP_IOVA(kSrcId, 3), kSrcKey, 1000003);
  EXPECT(memcmp(mine, w, 64) == 0, "slip_wqe_encode_write differs from the PRM layout");
  slip_wqe_encode_write(mine, 3, kQpn, 0, 0, kDstKey, 0, kSrcKey, 64);
  EXPECT(slip_wqe_decode(mine, &d) == SLIP_OK && d.fm_ce_se == 0 && d.index == 3 && d.seg[0].bytes == 64,
         "unsignalled write: fm_ce_se 0x%x", d.fm_ce_se);
  slip_wqe_encode_fadd(mine, 11, kQpn, 1, SLIP_IOVA(kSigId, 24), kSigKey, SLIP_IOVA(kSinkId, 8), kSinkKey, 77);
  EXPECT(slip_wqe_decode(mine, &d) == SLIP_OK && d.opcode == 0x12 && d.index == 11 && d.ds == 4 &&
             d.raddr == SLIP_IOVA(kSigId, 24) && d.rkey == kSigKey && d.swap_add == 77 && d.seg[0].bytes == 8 &&
             d.seg[0].lkey == kSinkKey && d.seg[0].addr == SLIP_IOVA(kSinkId, 8) && (d.fm_ce_se & 0x08),
         "host producer's fetch-add decoded wrong: %s", slip_last_error());
  enc_fadd(w, 7, kQpn, SLIP_IOVA(kSigId, 16), kSigKey, SLIP_IOVA(kSinkId, 0), kSinkKey, 0x0000010000000040ull);
  EXPECT(slip_wqe_decode(w, &d) == SLIP_OK && d.opcode == 0x12 && d.swap_add == 0x0000010000000040ull &&
             d.seg[0].bytes == 8 && d.seg[0].lkey == kSinkKey,
         "atomic decoded wrong");
  const char msg[] = "0123456789abcdefXYZ";
  enc_inline(w, 9, kQpn, SLIP_IOVA(kDstId, 0), kDstKey, msg, 19);
  EXPECT(slip_wqe_decode(w, &d) == SLIP_OK && d.inline_bytes == 19 && memcmp(d.inline_data, msg, 19) == 0,
         "inline decoded wrong: %s", slip_last_error());
  enc_nop(w, 1, kQpn);
  EXPECT(slip_wqe_decode(w, &d) == SLIP_OK && d.opcode == 0, "nop");
  // Bad input: names what was got and what was expected.
  enc_write(w, 5, kQpn, 0, 0, 0, 0, 1);
  w[7] = (uint8_t)(w[7] & ~0x3f) | 2;
  EXPECT(slip_wqe_decode(w, &d) == SLIP_ERR_BAD_DESCRIPTOR, "ds 2 accepted");
  EXPECT(strstr(slip_last_error(), "RDMA write WQE 5 with 2 segments, expected 3 or 4") != nullptr, "got '%s'",
         slip_last_error());
  ctrl(w, 6, 0x10, kQpn, 3);  // RDMA read: not executed by this NIC
  EXPECT(slip_wqe_decode(w, &d) == SLIP_ERR_BAD_DESCRIPTOR, "read accepted");
  EXPECT(strstr(slip_last_error(), "opcode 0x10, expected NOP (0x00), RDMA_WRITE (0x08) or ATOMIC_FA (0x12)") != nullptr,
         "got '%s'", slip_last_error());
  enc_inline(w, 9, kQpn, 0, 0, msg, 19);
  w[7] = (uint8_t)(w[7] & ~0x3f) | 3;  // 19 inline bytes do not fit 3 segments
  EXPECT(slip_wqe_decode(w, &d) == SLIP_ERR_BAD_DESCRIPTOR, "inline overflow accepted");
  // CQE writer: owner bit per lap, opcode, counter, error syndrome; op_own last.
  uint8_t cq[4 * 64];
  slip_cq_init(cq, 4);
  uint8_t owner, op, s;
  uint16_t counter;
  slip_cqe_read(cq, &owner, &op, &counter, &s);
  EXPECT(owner == 1 && op == 0xf, "fresh CQE: owner %u opcode 0x%x", owner, op);
  slip_cqe_write(cq + 64, 5, 4, 5, kQpn, 4096);  // index 5: slot 1, lap 1
  slip_cqe_read(cq + 64, &owner, &op, &counter, &s);
  EXPECT(owner == 1 && op == 0 && counter == 5, "lap-1 CQE: owner %u opcode 0x%x counter %u", owner, op, counter);
  EXPECT(cq[64 + 44] == 0 && cq[64 + 45] == 0 && cq[64 + 46] == 0x10 && cq[64 + 47] == 0, "byte_cnt not big-endian");
  slip_cqe_write_error(cq + 128, 10, 4, 10, kQpn, 0x08, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR);  // slot 2, lap 2
  slip_cqe_read(cq + 128, &owner, &op, &counter, &s);
  EXPECT(owner == 0 && op == 0xd && counter == 10 && s == 0x13, "error CQE: owner %u opcode 0x%x syndrome 0x%x", owner,
         op, s);
  EXPECT(cq[128 + 56] == 0x08, "error CQE: WQE opcode 0x%x in s_wqe_opcode_qpn", cq[128 + 56]);
}

void test_delivery_and_laps() {
  // 8 WQEs, 3000 writes of odd sizes with a fetch-add after each: 750 laps of the rings.
  const uint32_t kMax = 97, kBlocks = 3000;
  Rig rig(8, kMax * kBlocks, kMax * kBlocks);
  std::atomic<uint64_t> order_errors{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    uint64_t checked = 0;
    while (checked < kBlocks) {
      const uint64_t k = SLIP_SIGNAL_BLOCKS(__atomic_load_n(&rig.sig[0], __ATOMIC_ACQUIRE));
      for (; checked < k; checked++)
        if (memcmp(&rig.dst[checked * kMax], &rig.src[checked * kMax], checked % kMax) != 0) order_errors++;
      if (done.load() && SLIP_SIGNAL_BLOCKS(__atomic_load_n(&rig.sig[0], __ATOMIC_ACQUIRE)) == checked) break;
    }
  });
  uint64_t bytes = 0, last = 0;
  for (uint32_t b = 0; b < kBlocks; b++) {
    const uint32_t len = b % kMax;
    rig.write((uint64_t)b * kMax, (uint64_t)b * kMax, len);
    last = rig.fadd(SLIP_SIGNAL_PACK(1, len));
    bytes += len;
    if (b % 3 == 0) rig.publish();  // publish in uneven batches
  }
  rig.publish();
  rig.expect_cqe(last, SLIP_MLX5_CQE_REQ, 0, "last fetch-add");
  done.store(true);
  reader.join();
  EXPECT(order_errors.load() == 0, "%llu blocks signalled before their data", (unsigned long long)order_errors.load());
  EXPECT(rig.sig[0] == SLIP_SIGNAL_PACK(kBlocks, bytes), "signal 0x%llx", (unsigned long long)rig.sig[0]);
  uint64_t fetched = 0;
  for (int i = 0; i < 8; i++) fetched = fetched << 8 | ((uint8_t *)&rig.sink[1])[i];
  EXPECT(fetched == rig.sig[0] - SLIP_SIGNAL_PACK(1, (kBlocks - 1) % kMax),
         "fetched value 0x%llx (big-endian) is not the value before the last add", (unsigned long long)fetched);
  EXPECT(rig.err.code == 0, "unexpected error %u", rig.err.code);
  size_t untouched = 0, expect_untouched = 0;
  for (uint32_t b = 0; b < kBlocks; b++) {
    for (uint32_t i = b % kMax; i < kMax; i++) untouched += rig.dst[(size_t)b * kMax + i] == 0xEE;
    expect_untouched += kMax - b % kMax;
  }
  EXPECT(untouched == expect_untouched, "%zu of %zu gap bytes kept", untouched, expect_untouched);
  // Inline write and NOP.
  uint64_t i;
  uint8_t *w = rig.slot(&i);
  enc_inline(w, (uint16_t)i, kQpn, SLIP_IOVA(kDstId, 5), kDstKey, "inline!", 7);
  w = rig.slot(&i);
  enc_nop(w, (uint16_t)i, kQpn);
  rig.publish();
  rig.expect_cqe(i, SLIP_MLX5_CQE_REQ, 0, "nop");
  EXPECT(memcmp(&rig.dst[5], "inline!", 7) == 0, "inline data did not land");
  slip_softnic_stats s;
  slip_softnic_get_stats(rig.nic, &s);
  EXPECT(s.wqes == 2ull * kBlocks + 2 && s.errors == 0, "stats: %llu WQEs, %llu errors", (unsigned long long)s.wqes,
         (unsigned long long)s.errors);
}

void test_rejects() {
  char text[256];
  {
    // Wrong rkey on the data write of a put_signal pair: error CQE, the signal is flushed, nothing
    // written; later WQEs flush until the error is cleared, then the queue pair works again.
    Rig rig(8, 4096, 4096);
    const uint64_t a = rig.write(0, 0, 64, kDstKey ^ 0x40);
    const uint64_t b = rig.fadd(SLIP_SIGNAL_PACK(1, 64));
    const uint64_t c = rig.write(128, 0, 16);
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR, "wrong rkey");
    rig.expect_cqe(b, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_WR_FLUSH_ERR, "signal after the rejected write");
    rig.expect_cqe(c, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_WR_FLUSH_ERR, "write after the rejected write");
    EXPECT(rig.dst_written() == 0 && rig.sig[0] == 0, "rejected: %zu bytes written, signal 0x%llx", rig.dst_written(),
           (unsigned long long)rig.sig[0]);
    EXPECT(rig.err.code == SLIP_ERR_BAD_KEY && rig.err.region_id == kDstId, "code %u region %u", rig.err.code,
           rig.err.region_id);
    slip_dev_error_format(&rig.err, text, sizeof text);
    EXPECT(strstr(text, "key 0x00000000a5a5f04d presented for region 7 does not match its registered key"), "got '%s'",
           text);
    slip_softnic_stats st;
    slip_softnic_get_stats(rig.nic, &st);
    EXPECT(st.first_syndrome == SLIP_MLX5_SYND_REMOTE_ACCESS_ERR &&
               strcmp(slip_mlx5_syndrome_name(st.first_syndrome), "remote access error") == 0,
           "first syndrome 0x%x", st.first_syndrome);
    memset(&rig.err, 0, sizeof rig.err);
    rig.reset();
    slip_softnic_get_stats(rig.nic, &st);
    EXPECT(st.first_syndrome == 0, "the reset keeps syndrome 0x%x", st.first_syndrome);
    const uint64_t d = rig.write(256, 0, 16);
    EXPECT(d == 0, "after the reset the producer starts at WQE 0, not %llu", (unsigned long long)d);
    rig.publish();
    rig.expect_cqe(d, SLIP_MLX5_CQE_REQ, 0, "after reset");
    EXPECT(memcmp(&rig.dst[256], &rig.src[0], 16) == 0 && rig.err.code == 0, "write after reset did not land");
  }
  {
    Rig rig(8, 8192, 4096);
    const uint64_t a = rig.write(4000, 0, 512);
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR, "out of range");
    slip_dev_error_format(&rig.err, text, sizeof text);
    EXPECT(strcmp(text, "queue 0: offset 4000 + length 512 outside region 7 (length 4096)") == 0, "got '%s'", text);
    EXPECT(rig.dst_written() == 0, "out of range: %zu bytes written", rig.dst_written());
  }
  {
    Rig rig(8, 4096, 4096);
    const uint64_t a = rig.write(0, 4090, 16);  // source range outside its region
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_LOCAL_PROT_ERR, "local out of range");
    EXPECT(rig.err.code == SLIP_ERR_OUT_OF_RANGE && rig.err.region_id == kSrcId, "code %u region %u", rig.err.code,
           rig.err.region_id);
  }
  {
    Rig rig(8, 4096, 4096);
    const uint64_t a = rig.write(0, 0, 16, kDstKey, kSrcKey + 1);
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_LOCAL_PROT_ERR, "wrong lkey");
    EXPECT(rig.err.code == SLIP_ERR_BAD_KEY && rig.dst_written() == 0, "code %u", rig.err.code);
  }
  {
    Rig rig(8, 4096, 4096);
    const uint64_t a = rig.write(0, 0, 16, kDstKey, kSrcKey, 99);
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR, "unknown region");
    EXPECT(rig.err.code == SLIP_ERR_BAD_REGION && rig.err.region_id == 99, "code %u region %u", rig.err.code,
           rig.err.region_id);
  }
  {
    Rig rig(8, 4096, 4096);
    const uint64_t a = rig.fadd(1, kSigKey, 4);  // misaligned atomic
    rig.publish();
    rig.expect_cqe(a, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR, "misaligned atomic");
    EXPECT(rig.err.code == SLIP_ERR_INVALID_ARG && rig.sig[0] == 0 && rig.sig[1] == 0, "code %u", rig.err.code);
  }
  {
    Rig rig(8, 4096, 4096);
    uint64_t i;
    uint8_t *w = rig.slot(&i);
    ctrl(w, (uint16_t)i, 0x10, kQpn, 3);  // RDMA read
    rig.publish();
    rig.expect_cqe(i, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_LOCAL_QP_OP_ERR, "unsupported opcode");
    EXPECT(rig.err.code == SLIP_ERR_BAD_DESCRIPTOR && rig.err.limit == 0x10, "code %u limit %llu", rig.err.code,
           (unsigned long long)rig.err.limit);
  }
  {
    Rig rig(8, 4096, 4096);
    uint64_t i;
    uint8_t *w = rig.slot(&i);
    enc_write(w, (uint16_t)i, kQpn + 1, SLIP_IOVA(kDstId, 0), kDstKey, SLIP_IOVA(kSrcId, 0), kSrcKey, 16);
    rig.publish();
    rig.expect_cqe(i, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_LOCAL_QP_OP_ERR, "wrong QP number");
    EXPECT(rig.err.code == SLIP_ERR_BAD_DESCRIPTOR && rig.err.length == kQpn + 1 && rig.err.limit == kQpn,
           "got qpn %llu, expected %llu", (unsigned long long)rig.err.length, (unsigned long long)rig.err.limit);
    EXPECT(rig.dst_written() == 0, "wrong QP number: %zu bytes written", rig.dst_written());
  }
  {
    // A published slot that still holds the previous lap's index is never executed.
    Rig rig(8, 4096, 4096);
    uint64_t i;
    uint8_t *w = rig.slot(&i);
    enc_write(w, (uint16_t)(i + 8), kQpn, SLIP_IOVA(kDstId, 0), kDstKey, SLIP_IOVA(kSrcId, 0), kSrcKey, 16);
    rig.publish();
    rig.expect_cqe(i, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_LOCAL_QP_OP_ERR, "stale slot");
    EXPECT(rig.err.code == SLIP_ERR_BAD_DESCRIPTOR && rig.dst_written() == 0, "code %u", rig.err.code);
  }
}

void test_create_checks() {
  uint8_t sq[128], cq[128];
  uint64_t pi = 0;
  slip_dev_error err;
  slip_softnic *nic = nullptr;
  slip_softnic_ops ops = {h_run, nullptr};
  slip_softnic_engine *engine = nullptr;
  EXPECT(slip_softnic_engine_create(&ops, 0, &engine) == SLIP_ERR_INVALID_ARG && engine == nullptr, "0 threads");
  EXPECT(strstr(slip_last_error(), "0 threads, expected 1..64") != nullptr, "got '%s'", slip_last_error());
  EXPECT(slip_softnic_engine_create(&ops, 1, &engine) == SLIP_OK, "%s", slip_last_error());
  slip_softnic_qp qp = {sq, 3, 1, &pi, cq, 4};
  EXPECT(slip_softnic_create(engine, 1, &qp, &err, nullptr, 0, nullptr, nullptr, 0, nullptr, &nic) == SLIP_ERR_INVALID_ARG, "3 WQEs");
  EXPECT(strstr(slip_last_error(), "3 WQEs, expected a power of two") != nullptr, "got '%s'", slip_last_error());
  qp.wqe_num = 2;
  slip_region_entry big = {1u << 24, SLIP_DEV_REGION_WRITABLE, 1, 8, sq};
  EXPECT(slip_softnic_create(engine, 1, &qp, &err, nullptr, 0, nullptr, &big, 1, nullptr, &nic) == SLIP_ERR_INVALID_ARG, "id 2^24");
  EXPECT(strstr(slip_last_error(), "region id 16777216, expected at most 16777215") != nullptr, "got '%s'",
         slip_last_error());
  EXPECT(nic == nullptr, "nothing created");
  slip_softnic_engine_destroy(engine);
}

// DOCA GPUNetIO's batch pattern: only the batch's last WQE asks for a CQE. The NIC writes CQEs
// only for WQEs that ask (and for one that fails), into consecutive CQ slots, each naming its WQE;
// one executor call serves a whole published batch.
void test_selective_completions() {
  const uint32_t kBatch = 7, kBatches = 40;
  Rig rig(16, 4096, 64 * kBatch * kBatches);
  rig.selective = true;
  uint64_t bytes = 0;
  for (uint32_t b = 0; b < kBatches; b++) {
    uint64_t last = 0;
    for (uint32_t k = 0; k < kBatch; k++) {
      const uint32_t len = 16 + 8 * k;
      const uint64_t i = rig.write((uint64_t)(b * kBatch + k) * 64, 0, len);
      rig.unsignalled(i);
      bytes += len;
    }
    last = rig.fadd(SLIP_SIGNAL_PACK(kBatch, bytes));  // the batch's one completion request
    const uint64_t runs = g_runs.load();
    rig.publish();
    rig.expect_cqe_at(b, last, SLIP_MLX5_CQE_REQ, 0, "batch CQE");
    EXPECT(g_runs.load() - runs == 1, "batch %u took %llu executor calls, expected 1", b,
           (unsigned long long)(g_runs.load() - runs));
    // Nothing was written after it: the next slot still belongs to the NIC.
    uint8_t owner, op;
    slip_cqe_read(&rig.cq[((b + 1) % rig.wqes) * 64], &owner, &op, nullptr, nullptr);
    EXPECT(op == SLIP_MLX5_CQE_INVALID || owner != (((b + 1) / rig.wqes) & 1),
           "batch %u: a CQE beyond the one asked for (opcode 0x%x owner %u)", b, op, owner);
    bytes = 0;
  }
  for (uint32_t i = 0; i < kBatch * kBatches; i++)
    EXPECT(memcmp(&rig.dst[(size_t)i * 64], &rig.src[0], 16 + 8 * (i % kBatch)) == 0, "write %u did not land", i);
  slip_softnic_stats st;
  slip_softnic_get_stats(rig.nic, &st);
  EXPECT(st.wqes == (kBatch + 1ull) * kBatches && st.cqes == kBatches, "%llu WQEs, %llu CQEs",
         (unsigned long long)st.wqes, (unsigned long long)st.cqes);
  {
    // A write that fails in the middle of an unsignalled batch: its error CQE takes the next slot
    // (so the producer waiting for the batch sees the error), the rest flush, nothing lands.
    Rig bad(16, 4096, 4096);
    const uint64_t a = bad.write(0, 0, 64);
    bad.unsignalled(a);
    const uint64_t b = bad.write(64, 0, 64, kDstKey ^ 1);
    bad.unsignalled(b);
    const uint64_t c = bad.write(128, 0, 64);
    bad.unsignalled(c);
    const uint64_t d = bad.fadd(SLIP_SIGNAL_PACK(3, 192));
    bad.publish();
    bad.expect_cqe_at(0, b, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_REMOTE_ACCESS_ERR, "failed write");
    bad.expect_cqe_at(1, d, SLIP_MLX5_CQE_REQ_ERR, SLIP_MLX5_SYND_WR_FLUSH_ERR, "flushed signal");
    EXPECT(memcmp(&bad.dst[0], &bad.src[0], 64) == 0, "the write before the failure landed");
    EXPECT(bad.dst[64] == 0xEE && bad.dst[128] == 0xEE && bad.sig[0] == 0, "nothing after the failure landed");
  }
}

// A source region registered after the queue pairs were made is found through the protection
// domain; a wrong key for it, or an id nobody registered, is refused with nothing written.
std::vector<slip_region_entry> g_pd;
int pd_find(void *, uint32_t id, uint32_t mkey, slip_region_entry *out) {
  int found = 0;
  for (const slip_region_entry &e : g_pd)
    if (e.id == id) {
      *out = e;
      found = 1;
      if (e.key == mkey) break;
    }
  return found;
}
void test_protection_domain() {
  constexpr uint32_t kLateId = 40, kLateKey = 0x0BADCAFE;
  std::vector<uint8_t> late(256);
  for (size_t i = 0; i < late.size(); i++) late[i] = (uint8_t)(255 - i);
  uint8_t sq[8 * 64], cq[8 * 64];
  uint64_t pi = 0;
  std::vector<uint8_t> dst(1024, 0xEE);
  uint64_t sink = 0;
  slip_region_entry local[1] = {{kSinkId, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE, kSinkKey, 8, &sink}};
  slip_region_entry remote[1] = {{kDstId, SLIP_DEV_REGION_WRITABLE, kDstKey, dst.size(), dst.data()}};
  slip_softnic_ops ops = {h_run, nullptr};
  slip_softnic_pd pd = {pd_find, nullptr};
  slip_softnic_qp qp = {sq, 8, kQpn, &pi, cq, 8};
  slip_dev_error err;
  memset(&err, 0, sizeof err);
  slip_softnic *nic = nullptr;
  slip_softnic_engine *engine = nullptr;
  EXPECT(slip_softnic_engine_create(&ops, 1, &engine) == SLIP_OK, "%s", slip_last_error());
  EXPECT(slip_softnic_create(engine, 1, &qp, &err, local, 1, &pd, remote, 1, nullptr, &nic) == SLIP_OK, "%s", slip_last_error());
  g_pd.push_back({kLateId, SLIP_DEV_REGION_READABLE, kLateKey, late.size(), late.data()});  // registered later
  auto cqe = [&](uint64_t idx, uint8_t *op, uint8_t *synd) {
    uint8_t owner = 2;
    for (long spins = 0; spins < 2000000000L; spins++) {
      slip_cqe_read(&cq[(idx % 8) * 64], &owner, op, nullptr, synd);
      if (*op != SLIP_MLX5_CQE_INVALID && owner == ((idx / 8) & 1)) return;
    }
    fprintf(stderr, "no CQE %llu\n", (unsigned long long)idx);
    abort();
  };
  enc_write(&sq[0], 0, kQpn, SLIP_IOVA(kDstId, 0), kDstKey, SLIP_IOVA(kLateId, 16), kLateKey, 100);
  __atomic_store_n(&pi, 1, __ATOMIC_RELEASE);
  uint8_t op, synd;
  cqe(0, &op, &synd);
  EXPECT(op == SLIP_MLX5_CQE_REQ && memcmp(dst.data(), &late[16], 100) == 0, "write from a region found in the "
         "protection domain: CQE opcode 0x%x", op);
  enc_write(&sq[64], 1, kQpn, SLIP_IOVA(kDstId, 200), kDstKey, SLIP_IOVA(kLateId, 0), kLateKey ^ 8, 16);
  __atomic_store_n(&pi, 2, __ATOMIC_RELEASE);
  cqe(1, &op, &synd);
  EXPECT(op == SLIP_MLX5_CQE_REQ_ERR && synd == SLIP_MLX5_SYND_LOCAL_PROT_ERR && err.code == SLIP_ERR_BAD_KEY &&
             err.region_id == kLateId && dst[200] == 0xEE,
         "wrong lkey for a protection-domain region: opcode 0x%x syndrome 0x%x code %u", op, synd, err.code);
  slip_softnic_destroy(nic);
  slip_softnic_engine_destroy(engine);
  g_pd.clear();
}

// Queue pairs spread over several NIC threads: every write lands, every queue pair's signal after
// its data.
void test_threads() {
  constexpr uint32_t kQps = 6, kThreads = 3, kWqes = 8, kBlocks = 500, kLen = 48;
  std::vector<std::vector<uint8_t>> sq(kQps, std::vector<uint8_t>(kWqes * 64)), cq(kQps, std::vector<uint8_t>(kWqes * 64));
  std::vector<uint64_t> pi(kQps, 0);
  std::vector<uint8_t> src(kLen * kBlocks), dst(kQps * kLen * kBlocks, 0xEE);
  for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 7 + 1);
  uint64_t sig[kQps] = {}, sink[kQps] = {};
  slip_region_entry local[2] = {{kSrcId, SLIP_DEV_REGION_READABLE, kSrcKey, src.size(), src.data()},
                                {kSinkId, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE, kSinkKey, sizeof sink,
                                 sink}};
  slip_region_entry remote[2] = {{kDstId, SLIP_DEV_REGION_WRITABLE, kDstKey, dst.size(), dst.data()},
                                 {kSigId, SLIP_DEV_REGION_WRITABLE | SLIP_DEV_REGION_HOST, kSigKey, sizeof sig, sig}};
  std::vector<slip_softnic_qp> qps;
  for (uint32_t q = 0; q < kQps; q++) qps.push_back({sq[q].data(), kWqes, kQpn + q, &pi[q], cq[q].data(), kWqes});
  slip_softnic_ops ops[kThreads] = {{h_run, nullptr}, {h_run, nullptr}, {h_run, nullptr}};
  slip_dev_error err;
  memset(&err, 0, sizeof err);
  slip_softnic *nic = nullptr;
  slip_softnic_engine *engine = nullptr;
  EXPECT(slip_softnic_engine_create(ops, kThreads, &engine) == SLIP_OK, "%s", slip_last_error());
  EXPECT(slip_softnic_create(engine, kQps, qps.data(), &err, local, 2, nullptr, remote, 2, nullptr, &nic) == SLIP_OK, "%s",
         slip_last_error());
  std::vector<std::thread> producers;
  std::atomic<uint64_t> early{0};
  for (uint32_t q = 0; q < kQps; q++)
    producers.emplace_back([&, q] {
      uint64_t posted = 0;
      auto done = [&](uint64_t idx) {
        uint8_t owner, op;
        slip_cqe_read(&cq[q][(idx % kWqes) * 64], &owner, &op, nullptr, nullptr);
        return op != SLIP_MLX5_CQE_INVALID && owner == ((idx / kWqes) & 1);
      };
      for (uint32_t b = 0; b < kBlocks; b++) {
        for (int k = 0; k < 2; k++) {  // a write, then its signal
          const uint64_t i = posted++;
          if (i >= kWqes)
            while (!done(i - kWqes)) {
            }
          uint8_t *w = &sq[q][(i % kWqes) * 64];
          if (k == 0)
            enc_write(w, (uint16_t)i, kQpn + q, SLIP_IOVA(kDstId, ((uint64_t)q * kBlocks + b) * kLen), kDstKey,
                      SLIP_IOVA(kSrcId, (uint64_t)b * kLen), kSrcKey, kLen);
          else
            enc_fadd(w, (uint16_t)i, kQpn + q, SLIP_IOVA(kSigId, q * 8), kSigKey, SLIP_IOVA(kSinkId, q * 8), kSinkKey,
                     1);
          __atomic_store_n(&pi[q], posted, __ATOMIC_RELEASE);
        }
        // The signal says b + 1 blocks: all of them must be there.
        const uint64_t seen = __atomic_load_n(&sig[q], __ATOMIC_ACQUIRE);
        for (uint64_t k = 0; k < seen; k++)
          if (dst[((uint64_t)q * kBlocks + k) * kLen + kLen - 1] != src[k * kLen + kLen - 1]) early++;
      }
      while (!done(posted - 1)) {
      }
    });
  for (auto &t : producers) t.join();
  EXPECT(early.load() == 0 && err.code == 0, "%llu blocks signalled before their data, error %u",
         (unsigned long long)early.load(), err.code);
  for (uint32_t q = 0; q < kQps; q++) {
    EXPECT(sig[q] == kBlocks, "queue pair %u: signal %llu, expected %u", q, (unsigned long long)sig[q], kBlocks);
    EXPECT(memcmp(&dst[(size_t)q * kBlocks * kLen], src.data(), src.size()) == 0, "queue pair %u: data", q);
  }
  slip_softnic_destroy(nic);
  slip_softnic_engine_destroy(engine);
}

// Several NICs on one engine (its threads serve them all): each delivers; one is reset and then
// destroyed while the other keeps working.
void test_shared_engine() {
  slip_softnic_ops ops[2] = {{h_run, nullptr}, {h_run, nullptr}};
  slip_softnic_engine *engine = nullptr;
  EXPECT(slip_softnic_engine_create(ops, 2, &engine) == SLIP_OK, "%s", slip_last_error());
  struct Nic {
    uint8_t sq[8 * 64], cq[8 * 64];
    uint64_t pi = 0, sink = 0;
    std::vector<uint8_t> src, dst;
    slip_dev_error err;
    slip_softnic *nic = nullptr;
  };
  Nic a, b;
  for (Nic *x : {&a, &b}) {
    x->src.assign(512, 0);
    for (size_t i = 0; i < x->src.size(); i++) x->src[i] = (uint8_t)(x == &a ? i : 255 - i);
    x->dst.assign(512, 0xEE);
    memset(&x->err, 0, sizeof x->err);
    slip_region_entry local[1] = {{kSrcId, SLIP_DEV_REGION_READABLE, kSrcKey, x->src.size(), x->src.data()}};
    slip_region_entry remote[1] = {{kDstId, SLIP_DEV_REGION_WRITABLE, kDstKey, x->dst.size(), x->dst.data()}};
    slip_softnic_qp qp = {x->sq, 8, kQpn, &x->pi, x->cq, 8};
    EXPECT(slip_softnic_create(engine, 1, &qp, &x->err, local, 1, nullptr, remote, 1, nullptr, &x->nic) == SLIP_OK, "%s",
           slip_last_error());
  }
  auto post = [](Nic &x, uint64_t i, uint64_t off, uint32_t len) {
    enc_write(&x.sq[(i % 8) * 64], (uint16_t)i, kQpn, SLIP_IOVA(kDstId, off), kDstKey, SLIP_IOVA(kSrcId, off), kSrcKey,
              len);
    __atomic_store_n(&x.pi, i + 1, __ATOMIC_RELEASE);
  };
  auto wait = [](Nic &x, uint64_t i) {
    uint8_t owner = 2, op = 0;
    for (long spins = 0; spins < 2000000000L; spins++) {
      slip_cqe_read(&x.cq[(i % 8) * 64], &owner, &op, nullptr, nullptr);
      if (op != SLIP_MLX5_CQE_INVALID && owner == ((i / 8) & 1)) return op;
    }
    fprintf(stderr, "no CQE %llu\n", (unsigned long long)i);
    abort();
  };
  for (uint64_t i = 0; i < 20; i++) {  // both at once, several laps each
    post(a, i, i * 16, 16);
    post(b, i, i * 16, 16);
    EXPECT(wait(a, i) == SLIP_MLX5_CQE_REQ && wait(b, i) == SLIP_MLX5_CQE_REQ, "WQE %llu", (unsigned long long)i);
  }
  EXPECT(memcmp(a.dst.data(), a.src.data(), 320) == 0 && memcmp(b.dst.data(), b.src.data(), 320) == 0,
         "both NICs' writes landed");
  __atomic_store_n(&a.pi, 0, __ATOMIC_RELEASE);
  slip_softnic_reset(a.nic);
  slip_softnic_destroy(a.nic);
  for (uint64_t i = 20; i < 24; i++) {
    post(b, i, i * 16, 16);
    EXPECT(wait(b, i) == SLIP_MLX5_CQE_REQ, "after the other NIC went: WQE %llu", (unsigned long long)i);
  }
  EXPECT(memcmp(b.dst.data(), b.src.data(), 384) == 0 && a.err.code == 0 && b.err.code == 0, "the other NIC works on");
  slip_softnic_destroy(b.nic);
  slip_softnic_engine_destroy(engine);
}

// The queue-pair connection record of the real-NIC path: a peer's bytes are checked before use.
void test_qp_info() {
  slip_nic_qp_info v, out;
  memset(&v, 0, sizeof v);
  v.magic = SLIP_NIC_QP_INFO_MAGIC;
  v.version = SLIP_NIC_QP_INFO_VERSION;
  v.addr_type = SLIP_NIC_ADDR_IB;
  v.qpn = 0x1234;
  v.lid = 7;
  v.mtu = 5;
  EXPECT(slip_nic_qp_info_parse(&v, sizeof v, &out) == SLIP_OK && out.qpn == 0x1234, "%s", slip_last_error());
  EXPECT(slip_nic_qp_info_parse(&v, 63, &out) == SLIP_ERR_BAD_DESCRIPTOR &&
             strstr(slip_last_error(), "of 63 bytes, expected 64"),
         "got '%s'", slip_last_error());
  slip_nic_qp_info b = v;
  b.qpn = 1u << 24;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR &&
             strstr(slip_last_error(), "queue-pair number 16777216, expected 1..0xffffff"),
         "got '%s'", slip_last_error());
  b = v;
  b.mtu = 9;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR, "mtu 9 accepted");
  b = v;
  b.lid = 0;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR, "IB LID 0 accepted");
  b = v;
  b.magic ^= 1;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR && strstr(slip_last_error(), "magic"),
         "got '%s'", slip_last_error());
  b = v;
  b.psn = 1u << 24;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR &&
             strstr(slip_last_error(), "packet sequence number 0x1000000, expected 24 bits"),
         "got '%s'", slip_last_error());
  b = v;
  b.reserved[5] = 0x80;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR &&
             strstr(slip_last_error(), "reserved byte 5 is 0x80, expected 0"),
         "got '%s'", slip_last_error());
  b = v;
  b.version = 1;
  EXPECT(slip_nic_qp_info_parse(&b, sizeof b, &out) == SLIP_ERR_BAD_DESCRIPTOR &&
             strstr(slip_last_error(), "version 1, expected 2"),
         "got '%s'", slip_last_error());
}

}  // namespace

int main() {
  test_qp_info();
  test_codec();
  test_create_checks();
  test_delivery_and_laps();
  test_rejects();
  test_selective_completions();
  test_threads();
  test_protection_domain();
  test_shared_engine();
  return check_report("softnic_test");
}
