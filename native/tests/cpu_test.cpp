// CPU-only tests of the native core: status text, region checks, descriptor parsing, and the
// proxy executor driven by a host producer with a memcpy executor (ring protocol, wrap-around,
// signal-after-data ordering, error completions that write nothing).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "slipstream/host.h"

#include "check.h"
#include "../src/nic_progress.h"

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != nullptr; }

static void test_status_text() {
  EXPECT(strcmp(slip_status_name(SLIP_ERR_OUT_OF_RANGE), "SLIP_ERR_OUT_OF_RANGE") == 0, "name");
  EXPECT(strcmp(slip_status_name((slip_status)99), "SLIP_ERR_UNKNOWN") == 0, "unknown name");
  slip_status s = slip_set_error(SLIP_ERR_BAD_KEY, "value %d", 42);
  EXPECT(s == SLIP_ERR_BAD_KEY, "returns its code");
  EXPECT(strcmp(slip_last_error(), "SLIP_ERR_BAD_KEY: value 42") == 0, "got '%s'", slip_last_error());
}

static void test_region_validate() {
  char mem[4096];
  slip_region_entry t[2] = {{7, SLIP_DEV_REGION_WRITABLE, 0x1234, 4096, mem},
                            {9, SLIP_DEV_REGION_READABLE, 0x99, 100, mem}};
  slip_dev_error e;
  memset(&e, 0, sizeof e);
  EXPECT(slip_region_validate(t, 2, 7, 1, 0x1234, 0, 4096, SLIP_DEV_REGION_WRITABLE, &e) == SLIP_OK, "whole region");
  EXPECT(slip_region_validate(t, 2, 7, 1, 0x1234, 4096, 0, SLIP_DEV_REGION_WRITABLE, &e) == SLIP_OK, "empty at end");
  EXPECT(slip_region_validate(t, 2, 7, 1, 0x1234, 4096, 512, SLIP_DEV_REGION_WRITABLE, &e) == SLIP_ERR_OUT_OF_RANGE,
         "past the end");
  char text[256];
  slip_dev_error_format(&e, text, sizeof text);
  EXPECT(strcmp(text, "queue 0: offset 4096 + length 512 outside region 7 (length 4096)") == 0, "got '%s'", text);
  // offset + length overflows 64 bits: must still be rejected.
  EXPECT(slip_region_validate(t, 2, 7, 1, 0x1234, 16, ~0ull - 8, SLIP_DEV_REGION_WRITABLE, &e) ==
             SLIP_ERR_OUT_OF_RANGE, "overflowing length");
  EXPECT(slip_region_validate(t, 2, 7, 1, 0x1235, 0, 1, SLIP_DEV_REGION_WRITABLE, &e) == SLIP_ERR_BAD_KEY, "wrong key");
  slip_dev_error_format(&e, text, sizeof text);
  EXPECT(contains(text, "key 0x0000000000001235 presented for region 7 does not match"), "got '%s'", text);
  EXPECT(!contains(text, "1234"), "the registered key must not be printed: '%s'", text);
  EXPECT(slip_region_validate(t, 2, 8, 1, 0, 0, 1, 0, &e) == SLIP_ERR_BAD_REGION, "unknown id");
  EXPECT(slip_region_validate(t, 2, 9, 0, 0, 0, 1, SLIP_DEV_REGION_WRITABLE, &e) == SLIP_ERR_BAD_REGION,
         "read-only region as destination");
  EXPECT(slip_region_validate(t, 2, 9, 0, 0, 0, 100, SLIP_DEV_REGION_READABLE, &e) == SLIP_OK, "key not checked");
}

static slip_region_desc valid_desc() {
  slip_region_desc d;
  memset(&d, 0, sizeof d);
  d.magic = SLIP_REGION_DESC_MAGIC;
  d.version = SLIP_REGION_DESC_VERSION;
  d.kind = SLIP_MEM_HOST_SHM;
  d.id = 3;
  d.length = 64;
  strcpy(d.shm_name, "/slip-1-3-abc");
  return d;
}

