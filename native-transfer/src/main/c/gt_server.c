/*
 * The native TCP transfer server: serves a storage node's segments over the frame protocol of docs/protocol.md with
 * the checks of the Java FrameHandler, in its order, before any byte moves (decode, status, access token, segment,
 * range; the ledger through the owner's on_write/on_commit callbacks). WRITE payloads are received straight into
 * segment memory, READ and READV payloads sent straight from it. An RDMA_CONNECT that passes its checks brings up a
 * queue pair of the node for the segment (only while no token key is installed) that lives as long as the connection.
 *
 * Threading: the server has io_threads event loops, each run by one thread (gt_server_run_loop, or gt_server_run for
 * all of them). Loop 0 also accepts and spreads the connections over the loops round-robin; a connection then belongs
 * to its loop alone for its whole life (its requests, responses, failed-WRITE memory and close). The segment table
 * and the token key are guarded by a mutex so that the owner may replace them from any thread; each loop works from
 * its own copy, refreshed before a frame is checked whenever the tables' generation moved, so no loop takes a lock
 * per frame and every frame read after a replacement returned is checked against the new tables. Counters are atomic.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_internal.h"
#include "gt_rdma.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define STAGING_BYTES (64 << 10)
#define SOCKET_BUFFER_BYTES (4 << 20)
#define MAX_IOV 64
#define HIGH_WATER_BYTES (8u << 20)
#define LOW_WATER_BYTES (2u << 20)
#define LARGE_WRITE_BYTES (16u << 10)
#define FAILED_WRITES_REMEMBERED 64
#define MAX_SEGMENTS 4096
#define LATENCY_SAMPLES 256
#define MAX_IO_THREADS 256
#define MAX_RDMA_LINKS 16 /* queue pairs one connection may bring up */

enum receive_state
{
    RECEIVE_HEADER,
    RECEIVE_WRITE,
    RECEIVE_COMMIT,
    RECEIVE_WRITE_RECORD, /* the commit record at the head of a WRITE_COMMIT */
    RECEIVE_READV,
    RECEIVE_RDMA_CONNECT,
    RECEIVE_WRITEV_TABLE, /* a WRITEV's entries and records */
    RECEIVE_WRITEV_VALUES /* its values, each into segment memory (or discarded) */
};

enum item_kind
{
    ITEM_INLINE,   /* a response header, stored in the item */
    ITEM_MEMORY,   /* segment memory, sent in place */
    ITEM_OWNED     /* a malloc'd buffer (READV statuses), freed once sent */
};

typedef struct out_item
{
    uint8_t kind;
    uint32_t length;
    uint32_t sent;
    const uint8_t *memory;
    uint8_t *owned;
    uint8_t bytes[GT_HEADER_LENGTH];
} out_item;

typedef struct failed_write
{
    uint32_t segment_id;
    uint64_t offset;
    int32_t status;
} failed_write;

typedef struct connection connection;
typedef struct server_loop server_loop;

/* One entry of a WRITEV being received: its WRITE_COMMIT header, its record (in the table) and where its value goes. */
typedef struct writev_entry
{
    gt_header header;
    const uint8_t *record;
    uint8_t *at;             /* NULL: refused, its bytes are discarded */
    int32_t status;
} writev_entry;

/*
 * A token a connection's frames carried that verified, with the generation of the key it verified under: the slices
 * of a WRITE and its COMMIT carry one token, which then costs one HMAC (as the Java server's Checker keeps the tokens
 * it verified). A connection keeps VERIFIED_TOKENS of them, one per slot of its extent's grant offset: a batch's
 * COMMITs follow all of its WRITEs. The range and the expiry are checked every time.
 */
#define VERIFIED_TOKENS 256
typedef struct verified_token
{
    uint64_t generation; /* 0: none */
    int opcode;
    uint32_t segment_id;
    uint64_t grant_offset;
    uint64_t grant_length;
    uint32_t expiry;
    uint8_t mac[GT_MAC_LENGTH];
} verified_token;

struct connection
{
    server_loop *loop;
    int fd;
    char peer[64];
    int closing;
    const char *close_reason;
    enum receive_state state;
    uint8_t staging[STAGING_BYTES];
    uint32_t staged_start;
    uint32_t staged_end;
    uint8_t header_bytes[GT_HEADER_LENGTH];
    uint32_t header_fill;
    gt_header header;
    int last_write_large;
    uint64_t write_start_ns;
    /* WRITE payload: write_at NULL means discard (refused) */
    uint8_t *write_at;
    uint64_t remaining;
    int32_t write_status;
    int write_commit;      /* the WRITE is a WRITE_COMMIT's: its record is in buffer, committed after the bytes */
    /* COMMIT payload, READV entries or a QP-information record: buffer NULL means discard */
    uint8_t *buffer;
    uint32_t buffer_fill;
    uint8_t request_bytes[GT_HEADER_LENGTH];
    /* WRITEV: the table (its records) and entries once the table is in; entries NULL while it arrives, or when the
     * whole vector is refused (the rest of its bytes discarded) */
    uint8_t *wv_table;
    writev_entry *wv;
    uint32_t wv_next;        /* the entry whose value arrives now */
    uint32_t wv_fill;        /* bytes of that value in */
    failed_write failed[FAILED_WRITES_REMEMBERED];
    uint32_t failed_next;
    verified_token verified[VERIFIED_TOKENS];
    /* responses */
    out_item *items;
    uint32_t items_head;
    uint32_t items_count;
    uint32_t items_capacity;
    uint64_t queued_bytes;
    int reading_paused;
    int want_out;
    /* the node's queue pairs brought up by this connection's RDMA_CONNECTs, destroyed with it */
    gt_rdma_link *rdma_links[MAX_RDMA_LINKS];
    uint32_t rdma_link_count;
    connection *next;
    connection *prev;
};

typedef struct segment_entry
{
    uint32_t id;
    uint8_t *address;
    uint64_t size;
} segment_entry;

/* One event loop: its epoll set, its connections, and its copy of the shared tables. Touched by its thread only,
 * except handed_over (under mutex) and event_fd. */
struct server_loop
{
    gt_server *server;
    uint32_t index;
    int epoll_fd;
    int event_fd;
    connection *connections;
    pthread_mutex_t mutex;
    connection *handed_over;              /* under mutex: accepted by loop 0 for this loop, not registered yet */
    uint64_t latencies[LATENCY_SAMPLES];
    int latency_count;
    uint64_t generation;                  /* of the tables copied below */
    segment_entry *segments;
    int segment_count;
    int has_key;
    gt_hmac_key hmac;
    uint8_t discard[STAGING_BYTES];
};

struct gt_server
{
    gt_server_config config;
    gt_server_callbacks callbacks;
    int listen_fd;
    uint16_t port;
    int stopping;                         /* atomic */
    pthread_mutex_t mutex;
    segment_entry segments[MAX_SEGMENTS]; /* under mutex */
    int segment_count;
    int has_key;                          /* under mutex */
    gt_hmac_key hmac;
    uint64_t generation;                  /* bumped under mutex after every change; loops read it atomically */
    gt_server_stats stats;                /* written by the loops, read with relaxed atomics */
    uint32_t loop_count;
    server_loop *loops;
    uint32_t next_loop;                   /* loop 0 only */
    gt_rdma_device *rdma_device;          /* under mutex: opened by the first RDMA_CONNECT that gets that far */
    gt_mr_table rdma_registrations;       /* under mutex: the segments registered on it (handle: the MR) */
    uint64_t local_cookie;                /* LOCAL_CONNECT: read back by a same-host client to prove its reach */
};

#define STAT_ADD(server_, field_, value_) __atomic_add_fetch(&(server_)->stats.field_, (value_), __ATOMIC_RELAXED)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void flush_latencies(server_loop *loop)
{
    gt_server *server = loop->server;
    if (loop->latency_count > 0 && server->callbacks.on_latencies != NULL)
    {
        server->callbacks.on_latencies(server->callbacks.context, loop->latencies, loop->latency_count);
    }
    loop->latency_count = 0;
}

static void record_latency(server_loop *loop, const uint64_t op, const uint64_t start_ns)
{
    if (loop->server->callbacks.on_latencies == NULL)
    {
        return;
    }
    const uint64_t elapsed = now_ns() - start_ns;
    loop->latencies[loop->latency_count++] = (op << 62) | (elapsed & ((1ull << 62) - 1));
    if (loop->latency_count == LATENCY_SAMPLES)
    {
        flush_latencies(loop);
    }
}

static int listener_marker;
static int wakeup_marker;

