// The real-NIC path's host side (slipstream/gpunetio_nic.h) as far as a machine without an RDMA
// device can take it: argument checks, the implementation and its libraries, and the error that
// names a missing device. Where an mlx5 device and a GPU are present (SLIP_TEST_IBDEV, default
// mlx5_0), it also creates two links, connects their queue pairs to each other through the port
// (loopback), checks the records each side sent and registers device memory; otherwise that part
// prints SKIP with the reason.
//
// The software NIC ("softnic") is tested end to end where a GPU is: two NICs with links to each
// other, a push kernel posting RDMA writes and fetch-add signals on a link into the other NIC's
// registered memory, checked byte for byte; a forged memory key and a range past the peer's region
// complete with the remote access error and write nothing; a peer that closed its NIC gives the
// transport retry error.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "check.h"
#include "slipstream/gpunetio_nic.h"
#include "slipstream/kernels.h"

namespace {

bool has(const char *needle) { return strstr(slip_last_error(), needle) != nullptr; }

void test_arguments() {
  slip_nic *n = reinterpret_cast<slip_nic *>(1);
  EXPECT(slip_nic_open(nullptr, 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &n) != SLIP_OK, "null device name accepted");
  if (strcmp(slip_nic_impl(), "none") == 0) {
    EXPECT(slip_nic_probe() == SLIP_ERR_UNSUPPORTED && has("no NIC implementation"), "got '%s'", slip_last_error());
    return;
  }
  EXPECT(slip_nic_open("mlx5_0", 1, 0, 0, 7, &n) == SLIP_ERR_INVALID_ARG &&
             has("doorbell mode 7, expected 0 (auto), 1 (host) or 2 (gpu)"),
         "got '%s'", slip_last_error());
  EXPECT(slip_nic_open("mlx5_0", 0, 0, 0, SLIP_NIC_DOORBELL_AUTO, &n) == SLIP_ERR_INVALID_ARG && has("port 0"),
         "got '%s'", slip_last_error());
  EXPECT(slip_nic_link_create(nullptr, 1, 64, nullptr) == SLIP_ERR_INVALID_ARG, "null NIC accepted");
  EXPECT(slip_nic_dev_qp(nullptr, 0) == nullptr, "queue pair of a null link");
}

// A device name that cannot exist: the error names it and what was found.
void test_missing_device() {
  if (strcmp(slip_nic_impl(), "none") == 0) return;
  if (slip_nic_probe() != SLIP_OK) {
    // The implementation is built but rdma-core is not installed here: the reason says what to install.
    EXPECT(has("libibverbs.so.1") || has("libmlx5.so.1") || has("rdma-core"), "got '%s'", slip_last_error());
    printf("SKIP: %s\n", slip_last_error());
    return;
  }
  slip_nic *n = nullptr;
  EXPECT(slip_nic_open("slipstream_no_such_nic", 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &n) == SLIP_ERR_NO_DEVICE &&
             has("RDMA device slipstream_no_such_nic not found (") && n == nullptr,
         "got '%s'", slip_last_error());
}

// Two links on one port connected to each other: every queue pair reaches RTS with the peer's PSN.
void test_loopback(const char *ibdev) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    printf("SKIP: loopback on %s: no usable GPU\n", ibdev);
    return;
  }
  slip_nic *n = nullptr;
  const slip_status s = slip_nic_open(ibdev, 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &n);
  if (s == SLIP_ERR_NO_DEVICE || s == SLIP_ERR_UNSUPPORTED) {
    printf("SKIP: loopback: %s\n", slip_last_error());
    return;
  }
  EXPECT(s == SLIP_OK, "open %s: %s", ibdev, slip_last_error());
  if (s != SLIP_OK) return;
  void *buf = nullptr;
  uint32_t mkey = 0;
  EXPECT(cudaMalloc(&buf, 1 << 20) == cudaSuccess, "cudaMalloc");
  EXPECT(slip_nic_reg(n, buf, 1 << 20, 3, &mkey) == SLIP_OK, "register 1 MiB of device memory: %s", slip_last_error());
  slip_nic_link *a = nullptr, *b = nullptr;
  EXPECT(slip_nic_link_create(n, 2, 1024, &a) == SLIP_OK, "link a: %s", slip_last_error());
  EXPECT(slip_nic_link_create(n, 2, 1024, &b) == SLIP_OK, "link b: %s", slip_last_error());
  for (uint32_t q = 0; a && b && q < 2; q++) {
    slip_nic_qp_info ia, ib, parsed;
    EXPECT(slip_nic_qp_info_get(a, q, &ia) == SLIP_OK && slip_nic_qp_info_get(b, q, &ib) == SLIP_OK, "%s",
           slip_last_error());
    EXPECT(slip_nic_qp_info_parse(&ia, sizeof ia, &parsed) == SLIP_OK && parsed.qpn != ib.qpn, "%s", slip_last_error());
    EXPECT(slip_nic_connect(a, q, &ib) == SLIP_OK, "connect a%u: %s", q, slip_last_error());
    EXPECT(slip_nic_connect(b, q, &ia) == SLIP_OK, "connect b%u: %s", q, slip_last_error());
    EXPECT(slip_nic_connect(a, q, &ib) == SLIP_ERR_STATE, "second connect of a%u accepted", q);
    EXPECT(slip_nic_dev_qp(a, q) != nullptr, "device queue pair a%u", q);
  }
  printf("loopback on %s: doorbell rung by the %s\n", ibdev,
         a && slip_nic_link_doorbell(a) == SLIP_NIC_DOORBELL_GPU ? "GPU" : "host progress thread");
  slip_nic_link_destroy(a);
  slip_nic_link_destroy(b);
  slip_nic_close(n);
  cudaFree(buf);
}


