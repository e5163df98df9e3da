/*
 * The RDMA transport's pieces. The device-independent ones (queue-pair information encoding, memory-registration
 * bookkeeping, work-request batching, the client's half of the RDMA_CONNECT exchange) are plain C and unit tested
 * everywhere; the verbs calls are compiled only when <infiniband/verbs.h> is present (GT_HAVE_VERBS) and resolve
 * libibverbs with dlopen at run time, so the library loads on machines without it. They go through a table of
 * entry points that the C test binaries replace with the fake of src/test/c/gt_fake_verbs.c.
 */
#ifndef GT_RDMA_H
#define GT_RDMA_H

#include "gt_internal.h"

/* What one side of a reliable-connected queue pair tells the other over the TCP control connection. */
#define GT_QP_INFO_LENGTH 64
#define GT_QP_INFO_MAGIC 0x47525150u /* "GRQP" */
#define GT_QP_INFO_VERSION 1
#define GT_QP_INFO_MIN_MTU 1 /* IBV_MTU_256 */
#define GT_QP_INFO_MAX_MTU 5 /* IBV_MTU_4096 */

typedef struct gt_qp_info
{
    uint16_t lid;
    uint8_t port;
    uint8_t mtu;            /* enum ibv_mtu value */
    uint32_t qp_num;        /* 24 bits */
    uint32_t psn;           /* 24 bits */
    uint8_t gid[16];
    uint32_t segment_id;    /* the segment this QP may reach (server side), 0 on the client */
    uint64_t segment_address;
    uint64_t segment_length;
    uint32_t rkey;
} gt_qp_info;

void gt_qp_info_encode(uint8_t out[GT_QP_INFO_LENGTH], const gt_qp_info *info);

/*
 * GT_OK, or GT_INVALID_PARAMS for a bad magic or version, a QP number or PSN above 24 bits, a zero QP number, an MTU
 * that is not an enum ibv_mtu (1..5), nonzero padding, or a segment range that wraps.
 */
int gt_qp_info_decode(const uint8_t in[GT_QP_INFO_LENGTH], gt_qp_info *info);

/* Registered memory: which registration (lkey) covers a local range, which remote key a segment extent needs. */
typedef struct gt_mr_entry
{
    uint64_t address;
    uint64_t length;
    uint32_t lkey;
    uint32_t rkey;
    void *handle;           /* struct ibv_mr * */
} gt_mr_entry;

typedef struct gt_mr_table
{
    gt_mr_entry *entries;   /* sorted by address, non-overlapping */
    uint32_t count;
    uint32_t capacity;
} gt_mr_table;

void gt_mr_table_init(gt_mr_table *table);
void gt_mr_table_free(gt_mr_table *table);
/* GT_INVALID_PARAMS for an empty, wrapping or overlapping range. */
int gt_mr_table_add(gt_mr_table *table, const gt_mr_entry *entry);
/* Removes the registration starting at address; returns it in removed (may be NULL). */
int gt_mr_table_remove(gt_mr_table *table, uint64_t address, gt_mr_entry *removed);
/* The registration holding [address, address + length) whole, or NULL. */
const gt_mr_entry *gt_mr_table_find(const gt_mr_table *table, uint64_t address, uint64_t length);

/* One-sided operations of a batch, split into work requests and post chains. */
typedef struct gt_rdma_op
{
    uint8_t opcode;         /* GT_OP_READ or GT_OP_WRITE */
    uint64_t local_address;
    uint32_t lkey;
    uint64_t remote_address;
    uint32_t rkey;
    uint64_t length;
} gt_rdma_op;

typedef struct gt_rdma_wr
{
    uint32_t op_index;      /* which op of the batch */
    uint8_t opcode;
    uint8_t signaled;       /* asks for a completion: the last WR of each chain and of each op */
    uint64_t local_address;
    uint32_t lkey;
    uint64_t remote_address;
    uint32_t rkey;
    uint32_t length;
    uint64_t wr_id;         /* op_index << 32 | WR number within the op */
    uint32_t chain;         /* post chain (one ibv_post_send call) */
} gt_rdma_wr;

/*
 * Plans a batch: each op is cut into WRs of at most max_message_bytes; WRs are grouped into chains of at most
 * max_chain_length, and at most max_outstanding WRs are signalled... (every chain's last WR and every op's last WR
 * are signalled, so a completion is reported per op and the send queue never overflows with unsignalled WRs).
 * Returns the number of WRs written to out (at most out_capacity), or GT_INVALID_PARAMS / GT_UNAVAILABLE (too many).
 */
