/*
 * Resident serving: a kernel that stays on the holder's GPU, takes write requests from request
 * rings, checks them on the device, finds their blocks in a device-resident directory of the
 * holder's map outputs, pushes them into the reader's landing region, and answers in the ring.
 * The CPU sets up (rings, the directory, reader entries) and handles the slow path; it is not on
 * the per-request path.
 *
 * Rings. One ring per (reader, holder) pair, in memory both reach: on one machine a shared-memory
 * file the reader writes with CPU stores and the holder maps into its GPU (cudaHostRegister).
 * Across machines (gpunetio) the ring has two copies of the same layout, each a shared-memory file
 * of its side registered on that side's NIC: the holder's, which its kernel polls, and the
 * reader's, in which the reader builds its requests and reads its answers. The reader posts a
 * request on a queue pair its host drives (slip_nic_host_post): an RDMA write of the slot's bytes
 * after seq, then a fetch-add that takes the holder's seq word from the slot's previous ticket + 1
 * (0 on the first lap) to this one's (slip_serve_seq_step); a responder executes an atomic after the
 * writes before it on the queue pair, so the request is published last. The kernel answers the same
 * way into the reader's copy (the answer's bytes after seq, then the seq step), on the reader's
 * queue pair after the request's blocks, table and signal. Each seq word still has one writer.
 * Single producer (the reader process; its threads claim tickets among themselves), single
 * consumer (the holder's kernel). Every word has one writer, so no atomic ever crosses PCIe:
 *   - slot s = ticket % nslots; the reader writes the request, then the slot's seq = ticket + 1
 *     (release): the request is published;
 *   - the kernel serves it and writes the slot's answer (slip_serve_done), answer.seq = ticket + 1
 *     last (release, after its stores into the landing region and a system-scope fence): a reader
 *     that sees the answer sees every byte of the push;
 *   - the reader reuses slot s for ticket + nslots only once it has read that answer.
 * The kernel takes tickets in order per ring (a device counter per reader entry).
 *
 * Layout of a ring, little-endian, offsets from its base:
 *   0                           slip_serve_ring_header
 *   SLIP_SERVE_RING_HEADER      nslots x slip_serve_request (SLIP_SERVE_SLOT_BYTES each)
 *   ... + nslots x SLOT_BYTES   nslots x slip_serve_done
 *
 * Copies. A request of at most chunk_bytes (slip_server_create's choice) is copied by the CTA that
 * took it. A larger one is cut into chunks of chunk_bytes that every CTA free of its own request
 * helps to copy; the CTA that took it writes the table and the answer once every chunk is in.
 *
 * Polling. One idle CTA at a time holds a poller token and reads the rings and the host's stop word
 * (host memory); it hands the token on when it takes a request or helps a copy. The other idle CTAs
 * read only device memory (the copy jobs, a stop flag the poller copies there), so PCIe traffic
 * does not grow with the CTA count. CTAs leave once the server as a whole took no request for
 * idle_ns.
 *
 * Checks on the device, before anything is written (the host path's WriteRequest.check and the
 * block writer's checks, with the same status codes): the request's magic, block count and the
 * reader's landing key; the block table's range; every block's map output is in the directory and
 * live, its partition exists, its bytes fit the block's capacity; every block range is 16-byte
 * aligned, inside the landing region and overlaps neither the table nor another block; the
 * request is taken before its deadline. A request that fails gets an answer naming the check,
 * and nothing is written.
 */
#ifndef SLIPSTREAM_SERVE_H
#define SLIPSTREAM_SERVE_H

#include <stdint.h>

#include "slipstream/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLIP_SERVE_RING_MAGIC 0x47535253u /* "SRSG" */
#define SLIP_SERVE_REQ_MAGIC 0x51525653u  /* "SVRQ" */
#define SLIP_SERVE_VERSION 2u
#define SLIP_SERVE_RING_HEADER 128u
#define SLIP_SERVE_SLOT_BYTES 1024u
#define SLIP_SERVE_MAX_BLOCKS 30u /* (SLOT_BYTES - 64) / 32 */
#define SLIP_SERVE_MAX_SLOTS 4096u
/* A request flag: also write the host path's signal word (slipstream LandingSignal: the piece
 * count of flags bits 8..31 above the block and table bytes) at signal_offset, after the table and
 * before the answer, for readers that watch the signal. */
