// All-to-all among N processes, one GPU each (method in docs/benchmarks/2026-11-30-gpu-all-to-all.md).
//   slip_a2a --ranks N [--quick] [--block BYTES] [--peer-queues Q] [--stagger]
// Every rank pushes per_gpu / N bytes to every rank (itself included, as NCCL's all_to_all_single
// does) with the nvlink push kernel, into slot [rank * slice, (rank + 1) * slice) of the
// destination's landing region, and signals per queue. Timed per rank with CUDA events over
// back-to-back launches between barriers; a rank's figure is the bytes it sends to other GPUs
// (per_gpu * (N - 1) / N, the definition of shared/baselines/nccl_a2a.py) over its median launch
// time, and the row reports the slowest rank. Verified afterwards: every slice byte-exact and every
// rank's signal totals.
// With more ranks than GPUs, ranks share GPUs (rank % GPUs): that checks the exchange, and its
// figures are marked "shared" (they are not per-GPU link figures).
// --peer-queues Q gives each other rank Q queues (CUDA blocks) instead of an even share of three
// quarters of 2 x SMs; --stagger orders a rank's queues by destination starting with rank + 1
// (wrapping), so the blocks that start first do not all write to the same GPU. Both are for the
// 4- and 8-GPU sweeps (docs/benchmarks/2026-11-30-gpu-all-to-all.md has the 4-rank figure: 59% of the 2-rank one).
// Lines starting with "csv," are machine-readable:
//   csv,a2a,nvlink,<ranks>_ranks,<gpus>_gpus,block,bytes_per_gpu,ms,GBps_per_gpu,verified
#include <inttypes.h>

#include <algorithm>
#include <vector>

#include "../tests/pair_common.cuh"
#include "push_plan.cuh"
#include "slipstream/kernels.h"

namespace {

constexpr uint32_t kMaxRanks = 16;
constexpr uint64_t kChunk = 256 * 1024;  // pieces spread over a destination's queues
constexpr uint32_t kThreads = 512;

struct Mesh {
  int rank = 0, ranks = 0, device = 0, ngpus = 0;
  int fd[kMaxRanks];  // socket to each other rank (-1 for itself)
  pid_t child[kMaxRanks];
};

// Forks ranks - 1 children joined pairwise by sockets; CUDA is touched only after the fork.
// Returns 77 (skip) from rank 0 when some rank finds no GPU.
int mesh_start(Mesh *m, int ranks, unsigned limit_s) {
  alarm(limit_s);
  int sv[kMaxRanks][kMaxRanks][2];
  for (int i = 0; i < ranks; i++)
    for (int j = i + 1; j < ranks; j++)
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i][j]) != 0) {
        perror("socketpair");
        exit(3);
      }
  m->ranks = ranks;
  m->rank = 0;
  for (int r = 1; r < ranks; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      exit(3);
    }
    if (pid == 0) {
      m->rank = r;
      break;
    }
    m->child[r] = pid;
  }
  for (int i = 0; i < ranks; i++)
    for (int j = i + 1; j < ranks; j++) {
      if (i == m->rank) {
        m->fd[j] = sv[i][j][0];
        close(sv[i][j][1]);
      } else if (j == m->rank) {
        m->fd[i] = sv[i][j][1];
        close(sv[i][j][0]);
      } else {
        close(sv[i][j][0]);
        close(sv[i][j][1]);
      }
    }
  m->fd[m->rank] = -1;
  int n = 0;
  int ok = slip_cuda_probe(&n) == SLIP_OK, all = ok;
  // Rank 0 gathers everyone's probe and answers with the verdict.
  if (m->rank == 0) {
    for (int r = 1; r < ranks; r++) {
      int o = 0;
      T_SLIP(slip_oob_recv(m->fd[r], &o, sizeof o));
      all &= o;
    }
    for (int r = 1; r < ranks; r++) T_SLIP(slip_oob_send(m->fd[r], &all, sizeof all));
  } else {
    T_SLIP(slip_oob_send(m->fd[0], &ok, sizeof ok));
    T_SLIP(slip_oob_recv(m->fd[0], &all, sizeof all));
  }
  if (!all) {
    if (m->rank != 0) exit(0);
    printf("SKIP: %s\n", ok ? "another rank found no usable GPU" : slip_last_error());
    for (int r = 1; r < ranks; r++) waitpid(m->child[r], nullptr, 0);
    return 77;
  }
  m->ngpus = n;
  m->device = m->rank % n;
  return 0;
}