static void test_desc_parse() {
  slip_region_desc d = valid_desc(), out;
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_OK, "%s", slip_last_error());
  EXPECT(slip_region_desc_parse(&d, sizeof d - 1, &out) == SLIP_ERR_BAD_DESCRIPTOR, "short");
  EXPECT(contains(slip_last_error(), "of 191 bytes, expected 192"), "got '%s'", slip_last_error());
  d.magic = 0x11223344;
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "magic");
  EXPECT(contains(slip_last_error(), "magic 0x11223344, expected 0x534c5052"), "got '%s'", slip_last_error());
  d = valid_desc();
  d.version = 9;
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "version");
  d = valid_desc();
  d.kind = 5;
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "kind");
  d = valid_desc();
  d.length = 0;
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "length");
  d = valid_desc();
  strcpy(d.shm_name, "/etc/passwd");
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "name");
  d = valid_desc();
  memset(d.shm_name, 'a', sizeof d.shm_name);
  memcpy(d.shm_name, "/slip-", 6);
  EXPECT(slip_region_desc_parse(&d, sizeof d, &out) == SLIP_ERR_BAD_DESCRIPTOR, "unterminated name");
}

// memcpy executor: ordered by construction; the signal add is a release so a reader that
// acquires the signal sees the copies before it.
static slip_status host_copy(void *, void *dst, const void *src, uint64_t len) {
  memcpy(dst, src, len);
  return SLIP_OK;
}
static slip_status host_signal(void *, uint64_t *sig, uint64_t add, uint32_t) {
  __atomic_fetch_add(sig, add, __ATOMIC_RELEASE);
  return SLIP_OK;
}
static slip_status host_flush(void *) { return SLIP_OK; }

struct ProxyRig {
  static const uint32_t kDepth = 16;
  std::vector<unsigned char> src, dst;
  uint64_t sig[4] = {0, 0, 0, 0};
  std::vector<slip_proxy_desc> ring;
  slip_proxy_ctrl ctrl;
  slip_dev_error err;
  slip_proxy *proxy = nullptr;
  uint64_t head = 0;
  uint64_t sig_key = 0;  // 0: same as the destination key
  ProxyRig(size_t src_len, size_t dst_len) : src(src_len), dst(dst_len, 0xEE), ring(kDepth) {
    memset(&ctrl, 0, sizeof ctrl);
    memset(&err, 0, sizeof err);
    for (size_t i = 0; i < src.size(); i++) src[i] = (unsigned char)(i * 131 + 7);
    slip_region_entry s[1] = {{1, SLIP_DEV_REGION_READABLE, 0, src.size(), src.data()}};
    slip_region_entry d[2] = {{7, SLIP_DEV_REGION_WRITABLE, 0xABCDEF, dst.size(), dst.data()},
                              {8, SLIP_DEV_REGION_WRITABLE | SLIP_DEV_REGION_HOST, 0xABCDEF, sizeof sig, sig}};
    slip_proxy_exec_ops ops = {host_copy, host_signal, host_flush, nullptr};
    slip_proxy_desc *rings[1] = {ring.data()};
    slip_proxy_ctrl *ctrls[1] = {&ctrl};
    slip_status st = slip_proxy_create(&ops, 1, kDepth, rings, ctrls, &err, s, 1, d, 2, &proxy);
    EXPECT(st == SLIP_OK, "%s", slip_last_error());
  }
  ~ProxyRig() { slip_proxy_destroy(proxy); }
  void post(uint16_t op, uint64_t key, uint32_t dst_region, uint64_t dst_off, uint64_t src_off, uint64_t len,
            uint64_t add) {
    slip_proxy_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.dst_region = dst_region;
    d.src_region = 1;
    d.sig_region = 8;
    d.dst_key = key;
    d.sig_key = sig_key ? sig_key : key;
    d.dst_offset = dst_off;
    d.src_offset = src_off;
    d.length = len;
    d.sig_offset = 0;
    d.sig_add = add;
    EXPECT(slip_proxy_post(ring.data(), &ctrl, kDepth, &head, &d) == SLIP_OK, "%s", slip_last_error());
    slip_proxy_publish(&ctrl, head);
  }
  void drain() {
    while (__atomic_load_n(&ctrl.tail, __ATOMIC_ACQUIRE) < head) std::this_thread::yield();
  }
};