#define SLIP_SERVE_SIGNAL 1u
/* The block table a push writes: the host path's BlockTable (16-byte header: request id, record
 * count, magic; then 16 bytes per block: bytes, checksum (0 on the device), rows). */
#define SLIP_SERVE_TABLE_MAGIC 0x54424C53u
#define SLIP_SERVE_TABLE_HEADER 16u
#define SLIP_SERVE_TABLE_RECORD 16u

typedef struct slip_serve_ring_header {
  uint32_t magic;      /* SLIP_SERVE_RING_MAGIC */
  uint16_t version;    /* SLIP_SERVE_VERSION */
  uint16_t reserved0;
  uint32_t nslots;     /* power of two, at most SLIP_SERVE_MAX_SLOTS */
  uint32_t slot_bytes; /* SLIP_SERVE_SLOT_BYTES */
  uint64_t reader_pid; /* the process that made the ring */
  uint64_t holder_pid; /* written by the holder once it serves the ring (0 until then) */
  uint64_t reserved[12];
} slip_serve_ring_header;

typedef struct slip_serve_block {
  uint64_t map_id;
  uint32_t partition;
  uint32_t reserved;
  uint64_t dst_offset; /* in the reader's landing region; 16-byte aligned */
  uint64_t capacity;   /* bytes reserved there */
} slip_serve_block;

typedef struct slip_serve_request {
  uint64_t seq;          /* ticket + 1 once the request is written (the reader's last store) */
  uint64_t request_id;   /* named by the block table's header */
  uint32_t magic;        /* SLIP_SERVE_REQ_MAGIC */
  uint32_t nblocks;      /* 1..SLIP_SERVE_MAX_BLOCKS */
  uint32_t shuffle_id;
  uint32_t flags;        /* SLIP_SERVE_SIGNAL or 0; with it, bits 8..31 the signal's piece count */
  uint64_t landing_key;  /* the reader's landing registration, as in the holder's reader entry */
  uint64_t table_offset; /* 16-byte aligned; the table is 16 + 16 x nblocks bytes */
  uint64_t deadline_ns;  /* the holder's CLOCK_MONOTONIC time after which the request must not
                          * start (on one machine the reader's clock; across machines the reader
                          * adds the holder's clock offset, measured when the ring was set up) */
  uint64_t signal_offset; /* with SLIP_SERVE_SIGNAL: 8-byte aligned, disjoint from the table and blocks */
  slip_serve_block blocks[SLIP_SERVE_MAX_BLOCKS];
} slip_serve_request;

typedef struct slip_serve_done {
  uint64_t seq;      /* ticket + 1 of the request answered (written last) */
  int32_t status;    /* SLIP_OK or the failed check's code */
  uint32_t block;    /* the block that failed a check (its index), or nblocks */
  uint64_t bytes;    /* block bytes pushed (the table excluded) */
  uint64_t value;    /* the failing value: an offset, a length, a partition or a key */
  /* When the kernel served it, CLOCK_MONOTONIC nanoseconds on the holder's host (the kernel's
   * %globaltimer less the offset measured at its launch, so good to a few microseconds against a
   * reader's clock; differences between these three are the device's own): the request taken, its
   * checks done and its copy begun, the copy (and the table) finished. 0 where not reached. */
  uint64_t taken_ns;
  uint64_t copy_ns;
  uint64_t copied_ns;
  uint64_t answered_ns; /* just before seq is written */
} slip_serve_done;

/* A map output in the directory (device memory). Host writes whole entries of FREE slots and the
 * state word; the kernel pins (atomic) around each push. To remove an output the host sets
 * REVOKED and waits until pins reads 0 (a kernel that pinned after the store re-reads the state
 * and lets go), then FREE. */
