// The software NIC behind the NIC API (nic_impl.h; device "softnic" of slipstream/gpunetio_nic.h).
//
// A soft_nic is one NIC of one process: a GID of its own, the regions registered on it, and its
// fabric file, /dev/shm/slipstream-softnic-<GID>: a header (owner pid, device) and one slot per
// registration (id, memory key, length, and where a peer finds the memory: the CUDA IPC handle of
// the allocation and the region's offset in it for device memory, the path of the shared file it
// maps for host memory, which peers map themselves and register with their GPU). The owner writes the file; peers map it read-only. A link is a gpunetio queue
// set of the software NIC (gpunetio_host.cu: GPU-built WQEs in pinned host memory, CQEs written by
// the engine's threads) whose rkeys are looked up in the connected peer's fabric file: the check a
// responder NIC makes against its own memory registrations, made here by the requester's threads,
// which then copy into the peer's memory through CUDA IPC. So a write with a forged or stale key,
// or past the end of the peer's region, fails with the remote access error and writes nothing,
// and a write to a peer whose process is gone fails with the transport retry error.
//
// What a real NIC does differently: the responder checks keys in its own hardware, packets cross
// a wire (retransmission, PSNs), and a doorbell write starts it instead of a thread's poll of the
// producer index. The WQEs, keys, addresses, completions and error states are the same.
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "check.h"
#include "cuda_objects.h"
#include "gpunetio.h"
#include "nic_impl.h"
#include "nic_qp.h"
#include "slipstream/softnic.h"

namespace {
constexpr uint32_t kFabricMagic = 0x46534c53u;  // "SLSF"
constexpr uint32_t kFabricVersion = 2;
constexpr uint32_t kFabricSlots = 16384;        // registrations per NIC at once
constexpr const char *kFabricPrefix = "slipstream-softnic-";
constexpr uint64_t kAliveCheckNs = 1000000;     // how often a link looks at its peer's pid
constexpr size_t kPathBytes = 160;               // a host region's file path, NUL-terminated
enum : uint32_t { kDeviceSlot = 0, kFileSlot = 1 };

struct FabricSlot {
  uint32_t state;             // 0 free, 1 registered: stored last when registering, first when removing
  uint32_t id;
  uint32_t mkey;
  uint32_t kind;              // kDeviceSlot or kFileSlot
  uint64_t length;
  uint64_t offset;            // device: of the region within its CUDA allocation
  uint64_t owner_ptr;         // the region's address in the owner's process
  cudaIpcMemHandle_t handle;  // device: of the allocation
  char path[kPathBytes];      // host: the shared file the region maps from its first byte
};
struct FabricHeader {
  uint32_t magic, version;
  int32_t pid;                // 0 once the owner closed the NIC
  int32_t device;
  uint8_t gid[16];
  uint32_t slots, reserved;
};
constexpr size_t kFabricBytes = sizeof(FabricHeader) + (size_t)kFabricSlots * sizeof(FabricSlot);

FabricSlot *slots_of(void *fabric) { return (FabricSlot *)((char *)fabric + sizeof(FabricHeader)); }

std::string gid_hex(const uint8_t gid[16]) {
  char b[33];
  for (int i = 0; i < 16; i++) snprintf(b + 2 * i, 3, "%02x", gid[i]);
  return std::string(b, 32);
}
std::string fabric_path(const uint8_t gid[16]) { return std::string("/dev/shm/") + kFabricPrefix + gid_hex(gid); }

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

bool alive(int32_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// Fabric files of NICs whose process died without closing them.
void remove_stale_fabrics() {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  for (dirent *e; (e = readdir(d)) != nullptr;) {
    if (strncmp(e->d_name, kFabricPrefix, strlen(kFabricPrefix)) != 0) continue;
    const std::string p = std::string("/dev/shm/") + e->d_name;
    const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    FabricHeader h;
    const bool read_ok = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h;
    close(fd);
    if (read_ok && h.magic == kFabricMagic && !alive(h.pid)) unlink(p.c_str());
  }
  closedir(d);
}

// cuMemGetAddressRange through the runtime (the library does not link libcuda).
using AddressRangeFn = CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr);
AddressRangeFn address_range_fn() {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return (AddressRangeFn)fn;
}

struct LocalReg {
  uint32_t id, mkey, slot;
  uint64_t length;
  void *ptr;
};
}  // namespace