int gt_server_create(const gt_server_config *config, const gt_server_callbacks *callbacks, gt_server **out,
    gt_error *error)
{
    *out = NULL;
    if (config->max_frame_bytes < 4096 || config->max_frame_bytes > GT_MAX_FRAME_LENGTH_LIMIT)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "max_frame_bytes must be in 4096..%u, was %u",
            GT_MAX_FRAME_LENGTH_LIMIT, config->max_frame_bytes);
    }
    if (callbacks == NULL || callbacks->on_write == NULL || callbacks->on_commit == NULL)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "on_write and on_commit callbacks are required");
    }
    if (config->io_threads > MAX_IO_THREADS)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "io_threads must be in 1..%d, was %u", MAX_IO_THREADS,
            config->io_threads);
    }
    gt_server *server = calloc(1, sizeof(gt_server));
    if (server == NULL)
    {
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    server->config = *config;
    server->config.host = NULL;
    server->callbacks = *callbacks;
    server->listen_fd = -1;
    server->generation = 1; /* every loop copies the (empty) tables before its first frame */
    if (getrandom(&server->local_cookie, sizeof(server->local_cookie), 0) != sizeof(server->local_cookie))
    {
        server->local_cookie = gt_epoch_ms() ^ (uint64_t)(uintptr_t)server ^ ((uint64_t)getpid() << 32);
    }
    server->local_cookie |= 1; /* never 0: a destroyed server's cookie is zeroed */
    if (config->local_transfers)
    {
        /* Where Yama restricts ptrace to descendants, process_vm_readv/writev by a same-host client need this
         * process's consent (any process of the same user may then read and write it, as without Yama). */
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    }
    pthread_mutex_init(&server->mutex, NULL);
    gt_mr_table_init(&server->rdma_registrations);
    server->loop_count = config->io_threads == 0 ? 1 : config->io_threads;
    server->loops = calloc(server->loop_count, sizeof(server_loop));
    if (server->loops == NULL)
    {
        server->loop_count = 0;
        gt_server_destroy(server);
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    for (uint32_t i = 0; i < server->loop_count; i++)
    {
        server_loop *loop = &server->loops[i];
        loop->server = server;
        loop->index = i;
        loop->epoll_fd = -1;
        loop->event_fd = -1;
        pthread_mutex_init(&loop->mutex, NULL);
    }

    struct addrinfo hints;
    struct addrinfo *found = NULL;
    char port_text[8];
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(port_text, sizeof(port_text), "%u", config->port);
    const int resolved = getaddrinfo(config->host, port_text, &hints, &found);
    if (resolved != 0 || found == NULL)
    {
        gt_server_destroy(server);
        return gt_fail(error, GT_INVALID_PARAMS, "cannot resolve %s: %s", config->host == NULL ? "*" : config->host,
            gai_strerror(resolved));
    }
    server->listen_fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    const int buffer = SOCKET_BUFFER_BYTES;
    if (server->listen_fd >= 0)
    {
        setsockopt(server->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(server->listen_fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    }
    if (server->listen_fd < 0 || bind(server->listen_fd, found->ai_addr, found->ai_addrlen) != 0 ||
        listen(server->listen_fd, 1024) != 0)
    {
        const int saved = errno;
        freeaddrinfo(found);
        gt_server_destroy(server);
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot bind the native transfer server to %s:%u: %s",
            config->host == NULL ? "*" : config->host, config->port, strerror(saved));
    }
    freeaddrinfo(found);
    struct sockaddr_storage bound;
    socklen_t bound_length = sizeof(bound);
    getsockname(server->listen_fd, (struct sockaddr *)&bound, &bound_length);
    server->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port :
        ((struct sockaddr_in *)&bound)->sin_port);

    for (uint32_t i = 0; i < server->loop_count; i++)
    {
        server_loop *loop = &server->loops[i];
        loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        loop->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        loop->segments = calloc(MAX_SEGMENTS, sizeof(segment_entry));
        if (loop->epoll_fd < 0 || loop->event_fd < 0 || loop->segments == NULL)
        {
            const int saved = loop->segments == NULL ? ENOMEM : errno;
            gt_server_destroy(server);
            return gt_fail(error, GT_INTERNAL_ERROR, "epoll/eventfd: %s", strerror(saved));
        }
        struct epoll_event wakeup_event = { .events = EPOLLIN, .data.ptr = &wakeup_marker };
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->event_fd, &wakeup_event);
    }
    struct epoll_event listen_event = { .events = EPOLLIN, .data.ptr = &listener_marker };
    epoll_ctl(server->loops[0].epoll_fd, EPOLL_CTL_ADD, server->listen_fd, &listen_event);
    *out = server;
    return GT_OK;
}

uint16_t gt_server_port(const gt_server *server)
{
    return server->port;
}

int gt_server_set_segments(gt_server *server, const uint32_t *ids, const uint64_t *addresses, const uint64_t *sizes,
    const int count, gt_error *error)
{
    if (count < 0 || count > MAX_SEGMENTS)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "at most %d segments, was %d", MAX_SEGMENTS, count);
    }
    for (int i = 0; i < count; i++)
    {
        if (addresses[i] == 0 || sizes[i] == 0 || addresses[i] + sizes[i] < addresses[i])
        {
            return gt_fail(error, GT_INVALID_PARAMS, "segment %u has no memory", ids[i]);
        }
    }
    pthread_mutex_lock(&server->mutex);
    for (int i = 0; i < count; i++)
    {
        server->segments[i].id = ids[i];
        server->segments[i].address = (uint8_t *)(uintptr_t)addresses[i];
        server->segments[i].size = sizes[i];
    }
    server->segment_count = count;
    /* A segment that left the table loses its RDMA registration before the owner may free its memory: one-sided
     * operations on it then fail with a remote access error at the client. */
    for (uint32_t i = server->rdma_registrations.count; i-- > 0;)
    {
        const gt_mr_entry *entry = &server->rdma_registrations.entries[i];
        int kept = 0;
        for (int j = 0; j < count && !kept; j++)
        {
            kept = (uint64_t)(uintptr_t)server->segments[j].address == entry->address &&
                server->segments[j].size == entry->length;
        }
        if (!kept)
        {
            gt_mr_entry removed;
            gt_mr_table_remove(&server->rdma_registrations, entry->address, &removed);
            gt_rdma_deregister(server->rdma_device, removed.handle);
        }
    }
    __atomic_add_fetch(&server->generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&server->mutex);
    return GT_OK;
}

int gt_server_set_token_key(gt_server *server, const uint8_t *key, gt_error *error)
{
    (void)error;
    pthread_mutex_lock(&server->mutex);
    if (key == NULL)
    {
        server->has_key = 0;
        memset(&server->hmac, 0, sizeof(server->hmac));
    }
    else
    {
        gt_hmac_key_init(&server->hmac, key, GT_KEY_LENGTH);
        server->has_key = 1;
    }
    __atomic_add_fetch(&server->generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&server->mutex);
    return GT_OK;
}

void gt_server_get_stats(gt_server *server, gt_server_stats *stats)
{
    const uint64_t *from = (const uint64_t *)&server->stats;
    uint64_t *to = (uint64_t *)stats;
    for (size_t i = 0; i < sizeof(gt_server_stats) / sizeof(uint64_t); i++)
    {
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    }
}

static void loop_wakeup(server_loop *loop)
{
    const uint64_t one = 1;
    ssize_t ignored = write(loop->event_fd, &one, sizeof(one));
    (void)ignored;
}

void gt_server_stop(gt_server *server)
{
    __atomic_store_n(&server->stopping, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < server->loop_count; i++)
    {
        loop_wakeup(&server->loops[i]);
    }
}

/* The loop's copy of the segment table and token key, renewed when the owner changed them. */
static void loop_refresh(server_loop *loop)
{
    gt_server *server = loop->server;
    if (__atomic_load_n(&server->generation, __ATOMIC_ACQUIRE) == loop->generation)
    {
        return;
    }
    pthread_mutex_lock(&server->mutex);
    memcpy(loop->segments, server->segments, (size_t)server->segment_count * sizeof(segment_entry));
    loop->segment_count = server->segment_count;
    loop->has_key = server->has_key;
    loop->hmac = server->hmac;
    loop->generation = server->generation;
    pthread_mutex_unlock(&server->mutex);
}

/* ---------------------------------------------------------------- checks */

/* The slot of a connection's verified tokens for a grant: extents of one batch lie apart, slots are mixed from that. */
static verified_token *verified_slot(verified_token *tokens, const uint32_t segment_id, const uint64_t grant_offset)
{
    const uint64_t mixed = (grant_offset ^ ((uint64_t)segment_id << 40)) * 0x9E3779B97F4A7C15ull;
    return &tokens[mixed >> (64 - 8)];
}

static int same_token(const verified_token *v, const uint64_t generation, const int opcode, const gt_header *h,
    const uint64_t grant_offset)
{
    return v->generation == generation && v->opcode == opcode && v->segment_id == h->segment_id &&
        v->grant_offset == grant_offset && v->grant_length == h->grant_length && v->expiry == h->token_expiry &&
        memcmp(v->mac, h->token_mac, GT_MAC_LENGTH) == 0;
}

/*
 * The frame's token, like AccessTokenVerifier.Checker: 0, ACCESS_DENIED or TOKEN_EXPIRED. verified (may be NULL) are
 * the connection's verified tokens: a token equal to the one in its slot needs no HMAC.
 */
