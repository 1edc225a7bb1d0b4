// The resident server across two processes, as executors of one machine use it: the reader makes
// its ring in a shared-memory file and its landing region in its GPU's memory (exported with a
// CUDA IPC handle); the holder maps the file into its GPU (cudaHostRegister), imports the landing
// region, and serves from its own map output. The reader checks every pushed byte against the
// holder's pattern on its GPU and measures publish to answer (`serve_pair_test bench`). With one
// GPU both processes use it (IPC within one device); with two, NVLink or PCIe between them.
#include <fcntl.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "check.h"
#include "serve_common.cuh"

using namespace serve_test;

namespace {

constexpr uint64_t kLanding = 8ull << 20;
constexpr uint64_t kOutput = 4ull << 20;  // one partition per 1 MiB of the holder's output
constexpr uint32_t kParts = 4;
constexpr uint64_t kSeed = 77;
constexpr uint32_t kSlots = 64;

struct Hello {
  char path[96];
  cudaIpcMemHandle_t landing;
};

/* Makes the ring file at `path` (mode 0600) and maps it; exits the process on failure. */
uint8_t *make_ring_file(const char *path, uint64_t bytes) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
    perror(path);
    exit(3);
  }
  void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    perror("mmap");
    exit(3);
  }
  return (uint8_t *)mem;
}

int reader(Pair &p, bool bench) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/slipstream-serve-pair-%d", (int)getpid());
  const uint64_t bytes = slip_serve_ring_bytes(kSlots);
  uint8_t *mem = make_ring_file(path, bytes);
  Ring ring;
  ring.format(mem, 0, kSlots);  // the holder maps it; the reader needs no device address
  uint8_t *landing = nullptr;
  T_CUDA(cudaMalloc(&landing, kLanding));
  T_CUDA(cudaMemset(landing, 0xEE, kLanding));
  Hello h;
  memset(&h, 0, sizeof h);
  snprintf(h.path, sizeof h.path, "%s", path);
  T_CUDA(cudaIpcGetMemHandle(&h.landing, landing));
  T_CUDA(cudaDeviceSynchronize());
  T_SLIP(slip_oob_send(p.fd, &h, sizeof h));
  pair_barrier(&p);  // the holder serves
  unsigned long long *d_bad = nullptr;
  T_CUDA(cudaMalloc(&d_bad, sizeof *d_bad));
  // Each partition p of the holder's output is its bytes [p MiB, (p + 1) MiB), the holder's pattern.
  {
    slip_serve_request q = request(1, 3, 0);
    for (uint32_t b = 0; b < kParts; b++) add_block(q, 42, b, (1ull << 20) * (b + 1), 1ull << 20);
    const uint64_t t = ring.post(q);
    slip_serve_done d{};
    EXPECT(ring.wait(t, &d), "no answer");
    EXPECT(d.status == SLIP_OK && d.bytes == kOutput, "status %d (%s), %" PRIu64 " bytes", d.status,
           slip_status_name((slip_status)d.status), d.bytes);
    for (uint32_t b = 0; b < kParts; b++) {
      T_CUDA(cudaMemset(d_bad, 0, sizeof *d_bad));
      check_pattern<<<128, 256>>>(landing + (1ull << 20) * (b + 1), 1ull << 20, (1ull << 20) * b, kSeed, d_bad);
      T_LAUNCH();
      unsigned long long bad = 0;
      T_CUDA(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
      EXPECT(bad == 0, "block %u: %llu bytes differ from the holder's", b, bad);
    }
    uint64_t table[2 + 2 * kParts];
    T_CUDA(cudaMemcpy(table, landing, sizeof table, cudaMemcpyDeviceToHost));
    EXPECT(table[0] == 1 && (uint32_t)table[1] == kParts && (table[1] >> 32) == SLIP_SERVE_TABLE_MAGIC,
           "table header %" PRIu64 " 0x%" PRIx64, table[0], table[1]);
    for (uint32_t b = 0; b < kParts; b++) EXPECT(table[2 + 2 * b] == (1ull << 20), "record %u", b);
    // A forged key is refused by the holder's kernel and writes nothing into this process's memory.
    T_CUDA(cudaMemset(landing, 0xEE, kLanding));
    T_CUDA(cudaDeviceSynchronize());
    q.landing_key ^= 0x10;
    const uint64_t t2 = ring.post(q);
    EXPECT(ring.wait(t2, &d) && d.status == SLIP_ERR_BAD_KEY, "forged key: status %d", d.status);
    std::vector<uint8_t> back(kLanding);
    T_CUDA(cudaMemcpy(back.data(), landing, kLanding, cudaMemcpyDeviceToHost));
    EXPECT(std::all_of(back.begin(), back.end(), [](uint8_t v) { return v == 0xEE; }), "a refused request wrote");
    printf("serve pair: %u blocks of 1 MiB served across processes byte-exact; a forged key refused, nothing written\n",
           kParts);
  }
  if (bench) {
    for (uint64_t size : {16ull, 4096ull, 65536ull, 1ull << 20}) {
      std::vector<double> us;
      const int n = 2000;
      for (int i = 0; i < n; i++) {
        slip_serve_request q = request(100 + i, 3, 0);
        add_block(q, size == 16 ? 43 : size == 4096 ? 44 : size == 65536 ? 45 : 42, 0, 1ull << 20, 1ull << 20);
        const uint64_t t0 = mono_ns();
        const uint64_t t = ring.post(q);
        slip_serve_done d{};
        if (!ring.wait(t, &d) || d.status != SLIP_OK) {
          EXPECT(false, "bench request %d: status %d", i, d.status);
          break;
        }
        us.push_back((mono_ns() - t0) / 1000.0);
      }
      if (us.size() == (size_t)n) {
        std::sort(us.begin(), us.end());
        printf("serve pair bench: %" PRIu64 " B blocks, %d requests one at a time, reader and holder in two processes: "
               "publish to answer median %.2f us, p10 %.2f, p90 %.2f, p99 %.2f\n",
               size, n, us[n / 2], us[n / 10], us[n * 9 / 10], us[n * 99 / 100]);
      }
    }
  }
  pair_barrier(&p);  // done
  unlink(path);
  munmap(mem, bytes);
  T_CUDA(cudaFree(d_bad));
  T_CUDA(cudaFree(landing));
  return g_failures ? 1 : 0;
}

