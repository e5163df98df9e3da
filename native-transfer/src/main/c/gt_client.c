/*
 * The native TCP client engine: lanes per peer over non-blocking sockets and one epoll set, frames of
 * docs/protocol.md sent straight from registered memory (writev of header and payload) and READ payloads received
 * straight into it. Slicing, the per-transfer window, admission per peer, per-frame timeouts and the COMMIT after a
 * WRITE follow the Java engine (NettyTransferEngine); see docs/architecture.md "Native transfer engine". Small READs
 * handed to a lane in one loop turn leave together as READV frames (docs/protocol.md "READV"), formed and checked as
 * the Java engines do (DirectConnection, VectorRead): each entry's bytes land straight in its own memory.
 * With rdma_reads, a READ without a token goes one-sided instead where the node agreed to an RDMA path for its
 * segment ("RDMA reads" below); WRITEs and COMMITs always take TCP, so the node's ledger sees every write.
 *
 * Threading: gt_engine_poll is the only thread that touches lanes, frames and transfers. Other threads hand
 * operations over through the incoming queue under the engine mutex and wake the loop with an eventfd.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_internal.h"
#include "gt_rdma.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_PEERS 4096
#define MAX_LANES 64
#define SOCKET_BUFFER_BYTES (4 << 20)
#define STAGING_BYTES (64 << 10)
#define MAX_IOV 64
#define MAX_WRITEV_BYTES (8u << 20)
#define WINDOW_BYTES_PER_LANE (4u << 20)
#define LARGE_PAYLOAD_BYTES (16u << 10)
#define MAX_VECTOR_ENTRY_BYTES (64u << 10)
#define MAX_VECTOR_BYTES (4u << 20)
#define VECTOR_STATUS_LENGTH 4
#define CRC_RUN_BYTES GT_CRC32C_RUN_BYTES /* the CRC32C update's fast width */
#define CRC_LAG_BYTES (4 * CRC_RUN_BYTES) /* received bytes that wait before they are folded in */
#define RDMA_QUEUE_DEPTH 256      /* send-queue slots of one path */
#define RDMA_CHAIN_LENGTH 16      /* WRs per ibv_post_send */
#define RDMA_MAX_INFLIGHT 64      /* transfers in flight on one path; more go over TCP */
#define RDMA_MAX_PATHS 16         /* segments per peer with an RDMA path */
#define RDMA_RETRY_MS 5000        /* after a refusal or a failure, TCP only for that segment for this long */
#define LOCAL_MAX_PATHS 16        /* segments per same-host peer with a local path */
#define LOCAL_RETRY_MS 5000       /* after a refusal or a failure, TCP only for that segment for this long */
#define LOCAL_EXCHANGE_MS 500     /* a node on this host answers LOCAL_CONNECT at once: wait at most this long */
#define LOCAL_CRC_CHUNK (256u << 10) /* a local READ with a CRC copies this much, then folds it in while cached */
#define LOCAL_GROUP_MAX 1024      /* small transfers to one segment moved by one local_batch copy (then the next) */

typedef struct transfer transfer;
typedef struct frame frame;
typedef struct lane lane;
typedef struct peer peer;
typedef struct rdma_path rdma_path;
typedef struct local_path local_path;

enum commit_state
{
    COMMIT_NONE,      /* no COMMIT */
    COMMIT_WAITING,   /* the payload comes later (gt_engine_provide_commit) */
    COMMIT_READY,     /* payload known, not sent yet */
    COMMIT_SENT,      /* frame handed to a lane */
    COMMIT_DONE
};

struct transfer
{
    uint64_t user_data;
    peer *peer;
    uint8_t op;
    uint8_t own_region;
    uint32_t region;
    uint8_t *local;
    uint32_t length;
    uint32_t segment_id;
    uint64_t remote_offset;
    int has_token;
    uint32_t grant_delta0; /* remote_offset - grant_offset */
    uint32_t grant_length;
    uint8_t token[GT_TOKEN_LENGTH];
    uint32_t slices_total;
    uint32_t slices_issued;
    uint32_t slices_done;
    uint32_t in_lanes;       /* frames of this transfer on lanes */
    uint32_t frames_admitted;
    int32_t status;
    int admitted;
    enum commit_state commit_state;
    uint8_t *commit;         /* the COMMIT payload: right behind this struct (commit_inline), or malloc'ed */
    uint32_t commit_length;
    int commit_inline;       /* commit lives in this transfer's own allocation: never freed on its own */
    int first_lane;          /* a READ of a call that reads several big values: every slice on the first lane */
    uintptr_t write_lanes;   /* XOR of the lanes of its WRITE slices on the wire: with one left, that one's lane */
    uint64_t admission_deadline_ms;
    transfer *next;          /* incoming queue or pending-admission queue */
    transfer *commit_link;   /* waiting-commit or provided list (under the engine mutex) */
    int commit_listed;       /* on the waiting-commit list (else, if late_commit, maybe on the provided list) */
    int late_commit;         /* submitted with GT_OP_FLAG_COMMIT_LATER: lists under the mutex may hold it */
    int want_crc;            /* a READ with GT_OP_FLAG_CRC32C */
    int local_moved;         /* its bytes moved with its submission's other small ones (local_batch) */
    int local_seen;          /* local_batch looked at it already */
    uint32_t crc_joined;     /* XOR of the register of every slice received, each shifted by the bytes behind it */
    uint32_t crc_slices;     /* slices joined into crc_joined (all of them: the completion carries the CRC32C) */
    rdma_path *rdma;         /* the path it is in flight on, or NULL */
    uint32_t rdma_slot;
    uint32_t rdma_wrs;
    uint64_t rdma_deadline_ms;
};

struct frame
{
    uint64_t seq;
    transfer *transfer;
    uint8_t opcode;
    uint32_t length;         /* range length (READ/WRITE) or payload length (COMMIT) */
    uint32_t payload_out;    /* bytes sent after the header (after the prefix): WRITE and COMMIT */
    uint8_t *prefix;         /* WRITE_COMMIT: its commit record (the transfer's), sent between header and payload */
    uint32_t prefix_length;
    uint64_t offset;
    uint8_t *local;
    uint8_t header[GT_HEADER_LENGTH];
    uint64_t sent;
    uint64_t deadline_ms;
    int timed_out;
    int resent;              /* sent again once on a fresh connection after a stale one failed */
    uint32_t crc;            /* READ with want_crc: raw CRC32C register of its first crc_done payload bytes */
    uint32_t crc_done;
    lane *write_lane;        /* a WRITE slice: the lane it was put on (a resend keeps it) */
    frame *next;
    frame *prev;
    /* READV (transfer NULL): its entries, small READ frames each still counted by its transfer, NULL once answered */
    frame **entries;
    uint32_t entry_count;
    uint64_t entry_bytes;
    uint8_t *vector_bytes;   /* READV: the entries' 64-byte headers (the payload sent), then the answer's statuses;
                                WRITEV: its table (the entries' headers, then their records), then the statuses */
    uint8_t *statuses;       /* where the answer's statuses go, inside vector_bytes */
};

/* Small frames waiting on a lane to leave together as one vector frame when it is next flushed (linked by next). */
typedef struct pending_vector
{
    frame *head;
    frame *tail;
    uint32_t count;
    uint64_t bytes;          /* the entries' ranges */
    uint64_t table;          /* WRITEV: their headers' and records' bytes */
} pending_vector;

struct lane
{
    peer *peer;
    int index;
    int fd;
    int connecting;
    int doomed;              /* a status: fail the lane at the end of this loop turn */
    int dirty;               /* frames to write */
    int want_out;
    uint32_t uid;
    uint64_t next_seq;
    uint64_t connect_deadline_ms;
    frame *head;             /* every frame handed to the lane, in order (deadline order) */
    frame *tail;
    frame *cursor;           /* first frame not completely sent */
    uint32_t frames;
    uint64_t answers;        /* responses matched on this connection */
    int idle_reuse;          /* frames were handed to this connection after it sat idle */
    uint64_t answers_at_reuse;
    /* receive state */
    uint8_t staging[STAGING_BYTES];
    uint32_t staged_start;
    uint32_t staged_end;
    uint8_t header[GT_HEADER_LENGTH];
    uint32_t header_fill;
    frame *receiving;        /* the READ whose payload is arriving, or NULL */
    uint8_t *receive_at;
    uint64_t payload_left;   /* payload bytes of the current response still to come */
    int large_payload;       /* last response carried a large payload: read the next header alone */
    frame *rx_vector;        /* the READV whose answer is arriving, or NULL */
    uint32_t rx_status_fill; /* bytes of its status block in */
    uint32_t rx_entry;       /* the entry whose bytes arrive now */
    uint32_t rx_entry_fill;
    pending_vector reads;    /* small READs waiting to leave together as one READV when the lane is next flushed */
    pending_vector writes;   /* small WRITE_COMMITs waiting to leave together as one WRITEV */
    lane *dirty_next;
    int in_dirty_list;
};

struct peer
{
    uint32_t id;
    char host[256];
    uint16_t port;
    struct sockaddr_storage address;
    socklen_t address_length;
    uint32_t lanes_count;
    uint32_t next_lane;
    lane *lanes[MAX_LANES];
    uint32_t outstanding_frames;
    uint32_t pending_count;
    transfer *pending_head;
    transfer *pending_tail;
    rdma_path *rdma_paths[RDMA_MAX_PATHS];
    uint32_t rdma_path_count;
    int local_host;          /* -1 not known yet, 1 its address is one of this host's, 0 not */
    local_path *local_paths[LOCAL_MAX_PATHS];
    uint32_t local_path_count;
};

/* One segment of a same-host peer reached by process_vm_readv/writev: the node's LOCAL_CONNECT record. */
struct local_path
{
    uint32_t segment_id;
    int ready;
    uint64_t retry_at_ms;    /* not ready: TCP only until then */
    gt_local_info info;
};

/*
 * One segment of a peer reached over RDMA: the control connection the exchange went over (the node's queue pair
 * lives as long as it), this side's queue pair, the node's record (rkey, segment range), and the READs in flight.
 */
struct rdma_path
{
    uint32_t segment_id;
    int ready;
    uint64_t retry_at_ms;    /* not ready: TCP only until then */
    int fd;
    gt_rdma_link *link;
    gt_qp_info remote;
    uint32_t wrs_outstanding;
    uint32_t inflight_count;
    transfer *inflight[RDMA_MAX_INFLIGHT];
};

struct gt_engine
{
    gt_engine_config config;
    uint32_t window_slices;
    int epoll_fd;
    int event_fd;
    pthread_mutex_t mutex;
    gt_region_table regions;       /* under mutex */
    peer *peers[MAX_PEERS];        /* slots written under mutex, read by the loop */
    uint32_t peer_count;
    transfer *incoming_head;       /* under mutex */
    transfer *incoming_tail;
    transfer *waiting_commits;     /* under mutex: transfers whose COMMIT payload is still to come, oldest first */
    transfer **waiting_tail;       /* under mutex: the link after the last of them (&waiting_commits when none) */
    transfer *provided;            /* under mutex: commits provided, for the loop to act on */
    int sleeping;                  /* under mutex: the loop is (about to be) in epoll_wait and needs a wake-up */
    gt_completion *completions;    /* loop only */
    uint32_t completions_count;
    uint32_t completions_capacity;
    uint32_t completions_read;
    uint32_t next_lane_uid;
    uint64_t admitted;             /* loop writes, any thread reads (relaxed atomics) */
    uint64_t rejected_queue_full;
    uint64_t rejected_admission_timeout;
    uint32_t pins[GT_MAX_PINNED];  /* under mutex: regions of gt_engine_pin_memory, kept across operations */
    uint32_t pin_count;
    uint64_t rdma_reads_done;      /* one-sided READs completed with GT_OK / otherwise; any thread reads them */
    uint64_t rdma_reads_failed;
    uint64_t local_reads;          /* READs / WRITEs whose bytes moved by process_vm_readv/writev; any thread reads */
    uint64_t local_writes;
    uint64_t local_fallbacks;      /* eligible transfers that took TCP: no path (refused, changed) or a failed copy */
    lane *dirty_head;
    transfer *local_group[LOCAL_GROUP_MAX];      /* loop only: local_batch's scratch */
    gt_local_range local_ranges[LOCAL_GROUP_MAX];
    gt_rdma_device *rdma_device;   /* set once by the loop (first RDMA READ), before any registration is made */
    int rdma_device_failed;
    uint32_t rdma_inflight;        /* transfers in flight over RDMA, all peers */
    uint64_t rdma_request_id;
    uint8_t discard[STAGING_BYTES];
};

static void lane_fail(gt_engine *engine, lane *l, int status);
static void transfer_progress(gt_engine *engine, transfer *t);
static void lane_seal_vector(gt_engine *engine, lane *l);
static void lane_seal_writes(gt_engine *engine, lane *l);

void gt_engine_config_defaults(gt_engine_config *config)
{
    config->lanes_per_peer = 2;
    config->slice_bytes = 512u << 10;
    config->max_queued_frames_per_peer = 4096;
    config->max_pending_per_peer = 1024;
    config->admission_timeout_ms = 1000;
    config->transfer_timeout_ms = 10000;
    config->connect_timeout_ms = 3000;
    config->max_vector_entries = 256;
    config->rdma_reads = 0;
    config->spread_min_bytes = 0;
    config->write_commits = 1;
    config->local_transfers = 1;
    config->local_min_bytes = 64u << 10;
}