static int check_token(server_loop *loop, const gt_header *h, const int opcode, verified_token *verified)
{
    gt_server *server = loop->server;
    const gt_hmac_key *hmac = &loop->hmac;
    if (!loop->has_key)
    {
        return GT_OK;
    }
    if (h->token_expiry == 0)
    {
        STAT_ADD(server, tokens_missing, 1);
        return GT_ACCESS_DENIED;
    }
    if (h->grant_length == 0 || h->length > h->grant_length || h->grant_delta > h->grant_length - h->length ||
        h->offset < h->grant_delta)
    {
        STAT_ADD(server, tokens_invalid, 1);
        return GT_ACCESS_DENIED;
    }
    const uint64_t grant_offset = h->offset - h->grant_delta;
    verified_token *memo = verified == NULL ? NULL : verified_slot(verified, h->segment_id, grant_offset);
    if (memo == NULL || !same_token(memo, loop->generation, opcode, h, grant_offset))
    {
        if (!gt_token_verify(hmac, opcode, h->segment_id, grant_offset, h->grant_length, h->token_expiry,
            h->token_mac))
        {
            STAT_ADD(server, tokens_invalid, 1);
            return GT_ACCESS_DENIED;
        }
        if (memo != NULL)
        {
            memo->generation = loop->generation;
            memo->opcode = opcode;
            memo->segment_id = h->segment_id;
            memo->grant_offset = grant_offset;
            memo->grant_length = h->grant_length;
            memo->expiry = h->token_expiry;
            memcpy(memo->mac, h->token_mac, GT_MAC_LENGTH);
        }
    }
    const uint64_t now = server->callbacks.now_epoch_ms != NULL ?
        server->callbacks.now_epoch_ms(server->callbacks.context) : gt_epoch_ms();
    if (!(now < (uint64_t)h->token_expiry * 1000u))
    {
        STAT_ADD(server, tokens_expired, 1);
        return GT_TOKEN_EXPIRED;
    }
    STAT_ADD(server, tokens_verified, 1);
    return GT_OK;
}

/* Validation of a READ, a WRITE or a READV entry before any byte moves; *address is set when it passes. */
static int check_request(server_loop *loop, const gt_header *h, uint8_t **address, verified_token *verified)
{
    *address = NULL;
    if (h->status != 0)
    {
        return GT_INVALID_PARAMS;
    }
    const int token = check_token(loop, h, h->opcode, verified);
    if (token != GT_OK)
    {
        return token;
    }
    int found = 0;
    uint8_t *base = NULL;
    uint64_t size = 0;
    for (int i = 0; i < loop->segment_count; i++)
    {
        if (loop->segments[i].id == h->segment_id)
        {
            found = 1;
            base = loop->segments[i].address;
            size = loop->segments[i].size;
            break;
        }
    }
    if (!found)
    {
        return GT_SEGMENT_NOT_FOUND;
    }
    if (h->length == 0 || h->offset > size || h->length > size - h->offset)
    {
        return GT_INVALID_PARAMS;
    }
    *address = base + h->offset;
    return GT_OK;
}

/* ---------------------------------------------------------------- output */

static out_item *push_item(connection *c)
{
    if (c->items_head + c->items_count == c->items_capacity)
    {
        if (c->items_head > 0)
        {
            memmove(c->items, c->items + c->items_head, c->items_count * sizeof(out_item));
            c->items_head = 0;
        }
        if (c->items_count == c->items_capacity)
        {
            const uint32_t capacity = c->items_capacity == 0 ? 64 : c->items_capacity * 2;
            out_item *grown = realloc(c->items, capacity * sizeof(out_item));
            if (grown == NULL)
            {
                return NULL;
            }
            c->items = grown;
            c->items_capacity = capacity;
        }
    }
    out_item *item = &c->items[c->items_head + c->items_count++];
    memset(item, 0, offsetof(out_item, bytes));
    return item;
}

static void close_connection(gt_server *server, connection *c, const char *reason);

static void respond(gt_server *server, connection *c, const int opcode, const uint64_t request_id,
    const uint32_t segment_id, const int32_t status, const uint64_t offset, const uint32_t length)
{
    out_item *item = push_item(c);
    if (item == NULL)
    {
        c->closing = 1;
        c->close_reason = "out of memory for responses";
        return;
    }
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = (uint8_t)opcode;
    h.request_id = request_id;
    h.segment_id = segment_id;
    h.status = status;
    h.offset = offset;
    h.length = length;
    gt_header_encode(item->bytes, &h);
    item->kind = ITEM_INLINE;
    item->length = GT_HEADER_LENGTH;
    c->queued_bytes += GT_HEADER_LENGTH;
    if (status != 0)
    {
        STAT_ADD(server, error_responses, 1);
    }
}

static void send_memory(connection *c, const uint8_t *memory, const uint32_t length, uint8_t *owned)
{
    out_item *item = push_item(c);
    if (item == NULL)
    {
        free(owned);
        c->closing = 1;
        c->close_reason = "out of memory for responses";
        return;
    }
    item->kind = owned != NULL ? ITEM_OWNED : ITEM_MEMORY;
    item->memory = memory;
    item->owned = owned;
    item->length = length;
    c->queued_bytes += length;
}

