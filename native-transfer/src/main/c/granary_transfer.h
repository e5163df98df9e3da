/*
 * Granary native transfer engine: the C API.
 *
 * A client engine moves bytes between registered local memory and extents of storage-node segments over the
 * data-plane frame protocol of docs/protocol.md (native TCP), or over RDMA verbs where a device exists. A server
 * serves a storage node's segments over the same TCP protocol. Every function reports failure as a negative
 * Granary ErrorCode number plus a message in a gt_error; no input can make the library abort.
 *
 * Threading: gt_engine_submit, gt_engine_provide_commit, gt_engine_connect, gt_engine_register_memory and
 * gt_engine_wakeup may be called from any thread; gt_engine_poll runs the engine's I/O and must be called from one
 * thread at a time. A server runs each of its event loops on one thread (gt_server_run_loop); the table updates and
 * gt_server_stop may be called from any.
 */
#ifndef GRANARY_TRANSFER_H
#define GRANARY_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ErrorCode numbers (docs/protocol.md, "Status codes"). */
#define GT_OK 0
#define GT_INTERNAL_ERROR (-1)
#define GT_SEGMENT_NOT_FOUND (-101)
#define GT_INVALID_PARAMS (-600)
#define GT_TRANSFER_FAIL (-800)
#define GT_RPC_TIMEOUT (-901)
#define GT_UNAVAILABLE (-1010)
#define GT_ACCESS_DENIED (-1800)
#define GT_TOKEN_EXPIRED (-1801)

#define GT_ERROR_MESSAGE_LENGTH 256

typedef struct gt_error
{
    int code;
    char message[GT_ERROR_MESSAGE_LENGTH];
} gt_error;

/* ---------------------------------------------------------------- client engine */

typedef struct gt_engine gt_engine;

typedef struct gt_engine_config
{
    uint32_t lanes_per_peer;           /* connections per peer, 1..64 */
    uint32_t slice_bytes;              /* largest range one frame carries, >= 4096 */
    uint32_t max_queued_frames_per_peer; /* admitted frames outstanding per peer */
    uint32_t max_pending_per_peer;     /* transfers waiting for admission per peer; 0 = refuse at once */
    uint64_t admission_timeout_ms;
    uint64_t transfer_timeout_ms;      /* per frame, from the moment it is handed to its lane */
    uint64_t connect_timeout_ms;
    uint32_t max_vector_entries;       /* small READs (<= 64 KiB) one READV frame carries, 1..1024; 1 = no READV */
    /*
     * Frames of at least this many bytes go round-robin over a peer's lanes; shorter ones (small values, READVs,
     * COMMITs) all take its first lane. 0 (default): every frame round-robin. A caller's own loop sets it, so
     * the slices of a big value are served by several of the node's threads at once while a batch of small
     * values keeps to one connection (another one would only add system calls).
     */
    uint32_t spread_min_bytes;
    /*
     * 1: READs without a token go one-sided over RDMA where a device exists and the node agrees (RDMA_CONNECT),
     * everything else over TCP; 0 (default): TCP only. Exercised against the fake verbs of the C tests and of the
     * JNI test library (libgranary_transfer_fake_verbs.so), never against a device.
     */
    uint32_t rdma_reads;
    /*
     * 1 (default): a WRITE of one frame whose COMMIT payload is known when the frame is issued goes with it as one
     * WRITE_COMMIT frame (one frame and one answer instead of two; docs/protocol.md); 0: the WRITE, then its COMMIT.
     * Nodes older than WRITE_COMMIT close a connection that sends one: set 0 until every node is upgraded.
     */
    uint32_t write_commits;
    /*
     * 1 (default): a READ of any size, and a WRITE of at least local_min_bytes, to a node on this host moves with
     * process_vm_readv / process_vm_writev (one copy, no loopback TCP) once the node answered LOCAL_CONNECT for its
     * segment and this process proved it can reach the node's memory; the small READs of one submission to one
     * segment move with one call; a WRITE's COMMIT still goes over TCP. Anything else, and any refusal or failed
     * copy, takes TCP (docs/protocol.md "LOCAL_CONNECT"). 0: TCP only.
     */
    uint32_t local_transfers;
    uint32_t local_min_bytes;          /* smallest WRITE that goes local (default 64 KiB) */
} gt_engine_config;