int gt_engine_create(const gt_engine_config *config, gt_engine **out, gt_error *error)
{
    *out = NULL;
    if (config->lanes_per_peer < 1 || config->lanes_per_peer > MAX_LANES)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "lanes_per_peer must be in 1..%d, was %u", MAX_LANES,
            config->lanes_per_peer);
    }
    if (config->slice_bytes < 4096 || config->slice_bytes > GT_MAX_FRAME_LENGTH_LIMIT)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "slice_bytes must be in 4096..%u, was %u",
            GT_MAX_FRAME_LENGTH_LIMIT, config->slice_bytes);
    }
    if (config->max_queued_frames_per_peer < 1 || config->transfer_timeout_ms < 1 ||
        config->connect_timeout_ms < 1 || config->admission_timeout_ms < 1)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "queue bound and timeouts must be positive");
    }
    if (config->max_vector_entries < 1 || config->max_vector_entries > GT_MAX_VECTOR_ENTRIES)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "max_vector_entries must be in 1..%d, was %u", GT_MAX_VECTOR_ENTRIES,
            config->max_vector_entries);
    }
    gt_engine *engine = calloc(1, sizeof(gt_engine));
    if (engine == NULL)
    {
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    engine->config = *config;
    engine->waiting_tail = &engine->waiting_commits;
    uint64_t per_lane = (WINDOW_BYTES_PER_LANE + config->slice_bytes - 1) / config->slice_bytes;
    per_lane = per_lane < 2 ? 2 : per_lane > 16 ? 16 : per_lane;
    engine->window_slices = (uint32_t)per_lane * config->lanes_per_peer;
    engine->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    engine->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (engine->epoll_fd < 0 || engine->event_fd < 0)
    {
        const int saved = errno;
        if (engine->epoll_fd >= 0)
        {
            close(engine->epoll_fd);
        }
        if (engine->event_fd >= 0)
        {
            close(engine->event_fd);
        }
        free(engine);
        return gt_fail(error, GT_INTERNAL_ERROR, "epoll/eventfd: %s", strerror(saved));
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(engine->epoll_fd, EPOLL_CTL_ADD, engine->event_fd, &ev);
    pthread_mutex_init(&engine->mutex, NULL);
    gt_regions_init(&engine->regions);
    engine->next_lane_uid = 1;
    *out = engine;
    return GT_OK;
}

int gt_engine_register_memory(gt_engine *engine, void *address, const uint64_t length, uint32_t *region,
    gt_error *error)
{
    pthread_mutex_lock(&engine->mutex);
    const int result = gt_regions_add(&engine->regions, address, length, region);
    pthread_mutex_unlock(&engine->mutex);
    if (result != GT_OK)
    {
        return gt_fail(error, result, "cannot register %llu bytes at %p", (unsigned long long)length, address);
    }
    return GT_OK;
}

/* Under the engine mutex: forgets a region, and its RDMA registration if it has one. */
static int region_release(gt_engine *engine, const uint32_t id)
{
    gt_region *region = gt_regions_get(&engine->regions, id);
    if (region != NULL && region->transport != NULL)
    {
        gt_rdma_deregister(engine->rdma_device, region->transport);
        region->transport = NULL;
    }
    return gt_regions_remove(&engine->regions, id);
}

int gt_engine_unregister_memory(gt_engine *engine, const uint32_t region)
{
    pthread_mutex_lock(&engine->mutex);
    const int result = region_release(engine, region);
    pthread_mutex_unlock(&engine->mutex);
    return result;
}

int gt_engine_pin_memory(gt_engine *engine, void *address, const uint64_t length, uint32_t *region,
    gt_error *error)
{
    if (address == NULL || length == 0)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "cannot pin an empty range");
    }
    pthread_mutex_lock(&engine->mutex);
    for (uint32_t i = 0; i < engine->pin_count; i++)
    {
        const gt_region *pinned = gt_regions_get(&engine->regions, engine->pins[i]);
        if (pinned != NULL && (uint8_t *)address < pinned->address + pinned->length &&
            pinned->address < (uint8_t *)address + length)
        {
            pthread_mutex_unlock(&engine->mutex);
            return gt_fail(error, GT_INVALID_PARAMS, "%llu bytes at %p overlap memory pinned before",
                (unsigned long long)length, address);
        }
    }
    if (engine->pin_count == GT_MAX_PINNED)
    {
        pthread_mutex_unlock(&engine->mutex);
        return gt_fail(error, GT_UNAVAILABLE, "at most %d ranges can be pinned", GT_MAX_PINNED);
    }
    const int result = gt_regions_add(&engine->regions, address, length, region);
    if (result == GT_OK)
    {
        engine->pins[engine->pin_count++] = *region;
    }
    pthread_mutex_unlock(&engine->mutex);
    if (result != GT_OK)
    {
        return gt_fail(error, result, "cannot pin %llu bytes at %p", (unsigned long long)length, address);
    }
    return GT_OK;
}

int gt_engine_unpin_memory(gt_engine *engine, const void *address)
{
    int result = GT_INVALID_PARAMS;
    pthread_mutex_lock(&engine->mutex);
    for (uint32_t i = 0; i < engine->pin_count; i++)
    {
        const gt_region *pinned = gt_regions_get(&engine->regions, engine->pins[i]);
        if (pinned != NULL && pinned->address == (const uint8_t *)address)
        {
            result = region_release(engine, engine->pins[i]);
            engine->pins[i] = engine->pins[--engine->pin_count];
            break;
        }
    }
    pthread_mutex_unlock(&engine->mutex);
    return result;
}

int gt_engine_find_pinned(gt_engine *engine, const void *address, const uint64_t length, uint32_t *region,
    uint64_t *offset)
{
    int found = 0;
    pthread_mutex_lock(&engine->mutex);
    for (uint32_t i = 0; i < engine->pin_count && !found; i++)
    {
        const gt_region *pinned = gt_regions_get(&engine->regions, engine->pins[i]);
        const uint8_t *start = address;
        if (pinned != NULL && start >= pinned->address && length <= pinned->length &&
            (uint64_t)(start - pinned->address) <= pinned->length - length)
        {
            *region = engine->pins[i];
            *offset = (uint64_t)(start - pinned->address);
            found = 1;
        }
    }
    pthread_mutex_unlock(&engine->mutex);
    return found;
}

int gt_engine_connect(gt_engine *engine, const char *host, const uint16_t port, uint32_t *id, gt_error *error)
{
    if (host == NULL || host[0] == '\0' || strlen(host) >= sizeof(((peer *)0)->host) || port == 0)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "malformed endpoint");
    }
    pthread_mutex_lock(&engine->mutex);
    for (uint32_t i = 0; i < engine->peer_count; i++)
    {
        peer *p = engine->peers[i];
        if (p->port == port && strcmp(p->host, host) == 0)
        {
            *id = p->id;
            pthread_mutex_unlock(&engine->mutex);
            return GT_OK;
        }
    }
    pthread_mutex_unlock(&engine->mutex);

    struct addrinfo hints;
    struct addrinfo *found = NULL;
    char port_text[8];
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port_text, sizeof(port_text), "%u", port);
    const int resolved = getaddrinfo(host, port_text, &hints, &found);
    if (resolved != 0 || found == NULL)
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot resolve %s: %s", host, gai_strerror(resolved));
    }
    peer *p = calloc(1, sizeof(peer));
    if (p == NULL)
    {
        freeaddrinfo(found);
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    snprintf(p->host, sizeof(p->host), "%s", host);
    p->port = port;
    p->local_host = -1;
    memcpy(&p->address, found->ai_addr, found->ai_addrlen);
    p->address_length = found->ai_addrlen;
    freeaddrinfo(found);
    p->lanes_count = engine->config.lanes_per_peer;

    pthread_mutex_lock(&engine->mutex);
    for (uint32_t i = 0; i < engine->peer_count; i++)
    {
        peer *other = engine->peers[i];
        if (other->port == port && strcmp(other->host, host) == 0)
        {
            *id = other->id;
            pthread_mutex_unlock(&engine->mutex);
            free(p);
            return GT_OK;
        }
    }
    if (engine->peer_count == MAX_PEERS)
    {
        pthread_mutex_unlock(&engine->mutex);
        free(p);
        return gt_fail(error, GT_UNAVAILABLE, "more than %d peers", MAX_PEERS);
    }
    p->id = engine->peer_count + 1;
    engine->peers[engine->peer_count] = p;
    __atomic_store_n(&engine->peer_count, engine->peer_count + 1, __ATOMIC_RELEASE);
    *id = p->id;
    pthread_mutex_unlock(&engine->mutex);
    return GT_OK;
}

static peer *peer_get(gt_engine *engine, const uint32_t id)
{
    const uint32_t count = __atomic_load_n(&engine->peer_count, __ATOMIC_ACQUIRE);
    return id >= 1 && id <= count ? engine->peers[id - 1] : NULL;
}

void gt_engine_wakeup(gt_engine *engine)
{
    const uint64_t one = 1;
    ssize_t ignored = write(engine->event_fd, &one, sizeof(one));
    (void)ignored;
}

/* Frees t's COMMIT payload unless it lives in t's own allocation. */
static void free_commit(transfer *t)
{
    if (!t->commit_inline)
    {
        free(t->commit);
    }
}

static void free_transfers(transfer *head)
{
    while (head != NULL)
    {
        transfer *next = head->next;
        free_commit(head);
        free(head);
        head = next;
    }
}

int gt_engine_submit(gt_engine *engine, const gt_op *ops, const int count, gt_error *error)
{
    transfer *head = NULL;
    transfer *tail = NULL;
    for (int i = 0; i < count; i++)
    {
        const gt_op *op = &ops[i];
        const int with_commit = op->commit != NULL && op->commit_length > 0;
        /* One allocation for the transfer and its COMMIT payload (a record of ~100 bytes) right behind it. */
        transfer *t = calloc(1, sizeof(transfer) + (with_commit ? op->commit_length : 0));
        if (t == NULL)
        {
            free_transfers(head);
            return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
        }
        t->user_data = op->user_data;
        t->peer = peer_get(engine, op->peer);
        t->op = op->opcode;
        t->own_region = (op->flags & GT_OP_FLAG_RELEASE_REGION) != 0;
        t->want_crc = op->opcode == GT_OP_READ && (op->flags & GT_OP_FLAG_CRC32C) != 0;
        t->region = op->region;
        t->length = op->length;
        t->segment_id = op->segment_id;
        t->remote_offset = op->remote_offset;
        t->status = GT_OK;
        t->has_token = op->has_token;
        if (op->has_token)
        {
            memcpy(t->token, op->token, GT_TOKEN_LENGTH);
        }
        if (with_commit)
        {
            t->commit = (uint8_t *)(t + 1);
            t->commit_inline = 1;
            memcpy(t->commit, op->commit, op->commit_length);
            t->commit_length = op->commit_length;
            t->commit_state = COMMIT_READY;
        }
        else if (op->flags & GT_OP_FLAG_COMMIT_LATER)
        {
            t->commit_state = COMMIT_WAITING;
            t->late_commit = 1;
        }
        /* The grant must hold the range (checked without overflow) and fit the 32-bit grant fields. */
        const int within = op->remote_offset >= op->grant_offset &&
            op->remote_offset - op->grant_offset <= op->grant_length &&
            op->length <= op->grant_length - (op->remote_offset - op->grant_offset);
        if ((op->opcode != GT_OP_READ && op->opcode != GT_OP_WRITE) || t->peer == NULL ||
            (op->opcode == GT_OP_READ && t->commit_state != COMMIT_NONE))
        {
            t->status = GT_INVALID_PARAMS;
        }
        else if (op->has_token && (!within || op->grant_length > 0xFFFFFFFFull || gt_get_u32(op->token) == 0))
        {
            t->status = GT_INVALID_PARAMS;
        }
        else if (op->length == 0 && t->commit_state == COMMIT_NONE)
        {
            t->status = GT_INVALID_PARAMS; /* nothing to move and nothing to commit */
        }
        else if (op->has_token)
        {
            t->grant_delta0 = (uint32_t)(op->remote_offset - op->grant_offset);
            t->grant_length = (uint32_t)op->grant_length;
        }
        t->slices_total = op->length == 0 ? 0 :
            (uint32_t)(((uint64_t)op->length + engine->config.slice_bytes - 1) / engine->config.slice_bytes);
        if (head == NULL)
        {
            head = t;
        }
        else
        {
            tail->next = t;
        }
        tail = t;
    }
    if (head == NULL)
    {
        return 0;
    }
    pthread_mutex_lock(&engine->mutex);
    int i = 0;
    for (transfer *t = head; t != NULL; t = t->next, i++)
    {
        const gt_op *op = &ops[i];
        if (t->length > 0)
        {
            /* Local memory is resolved under the lock that guards the region table; outside it nothing moves. */
            t->local = gt_regions_resolve(&engine->regions, op->region, op->local_offset, op->length);
            if (t->local == NULL && t->status == GT_OK)
            {
                t->status = GT_INVALID_PARAMS;
            }
        }
        if (t->late_commit)
        {
            /* Appended: payloads come in submission order, so the search below finds each near the head. */
            t->commit_link = NULL;
            t->commit_listed = 1;
            *engine->waiting_tail = t;
            engine->waiting_tail = &t->commit_link;
        }
    }
    if (engine->incoming_head == NULL)
    {
        engine->incoming_head = head;
    }
    else
    {
        engine->incoming_tail->next = head;
    }
    engine->incoming_tail = tail;
    /* One eventfd write per sleep of the loop, not per submit: a busy loop finds the work on its next turn. */
    const int wake = engine->sleeping;
    engine->sleeping = 0;
    pthread_mutex_unlock(&engine->mutex);
    if (wake)
    {
        gt_engine_wakeup(engine);
    }
    return count;
}

