/*
 * gpunetio on a real ConnectX NIC: queue pairs whose send and completion queues the GPU drives
 * (the device write API, slipstream/device/gpunetio.cuh), connected with data exchanged out of
 * band, and memory registered so that the write API's addressing holds on the wire
 * (iova = region id << 40, memory key = SLIP_MKEY(region key): slipstream/abi.h).
 *
 * Two implementations, chosen at configure time:
 *   mlx5    slipstream's own host side on rdma-core's mlx5 direct verbs (libibverbs, libmlx5;
 *           built wherever rdma-core's headers are found, the libraries loaded at run time, so
 *           the library loads on machines without them): reliable-connected queue pairs whose
 *           rings and doorbell records live in pinned host memory mapped into the GPU (a parent
 *           domain's allocator places them there), the doorbell register mapped into the GPU where
 *           the platform allows it, otherwise rung by a host progress thread;
 *   doca    the DOCA GPUNetIO host library (-DSLIP_GPUNETIO_HOST_ROOT=<prefix>): rings in GPU
 *           memory through DevX umem.
 * Without either, every call but the wire-format functions answers SLIP_ERR_UNSUPPORTED with the
 * reason. Neither has run on a real NIC in this project's CI or on its GPU machine (no RDMA
 * device there).
 *
 * Device "softnic" is the software NIC (slipstream/softnic.h) behind the same calls, in every
 * build with the GPUNetIO device headers: links between processes of one machine whose GPUs
 * address each other through CUDA IPC. The GPU builds the same WQEs and polls the same CQEs; the
 * software NIC's threads execute them, checking every memory key and range against the
 * registrations of the NIC that owns the memory, which each software NIC publishes in a
 * shared-memory file (/dev/shm/slipstream-softnic-<GID>, mode 0600, removed on close). A write
 * into a peer whose process is gone completes with the "transport retry counter exceeded" error,
 * as on a NIC whose peer stopped answering.
 *
 * Host-posted operations (slip_nic_host_post): a queue pair of a link may be driven by the host
 * instead of the GPU, with the same WQEs written by the CPU into the same send queue (rings in
 * host memory: the software NIC and the mlx5 implementation; the DOCA host library's rings are in
 * GPU memory, so it refuses them).
 *
 * One slip_nic per executor GPU: device, port, protection domain and the registered regions
 * (landing pool, map-output pool: once, never per block). One slip_nic_link per peer: nq queue
 * pairs towards it. Sequence: slip_nic_open, slip_nic_reg for every region, then per peer
 * slip_nic_link_create, slip_nic_qp_info_get (send each record), slip_nic_qp_info_parse (what the
 * peer sent), slip_nic_connect, and slip_nic_dev_qp(link, q) as slip_dev_queue.nic_qp. A lost peer's
 * link is destroyed; a peer that comes back gets a new link (new queue pair numbers and PSNs).
 */
#ifndef SLIP_GPUNETIO_NIC_H
#define SLIP_GPUNETIO_NIC_H

#include <stddef.h>
#include <stdint.h>
#include "slipstream/host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connection data of one queue pair: 64 bytes, little-endian, sent to the peer out of band. */
#define SLIP_NIC_QP_INFO_MAGIC 0x51504C53u /* "SLPQ" */
#define SLIP_NIC_QP_INFO_VERSION 2u
enum { SLIP_NIC_ADDR_IB = 0 /* LID routed */, SLIP_NIC_ADDR_ROCE = 1 /* GID routed */ };
typedef struct slip_nic_qp_info {
  uint32_t magic;
  uint16_t version;
  uint16_t addr_type;   /* SLIP_NIC_ADDR_* */
  uint32_t qpn;         /* 24 bits */
  uint32_t lid;         /* 16 bits, IB */
  uint8_t gid[16];
  uint32_t mtu;         /* IBV_MTU_* enum value, 1..5 */
  uint32_t psn;         /* 24 bits: the first packet sequence number this queue pair sends */
  uint8_t reserved[24]; /* zero */
} slip_nic_qp_info;