enum { SLIP_SERVE_FREE = 0, SLIP_SERVE_LIVE = 1, SLIP_SERVE_REVOKED = 2 };
typedef struct slip_serve_output {
  uint32_t state;      /* SLIP_SERVE_* */
  uint32_t shuffle_id;
  uint64_t map_id;
  uint64_t base;       /* device address of the output's bytes */
  uint64_t offsets;    /* device address of nparts + 1 uint64 block offsets from base */
  uint64_t counts;     /* device address of nparts uint64 row counts (0: rows not known) */
  uint32_t nparts;
  uint32_t pins;       /* pushes reading the output now */
  /* For readers served over gpunetio: the registered region that holds the output's bytes, as a
   * WQE names it (iova = nic_id << 40 | offset, memory key nic_key), and the offset of `base` in
   * it. nic_id SLIP_SERVE_NO_NIC: not registered (such readers are refused the output). nic_key
   * is the key of queue sets of this process's software NIC (the region's key on the context),
   * link_key its memory key on the executor's NIC, which queue pairs of NIC links present (readers
   * with link_keys: those on other machines); 0 when it is not registered there. */
  uint32_t nic_id;
  uint32_t nic_key;
  uint64_t nic_offset;
  uint32_t link_key;
  uint32_t reserved0;
  uint64_t reserved[7];
} slip_serve_output;
#define SLIP_SERVE_NO_NIC 0xffffffffu

/* One reader: its ring and its landing region as this process addresses them (device memory).
 * A reader is pushed to one of two ways:
 *   stores    (queue 0) the CTA copies with 16-byte stores to `landing` (local, or CUDA IPC mapped),
 *             writes the table and the signal with stores, and answers after a system fence;
 *   gpunetio  (queue != 0) the CTA that took the request posts one RDMA write per block, an RDMA
 *             write of the block table (built in its own SLIP_SERVE_STAGING_BYTES slot of the
 *             staging region, at blockIdx.x times that), and, when asked, an RDMA fetch-add of the
 *             signal word (zeroed by the reader beforehand), as one batch on the reader's queue pair:
 *             one completion request, one doorbell. It answers once the batch completed locally
 *             (a reliable-connected responder executes a queue pair's requests in order, so the
 *             table and signal land after the blocks), and only then lets go of the map outputs.
 *             The landing region is entry landing_index of the queue's region table (its length at
 *             least landing_len), the staging region entry staging_index (a local region); `landing`
 *             is not read.
 *   remote    (gpunetio, mirror 1) as gpunetio, for a reader on another machine: `ring` is this
 *             side's copy of the ring (registered on the NIC as ring_nic_id / ring_mkey), and each
 *             answer also goes to the reader's copy (mirror_id / mirror_mkey on the reader's NIC)
 *             as two RDMA writes on the reader's queue pair: in the request's batch when it was
 *             served (ordered after its blocks, table and signal; copied_ns and answered_ns are
 *             then when the batch was posted), alone when it was refused. An answer lost with a
 *             failed queue pair never reaches the reader, whose deadline then sends the request
 *             the host-driven way. */
enum { SLIP_SERVE_READER_OFF = 0, SLIP_SERVE_READER_LIVE = 1 };
typedef struct slip_serve_reader {
  uint64_t ring;         /* device address of the ring (mapped host memory) */
  uint64_t landing;      /* stores: device address of the landing region */
  uint64_t landing_len;
  uint64_t landing_key;
  uint32_t nslots;
  uint32_t state;        /* SLIP_SERVE_READER_* */
  uint64_t taken;        /* tickets taken so far (kernel) */
  uint64_t queue;        /* gpunetio: device address of the reader's slip_dev_queue; 0 for stores */
  uint32_t landing_index; /* gpunetio: the landing region's entry in the queue's region table */
  uint32_t staging_index; /* gpunetio: the staging region's entry there */
  uint32_t mirror;        /* 1: a remote reader (answers also go to its copy of the ring) */
  uint32_t ring_nic_id;   /* remote: this copy of the ring as the NIC names it */
  uint32_t ring_mkey;
  uint32_t mirror_id;     /* remote: the reader's copy, as its NIC registered it */
  uint32_t mirror_mkey;
  uint32_t link_keys;     /* 1: WQEs name outputs by their link_key (queue pairs of NIC links) */
  uint64_t reserved[5];
} slip_serve_reader;
/* A CTA's block-table staging slot (a table of SLIP_SERVE_MAX_BLOCKS records fits). */
#define SLIP_SERVE_STAGING_BYTES 512u

/* Control words in mapped pinned host memory, each with one writer: the host asks the kernel to
 * stop; the last CTA to leave clears `live` (the host sets it to the CTA count at launch). */
typedef struct slip_serve_ctl {
  uint32_t stop;        /* host: 1 asks every CTA to leave after its current request */
  uint32_t live;        /* nonzero while the kernel is resident */
  uint64_t reserved[7];
} slip_serve_ctl;