static void update_interest(gt_server *server, connection *c)
{
    const int want_out = c->items_count > 0;
    int paused = c->reading_paused;
    if (!paused && c->queued_bytes > HIGH_WATER_BYTES)
    {
        paused = 1;
    }
    else if (paused && c->queued_bytes < LOW_WATER_BYTES)
    {
        paused = 0;
    }
    if (want_out != c->want_out || paused != c->reading_paused)
    {
        struct epoll_event ev = { .events = (paused ? 0 : EPOLLIN) | (want_out ? EPOLLOUT : 0) | EPOLLRDHUP,
            .data.ptr = c };
        epoll_ctl(c->loop->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want_out;
        c->reading_paused = paused;
    }
}

static void flush_connection(gt_server *server, connection *c)
{
    while (c->items_count > 0)
    {
        struct iovec iov[MAX_IOV];
        int n = 0;
        for (uint32_t i = 0; i < c->items_count && n < MAX_IOV; i++)
        {
            out_item *item = &c->items[c->items_head + i];
            const uint8_t *base = item->kind == ITEM_INLINE ? item->bytes :
                item->kind == ITEM_OWNED ? item->owned : item->memory;
            iov[n].iov_base = (void *)(base + item->sent);
            iov[n].iov_len = item->length - item->sent;
            n++;
        }
        const long written = gt_sendv(c->fd, iov, n);
        if (written < 0)
        {
            c->closing = 1;
            return;
        }
        if (written == 0)
        {
            break; /* the socket buffer is full: wait until it is writable */
        }
        STAT_ADD(server, bytes_out, (uint64_t)written);
        c->queued_bytes -= (uint64_t)written;
        uint64_t left = (uint64_t)written;
        while (left > 0)
        {
            out_item *item = &c->items[c->items_head];
            const uint64_t take = item->length - item->sent < left ? item->length - item->sent : left;
            item->sent += (uint32_t)take;
            left -= take;
            if (item->sent == item->length)
            {
                free(item->owned);
                c->items_head++;
                c->items_count--;
            }
        }
        if (c->items_count == 0)
        {
            c->items_head = 0;
        }
    }
    update_interest(server, c);
}

/* ---------------------------------------------------------------- requests */

static void remember_write(connection *c, const uint32_t segment_id, const uint64_t offset, const int32_t status)
{
    for (uint32_t i = 0; i < FAILED_WRITES_REMEMBERED; i++)
    {
        failed_write *f = &c->failed[i];
        if (f->status != 0 && f->segment_id == segment_id && f->offset == offset)
        {
            f->status = status; /* 0 forgets it */
            return;
        }
    }
    if (status != 0)
    {
        c->failed[c->failed_next] = (failed_write){ segment_id, offset, status };
        c->failed_next = (c->failed_next + 1) % FAILED_WRITES_REMEMBERED;
    }
}

/*
 * The status of a WRITE refused on this connection that started inside the committed extent [offset, end) (the whole
 * value's WRITE, or any slice of it), forgetting those it finds; 0 if none.
 */
static int32_t take_failed_write(connection *c, const uint32_t segment_id, const uint64_t offset, const uint64_t end)
{
    int32_t status = 0;
    for (uint32_t i = 0; i < FAILED_WRITES_REMEMBERED; i++)
    {
        failed_write *f = &c->failed[i];
        if (f->status != 0 && f->segment_id == segment_id && f->offset >= offset && f->offset < end)
        {
            status = status != 0 ? status : f->status;
            f->status = 0;
        }
    }
    return status;
}

/* The end of the extent a COMMIT names: offset + max(1, the record's value length), or offset + 1 without a record. */
static uint64_t commit_extent_end(const gt_header *h, const uint8_t *payload, const uint32_t length)
{
    uint64_t span = 1;
    if (payload != NULL && length >= 16 && payload[0] == 1)
    {
        const uint64_t value_length = gt_get_u64(payload + 8);
        span = value_length > 0 ? value_length : 1;
    }
    return span > UINT64_MAX - h->offset ? UINT64_MAX : h->offset + span;
}

static void finish_write_commit(gt_server *server, connection *c);

static void finish_write(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    if (c->write_commit)
    {
        finish_write_commit(server, c);
        return;
    }
    remember_write(c, h->segment_id, h->offset, c->write_status);
    respond(server, c, GT_OPC_WRITE | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, c->write_status, h->offset,
        h->length);
    record_latency(c->loop, GT_OP_WRITE, c->write_start_ns);
    c->write_at = NULL;
    c->state = RECEIVE_HEADER;
}

/*
 * The COMMIT's token checked as the WRITE token of the extent it commits, [offset, offset + max(1, value_length)),
 * as the Java FrameHandler does: the value length is read from the record (docs/protocol.md, "COMMIT"); a payload
 * that is no record of format 1, or a value length beyond 32 bits, is left to the owner.
 */
static int commit_token_status(
    server_loop *loop, const gt_header *h, const uint8_t *payload, const uint32_t length, verified_token *verified)
{
    if (h->status != 0 || payload == NULL || length < 16 || payload[0] != 1)
    {
        return GT_COMMIT_TOKEN_UNCHECKED;
    }
    const uint64_t value_length = gt_get_u64(payload + 8);
    if (value_length > UINT32_MAX)
    {
        return GT_COMMIT_TOKEN_UNCHECKED;
    }
    gt_header extent = *h;
    extent.length = value_length > 0 ? (uint32_t)value_length : 1;
    return check_token(loop, &extent, GT_OPC_WRITE, verified);
}

static void finish_commit(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    const uint32_t length = c->buffer == NULL ? 0 : h->length;
    const int32_t failed = take_failed_write(c, h->segment_id, h->offset, commit_extent_end(h, c->buffer, length));
    const int token_status = commit_token_status(c->loop, h, c->buffer, length, c->verified);
    const int status = server->callbacks.on_commit(server->callbacks.context, c->request_bytes, c->buffer,
        length, failed, token_status);
    free(c->buffer);
    c->buffer = NULL;
    respond(server, c, GT_OPC_COMMIT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, h->offset,
        h->length);
    c->state = RECEIVE_HEADER;
}

/*
 * A WRITE_COMMIT's bytes are all in (or discarded): when its WRITE was accepted, its record is checked and recorded
 * as a COMMIT frame of the extent behind that WRITE on this connection would be (the same token, read as the WRITE
 * token of the committed extent; no refused WRITE to inherit: it would have been this one). One answer carries the
 * outcome of both. A refused WRITE_COMMIT is not remembered as a failed WRITE: its COMMIT went with it.
 */
static void finish_write_commit(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    const uint32_t length = h->flags;
    int32_t status = c->write_status;
    c->write_commit = 0;
    if (status == GT_OK)
    {
        gt_header commit = *h;
        commit.opcode = GT_OPC_COMMIT;
        commit.flags = 0;
        commit.length = length;
        gt_header_encode(c->request_bytes, &commit);
        const int token_status = commit_token_status(c->loop, &commit, c->buffer, length, c->verified);
        status = server->callbacks.on_commit(server->callbacks.context, c->request_bytes, c->buffer, length, 0,
            token_status);
    }
    free(c->buffer);
    c->buffer = NULL;
    respond(server, c, GT_OPC_WRITE_COMMIT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, h->offset,
        h->length);
    record_latency(c->loop, GT_OP_WRITE, c->write_start_ns);
    c->write_at = NULL;
    c->state = RECEIVE_HEADER;
}

/*
 * A WRITE_COMMIT's record is in (buffer NULL: it was empty or longer than a COMMIT payload may be, and was
 * discarded): the WRITE part is checked as a WRITE frame (token, segment, range; the ledger forgets what the range
 * held) and its bytes received like one; a missing record refuses it with INVALID_PARAMS before any byte moves.
 */
static void start_write(gt_server *server, connection *c, const gt_header *h, int status);

static void finish_write_record(gt_server *server, connection *c)
{
    c->write_commit = 1;
    start_write(server, c, &c->header, c->buffer == NULL ? GT_INVALID_PARAMS : GT_OK);
}

static void finish_readv(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    uint8_t *entries = c->buffer;
    c->buffer = NULL;
    c->state = RECEIVE_HEADER;
    STAT_ADD(server, read_vectors, 1);
    if (entries == NULL)
    {
        respond(server, c, GT_OPC_READV | GT_OPC_RESPONSE_BIT, h->request_id, 0, GT_INVALID_PARAMS, 0, 0);
        return;
    }
    const uint32_t n = h->length / GT_HEADER_LENGTH;
    uint8_t *statuses = malloc((size_t)n * 4u);
    uint8_t **addresses = malloc((size_t)n * sizeof(uint8_t *));
    uint32_t *lengths = malloc((size_t)n * sizeof(uint32_t));
    if (statuses == NULL || addresses == NULL || lengths == NULL)
    {
        free(statuses);
        free(addresses);
        free(lengths);
        free(entries);
        respond(server, c, GT_OPC_READV | GT_OPC_RESPONSE_BIT, h->request_id, 0, GT_INVALID_PARAMS, 0, 0);
        return;
    }
    uint64_t response_bytes = (uint64_t)n * 4u;
    for (uint32_t i = 0; i < n; i++)
    {
        STAT_ADD(server, requests, 1);
        gt_header entry;
        int status = GT_INVALID_PARAMS;
        addresses[i] = NULL;
        lengths[i] = 0;
        const int decoded = gt_header_decode(entries + (size_t)i * GT_HEADER_LENGTH, server->config.max_frame_bytes,
            &entry);
        if (decoded == GT_DECODE_OK && entry.opcode == GT_OPC_READ)
        {
            status = check_request(c->loop, &entry, &addresses[i], c->verified);
            if (status == GT_OK)
            {
                lengths[i] = entry.length;
                response_bytes += entry.length;
            }
        }
        if (status != GT_OK)
        {
            STAT_ADD(server, error_responses, 1);
        }
        gt_put_u32(statuses + (size_t)i * 4u, (uint32_t)status);
    }
    free(entries);
    if (response_bytes > server->config.max_frame_bytes)
    {
        free(statuses);
        free(addresses);
        free(lengths);
        respond(server, c, GT_OPC_READV | GT_OPC_RESPONSE_BIT, h->request_id, 0, GT_INVALID_PARAMS, 0, 0);
        return;
    }
    respond(server, c, GT_OPC_READV | GT_OPC_RESPONSE_BIT, h->request_id, 0, 0, 0, (uint32_t)response_bytes);
    send_memory(c, NULL, n * 4u, statuses);
    for (uint32_t i = 0; i < n; i++)
    {
        if (lengths[i] > 0)
        {
            send_memory(c, addresses[i], lengths[i], NULL);
        }
    }
    free(addresses);
    free(lengths);
}

/*
 * The outcome of a socket read inside a frame's payload: 1 when bytes came (counted); 0 when none are there now, or the
 * peer closed or the socket broke mid-frame (the connection then closes).
 */
static int payload_read(gt_server *server, connection *c, const ssize_t received)
{
    if (received > 0)
    {
        STAT_ADD(server, bytes_in, (uint64_t)received);
        return 1;
    }
    if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    {
        return 0;
    }
    c->closing = 1;
    c->close_reason = "connection closed inside a frame (truncated frame)";
    return 0;
}

/* What a WRITEV header says can be checked before its payload: status 0, 1..1024 entries, a table that holds their
 * headers, fits GT_MAX_WRITEV_TABLE and the frame (docs/protocol.md "WRITEV"). */
static int writev_header_ok(const gt_header *h)
{
    return h->status == 0 && h->flags >= 1 && h->flags <= GT_MAX_VECTOR_ENTRIES &&
        h->offset >= (uint64_t)h->flags * GT_HEADER_LENGTH && h->offset <= GT_MAX_WRITEV_TABLE &&
        h->offset <= h->length;
}

/*
 * The entries of a WRITEV's table, or NULL when the vector is refused as a whole: an entry that does not decode or is
 * not a WRITE_COMMIT, a record of 0 or more than GT_MAX_COMMIT_PAYLOAD bytes, an empty value, or lengths that do not
 * add up to the table and the frame. The entries point into the table for their records.
 */
static writev_entry *writev_parse(gt_server *server, const gt_header *h, const uint8_t *table)
{
    const uint32_t n = h->flags;
    writev_entry *entries = table != NULL ? calloc(n, sizeof(writev_entry)) : NULL;
    if (entries == NULL)
    {
        return NULL;
    }
    uint64_t records = (uint64_t)n * GT_HEADER_LENGTH;
    uint64_t values = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        gt_header *e = &entries[i].header;
        if (gt_header_decode(table + (size_t)i * GT_HEADER_LENGTH, server->config.max_frame_bytes, e) !=
            GT_DECODE_OK || e->opcode != GT_OPC_WRITE_COMMIT || e->flags == 0 || e->flags > GT_MAX_COMMIT_PAYLOAD ||
            e->length == 0 || records + e->flags > h->offset)
        {
            free(entries);
            return NULL;
        }
        entries[i].record = table + records;
        records += e->flags;
        values += e->length;
    }
    if (records != h->offset || values != h->length - h->offset)
    {
        free(entries);
        return NULL;
    }
    return entries;
}

