/*
 * Structs and constants shared by host code, device code and (later) the Java codec.
 * Declared once here; every field has a fixed width so offsets match across compilers.
 * The JNI layer will export offsetof/sizeof of these for a layout test (STYLE.md).
 */
#ifndef SLIP_ABI_H
#define SLIP_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes (slip_status_str() gives the name; slip_last_error() the detail) ---- */
typedef enum slip_status {
  SLIP_OK = 0,
  SLIP_ERR_INVALID_ARG = 1,   /* a null pointer, a zero count, an unknown enum value */
  SLIP_ERR_NO_DEVICE = 2,     /* no CUDA driver or no GPU */
  SLIP_ERR_CUDA = 3,          /* a CUDA runtime/driver call failed; the detail names it */
  SLIP_ERR_OS = 4,            /* a system call failed (errno in the detail) */
  SLIP_ERR_NO_MEMORY = 5,
  SLIP_ERR_BAD_REGION = 6,    /* region id not registered / not imported */
  SLIP_ERR_BAD_KEY = 7,       /* key does not match the registered region */
  SLIP_ERR_OUT_OF_RANGE = 8,  /* offset + length outside the region */
  SLIP_ERR_BAD_DESCRIPTOR = 9,/* wrong magic, version, kind or size in a descriptor */
  SLIP_ERR_QUEUE_FULL = 10,
  SLIP_ERR_TIMEOUT = 11,
  SLIP_ERR_UNSUPPORTED = 12,  /* backend or feature not built / not available here */
  SLIP_ERR_STATE = 13,        /* call not allowed in the object's current state */
  SLIP_ERR_PEER = 14,         /* the peer closed the connection or sent garbage */
  SLIP_STATUS_COUNT_ = 15
} slip_status;

/* ---- backends ---- */
enum { SLIP_BACKEND_NVLINK = 1, SLIP_BACKEND_PROXY = 2, SLIP_BACKEND_GPUNETIO = 3 };

/* ---- memory kinds ---- */
/* Memory kinds: the wire ids of Java's dev.slipstream.core.transport.MemoryKind (1 is host memory
 * of one process, which is never exported through this descriptor). */
enum { SLIP_MEM_DEVICE = 2,   /* cudaMalloc, exported with a CUDA IPC handle */
       SLIP_MEM_HOST_SHM = 3  /* POSIX shared memory, pinned with cudaHostRegister in each process */ };

/*
 * Serialisable region descriptor: what a receiver sends out of band so a sender can write to it.
 * 192 bytes, little-endian host order (peers on one host only for the IPC kinds).
 */
#define SLIP_REGION_DESC_MAGIC 0x534C5052u /* "SLPR" */
#define SLIP_REGION_DESC_VERSION 1u
#define SLIP_SHM_NAME_MAX 48
typedef struct slip_region_desc {
  uint32_t magic;      /* SLIP_REGION_DESC_MAGIC */
  uint16_t version;    /* SLIP_REGION_DESC_VERSION */
  uint16_t kind;       /* SLIP_MEM_* */
  uint32_t id;         /* region id, unique within the exporting process */
  int32_t device;      /* CUDA ordinal of the owner (-1 for host memory) */
  uint64_t key;        /* random access key; a write must present it */
  uint64_t length;     /* bytes */
  uint64_t owner_pid;  /* exporting process */
  uint8_t ipc_handle[64];               /* cudaIpcMemHandle_t for SLIP_MEM_DEVICE */
  char shm_name[SLIP_SHM_NAME_MAX];     /* NUL-terminated for SLIP_MEM_HOST_SHM */
  uint8_t reserved[40];
} slip_region_desc;

/* ---- receive-side completion signal ----
 * One 64-bit word per (sender queue, receiver) slot. Senders add
 * SLIP_SIGNAL_PACK(blocks, bytes); a single atomic add moves both counts, and a receiver that
 * sees the word has every byte written before it on that queue. Bytes wrap at 2^40 (1 TiB per
 * slot between resets), blocks at 2^24. */
#define SLIP_SIGNAL_BYTES_BITS 40
#define SLIP_SIGNAL_PACK(blocks, bytes) \
  ((((uint64_t)(blocks)) << SLIP_SIGNAL_BYTES_BITS) | ((uint64_t)(bytes) & ((1ull << SLIP_SIGNAL_BYTES_BITS) - 1)))
#define SLIP_SIGNAL_BLOCKS(v) ((uint64_t)(v) >> SLIP_SIGNAL_BYTES_BITS)
#define SLIP_SIGNAL_BYTES(v) ((uint64_t)(v) & ((1ull << SLIP_SIGNAL_BYTES_BITS) - 1))

/* ---- device-visible region table entry (built by the host after all checks) ---- */
typedef struct slip_dev_region {
  uint64_t base;    /* address valid in the process that runs the kernel (peer VA for nvlink) */
  uint64_t length;
  uint64_t key;     /* presented by proxy descriptors; checked again by the executing side */
  uint32_t id;      /* the region's id, for error reports */
  uint32_t flags;   /* SLIP_DEV_REGION_* */
} slip_dev_region;
enum { SLIP_DEV_REGION_WRITABLE = 1, SLIP_DEV_REGION_READABLE = 2, SLIP_DEV_REGION_HOST = 4 };