/* Takes t, which *link points to, off the waiting-commit list; under the mutex. */
static void unlink_waiting(gt_engine *engine, transfer **link, transfer *t)
{
    *link = t->commit_link;
    if (engine->waiting_tail == &t->commit_link)
    {
        engine->waiting_tail = link;
    }
    t->commit_link = NULL;
    t->commit_listed = 0;
}

int gt_engine_provide_commit(gt_engine *engine, const uint64_t user_data, const uint8_t *payload,
    const uint32_t length, gt_error *error)
{
    uint8_t *copy = NULL;
    if (payload != NULL && length > 0)
    {
        copy = malloc(length);
        if (copy == NULL)
        {
            return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
        }
        memcpy(copy, payload, length);
    }
    pthread_mutex_lock(&engine->mutex);
    transfer **link = &engine->waiting_commits;
    while (*link != NULL && (*link)->user_data != user_data)
    {
        link = &(*link)->commit_link;
    }
    transfer *t = *link;
    if (t == NULL)
    {
        pthread_mutex_unlock(&engine->mutex);
        free(copy);
        return gt_fail(error, GT_INVALID_PARAMS, "no WRITE waiting for its COMMIT payload has user data %llu",
            (unsigned long long)user_data);
    }
    unlink_waiting(engine, link, t);
    t->commit = copy;
    t->commit_length = copy == NULL ? 0 : length;
    t->commit_link = engine->provided;
    engine->provided = t;
    const int wake = engine->sleeping;
    engine->sleeping = 0;
    pthread_mutex_unlock(&engine->mutex);
    if (wake)
    {
        gt_engine_wakeup(engine);
    }
    return GT_OK;
}

/* ---------------------------------------------------------------- completion and admission (loop thread) */

static void push_completion(gt_engine *engine, const uint64_t user_data, const int32_t status,
    const int has_crc32c, const uint32_t crc32c)
{
    if (engine->completions_count == engine->completions_capacity)
    {
        const uint32_t capacity = engine->completions_capacity == 0 ? 256 : engine->completions_capacity * 2;
        gt_completion *grown = realloc(engine->completions, capacity * sizeof(gt_completion));
        if (grown == NULL)
        {
            return; /* cannot happen in practice; the caller's close fails what was never completed */
        }
        engine->completions = grown;
        engine->completions_capacity = capacity;
    }
    engine->completions[engine->completions_count].user_data = user_data;
    engine->completions[engine->completions_count].status = status;
    engine->completions[engine->completions_count].crc32c = crc32c;
    engine->completions[engine->completions_count].has_crc32c = has_crc32c;
    engine->completions_count++;
}

static int fits(const gt_engine *engine, const peer *p, const uint32_t frames)
{
    return p->outstanding_frames + frames <= engine->config.max_queued_frames_per_peer || p->outstanding_frames == 0;
}

static void admit_pending(gt_engine *engine, peer *p)
{
    while (p->pending_head != NULL && fits(engine, p, p->pending_head->frames_admitted))
    {
        transfer *t = p->pending_head;
        p->pending_head = t->next;
        if (p->pending_head == NULL)
        {
            p->pending_tail = NULL;
        }
        t->next = NULL;
        p->pending_count--;
        p->outstanding_frames += t->frames_admitted;
        t->admitted = 1;
        __atomic_add_fetch(&engine->admitted, 1, __ATOMIC_RELAXED);
        transfer_progress(engine, t);
    }
}

static void complete(gt_engine *engine, transfer *t)
{
    if (t->late_commit || t->own_region)
    {
        pthread_mutex_lock(&engine->mutex);
        if (t->late_commit)
        {
            /* Still waiting for its payload, or provided and not yet taken by the loop: unlist it either way. */
            transfer **link = t->commit_listed ? &engine->waiting_commits : &engine->provided;
            while (*link != NULL && *link != t)
            {
                link = &(*link)->commit_link;
            }
            if (*link == t && t->commit_listed)
            {
                unlink_waiting(engine, link, t); /* keeps the waiting list's tail right */
            }
            else if (*link == t)
            {
                *link = t->commit_link;
            }
            t->commit_listed = 0;
        }
        if (t->own_region)
        {
            region_release(engine, t->region);
        }
        pthread_mutex_unlock(&engine->mutex);
    }
    /* Every slice joined (none went one-sided): the register of the whole range from the standard initial value. */
    const int has_crc = t->want_crc && t->status == GT_OK && t->crc_slices == t->slices_total;
    push_completion(engine, t->user_data, t->status, has_crc, has_crc ? ~t->crc_joined : 0);
    peer *p = t->peer;
    const int admitted = t->admitted;
    const uint32_t frames = t->frames_admitted;
    free_commit(t);
    free(t);
    if (admitted)
    {
        p->outstanding_frames -= frames;
        admit_pending(engine, p);
    }
}

static void start(gt_engine *engine, transfer *t)
{
    if (t->status != GT_OK)
    {
        complete(engine, t);
        return;
    }
    peer *p = t->peer;
    t->frames_admitted = t->slices_total + (t->commit_state != COMMIT_NONE ? 1 : 0);
    if (p->pending_head == NULL && fits(engine, p, t->frames_admitted))
    {
        p->outstanding_frames += t->frames_admitted;
        t->admitted = 1;
        __atomic_add_fetch(&engine->admitted, 1, __ATOMIC_RELAXED);
        transfer_progress(engine, t);
    }
    else if (p->pending_count < engine->config.max_pending_per_peer)
    {
        t->admission_deadline_ms = gt_now_ms() + engine->config.admission_timeout_ms;
        t->next = NULL;
        if (p->pending_tail == NULL)
        {
            p->pending_head = t;
        }
        else
        {
            p->pending_tail->next = t;
        }
        p->pending_tail = t;
        p->pending_count++;
    }
    else
    {
        t->status = GT_UNAVAILABLE; /* nothing was sent, the buffer was not touched */
        __atomic_add_fetch(&engine->rejected_queue_full, 1, __ATOMIC_RELAXED);
        complete(engine, t);
    }
}

/* ---------------------------------------------------------------- lanes */

static void mark_dirty(gt_engine *engine, lane *l)
{
    l->dirty = 1;
    if (!l->in_dirty_list)
    {
        l->in_dirty_list = 1;
        l->dirty_next = engine->dirty_head;
        engine->dirty_head = l;
    }
}

static void lane_reset_receive(lane *l)
{
    l->staged_start = 0;
    l->staged_end = 0;
    l->header_fill = 0;
    l->receiving = NULL;
    l->receive_at = NULL;
    l->payload_left = 0;
    l->large_payload = 0;
    l->rx_vector = NULL;
    l->rx_status_fill = 0;
    l->rx_entry = 0;
    l->rx_entry_fill = 0;
}