// ---- the software NIC, end to end ----
constexpr uint64_t kSrcBytes = 1 << 20;
constexpr uint64_t kLandingBytes = 4 << 20;
constexpr uint64_t kSigOffset = kLandingBytes - 64;

struct SoftPair {
  slip_nic *a = nullptr, *b = nullptr;  // a pushes, b owns the landing region
  slip_nic_link *la = nullptr, *lb = nullptr;
};

bool connect_links(SoftPair &p, uint32_t nq) {
  if (slip_nic_link_create(p.a, nq, 64, &p.la) != SLIP_OK || slip_nic_link_create(p.b, nq, 64, &p.lb) != SLIP_OK) {
    EXPECT(false, "links: %s", slip_last_error());
    return false;
  }
  for (uint32_t q = 0; q < nq; q++) {
    slip_nic_qp_info ia, ib;
    EXPECT(slip_nic_qp_info_get(p.la, q, &ia) == SLIP_OK && slip_nic_qp_info_get(p.lb, q, &ib) == SLIP_OK, "%s",
           slip_last_error());
    EXPECT(ia.qpn != ib.qpn && memcmp(ia.gid, ib.gid, 16) != 0, "two NICs share a GID or a queue pair number");
    EXPECT(slip_nic_connect(p.la, q, &ib) == SLIP_OK, "connect a%u: %s", q, slip_last_error());
    EXPECT(slip_nic_connect(p.lb, q, &ia) == SLIP_OK, "connect b%u: %s", q, slip_last_error());
  }
  EXPECT(slip_nic_connect(p.la, 0, nullptr) == SLIP_ERR_INVALID_ARG, "null record accepted");
  EXPECT(slip_nic_dev_qp(p.la, 0) != nullptr, "no device queue pair after connect");
  return slip_nic_dev_qp(p.la, 0) != nullptr;
}

// Pushes items (src offset, dst offset, length) on queue 0 of a set over link la, signal after
// them; returns the queue's status and the set's error text in *why.
int push(slip_ctx *ctx, slip_nic_link *la, slip_region *src, slip_nic_remote landing,
         const std::vector<slip_push_item> &items, uint64_t forged_key, std::string *why) {
  slip_queueset *qs = nullptr;
  int status = -1;
  if (slip_queueset_create_link(ctx, la, 0, 1, &src, 1, &landing, 1, &qs) != SLIP_OK) {
    *why = slip_last_error();
    return -2;
  }
  if (forged_key) EXPECT(slip_queueset_set_key(qs, 1, forged_key) == SLIP_OK, "%s", slip_last_error());
  slip_push_queue_cfg cfg = {0, 1, 1, 0, kSigOffset};
  uint32_t start[2] = {0, (uint32_t)items.size()};
  slip_push_queue_cfg *d_cfg;
  slip_push_item *d_items;
  uint32_t *d_start;
  int *d_status;
  cudaMalloc(&d_cfg, sizeof cfg);
  cudaMalloc(&d_items, items.size() * sizeof(slip_push_item));
  cudaMalloc(&d_start, sizeof start);
  cudaMalloc(&d_status, sizeof(int));
  cudaMemcpy(d_cfg, &cfg, sizeof cfg, cudaMemcpyHostToDevice);
  cudaMemcpy(d_items, items.data(), items.size() * sizeof(slip_push_item), cudaMemcpyHostToDevice);
  cudaMemcpy(d_start, start, sizeof start, cudaMemcpyHostToDevice);
  EXPECT(slip_push(slip_queueset_device(qs), 1, d_cfg, d_items, d_start, 8, 128, d_status, 0) == SLIP_OK, "%s",
         slip_last_error());
  EXPECT(cudaDeviceSynchronize() == cudaSuccess, "push kernel");
  cudaMemcpy(&status, d_status, sizeof(int), cudaMemcpyDeviceToHost);
  if (slip_queueset_check(qs, 1) != SLIP_OK) *why = slip_last_error();
  cudaFree(d_cfg);
  cudaFree(d_items);
  cudaFree(d_start);
  cudaFree(d_status);
  slip_queueset_destroy(qs);
  return status;
}