/* Checks a received record (size, magic, version, address type, qpn, lid, mtu, psn, reserved). */
slip_status slip_nic_qp_info_parse(const void *buf, size_t len, slip_nic_qp_info *out);

/* "mlx5", "doca" or "none": the implementation this build has. */
const char *slip_nic_impl(void);
/* SLIP_OK when this build has a NIC implementation and its libraries load, else
 * SLIP_ERR_UNSUPPORTED with why. Does not look for devices. */
slip_status slip_nic_probe(void);

/* Who rings a queue pair's doorbell. */
enum { SLIP_NIC_DOORBELL_AUTO = 0 /* the GPU where it can be mapped, else the host */,
       SLIP_NIC_DOORBELL_HOST = 1 /* a host progress thread (the device publishes its producer index) */,
       SLIP_NIC_DOORBELL_GPU = 2  /* the GPU writes the NIC's doorbell register; fails where it cannot */ };

typedef struct slip_nic slip_nic;
typedef struct slip_nic_link slip_nic_link;
/* Opens RDMA device `ibdev` (e.g. "mlx5_0"; "" for the first mlx5 device; "softnic" for the software NIC), port `port`, GID index `gid_index` (RoCE), for CUDA
 * device `device`. SLIP_ERR_NO_DEVICE names the device and what was found when it is absent. */
slip_status slip_nic_open(const char *ibdev, int port, int gid_index, int device, int doorbell, slip_nic **out);
/* After every link of it is destroyed. */
void slip_nic_close(slip_nic *n);
/* Registers [ptr, ptr + len) (device memory through dma-buf where the kernel has it, else peer
 * memory; or host memory) with iova = id << 40 and strict ordering; *mkey is both its lkey and
 * rkey (the low 32 bits of the region's key on the wire). */
slip_status slip_nic_reg(slip_nic *n, void *ptr, uint64_t len, uint32_t id, uint32_t *mkey);
/* Registers host memory [host, host + len) that is a shared mapping of the file `path` from its
 * first byte, and is registered with this process's GPU (cudaHostRegister, mapped): a request ring
 * of resident serving (slipstream/serve.h), which a peer writes with RDMA writes. On a ConnectX
 * NIC it is host memory like any other; the software NIC's peers map the file and register it with
 * their GPU (they cannot reach another process's host memory otherwise). Same addressing and key
 * as slip_nic_reg. */
slip_status slip_nic_reg_file(slip_nic *n, void *host, uint64_t len, uint32_t id, const char *path, uint32_t *mkey);
/* Removes the registration (id, mkey): later WQEs naming it complete with an error. Only once no
 * queue pair has WQEs in flight that name it. */
slip_status slip_nic_dereg(slip_nic *n, uint32_t id, uint32_t mkey);
/* "mlx5", "doca" (the build's NIC) or "softnic". */
const char *slip_nic_kind(const slip_nic *n);

/* nq queue pairs of `depth` WQEs (a power of two, 2..32768) towards one peer, in RESET. */
slip_status slip_nic_link_create(slip_nic *n, uint32_t nq, uint32_t depth, slip_nic_link **out);
/* Only while no kernel uses its queue pairs. */
void slip_nic_link_destroy(slip_nic_link *l);
slip_status slip_nic_qp_info_get(const slip_nic_link *l, uint32_t q, slip_nic_qp_info *out);
/* RESET -> INIT -> RTR -> RTS against the peer's queue pair; remote write and atomics allowed. */
slip_status slip_nic_connect(slip_nic_link *l, uint32_t q, const slip_nic_qp_info *peer);
/* The struct doca_gpu_dev_verbs_qp of queue pair q, in GPU memory (for slip_dev_queue.nic_qp);
 * NULL before slip_nic_connect or in a build without the GPUNetIO device headers. */
void *slip_nic_dev_qp(const slip_nic_link *l, uint32_t q);
/* SLIP_NIC_DOORBELL_GPU or _HOST: how this link's doorbells are rung (host: slip_nic's progress
 * thread does it while the link exists). */
