/*
 * The native TCP transfer server: serves a storage node's segments over the frame protocol of docs/protocol.md with
 * the checks of the Java FrameHandler, in its order, before any byte moves (decode, status, access token, segment,
 * range; the ledger through the owner's on_write/on_commit callbacks). WRITE payloads are received straight into
 * segment memory, READ and READV payloads sent straight from it.
 *
 * Threading: gt_server_run is the one thread that touches connections; the segment table and the token key are
 * guarded by a mutex so that the owner may replace them from any thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_internal.h"

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

enum receive_state
{
    RECEIVE_HEADER,
    RECEIVE_WRITE,
    RECEIVE_COMMIT,
    RECEIVE_READV
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

struct connection
{
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
    /* COMMIT payload or READV entries: buffer NULL means discard */
    uint8_t *buffer;
    uint32_t buffer_fill;
    uint8_t request_bytes[GT_HEADER_LENGTH];
    failed_write failed[FAILED_WRITES_REMEMBERED];
    uint32_t failed_next;
    /* responses */
    out_item *items;
    uint32_t items_head;
    uint32_t items_count;
    uint32_t items_capacity;
    uint64_t queued_bytes;
    int reading_paused;
    int want_out;
    connection *next;
    connection *prev;
};

typedef struct segment_entry
{
    uint32_t id;
    uint8_t *address;
    uint64_t size;
} segment_entry;

struct gt_server
{
    gt_server_config config;
    gt_server_callbacks callbacks;
    int listen_fd;
    int epoll_fd;
    int event_fd;
    uint16_t port;
    volatile int stopping;
    pthread_mutex_t mutex;
    segment_entry segments[MAX_SEGMENTS]; /* under mutex */
    int segment_count;
    int has_key;                          /* under mutex */
    gt_hmac_key hmac;
    gt_server_stats stats;                /* written by the run thread, read with relaxed atomics */
    connection *connections;
    uint64_t latencies[LATENCY_SAMPLES];  /* run thread only */
    int latency_count;
    uint8_t discard[STAGING_BYTES];
};

#define STAT_ADD(server_, field_, value_) __atomic_add_fetch(&(server_)->stats.field_, (value_), __ATOMIC_RELAXED)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void flush_latencies(gt_server *server)
{
    if (server->latency_count > 0 && server->callbacks.on_latencies != NULL)
    {
        server->callbacks.on_latencies(server->callbacks.context, server->latencies, server->latency_count);
    }
    server->latency_count = 0;
}