struct soft_nic {
  int device = 0;
  uint8_t gid[16];
  std::string path;
  void *fabric = nullptr;  // kFabricBytes, read-write
  std::mutex mu;           // guards regs and the fabric's slots
  std::vector<LocalReg> regs;
  std::atomic<uint32_t> next_qpn{0x1000};
};

struct soft_nic_link {
  soft_nic *nic = nullptr;
  uint32_t nq = 0;
  slip_dev_error *err = nullptr;  // pinned, mapped: the first error the engine found on the link
  slip_gpunetio *g = nullptr;
  std::vector<uint32_t> qpn, psn;
  std::vector<uint8_t> connected;
  std::mutex mu;                  // guards everything below (the engine's threads look up rkeys)
  bool have_peer = false;
  uint8_t peer_gid[16];
  const void *peer = nullptr;     // the peer's fabric file, read-only
  uint64_t peer_checked_ns = 0;
  bool peer_gone = false;
  struct Hit {
    uint32_t slot;
    slip_region_entry entry;
  };
  std::unordered_map<uint64_t, Hit> hits;  // (id << 32 | rkey) -> slot and region
  std::vector<std::pair<std::string, void *>> mappings;  // peer allocations this link mapped (handle, base)
  struct FileMap {
    std::string path;
    uint32_t mkey;
    void *host;
    uint64_t length;
    void *dev;
  };
  std::vector<FileMap> files;  // peer host regions this link mapped and registered with its GPU
};

namespace {
// pd.find of the NIC's own registrations (sources and atomic results): the region `id` with `mkey`,
// else any region `id` so that the check names the wrong key.
int find_local(void *state, uint32_t id, uint32_t mkey, slip_region_entry *out) {
  soft_nic *n = (soft_nic *)state;
  std::lock_guard<std::mutex> g(n->mu);
  int found = 0;
  for (const LocalReg &r : n->regs) {
    if (r.id != id) continue;
    *out = {r.id, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE, r.mkey, r.length, r.ptr};
    found = 1;
    if (r.mkey == mkey) break;
  }
  return found;
}

// The address of a peer's slot in this process: its own pointer when the peer is this process,
// else the allocation mapped through CUDA IPC (once per link). Caller holds l->mu.
void *reach(soft_nic_link *l, const FabricHeader *h, const FabricSlot &s) {
  if (h->pid == getpid()) return (void *)(uintptr_t)s.owner_ptr;
  const std::string key((const char *)&s.handle, sizeof s.handle);
  for (const auto &m : l->mappings)
    if (m.first == key) return (char *)m.second + s.offset;
  void *base = nullptr;
  if (slip_ipc_map(l->nic->device, s.handle, &base) != SLIP_OK) return nullptr;
  l->mappings.push_back({key, base});
  return (char *)base + s.offset;
}

// The address this process's GPU uses for a peer's host region: the region's file mapped shared and
// registered with the GPU (once per link and registration). Caller holds l->mu.
void *reach_file(soft_nic_link *l, const FabricSlot &s) {
  for (const auto &f : l->files)
    if (f.mkey == s.mkey && f.path == s.path) return f.dev;
  const int fd = open(s.path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat sb;
  void *host = MAP_FAILED;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size >= s.length)
    host = mmap(nullptr, s.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (host == MAP_FAILED) return nullptr;
  void *dev = nullptr;
  if (cudaSetDevice(l->nic->device) != cudaSuccess ||
      cudaHostRegister(host, s.length, cudaHostRegisterMapped | cudaHostRegisterPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    munmap(host, s.length);
    return nullptr;
  }
  if (cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaHostUnregister(host);
    munmap(host, s.length);
    return nullptr;
  }
  l->files.push_back({s.path, s.mkey, host, s.length, dev});
  return dev;
}

// rpd.find of a link: the peer's registration (id, rkey), as its NIC would check it; -1 when the
// peer's process is gone or closed its NIC.
int find_remote(void *state, uint32_t id, uint32_t rkey, slip_region_entry *out) {
  soft_nic_link *l = (soft_nic_link *)state;
  std::lock_guard<std::mutex> g(l->mu);
  if (!l->peer) return 0;
  const FabricHeader *h = (const FabricHeader *)l->peer;
  const uint64_t now = now_ns();
  if (!l->peer_gone && now - l->peer_checked_ns > kAliveCheckNs) {
    l->peer_gone = !alive(__atomic_load_n(&h->pid, __ATOMIC_ACQUIRE));
    l->peer_checked_ns = now;
  }
  if (l->peer_gone) return -1;
  const FabricSlot *slots = slots_of((void *)l->peer);
  const uint64_t key = (uint64_t)id << 32 | rkey;
  auto it = l->hits.find(key);
  if (it != l->hits.end()) {
    const FabricSlot &s = slots[it->second.slot];
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) == 1 && s.id == id && s.mkey == rkey) {
      *out = it->second.entry;
      return 1;
    }
    l->hits.erase(it);  // deregistered since
  }
  for (uint32_t i = 0; i < kFabricSlots; i++) {
    const FabricSlot &s = slots[i];
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) != 1 || s.id != id || s.mkey != rkey) continue;
    FabricSlot copy = s;
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) != 1 || s.mkey != copy.mkey) return 0;  // removed meanwhile
    copy.path[kPathBytes - 1] = 0;
    void *p = copy.kind == kFileSlot ? reach_file(l, copy) : copy.kind == kDeviceSlot ? reach(l, h, copy) : nullptr;
    if (!p) return 0;
    // A host region's words each have one writer (ring seq words): its fetch-adds are read-modify-writes.
    const uint32_t host = copy.kind == kFileSlot ? (uint32_t)SLIP_DEV_REGION_HOST : 0u;
    slip_region_entry e = {id, SLIP_DEV_REGION_READABLE | SLIP_DEV_REGION_WRITABLE | host, rkey, copy.length, p};
    l->hits[key] = {i, e};
    *out = e;
    return 1;
  }
  return 0;
}
}  // namespace