int slip_nic_link_doorbell(const slip_nic_link *l);
/* Queue pairs of the link. */
uint32_t slip_nic_link_size(const slip_nic_link *l);
/* The memory key of the link's fetch-add sink (8 bytes per queue pair of device memory registered
 * at region id SLIP_NIC_SINK_ID), for slip_dev_queue.nic_sink_key. */
uint32_t slip_nic_link_sink_key(const slip_nic_link *l);
/* The memory key of region `id` as registered on the link's NIC; SLIP_ERR_BAD_REGION when it is not. */
slip_status slip_nic_link_mkey(const slip_nic_link *l, uint32_t id, uint32_t *mkey);
/* The first error completion the NIC recorded on the link with its cause (code 0: none, or a NIC
 * that records no more than the CQE the device saw), and its CQE syndrome; clear resets the
 * record. The queue pairs stay in the error state: the link is replaced (a new link, connected
 * through the peer table), as on a NIC. */
void slip_nic_link_error(slip_nic_link *l, slip_dev_error *out, uint32_t *syndrome, int clear);

/* ---- host-posted RDMA writes ----
 * A queue pair of a link is driven by the GPU (slip_nic_dev_qp, through a queue set) or by the host
 * (these calls), never both: the first use claims it, and the other kind of use is refused. A
 * reader of resident serving posts its requests into a holder's ring this way (slipstream/serve.h).
 * Threading: thread-safe per queue pair. */
enum { SLIP_NIC_OP_WRITE = 0, SLIP_NIC_OP_FETCH_ADD = 1 };
typedef struct slip_nic_op {
  uint32_t op;            /* SLIP_NIC_OP_* */
  uint32_t local_id;      /* write: the source, a region registered on this link's NIC */
  uint32_t local_mkey;
  uint32_t remote_id;     /* the destination: the peer's region, as its NIC registered it */
  uint32_t remote_mkey;
  uint32_t reserved;
  uint64_t local_offset;
  uint64_t remote_offset; /* fetch-add: 8-byte aligned */
  uint64_t length;        /* write: 1..2^30 bytes; fetch-add: 8 */
  uint64_t add;           /* fetch-add: added to the 64-bit word (its old value goes to the link's sink) */
} slip_nic_op;
/* Posts n (1..64) operations on queue pair q, executed in order by the responder (an atomic after
 * the writes before it), with one completion for the batch; does not wait for it. Waits (up to
 * timeout_ns) for room in the send queue. SLIP_ERR_PEER, naming the completion's syndrome, once any
 * earlier operation failed: the queue pair is in the error state (nothing more is posted; the link
 * is replaced). SLIP_ERR_STATE when the queue pair is not connected or the GPU drives it. */
slip_status slip_nic_host_post(slip_nic_link *l, uint32_t q, const slip_nic_op *ops, uint32_t n, uint64_t timeout_ns);
/* Waits until every operation posted on queue pair q completed: SLIP_OK, SLIP_ERR_PEER (one failed:
 * its syndrome), or SLIP_ERR_TIMEOUT. */
slip_status slip_nic_host_drain(slip_nic_link *l, uint32_t q, uint64_t timeout_ns);

/* A peer's region as its NIC registered it: all a requester knows of it. */
typedef struct slip_nic_remote {
  uint32_t id;      /* iova = id << 40 */
  uint32_t mkey;    /* its rkey */
  uint64_t length;
} slip_nic_remote;
/* A gpunetio queue set (slipstream/host.h) whose queues are queue pairs [first_qp, first_qp +
 * nqueues) of a connected link: local regions (registered on the link's NIC: the table holds
 * their memory keys), then the peer's regions. The link must outlive the set, and one set at a
 * time may use a queue pair. slip_queueset_check reports the link's errors; clearing does not
 * reset its queue pairs (the link is replaced). */
slip_status slip_queueset_create_link(slip_ctx *ctx, slip_nic_link *link, uint32_t first_qp, uint32_t nqueues,
                                      const slip_region *const *locals, uint32_t nlocals,
                                      const slip_nic_remote *remotes, uint32_t nremotes, slip_queueset **out);

#ifdef __cplusplus
}
#endif
#endif /* SLIP_GPUNETIO_NIC_H */