void mesh_barrier(const Mesh &m) {
  int token = 0x5117;
  if (m.rank == 0) {
    for (int r = 1; r < m.ranks; r++) {
      int got = 0;
      T_SLIP(slip_oob_recv(m.fd[r], &got, sizeof got));
      if (got != token) {
        fprintf(stderr, "[rank 0] barrier: got 0x%x from rank %d, expected 0x%x\n", got, r, token);
        exit(3);
      }
    }
    for (int r = 1; r < m.ranks; r++) T_SLIP(slip_oob_send(m.fd[r], &token, sizeof token));
  } else {
    int got = 0;
    T_SLIP(slip_oob_send(m.fd[0], &token, sizeof token));
    T_SLIP(slip_oob_recv(m.fd[0], &got, sizeof got));
    if (got != token) {
      fprintf(stderr, "[rank %d] barrier: got 0x%x, expected 0x%x\n", m.rank, got, token);
      exit(3);
    }
  }
}

// Rank 0 receives one value from every rank (its own first); the others get nothing back.
template <class T>
std::vector<T> gather(const Mesh &m, T mine) {
  std::vector<T> all(m.ranks);
  all[m.rank] = mine;
  if (m.rank == 0) {
    for (int r = 1; r < m.ranks; r++) T_SLIP(slip_oob_recv(m.fd[r], &all[r], sizeof(T)));
  } else {
    T_SLIP(slip_oob_send(m.fd[0], &mine, sizeof mine));
  }
  return all;
}

int mesh_finish(Mesh &m) {
  for (int r = 0; r < m.ranks; r++)
    if (r != m.rank) close(m.fd[r]);
  if (m.rank != 0) return 0;
  int rc = 0;
  for (int r = 1; r < m.ranks; r++) {
    int status = 0;
    waitpid(m.child[r], &status, 0);
    if (!WIFEXITED(status)) {
      fprintf(stderr, "rank %d ended by signal %d\n", r, WIFSIGNALED(status) ? WTERMSIG(status) : -1);
      rc = 4;
    } else if (WEXITSTATUS(status) != 0) {
      rc = WEXITSTATUS(status);
    }
  }
  return rc;
}

uint64_t seed_of(int rank) { return 0x2000 + (uint64_t)rank; }

struct Rank {
  Mesh m;
  slip_ctx *ctx = nullptr;
  slip_region *src = nullptr, *landing = nullptr, *sig = nullptr;
  std::vector<slip_remote *> remotes;  // [landing of rank 0, signals of rank 0, landing of rank 1, ...]
  slip_queueset *qs = nullptr;
  uint32_t nq = 0;
  std::vector<uint32_t> q_begin, q_end;  // queues [q_begin[d], q_end[d]) write to rank d
  uint32_t peer_queues = 0;              // 0: the even share
  bool stagger = false;
  cudaStream_t stream;
  cudaEvent_t e0, e1;
};

// Queues per destination: the other ranks share three quarters of them evenly (or get
// --peer-queues each), the rank's own slice (a copy inside its GPU) gets the rest (at least one),
// as the 2-rank exchange of slip_bench does. Ranges are contiguous, in destination order from rank
// 0, or from rank + 1 with --stagger.
void assign_queues(Rank &k) {
  const int n = k.m.ranks;
  const uint32_t per_peer =
      k.peer_queues > 0 ? k.peer_queues : std::max<uint32_t>(1, k.nq * 3 / 4 / (uint32_t)(n - 1));
  const uint32_t own = std::max<uint32_t>(1, k.nq - std::min(k.nq, per_peer * (uint32_t)(n - 1)));
  k.q_begin.assign(n, 0);
  k.q_end.assign(n, 0);
  uint32_t at = 0;
  for (int i = 0; i < n; i++) {
    const int d = k.stagger ? (k.m.rank + 1 + i) % n : i;
    k.q_begin[d] = at;
    at += d == k.m.rank ? own : per_peer;
    k.q_end[d] = at;
  }
  k.nq = at;
}