/* Counters in device memory (GPU atomics; the host copies them out). */
typedef struct slip_serve_stats {
  uint64_t served;      /* requests answered SLIP_OK */
  uint64_t failed;      /* requests answered with an error */
  uint64_t bytes;       /* block bytes pushed */
  uint32_t live;        /* CTAs resident (the last one out clears slip_serve_ctl.live) */
  uint32_t reserved0;
  uint64_t reserved[4];
} slip_serve_stats;

/* The kernel's one argument (device memory). */
typedef struct slip_serve_launch {
  slip_serve_reader *readers;
  slip_serve_output *dir;
  slip_serve_ctl *ctl;     /* mapped pinned host memory */
  slip_serve_stats *stats; /* device memory */
  uint32_t nreaders;
  uint32_t dir_slots;      /* power of two; open addressing on slip_serve_hash */
  uint64_t idle_ns;        /* a CTA that found no request for this long leaves */
  int64_t clock_offset_ns; /* %globaltimer minus CLOCK_MONOTONIC, measured at launch */
  void *jobs;              /* one shared copy job per CTA (device memory, serve.cu's own layout) */
  uint64_t chunk_bytes;    /* a request over this many block bytes is copied by every free CTA, in chunks of it */
} slip_serve_launch;

#if defined(__CUDACC__)
#define SLIP_SERVE_HD __host__ __device__ __forceinline__
#else
#define SLIP_SERVE_HD static inline
#endif
/* Directory slot of (shuffle, map): first probe; the next ones follow linearly. */
SLIP_SERVE_HD uint32_t slip_serve_hash(uint32_t shuffle_id, uint64_t map_id, uint32_t slots) {
  uint64_t k = map_id * 0x9e3779b97f4a7c15ull ^ ((uint64_t)shuffle_id << 32 | shuffle_id);
  k ^= k >> 31;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 29;
  return (uint32_t)k & (slots - 1);
}
/* What a remote ring's fetch-add adds to ticket t's seq word (request or answer): it holds the
 * previous lap's ticket + 1, or 0 on the first lap, and becomes t + 1. */
SLIP_SERVE_HD uint64_t slip_serve_seq_step(uint64_t t, uint32_t nslots) { return t < nslots ? t + 1 : nslots; }
SLIP_SERVE_HD uint64_t slip_serve_ring_bytes(uint32_t nslots) {
  return SLIP_SERVE_RING_HEADER + (uint64_t)nslots * (SLIP_SERVE_SLOT_BYTES + sizeof(slip_serve_done));
}

/* ---- host side (serve.cu) ----
 * One server per GPU context. The kernel runs on a stream of its own that no other work waits for;
 * the host writes directory and reader entries with synchronous copies that do not wait for it.
 * Threading: calls on one server are serialised by the server. */
typedef struct slip_ctx slip_ctx;
typedef struct slip_server slip_server;

/* ctas x threads (a multiple of 32, at least 32) resident while there is work; dir_slots a power
 * of two. Nothing runs until slip_server_start. */
slip_status slip_server_create(slip_ctx *ctx, uint32_t max_readers, uint32_t dir_slots, uint32_t ctas,
                               uint32_t threads, uint64_t idle_ns, slip_server **out);
/* Reader entry `index`: its ring (device address of mapped host memory holding
 * slip_serve_ring_bytes(nslots), its header checked) and landing region (device address). The
 * ring starts at ticket 0. */
slip_status slip_server_set_reader(slip_server *s, uint32_t index, uint64_t ring_dev, const void *ring_host,
                                   uint64_t landing_dev, uint64_t landing_len, uint64_t landing_key);
/* As slip_server_set_reader, for a reader pushed to over gpunetio (see slip_serve_reader): queue_dev
 * the device address of a gpunetio slip_dev_queue (slip_queueset_device(set) + q) that only this
 * server posts on while the entry is set, whose region table holds the reader's landing region at
 * landing_index and a local staging region of at least ctas x SLIP_SERVE_STAGING_BYTES bytes at
 * staging_index (both checked on the device for each request: a request that fails the check is
 * answered with its code). The queue set must outlive the entry. */