slip_status soft_nic_probe(void) { return slip_gpunetio_probe(); }

void soft_nic_close(soft_nic *n) {
  if (!n) return;
  if (n->fabric) {
    FabricHeader *h = (FabricHeader *)n->fabric;
    for (uint32_t i = 0; i < kFabricSlots; i++) __atomic_store_n(&slots_of(n->fabric)[i].state, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&h->pid, 0, __ATOMIC_RELEASE);
    munmap(n->fabric, kFabricBytes);
    unlink(n->path.c_str());
  }
  delete n;
}

slip_status soft_nic_open(int device, soft_nic **out) {
  slip_status st = SLIP_OK;
  soft_nic *n = nullptr;
  int fd = -1;
  FabricHeader *h;
  SLIP_CHECK(soft_nic_probe());
  remove_stale_fabrics();
  n = new soft_nic();
  n->device = device;
  // A link-local-style GID: fe80::/64 with 8 random bytes.
  memset(n->gid, 0, sizeof n->gid);
  n->gid[0] = 0xfe;
  n->gid[1] = 0x80;
  SLIP_SYS_CHECK(getrandom(n->gid + 8, 8, 0) == 8, "getrandom");
  {
    uint32_t r;
    SLIP_SYS_CHECK(getrandom(&r, sizeof r, 0) == (ssize_t)sizeof r, "getrandom");
    n->next_qpn = 0x1000 + (r & 0x3fffff);  // distinct queue pair numbers across NICs, as on a fabric
  }
  n->path = fabric_path(n->gid);
  fd = open(n->path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  SLIP_SYS_CHECK(fd >= 0, ("open " + n->path).c_str());
  SLIP_SYS_CHECK(ftruncate(fd, (off_t)kFabricBytes) == 0, "ftruncate of the software NIC's fabric file");
  n->fabric = mmap(nullptr, kFabricBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (n->fabric == MAP_FAILED) n->fabric = nullptr;
  SLIP_SYS_CHECK(n->fabric != nullptr, "mmap of the software NIC's fabric file");
  h = (FabricHeader *)n->fabric;
  h->magic = kFabricMagic;
  h->version = kFabricVersion;
  h->device = device;
  memcpy(h->gid, n->gid, sizeof n->gid);
  h->slots = kFabricSlots;
  __atomic_store_n(&h->pid, (int32_t)getpid(), __ATOMIC_RELEASE);
  *out = n;
  n = nullptr;
done:
  if (fd >= 0) close(fd);
  if (n && !n->fabric && !n->path.empty() && fd >= 0) unlink(n->path.c_str());
  soft_nic_close(n);
  return st;
}

namespace {
// Publishes a registration in the fabric file (every field, then the state) under a fresh memory
// key; `slot` is filled but for id, key, state.
slip_status publish_reg(soft_nic *n, FabricSlot slot, void *ptr, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  uint32_t key = 0, at = kFabricSlots;
  std::lock_guard<std::mutex> g(n->mu);
  FabricSlot *slots = slots_of(n->fabric);
  for (uint32_t i = 0; i < kFabricSlots && at == kFabricSlots; i++)
    if (__atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE) == 0) at = i;
  if (at == kFabricSlots)
    SLIP_FAIL(SLIP_ERR_NO_MEMORY, "software NIC: %u regions registered, at most %u at once", kFabricSlots, kFabricSlots);
  for (bool unique = false; !unique;) {
    SLIP_SYS_CHECK(getrandom(&key, sizeof key, 0) == (ssize_t)sizeof key, "getrandom");
    unique = key != 0;
    for (const LocalReg &r : n->regs) unique = unique && r.mkey != key;
  }
  {
    FabricSlot &s = slots[at];
    slot.id = id;
    slot.mkey = key;
    slot.state = 0;
    s = slot;
    __atomic_store_n(&s.state, 1u, __ATOMIC_RELEASE);
  }
  n->regs.push_back({id, key, at, slot.length, ptr});
  *mkey = key;
done:
  return st;
}
}  // namespace

slip_status soft_nic_reg_file(soft_nic *n, void *host, uint64_t len, uint32_t id, const char *path, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  cudaPointerAttributes pa;
  struct stat sb;
  FabricSlot slot;
  memset(&slot, 0, sizeof slot);
  SLIP_CUDA_CHECK(cudaSetDevice(n->device));
  SLIP_CUDA_CHECK(cudaPointerGetAttributes(&pa, host));
  if (pa.type != cudaMemoryTypeHost || !pa.devicePointer)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "software NIC: region %u at %p is not host memory registered with the GPU "
              "(cudaHostRegister, mapped), expected the mapping of %s", id, host, path);
  if (strlen(path) >= kPathBytes)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "software NIC: region %u's file path has %zu bytes, expected at most %zu", id,
              strlen(path), kPathBytes - 1);
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < len)
    SLIP_FAIL(SLIP_ERR_INVALID_ARG, "software NIC: region %u of %llu bytes: %s is %s, expected a regular file of at "
              "least that size that the region maps from its first byte", id, (unsigned long long)len, path,
              stat(path, &sb) != 0 ? strerror(errno) : !S_ISREG(sb.st_mode) ? "not a regular file" : "shorter");
  slot.kind = kFileSlot;
  slot.length = len;
  slot.owner_ptr = (uint64_t)(uintptr_t)host;
  memcpy(slot.path, path, strlen(path) + 1);
  SLIP_CHECK(publish_reg(n, slot, pa.devicePointer, id, mkey));