/* Fills the defaults of docs/configuration.md (the Java TransferConfig's). */
void gt_engine_config_defaults(gt_engine_config *config);

int gt_engine_create(const gt_engine_config *config, gt_engine **engine, gt_error *error);

/* Registers [address, address + length): operations name local memory as (region, offset) inside it. */
int gt_engine_register_memory(gt_engine *engine, void *address, uint64_t length, uint32_t *region, gt_error *error);

/* Forgets a region; the caller guarantees no operation on it is outstanding. */
int gt_engine_unregister_memory(gt_engine *engine, uint32_t region);

/*
 * Long-lived registrations: the caller's buffers that many operations will use (an engine's KV-page pool). A pinned
 * range is a region that gt_engine_find_pinned hands out for any operation inside it, so per-operation bookkeeping
 * and, over RDMA, the memory registration (made on first one-sided use) are paid once, not per operation. At most
 * GT_MAX_PINNED ranges, none overlapping another (GT_INVALID_PARAMS); unpin names the range's start and forgets
 * it with its registration: the caller guarantees no operation on it is outstanding.
 */
#define GT_MAX_PINNED 64
int gt_engine_pin_memory(gt_engine *engine, void *address, uint64_t length, uint32_t *region, gt_error *error);
int gt_engine_unpin_memory(gt_engine *engine, const void *address);
/* 1 and the region and offset when [address, address + length) lies inside a pinned range, else 0. */
int gt_engine_find_pinned(gt_engine *engine, const void *address, uint64_t length, uint32_t *region,
    uint64_t *offset);

/* A peer handle for host:port (resolved here, connected lazily on first use, lanes reopened after a failure). */
int gt_engine_connect(gt_engine *engine, const char *host, uint16_t port, uint32_t *peer, gt_error *error);

#define GT_OP_READ 1
#define GT_OP_WRITE 2

/* The WRITE carries a COMMIT whose payload is given with gt_engine_provide_commit once it is known. */
#define GT_OP_FLAG_COMMIT_LATER 0x01
/* The engine unregisters the operation's region when the operation completes (a region made for it alone). */
#define GT_OP_FLAG_RELEASE_REGION 0x02
/*
 * A READ whose completion carries the CRC32C of the bytes it delivered, computed while they arrived over TCP (one
 * pass over memory that is still in the CPU's caches, instead of a second pass by the caller). A READ that went
 * one-sided over RDMA completes without one (has_crc32c 0); the flag means nothing to a WRITE.
 */
#define GT_OP_FLAG_CRC32C 0x04

#define GT_TOKEN_LENGTH 20

typedef struct gt_op
{
    uint64_t user_data;        /* returned in the completion; unique among outstanding operations */
    uint32_t peer;
    uint8_t opcode;            /* GT_OP_READ or GT_OP_WRITE */
    uint8_t flags;             /* GT_OP_FLAG_* */
    uint8_t has_token;
    uint32_t region;
    uint64_t local_offset;
    uint32_t length;
    uint32_t segment_id;
    uint64_t remote_offset;
    uint64_t grant_offset;     /* the extent the token grants; must hold the range */
    uint64_t grant_length;
    uint8_t token[GT_TOKEN_LENGTH]; /* expiry (u32 big-endian) then the 16-byte MAC */
    const uint8_t *commit;     /* COMMIT payload sent after the WRITE (copied at submit), or NULL */
    uint32_t commit_length;
} gt_op;

typedef struct gt_completion
{
    uint64_t user_data;
    int32_t status;            /* ErrorCode number, 0 = OK */
    uint32_t crc32c;           /* with has_crc32c: the CRC32C of the READ's bytes (GT_OP_FLAG_CRC32C) */
    int32_t has_crc32c;        /* 1 for a READ with GT_OP_FLAG_CRC32C that completed OK with every byte over TCP */
} gt_completion;

/*
 * Submits a batch. An operation that is refused at once (bad region or range, unknown peer, queue full) still
 * completes through gt_engine_poll with its status; the return value is the number accepted for completion (all).
 */
int gt_engine_submit(gt_engine *engine, const gt_op *ops, int count, gt_error *error);

/*
 * The COMMIT payload of a GT_OP_FLAG_COMMIT_LATER write. NULL/0 means the record could not be made: no COMMIT is
 * sent and the transfer completes with GT_INTERNAL_ERROR (its WRITE may have landed).
 */
