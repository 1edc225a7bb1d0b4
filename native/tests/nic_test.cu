// The real-NIC path's host side (slipstream/gpunetio_nic.h) as far as a machine without an RDMA
// device can take it: argument checks, the implementation and its libraries, and the error that
// names a missing device. Where an mlx5 device and a GPU are present (SLIP_TEST_IBDEV, default
// mlx5_0), it also creates two links, connects their queue pairs to each other through the port
// (loopback), checks the records each side sent and registers device memory; otherwise that part
// prints SKIP with the reason.
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "check.h"
#include "slipstream/gpunetio_nic.h"

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

}  // namespace

int main() {
  printf("gpunetio NIC implementation: %s\n", slip_nic_impl());
  test_arguments();
  test_missing_device();
  const char *ibdev = getenv("SLIP_TEST_IBDEV");
  test_loopback(ibdev && *ibdev ? ibdev : "mlx5_0");
  return check_report("nic_test");
}