static void test_proxy_delivery_and_ordering() {
  const uint64_t kBlocks = 20000;
  const uint64_t kMax = 97;  // odd sizes 0..96
  ProxyRig rig(kMax * kBlocks, kMax * kBlocks);
  std::atomic<uint64_t> order_errors{0};
  std::atomic<bool> done{false};
  // Receiver: whenever the signal says k blocks arrived, blocks [0, k) must hold their bytes.
  std::thread reader([&] {
    uint64_t checked = 0;
    while (checked < kBlocks) {
      uint64_t v = __atomic_load_n(&rig.sig[0], __ATOMIC_ACQUIRE);
      uint64_t k = SLIP_SIGNAL_BLOCKS(v);
      for (; checked < k; checked++) {
        uint64_t len = checked % kMax, off = checked * kMax;
        if (memcmp(&rig.dst[off], &rig.src[off], len) != 0) order_errors++;
      }
      if (done.load() && SLIP_SIGNAL_BLOCKS(__atomic_load_n(&rig.sig[0], __ATOMIC_ACQUIRE)) == checked) break;
    }
  });
  uint64_t bytes = 0;
  for (uint64_t b = 0; b < kBlocks; b++) {
    uint64_t len = b % kMax;
    rig.post(SLIP_OP_WRITE_SIGNAL, 0xABCDEF, 7, b * kMax, b * kMax, len, SLIP_SIGNAL_PACK(1, len));
    bytes += len;
  }
  rig.drain();
  done.store(true);
  reader.join();
  EXPECT(order_errors.load() == 0, "%llu blocks seen signalled before their data", (unsigned long long)order_errors.load());
  EXPECT(rig.sig[0] == SLIP_SIGNAL_PACK(kBlocks, bytes), "signal 0x%llx", (unsigned long long)rig.sig[0]);
  EXPECT(slip_proxy_executed(rig.proxy) == kBlocks, "executed %llu", (unsigned long long)slip_proxy_executed(rig.proxy));
  EXPECT(rig.err.code == 0, "unexpected error %u", rig.err.code);
  // Bytes outside the written blocks keep their poison.
  size_t poisoned = 0;
  for (uint64_t b = 0; b < kBlocks; b++)
    for (uint64_t i = b % kMax; i < kMax; i++) poisoned += rig.dst[b * kMax + i] == 0xEE;
  size_t expect_poisoned = 0;
  for (uint64_t b = 0; b < kBlocks; b++) expect_poisoned += kMax - b % kMax;
  EXPECT(poisoned == expect_poisoned, "%zu of %zu untouched bytes kept", poisoned, expect_poisoned);
}

static void expect_untouched(const ProxyRig &rig, const char *what) {
  size_t bad = 0;
  for (unsigned char c : rig.dst) bad += c != 0xEE;
  EXPECT(bad == 0, "%s: %zu destination bytes written", what, bad);
  EXPECT(rig.sig[0] == 0, "%s: signal moved to 0x%llx", what, (unsigned long long)rig.sig[0]);
}