int gt_rdma_plan(const gt_rdma_op *ops, uint32_t count, uint32_t max_message_bytes, uint32_t max_chain_length,
    gt_rdma_wr *out, uint32_t out_capacity);

/* The verbs transport: 1 with a device, else 0 and the reason (no verbs in this build, no library, no device). */
int gt_rdma_probe(gt_error *error);

/*
 * The client's half of the exchange of docs/protocol.md ("RDMA: queue-pair information") over a connected, blocking
 * socket: sends an RDMA_CONNECT naming segment_id with local's record, reads the answer and, when its status is 0,
 * the node's record into remote (decoded, naming segment_id, with a non-empty segment). Returns 0, the node's
 * refusal (a negative ErrorCode), or GT_TRANSFER_FAIL for a broken connection or a malformed answer (error says why).
 * Device independent: tested everywhere.
 */
int gt_rdma_exchange(int fd, uint64_t request_id, uint32_t segment_id, const gt_qp_info *local, gt_qp_info *remote,
    gt_error *error);

/*
 * The verbs objects, opaque (without GT_HAVE_VERBS every call reports GT_UNAVAILABLE). A device is the first RDMA
 * device, its port 1 and one protection domain; memory registered on it is reachable by every link opened on it. A
 * link is one reliable-connected queue pair with its completion queue, brought up with the peer's record. Verbs are
 * thread safe: devices and links may be used from several threads, each link by one thread at a time.
 */
typedef struct gt_rdma_device gt_rdma_device;
typedef struct gt_rdma_link gt_rdma_link;

int gt_rdma_device_open(gt_rdma_device **device, gt_error *error);
/* Closes the device; every link on it must be closed and every registration released first. */
void gt_rdma_device_close(gt_rdma_device *device);

/* Registers [address, address + length) for local and remote read and write; the registration, or NULL. */
void *gt_rdma_register(gt_rdma_device *device, void *address, uint64_t length, uint32_t *lkey, uint32_t *rkey,
    gt_error *error);
void gt_rdma_deregister(gt_rdma_device *device, void *registration);

/* A queue pair in INIT for up to queue_depth outstanding work requests; local gets this side's record. */
int gt_rdma_link_open(gt_rdma_device *device, uint32_t queue_depth, gt_rdma_link **link, gt_qp_info *local,
    gt_error *error);
/* INIT -> RTR -> RTS towards the peer of record remote. */
int gt_rdma_link_connect(gt_rdma_link *link, const gt_qp_info *remote, gt_error *error);
/* Posts planned work requests, one ibv_post_send per chain. */
int gt_rdma_post(gt_rdma_link *link, const gt_rdma_wr *wrs, uint32_t count, gt_error *error);
/*
 * Up to max completions: each WR's wr_id and status, GT_OK, GT_INVALID_PARAMS for a remote access error (a bad or
 * stale remote key, a range outside the registered segment), GT_TRANSFER_FAIL for anything else (flushed after an
 * earlier error, retries exceeded, local protection). Returns the count, or GT_TRANSFER_FAIL when polling failed.
 */
int gt_rdma_poll(gt_rdma_link *link, uint64_t *wr_ids, int32_t *statuses, int max);
void gt_rdma_link_close(gt_rdma_link *link);

#ifdef GT_HAVE_VERBS
#include <infiniband/verbs.h>

/* The libibverbs entry points the transport calls (post_send and poll_cq are inline in verbs.h: wrapped). */
typedef struct gt_verbs_api
{
    struct ibv_device **(*get_device_list)(int *);
    void (*free_device_list)(struct ibv_device **);
    struct ibv_context *(*open_device)(struct ibv_device *);
    int (*close_device)(struct ibv_context *);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *);
    int (*dealloc_pd)(struct ibv_pd *);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
    int (*dereg_mr)(struct ibv_mr *);
    struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*destroy_cq)(struct ibv_cq *);
    struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*destroy_qp)(struct ibv_qp *);
    int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
    int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
    int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
    int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
    int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
} gt_verbs_api;
#endif

#if defined(GT_HAVE_VERBS) && defined(GT_TESTING)
/*
 * Test binaries only (built with GT_TESTING, never the library): devices and links opened from now on use api
 * instead of libibverbs; NULL goes back to libibverbs. Objects keep the table they were opened with.
 */
void gt_rdma_use_api(const gt_verbs_api *api);
#endif

#endif