static void finish_writev(gt_server *server, connection *c);

/*
 * The ledger of every entry that passed its checks (`passed` of the n) forgets what its range held: one on_writes call
 * for all of them, or on_write per entry (also when the arrays cannot be had).
 */
static void writev_before_write(gt_server *server, writev_entry *entries, const uint32_t n, const uint32_t passed)
{
    const gt_server_callbacks *cb = &server->callbacks;
    uint8_t *arrays = cb->on_writes != NULL ? malloc((size_t)passed * (4 + 8 + 4 + 4)) : NULL;
    if (arrays == NULL)
    {
        for (uint32_t i = 0; i < n; i++)
        {
            writev_entry *e = &entries[i];
            if (e->status == GT_OK)
            {
                e->status = cb->on_write(cb->context, e->header.segment_id, e->header.offset, e->header.length);
            }
        }
        return;
    }
    uint64_t *offsets = (uint64_t *)arrays;
    uint32_t *segment_ids = (uint32_t *)(arrays + (size_t)passed * 8);
    uint32_t *lengths = segment_ids + passed;
    int32_t *statuses = (int32_t *)(lengths + passed);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        if (entries[i].status == GT_OK)
        {
            segment_ids[k] = entries[i].header.segment_id;
            offsets[k] = entries[i].header.offset;
            lengths[k] = entries[i].header.length;
            statuses[k] = GT_INTERNAL_ERROR;
            k++;
        }
    }
    cb->on_writes(cb->context, passed, segment_ids, offsets, lengths, statuses);
    k = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        if (entries[i].status == GT_OK)
        {
            entries[i].status = statuses[k++];
        }
    }
    free(arrays);
}

/* The COMMIT header of a WRITEV entry: its WRITE_COMMIT header as a COMMIT of its record. */
static void writev_commit_header(const writev_entry *e, gt_header *commit)
{
    *commit = e->header;
    commit->opcode = GT_OPC_COMMIT;
    commit->flags = 0;
    commit->length = e->header.flags;
}

/*
 * Every entry whose bytes landed (status 0; `landed` of the n) has its record checked and recorded: one on_commits
 * call for all of them, or on_commit per entry. Each entry's status becomes the outcome.
 */
static void writev_commit(gt_server *server, connection *c, writev_entry *entries, const uint32_t n,
    const uint32_t landed)
{
    const gt_server_callbacks *cb = &server->callbacks;
    const size_t per_entry = GT_HEADER_LENGTH + sizeof(uint8_t *) + 4 + 4 + 4;
    uint8_t *arrays = cb->on_commits != NULL ? malloc((size_t)landed * per_entry) : NULL;
    if (arrays == NULL)
    {
        for (uint32_t i = 0; i < n; i++)
        {
            writev_entry *e = &entries[i];
            if (e->status == GT_OK)
            {
                gt_header commit;
                writev_commit_header(e, &commit);
                gt_header_encode(c->request_bytes, &commit);
                const int token_status = commit_token_status(c->loop, &commit, e->record, commit.length, c->verified);
                e->status = cb->on_commit(cb->context, c->request_bytes, e->record, commit.length, 0, token_status);
            }
        }
        return;
    }
    const uint8_t **records = (const uint8_t **)arrays;
    uint8_t *headers = arrays + (size_t)landed * sizeof(uint8_t *);
    uint32_t *record_lengths = (uint32_t *)(headers + (size_t)landed * GT_HEADER_LENGTH);
    int32_t *token_statuses = (int32_t *)(record_lengths + landed);
    int32_t *statuses = token_statuses + landed;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        const writev_entry *e = &entries[i];
        if (e->status == GT_OK)
        {
            gt_header commit;
            writev_commit_header(e, &commit);
            gt_header_encode(headers + (size_t)k * GT_HEADER_LENGTH, &commit);
            records[k] = e->record;
            record_lengths[k] = commit.length;
            token_statuses[k] = commit_token_status(c->loop, &commit, e->record, commit.length, c->verified);
            statuses[k] = GT_INTERNAL_ERROR;
            k++;
        }
    }
    cb->on_commits(cb->context, landed, headers, records, record_lengths, token_statuses, statuses);
    k = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        if (entries[i].status == GT_OK)
        {
            entries[i].status = statuses[k++];
        }
    }
    free(arrays);
}

/*
 * A WRITEV's table is in (buffer NULL: the header was refused, or no memory, and the bytes were discarded): every
 * entry's WRITE part is checked as a WRITE_COMMIT's (token, segment, range; the ledger forgets what the range held)
 * before any value byte moves, then the values are received. A refused vector has the rest of its bytes discarded.
 */
static void finish_writev_table(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    c->wv_table = c->buffer;
    c->buffer = NULL;
    c->wv = writev_parse(server, h, c->wv_table);
    c->wv_next = 0;
    c->wv_fill = 0;
    c->state = RECEIVE_WRITEV_VALUES;
    /* a header refused before its table was read had every byte of the frame discarded already */
    c->remaining = writev_header_ok(h) ? h->length - h->offset : 0;
    uint32_t passed = 0;
    for (uint32_t i = 0; c->wv != NULL && i < h->flags; i++)
    {
        writev_entry *e = &c->wv[i];
        STAT_ADD(server, requests, 1);
        gt_header as_write = e->header;
        as_write.opcode = GT_OPC_WRITE;
        as_write.flags = 0;
        e->status = check_request(c->loop, &as_write, &e->at, c->verified);
        passed += e->status == GT_OK;
    }
    if (passed > 0)
    {
        writev_before_write(server, c->wv, h->flags, passed);
    }
    for (uint32_t i = 0; c->wv != NULL && i < h->flags; i++)
    {
        if (c->wv[i].status != GT_OK)
        {
            c->wv[i].at = NULL;
        }
    }
    if (c->remaining == 0)
    {
        finish_writev(server, c);
    }
}

/* Accounts n bytes of a WRITEV's values that reached their place (or were discarded), entry by entry. */
static void writev_received(gt_server *server, connection *c, uint64_t n)
{
    c->remaining -= n;
    while (c->wv != NULL && n > 0)
    {
        const uint32_t length = c->wv[c->wv_next].header.length;
        const uint64_t take = length - c->wv_fill < n ? length - c->wv_fill : n;
        c->wv_fill += (uint32_t)take;
        n -= take;
        if (c->wv_fill == length)
        {
            c->wv_next++;
            c->wv_fill = 0;
        }
    }
    if (c->remaining == 0)
    {
        finish_writev(server, c);
    }
}

/*
 * A WRITEV's values: staged bytes are copied into the current entry's place; from the socket, one scattering read
 * takes the values of up to MAX_IOV entries straight into segment memory (a refused entry's bytes into the discard
 * buffer, which ends the read there). 1 to go on, 0 when the socket is empty.
 */
static int receive_writev_values(gt_server *server, connection *c)
{
    uint8_t *discard = c->loop->discard;
    const uint32_t staged = c->staged_end - c->staged_start;
    if (staged > 0)
    {
        uint64_t got = c->remaining < staged ? c->remaining : staged;
        if (c->wv != NULL)
        {
            const writev_entry *e = &c->wv[c->wv_next];
            got = e->header.length - c->wv_fill < got ? e->header.length - c->wv_fill : got;
            if (e->at != NULL)
            {
                memcpy(e->at + c->wv_fill, c->staging + c->staged_start, got);
            }
        }
        c->staged_start += (uint32_t)got;
        writev_received(server, c, got);
        return 1;
    }
    struct iovec iov[MAX_IOV];
    int n = 0;
    if (c->wv == NULL)
    {
        iov[0].iov_base = discard;
        iov[0].iov_len = c->remaining < STAGING_BYTES ? c->remaining : STAGING_BYTES;
        n = 1;
    }
    for (uint32_t i = c->wv_next; c->wv != NULL && i < c->header.flags && n < MAX_IOV; i++)
    {
        const writev_entry *e = &c->wv[i];
        const uint32_t skip = i == c->wv_next ? c->wv_fill : 0;
        const uint32_t length = e->header.length - skip;
        if (e->at != NULL)
        {
            iov[n].iov_base = e->at + skip;
            iov[n].iov_len = length;
            n++;
            continue;
        }
        iov[n].iov_base = discard;
        iov[n].iov_len = length < STAGING_BYTES ? length : STAGING_BYTES;
        n++;
        break;
    }
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = iov;
    message.msg_iovlen = (size_t)n;
    const ssize_t received = recvmsg(c->fd, &message, MSG_DONTWAIT);
    if (!payload_read(server, c, received))
    {
        return 0;
    }
    writev_received(server, c, (uint64_t)received);
    return 1;
}

/*
 * Every value of a WRITEV is in (or discarded): each accepted entry's record is checked and recorded as its
 * WRITE_COMMIT's would be, in entry order, and one answer carries every entry's status. A vector refused as a whole
 * gets a header-only INVALID_PARAMS.
 */
