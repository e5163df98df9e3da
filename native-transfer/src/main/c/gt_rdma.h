/*
 * The RDMA transport's pieces. The device-independent ones (queue-pair information encoding, memory-registration
 * bookkeeping, work-request batching) are plain C and unit tested everywhere; the verbs calls are compiled only
 * when <infiniband/verbs.h> is present (GT_HAVE_VERBS) and resolve libibverbs with dlopen at run time, so the
 * library loads on machines without it.
 */
#ifndef GT_RDMA_H
#define GT_RDMA_H

#include "gt_internal.h"

/* What one side of a reliable-connected queue pair tells the other over the TCP control connection. */
#define GT_QP_INFO_LENGTH 64
#define GT_QP_INFO_MAGIC 0x47525150u /* "GRQP" */
#define GT_QP_INFO_VERSION 1

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

/* GT_OK, or GT_INVALID_PARAMS for a bad magic or version, a QP number or PSN above 24 bits, or nonzero padding. */
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

#endif