// Slice d of this rank's source ([d * slice, (d + 1) * slice)) goes to slot rank of rank d's
// landing, in pieces of min(block, kChunk) dealt round-robin over d's queues; the i-th queue to d
// signals slot (rank * nq_max + i) of d's signal region. Table indices: the source is local 0,
// then the remotes: rank d's landing 1 + 2d, its signals 2 + 2d.
PushPlan make_plan(const Rank &k, uint64_t slice, uint64_t block, uint32_t nq_max, std::vector<uint64_t> &items_to) {
  PushPlan p;
  const int n = k.m.ranks;
  p.cfg.resize(k.nq);
  items_to.assign(n, 0);
  std::vector<std::vector<slip_push_item>> per_q(k.nq);
  const uint64_t piece = std::min(block, kChunk);
  for (int d = 0; d < n; d++) {
    const uint32_t q0 = k.q_begin[d], q1 = k.q_end[d];
    for (uint32_t q = q0; q < q1; q++)
      p.cfg[q] = {0, (uint32_t)(1 + 2 * d), (uint32_t)(2 + 2 * d), 0, ((uint64_t)k.m.rank * nq_max + (q - q0)) * 8};
    uint64_t i = 0;
    for (uint64_t o = 0; o < slice; o += piece, i++)
      per_q[q0 + i % (q1 - q0)].push_back({(uint64_t)d * slice + o, (uint64_t)k.m.rank * slice + o,
                                           std::min(piece, slice - o)});
    items_to[d] = i;
  }
  plan_upload(p, per_q, piece);
  return p;
}

void launch(Rank &k, PushPlan &p) {
  T_SLIP(slip_push(slip_queueset_device(k.qs), k.nq, p.d_cfg, p.d_items, p.d_start, p.batch, kThreads, p.d_status,
                   k.stream));
}

// One exchange size: 2 warm-up launches, then `reps` launches each timed alone between barriers
// (all ranks start together, as a collective would); returns this rank's median ms.
double time_exchange(Rank &k, PushPlan &p, int reps) {
  for (int w = 0; w < 2; w++) launch(k, p);
  wait_stream(k.stream);
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    mesh_barrier(k.m);
    T_CUDA(cudaEventRecord(k.e0, k.stream));
    launch(k, p);
    T_CUDA(cudaEventRecord(k.e1, k.stream));
    wait_event(k.e1);
    float ms = 0;
    T_CUDA(cudaEventElapsedTime(&ms, k.e0, k.e1));
    t.push_back(ms);
  }
  plan_check_status(p, k.qs, k.m.rank);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// What landed here after `launches` launches: slot s holds slice `rank` of rank s's source, and