static void finish_writev(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    writev_entry *entries = c->wv;
    const uint32_t n = h->flags;
    c->wv = NULL;
    c->state = RECEIVE_HEADER;
    STAT_ADD(server, write_vectors, 1);
    uint8_t *statuses = entries != NULL ? malloc((size_t)n * 4u) : NULL;
    if (statuses == NULL)
    {
        free(entries);
        free(c->wv_table);
        c->wv_table = NULL;
        respond(server, c, GT_OPC_WRITEV | GT_OPC_RESPONSE_BIT, h->request_id, 0, GT_INVALID_PARAMS, 0, 0);
        return;
    }
    uint32_t landed = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        landed += entries[i].status == GT_OK;
    }
    if (landed > 0)
    {
        writev_commit(server, c, entries, n, landed);
    }
    for (uint32_t i = 0; i < n; i++)
    {
        const int32_t status = entries[i].status;
        if (status != GT_OK)
        {
            STAT_ADD(server, error_responses, 1);
        }
        gt_put_u32(statuses + (size_t)i * 4u, (uint32_t)status);
        record_latency(c->loop, GT_OP_WRITE, c->write_start_ns);
    }
    free(entries);
    free(c->wv_table);
    c->wv_table = NULL;
    respond(server, c, GT_OPC_WRITEV | GT_OPC_RESPONSE_BIT, h->request_id, 0, 0, 0, n * 4u);
    send_memory(c, NULL, n * 4u, statuses);
}

/*
 * The node's side of the QP-information exchange (docs/protocol.md, "RDMA: queue-pair information"): the status of
 * the answer, and the node's record in local when it is 0. Checked in the order of every frame: the request itself
 * (status, offset, a 64-byte record that decodes and names the header's segment), then access, then the segment, then
 * the device. One-sided operations bypass the per-frame token check, so a node with a token key hands out no remote
 * key at all (ACCESS_DENIED): RDMA is for trusted networks with data tokens off.
 */
/*
 * A queue pair of the node for connection c towards the client's remote, reaching segment_id: the device is opened
 * and the segment registered on first use (under the tables' mutex, against the owner's table itself, so that a
 * segment being removed is never registered), the QP brought up to RTS outside it. GT_OK with local filled in,
 * SEGMENT_NOT_FOUND when the segment just left, UNAVAILABLE without a device or registration, TRANSFER_FAIL when the
 * QP does not come up.
 */
static int rdma_bring_up(gt_server *server, connection *c, const uint32_t segment_id, const gt_qp_info *remote,
    gt_qp_info *local)
{
    gt_error error;
    pthread_mutex_lock(&server->mutex);
    const segment_entry *segment = NULL;
    for (int i = 0; i < server->segment_count; i++)
    {
        if (server->segments[i].id == segment_id)
        {
            segment = &server->segments[i];
            break;
        }
    }
    if (segment == NULL)
    {
        pthread_mutex_unlock(&server->mutex);
        return GT_SEGMENT_NOT_FOUND;
    }
    const uint64_t base = (uint64_t)(uintptr_t)segment->address;
    const uint64_t size = segment->size;
    if (server->rdma_device == NULL && gt_rdma_device_open(&server->rdma_device, &error) != GT_OK)
    {
        pthread_mutex_unlock(&server->mutex);
        return GT_UNAVAILABLE;
    }
    const gt_mr_entry *registration = gt_mr_table_find(&server->rdma_registrations, base, size);
    if (registration == NULL || registration->address != base || registration->length != size)
    {
        gt_mr_entry entry = { .address = base, .length = size };
        entry.handle = gt_rdma_register(server->rdma_device, segment->address, size, &entry.lkey, &entry.rkey,
            &error);
        if (entry.handle == NULL || gt_mr_table_add(&server->rdma_registrations, &entry) != GT_OK)
        {
            gt_rdma_deregister(server->rdma_device, entry.handle);
            pthread_mutex_unlock(&server->mutex);
            return GT_UNAVAILABLE;
        }
        registration = gt_mr_table_find(&server->rdma_registrations, base, size);
    }
    const uint32_t rkey = registration->rkey;
    gt_rdma_link *link = NULL;
    const int opened = gt_rdma_link_open(server->rdma_device, 1, &link, local, &error);
    pthread_mutex_unlock(&server->mutex);
    if (opened != GT_OK)
    {
        return opened == GT_UNAVAILABLE ? GT_UNAVAILABLE : GT_TRANSFER_FAIL;
    }
    if (gt_rdma_link_connect(link, remote, &error) != GT_OK)
    {
        gt_rdma_link_close(link);
        memset(local, 0, sizeof(*local));
        return GT_TRANSFER_FAIL;
    }
    c->rdma_links[c->rdma_link_count++] = link;
    local->segment_id = segment_id;
    local->rkey = rkey;
    local->segment_address = base;
    local->segment_length = size;
    return GT_OK;
}

static int rdma_connect_status(server_loop *loop, connection *c, const gt_header *h, const uint8_t *record,
    gt_qp_info *local)
{
    memset(local, 0, sizeof(*local));
    gt_qp_info remote;
    if (h->status != 0 || h->offset != 0 || record == NULL || gt_qp_info_decode(record, &remote) != GT_OK ||
        remote.segment_id != h->segment_id)
    {
        return GT_INVALID_PARAMS;
    }
    if (loop->has_key)
    {
        return GT_ACCESS_DENIED;
    }
    int found = 0;
    for (int i = 0; i < loop->segment_count; i++)
    {
        if (loop->segments[i].id == h->segment_id)
        {
            found = 1;
            break;
        }
    }
    if (!found)
    {
        return GT_SEGMENT_NOT_FOUND;
    }
    if (c->rdma_link_count == MAX_RDMA_LINKS)
    {
        return GT_UNAVAILABLE;
    }
    return rdma_bring_up(loop->server, c, h->segment_id, &remote, local);
}

static void finish_rdma_connect(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    gt_qp_info local;
    const int status = rdma_connect_status(c->loop, c, h, c->buffer, &local);
    free(c->buffer);
    c->buffer = NULL;
    c->state = RECEIVE_HEADER;
    if (status != GT_OK)
    {
        respond(server, c, GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, 0, 0);
        return;
    }
    uint8_t *answer = malloc(GT_QP_INFO_LENGTH);
    if (answer == NULL)
    {
        respond(server, c, GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id,
            GT_INTERNAL_ERROR, 0, 0);
        return;
    }
    gt_qp_info_encode(answer, &local);
    respond(server, c, GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, 0, 0,
        GT_QP_INFO_LENGTH);
    send_memory(c, NULL, GT_QP_INFO_LENGTH, answer);
}

/* 1 when the connection's peer is on this host: a loopback address, or the very address it reached us on. */
static int peer_is_local(const connection *c)
{
    struct sockaddr_storage peer;
    struct sockaddr_storage self;
    socklen_t peer_length = sizeof(peer);
    socklen_t self_length = sizeof(self);
    if (getpeername(c->fd, (struct sockaddr *)&peer, &peer_length) != 0 ||
        getsockname(c->fd, (struct sockaddr *)&self, &self_length) != 0)
    {
        return 0;
    }
    return gt_address_is_loopback((const struct sockaddr *)&peer) ||
        gt_address_same_ip((const struct sockaddr *)&peer, (const struct sockaddr *)&self);
}

/*
 * LOCAL_CONNECT (docs/protocol.md): where segment h->segment_id lies in this process, for a client on this host that
 * can read and write this process's memory (it proves that by reading the cookie back). No token: the record lets only
 * such a process do anything, and it could read the token key as well.
 */
static void answer_local_connect(gt_server *server, connection *c, const gt_header *h)
{
    server_loop *loop = c->loop;
    int status = GT_OK;
    const segment_entry *segment = NULL;
    if (h->status != 0 || h->offset != 0 || h->length != 0)
    {
        status = GT_INVALID_PARAMS;
    }
    else if (!server->config.local_transfers || !peer_is_local(c))
    {
        status = GT_UNAVAILABLE;
    }
    else
    {
        for (int i = 0; i < loop->segment_count && segment == NULL; i++)
        {
            if (loop->segments[i].id == h->segment_id)
            {
                segment = &loop->segments[i];
            }
        }
        status = segment == NULL ? GT_SEGMENT_NOT_FOUND : GT_OK;
    }
    uint8_t *answer = status == GT_OK ? malloc(GT_LOCAL_INFO_LENGTH) : NULL;
    if (status == GT_OK && answer == NULL)
    {
        status = GT_INTERNAL_ERROR;
    }
    if (status != GT_OK)
    {
        respond(server, c, GT_OPC_LOCAL_CONNECT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, 0, 0);
        return;
    }
    const gt_local_info info = {
        .pid = (uint32_t)getpid(),
        .cookie = server->local_cookie,
        .cookie_address = (uint64_t)(uintptr_t)&server->local_cookie,
        .generation = loop->generation, /* the table this answer was read from */
        .generation_address = (uint64_t)(uintptr_t)&server->generation,
        .segment_address = (uint64_t)(uintptr_t)segment->address,
        .segment_length = segment->size,
    };
    gt_local_info_encode(answer, &info);
    respond(server, c, GT_OPC_LOCAL_CONNECT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, 0, 0,
        GT_LOCAL_INFO_LENGTH);
    send_memory(c, NULL, GT_LOCAL_INFO_LENGTH, answer);
}