int gt_engine_provide_commit(gt_engine *engine, uint64_t user_data, const uint8_t *payload, uint32_t length,
    gt_error *error);

/* Runs I/O for up to timeout_ms (0 = do not wait) and returns up to max completions (or a negative code). */
int gt_engine_poll(gt_engine *engine, gt_completion *completions, int max, int timeout_ms);

/* Makes a gt_engine_poll in progress return soon (any thread). */
void gt_engine_wakeup(gt_engine *engine);

/* Frames outstanding (admitted, not completed) to a peer; transfers waiting for admission. For tests and stats. */
int gt_engine_peer_stats(gt_engine *engine, uint32_t peer, uint32_t *outstanding_frames, uint32_t *pending);

/* Memory regions registered now (each transfer of the JNI binding registers one until it completes). */
uint32_t gt_engine_region_count(gt_engine *engine);

/* Transfers admitted so far, refused at once (queue and pending admissions full), timed out waiting; any thread. */
void gt_engine_counters(gt_engine *engine, uint64_t *admitted, uint64_t *rejected_queue_full,
    uint64_t *rejected_admission_timeout);

/* READs completed one-sided over RDMA with success, and READs that failed there (status other than GT_OK). */
void gt_engine_rdma_counters(gt_engine *engine, uint64_t *reads, uint64_t *failed);

/* Transfers whose bytes moved locally (READs, WRITEs) and eligible ones that took TCP instead; any thread. */
void gt_engine_local_counters(gt_engine *engine, uint64_t *reads, uint64_t *writes, uint64_t *fallbacks);

/* Closes every connection; outstanding operations are dropped without completion (the caller fails them). */
void gt_engine_destroy(gt_engine *engine);

/* ---------------------------------------------------------------- server */

typedef struct gt_server gt_server;

/* on_commit's token_status when the server did not check the COMMIT's token (a status is never positive). */
#define GT_COMMIT_TOKEN_UNCHECKED 1

/*
 * Decisions the server asks its owner for, on the thread of the connection's event loop, before any byte moves (with
 * several loops, concurrently: the owner's state must be thread safe).
 * on_write: a WRITE passed decode, status, token, segment and range checks; return 0 to let its bytes land
 *   (the owner forgot the ledger entries the range overlaps) or an ErrorCode to refuse it.
 * on_commit: a COMMIT and its payload (at most 16 KiB) arrived; header is the 64-byte request header,
 *   failed_write_status the status of a refused WRITE of the same extent on this connection (0 if none),
 *   token_status the server's verdict on the COMMIT's token as a WRITE token of the committed extent (0, ACCESS_DENIED
 *   or TOKEN_EXPIRED; 0 also while no token key is installed), or GT_COMMIT_TOKEN_UNCHECKED when the payload is not a
 *   record whose value length it could read (the owner checks it then). Returns the COMMIT_RESPONSE status.
 * on_close: a connection was closed because of a protocol error (reason) or the peer went away (reason NULL).
 */
typedef struct gt_server_callbacks
{
    void *context;
    int (*on_write)(void *context, uint32_t segment_id, uint64_t offset, uint32_t length);
    int (*on_commit)(void *context, const uint8_t *header, const uint8_t *payload, uint32_t length,
        int failed_write_status, int token_status);
    void (*on_close)(void *context, const char *peer, const char *reason);
    /*
     * Service times of READs and WRITEs, batched (optional): each sample is (op << 62) | nanoseconds, op 1 READ or
     * 2 WRITE; a READ from its header to its response queued, a WRITE from its header to its last byte landed.
     */
    void (*on_latencies)(void *context, const uint64_t *samples, int count);
    /* The clock tokens expire by (epoch ms); NULL = CLOCK_REALTIME. */
    uint64_t (*now_epoch_ms)(void *context);
    /*
     * The entries of one WRITEV at once (optional, each; without it on_write / on_commit is called per entry).
     * on_writes: the WRITE parts that passed their checks, before any byte moves: statuses[i] out, as on_write
     * returns it. on_commits: the entries whose bytes landed: entry i's COMMIT header (GT_HEADER_LENGTH bytes at
     * headers + i * 64), record and token status as on_commit takes them (no refused WRITE to inherit);
     * statuses[i] out.
     */
    void (*on_writes)(void *context, uint32_t count, const uint32_t *segment_ids, const uint64_t *offsets,
        const uint32_t *lengths, int32_t *statuses);
    void (*on_commits)(void *context, uint32_t count, const uint8_t *headers, const uint8_t *const *records,
        const uint32_t *record_lengths, const int32_t *token_statuses, int32_t *statuses);
} gt_server_callbacks;