done:
  return st;
}

slip_status soft_nic_reg(soft_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey) {
  slip_status st = SLIP_OK;
  cudaPointerAttributes pa;
  CUdeviceptr base = 0;
  size_t size = 0;
  cudaIpcMemHandle_t handle;
  AddressRangeFn range = address_range_fn();
  FabricSlot slot;
  SLIP_CUDA_CHECK(cudaSetDevice(n->device));
  SLIP_CUDA_CHECK(cudaPointerGetAttributes(&pa, ptr));
  if (pa.type != cudaMemoryTypeDevice)
    SLIP_FAIL(SLIP_ERR_UNSUPPORTED, "software NIC: region %u is %s memory, expected device memory (peers reach it "
              "through CUDA IPC; host memory is registered with the file it maps: slip_nic_reg_file)", id,
              pa.type == cudaMemoryTypeHost ? "host" : "unregistered or managed");
  if (!range) SLIP_FAIL(SLIP_ERR_CUDA, "software NIC: the driver has no cuMemGetAddressRange");
  if (range(&base, &size, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
    SLIP_FAIL(SLIP_ERR_CUDA, "software NIC: cuMemGetAddressRange of region %u (%p) failed", id, ptr);
  if ((uintptr_t)ptr + len > base + size)
    SLIP_FAIL(SLIP_ERR_OUT_OF_RANGE, "software NIC: region %u of %llu bytes at %p runs past its allocation "
              "(%zu bytes at 0x%llx)", id, (unsigned long long)len, ptr, size, (unsigned long long)base);
  SLIP_CUDA_CHECK(cudaIpcGetMemHandle(&handle, (void *)(uintptr_t)base));
  memset(&slot, 0, sizeof slot);
  slot.kind = kDeviceSlot;
  slot.length = len;
  slot.offset = (uint64_t)((uintptr_t)ptr - base);
  slot.owner_ptr = (uint64_t)(uintptr_t)ptr;
  slot.handle = handle;
  SLIP_CHECK(publish_reg(n, slot, ptr, id, mkey));
done:
  return st;
}

void soft_nic_dereg(soft_nic *n, uint32_t id, uint32_t mkey) {
  std::lock_guard<std::mutex> g(n->mu);
  for (auto it = n->regs.begin(); it != n->regs.end(); ++it)
    if (it->id == id && it->mkey == mkey) {
      __atomic_store_n(&slots_of(n->fabric)[it->slot].state, 0u, __ATOMIC_RELEASE);
      n->regs.erase(it);
      return;
    }
}

void soft_nic_link_destroy(soft_nic_link *l) {
  if (!l) return;
  slip_gpunetio_destroy(l->g);  // no engine thread looks up its keys any more
  for (const auto &m : l->mappings) slip_ipc_unmap(l->nic->device, m.second);
  for (const auto &f : l->files) {
    (void)cudaSetDevice(l->nic->device);
    (void)cudaHostUnregister(f.host);
    munmap(f.host, f.length);
  }
  if (l->peer) munmap((void *)l->peer, kFabricBytes);
  if (l->err) (void)cudaFreeHost(l->err);
  delete l;
}

slip_status soft_nic_link_create(soft_nic *n, uint32_t nq, uint32_t depth, soft_nic_link **out) {
  slip_status st = SLIP_OK;
  soft_nic_link *l = new soft_nic_link();
  slip_softnic_pd rpd = {find_remote, l};
  uint32_t first;
  l->nic = n;
  l->nq = nq;
  first = n->next_qpn.fetch_add(nq);
  if ((uint64_t)first + nq > 0xffffffu) SLIP_FAIL(SLIP_ERR_NO_MEMORY, "software NIC: queue pair numbers used up");
  SLIP_CUDA_CHECK(cudaSetDevice(n->device));
  SLIP_CUDA_CHECK(cudaHostAlloc(&l->err, sizeof *l->err, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(l->err, 0, sizeof *l->err);
  SLIP_CHECK(slip_gpunetio_create(n->device, nq, depth, nullptr, 0, nullptr, 0, {find_local, n}, l->err, first, &rpd,
                                  &l->g));
  l->qpn.resize(nq);
  l->psn.resize(nq);
  l->connected.assign(nq, 0);
  for (uint32_t q = 0; q < nq; q++) {
    l->qpn[q] = first + q;
    SLIP_SYS_CHECK(getrandom(&l->psn[q], sizeof(uint32_t), 0) == (ssize_t)sizeof(uint32_t), "getrandom");
    l->psn[q] &= 0xffffffu;
  }
  *out = l;
  l = nullptr;
done:
  soft_nic_link_destroy(l);
  return st;
}

slip_status soft_nic_qp_info_get(const soft_nic_link *l, uint32_t q, slip_nic_qp_info *out) {
  memset(out, 0, sizeof *out);
  out->magic = SLIP_NIC_QP_INFO_MAGIC;
  out->version = SLIP_NIC_QP_INFO_VERSION;
  out->addr_type = SLIP_NIC_ADDR_ROCE;
  out->qpn = l->qpn[q];
  memcpy(out->gid, l->nic->gid, sizeof out->gid);
  out->mtu = 5;  // IBV_MTU_4096
  out->psn = l->psn[q];
  return SLIP_OK;
}

slip_status soft_nic_connect(soft_nic_link *l, uint32_t q, const slip_nic_qp_info *peer) {
  slip_status st = SLIP_OK;
  int fd = -1;
  void *map = nullptr;
  std::string path = fabric_path(peer->gid);
  std::lock_guard<std::mutex> g(l->mu);
  if (l->connected[q])
    SLIP_FAIL(SLIP_ERR_STATE, "software NIC: queue pair %u is already connected (a new peer needs a new link)",
              l->qpn[q]);
  if (peer->addr_type != SLIP_NIC_ADDR_ROCE)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "software NIC: peer queue pair %u is InfiniBand (LID routed), expected a "
              "software NIC's GID-routed record", peer->qpn);
  if (l->have_peer && memcmp(l->peer_gid, peer->gid, sizeof l->peer_gid) != 0)
    SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "software NIC: queue pair %u to GID %s, but this link's other queue pairs "
              "go to GID %s (one link, one peer)", l->qpn[q], gid_hex(peer->gid).c_str(),
              gid_hex(l->peer_gid).c_str());
  if (!l->have_peer) {
    const FabricHeader *h;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      SLIP_FAIL(SLIP_ERR_NO_DEVICE, "software NIC: peer GID %s has no fabric file %s (%s): the software NIC "
                "connects NICs of one machine only", gid_hex(peer->gid).c_str(), path.c_str(), strerror(errno));
    map = mmap(nullptr, kFabricBytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) map = nullptr;
    SLIP_SYS_CHECK(map != nullptr, ("mmap " + path).c_str());
    h = (const FabricHeader *)map;
    if (h->magic != kFabricMagic || h->version != kFabricVersion || h->slots != kFabricSlots)
      SLIP_FAIL(SLIP_ERR_BAD_DESCRIPTOR, "software NIC: %s has magic 0x%08x version %u with %u slots, expected "
                "0x%08x version %u with %u", path.c_str(), h->magic, h->version, h->slots, kFabricMagic,
                kFabricVersion, kFabricSlots);
    if (!alive(__atomic_load_n(&h->pid, __ATOMIC_ACQUIRE)))
      SLIP_FAIL(SLIP_ERR_PEER, "software NIC: the process of peer GID %s is gone", gid_hex(peer->gid).c_str());
    l->peer = map;
    map = nullptr;
    memcpy(l->peer_gid, peer->gid, sizeof l->peer_gid);
    l->have_peer = true;
    l->peer_checked_ns = now_ns();
  }
  l->connected[q] = 1;
done:
  if (map) munmap(map, kFabricBytes);
  if (fd >= 0) close(fd);
  return st;
}

void *soft_nic_dev_qp(const soft_nic_link *l, uint32_t q) {
  return l->connected[q] ? slip_gpunetio_qp(l->g, q) : nullptr;
}

slip_status soft_nic_host_qp(soft_nic_link *l, uint32_t q, slip_host_qp *out) {
  if (!l->connected[q])
    return slip_set_error(SLIP_ERR_STATE, "software NIC: queue pair %u is not connected", l->qpn[q]);
  return slip_gpunetio_host_qp(l->g, q, out);
}

uint32_t soft_nic_link_sink_key(const soft_nic_link *l) { return slip_gpunetio_sink_key(l->g); }

void soft_nic_link_error(soft_nic_link *l, slip_dev_error *out, uint32_t *syndrome, int clear) {
  slip_softnic_stats s;
  const uint32_t code = __atomic_load_n(&l->err->code, __ATOMIC_ACQUIRE);
  memcpy(out, l->err, sizeof *out);
  out->code = code;
  slip_gpunetio_stats(l->g, &s);
  *syndrome = code ? s.first_syndrome : 0;
  if (clear) {
    memset(l->err, 0, sizeof *l->err);
  }
}

const slip_dev_error *soft_nic_link_error_record(const soft_nic_link *l) { return l->err; }