static void record_latency(gt_server *server, const uint64_t op, const uint64_t start_ns)
{
    if (server->callbacks.on_latencies == NULL)
    {
        return;
    }
    const uint64_t elapsed = now_ns() - start_ns;
    server->latencies[server->latency_count++] = (op << 62) | (elapsed & ((1ull << 62) - 1));
    if (server->latency_count == LATENCY_SAMPLES)
    {
        flush_latencies(server);
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
    gt_server *server = calloc(1, sizeof(gt_server));
    if (server == NULL)
    {
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    server->config = *config;
    server->config.host = NULL;
    server->callbacks = *callbacks;
    server->listen_fd = -1;
    server->epoll_fd = -1;
    server->event_fd = -1;
    pthread_mutex_init(&server->mutex, NULL);

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

    server->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    server->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (server->epoll_fd < 0 || server->event_fd < 0)
    {
        const int saved = errno;
        gt_server_destroy(server);
        return gt_fail(error, GT_INTERNAL_ERROR, "epoll/eventfd: %s", strerror(saved));
    }
    struct epoll_event listen_event = { .events = EPOLLIN, .data.ptr = &listener_marker };
    struct epoll_event wakeup_event = { .events = EPOLLIN, .data.ptr = &wakeup_marker };
    epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, server->listen_fd, &listen_event);
    epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, server->event_fd, &wakeup_event);
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

void gt_server_stop(gt_server *server)
{
    server->stopping = 1;
    const uint64_t one = 1;
    ssize_t ignored = write(server->event_fd, &one, sizeof(one));
    (void)ignored;
}

/* ---------------------------------------------------------------- checks */

/* The frame's token, like AccessTokenVerifier.Checker: 0, ACCESS_DENIED or TOKEN_EXPIRED. */
static int check_token(gt_server *server, const gt_header *h, const int opcode)
{
    gt_hmac_key hmac;
    pthread_mutex_lock(&server->mutex);
    const int has_key = server->has_key;
    if (has_key)
    {
        hmac = server->hmac;
    }
    pthread_mutex_unlock(&server->mutex);
    if (!has_key)
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
    if (!gt_token_verify(&hmac, opcode, h->segment_id, h->offset - h->grant_delta, h->grant_length,
        h->token_expiry, h->token_mac))
    {
        STAT_ADD(server, tokens_invalid, 1);
        return GT_ACCESS_DENIED;
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
static int check_request(gt_server *server, const gt_header *h, uint8_t **address)
{
    *address = NULL;
    if (h->status != 0)
    {
        return GT_INVALID_PARAMS;
    }
    const int token = check_token(server, h, h->opcode);
    if (token != GT_OK)
    {
        return token;
    }
    int found = 0;
    uint8_t *base = NULL;
    uint64_t size = 0;
    pthread_mutex_lock(&server->mutex);
    for (int i = 0; i < server->segment_count; i++)
    {
        if (server->segments[i].id == h->segment_id)
        {
            found = 1;
            base = server->segments[i].address;
            size = server->segments[i].size;
            break;
        }
    }
    pthread_mutex_unlock(&server->mutex);
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
        epoll_ctl(server->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
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

static int32_t take_failed_write(connection *c, const uint32_t segment_id, const uint64_t offset)
{
    for (uint32_t i = 0; i < FAILED_WRITES_REMEMBERED; i++)
    {
        failed_write *f = &c->failed[i];
        if (f->status != 0 && f->segment_id == segment_id && f->offset == offset)
        {
            const int32_t status = f->status;
            f->status = 0;
            return status;
        }
    }
    return 0;
}

static void finish_write(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    remember_write(c, h->segment_id, h->offset, c->write_status);
    respond(server, c, GT_OPC_WRITE | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, c->write_status, h->offset,
        h->length);
    record_latency(server, GT_OP_WRITE, c->write_start_ns);
    c->write_at = NULL;
    c->state = RECEIVE_HEADER;
}

static void finish_commit(gt_server *server, connection *c)
{
    const gt_header *h = &c->header;
    const int32_t failed = take_failed_write(c, h->segment_id, h->offset);
    const int status = server->callbacks.on_commit(server->callbacks.context, c->request_bytes, c->buffer,
        c->buffer == NULL ? 0 : h->length, failed);
    free(c->buffer);
    c->buffer = NULL;
    respond(server, c, GT_OPC_COMMIT | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, h->offset,
        h->length);
    c->state = RECEIVE_HEADER;
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
            status = check_request(server, &entry, &addresses[i]);
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

/* A complete header is in c->header_bytes: decode it, check it, and set up what its payload needs. */
static void on_header(gt_server *server, connection *c)
{
    gt_header *h = &c->header;
    c->header_fill = 0;
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
    if (h->opcode != GT_OPC_READV)
    {
        STAT_ADD(server, requests, 1);
    }
    uint8_t *address = NULL;
    switch (h->opcode)
    {
        case GT_OPC_READ:
        {
            const uint64_t start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            c->last_write_large = 0;
            const int status = check_request(server, h, &address);
            respond(server, c, GT_OPC_READ | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, status, h->offset,
                h->length);
            if (status == GT_OK)
            {
                send_memory(c, address, h->length, NULL);
            }
            record_latency(server, GT_OP_READ, start_ns);
            break;
        }
        case GT_OPC_WRITE:
        {
            c->write_start_ns = server->callbacks.on_latencies != NULL ? now_ns() : 0;
            int status = check_request(server, h, &address);
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
            break;
        }
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
        default:
            respond(server, c, GT_OPC_PING | GT_OPC_RESPONSE_BIT, h->request_id, h->segment_id, 0, h->offset,
                h->length);
            break;
    }
}

/* Payload bytes for the current request, from staging or the socket; 1 to go on, 0 when the socket is empty. */
static int receive_payload(gt_server *server, connection *c)
{
    uint8_t *into;
    uint64_t cap = c->remaining;
    if (c->state == RECEIVE_WRITE)
    {
        into = c->write_at != NULL ? c->write_at : server->discard;
    }
    else
    {
        into = c->buffer != NULL ? c->buffer + c->buffer_fill : server->discard;
    }
    if (into == server->discard && cap > STAGING_BYTES)
    {
        cap = STAGING_BYTES;
    }
    uint64_t got;
    const uint32_t staged = c->staged_end - c->staged_start;
    if (staged > 0)
    {
        got = cap < staged ? cap : staged;
        if (into != server->discard)
        {
            memcpy(into, c->staging + c->staged_start, got);
        }
        c->staged_start += (uint32_t)got;
    }
    else
    {
        const ssize_t received = recv(c->fd, into, cap, MSG_DONTWAIT);
        if (received <= 0)
        {
            if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            {
                return 0;
            }
            c->closing = 1;
            c->close_reason = "connection closed inside a frame (truncated frame)";
            return 0;
        }
        STAT_ADD(server, bytes_in, (uint64_t)received);
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
    if (server->callbacks.on_close != NULL)
    {
        server->callbacks.on_close(server->callbacks.context, c->peer, reason);
    }
    epoll_ctl(server->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    for (uint32_t i = 0; i < c->items_count; i++)
    {
        free(c->items[c->items_head + i].owned);
    }
    free(c->items);
    free(c->buffer);
    if (c->prev != NULL)
    {
        c->prev->next = c->next;
    }
    else
    {
        server->connections = c->next;
    }
    if (c->next != NULL)
    {
        c->next->prev = c->prev;
    }
    STAT_ADD(server, connections_closed, 1);
    free(c);
}

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
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
        if (epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        {
            close(fd);
            free(c);
            continue;
        }
        c->next = server->connections;
        if (server->connections != NULL)
        {
            server->connections->prev = c;
        }
        server->connections = c;
        STAT_ADD(server, connections_opened, 1);
    }
}

int gt_server_run(gt_server *server, gt_error *error)
{
    struct epoll_event events[64];
    while (!server->stopping)
    {
        const int ready = epoll_wait(server->epoll_fd, events, 64, 1000);
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
                ssize_t ignored = read(server->event_fd, &value, sizeof(value));
                (void)ignored;
                continue;
            }
            connection *c = tag;
            if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            {
                on_readable(server, c);
            }
            flush_latencies(server); /* recorded before the responses leave, so a client never sees one first */
            if (!c->closing)
            {
                /* One flush for every response this read produced (pipelined requests), or the rest of a send. */
                flush_connection(server, c);
                if (!c->closing && c->state == RECEIVE_HEADER && c->staged_end > c->staged_start &&
                    !c->reading_paused)
                {
                    on_readable(server, c); /* staged requests left after a pause */
                    flush_latencies(server);
                    flush_connection(server, c);
                }
            }
            if (c->closing)
            {
                close_connection(server, c, c->close_reason);
            }
        }
        flush_latencies(server);
    }
    return GT_OK;
}

void gt_server_destroy(gt_server *server)
{
    if (server == NULL)
    {
        return;
    }
    while (server->connections != NULL)
    {
        connection *c = server->connections;
        server->callbacks.on_close = NULL;
        close_connection(server, c, NULL);
    }
    if (server->listen_fd >= 0)
    {
        close(server->listen_fd);
    }
    if (server->epoll_fd >= 0)
    {
        close(server->epoll_fd);
    }
    if (server->event_fd >= 0)
    {
        close(server->event_fd);
    }
    pthread_mutex_destroy(&server->mutex);
    free(server);
}
