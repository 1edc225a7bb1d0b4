// Internal: the objects of the CUDA host API (slipstream/host.h) shared by its files:
// cuda_host.cu (contexts, regions, remote regions) and queueset.cu (queue sets).
#ifndef SLIP_CUDA_OBJECTS_H
#define SLIP_CUDA_OBJECTS_H

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "slipstream/host.h"

struct slip_ctx {
  int device;
  // Every region registered on this context (its protection domain, as a NIC sees one): the
  // software NIC of a gpunetio set resolves the source regions its WQEs name here, so a set's
  // source slots can change between pushes without re-registering anything.
  std::mutex mu;
  std::vector<slip_region_entry> registered;
};

struct slip_region {
  slip_ctx *ctx;
  int kind;
  uint32_t id;
  uint64_t key;
  uint64_t length;
  void *dptr;   // device pointer (host memory: device alias)
  void *hptr;   // host pointer (host memory only)
  char shm_name[SLIP_SHM_NAME_MAX];
};

struct slip_remote {
  slip_ctx *ctx;
  slip_region_desc desc;
  void *dptr;
  void *hptr;
  bool opened_ipc;  // cudaIpcCloseMemHandle on destroy
  bool alias;       // view of a local region: nothing to unmap
};

// CUDA IPC mappings of this process, counted: CUDA maps a handle once per process (a second
// cudaIpcOpenMemHandle of it fails with cudaErrorAlreadyMapped), and imported regions and the
// software NIC may both reach one allocation. Unmapped with the last user.
slip_status slip_ipc_map(int device, const cudaIpcMemHandle_t &h, void **base);
void slip_ipc_unmap(int device, void *base);

// A remote region as the executors of a queue set see it (its table entry).
slip_region_entry slip_remote_entry(const slip_remote *r);

#endif