// rank s's signals add up to launches * slice bytes in launches * items blocks.
bool verify(Rank &k, uint64_t slice, uint64_t launches, const std::vector<uint64_t> &items_from, uint32_t nq_max) {
  unsigned long long *d_bad, bad = 0;
  T_CUDA(cudaMalloc(&d_bad, 8));
  bool ok = true;
  std::vector<uint64_t> sig((size_t)k.m.ranks * nq_max);
  T_CUDA(cudaMemcpy(sig.data(), slip_region_ptr(k.sig), sig.size() * 8, cudaMemcpyDeviceToHost));
  for (int s = 0; s < k.m.ranks; s++) {
    T_CUDA(cudaMemset(d_bad, 0, 8));
    check_pattern<<<1024, 256>>>((const uint8_t *)slip_region_ptr(k.landing) + (uint64_t)s * slice, slice,
                                 (uint64_t)k.m.rank * slice, seed_of(s), d_bad);
    T_LAUNCH();
    T_CUDA(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
    uint64_t blocks = 0, bytes = 0;
    for (uint32_t q = 0; q < nq_max; q++) {
      blocks += SLIP_SIGNAL_BLOCKS(sig[(size_t)s * nq_max + q]);
      bytes += SLIP_SIGNAL_BYTES(sig[(size_t)s * nq_max + q]);
    }
    if (bad != 0 || bytes != launches * slice || blocks != launches * items_from[s]) {
      fprintf(stderr, "[rank %d] from rank %d: %llu bytes differ; signals %" PRIu64 " blocks / %" PRIu64
                      " bytes, expected %" PRIu64 " / %" PRIu64 "\n",
              k.m.rank, s, bad, blocks, bytes, launches * items_from[s], launches * slice);
      ok = false;
    }
  }
  T_CUDA(cudaFree(d_bad));
  return ok;
}

int run(Rank &k, bool quick, uint64_t block) {
  Mesh &m = k.m;
  const uint64_t max_per_gpu = quick ? (256ull << 20) : (1ull << 30);
  T_SLIP(slip_ctx_create(m.device, &k.ctx));
  int sms = 0;
  T_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, m.device));
  k.nq = 2 * (uint32_t)sms;
  if (k.peer_queues > k.nq) {
    fprintf(stderr, "a2a: --peer-queues %u, expected at most 2 x SMs = %u\n", k.peer_queues, k.nq);
    return 2;
  }
  const uint32_t nq_max = k.nq;  // signal slots per sender: no destination gets more queues than this
  T_SLIP(slip_region_create(k.ctx, SLIP_MEM_DEVICE, max_per_gpu, 1, &k.src));
  T_SLIP(slip_region_create(k.ctx, SLIP_MEM_DEVICE, max_per_gpu, 10 + (uint32_t)m.rank, &k.landing));
  T_SLIP(slip_region_create(k.ctx, SLIP_MEM_DEVICE, (uint64_t)m.ranks * nq_max * 8, 40 + (uint32_t)m.rank, &k.sig));
  fill_pattern<<<2048, 256>>>((uint8_t *)slip_region_ptr(k.src), max_per_gpu, seed_of(m.rank));
  T_LAUNCH();
  T_CUDA(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
  T_CUDA(cudaEventCreate(&k.e0));
  T_CUDA(cudaEventCreate(&k.e1));
  // Every rank sends its two descriptors to every other rank (lower rank sends first on each pair).
  slip_region_desc mine[2];
  T_SLIP(slip_region_export(k.landing, &mine[0]));
  T_SLIP(slip_region_export(k.sig, &mine[1]));
  k.remotes.assign(2 * (size_t)m.ranks, nullptr);
  for (int r = 0; r < m.ranks; r++) {
    if (r == m.rank) {
      T_SLIP(slip_remote_alias(k.landing, &k.remotes[2 * r]));
      T_SLIP(slip_remote_alias(k.sig, &k.remotes[2 * r + 1]));
      continue;
    }
    slip_region_desc theirs[2];
    if (m.rank < r) {
      T_SLIP(slip_oob_send(m.fd[r], mine, sizeof mine));
      T_SLIP(slip_oob_recv(m.fd[r], theirs, sizeof theirs));
    } else {
      T_SLIP(slip_oob_recv(m.fd[r], theirs, sizeof theirs));
      T_SLIP(slip_oob_send(m.fd[r], mine, sizeof mine));
    }
    T_SLIP(slip_remote_import(k.ctx, &theirs[0], sizeof theirs[0], &k.remotes[2 * r]));
    T_SLIP(slip_remote_import(k.ctx, &theirs[1], sizeof theirs[1], &k.remotes[2 * r + 1]));
  }
  assign_queues(k);
  const slip_region *locals[1] = {k.src};
  std::vector<const slip_remote *> rem(k.remotes.begin(), k.remotes.end());
  T_SLIP(slip_queueset_create(k.ctx, SLIP_BACKEND_NVLINK, k.nq, 0, locals, 1, rem.data(), (uint32_t)rem.size(), &k.qs));
  T_CUDA(cudaDeviceSynchronize());
  const bool shared = m.ranks > m.ngpus;
  if (m.rank == 0) {
    const int peer = m.rank == 0 ? 1 : 0;
    printf("a2a: %d ranks on %d GPUs%s, %d SMs, %u queues x %u threads per rank (%u per peer%s), block %" PRIu64 "\n",
           m.ranks, std::min(m.ranks, m.ngpus), shared ? " (ranks share GPUs: figures are not per-GPU link figures)" : "",
           sms, k.nq, kThreads, k.q_end[peer] - k.q_begin[peer], k.stagger ? ", staggered" : "", block);
    fflush(stdout);
  }
  const int reps = quick ? 3 : 10;
  bool all_ok = true;
  for (uint64_t per_gpu : {64ull << 20, 256ull << 20, 1ull << 30}) {
    if (per_gpu > max_per_gpu) continue;
    const uint64_t slice = per_gpu / (uint64_t)m.ranks / 4096 * 4096;
    T_CUDA(cudaMemset(slip_region_ptr(k.landing), 0x5A, max_per_gpu));
    T_CUDA(cudaMemset(slip_region_ptr(k.sig), 0, slip_region_length(k.sig)));
    T_CUDA(cudaDeviceSynchronize());
    std::vector<uint64_t> items_to;
    PushPlan p = make_plan(k, slice, block, nq_max, items_to);
    mesh_barrier(m);
    const double ms = time_exchange(k, p, reps);
    mesh_barrier(m);
    // Items each sender pushed to this rank per launch, for the signal check.
    std::vector<uint64_t> items_from(m.ranks);
    for (int r = 0; r < m.ranks; r++) {
      uint64_t mine_to_r = items_to[r], got = 0;
      if (r == m.rank) {
        items_from[r] = mine_to_r;
        continue;
      }
      if (m.rank < r) {
        T_SLIP(slip_oob_send(m.fd[r], &mine_to_r, sizeof mine_to_r));
        T_SLIP(slip_oob_recv(m.fd[r], &got, sizeof got));
      } else {
        T_SLIP(slip_oob_recv(m.fd[r], &got, sizeof got));
        T_SLIP(slip_oob_send(m.fd[r], &mine_to_r, sizeof mine_to_r));
      }
      items_from[r] = got;
    }
    const bool ok = verify(k, slice, (uint64_t)reps + 2, items_from, nq_max);
    const std::vector<double> all_ms = gather(m, ms);
    const std::vector<int> all_ok_v = gather(m, (int)ok);
    if (m.rank == 0) {
      const double worst = *std::max_element(all_ms.begin(), all_ms.end());
      const double best = *std::min_element(all_ms.begin(), all_ms.end());
      bool v = true;
      for (int o : all_ok_v) v &= o != 0;
      all_ok &= v;
      const uint64_t sent = slice * (uint64_t)(m.ranks - 1);  // bytes to other GPUs per rank per launch
      printf("csv,a2a%s,nvlink,%d_ranks,%d_gpus,%" PRIu64 ",%" PRIu64 ",%.4f,%.1f,%s\n", shared ? "_shared" : "", m.ranks,
             std::min(m.ranks, m.ngpus), block, slice * (uint64_t)m.ranks, worst, sent / (worst * 1e6), v ? "yes" : "NO");
      printf("a2a %d ranks, %" PRIu64 " MiB per GPU: slowest rank %.3f ms, fastest %.3f ms, %.1f GB/s sent per GPU"
             " (to other GPUs, slowest rank)%s\n",
             m.ranks, (slice * (uint64_t)m.ranks) >> 20, worst, best, sent / (worst * 1e6), v ? "" : " NOT VERIFIED");
      fflush(stdout);
    }
    plan_free(p);
  }
  mesh_barrier(m);
  slip_queueset_destroy(k.qs);
  for (slip_remote *r : k.remotes) slip_remote_destroy(r);
  for (slip_region *r : {k.src, k.landing, k.sig}) slip_region_destroy(r);
  slip_ctx_destroy(k.ctx);
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  int ranks = 0;
  bool quick = false;
  uint64_t block = 1 << 20;
  long peer_queues = 0;
  bool stagger = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
      ranks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--block") && i + 1 < argc) {
      block = strtoull(argv[++i], nullptr, 10);
    } else if (!strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!strcmp(argv[i], "--peer-queues") && i + 1 < argc) {
      peer_queues = strtol(argv[++i], nullptr, 10);
      if (peer_queues < 1) {
        fprintf(stderr, "--peer-queues '%s', expected a positive number\n", argv[i]);
        ranks = 0;
        break;
      }
    } else if (!strcmp(argv[i], "--stagger")) {
      stagger = true;
    } else {
      fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      ranks = 0;
      break;
    }
  }
  if (ranks < 2 || ranks > (int)kMaxRanks || block < 4096 || block % 4096 != 0) {
    fprintf(stderr,
            "usage: %s --ranks N [--quick] [--block BYTES] [--peer-queues Q] [--stagger]  (N in [2, %u], block a"
            " multiple of 4096)\n",
            argv[0], kMaxRanks);
    return 2;
  }
  Rank k;
  k.peer_queues = (uint32_t)std::min<long>(peer_queues, 1 << 20);
  k.stagger = stagger;
  const int rc = mesh_start(&k.m, ranks, 300);
  if (rc != 0) return rc;
  const int r = run(k, quick, block);
  const int children = mesh_finish(k.m);
  return r != 0 ? r : children;
}