/* ---- first error seen on a queue (pinned host memory, written by the GPU or the proxy) ---- */
typedef struct slip_dev_error {
  uint32_t code;       /* slip_status; 0 = none. Set last, with release, by the reporter. */
  uint32_t region_id;
  uint64_t offset;
  uint64_t length;
  uint64_t limit;      /* region length (range errors) or the expected key (key errors) */
  uint64_t got_key;    /* key presented (key errors) */
  uint32_t queue;
  uint32_t claimed;    /* 0 -> 1 by the first reporter; others drop their report */
} slip_dev_error;

/* ---- proxy ring descriptor (128 bytes: two 64-byte halves, like NCCL GIN's proxy descriptors) ---- */
enum { SLIP_OP_WRITE = 1, SLIP_OP_SIGNAL_ADD = 2, SLIP_OP_WRITE_SIGNAL = 3 };
/* Lap tag: slots are reserved in parallel, so a slot can be read before its writer filled it only
 * if the producer broke the protocol; the tag (index / depth, low 16 bits) exposes a stale slot. */
#define SLIP_PROXY_LAP(index, depth) ((uint16_t)(((index) / (depth)) & 0xffffu))
typedef struct slip_proxy_desc {
  uint16_t op;          /* SLIP_OP_* */
  uint16_t lap;         /* SLIP_PROXY_LAP(slot index, depth) */
  uint32_t dst_region;  /* region ids (not table indices): the executor resolves them */
  uint32_t src_region;
  uint32_t sig_region;
  uint64_t dst_key;     /* presented for dst_region */
  uint64_t sig_key;     /* presented for sig_region */
  uint64_t dst_offset;
  uint64_t src_offset;
  uint64_t length;
  uint64_t sig_offset;
  uint64_t sig_add;
  uint64_t reserved[7];
} slip_proxy_desc;

/* Ring control words, in pinned host memory mapped into the GPU. The producer (one GPU thread
 * per queue) owns `head`; the consumer (one CPU thread) owns `tail`. Indices only grow;
 * slot = index % depth. `head` is published with a system-scope release store after the slots. */
typedef struct slip_proxy_ctrl {
  uint64_t head;        /* descriptors published */
  uint64_t pad0[7];
  uint64_t tail;        /* descriptors executed (copies complete, signals written) */
  uint64_t pad1[7];
} slip_proxy_ctrl;


/* ---- device-resident queue (one per CUDA block that pushes; built by the host) ----
 * Region table order: the queue set's local regions first, then its remote regions, in the
 * order given to slip_queueset_create(); kernels address memory as (table index, offset). */
typedef struct slip_dev_queue {
  uint32_t backend;             /* SLIP_BACKEND_* */
  uint32_t index;               /* queue number within its set (error reports) */
  uint32_t nregions;
  uint32_t depth;               /* proxy ring slots (power of two); 0 for nvlink */
  const slip_dev_region *regions; /* device memory, nregions entries */
  slip_dev_error *error;        /* device memory: first error found by device code; shared by the set */
  const slip_dev_error *proxy_error; /* proxy, gpunetio: host-pinned record written by the executor
                                       * thread or the software NIC */
  slip_proxy_desc *ring;        /* proxy: host-pinned ring, device-mapped */
  slip_proxy_ctrl *ctrl;        /* proxy: host-pinned control words, device-mapped */
  uint64_t head;                /* proxy: descriptors written; owned by the queue's leader */
  void *nic_qp;                 /* gpunetio: struct doca_gpu_dev_verbs_qp, device memory */
  uint32_t nic_sink_key;        /* gpunetio: memory key of the set's atomic-result buffer */
  uint32_t nic_lock;            /* gpunetio: serialises the queue's posts and polls (0 = free) */
} slip_dev_queue;

/* ---- gpunetio addressing ----
 * A region's memory key (lkey, rkey) is the low 32 bits of its key; addresses are zero-based per
 * region: iova = id << 40 | offset (ibv_reg_mr_iova2 with iova = id << 40 on a real NIC). Region
 * ids of a gpunetio queue set stay below SLIP_NIC_SINK_ID; that id names the set's own buffer for
 * the values atomics fetch (8 bytes per queue, device memory). */
#define SLIP_IOVA_SHIFT 40
#define SLIP_IOVA(id, offset) ((((uint64_t)(id)) << SLIP_IOVA_SHIFT) | (uint64_t)(offset))
#define SLIP_IOVA_ID(iova) ((uint32_t)(((uint64_t)(iova)) >> SLIP_IOVA_SHIFT))
#define SLIP_IOVA_OFFSET(iova) (((uint64_t)(iova)) & ((1ull << SLIP_IOVA_SHIFT) - 1))
#define SLIP_IOVA_MAX_ID ((1u << 24) - 1)
#define SLIP_NIC_SINK_ID SLIP_IOVA_MAX_ID
#define SLIP_MKEY(key64) ((uint32_t)(key64))

/* Partition function shared by the GPU kernel and CPU references: murmur3 finaliser, then a
 * multiply-shift range reduction (no division). */
#if defined(__CUDACC__)
#define SLIP_HD __host__ __device__ __forceinline__
#else
#define SLIP_HD static inline
#endif
SLIP_HD uint64_t slip_hash64(uint64_t k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull; k ^= k >> 33;
  return k;
}
SLIP_HD uint32_t slip_partition_of(int64_t key, uint32_t nparts) {
  return (uint32_t)(((slip_hash64((uint64_t)key) >> 32) * (uint64_t)nparts) >> 32);
}

#ifdef __cplusplus
}
#endif
#endif /* SLIP_ABI_H */