static void test_proxy_rejects() {
  char text[256];
  {
    ProxyRig rig(4096, 4096);
    rig.post(SLIP_OP_WRITE_SIGNAL, 0xBAD, 7, 0, 0, 64, SLIP_SIGNAL_PACK(1, 64));
    rig.drain();
    expect_untouched(rig, "wrong key");
    EXPECT(rig.err.code == SLIP_ERR_BAD_KEY, "code %u", rig.err.code);
    slip_dev_error_format(&rig.err, text, sizeof text);
    EXPECT(contains(text, "key 0x0000000000000bad presented for region 7"), "got '%s'", text);
  }
  {
    // Good data key, forged signal key: the data must not land either (all checks come first).
    ProxyRig rig(4096, 4096);
    rig.sig_key = 0xF00;
    rig.post(SLIP_OP_WRITE_SIGNAL, 0xABCDEF, 7, 0, 0, 64, SLIP_SIGNAL_PACK(1, 64));
    rig.drain();
    expect_untouched(rig, "wrong signal key");
    EXPECT(rig.err.code == SLIP_ERR_BAD_KEY && rig.err.region_id == 8, "code %u region %u", rig.err.code,
           rig.err.region_id);
  }
  {
    ProxyRig rig(8192, 4096);
    rig.post(SLIP_OP_WRITE_SIGNAL, 0xABCDEF, 7, 4000, 0, 512, SLIP_SIGNAL_PACK(1, 512));
    rig.drain();
    expect_untouched(rig, "out of range");
    slip_dev_error_format(&rig.err, text, sizeof text);
    EXPECT(strcmp(text, "queue 0: offset 4000 + length 512 outside region 7 (length 4096)") == 0, "got '%s'", text);
  }
  {
    ProxyRig rig(4096, 4096);
    rig.post(SLIP_OP_WRITE, 0xABCDEF, 12, 0, 0, 16, 0);
    rig.drain();
    expect_untouched(rig, "unknown region");
    EXPECT(rig.err.code == SLIP_ERR_BAD_REGION && rig.err.region_id == 12, "code %u region %u", rig.err.code,
           rig.err.region_id);
  }
  {
    ProxyRig rig(4096, 4096);
    rig.post(SLIP_OP_WRITE, 0xABCDEF, 7, 0, 4090, 16, 0);  // source range outside its region
    rig.drain();
    expect_untouched(rig, "source out of range");
    EXPECT(rig.err.code == SLIP_ERR_OUT_OF_RANGE && rig.err.region_id == 1, "code %u region %u", rig.err.code,
           rig.err.region_id);
  }
  {
    ProxyRig rig(4096, 4096);
    rig.post(77, 0xABCDEF, 7, 0, 0, 16, 0);
    rig.drain();
    expect_untouched(rig, "unknown op");
    EXPECT(rig.err.code == SLIP_ERR_BAD_DESCRIPTOR, "code %u", rig.err.code);
  }
  {
    // A slot published without being written (stale lap): consumed as an error, nothing executed.
    ProxyRig rig(4096, 4096);
    slip_proxy_desc d;
    memset(&d, 0, sizeof d);
    d.op = SLIP_OP_WRITE;
    d.dst_region = 7;
    d.src_region = 1;
    d.dst_key = 0xABCDEF;
    d.length = 16;
    d.lap = 3;
    rig.ring[0] = d;
    rig.head = 1;
    slip_proxy_publish(&rig.ctrl, 1);
    rig.drain();
    expect_untouched(rig, "stale slot");
    EXPECT(rig.err.code == SLIP_ERR_BAD_DESCRIPTOR, "code %u", rig.err.code);
  }
  {
    // After an error, later good descriptors still execute; the first error stays recorded.
    ProxyRig rig(4096, 4096);
    rig.post(SLIP_OP_WRITE, 0xBAD, 7, 0, 0, 16, 0);
    rig.post(SLIP_OP_WRITE, 0xABCDEF, 7, 100, 0, 8, 0);
    rig.post(SLIP_OP_WRITE, 0xABCDEF, 7, 5000, 0, 8, 0);
    rig.drain();
    EXPECT(memcmp(&rig.dst[100], &rig.src[0], 8) == 0, "good write after a bad one landed");
    EXPECT(rig.err.code == SLIP_ERR_BAD_KEY, "first error kept, got %u", rig.err.code);
  }
}