static int lane_open(gt_engine *engine, lane *l)
{
    peer *p = l->peer;
    const int fd = socket(p->address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
    {
        return GT_TRANSFER_FAIL;
    }
    const int one = 1;
    const int buffer = SOCKET_BUFFER_BYTES;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    const int connected = connect(fd, (const struct sockaddr *)&p->address, p->address_length);
    if (connected != 0 && errno != EINPROGRESS)
    {
        close(fd);
        return GT_TRANSFER_FAIL;
    }
    l->fd = fd;
    l->connecting = 1;
    l->want_out = 1;
    l->uid = engine->next_lane_uid++;
    if (engine->next_lane_uid == 0)
    {
        engine->next_lane_uid = 1;
    }
    l->next_seq = 1;
    l->answers = 0;
    l->idle_reuse = 0;
    l->connect_deadline_ms = gt_now_ms() + engine->config.connect_timeout_ms;
    lane_reset_receive(l);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = l };
    if (epoll_ctl(engine->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
    {
        close(fd);
        l->fd = -1;
        l->connecting = 0;
        return GT_TRANSFER_FAIL;
    }
    return GT_OK;
}

static lane *lane_get(gt_engine *engine, peer *p, const uint32_t index)
{
    lane *l = p->lanes[index];
    if (l == NULL)
    {
        l = calloc(1, sizeof(lane));
        if (l == NULL)
        {
            return NULL;
        }
        l->peer = p;
        l->index = (int)index;
        l->fd = -1;
        p->lanes[index] = l;
    }
    (void)engine;
    return l;
}

/* Hands a frame to the lane as it is (a READV's entries are counted by their transfers already). */
static void lane_enqueue(gt_engine *engine, lane *l, frame *f)
{
    if (l->fd >= 0 && !l->connecting && l->frames == 0 && l->answers > 0 && !l->idle_reuse)
    {
        /* An idle connection taken up again: the peer may have dropped it meanwhile (restart, idle close). */
        l->idle_reuse = 1;
        l->answers_at_reuse = l->answers;
    }
    if (l->fd < 0 && l->doomed == 0)
    {
        if (lane_open(engine, l) != GT_OK)
        {
            l->doomed = GT_TRANSFER_FAIL;
        }
    }
    f->seq = l->next_seq++;
    gt_put_u64(f->header + 8, ((uint64_t)l->uid << 32) | (f->seq & 0xFFFFFFFFu));
    f->deadline_ms = gt_now_ms() + engine->config.transfer_timeout_ms;
    f->prev = l->tail;
    f->next = NULL;
    if (l->tail == NULL)
    {
        l->head = f;
    }
    else
    {
        l->tail->next = f;
    }
    l->tail = f;
    if (l->cursor == NULL)
    {
        l->cursor = f;
    }
    l->frames++;
    if (f->transfer != NULL)
    {
        f->transfer->in_lanes++;
    }
    mark_dirty(engine, l);
}

/* Hands a frame to the lane behind the small READs waiting there, so that the wire keeps the order of the calls. */
static void lane_append(gt_engine *engine, lane *l, frame *f)
{
    lane_seal_vector(engine, l);
    lane_seal_writes(engine, l);
    lane_enqueue(engine, l, f);
}

static void frame_free(frame *f)
{
    if (f != NULL)
    {
        free(f->entries);
        free(f->vector_bytes);
        free(f);
    }
}

/*
 * Queues a small frame in p, to leave with the others handed to the lane before its next flush as one vector frame
 * (sealed when the connection can take it: they gather while it connects). table: the bytes it adds to a WRITEV's
 * table.
 */
static void pending_push(gt_engine *engine, lane *l, pending_vector *p, frame *f, const uint64_t table)
{
    f->next = NULL;
    f->prev = NULL;
    if (p->tail == NULL)
    {
        p->head = f;
    }
    else
    {
        p->tail->next = f;
    }
    p->tail = f;
    p->count++;
    p->bytes += f->length;
    p->table += table;
    f->transfer->in_lanes++;
    if (l->fd < 0 && l->doomed == 0 && lane_open(engine, l) != GT_OK)
    {
        l->doomed = GT_TRANSFER_FAIL;
    }
    mark_dirty(engine, l);
}

/*
 * The frames waiting in p (emptied) as the entries of a new vector frame with vector_bytes of memory, their headers
 * copied to its start with request id = their index; NULL when they went on as they are instead (one alone, or out
 * of memory).
 */
static frame *pending_take(gt_engine *engine, lane *l, pending_vector *p, const size_t vector_bytes)
{
    const uint32_t n = p->count;
    frame *head = p->head;
    memset(p, 0, sizeof(*p));
    frame *v = n > 1 ? calloc(1, sizeof(frame)) : NULL;
    if (v != NULL)
    {
        v->entries = malloc((size_t)n * sizeof(frame *));
        v->vector_bytes = malloc(vector_bytes);
    }
    if (v == NULL || v->entries == NULL || v->vector_bytes == NULL)
    {
        frame_free(v);
        while (head != NULL)
        {
            frame *next = head->next;
            head->transfer->in_lanes--; /* lane_enqueue counts it again */
            lane_enqueue(engine, l, head);
            head = next;
        }
        return NULL;
    }
    uint32_t i = 0;
    for (frame *e = head; e != NULL; i++)
    {
        frame *next = e->next;
        v->entries[i] = e;
        gt_put_u64(e->header + 8, i);
        memcpy(v->vector_bytes + (size_t)i * GT_HEADER_LENGTH, e->header, GT_HEADER_LENGTH);
        e->next = NULL;
        e = next;
    }
    v->entry_count = n;
    return v;
}

/* Queues a small READ to leave with the others as one READV (a full vector is sealed first). */
static void lane_add_read(gt_engine *engine, lane *l, frame *f)
{
    if (l->reads.count == engine->config.max_vector_entries || l->reads.bytes + f->length > MAX_VECTOR_BYTES)
    {
        lane_seal_vector(engine, l);
    }
    pending_push(engine, l, &l->reads, f, 0);
}

/*
 * The small READs waiting on the lane become frames: one alone goes as a READ, more as one READV whose payload is
 * their READ request headers (each its own token; request id = its index). Out of memory, they go one by one.
 */
static void lane_seal_vector(gt_engine *engine, lane *l)
{
    const uint32_t n = l->reads.count;
    const uint64_t bytes = l->reads.bytes;
    frame *v = n == 0 ? NULL :
        pending_take(engine, l, &l->reads, (size_t)n * (GT_HEADER_LENGTH + VECTOR_STATUS_LENGTH));
    if (v == NULL)
    {
        return;
    }
    v->opcode = GT_OPC_READV;
    v->statuses = v->vector_bytes + (size_t)n * GT_HEADER_LENGTH;
    v->entry_bytes = bytes;
    v->length = n * GT_HEADER_LENGTH;
    v->payload_out = v->length;
    v->local = v->vector_bytes;
    gt_header header;
    memset(&header, 0, sizeof(header));
    header.opcode = GT_OPC_READV;
    header.length = v->length;
    gt_header_encode(v->header, &header);
    lane_enqueue(engine, l, v);
}

/*
 * Queues a small WRITE_COMMIT to leave with the others as one WRITEV (a full vector is sealed first: maxVectorEntries,
 * MAX_VECTOR_BYTES of values, GT_MAX_WRITEV_TABLE of headers and records).
 */
static void lane_add_write(gt_engine *engine, lane *l, frame *f)
{
    const uint64_t table = GT_HEADER_LENGTH + (uint64_t)f->prefix_length;
    if (l->writes.count == engine->config.max_vector_entries || l->writes.bytes + f->length > MAX_VECTOR_BYTES ||
        l->writes.table + table > GT_MAX_WRITEV_TABLE)
    {
        lane_seal_writes(engine, l);
    }
    pending_push(engine, l, &l->writes, f, table);
}

/*
 * The small WRITE_COMMITs waiting on the lane become frames: one alone goes as it is, more as one WRITEV
 * (docs/protocol.md "WRITEV"): its table holds their headers (each its own token; request id = its index), then their
 * records; its values are sent straight from the callers' memory. Out of memory, they go one by one.
 */
static void lane_seal_writes(gt_engine *engine, lane *l)
{
    const uint32_t n = l->writes.count;
    const uint64_t table = l->writes.table;
    const uint64_t values = l->writes.bytes;
    frame *v = n == 0 ? NULL : pending_take(engine, l, &l->writes, (size_t)table + (size_t)n * VECTOR_STATUS_LENGTH);
    if (v == NULL)
    {
        return;
    }
    size_t record_at = (size_t)n * GT_HEADER_LENGTH;
    for (uint32_t i = 0; i < n; i++)
    {
        memcpy(v->vector_bytes + record_at, v->entries[i]->prefix, v->entries[i]->prefix_length);
        record_at += v->entries[i]->prefix_length;
    }
    v->opcode = GT_OPC_WRITEV;
    v->statuses = v->vector_bytes + table;
    v->entry_bytes = 0; /* the answer carries no bytes of the entries */
    v->prefix = v->vector_bytes;
    v->prefix_length = (uint32_t)table;
    v->payload_out = (uint32_t)values;
    gt_header header;
    memset(&header, 0, sizeof(header));
    header.opcode = GT_OPC_WRITEV;
    header.flags = (uint16_t)n;
    header.offset = table;
    header.length = (uint32_t)(table + values);
    v->length = header.length;
    gt_header_encode(v->header, &header);
    lane_enqueue(engine, l, v);
}

static void lane_unlink(lane *l, frame *f)
{
    if (l->cursor == f)
    {
        l->cursor = f->next;
    }
    if (f->prev != NULL)
    {
        f->prev->next = f->next;
    }
    else
    {
        l->head = f->next;
    }
    if (f->next != NULL)
    {
        f->next->prev = f->prev;
    }
    else
    {
        l->tail = f->prev;
    }
    f->next = NULL;
    f->prev = NULL;
    l->frames--;
}

static void frame_finish(gt_engine *engine, frame *f, const int32_t status)
{
    if (f->opcode == GT_OPC_READV || f->opcode == GT_OPC_WRITEV)
    {
        /* Every entry not answered yet gets the vector's status; then the vector itself goes. */
        for (uint32_t i = 0; i < f->entry_count; i++)
        {
            frame *e = f->entries[i];
            if (e != NULL)
            {
                f->entries[i] = NULL;
                frame_finish(engine, e, status);
            }
        }
        frame_free(f);
        return;
    }
    transfer *t = f->transfer;
    t->in_lanes--;
    if (f->opcode == GT_OPC_COMMIT)
    {
        t->commit_state = COMMIT_DONE;
    }
    else
    {
        if (f->opcode == GT_OPC_WRITE_COMMIT)
        {
            t->commit_state = COMMIT_DONE; /* answered with its WRITE, whatever the status */
        }
        t->slices_done++;
        t->write_lanes ^= (uintptr_t)f->write_lane; /* NULL (0) for a READ */
        if (t->want_crc && status == GT_OK)
        {
            /* This slice's register counts once shifted by the bytes of the range behind it, whatever the order (the
             * last slice, and a READ of one slice, need no shift). */
            const uint64_t end = f->offset - t->remote_offset + f->length;
            t->crc_joined ^= gt_crc32c_shift(f->crc, t->length - end);
            t->crc_slices++;
        }
    }
    if (status != GT_OK && t->status == GT_OK)
    {
        t->status = status;
    }
    free(f);
    transfer_progress(engine, t);
}

static void lane_fail(gt_engine *engine, lane *l, const int status)
{
    lane_seal_vector(engine, l);
    lane_seal_writes(engine, l);
    frame *f = l->head;
    frame *receiving = l->receiving != NULL ? l->receiving : l->rx_vector;
    /*
     * A connection that failed after sitting idle, before it answered anything new, was stale: its frames go out
     * again, once, on a fresh connection (every frame is idempotent: READ, WRITE of the same bytes, COMMIT of the
     * same record). Anything timed out, or a second failure, fails as usual.
     */
    int resend = status == GT_TRANSFER_FAIL && l->idle_reuse && l->answers == l->answers_at_reuse &&
        receiving == NULL && f != NULL;
    for (frame *g = f; resend && g != NULL; g = g->next)
    {
        if (g->timed_out || g->resent)
        {
            resend = 0;
        }
    }
    l->idle_reuse = 0;
    l->head = NULL;
    l->tail = NULL;
    l->cursor = NULL;
    l->frames = 0;
    l->doomed = 0;
    l->dirty = 0;
    if (l->fd >= 0)
    {
        epoll_ctl(engine->epoll_fd, EPOLL_CTL_DEL, l->fd, NULL);
        close(l->fd);
    }
    l->fd = -1;
    l->connecting = 0;
    l->want_out = 0;
    lane_reset_receive(l);
    if (resend)
    {
        while (f != NULL)
        {
            frame *next = f->next;
            f->resent = 1;
            f->sent = 0;
            if (f->transfer != NULL)
            {
                f->transfer->in_lanes--; /* lane_enqueue counts it again */
            }
            lane_enqueue(engine, l, f);
            f = next;
        }
        return;
    }
    if (receiving != NULL)
    {
        frame_finish(engine, receiving, receiving->timed_out ? GT_RPC_TIMEOUT : status);
    }
    while (f != NULL)
    {
        frame *next = f->next;
        frame_finish(engine, f, f->timed_out ? GT_RPC_TIMEOUT : status);
        f = next;
    }
}

static frame *new_frame(transfer *t, const uint8_t opcode, const uint64_t offset, const uint32_t length,
    uint8_t *local, const uint32_t grant_delta)
{
    frame *f = calloc(1, sizeof(frame));
    if (f == NULL)
    {
        return NULL;
    }
    f->transfer = t;
    f->opcode = opcode;
    f->offset = offset;
    f->length = length;
    f->local = local;
    f->payload_out = opcode == GT_OPC_WRITE || opcode == GT_OPC_COMMIT || opcode == GT_OPC_WRITE_COMMIT ? length : 0;
    gt_header header;
    memset(&header, 0, sizeof(header));
    header.opcode = opcode;
    header.segment_id = t->segment_id;
    header.offset = offset;
    header.length = length;
    if (t->has_token)
    {
        header.grant_delta = grant_delta;
        header.grant_length = t->grant_length;
        header.token_expiry = gt_get_u32(t->token);
        memcpy(header.token_mac, t->token + 4, GT_MAC_LENGTH);
    }
    gt_header_encode(f->header, &header);
    return f;
}

/*
 * The lane for a frame of length bytes: round-robin, or the first lane for a short frame (spread_min_bytes) or when
 * first_lane says so.
 */
static lane *next_lane(gt_engine *engine, peer *p, const uint32_t length, const int first_lane)
{
    if (first_lane || length < engine->config.spread_min_bytes)
    {
        return lane_get(engine, p, 0);
    }
    const uint32_t index = p->next_lane++ % p->lanes_count;
    return lane_get(engine, p, index);
}

static int send_commit(gt_engine *engine, transfer *t, lane *l)
{
    frame *f = new_frame(t, GT_OPC_COMMIT, t->remote_offset, t->commit_length, t->commit, t->grant_delta0);
    if (f == NULL || l == NULL)
    {
        free(f);
        return GT_INTERNAL_ERROR;
    }
    t->commit_state = COMMIT_SENT;
    lane_append(engine, l, f);
    return GT_OK;
}

/* Puts the next slices of a transfer on its lanes (within its window), its COMMIT when due, or completes it. */
static int rdma_start_read(gt_engine *engine, transfer *t);
static int local_move(gt_engine *engine, transfer *t);

static void transfer_progress(gt_engine *engine, transfer *t)
{
    if (!t->admitted)
    {
        return;
    }
    if (t->status == GT_OK && t->slices_issued == 0 && t->rdma == NULL && (t->local_moved || local_move(engine, t)))
    {
        /* Its bytes moved by the kernel from one address space to the other: as if every slice had been answered
         * (a WRITE's COMMIT goes over TCP below, so the ledger learns of it as of any write). */
        t->slices_issued = t->slices_total;
        t->slices_done = t->slices_total;
    }
    if (t->status == GT_OK && t->slices_issued == 0 && t->rdma == NULL && rdma_start_read(engine, t))
    {
        return; /* in flight one-sided (or already completed): rdma_finish takes it from here */
    }
    if (t->status == GT_OK)
    {
        const uint32_t slice = engine->config.slice_bytes;
        while (t->slices_issued < t->slices_total && t->in_lanes < engine->window_slices)
        {
            const uint64_t at = (uint64_t)t->slices_issued * slice;
            const uint32_t length = t->length - at < slice ? (uint32_t)(t->length - at) : slice;
            /* A one-frame WRITE whose COMMIT payload is known carries it (WRITE_COMMIT: no COMMIT frame of its own). */
            const int with_commit = t->op != GT_OP_READ && engine->config.write_commits && t->slices_total == 1 &&
                t->commit_state == COMMIT_READY && t->length > 0;
            const uint8_t opcode = t->op == GT_OP_READ ? GT_OPC_READ : with_commit ? GT_OPC_WRITE_COMMIT : GT_OPC_WRITE;
            frame *f = new_frame(t, opcode, t->remote_offset + at, length, t->local + at,
                t->grant_delta0 + (uint32_t)at);
            if (f != NULL && with_commit)
            {
                f->prefix = t->commit;
                f->prefix_length = t->commit_length;
                gt_put_u16(f->header + 6, (uint16_t)t->commit_length); /* flags: the record's length */
                t->commit_state = COMMIT_SENT;
            }
            lane *l = next_lane(engine, t->peer, length, t->first_lane);
            if (f == NULL || l == NULL)
            {
                free(f);
                t->status = GT_INTERNAL_ERROR;
                break;
            }
            t->slices_issued++;
            if (f->opcode == GT_OPC_WRITE || f->opcode == GT_OPC_WRITE_COMMIT)
            {
                f->write_lane = l;
                t->write_lanes ^= (uintptr_t)l;
            }
            if (f->opcode == GT_OPC_READ && engine->config.max_vector_entries > 1 &&
                length <= MAX_VECTOR_ENTRY_BYTES)
            {
                lane_add_read(engine, l, f);
            }
            else if (f->opcode == GT_OPC_WRITE_COMMIT && engine->config.max_vector_entries > 1 &&
                length <= MAX_VECTOR_ENTRY_BYTES)
            {
                lane_add_write(engine, l, f);
            }
            else
            {
                lane_append(engine, l, f);
            }
        }
        if (t->status == GT_OK && t->commit_state == COMMIT_READY && t->slices_issued == t->slices_total)
        {
            if (t->slices_done + 1 == t->slices_total && t->in_lanes == 1)
            {
                /*
                 * Every slice answered and accepted but one, still on the wire (a one-frame WRITE: that frame): right
                 * behind it, on its connection, where the node reads it only after that slice's last byte and the
                 * others were acknowledged before it left. No round trip of its own.
                 */
                if (send_commit(engine, t, (lane *)t->write_lanes) != GT_OK)
                {
                    t->status = GT_INTERNAL_ERROR;
                }
            }
            else if (t->slices_done == t->slices_total)
            {
                /* Every slice done (or none: an empty value), or a payload that came late. */
                if (send_commit(engine, t, next_lane(engine, t->peer, 0, 0)) != GT_OK)
                {
                    t->status = GT_INTERNAL_ERROR;
                }
            }
        }
    }
    if (t->in_lanes > 0)
    {
        return;
    }
    const int finished = t->status != GT_OK ||
        (t->slices_done == t->slices_total && (t->commit_state == COMMIT_NONE || t->commit_state == COMMIT_DONE));
    if (finished)
    {
        complete(engine, t);
    }
}

/* Sends what the lane can take now, straight from the frames' headers and registered memory. */
static void lane_flush(gt_engine *engine, lane *l)
{
    l->dirty = 0;
    if (l->fd < 0 || l->connecting || l->doomed)
    {
        return; /* small READs and WRITE_COMMITs keep gathering until the connection is up */
    }
    lane_seal_vector(engine, l);
    lane_seal_writes(engine, l);
    while (l->cursor != NULL)
    {
        struct iovec iov[MAX_IOV];
        int n = 0;
        uint64_t bytes = 0;
        for (frame *f = l->cursor; f != NULL && n < MAX_IOV - 2 && bytes < MAX_WRITEV_BYTES; f = f->next)
        {
            int whole = 1;
            if (f->sent < GT_HEADER_LENGTH)
            {
                iov[n].iov_base = f->header + f->sent;
                iov[n].iov_len = GT_HEADER_LENGTH - f->sent;
                bytes += iov[n].iov_len;
                n++;
            }
            uint64_t done = f->sent > GT_HEADER_LENGTH ? f->sent - GT_HEADER_LENGTH : 0;
            if (f->prefix_length > done)
            {
                iov[n].iov_base = f->prefix + done;
                iov[n].iov_len = f->prefix_length - done;
                bytes += iov[n].iov_len;
                n++;
            }
            done = done > f->prefix_length ? done - f->prefix_length : 0;
            if (f->opcode == GT_OPC_WRITEV)
            {
                /* the values, each from its caller's memory, as far as the iovec reaches */
                for (uint32_t i = 0; i < f->entry_count; i++)
                {
                    const frame *e = f->entries[i];
                    if (done >= e->length)
                    {
                        done -= e->length;
                        continue;
                    }
                    if (n == MAX_IOV)
                    {
                        whole = 0;
                        break;
                    }
                    iov[n].iov_base = e->local + done;
                    iov[n].iov_len = e->length - done;
                    bytes += iov[n].iov_len;
                    n++;
                    done = 0;
                }
            }
            else if (f->payload_out > done)
            {
                iov[n].iov_base = f->local + done;
                iov[n].iov_len = f->payload_out - done;
                bytes += iov[n].iov_len;
                n++;
            }
            if (!whole)
            {
                break; /* the next frame's bytes must not go before the rest of this one */
            }
        }
        const long written = gt_sendv(l->fd, iov, n);
        if (written < 0)
        {
            l->doomed = GT_TRANSFER_FAIL;
            return;
        }
        if (written == 0)
        {
            break; /* the socket buffer is full: wait until it is writable */
        }
        uint64_t left = (uint64_t)written;
        while (left > 0 && l->cursor != NULL)
        {
            frame *f = l->cursor;
            const uint64_t total = GT_HEADER_LENGTH + (uint64_t)f->prefix_length + f->payload_out;
            const uint64_t take = total - f->sent < left ? total - f->sent : left;
            f->sent += take;
            left -= take;
            if (f->sent == total)
            {
                l->cursor = f->next;
            }
        }
    }
    const int want_out = l->cursor != NULL;
    if (want_out != l->want_out)
    {
        struct epoll_event ev = { .events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = l };
        epoll_ctl(engine->epoll_fd, EPOLL_CTL_MOD, l->fd, &ev);
        l->want_out = want_out;
    }
}

/*
 * A READV answer echoes only its request id: segment and offset 0; a refusal of the whole vector has no payload;
 * an answer with entries announces at least their statuses and at most the statuses and every byte asked for.
 * Anything else cannot be told apart from a stream out of sync: the lane closes.
 */
static void on_vector_response(gt_engine *engine, lane *l, frame *v, const gt_header *h)
{
    const uint64_t status_bytes = (uint64_t)v->entry_count * VECTOR_STATUS_LENGTH;
    const int mismatched = h->opcode != (v->opcode | GT_OPC_RESPONSE_BIT) || h->status > 0 ||
        !gt_status_is_known(h->status) || h->segment_id != 0 || h->offset != 0 ||
        (h->status != 0 && h->length != 0) ||
        (h->status == 0 && (h->length < status_bytes || h->length > status_bytes + v->entry_bytes));
    l->large_payload = 0;
    if (mismatched)
    {
        l->doomed = GT_TRANSFER_FAIL;
        return;
    }
    lane_unlink(l, v);
    if (h->status != 0)
    {
        frame_finish(engine, v, h->status); /* every read of the vector gets the refusal */
        return;
    }
    l->frames++; /* still owned by the lane until its payload is in */
    l->rx_vector = v;
    l->rx_status_fill = 0;
    l->rx_entry = 0;
    l->rx_entry_fill = 0;
    l->payload_left = h->length;
}

static int32_t vector_status(const frame *v, const uint32_t i)
{
    return (int32_t)gt_get_u32(v->statuses + (size_t)i * VECTOR_STATUS_LENGTH);
}

static uint32_t next_open_entry(const frame *v, uint32_t i)
{
    while (i < v->entry_count && v->entries[i] == NULL)
    {
        i++;
    }
    return i;
}

/* The whole answer of the READV being received is in: its entries are all answered. */
static void vector_done(gt_engine *engine, lane *l)
{
    frame *v = l->rx_vector;
    l->rx_vector = NULL;
    l->frames--;
    frame_finish(engine, v, GT_TRANSFER_FAIL); /* no entry is open by now (the byte count was checked) */
}

/*
 * Every status of the READV being received is in. Statuses announcing another byte count than the header fail the
 * vector's reads alone (the rest of the answer is skipped, the stream stays in sync); a status that is no ErrorCode
 * closes the lane; refused entries get their statuses now, the others their bytes as they arrive.
 */
static void on_vector_statuses(gt_engine *engine, lane *l)
{
    frame *v = l->rx_vector;
    uint64_t expected = 0;
    for (uint32_t i = 0; i < v->entry_count; i++)
    {
        if (vector_status(v, i) == 0 && v->opcode == GT_OPC_READV)
        {
            expected += v->entries[i]->length;
        }
    }
    if (expected != l->payload_left)
    {
        l->rx_vector = NULL;
        l->frames--;
        frame_finish(engine, v, GT_TRANSFER_FAIL); /* payload_left bytes are discarded */
        return;
    }
    for (uint32_t i = 0; i < v->entry_count; i++)
    {
        const int32_t status = vector_status(v, i);
        if (status != 0 && (status > 0 || !gt_status_is_known(status)))
        {
            l->doomed = GT_TRANSFER_FAIL;
            return;
        }
    }
    for (uint32_t i = 0; i < v->entry_count; i++)
    {
        const int32_t status = vector_status(v, i);
        if (status != 0 || v->opcode == GT_OPC_WRITEV)
        {
            /* a refused entry, or any of a WRITEV (whose answer carries only the statuses) */
            frame *e = v->entries[i];
            v->entries[i] = NULL;
            frame_finish(engine, e, status);
        }
    }
    l->rx_entry = next_open_entry(v, 0);
    l->rx_entry_fill = 0;
    if (l->payload_left == 0)
    {
        vector_done(engine, l);
    }
}

/* Accounts n bytes of a READV answer that reached their place (status block, or entries in order). */
static void vector_received(gt_engine *engine, lane *l, uint64_t n)
{
    frame *v = l->rx_vector;
    const uint32_t status_bytes = v->entry_count * VECTOR_STATUS_LENGTH;
    l->payload_left -= n;
    if (l->rx_status_fill < status_bytes)
    {
        l->rx_status_fill += (uint32_t)n; /* the status block is received alone */
        if (l->rx_status_fill == status_bytes)
        {
            on_vector_statuses(engine, l);
        }
        return;
    }
    while (n > 0 && l->rx_entry < v->entry_count)
    {
        frame *e = v->entries[l->rx_entry];
        const uint64_t take = e->length - l->rx_entry_fill < n ? e->length - l->rx_entry_fill : n;
        l->rx_entry_fill += (uint32_t)take;
        n -= take;
        if (l->rx_entry_fill == e->length)
        {
            if (e->transfer->want_crc)
            {
                /* at most 64 KiB, just landed; a READ's first slice starts from the initial value (on_response) */
                e->crc = gt_crc32c_update(e->offset == e->transfer->remote_offset ? 0xFFFFFFFFu : 0, e->local,
                    e->length);
            }
            v->entries[l->rx_entry] = NULL;
            l->rx_entry = next_open_entry(v, l->rx_entry + 1);
            l->rx_entry_fill = 0;
            frame_finish(engine, e, GT_OK);
        }
    }
    if (l->payload_left == 0)
    {
        vector_done(engine, l);
    }
}

/* A response header is in l->header: match it to a frame this lane sent and check that it echoes the request. */
static void on_response(gt_engine *engine, lane *l)
{
    gt_header h;
    const int decoded = gt_header_decode(l->header, GT_MAX_FRAME_LENGTH_LIMIT, &h);
    l->header_fill = 0;
    if (decoded != GT_DECODE_OK || !gt_opcode_is_response(h.opcode))
    {
        l->doomed = GT_TRANSFER_FAIL;
        return;
    }
    const uint32_t uid = (uint32_t)(h.request_id >> 32);
    const uint64_t seq = h.request_id & 0xFFFFFFFFu;
    /* the responses with a payload (FrameHeader.carriesPayload); an RDMA_CONNECT_RESPONSE never matches a frame of
     * this engine's lanes, but the answer of a timed-out id is skipped whole whatever it is */
    const int carries = (h.opcode == (GT_OPC_READ | GT_OPC_RESPONSE_BIT) ||
        h.opcode == (GT_OPC_READV | GT_OPC_RESPONSE_BIT) || h.opcode == (GT_OPC_WRITEV | GT_OPC_RESPONSE_BIT) ||
        h.opcode == (GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT)) && h.status == 0;
    frame *f = NULL;
    if (uid == l->uid)
    {
        for (frame *candidate = l->head; candidate != NULL && candidate != l->cursor; candidate = candidate->next)
        {
            if ((candidate->seq & 0xFFFFFFFFu) == seq)
            {
                f = candidate;
                break;
            }
        }
    }
    if (f == NULL)
    {
        if (uid == l->uid && seq >= 1 && seq < (l->next_seq & 0xFFFFFFFFu))
        {
            /* The answer of a request that timed out: drop it, payload included; the lane stays in sync. */
            l->payload_left = carries ? h.length : 0;
            l->receiving = NULL;
            l->large_payload = h.length >= LARGE_PAYLOAD_BYTES;
            return;
        }
        l->doomed = GT_TRANSFER_FAIL; /* an id this lane never sent */
        return;
    }
    l->answers++;
    if (f->opcode == GT_OPC_READV || f->opcode == GT_OPC_WRITEV)
    {
        on_vector_response(engine, l, f, &h);
        return;
    }
    const int mismatched = h.opcode != (f->opcode | GT_OPC_RESPONSE_BIT) || h.status > 0 ||
        !gt_status_is_known(h.status) || h.segment_id != f->transfer->segment_id || h.offset != f->offset ||
        h.length != f->length;
    if (mismatched)
    {
        l->doomed = GT_TRANSFER_FAIL;
        return;
    }
    if (carries)
    {
        lane_unlink(l, f);
        l->frames++; /* still owned by the lane until its payload is in */
        l->receiving = f;
        l->receive_at = f->local;
        /* Counted afresh (a frame sent again after a stale connection failed is received whole again); the first slice
         * starts from the standard initial value, the others from 0, so that joining them needs no shift of it. */
        f->crc = f->offset == f->transfer->remote_offset ? 0xFFFFFFFFu : 0;
        f->crc_done = 0;
        l->payload_left = h.length;
        l->large_payload = h.length >= LARGE_PAYLOAD_BYTES;
        if (h.length == 0)
        {
            l->frames--;
            l->receiving = NULL;
            frame_finish(engine, f, GT_OK);
        }
        return;
    }
    l->large_payload = 0;
    lane_unlink(l, f);
    frame_finish(engine, f, h.status);
}

static void payload_done(gt_engine *engine, lane *l)
{
    frame *f = l->receiving;
    l->receiving = NULL;
    l->receive_at = NULL;
    if (f != NULL)
    {
        l->frames--;
        frame_finish(engine, f, GT_OK);
    }
}

/* Where the next payload bytes of the current response go, and at most how many. */
static uint8_t *receive_target(gt_engine *engine, lane *l, uint64_t *cap)
{
    if (l->receiving != NULL)
    {
        *cap = l->payload_left;
        return l->receive_at;
    }
    frame *v = l->rx_vector;
    if (v != NULL)
    {
        const uint32_t status_bytes = v->entry_count * VECTOR_STATUS_LENGTH;
        if (l->rx_status_fill < status_bytes)
        {
            *cap = status_bytes - l->rx_status_fill;
            return v->statuses + l->rx_status_fill;
        }
        frame *e = v->entries[l->rx_entry];
        *cap = e->length - l->rx_entry_fill;
        return e->local + l->rx_entry_fill;
    }
    *cap = l->payload_left < STAGING_BYTES ? l->payload_left : STAGING_BYTES;
    return engine->discard;
}

/*
 * Folds the bytes of a READ payload received so far (`received` of them) into its CRC32C register while they are still
 * in the caches: in runs of whole CRC_RUN_BYTES once at least CRC_LAG_BYTES wait (a socket read may bring a few KiB,
 * and the twelve-chain update is fast only on runs of its full width), and everything at the end of the payload.
 */
static void checksum_received(frame *f, const uint32_t received, const int last)
{
    uint32_t take = received - f->crc_done;
    if (!last)
    {
        if (take < CRC_LAG_BYTES)
        {
            return;
        }
        take -= take % CRC_RUN_BYTES;
    }
    f->crc = gt_crc32c_update(f->crc, f->local + f->crc_done, take);
    f->crc_done += take;
}

/* Accounts n payload bytes of the current response that reached the place receive_target named. */
static void payload_received(gt_engine *engine, lane *l, const uint64_t n)
{
    if (l->rx_vector != NULL)
    {
        vector_received(engine, l, n);
        return;
    }
    frame *f = l->receiving;
    if (f != NULL)
    {
        l->receive_at += n;
        if (f->transfer->want_crc)
        {
            checksum_received(f, (uint32_t)(l->receive_at - f->local), l->payload_left == n);
        }
    }
    l->payload_left -= n;
    if (l->payload_left == 0)
    {
        payload_done(engine, l);
    }
}

/*
 * One scattering read of a READV answer's entries straight into their memory; when the read can take the whole rest
 * of the answer, the staging buffer is its last piece, for the headers behind it. Returns what recv would.
 */
static ssize_t receive_entries(gt_engine *engine, lane *l)
{
    frame *v = l->rx_vector;
    struct iovec iov[MAX_IOV];
    int n = 0;
    uint64_t covered = 0;
    for (uint32_t i = l->rx_entry; i < v->entry_count && n < MAX_IOV - 1; i = next_open_entry(v, i + 1))
    {
        frame *e = v->entries[i];
        const uint32_t skip = i == l->rx_entry ? l->rx_entry_fill : 0;
        iov[n].iov_base = e->local + skip;
        iov[n].iov_len = e->length - skip;
        covered += iov[n].iov_len;
        n++;
    }
    const int tail = covered >= l->payload_left;
    if (tail)
    {
        l->staged_start = 0;
        l->staged_end = 0;
        iov[n].iov_base = l->staging;
        iov[n].iov_len = STAGING_BYTES;
        n++;
    }
    const ssize_t got = readv(l->fd, iov, n);
    if (got <= 0)
    {
        return got;
    }
    const uint64_t into_entries = (uint64_t)got < covered ? (uint64_t)got : covered;
    if (tail)
    {
        l->staged_end = (uint32_t)((uint64_t)got - into_entries);
    }
    payload_received(engine, l, into_entries);
    return got;
}

/*
 * Reads what the socket has: headers (and READV statuses) through a small staging buffer, READ payloads and READV
 * entries straight into their memory.
 */
static void lane_read(gt_engine *engine, lane *l)
{
    /* Staged bytes are always consumed (no event would come for them); only socket reads are bounded. */
    int reads = 0;
    while (l->fd >= 0 && !l->doomed && (reads < 64 || l->staged_end > l->staged_start))
    {
        if (l->payload_left > 0)
        {
            const uint32_t staged = l->staged_end - l->staged_start;
            if (staged > 0)
            {
                uint64_t cap;
                uint8_t *into = receive_target(engine, l, &cap);
                const uint32_t take = cap < staged ? (uint32_t)cap : staged;
                if (into != engine->discard)
                {
                    memcpy(into, l->staging + l->staged_start, take);
                }
                l->staged_start += take;
                payload_received(engine, l, take);
                continue;
            }
            reads++;
            ssize_t got;
            frame *v = l->rx_vector;
            if (v != NULL && l->rx_status_fill < v->entry_count * VECTOR_STATUS_LENGTH)
            {
                /* the status block through staging, with whatever follows it */
                l->staged_start = 0;
                l->staged_end = 0;
                got = recv(l->fd, l->staging, STAGING_BYTES, MSG_DONTWAIT);
                if (got > 0)
                {
                    l->staged_end = (uint32_t)got;
                    continue;
                }
            }
            else if (v != NULL)
            {
                got = receive_entries(engine, l);
                if (got > 0)
                {
                    continue;
                }
            }
            else
            {
                uint64_t cap;
                uint8_t *into = receive_target(engine, l, &cap);
                got = recv(l->fd, into, cap, MSG_DONTWAIT);
                if (got > 0)
                {
                    payload_received(engine, l, (uint64_t)got);
                    continue;
                }
            }
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            {
                return;
            }
            l->doomed = GT_TRANSFER_FAIL;
            return;
        }
        const uint32_t staged = l->staged_end - l->staged_start;
        if (staged > 0)
        {
            const uint32_t need = GT_HEADER_LENGTH - l->header_fill;
            const uint32_t take = need < staged ? need : staged;
            memcpy(l->header + l->header_fill, l->staging + l->staged_start, take);
            l->header_fill += take;
            l->staged_start += take;
            if (l->header_fill == GT_HEADER_LENGTH)
            {
                on_response(engine, l);
            }
            continue;
        }
        ssize_t got;
        reads++;
        if (l->large_payload)
        {
            /* After a big payload the next is likely big too: read its header alone, then the payload in place. */
            got = recv(l->fd, l->header + l->header_fill, GT_HEADER_LENGTH - l->header_fill, MSG_DONTWAIT);
            if (got > 0)
            {
                l->header_fill += (uint32_t)got;
                if (l->header_fill == GT_HEADER_LENGTH)
                {
                    on_response(engine, l);
                }
                continue;
            }
        }
        else
        {
            l->staged_start = 0;
            l->staged_end = 0;
            got = recv(l->fd, l->staging, STAGING_BYTES, MSG_DONTWAIT);
            if (got > 0)
            {
                l->staged_end = (uint32_t)got;
                continue;
            }
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        {
            return;
        }
        l->doomed = GT_TRANSFER_FAIL; /* closed by the peer or broken */
        return;
    }
}

static void on_connected(gt_engine *engine, lane *l)
{
    int error = 0;
    socklen_t length = sizeof(error);
    if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0)
    {
        l->doomed = GT_TRANSFER_FAIL;
        return;
    }
    l->connecting = 0;
    mark_dirty(engine, l);
}

/* ---------------------------------------------------------------- the loop */

static void local_batch(gt_engine *engine, transfer *incoming);

static void drain_incoming(gt_engine *engine)
{
    pthread_mutex_lock(&engine->mutex);
    transfer *incoming = engine->incoming_head;
    transfer *provided = engine->provided;
    engine->incoming_head = NULL;
    engine->incoming_tail = NULL;
    engine->provided = NULL;
    pthread_mutex_unlock(&engine->mutex);
    local_batch(engine, incoming); /* small same-host READs move before anything else starts */
    /*
     * With spread_min_bytes (a calling thread's engine: the transfers of one call arrive together), a call that reads
     * several values bigger than that keeps all their slices on the first connection, one node loop streaming them
     * back to back; spreading them made 1 MiB batch-8 gets slower on two cores (docs/benchmarks.md, seventeenth
     * session). A lone big value's slices still spread.
     */
    uint32_t big_reads = 0;
    for (transfer *t = incoming; t != NULL && engine->config.spread_min_bytes > 0; t = t->next)
    {
        big_reads += t->op == GT_OP_READ && t->length > engine->config.spread_min_bytes ? 1u : 0u;
    }
    while (incoming != NULL)
    {
        transfer *next = incoming->next;
        incoming->next = NULL;
        incoming->first_lane = big_reads > 1 && incoming->op == GT_OP_READ;
        start(engine, incoming);
        incoming = next;
    }
    while (provided != NULL)
    {
        transfer *next = provided->commit_link;
        provided->commit_link = NULL;
        /* No payload: the record could not be made; no COMMIT, and the transfer fails. */
        provided->commit_state = provided->commit != NULL ? COMMIT_READY : COMMIT_NONE;
        if (provided->commit == NULL && provided->status == GT_OK)
        {
            provided->status = GT_INTERNAL_ERROR;
        }
        provided->late_commit = 0;
        transfer_progress(engine, provided);
        provided = next;
    }
}

static void for_each_lane_doomed(gt_engine *engine)
{
    lane *l = engine->dirty_head;
    engine->dirty_head = NULL;
    while (l != NULL)
    {
        lane *next = l->dirty_next;
        l->in_dirty_list = 0;
        l->dirty_next = NULL;
        if (l->doomed)
        {
            lane_fail(engine, l, l->doomed);
        }
        else if (l->dirty)
        {
            lane_flush(engine, l);
            if (l->doomed)
            {
                lane_fail(engine, l, l->doomed);
            }
        }
        l = next;
        if (l == NULL && engine->dirty_head != NULL)
        {
            /* failing or flushing queued more work (next slices, fresh lanes): go round again */
            l = engine->dirty_head;
            engine->dirty_head = NULL;
        }
    }
}

/* ---------------------------------------------------------------- RDMA reads (loop thread) */

/*
 * A READ without a token may go one-sided: the first one to a (peer, segment) opens the device, connects a control
 * connection to the peer, runs the RDMA_CONNECT exchange on it (docs/protocol.md, "RDMA: queue-pair information")
 * and brings this side's queue pair up; that blocks the loop for one round trip per segment. Later READs register
 * their local region on first use, are planned into WRs of at most a slice and posted; the CQs are polled by
 * gt_engine_poll. Whatever cannot go one-sided (no device, the node refused, a range outside the segment the node
 * announced, the path's queue full, a region that cannot be registered) goes over TCP as usual. A failed completion
 * or a timeout tears the path down first (destroying the QP guarantees no more bytes land in caller memory), then
 * fails every READ in flight on it; the segment then takes TCP for RDMA_RETRY_MS.
 */

static void rdma_path_close(rdma_path *path)
{
    gt_rdma_link_close(path->link);
    path->link = NULL;
    if (path->fd >= 0)
    {
        close(path->fd);
    }
    path->fd = -1;
    path->ready = 0;
}

/* Completes the READ in slot of path with status (it no longer uses the path). */
static void rdma_finish(gt_engine *engine, rdma_path *path, const uint32_t slot, const int32_t status)
{
    transfer *t = path->inflight[slot];
    path->inflight[slot] = NULL;
    path->inflight_count--;
    path->wrs_outstanding -= t->rdma_wrs;
    engine->rdma_inflight--;
    t->rdma = NULL;
    t->in_lanes = 0;
    t->slices_done = t->slices_total;
    if (t->status == GT_OK)
    {
        t->status = status;
    }
    __atomic_add_fetch(t->status == GT_OK ? &engine->rdma_reads_done : &engine->rdma_reads_failed, 1,
        __ATOMIC_RELAXED);
    transfer_progress(engine, t);
}

/* Tears the path down, then fails what was in flight on it: the READs already given a status keep it. */
static void rdma_path_break(gt_engine *engine, rdma_path *path, const int32_t status)
{
    rdma_path_close(path);
    path->retry_at_ms = gt_now_ms() + RDMA_RETRY_MS;
    path->wrs_outstanding = 0;
    for (uint32_t slot = 0; slot < RDMA_MAX_INFLIGHT; slot++)
    {
        if (path->inflight[slot] != NULL)
        {
            path->inflight[slot]->rdma_wrs = 0;
            rdma_finish(engine, path, slot, status);
        }
    }
}

/* A blocking connection to the peer for an exchange, with ms as the timeout of every call on it; -1 on failure. */
static int control_connect(const peer *p, const uint64_t ms)
{
    const int fd = socket(p->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
    {
        return -1;
    }
    struct timeval timeout = { .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)&p->address, p->address_length) != 0)
    {
        close(fd);
        return -1;
    }
    return fd;
}

/* The ready path to (p, segment_id), brought up now if need be; NULL when the READ must take TCP. */
static rdma_path *rdma_path_get(gt_engine *engine, peer *p, const uint32_t segment_id)
{
    rdma_path *path = NULL;
    for (uint32_t i = 0; i < p->rdma_path_count; i++)
    {
        if (p->rdma_paths[i]->segment_id == segment_id)
        {
            path = p->rdma_paths[i];
            break;
        }
    }
    const uint64_t now = gt_now_ms();
    if (path != NULL && (path->ready || now < path->retry_at_ms))
    {
        return path->ready ? path : NULL;
    }
    if (path != NULL && path->inflight_count > 0)
    {
        return NULL; /* broken paths hold nothing; cannot happen */
    }
    gt_error error;
    if (engine->rdma_device == NULL)
    {
        if (engine->rdma_device_failed || gt_rdma_device_open(&engine->rdma_device, &error) != GT_OK)
        {
            engine->rdma_device_failed = 1; /* no device now means none later: TCP for good */
            return NULL;
        }
    }
    if (path == NULL)
    {
        if (p->rdma_path_count == RDMA_MAX_PATHS || (path = calloc(1, sizeof(rdma_path))) == NULL)
        {
            return NULL;
        }
        path->segment_id = segment_id;
        path->fd = -1;
        p->rdma_paths[p->rdma_path_count++] = path;
    }
    path->retry_at_ms = now + RDMA_RETRY_MS; /* unless it comes up below */
    gt_qp_info local;
    path->fd = control_connect(p, engine->config.connect_timeout_ms);
    if (path->fd < 0 || gt_rdma_link_open(engine->rdma_device, RDMA_QUEUE_DEPTH, &path->link, &local, &error) != GT_OK ||
        gt_rdma_exchange(path->fd, ++engine->rdma_request_id, segment_id, &local, &path->remote, &error) != GT_OK ||
        gt_rdma_link_connect(path->link, &path->remote, &error) != GT_OK)
    {
        rdma_path_close(path);
        return NULL;
    }
    path->ready = 1;
    return path;
}

/* The lkey of the transfer's region, registering the region on first use; 0 when it cannot be registered. */
static int rdma_local_key(gt_engine *engine, const transfer *t, uint32_t *lkey)
{
    gt_error error;
    pthread_mutex_lock(&engine->mutex);
    gt_region *region = gt_regions_get(&engine->regions, t->region);
    if (region != NULL && region->transport == NULL)
    {
        uint32_t rkey = 0;
        region->transport = gt_rdma_register(engine->rdma_device, region->address, region->length,
            &region->transport_key, &rkey, &error);
    }
    const int registered = region != NULL && region->transport != NULL;
    if (registered)
    {
        *lkey = region->transport_key;
    }
    pthread_mutex_unlock(&engine->mutex);
    return registered;
}

/* 1 when the transfer is now RDMA's (in flight, or already failed and completed), 0 when it takes TCP. */
static int rdma_start_read(gt_engine *engine, transfer *t)
{
    if (!engine->config.rdma_reads || t->op != GT_OP_READ || t->has_token || t->length == 0 ||
        engine->rdma_device_failed)
    {
        return 0;
    }
    rdma_path *path = rdma_path_get(engine, t->peer, t->segment_id);
    if (path == NULL || path->inflight_count == RDMA_MAX_INFLIGHT ||
        t->slices_total > RDMA_QUEUE_DEPTH - path->wrs_outstanding ||
        t->remote_offset > path->remote.segment_length || t->length > path->remote.segment_length - t->remote_offset)
    {
        return 0; /* over TCP the node says what is wrong with the range */
    }
    uint32_t lkey = 0;
    if (!rdma_local_key(engine, t, &lkey))
    {
        return 0;
    }
    gt_rdma_wr *wrs = malloc((size_t)t->slices_total * sizeof(gt_rdma_wr));
    if (wrs == NULL)
    {
        return 0;
    }
    const gt_rdma_op op = { .opcode = GT_OP_READ, .local_address = (uint64_t)(uintptr_t)t->local, .lkey = lkey,
        .remote_address = path->remote.segment_address + t->remote_offset, .rkey = path->remote.rkey,
        .length = t->length };
    const int n = gt_rdma_plan(&op, 1, engine->config.slice_bytes, RDMA_CHAIN_LENGTH, wrs, t->slices_total);
    uint32_t slot = 0;
    while (slot < RDMA_MAX_INFLIGHT && path->inflight[slot] != NULL)
    {
        slot++;
    }
    if (n <= 0 || slot == RDMA_MAX_INFLIGHT)
    {
        free(wrs);
        return 0;
    }
    for (int i = 0; i < n; i++)
    {
        wrs[i].wr_id = ((uint64_t)slot << 32) | (uint32_t)i;
    }
    t->rdma = path;
    t->rdma_slot = slot;
    t->rdma_wrs = (uint32_t)n;
    t->rdma_deadline_ms = gt_now_ms() + engine->config.transfer_timeout_ms;
    t->slices_issued = t->slices_total;
    t->in_lanes = 1;
    path->inflight[slot] = t;
    path->inflight_count++;
    path->wrs_outstanding += (uint32_t)n;
    engine->rdma_inflight++;
    gt_error error;
    const int posted = gt_rdma_post(path->link, wrs, (uint32_t)n, &error);
    free(wrs);
    if (posted != GT_OK)
    {
        rdma_path_break(engine, path, GT_TRANSFER_FAIL); /* some chains may be on the wire: the QP goes first */
    }
    return 1;
}

/* Completions of every path with READs in flight: a READ is done when its last WR completed (RC completes in order). */
static void rdma_poll_paths(gt_engine *engine)
{
    if (engine->rdma_inflight == 0)
    {
        return;
    }
    const uint32_t count = __atomic_load_n(&engine->peer_count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count; i++)
    {
        peer *p = engine->peers[i];
        for (uint32_t j = 0; j < p->rdma_path_count; j++)
        {
            rdma_path *path = p->rdma_paths[j];
            while (path->ready && path->inflight_count > 0)
            {
                uint64_t ids[32];
                int32_t statuses[32];
                const int n = gt_rdma_poll(path->link, ids, statuses, 32);
                if (n < 0)
                {
                    rdma_path_break(engine, path, GT_TRANSFER_FAIL);
                    break;
                }
                if (n == 0)
                {
                    break;
                }
                for (int k = 0; k < n && path->ready; k++)
                {
                    const uint32_t slot = (uint32_t)(ids[k] >> 32);
                    transfer *t = slot < RDMA_MAX_INFLIGHT ? path->inflight[slot] : NULL;
                    if (t == NULL)
                    {
                        continue;
                    }
                    if (statuses[k] != GT_OK)
                    {
                        t->status = statuses[k];
                        rdma_path_break(engine, path, GT_TRANSFER_FAIL);
                    }
                    else if ((uint32_t)ids[k] == t->rdma_wrs - 1)
                    {
                        rdma_finish(engine, path, slot, GT_OK);
                    }
                }
            }
        }
    }
}

/* READs past their deadline time out; their path goes down with them (nothing else stops the device writing). */
static void rdma_check_timeouts(gt_engine *engine, const uint64_t now, uint64_t *next_deadline)
{
    if (engine->rdma_inflight == 0)
    {
        return;
    }
    const uint32_t count = __atomic_load_n(&engine->peer_count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count; i++)
    {
        peer *p = engine->peers[i];
        for (uint32_t j = 0; j < p->rdma_path_count; j++)
        {
            rdma_path *path = p->rdma_paths[j];
            int overdue = 0;
            for (uint32_t slot = 0; slot < RDMA_MAX_INFLIGHT; slot++)
            {
                transfer *t = path->inflight[slot];
                if (t != NULL && t->rdma_deadline_ms <= now)
                {
                    t->status = GT_RPC_TIMEOUT;
                    overdue = 1;
                }
                else if (t != NULL && t->rdma_deadline_ms < *next_deadline)
                {
                    *next_deadline = t->rdma_deadline_ms;
                }
            }
            if (overdue)
            {
                rdma_path_break(engine, path, GT_TRANSFER_FAIL);
            }
        }
    }
}

/* ---------------------------------------------------------------- same-host transfers */

/* 1 when address is a loopback address or one of this host's interface addresses. */
static int address_is_local(const struct sockaddr_storage *address)
{
    const struct sockaddr *wanted = (const struct sockaddr *)address;
    struct ifaddrs *all = NULL;
    if (gt_address_is_loopback(wanted) || getifaddrs(&all) != 0)
    {
        return gt_address_is_loopback(wanted);
    }
    int found = 0;
    for (const struct ifaddrs *i = all; i != NULL && !found; i = i->ifa_next)
    {
        found = i->ifa_addr != NULL && gt_address_same_ip(i->ifa_addr, wanted);
    }
    freeifaddrs(all);
    return found;
}

/* The ready local path to (p, segment_id), brought up now if need be (one blocking exchange); NULL: take TCP. */
static local_path *local_path_get(gt_engine *engine, peer *p, const uint32_t segment_id)
{
    if (p->local_host < 0)
    {
        p->local_host = address_is_local(&p->address);
    }
    if (!p->local_host)
    {
        return NULL;
    }
    local_path *path = NULL;
    for (uint32_t i = 0; i < p->local_path_count && path == NULL; i++)
    {
        if (p->local_paths[i]->segment_id == segment_id)
        {
            path = p->local_paths[i];
        }
    }
    if (path == NULL)
    {
        if (p->local_path_count == LOCAL_MAX_PATHS)
        {
            /* Segment ids change when a node registers again: reuse the slot that failed longest ago. */
            path = p->local_paths[0];
            for (uint32_t i = 1; i < p->local_path_count; i++)
            {
                if (!p->local_paths[i]->ready && (path->ready || p->local_paths[i]->retry_at_ms < path->retry_at_ms))
                {
                    path = p->local_paths[i];
                }
            }
            if (path->ready)
            {
                return NULL;
            }
        }
        else if ((path = calloc(1, sizeof(local_path))) == NULL)
        {
            return NULL;
        }
        else
        {
            p->local_paths[p->local_path_count++] = path;
        }
        memset(path, 0, sizeof(*path));
        path->segment_id = segment_id;
    }
    if (path->ready)
    {
        return path;
    }
    const uint64_t now = gt_now_ms();
    if (now < path->retry_at_ms)
    {
        return NULL;
    }
    gt_error error;
    /* a node that accepts and never answers costs the caller this wait, then TCP for LOCAL_RETRY_MS */
    const uint64_t wait_ms = engine->config.connect_timeout_ms < LOCAL_EXCHANGE_MS ?
        engine->config.connect_timeout_ms : LOCAL_EXCHANGE_MS;
    const int fd = control_connect(p, wait_ms);
    if (fd < 0 || gt_local_exchange(fd, ++engine->rdma_request_id, segment_id, &path->info, &error) != GT_OK ||
        gt_local_verify(&path->info, &error) != GT_OK)
    {
        path->retry_at_ms = now + LOCAL_RETRY_MS;
    }
    else
    {
        path->ready = 1;
    }
    if (fd >= 0)
    {
        close(fd);
    }
    return path->ready ? path : NULL;
}

/* 1 when a token the transfer carries lets it through as the node would at now_ms (range inside the grant, not
 * expired). */
static int local_token_ok(const transfer *t, const uint64_t now_ms)
{
    return !t->has_token || ((uint64_t)t->grant_delta0 + t->length <= t->grant_length &&
        now_ms < (uint64_t)gt_get_u32(t->token) * 1000u);
}

/* The ready local path for t's segment whose generation still holds, or NULL (count transfers fell back then). */
static local_path *local_path_checked(gt_engine *engine, transfer *t, const uint32_t count)
{
    local_path *path = local_path_get(engine, t->peer, t->segment_id);
    if (path == NULL)
    {
        if (t->peer->local_host == 1)
        {
            __atomic_add_fetch(&engine->local_fallbacks, count, __ATOMIC_RELAXED); /* on this host, yet over TCP */
        }
        return NULL;
    }
    uint64_t generation = 0;
    if (!gt_local_generation(&path->info, &generation) || generation != path->info.generation)
    {
        path->ready = 0; /* the node's table changed (or it is gone): ask again before the next copy */
        path->retry_at_ms = 0;
        __atomic_add_fetch(&engine->local_fallbacks, count, __ATOMIC_RELAXED);
        return NULL;
    }
    return path;
}

/* After a failed copy over path: count transfers take TCP, and after a refusal the segment does for a while. */
static void local_failed(gt_engine *engine, local_path *path, const int status, const uint32_t count)
{
    if (status == GT_TRANSFER_FAIL)
    {
        path->ready = 0;
        path->retry_at_ms = gt_now_ms() + LOCAL_RETRY_MS;
    }
    __atomic_add_fetch(&engine->local_fallbacks, count, __ATOMIC_RELAXED);
}

/*
 * Moves a transfer's bytes with process_vm_readv/writev when its peer is on this host and agreed (LOCAL_CONNECT):
 * 1 when every byte moved (a READ's CRC32C folded in if it wants one), 0 when it must take TCP (not eligible, no
 * path, the node's table changed, a refused or short copy: TCP then moves the whole range again). The checks the node
 * makes on a token it can make here too, with the node's own clock: the range inside the grant, the expiry; only the
 * MAC is left out, which guards against a forger, and a process that can write the node's memory needs none.
 */
static int local_move(gt_engine *engine, transfer *t)
{
    if (!engine->config.local_transfers || t->length < engine->config.local_min_bytes || t->length == 0 ||
        (t->op != GT_OP_READ && t->op != GT_OP_WRITE))
    {
        return 0;
    }
    if (!local_token_ok(t, gt_epoch_ms()))
    {
        return 0; /* the node refuses it over TCP, with its own status */
    }
    local_path *path = local_path_checked(engine, t, 1);
    if (path == NULL)
    {
        return 0;
    }
    int status = GT_OK;
    if (t->op == GT_OP_READ && t->want_crc)
    {
        uint32_t crc = 0xFFFFFFFFu;
        for (uint64_t at = 0; at < t->length && status == GT_OK; at += LOCAL_CRC_CHUNK)
        {
            const uint64_t chunk = t->length - at < LOCAL_CRC_CHUNK ? t->length - at : LOCAL_CRC_CHUNK;
            status = gt_local_copy(&path->info, 0, t->remote_offset + at, t->local + at, chunk);
            crc = status == GT_OK ? gt_crc32c_update(crc, t->local + at, chunk) : crc;
        }
        t->crc_joined = crc;
        t->crc_slices = t->slices_total;
    }
    else
    {
        status = gt_local_copy(&path->info, t->op == GT_OP_WRITE, t->remote_offset, t->local, t->length);
    }
    if (status != GT_OK)
    {
        t->crc_joined = 0;
        t->crc_slices = 0;
        local_failed(engine, path, status, 1);
        return 0;
    }
    __atomic_add_fetch(t->op == GT_OP_READ ? &engine->local_reads : &engine->local_writes, 1, __ATOMIC_RELAXED);
    return 1;
}

/*
 * A transfer local_batch may move: a READ below local_min_bytes (bigger ones go alone, local_move), to a peer that
 * may be on this host, with a token the node would take. WRITEs below local_min_bytes keep to TCP: each needs its
 * COMMIT frame anyway, and moving their bytes here only shifted the node's receive onto the caller's core, costing
 * the caller more than it saved the node (4 KiB x 128 puts between processes, docs/benchmarks.md, twenty-third
 * session).
 */
static int local_small(const gt_engine *engine, const transfer *t, const uint64_t now_ms)
{
    return t->status == GT_OK && t->op == GT_OP_READ && t->length > 0 &&
        t->length < engine->config.local_min_bytes && t->peer != NULL && t->peer->local_host != 0 &&
        local_token_ok(t, now_ms);
}

/*
 * The small READs of one submission (a batch call's values, or a lone one) that go to one segment of a peer on this
 * host move with one process_vm_readv (per GT_LOCAL_IOV_MAX ranges) instead of a frame each: one kernel copy, no
 * round trip and no work at all for the node. Each CRC32C is folded in after the copy, while its bytes are cached.
 * Whatever cannot go this way (no path, a changed table, a failed copy) takes TCP as it would have.
 */
static void local_batch(gt_engine *engine, transfer *incoming)
{
    if (!engine->config.local_transfers)
    {
        return;
    }
    const uint64_t now_ms = gt_epoch_ms();
    for (transfer *first = incoming; first != NULL; first = first->next)
    {
        if (first->local_seen || !local_small(engine, first, now_ms))
        {
            continue;
        }
        uint32_t count = 0;
        for (transfer *t = first; t != NULL && count < LOCAL_GROUP_MAX; t = t->next)
        {
            if (t == first || (!t->local_seen && t->peer == first->peer && t->segment_id == first->segment_id &&
                local_small(engine, t, now_ms)))
            {
                t->local_seen = 1;
                engine->local_group[count] = t;
                engine->local_ranges[count] = (gt_local_range){ t->remote_offset, t->local, t->length };
                count++;
            }
        }
        local_path *path = local_path_checked(engine, first, count);
        if (path == NULL)
        {
            continue;
        }
        const int status = gt_local_read_ranges(&path->info, engine->local_ranges, count);
        if (status != GT_OK)
        {
            local_failed(engine, path, status, count);
            continue;
        }
        for (uint32_t i = 0; i < count; i++)
        {
            transfer *t = engine->local_group[i];
            t->local_moved = 1;
            if (t->want_crc)
            {
                t->crc_joined = gt_crc32c_update(0xFFFFFFFFu, t->local, t->length);
                t->crc_slices = t->slices_total;
            }
        }
        __atomic_add_fetch(&engine->local_reads, count, __ATOMIC_RELAXED);
    }
}

void gt_engine_local_counters(gt_engine *engine, uint64_t *reads, uint64_t *writes, uint64_t *fallbacks)
{
    *reads = __atomic_load_n(&engine->local_reads, __ATOMIC_RELAXED);
    *writes = __atomic_load_n(&engine->local_writes, __ATOMIC_RELAXED);
    *fallbacks = __atomic_load_n(&engine->local_fallbacks, __ATOMIC_RELAXED);
}

static void check_timeouts(gt_engine *engine, const uint64_t now, uint64_t *next_deadline)
{
    const uint32_t count = __atomic_load_n(&engine->peer_count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count; i++)
    {
        peer *p = engine->peers[i];
        while (p->pending_head != NULL && p->pending_head->admission_deadline_ms <= now)
        {
            transfer *t = p->pending_head;
            p->pending_head = t->next;
            if (p->pending_head == NULL)
            {
                p->pending_tail = NULL;
            }
            p->pending_count--;
            t->next = NULL;
            t->status = GT_UNAVAILABLE;
            __atomic_add_fetch(&engine->rejected_admission_timeout, 1, __ATOMIC_RELAXED);
            complete(engine, t);
        }
        if (p->pending_head != NULL && p->pending_head->admission_deadline_ms < *next_deadline)
        {
            *next_deadline = p->pending_head->admission_deadline_ms;
        }
        for (uint32_t j = 0; j < p->lanes_count; j++)
        {
            lane *l = p->lanes[j];
            if (l == NULL)
            {
                continue;
            }
            if (l->connecting && l->connect_deadline_ms <= now)
            {
                lane_fail(engine, l, GT_TRANSFER_FAIL);
                continue;
            }
            while (l->head != NULL && l->head->deadline_ms <= now)
            {
                frame *f = l->head;
                const int partly_sent =
                    f->sent > 0 && f->sent < GT_HEADER_LENGTH + (uint64_t)f->prefix_length + f->payload_out;
                if (partly_sent)
                {
                    /* The payload is still leaving from the caller's memory: close the lane to let go of it. */
                    f->timed_out = 1;
                    lane_fail(engine, l, GT_TRANSFER_FAIL);
                    break;
                }
                lane_unlink(l, f);
                frame_finish(engine, f, GT_RPC_TIMEOUT);
            }
            frame *arriving = l->receiving != NULL ? l->receiving : l->rx_vector;
            if (arriving != NULL && arriving->deadline_ms <= now)
            {
                /* its payload is arriving into the caller's memory: close the lane to stop that */
                arriving->timed_out = 1;
                lane_fail(engine, l, GT_TRANSFER_FAIL);
                continue;
            }
            if (l->head != NULL && l->head->deadline_ms < *next_deadline)
            {
                *next_deadline = l->head->deadline_ms;
            }
            if (l->connecting && l->connect_deadline_ms < *next_deadline)
            {
                *next_deadline = l->connect_deadline_ms;
            }
        }
    }
}

static int copy_completions(gt_engine *engine, gt_completion *out, const int max)
{
    int n = 0;
    while (n < max && engine->completions_read < engine->completions_count)
    {
        out[n++] = engine->completions[engine->completions_read++];
    }
    if (engine->completions_read == engine->completions_count)
    {
        engine->completions_read = 0;
        engine->completions_count = 0;
    }
    return n;
}

int gt_engine_poll(gt_engine *engine, gt_completion *out, const int max, const int timeout_ms)
{
    if (engine->completions_read < engine->completions_count)
    {
        return copy_completions(engine, out, max);
    }
    drain_incoming(engine);
    for_each_lane_doomed(engine);
    rdma_poll_paths(engine);
    uint64_t now = gt_now_ms();
    uint64_t next_deadline = UINT64_MAX;
    check_timeouts(engine, now, &next_deadline);
    rdma_check_timeouts(engine, now, &next_deadline);
    for_each_lane_doomed(engine);
    int wait = engine->completions_count > 0 ? 0 : timeout_ms;
    if (engine->rdma_inflight > 0 && (wait < 0 || wait > 1))
    {
        wait = 1; /* completion queues are polled, not waited on: look again within a millisecond */
    }
    if (next_deadline != UINT64_MAX && wait != 0)
    {
        const uint64_t until = next_deadline > now ? next_deadline - now : 0;
        if (wait < 0 || until < (uint64_t)wait)
        {
            wait = (int)until;
        }
    }
    if (wait != 0)
    {
        pthread_mutex_lock(&engine->mutex);
        if (engine->incoming_head != NULL || engine->provided != NULL)
        {
            wait = 0; /* handed over since the drain: no sleep */
        }
        else
        {
            engine->sleeping = 1;
        }
        pthread_mutex_unlock(&engine->mutex);
    }
    struct epoll_event events[64];
    const int ready = epoll_wait(engine->epoll_fd, events, 64, wait);
    if (wait != 0)
    {
        pthread_mutex_lock(&engine->mutex);
        engine->sleeping = 0;
        pthread_mutex_unlock(&engine->mutex);
    }
    if (ready < 0 && errno != EINTR)
    {
        return GT_INTERNAL_ERROR;
    }
    for (int i = 0; i < ready; i++)
    {
        lane *l = events[i].data.ptr;
        if (l == NULL)
        {
            uint64_t value;
            ssize_t ignored = read(engine->event_fd, &value, sizeof(value));
            (void)ignored;
            continue;
        }
        if (l->fd < 0)
        {
            continue;
        }
        if (l->connecting && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        {
            on_connected(engine, l);
        }
        if (!l->connecting && !l->doomed && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        {
            lane_read(engine, l);
        }
        if (!l->connecting && !l->doomed && (events[i].events & EPOLLOUT))
        {
            mark_dirty(engine, l);
        }
        if (l->doomed)
        {
            mark_dirty(engine, l);
        }
    }
    drain_incoming(engine);
    for_each_lane_doomed(engine);
    rdma_poll_paths(engine);
    for_each_lane_doomed(engine);
    return copy_completions(engine, out, max);
}

int gt_engine_peer_stats(gt_engine *engine, const uint32_t id, uint32_t *outstanding_frames, uint32_t *pending)
{
    peer *p = peer_get(engine, id);
    if (p == NULL)
    {
        return GT_INVALID_PARAMS;
    }
    *outstanding_frames = __atomic_load_n(&p->outstanding_frames, __ATOMIC_RELAXED);
    *pending = __atomic_load_n(&p->pending_count, __ATOMIC_RELAXED);
    return GT_OK;
}

uint32_t gt_engine_region_count(gt_engine *engine)
{
    pthread_mutex_lock(&engine->mutex);
    const uint32_t count = engine->regions.count - engine->regions.free_count;
    pthread_mutex_unlock(&engine->mutex);
    return count;
}

void gt_engine_counters(gt_engine *engine, uint64_t *admitted, uint64_t *rejected_queue_full,
    uint64_t *rejected_admission_timeout)
{
    *admitted = __atomic_load_n(&engine->admitted, __ATOMIC_RELAXED);
    *rejected_queue_full = __atomic_load_n(&engine->rejected_queue_full, __ATOMIC_RELAXED);
    *rejected_admission_timeout = __atomic_load_n(&engine->rejected_admission_timeout, __ATOMIC_RELAXED);
}

void gt_engine_rdma_counters(gt_engine *engine, uint64_t *reads, uint64_t *failed)
{
    *reads = __atomic_load_n(&engine->rdma_reads_done, __ATOMIC_RELAXED);
    *failed = __atomic_load_n(&engine->rdma_reads_failed, __ATOMIC_RELAXED);
}

/* Frees a list of frames, with the entries of READVs among them. */
static void free_frames(frame *f)
{
    while (f != NULL)
    {
        frame *next = f->next;
        for (uint32_t i = 0; i < f->entry_count; i++)
        {
            free(f->entries[i]);
        }
        frame_free(f);
        f = next;
    }
}

void gt_engine_destroy(gt_engine *engine)
{
    if (engine == NULL)
    {
        return;
    }
    /* Collect every transfer still referenced (by frames, pending queues, incoming and waiting lists) once. */
    const uint32_t count = engine->peer_count;
    transfer **seen = NULL;
    size_t seen_count = 0;
    size_t seen_capacity = 0;
#define REMEMBER(t_) do { \
        transfer *t__ = (t_); int dup__ = 0; \
        for (size_t k__ = 0; k__ < seen_count; k__++) { if (seen[k__] == t__) { dup__ = 1; break; } } \
        if (!dup__) { \
            if (seen_count == seen_capacity) { \
                seen_capacity = seen_capacity == 0 ? 64 : seen_capacity * 2; \
                transfer **grown__ = realloc(seen, seen_capacity * sizeof(transfer *)); \
                if (grown__ == NULL) { break; } seen = grown__; } \
            seen[seen_count++] = t__; } } while (0)
    for (uint32_t i = 0; i < count; i++)
    {
        peer *p = engine->peers[i];
        for (transfer *t = p->pending_head; t != NULL; t = t->next)
        {
            REMEMBER(t);
        }
        for (uint32_t j = 0; j < p->rdma_path_count; j++)
        {
            rdma_path *path = p->rdma_paths[j];
            rdma_path_close(path); /* the QP first: no more bytes land anywhere */
            for (uint32_t slot = 0; slot < RDMA_MAX_INFLIGHT; slot++)
            {
                if (path->inflight[slot] != NULL)
                {
                    REMEMBER(path->inflight[slot]);
                }
            }
            free(path);
        }
        for (uint32_t j = 0; j < p->local_path_count; j++)
        {
            free(p->local_paths[j]);
        }
        for (uint32_t j = 0; j < p->lanes_count; j++)
        {
            lane *l = p->lanes[j];
            if (l == NULL)
            {
                continue;
            }
            /* the frames on the lane, the one being received, and the small READs and WRITE_COMMITs not sealed into a
             * vector yet */
            frame *lists[4] = { l->head, l->receiving != NULL ? l->receiving : l->rx_vector, l->reads.head,
                l->writes.head };
            if (lists[1] != NULL)
            {
                lists[1]->next = NULL;
            }
            for (int k = 0; k < 4; k++)
            {
                for (frame *f = lists[k]; f != NULL; f = f->next)
                {
                    if (f->transfer != NULL)
                    {
                        REMEMBER(f->transfer);
                    }
                    for (uint32_t e = 0; e < f->entry_count; e++)
                    {
                        if (f->entries[e] != NULL)
                        {
                            REMEMBER(f->entries[e]->transfer);
                        }
                    }
                }
            }
            for (int k = 0; k < 4; k++)
            {
                free_frames(lists[k]);
            }
            if (l->fd >= 0)
            {
                close(l->fd);
            }
            free(l);
        }
        free(p);
    }
    for (transfer *t = engine->incoming_head; t != NULL; t = t->next)
    {
        REMEMBER(t);
    }
    for (transfer *t = engine->provided; t != NULL; t = t->commit_link)
    {
        REMEMBER(t);
    }
    for (transfer *t = engine->waiting_commits; t != NULL; t = t->commit_link)
    {
        REMEMBER(t);
    }
#undef REMEMBER
    for (size_t k = 0; k < seen_count; k++)
    {
        free_commit(seen[k]);
        free(seen[k]);
    }
    free(seen);
    free(engine->completions);
    for (uint32_t slot = 1; slot <= engine->regions.count; slot++)
    {
        if (engine->regions.regions[slot].used && engine->regions.regions[slot].transport != NULL)
        {
            gt_rdma_deregister(engine->rdma_device, engine->regions.regions[slot].transport);
        }
    }
    gt_regions_free(&engine->regions);
    gt_rdma_device_close(engine->rdma_device);
    close(engine->epoll_fd);
    close(engine->event_fd);
    pthread_mutex_destroy(&engine->mutex);
    free(engine);
}