slip_status slip_server_set_reader_nic(slip_server *s, uint32_t index, uint64_t ring_dev, const void *ring_host,
                                       uint64_t queue_dev, uint32_t landing_index, uint32_t staging_index,
                                       uint64_t landing_len, uint64_t landing_key);
/* As slip_server_set_reader_nic, for a reader on another machine (see slip_serve_reader, remote):
 * ring_host/ring_dev this side's copy of the ring, registered on the queue's NIC as (ring_nic_id,
 * ring_mkey); the reader's copy registered on its NIC as (mirror_id, mirror_mkey), of the same
 * size. The reader posts into this copy with RDMA writes (slip_nic_host_post). The entry's WQEs name
 * outputs by their link_key. */
slip_status slip_server_set_reader_remote(slip_server *s, uint32_t index, uint64_t ring_dev, const void *ring_host,
                                          uint64_t queue_dev, uint32_t landing_index, uint32_t staging_index,
                                          uint64_t landing_len, uint64_t landing_key, uint32_t ring_nic_id,
                                          uint32_t ring_mkey, uint32_t mirror_id, uint32_t mirror_mkey);
/* Takes no more requests from reader `index`; requests being served finish. Stop the server before
 * unmapping the reader's landing region. */
slip_status slip_server_clear_reader(slip_server *s, uint32_t index);
/* Enters a map output: nparts blocks at base + offsets[p] .. base + offsets[p + 1] (device
 * addresses; counts may be 0). nic_id/nic_key/nic_offset/link_key: the registered region holding
 * the bytes as gpunetio readers' WQEs name it (slip_serve_output), or SLIP_SERVE_NO_NIC, 0, 0, 0. SLIP_ERR_STATE
 * when it is already there, SLIP_ERR_NO_MEMORY when the directory has no free slot on its probe
 * sequence. */
slip_status slip_server_put_output(slip_server *s, uint32_t shuffle_id, uint64_t map_id, uint64_t base,
                                   uint64_t offsets_dev, uint64_t counts_dev, uint32_t nparts, uint32_t nic_id,
                                   uint32_t nic_key, uint64_t nic_offset, uint32_t link_key);
/* Removes a map output: no push starts from it after the call, and the call returns once none
 * reads it (SLIP_ERR_TIMEOUT after timeout_ns, the output still pinned: do not free it). The slot
 * stays a tombstone for lookups; once no push reads it, a later put may take it again. */
slip_status slip_server_revoke_output(slip_server *s, uint32_t shuffle_id, uint64_t map_id, uint64_t timeout_ns);
/* Launches the kernel unless it is resident; *launched says whether it did. */
slip_status slip_server_start(slip_server *s, int *launched);
/* Launches the kernel if it is not resident and a live reader's ring holds a request it has not
 * taken (read from the rings' host memory: no device access while parked). A holder thread calls
 * it while the kernel is parked, so a request posted after the CTAs left is served. */
slip_status slip_server_wake(slip_server *s, int *launched);
/* Whether the kernel is resident now (its CTAs leave after idle_ns without a request). */
int slip_server_resident(const slip_server *s);
/* Asks the kernel to leave and waits for it. */
slip_status slip_server_stop(slip_server *s);
slip_status slip_server_stats(slip_server *s, slip_serve_stats *out);
void slip_server_destroy(slip_server *s);

/* A reader's ring file as its holder maps it: the file (made and formatted by the reader) mapped
 * shared, registered with the holder's GPU (cudaHostRegister, mapped), its header and size
 * checked. Threading: one owner. */
typedef struct slip_serve_ring_map slip_serve_ring_map;
/* SLIP_ERR_BAD_DESCRIPTOR, naming what was got and what was expected, for a file that is not a ring
 * (magic, version, slot size or count) or whose size is not the ring's. */
slip_status slip_serve_ring_attach(slip_ctx *ctx, const char *path, slip_serve_ring_map **out);
void *slip_serve_ring_host(const slip_serve_ring_map *m);
uint64_t slip_serve_ring_device(const slip_serve_ring_map *m);
/* Unregisters and unmaps. Clear the reader entry and stop the server first. */
void slip_serve_ring_detach(slip_serve_ring_map *m);
/* Tells the reader the ring is served: this process's id into the header's holder_pid (call it
 * once the reader entry is set). */
void slip_serve_ring_ack(slip_serve_ring_map *m);

#ifdef __cplusplus
}
#endif
#endif