int holder(Pair &p) {
  Hello h;
  T_SLIP(slip_oob_recv(p.fd, &h, sizeof h));
  void *landing = nullptr;
  T_CUDA(cudaIpcOpenMemHandle(&landing, h.landing, cudaIpcMemLazyEnablePeerAccess));
  uint8_t *out = nullptr;
  T_CUDA(cudaMalloc(&out, kOutput));
  fill_pattern<<<128, 256>>>(out, kOutput, kSeed);
  T_LAUNCH();
  // Map 42: kParts partitions of 1 MiB; maps 43 to 45: one partition of 16 B, 4 KiB, 64 KiB.
  uint64_t *d_offsets = nullptr;
  T_CUDA(cudaMalloc(&d_offsets, 8 * 16));
  std::vector<uint64_t> offs;
  for (uint32_t b = 0; b <= kParts; b++) offs.push_back((1ull << 20) * b);
  offs.insert(offs.end(), {0, 16, 0, 4096, 0, 65536});
  T_CUDA(cudaMemcpy(d_offsets, offs.data(), offs.size() * 8, cudaMemcpyHostToDevice));
  T_CUDA(cudaDeviceSynchronize());
  slip_ctx *ctx = nullptr;
  slip_server *server = nullptr;
  slip_serve_ring_map *ring = nullptr;
  T_SLIP(slip_ctx_create(p.device, &ctx));
  T_SLIP(slip_serve_ring_attach(ctx, h.path, &ring));
  T_SLIP(slip_server_create(ctx, 2, 64, 2, 256, 10000000000ull, &server));
  T_SLIP(slip_server_set_reader(server, 0, slip_serve_ring_device(ring), slip_serve_ring_host(ring),
                                (uint64_t)(uintptr_t)landing, kLanding, kKey));
  const uint64_t base = (uint64_t)(uintptr_t)out, d_offs = (uint64_t)(uintptr_t)d_offsets;
  T_SLIP(slip_server_put_output(server, 3, 42, base, d_offs, 0, kParts, SLIP_SERVE_NO_NIC, 0, 0, 0));
  T_SLIP(slip_server_put_output(server, 3, 43, base, d_offs + 8 * (kParts + 1), 0, 1, SLIP_SERVE_NO_NIC, 0, 0, 0));
  T_SLIP(slip_server_put_output(server, 3, 44, base, d_offs + 8 * (kParts + 3), 0, 1, SLIP_SERVE_NO_NIC, 0, 0, 0));
  T_SLIP(slip_server_put_output(server, 3, 45, base, d_offs + 8 * (kParts + 5), 0, 1, SLIP_SERVE_NO_NIC, 0, 0, 0));
  T_SLIP(slip_server_start(server, nullptr));
  pair_barrier(&p);  // serving
  pair_barrier(&p);  // the reader is done
  slip_serve_stats stats;
  T_SLIP(slip_server_stats(server, &stats));
  printf("serve pair: holder served %" PRIu64 " requests, refused %" PRIu64 ", pushed %" PRIu64 " bytes\n", stats.served,
         stats.failed, stats.bytes);
  T_SLIP(slip_server_stop(server));
  slip_server_destroy(server);
  T_CUDA(cudaIpcCloseMemHandle(landing));
  slip_serve_ring_detach(ring);
  T_CUDA(cudaFree(d_offsets));
  T_CUDA(cudaFree(out));
  slip_ctx_destroy(ctx);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const bool bench = argc > 1 && strcmp(argv[1], "bench") == 0;
  Pair p;
  const int skip = pair_start(&p, bench ? 300 : 120);
  if (skip) return skip;
  T_CUDA(cudaSetDevice(p.device));
  const int rc = p.rank == 1 ? reader(p, bench) : holder(p);
  if (p.rank == 1) {
    pair_finish(&p);
    exit(rc);
  }
  const int child = pair_finish(&p);
  if (rc != 0 || child != 0) {
    fprintf(stderr, "serve_pair_test: holder %d, reader %d\n", rc, child);
    return 1;
  }
  printf("serve_pair_test: PASS\n");
  return 0;
}