/*
 * The WRITE part of a WRITE or WRITE_COMMIT frame: checked as a WRITE (status is a refusal found already, else GT_OK),
 * then the ledger forgets what the range held; its bytes go to segment memory, or are discarded when refused.
 */
static void start_write(gt_server *server, connection *c, const gt_header *h, int status)
{
    uint8_t *address = NULL;
    if (status == GT_OK)
    {
        gt_header as_write = *h;
        as_write.opcode = GT_OPC_WRITE;
        as_write.flags = 0;
        status = check_request(c->loop, &as_write, &address, c->verified);
    }
    if (status == GT_OK)
    {
        /* the ledger forgets what the range held, or the segment was re-keyed */
        status = server->callbacks.on_write(server->callbacks.context, h->segment_id, h->offset, h->length);
    }
    c->write_status = status;
    c->write_at = status == GT_OK ? address : NULL;
    c->remaining = h->length;
    c->last_write_large = c->write_at != NULL && h->length >= LARGE_WRITE_BYTES;
    c->state = RECEIVE_WRITE;
    if (c->remaining == 0)
    {
        finish_write(server, c);
    }
}

/* A complete header is in c->header_bytes: decode it, check it, and set up what its payload needs. */
static void on_header(gt_server *server, connection *c)
{
    gt_header *h = &c->header;
    c->header_fill = 0;
    loop_refresh(c->loop);
    int decoded = gt_header_decode(c->header_bytes, server->config.max_frame_bytes, h);
    if (decoded == GT_DECODE_OK && !gt_opcode_is_request(h->opcode))
    {
        decoded = GT_DECODE_BAD_OPCODE;
    }
    if (decoded != GT_DECODE_OK)
    {
        /* The stream cannot be resynchronised: say why once and hang up. */
        STAT_ADD(server, protocol_errors, 1);
        c->closing = 1;
        c->close_reason = gt_decode_error_text(decoded);
        return;
    }
    if (h->opcode != GT_OPC_READV && h->opcode != GT_OPC_WRITEV)
    {
        STAT_ADD(server, requests, 1); /* a vector counts its entries */
    }
    uint8_t *address = NULL;
    switch (h->opcode)
    {
        case GT_OPC_READ:
        {
            const uint64_t start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            c->last_write_large = 0;
            const int status = check_request(c->loop, h, &address, c->verified);
            respond(server, c, GT_OPC_READ | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, h->offset,
                h->length);
            if (status == GT_OK)
            {
                send_memory(c, address, h->length, NULL);
            }
            record_latency(c->loop, GT_OP_READ, start_ns);
            break;
        }
        case GT_OPC_WRITE:
            c->write_start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            c->write_commit = 0;
            start_write(server, c, h, GT_OK);
            break;
        case GT_OPC_WRITE_COMMIT:
            c->write_start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            c->last_write_large = 0;
            c->remaining = h->flags;
            c->buffer_fill = 0;
            c->buffer = h->flags > 0 && h->flags <= GT_MAX_COMMIT_PAYLOAD ? malloc(h->flags) : NULL;
            c->state = RECEIVE_WRITE_RECORD;
            if (c->remaining == 0)
            {
                finish_write_record(server, c);
            }
            break;
        case GT_OPC_COMMIT:
            memcpy(c->request_bytes, c->header_bytes, GT_HEADER_LENGTH);
            c->remaining = h->length;
            c->buffer_fill = 0;
            c->buffer = h->length > 0 && h->length <= GT_MAX_COMMIT_PAYLOAD ? malloc(h->length) : NULL;
            c->state = RECEIVE_COMMIT;
            if (c->remaining == 0)
            {
                finish_commit(server, c);
            }
            break;
        case GT_OPC_RDMA_CONNECT:
            c->last_write_large = 0;
            c->remaining = h->length;
            c->buffer_fill = 0;
            c->buffer = h->length == GT_QP_INFO_LENGTH ? malloc(GT_QP_INFO_LENGTH) : NULL;
            c->state = RECEIVE_RDMA_CONNECT;
            if (c->remaining == 0)
            {
                finish_rdma_connect(server, c);
            }
            break;
        case GT_OPC_LOCAL_CONNECT:
            c->last_write_large = 0;
            answer_local_connect(server, c, h);
            break;
        case GT_OPC_READV:
        {
            c->last_write_large = 0;
            const int well_formed = h->status == 0 && h->length > 0 && h->length % GT_HEADER_LENGTH == 0 &&
                h->length / GT_HEADER_LENGTH <= GT_MAX_VECTOR_ENTRIES;
            c->remaining = h->length;
            c->buffer_fill = 0;
            c->buffer = well_formed ? malloc(h->length) : NULL;
            c->state = RECEIVE_READV;
            if (c->remaining == 0)
            {
                finish_readv(server, c);
            }
            break;
        }
        case GT_OPC_WRITEV:
        {
            c->write_start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            c->last_write_large = 0;
            const int well_formed = writev_header_ok(h);
            c->remaining = well_formed ? h->offset : h->length;
            c->buffer_fill = 0;
            c->buffer = well_formed ? malloc(h->offset) : NULL;
            c->state = RECEIVE_WRITEV_TABLE;
            if (c->remaining == 0)
            {
                finish_writev_table(server, c);
            }
            break;
        }
        default:
            respond(server, c, GT_OPC_PING | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, 0, h->offset,
                h->length);
            break;
    }
}

/* Payload bytes for the current request, from staging or the socket; 1 to go on, 0 when the socket is empty. */
static int receive_payload(gt_server *server, connection *c)
{
    if (c->state == RECEIVE_WRITEV_VALUES)
    {
        return receive_writev_values(server, c);
    }
    uint8_t *discard = c->loop->discard;
    uint8_t *into;
    uint64_t cap = c->remaining;
    if (c->state == RECEIVE_WRITE)
    {
        into = c->write_at != NULL ? c->write_at : discard;
    }
    else
    {
        into = c->buffer != NULL ? c->buffer + c->buffer_fill : discard;
    }
    if (into == discard && cap > STAGING_BYTES)
    {
        cap = STAGING_BYTES;
    }
    uint64_t got;
    const uint32_t staged = c->staged_end - c->staged_start;
    if (staged > 0)
    {
        got = cap < staged ? cap : staged;
        if (into != discard)
        {
            memcpy(into, c->staging + c->staged_start, got);
        }
        c->staged_start += (uint32_t)got;
    }
    else
    {
        const ssize_t received = recv(c->fd, into, cap, MSG_DONTWAIT);
        if (!payload_read(server, c, received))
        {
            return 0;
        }
        got = (uint64_t)received;
    }
    c->remaining -= got;
    if (c->state == RECEIVE_WRITE)
    {
        if (c->write_at != NULL)
        {
            c->write_at += got;
        }
    }
    else if (c->buffer != NULL)
    {
        c->buffer_fill += (uint32_t)got;
    }
    if (c->remaining == 0)
    {
        if (c->state == RECEIVE_WRITE)
        {
            finish_write(server, c);
        }
        else if (c->state == RECEIVE_COMMIT)
        {
            finish_commit(server, c);
        }
        else if (c->state == RECEIVE_WRITE_RECORD)
        {
            finish_write_record(server, c);
        }
        else if (c->state == RECEIVE_RDMA_CONNECT)
        {
            finish_rdma_connect(server, c);
        }
        else if (c->state == RECEIVE_WRITEV_TABLE)
        {
            finish_writev_table(server, c);
        }
        else
        {
            finish_readv(server, c);
        }
    }
    return 1;
}

static void on_readable(gt_server *server, connection *c)
{
    /* Staged bytes are always consumed (no event would come for them); only socket reads are bounded. */
    int reads = 0;
    while (!c->closing && (reads < 64 || c->staged_end > c->staged_start))
    {
        if (c->state != RECEIVE_HEADER)
        {
            if (c->staged_end == c->staged_start)
            {
                reads++;
            }
            if (!receive_payload(server, c))
            {
                break;
            }
            continue;
        }
        const uint32_t staged = c->staged_end - c->staged_start;
        if (staged > 0)
        {
            const uint32_t need = GT_HEADER_LENGTH - c->header_fill;
            const uint32_t take = need < staged ? need : staged;
            memcpy(c->header_bytes + c->header_fill, c->staging + c->staged_start, take);
            c->header_fill += take;
            c->staged_start += take;
            if (c->header_fill == GT_HEADER_LENGTH)
            {
                on_header(server, c);
            }
            continue;
        }
        if (c->reading_paused || c->queued_bytes > HIGH_WATER_BYTES)
        {
            break; /* responses are not leaving: stop taking requests until they do */
        }
        ssize_t received;
        reads++;
        if (c->last_write_large)
        {
            /* After a large WRITE the next frame is likely another: its header alone, then the payload in place. */
            received = recv(c->fd, c->header_bytes + c->header_fill, GT_HEADER_LENGTH - c->header_fill,
                MSG_DONTWAIT);
            if (received > 0)
            {
                STAT_ADD(server, bytes_in, (uint64_t)received);
                c->header_fill += (uint32_t)received;
                if (c->header_fill == GT_HEADER_LENGTH)
                {
                    on_header(server, c);
                }
                continue;
            }
        }
        else
        {
            c->staged_start = 0;
            c->staged_end = 0;
            received = recv(c->fd, c->staging, STAGING_BYTES, MSG_DONTWAIT);
            if (received > 0)
            {
                STAT_ADD(server, bytes_in, (uint64_t)received);
                c->staged_end = (uint32_t)received;
                continue;
            }
        }
        if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        {
            break;
        }
        c->closing = 1; /* the peer closed or the socket broke */
        if (c->header_fill > 0 || c->state != RECEIVE_HEADER)
        {
            c->close_reason = "connection closed inside a frame (truncated frame)";
        }
        break;
    }
}