void test_softnic() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    printf("SKIP: software NIC: no usable GPU\n");
    return;
  }
  SoftPair p;
  slip_status s = slip_nic_open("softnic", 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &p.a);
  if (s == SLIP_ERR_UNSUPPORTED) {
    printf("SKIP: software NIC: %s\n", slip_last_error());
    return;
  }
  EXPECT(s == SLIP_OK && strcmp(slip_nic_kind(p.a), "softnic") == 0, "open softnic: %s", slip_last_error());
  EXPECT(slip_nic_open("softnic", 1, 0, 0, SLIP_NIC_DOORBELL_AUTO, &p.b) == SLIP_OK, "%s", slip_last_error());
  slip_nic *gpu_rung = nullptr;
  EXPECT(slip_nic_open("softnic", 1, 0, 0, SLIP_NIC_DOORBELL_GPU, &gpu_rung) == SLIP_ERR_UNSUPPORTED && !gpu_rung,
         "GPU doorbell on the software NIC: %s", slip_last_error());
  if (!p.a || !p.b) return;
  slip_ctx *ctx = nullptr;
  slip_region *src = nullptr;
  EXPECT(slip_ctx_create(0, &ctx) == SLIP_OK, "%s", slip_last_error());
  EXPECT(slip_region_create(ctx, SLIP_MEM_DEVICE, kSrcBytes, 7, &src) == SLIP_OK, "%s", slip_last_error());
  std::vector<uint8_t> pattern(kSrcBytes);
  for (uint64_t i = 0; i < kSrcBytes; i++) pattern[i] = (uint8_t)(i * 131 + 7);
  cudaMemcpy(slip_region_ptr(src), pattern.data(), kSrcBytes, cudaMemcpyHostToDevice);
  uint8_t *landing = nullptr;
  cudaMalloc(&landing, kLandingBytes);
  cudaMemset(landing, 0, kLandingBytes);
  uint32_t src_key = 0, landing_key = 0, extra = 0;
  EXPECT(slip_nic_reg(p.a, slip_region_ptr(src), kSrcBytes, 7, &src_key) == SLIP_OK, "%s", slip_last_error());
  EXPECT(slip_nic_reg(p.b, landing, kLandingBytes, 9, &landing_key) == SLIP_OK, "%s", slip_last_error());
  void *host = nullptr;
  cudaMallocHost(&host, 4096);
  EXPECT(slip_nic_reg(p.b, host, 4096, 10, &extra) == SLIP_ERR_UNSUPPORTED && has("host memory"),
         "host memory registered on the software NIC: %s", slip_last_error());
  EXPECT(slip_nic_reg(p.b, landing, kLandingBytes, SLIP_NIC_SINK_ID, &extra) == SLIP_ERR_INVALID_ARG, "sink id");
  if (!connect_links(p, 2)) return;
  const slip_nic_remote target = {9, landing_key, kLandingBytes};
  std::string why;

  // Two writes and the signal: exact bytes, and the signal counts both.
  std::vector<slip_push_item> items = {{0, 4096, 300000}, {300000, 1 << 20, kSrcBytes - 300000}};
  int st = push(ctx, p.la, src, target, items, 0, &why);
  EXPECT(st == SLIP_OK, "push over the link: status %d: %s", st, why.c_str());
  std::vector<uint8_t> got(kLandingBytes);
  cudaMemcpy(got.data(), landing, kLandingBytes, cudaMemcpyDeviceToHost);
  EXPECT(memcmp(got.data() + 4096, pattern.data(), 300000) == 0, "first write's bytes");
  EXPECT(memcmp(got.data() + (1 << 20), pattern.data() + 300000, kSrcBytes - 300000) == 0, "second write's bytes");
  uint64_t sig = 0;
  memcpy(&sig, got.data() + kSigOffset, 8);
  EXPECT(sig == SLIP_SIGNAL_PACK(2, kSrcBytes), "signal 0x%llx, expected 0x%llx", (unsigned long long)sig,
         (unsigned long long)SLIP_SIGNAL_PACK(2, kSrcBytes));
  bool untouched = true;
  for (uint64_t i = 0; i < 4096; i++) untouched = untouched && got[i] == 0;
  EXPECT(untouched, "bytes before the first write changed");
  // A new queue set over the same queue pairs goes on from what they completed.
  for (int round = 0; round < 3; round++) {
    st = push(ctx, p.la, src, target, {{4096, 2 << 20, 65536}}, 0, &why);
    EXPECT(st == SLIP_OK, "push %d over used queue pairs: status %d: %s", round, st, why.c_str());
  }
  cudaMemcpy(got.data(), landing, kLandingBytes, cudaMemcpyDeviceToHost);
  EXPECT(memcmp(got.data() + (2 << 20), pattern.data() + 4096, 65536) == 0, "bytes of the pushes over used queue pairs");
  memcpy(&sig, got.data() + kSigOffset, 8);
  EXPECT(sig == SLIP_SIGNAL_PACK(5, kSrcBytes + 3 * 65536), "signal 0x%llx after five writes", (unsigned long long)sig);

  // A forged rkey: remote access error, nothing written.
  cudaMemset(landing, 0, kLandingBytes);
  why.clear();
  st = push(ctx, p.la, src, target, {{0, 0, 65536}}, (uint64_t)(landing_key ^ 0x5a5a5a5au), &why);
  cudaMemcpy(got.data(), landing, kLandingBytes, cudaMemcpyDeviceToHost);
  untouched = true;
  for (uint64_t i = 0; i < kLandingBytes; i++) untouched = untouched && got[i] == 0;
  EXPECT(st != SLIP_OK && why.find("remote access error") != std::string::npos && untouched,
         "forged key: status %d, '%s', landing %s", st, why.c_str(), untouched ? "untouched" : "written");

  // The link's queue pairs are in the error state now: a new link, as the peer table would make.
  slip_nic_link_destroy(p.la);
  slip_nic_link_destroy(p.lb);
  p.la = p.lb = nullptr;
  if (!connect_links(p, 1)) return;
  // Past the end of the peer's region (its NIC knows the length, whatever the requester claims).
  why.clear();
  const slip_nic_remote claims_more = {9, landing_key, kLandingBytes * 2};
  st = push(ctx, p.la, src, claims_more, {{0, kLandingBytes - 4096, 65536}}, 0, &why);
  cudaMemcpy(got.data(), landing, kLandingBytes, cudaMemcpyDeviceToHost);
  untouched = true;
  for (uint64_t i = 0; i < kLandingBytes; i++) untouched = untouched && got[i] == 0;
  EXPECT(st != SLIP_OK && why.find("outside region 9") != std::string::npos && untouched,
         "past the region: status %d, '%s', landing %s", st, why.c_str(), untouched ? "untouched" : "written");

  // The peer closes its NIC: the transport retry error.
  slip_nic_link_destroy(p.la);
  slip_nic_link_destroy(p.lb);
  p.la = p.lb = nullptr;
  if (!connect_links(p, 1)) return;
  slip_nic_link_destroy(p.lb);
  p.lb = nullptr;
  slip_nic_close(p.b);
  p.b = nullptr;
  usleep(5000);  // the link looks at its peer every millisecond
  why.clear();
  st = push(ctx, p.la, src, target, {{0, 0, 4096}}, 0, &why);
  EXPECT(st != SLIP_OK && why.find("transport retry counter exceeded") != std::string::npos,
         "closed peer: status %d, '%s'", st, why.c_str());
  slip_nic_link_destroy(p.la);
  EXPECT(slip_nic_dereg(p.a, 7, src_key) == SLIP_OK && slip_nic_dereg(p.a, 7, src_key) == SLIP_ERR_BAD_REGION,
         "dereg: %s", slip_last_error());
  slip_nic_close(p.a);
  slip_region_destroy(src);
  slip_ctx_destroy(ctx);
  cudaFree(landing);
  cudaFreeHost(host);
  printf("software NIC: push over a link, forged key, range and closed peer checked\n");
}

}  // namespace

int main() {
  printf("gpunetio NIC implementation: %s\n", slip_nic_impl());
  test_arguments();
  test_missing_device();
  const char *ibdev = getenv("SLIP_TEST_IBDEV");
  test_loopback(ibdev && *ibdev ? ibdev : "mlx5_0");
  test_softnic();
  return check_report("nic_test");
}