static void test_signal_wait_timeout() {
  uint64_t sig = SLIP_SIGNAL_PACK(2, 10);
  EXPECT(slip_signal_wait_ge(&sig, SLIP_SIGNAL_PACK(2, 10), 1000000) == SLIP_OK, "reached");
  EXPECT(slip_signal_wait_ge(&sig, SLIP_SIGNAL_PACK(3, 0), 2000000) == SLIP_ERR_TIMEOUT, "not reached");
  EXPECT(contains(slip_last_error(), "expected >= 0x0000030000000000"), "got '%s'", slip_last_error());
}

static const slip_layout_field *layout_find(const char *type, const char *field) {
  uint32_t n = 0;
  const slip_layout_field *t = slip_abi_layout(&n);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(t[i].type, type) && !strcmp(t[i].field, field)) return &t[i];
  return nullptr;
}

static void test_abi_layout() {
  // The wire formats keep their sizes; fields lie inside their struct and do not overlap.
  const slip_layout_field *d = layout_find("slip_region_desc", ""), *p = layout_find("slip_proxy_desc", "");
  EXPECT(d && d->size == 192, "slip_region_desc size %u", d ? d->size : 0);
  EXPECT(p && p->size == 128, "slip_proxy_desc size %u", p ? p->size : 0);
  const slip_layout_field *key = layout_find("slip_region_desc", "key");
  EXPECT(key && key->offset == 16 && key->size == 8, "slip_region_desc.key at %u", key ? key->offset : 0);
  uint32_t n = 0;
  const slip_layout_field *t = slip_abi_layout(&n);
  for (uint32_t i = 0; i < n; i++) {
    if (!t[i].field[0]) continue;
    const slip_layout_field *whole = layout_find(t[i].type, "");
    EXPECT(whole && t[i].offset + t[i].size <= whole->size, "%s.%s outside its struct", t[i].type, t[i].field);
    for (uint32_t j = 0; j < n; j++)
      if (j != i && t[j].field[0] && !strcmp(t[i].type, t[j].type))
        EXPECT(t[i].offset + t[i].size <= t[j].offset || t[j].offset + t[j].size <= t[i].offset,
               "%s.%s overlaps %s", t[i].type, t[i].field, t[j].field);
  }
}

// The NICs' host doorbell thread: every added link is rung, none after its removal returns.
struct FakeLink {
  std::atomic<int> rung{0};
  std::atomic<bool> removed{false};
  std::atomic<int> after_removal{0};
};

static void test_nic_progress() {
  FakeLink a, b;
  {
    NicProgress<FakeLink> p([](FakeLink *l) {
      if (l->removed.load()) l->after_removal++;
      l->rung++;
      return false;  // nothing rung: the thread naps now and then
    });
    p.add(&a);
    p.add(&b);
    for (int i = 0; i < 2000 && (a.rung.load() < 10 || b.rung.load() < 10); i++) usleep(1000);
    EXPECT(a.rung.load() >= 10 && b.rung.load() >= 10, "rung %d and %d times", a.rung.load(), b.rung.load());
    p.remove(&a);
    a.removed = true;
    const int at = a.rung.load();
    const int bt = b.rung.load();
    for (int i = 0; i < 2000 && b.rung.load() < bt + 10; i++) usleep(1000);
    EXPECT(a.rung.load() == at && a.after_removal.load() == 0, "a rung %d times after its removal", a.rung.load() - at);
    EXPECT(b.rung.load() >= bt + 10, "b stopped being rung");
  }  // the destructor joins the thread
  const int bt = b.rung.load();
  usleep(20000);
  EXPECT(b.rung.load() == bt, "rung after the progress thread was destroyed");
}

int main() {
  test_abi_layout();
  test_nic_progress();
  test_status_text();
  test_region_validate();
  test_desc_parse();
  test_proxy_delivery_and_ordering();
  test_proxy_rejects();
  test_signal_wait_timeout();
  return check_report("cpu_test");
}