typedef struct gt_server_config
{
    const char *host;
    uint16_t port;                 /* 0 = ephemeral */
    uint32_t max_frame_bytes;
    uint32_t io_threads;           /* event loops, 1..256 (0 = 1); connections are spread over them round-robin */
    /*
     * 1: answer LOCAL_CONNECT from a client on this host with where a segment lies in this process, so it can copy
     * with process_vm_readv/writev (docs/protocol.md "LOCAL_CONNECT"); 0: refuse it (UNAVAILABLE_IN_CURRENT_STATUS).
     */
    uint32_t local_transfers;
} gt_server_config;

typedef struct gt_server_stats
{
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t requests;
    uint64_t read_vectors;
    uint64_t write_vectors;
    uint64_t error_responses;
    uint64_t protocol_errors;
    uint64_t connections_opened;
    uint64_t connections_closed;
    uint64_t tokens_verified;
    uint64_t tokens_missing;
    uint64_t tokens_invalid;
    uint64_t tokens_expired;
} gt_server_stats;

int gt_server_create(const gt_server_config *config, const gt_server_callbacks *callbacks, gt_server **server,
    gt_error *error);

/* The bound port. */
uint16_t gt_server_port(const gt_server *server);

/* Replaces the whole segment table (ids, base addresses, sizes); any thread. */
int gt_server_set_segments(gt_server *server, const uint32_t *ids, const uint64_t *addresses, const uint64_t *sizes,
    int count, gt_error *error);

/* Installs the 32-byte data-token key, or removes it (NULL): then every frame passes without a token. */
int gt_server_set_token_key(gt_server *server, const uint8_t *key, gt_error *error);

/*
 * Runs event loop index (0..io_threads-1) on the calling thread until gt_server_stop; loop 0 also accepts. Every loop
 * must be run by a thread of its own; the callbacks are called on the thread of the connection's loop, so with more
 * than one loop they may run concurrently. Returns 0, or a negative code when the loop failed.
 */
int gt_server_run_loop(gt_server *server, uint32_t index, gt_error *error);

/* Runs every loop (loops 1.. on threads of its own, loop 0 on the caller) until gt_server_stop; 0 or a code. */
int gt_server_run(gt_server *server, gt_error *error);

/* The number of event loops. */
int gt_server_loop_count(const gt_server *server);

/* Makes gt_server_run return (any thread). */
void gt_server_stop(gt_server *server);

void gt_server_get_stats(gt_server *server, gt_server_stats *stats);

/* Closes the listener and every connection; only once every gt_server_run_loop returned. */
void gt_server_destroy(gt_server *server);

/* ---------------------------------------------------------------- RDMA */

/*
 * 1 when this build has the verbs transport, libibverbs loads and at least one RDMA device is present;
 * otherwise 0 with the reason in error (no headers at build time, library missing, no device).
 */
int gt_rdma_available(gt_error *error);

/* The library's version string. */
const char *gt_version(void);

/* ---------------------------------------------------------------- segment memory */

#define GT_HUGE_PAGE_BYTES (2u << 20)
/* Largest mapping gt_memory_map makes (1 TiB), far above any segment a node holds. */
#define GT_MAX_MAPPING_BYTES (1ull << 40)

/*
 * Maps `length` bytes, rounded up to GT_HUGE_PAGE_BYTES, of zeroed anonymous private memory starting on a
 * GT_HUGE_PAGE_BYTES boundary (a storage node's segment). With huge != 0 the range is advised MADV_HUGEPAGE, so the
 * kernel backs it with transparent huge pages where it can (THP "madvise" or "always"); GT_UNAVAILABLE when the
 * kernel refuses the advice (then nothing stays mapped). Returns GT_OK with *address and *mapped_length.
 */
int gt_memory_map(uint64_t length, int huge, void **address, uint64_t *mapped_length, gt_error *error);

/* Unmaps what gt_memory_map returned: GT_OK, or GT_INVALID_PARAMS for an address or length it cannot have made. */
int gt_memory_unmap(void *address, uint64_t mapped_length);

#ifdef __cplusplus
}
#endif

#endif