static void close_connection(gt_server *server, connection *c, const char *reason)
{
    server_loop *loop = c->loop;
    if (server->callbacks.on_close != NULL)
    {
        server->callbacks.on_close(server->callbacks.context, c->peer, reason);
    }
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    for (uint32_t i = 0; i < c->items_count; i++)
    {
        free(c->items[c->items_head + i].owned);
    }
    free(c->items);
    free(c->buffer);
    free(c->wv);
    free(c->wv_table);
    for (uint32_t i = 0; i < c->rdma_link_count; i++)
    {
        gt_rdma_link_close(c->rdma_links[i]);
    }
    if (c->prev != NULL)
    {
        c->prev->next = c->next;
    }
    else
    {
        loop->connections = c->next;
    }
    if (c->next != NULL)
    {
        c->next->prev = c->prev;
    }
    STAT_ADD(server, connections_closed, 1);
    free(c);
}

/* Registers a connection with its loop's epoll set and list (on that loop's thread). */
static void adopt(server_loop *loop, connection *c)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
    {
        close(c->fd);
        free(c);
        STAT_ADD(loop->server, connections_closed, 1);
        return;
    }
    c->prev = NULL;
    c->next = loop->connections;
    if (loop->connections != NULL)
    {
        loop->connections->prev = c;
    }
    loop->connections = c;
}

/* Connections loop 0 accepted for this loop since its last turn. */
static void adopt_handed_over(server_loop *loop)
{
    pthread_mutex_lock(&loop->mutex);
    connection *c = loop->handed_over;
    loop->handed_over = NULL;
    pthread_mutex_unlock(&loop->mutex);
    while (c != NULL)
    {
        connection *next = c->next;
        adopt(loop, c);
        c = next;
    }
}

/* On loop 0: accepts what the backlog holds and gives each connection to the next loop, round-robin. */
static void on_accept(gt_server *server)
{
    for (int i = 0; i < 64; i++)
    {
        struct sockaddr_storage address;
        socklen_t length = sizeof(address);
        const int fd = accept4(server->listen_fd, (struct sockaddr *)&address, &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
        {
            return;
        }
        connection *c = calloc(1, sizeof(connection));
        if (c == NULL)
        {
            close(fd);
            continue;
        }
        const int one = 1;
        const int buffer = SOCKET_BUFFER_BYTES;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
        c->fd = fd;
        char host[INET6_ADDRSTRLEN] = "?";
        uint16_t port = 0;
        if (address.ss_family == AF_INET)
        {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&address)->sin_addr, host, sizeof(host));
            port = ntohs(((struct sockaddr_in *)&address)->sin_port);
        }
        else if (address.ss_family == AF_INET6)
        {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&address)->sin6_addr, host, sizeof(host));
            port = ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
        }
        snprintf(c->peer, sizeof(c->peer), "%s:%u", host, port);
        STAT_ADD(server, connections_opened, 1);
        server_loop *target = &server->loops[server->next_loop++ % server->loop_count];
        c->loop = target;
        if (target->index == 0)
        {
            adopt(target, c);
            continue;
        }
        pthread_mutex_lock(&target->mutex);
        c->next = target->handed_over;
        target->handed_over = c;
        pthread_mutex_unlock(&target->mutex);
        loop_wakeup(target);
    }
}

int gt_server_loop_count(const gt_server *server)
{
    return (int)server->loop_count;
}

int gt_server_run_loop(gt_server *server, const uint32_t index, gt_error *error)
{
    if (index >= server->loop_count)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "no event loop %u (the server has %u)", index, server->loop_count);
    }
    server_loop *loop = &server->loops[index];
    struct epoll_event events[64];
    while (!__atomic_load_n(&server->stopping, __ATOMIC_ACQUIRE))
    {
        const int ready = epoll_wait(loop->epoll_fd, events, 64, 1000);
        if (ready < 0)
        {
            if (errno == EINTR)
            {
                continue;
            }
            return gt_fail(error, GT_INTERNAL_ERROR, "epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < ready; i++)
        {
            void *tag = events[i].data.ptr;
            if (tag == &listener_marker)
            {
                on_accept(server);
                continue;
            }
            if (tag == &wakeup_marker)
            {
                uint64_t value;
                ssize_t ignored = read(loop->event_fd, &value, sizeof(value));
                (void)ignored;
                adopt_handed_over(loop);
                continue;
            }
            connection *c = tag;
            if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            {
                on_readable(server, c);
            }
            flush_latencies(loop); /* recorded before the responses leave, so a client never sees one first */
            if (!c->closing)
            {
                /* One flush for every response this read produced (pipelined requests), or the rest of a send. */
                flush_connection(server, c);
                if (!c->closing && c->state == RECEIVE_HEADER && c->staged_end > c->staged_start &&
                    !c->reading_paused)
                {
                    on_readable(server, c); /* staged requests left after a pause */
                    flush_latencies(loop);
                    flush_connection(server, c);
                }
            }
            if (c->closing)
            {
                close_connection(server, c, c->close_reason);
            }
        }
        flush_latencies(loop);
    }
    return GT_OK;
}

typedef struct loop_thread
{
    gt_server *server;
    uint32_t index;
    int result;
    gt_error error;
} loop_thread;

static void *run_loop_thread(void *argument)
{
    loop_thread *t = argument;
    t->result = gt_server_run_loop(t->server, t->index, &t->error);
    return NULL;
}

int gt_server_run(gt_server *server, gt_error *error)
{
    const uint32_t extra = server->loop_count - 1;
    pthread_t *threads = extra > 0 ? calloc(extra, sizeof(pthread_t)) : NULL;
    loop_thread *runs = extra > 0 ? calloc(extra, sizeof(loop_thread)) : NULL;
    if (extra > 0 && (threads == NULL || runs == NULL))
    {
        free(threads);
        free(runs);
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    uint32_t started = 0;
    for (; started < extra; started++)
    {
        runs[started].server = server;
        runs[started].index = started + 1;
        if (pthread_create(&threads[started], NULL, run_loop_thread, &runs[started]) != 0)
        {
            break;
        }
    }
    int result = started < extra ? gt_fail(error, GT_INTERNAL_ERROR, "cannot start event loop %u", started + 1) :
        gt_server_run_loop(server, 0, error);
    if (started < extra)
    {
        gt_server_stop(server);
    }
    for (uint32_t i = 0; i < started; i++)
    {
        pthread_join(threads[i], NULL);
        if (result == GT_OK && runs[i].result != GT_OK)
        {
            result = runs[i].result;
            *error = runs[i].error;
        }
    }
    free(threads);
    free(runs);
    return result;
}

void gt_server_destroy(gt_server *server)
{
    if (server == NULL)
    {
        return;
    }
    server->callbacks.on_close = NULL;
    /* A same-host client holding a path to this server finds the cookie and generation changed, not a live table. */
    __atomic_store_n(&server->local_cookie, 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&server->generation, 1, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < server->loop_count; i++)
    {
        server_loop *loop = &server->loops[i];
        while (loop->connections != NULL)
        {
            close_connection(server, loop->connections, NULL);
        }
        for (connection *c = loop->handed_over; c != NULL;)
        {
            connection *next = c->next;
            close(c->fd);
            free(c);
            c = next;
        }
        if (loop->epoll_fd >= 0)
        {
            close(loop->epoll_fd);
        }
        if (loop->event_fd >= 0)
        {
            close(loop->event_fd);
        }
        free(loop->segments);
        pthread_mutex_destroy(&loop->mutex);
    }
    free(server->loops);
    for (uint32_t i = 0; i < server->rdma_registrations.count; i++)
    {
        gt_rdma_deregister(server->rdma_device, server->rdma_registrations.entries[i].handle);
    }
    gt_mr_table_free(&server->rdma_registrations);
    gt_rdma_device_close(server->rdma_device);
    if (server->listen_fd >= 0)
    {
        close(server->listen_fd);
    }
    pthread_mutex_destroy(&server->mutex);
    free(server);
}
