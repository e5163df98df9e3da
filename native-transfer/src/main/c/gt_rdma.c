/* RDMA transport: device-independent bookkeeping (always built) and libibverbs calls (built with GT_HAVE_VERBS). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_rdma.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------- QP information */

/*
 * Layout, big-endian: magic u32, version u8, port u8, mtu u8, reserved u8, lid u16, reserved u16, qp_num u32,
 * psn u32, gid 16 bytes, segment_id u32, rkey u32, segment_address u64, segment_length u64 = 60, then 4 zero bytes.
 */
void gt_qp_info_encode(uint8_t out[GT_QP_INFO_LENGTH], const gt_qp_info *info)
{
    memset(out, 0, GT_QP_INFO_LENGTH);
    gt_put_u32(out, GT_QP_INFO_MAGIC);
    out[4] = GT_QP_INFO_VERSION;
    out[5] = info->port;
    out[6] = info->mtu;
    gt_put_u16(out + 8, info->lid);
    gt_put_u32(out + 12, info->qp_num & 0xFFFFFFu);
    gt_put_u32(out + 16, info->psn & 0xFFFFFFu);
    memcpy(out + 20, info->gid, 16);
    gt_put_u32(out + 36, info->segment_id);
    gt_put_u32(out + 40, info->rkey);
    gt_put_u64(out + 44, info->segment_address);
    gt_put_u64(out + 52, info->segment_length);
}

int gt_qp_info_decode(const uint8_t in[GT_QP_INFO_LENGTH], gt_qp_info *info)
{
    memset(info, 0, sizeof(*info));
    if (gt_get_u32(in) != GT_QP_INFO_MAGIC || in[4] != GT_QP_INFO_VERSION)
    {
        return GT_INVALID_PARAMS;
    }
    if (in[7] != 0 || gt_get_u16(in + 10) != 0 || gt_get_u32(in + 60) != 0)
    {
        return GT_INVALID_PARAMS;
    }
    const uint32_t qp_num = gt_get_u32(in + 12);
    const uint32_t psn = gt_get_u32(in + 16);
    if (qp_num > 0xFFFFFFu || psn > 0xFFFFFFu || qp_num == 0 || in[6] < GT_QP_INFO_MIN_MTU ||
        in[6] > GT_QP_INFO_MAX_MTU)
    {
        return GT_INVALID_PARAMS;
    }
    const uint64_t address = gt_get_u64(in + 44);
    const uint64_t length = gt_get_u64(in + 52);
    if (address + length < address)
    {
        return GT_INVALID_PARAMS;
    }
    info->port = in[5];
    info->mtu = in[6];
    info->lid = gt_get_u16(in + 8);
    info->qp_num = qp_num;
    info->psn = psn;
    memcpy(info->gid, in + 20, 16);
    info->segment_id = gt_get_u32(in + 36);
    info->rkey = gt_get_u32(in + 40);
    info->segment_address = address;
    info->segment_length = length;
    return GT_OK;
}

/* ---------------------------------------------------------------- memory registrations */

void gt_mr_table_init(gt_mr_table *table)
{
    memset(table, 0, sizeof(*table));
}

void gt_mr_table_free(gt_mr_table *table)
{
    free(table->entries);
    memset(table, 0, sizeof(*table));
}

/* Index of the first entry whose address is above address. */
static uint32_t upper_bound(const gt_mr_table *table, const uint64_t address)
{
    uint32_t low = 0;
    uint32_t high = table->count;
    while (low < high)
    {
        const uint32_t middle = low + (high - low) / 2;
        if (table->entries[middle].address <= address)
        {
            low = middle + 1;
        }
        else
        {
            high = middle;
        }
    }
    return low;
}

int gt_mr_table_add(gt_mr_table *table, const gt_mr_entry *entry)
{
    if (entry->length == 0 || entry->address + entry->length < entry->address)
    {
        return GT_INVALID_PARAMS;
    }
    const uint32_t at = upper_bound(table, entry->address);
    if (at > 0)
    {
        const gt_mr_entry *before = &table->entries[at - 1];
        if (before->address + before->length > entry->address)
        {
            return GT_INVALID_PARAMS;
        }
    }
    if (at < table->count && entry->address + entry->length > table->entries[at].address)
    {
        return GT_INVALID_PARAMS;
    }
    if (table->count == table->capacity)
    {
        const uint32_t capacity = table->capacity == 0 ? 16 : table->capacity * 2;
        gt_mr_entry *grown = realloc(table->entries, capacity * sizeof(gt_mr_entry));
        if (grown == NULL)
        {
            return GT_INTERNAL_ERROR;
        }
        table->entries = grown;
        table->capacity = capacity;
    }
    memmove(table->entries + at + 1, table->entries + at, (table->count - at) * sizeof(gt_mr_entry));
    table->entries[at] = *entry;
    table->count++;
    return GT_OK;
}

int gt_mr_table_remove(gt_mr_table *table, const uint64_t address, gt_mr_entry *removed)
{
    const uint32_t at = upper_bound(table, address);
    if (at == 0 || table->entries[at - 1].address != address)
    {
        return GT_INVALID_PARAMS;
    }
    if (removed != NULL)
    {
        *removed = table->entries[at - 1];
    }
    memmove(table->entries + at - 1, table->entries + at, (table->count - at) * sizeof(gt_mr_entry));
    table->count--;
    return GT_OK;
}

const gt_mr_entry *gt_mr_table_find(const gt_mr_table *table, const uint64_t address, const uint64_t length)
{
    if (address + length < address)
    {
        return NULL;
    }
    const uint32_t at = upper_bound(table, address);
    if (at == 0)
    {
        return NULL;
    }
    const gt_mr_entry *entry = &table->entries[at - 1];
    if (address - entry->address > entry->length || length > entry->length - (address - entry->address))
    {
        return NULL;
    }
    return entry;
}

/* ---------------------------------------------------------------- work-request batching */

int gt_rdma_plan(const gt_rdma_op *ops, const uint32_t count, const uint32_t max_message_bytes,
    const uint32_t max_chain_length, gt_rdma_wr *out, const uint32_t out_capacity)
{
    if (max_message_bytes == 0 || max_chain_length == 0)
    {
        return GT_INVALID_PARAMS;
    }
    uint32_t n = 0;
    uint32_t chain = 0;
    uint32_t in_chain = 0;
    for (uint32_t i = 0; i < count; i++)
    {
        const gt_rdma_op *op = &ops[i];
        if ((op->opcode != GT_OP_READ && op->opcode != GT_OP_WRITE) || op->length == 0 ||
            op->local_address + op->length < op->local_address || op->remote_address + op->length < op->remote_address)
        {
            return GT_INVALID_PARAMS;
        }
        uint32_t number = 0;
        for (uint64_t done = 0; done < op->length; done += max_message_bytes, number++)
        {
            if (n == out_capacity)
            {
                return GT_UNAVAILABLE;
            }
            const uint64_t left = op->length - done;
            gt_rdma_wr *wr = &out[n++];
            wr->op_index = i;
            wr->opcode = op->opcode;
            wr->local_address = op->local_address + done;
            wr->lkey = op->lkey;
            wr->remote_address = op->remote_address + done;
            wr->rkey = op->rkey;
            wr->length = left < max_message_bytes ? (uint32_t)left : max_message_bytes;
            wr->wr_id = ((uint64_t)i << 32) | number;
            wr->chain = chain;
            wr->signaled = left <= max_message_bytes; /* the op's last WR reports the op */
            if (++in_chain == max_chain_length)
            {
                wr->signaled = 1; /* a chain's last WR always reports, so the send queue drains */
                chain++;
                in_chain = 0;
            }
        }
    }
    if (n > 0)
    {
        out[n - 1].signaled = 1;
    }
    return (int)n;
}

/* ---------------------------------------------------------------- the exchange, client side */

int gt_rdma_exchange(const int fd, const uint64_t request_id, const uint32_t segment_id, const gt_qp_info *local,
    gt_qp_info *remote, gt_error *error)
{
    memset(remote, 0, sizeof(*remote));
    gt_qp_info mine = *local;
    mine.segment_id = segment_id;
    mine.rkey = 0;
    mine.segment_address = 0;
    mine.segment_length = 0;
    uint8_t request[GT_QP_INFO_LENGTH];
    gt_qp_info_encode(request, &mine);
    uint8_t record[GT_QP_INFO_LENGTH];
    const int status = gt_control_exchange(fd, GT_OPC_RDMA_CONNECT, request_id, segment_id, request,
        GT_QP_INFO_LENGTH, record, GT_QP_INFO_LENGTH, "RDMA_CONNECT", error);
    if (status != GT_OK)
    {
        return status;
    }
    if (gt_qp_info_decode(record, remote) != GT_OK || remote->segment_id != segment_id ||
        remote->segment_length == 0 || remote->segment_address == 0)
    {
        memset(remote, 0, sizeof(*remote));
        return gt_fail(error, GT_TRANSFER_FAIL, "the node's QP information does not decode or names no segment");
    }
    return GT_OK;
}

/* ---------------------------------------------------------------- verbs */

#ifdef GT_HAVE_VERBS
#include <dlfcn.h>
#include <pthread.h>

struct gt_rdma_device
{
    const gt_verbs_api *api;
    struct ibv_context *context;
    struct ibv_pd *pd;
    uint8_t port;
    struct ibv_port_attr port_attr;
    union ibv_gid gid;
};

struct gt_rdma_link
{
    gt_rdma_device *device;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    gt_qp_info local;
};

/* libibverbs, resolved once with dlopen so that the library loads without it. */
static gt_verbs_api library_api;
static char library_error[GT_ERROR_MESSAGE_LENGTH];
static int library_loaded;
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static int library_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return ibv_post_send(qp, wr, bad);
}

static int library_poll_cq(struct ibv_cq *cq, const int count, struct ibv_wc *wc)
{
    return ibv_poll_cq(cq, count, wc);
}

static void load_library(void)
{
    void *library = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL)
    {
        snprintf(library_error, sizeof(library_error), "libibverbs.so.1 cannot be loaded: %s", dlerror());
        return;
    }
#define RESOLVE(field_, name_) \
    do { *(void **)&library_api.field_ = dlsym(library, name_); \
        if (library_api.field_ == NULL) \
        { snprintf(library_error, sizeof(library_error), "libibverbs lacks %s", name_); return; } \
    } while (0)
    RESOLVE(get_device_list, "ibv_get_device_list");
    RESOLVE(free_device_list, "ibv_free_device_list");
    RESOLVE(open_device, "ibv_open_device");
    RESOLVE(close_device, "ibv_close_device");
    RESOLVE(alloc_pd, "ibv_alloc_pd");
    RESOLVE(dealloc_pd, "ibv_dealloc_pd");
    RESOLVE(reg_mr, "ibv_reg_mr");
    RESOLVE(dereg_mr, "ibv_dereg_mr");
    RESOLVE(create_cq, "ibv_create_cq");
    RESOLVE(destroy_cq, "ibv_destroy_cq");
    RESOLVE(create_qp, "ibv_create_qp");
    RESOLVE(destroy_qp, "ibv_destroy_qp");
    RESOLVE(modify_qp, "ibv_modify_qp");
    RESOLVE(query_port, "ibv_query_port");
    RESOLVE(query_gid, "ibv_query_gid");
#undef RESOLVE
    library_api.post_send = library_post_send;
    library_api.poll_cq = library_poll_cq;
    library_loaded = 1;
}

#ifdef GT_TESTING
static const gt_verbs_api *installed_api;

void gt_rdma_use_api(const gt_verbs_api *api)
{
    __atomic_store_n(&installed_api, api, __ATOMIC_RELEASE);
}
#endif

/* The entry points to use: a test's table when one is installed, else libibverbs (NULL with the reason). */
static const gt_verbs_api *verbs(gt_error *error)
{
#ifdef GT_TESTING
    const gt_verbs_api *test_api = __atomic_load_n(&installed_api, __ATOMIC_ACQUIRE);
    if (test_api != NULL)
    {
        return test_api;
    }
#endif
    pthread_once(&library_once, load_library);
    if (!library_loaded)
    {
        gt_fail(error, GT_UNAVAILABLE, "%s", library_error);
        return NULL;
    }
    return &library_api;
}

int gt_rdma_probe(gt_error *error)
{
    const gt_verbs_api *api = verbs(error);
    if (api == NULL)
    {
        return 0;
    }
    int devices = 0;
    struct ibv_device **list = api->get_device_list(&devices);
    if (list == NULL)
    {
        gt_fail(error, GT_UNAVAILABLE, "ibv_get_device_list failed (no RDMA subsystem in this kernel?)");
        return 0;
    }
    api->free_device_list(list);
    if (devices == 0)
    {
        gt_fail(error, GT_UNAVAILABLE, "no RDMA device found (libibverbs loaded, 0 devices)");
        return 0;
    }
    return 1;
}

int gt_rdma_device_open(gt_rdma_device **out, gt_error *error)
{
    *out = NULL;
    const gt_verbs_api *api = verbs(error);
    if (api == NULL)
    {
        return GT_UNAVAILABLE;
    }
    int devices = 0;
    struct ibv_device **list = api->get_device_list(&devices);
    if (list == NULL || devices == 0)
    {
        if (list != NULL)
        {
            api->free_device_list(list);
        }
        return gt_fail(error, GT_UNAVAILABLE, "no RDMA device found");
    }
    gt_rdma_device *device = calloc(1, sizeof(gt_rdma_device));
    if (device == NULL)
    {
        api->free_device_list(list);
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    device->api = api;
    device->port = 1;
    device->context = api->open_device(list[0]);
    api->free_device_list(list);
    if (device->context == NULL || api->query_port(device->context, device->port, &device->port_attr) != 0 ||
        api->query_gid(device->context, device->port, 0, &device->gid) != 0)
    {
        gt_rdma_device_close(device);
        return gt_fail(error, GT_UNAVAILABLE, "cannot open the first RDMA device or query its port 1");
    }
    if (device->port_attr.state != IBV_PORT_ACTIVE)
    {
        gt_rdma_device_close(device);
        return gt_fail(error, GT_UNAVAILABLE, "port 1 of the first RDMA device is not active");
    }
    device->pd = api->alloc_pd(device->context);
    if (device->pd == NULL)
    {
        gt_rdma_device_close(device);
        return gt_fail(error, GT_UNAVAILABLE, "cannot allocate a protection domain");
    }
    *out = device;
    return GT_OK;
}

void gt_rdma_device_close(gt_rdma_device *device)
{
    if (device == NULL)
    {
        return;
    }
    if (device->pd != NULL)
    {
        device->api->dealloc_pd(device->pd);
    }
    if (device->context != NULL)
    {
        device->api->close_device(device->context);
    }
    free(device);
}

void *gt_rdma_register(gt_rdma_device *device, void *address, const uint64_t length, uint32_t *lkey, uint32_t *rkey,
    gt_error *error)
{
    struct ibv_mr *mr = device->api->reg_mr(device->pd, address, length,
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr == NULL)
    {
        gt_fail(error, GT_UNAVAILABLE, "cannot register %llu bytes for RDMA (locked-memory limit?): %s",
            (unsigned long long)length, strerror(errno));
        return NULL;
    }
    *lkey = mr->lkey;
    *rkey = mr->rkey;
    return mr;
}

void gt_rdma_deregister(gt_rdma_device *device, void *registration)
{
    if (registration != NULL)
    {
        device->api->dereg_mr(registration);
    }
}

int gt_rdma_link_open(gt_rdma_device *device, const uint32_t queue_depth, gt_rdma_link **out, gt_qp_info *local,
    gt_error *error)
{
    *out = NULL;
    memset(local, 0, sizeof(*local));
    if (queue_depth == 0 || queue_depth > 4096)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "queue depth must be in 1..4096, was %u", queue_depth);
    }
    const gt_verbs_api *api = device->api;
    gt_rdma_link *link = calloc(1, sizeof(gt_rdma_link));
    if (link == NULL)
    {
        return gt_fail(error, GT_INTERNAL_ERROR, "out of memory");
    }
    link->device = device;
    link->cq = api->create_cq(device->context, (int)queue_depth * 2, NULL, NULL, 0);
    struct ibv_qp_init_attr init;
    memset(&init, 0, sizeof(init));
    init.send_cq = link->cq;
    init.recv_cq = link->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = queue_depth;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all = 0;
    link->qp = link->cq == NULL ? NULL : api->create_qp(device->pd, &init);
    if (link->qp == NULL)
    {
        gt_rdma_link_close(link);
        return gt_fail(error, GT_UNAVAILABLE, "cannot create the completion queue or the RC queue pair");
    }
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = device->port;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if (api->modify_qp(link->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    {
        gt_rdma_link_close(link);
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot move the QP to INIT");
    }
    local->lid = device->port_attr.lid;
    local->port = device->port;
    local->mtu = (uint8_t)device->port_attr.active_mtu;
    local->qp_num = link->qp->qp_num & 0xFFFFFFu;
    local->psn = (uint32_t)((gt_now_ms() + (uintptr_t)link) * 2654435761u) & 0xFFFFFFu;
    memcpy(local->gid, device->gid.raw, 16);
    link->local = *local;
    *out = link;
    return GT_OK;
}

int gt_rdma_link_connect(gt_rdma_link *link, const gt_qp_info *remote, gt_error *error)
{
    const gt_verbs_api *api = link->device->api;
    const gt_qp_info *local = &link->local;
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = remote->mtu < local->mtu ? (enum ibv_mtu)remote->mtu : (enum ibv_mtu)local->mtu;
    attr.dest_qp_num = remote->qp_num;
    attr.rq_psn = remote->psn;
    attr.max_dest_rd_atomic = 16;
    attr.min_rnr_timer = 12;
    attr.ah_attr.dlid = remote->lid;
    attr.ah_attr.port_num = link->device->port;
    attr.ah_attr.is_global = 1; /* RoCE needs the GRH; InfiniBand accepts it */
    memcpy(attr.ah_attr.grh.dgid.raw, remote->gid, 16);
    attr.ah_attr.grh.sgid_index = 0;
    attr.ah_attr.grh.hop_limit = 64;
    if (api->modify_qp(link->qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot move the QP to RTR");
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = local->psn;
    attr.max_rd_atomic = 16;
    if (api->modify_qp(link->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot move the QP to RTS");
    }
    return GT_OK;
}

int gt_rdma_post(gt_rdma_link *link, const gt_rdma_wr *wrs, const uint32_t count, gt_error *error)
{
    struct ibv_send_wr chain[64];
    struct ibv_sge sges[64];
    uint32_t i = 0;
    while (i < count)
    {
        uint32_t n = 0;
        const uint32_t id = wrs[i].chain;
        while (i < count && wrs[i].chain == id && n < 64)
        {
            const gt_rdma_wr *wr = &wrs[i++];
            memset(&chain[n], 0, sizeof(chain[n]));
            sges[n].addr = wr->local_address;
            sges[n].length = wr->length;
            sges[n].lkey = wr->lkey;
            chain[n].wr_id = wr->wr_id;
            chain[n].sg_list = &sges[n];
            chain[n].num_sge = 1;
            chain[n].opcode = wr->opcode == GT_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
            chain[n].send_flags = wr->signaled ? IBV_SEND_SIGNALED : 0;
            chain[n].wr.rdma.remote_addr = wr->remote_address;
            chain[n].wr.rdma.rkey = wr->rkey;
            chain[n].next = NULL;
            if (n > 0)
            {
                chain[n - 1].next = &chain[n];
            }
            n++;
        }
        struct ibv_send_wr *bad = NULL;
        if (link->device->api->post_send(link->qp, chain, &bad) != 0)
        {
            return gt_fail(error, GT_TRANSFER_FAIL, "ibv_post_send refused work request %llu",
                bad == NULL ? 0ull : (unsigned long long)bad->wr_id);
        }
    }
    return GT_OK;
}

int gt_rdma_poll(gt_rdma_link *link, uint64_t *wr_ids, int32_t *statuses, const int max)
{
    struct ibv_wc wc[32];
    const int n = link->device->api->poll_cq(link->cq, max < 32 ? max : 32, wc);
    for (int i = 0; i < n; i++)
    {
        wr_ids[i] = wc[i].wr_id;
        statuses[i] = wc[i].status == IBV_WC_SUCCESS ? GT_OK :
            wc[i].status == IBV_WC_REM_ACCESS_ERR ? GT_INVALID_PARAMS : GT_TRANSFER_FAIL;
    }
    return n < 0 ? GT_TRANSFER_FAIL : n;
}

void gt_rdma_link_close(gt_rdma_link *link)
{
    if (link == NULL)
    {
        return;
    }
    const gt_verbs_api *api = link->device->api;
    if (link->qp != NULL)
    {
        api->destroy_qp(link->qp);
    }
    if (link->cq != NULL)
    {
        api->destroy_cq(link->cq);
    }
    free(link);
}

#else

int gt_rdma_probe(gt_error *error)
{
    gt_fail(error, GT_UNAVAILABLE, "this build of the native transfer library has no RDMA transport "
        "(libibverbs-dev headers were missing when it was compiled)");
    return 0;
}

int gt_rdma_device_open(gt_rdma_device **device, gt_error *error)
{
    *device = NULL;
    gt_rdma_probe(error);
    return GT_UNAVAILABLE;
}

void gt_rdma_device_close(gt_rdma_device *device)
{
}

void *gt_rdma_register(gt_rdma_device *device, void *address, const uint64_t length, uint32_t *lkey, uint32_t *rkey,
    gt_error *error)
{
    gt_rdma_probe(error);
    return NULL;
}

void gt_rdma_deregister(gt_rdma_device *device, void *registration)
{
}

int gt_rdma_link_open(gt_rdma_device *device, const uint32_t queue_depth, gt_rdma_link **link, gt_qp_info *local,
    gt_error *error)
{
    *link = NULL;
    gt_rdma_probe(error);
    return GT_UNAVAILABLE;
}

int gt_rdma_link_connect(gt_rdma_link *link, const gt_qp_info *remote, gt_error *error)
{
    return gt_rdma_probe(error) ? GT_OK : GT_UNAVAILABLE;
}

int gt_rdma_post(gt_rdma_link *link, const gt_rdma_wr *wrs, const uint32_t count, gt_error *error)
{
    return gt_rdma_probe(error) ? GT_OK : GT_UNAVAILABLE;
}

int gt_rdma_poll(gt_rdma_link *link, uint64_t *wr_ids, int32_t *statuses, const int max)
{
    return GT_UNAVAILABLE;
}

void gt_rdma_link_close(gt_rdma_link *link)
{
}

#endif

int gt_rdma_available(gt_error *error)
{
    return gt_rdma_probe(error);
}

const char *gt_version(void)
{
    return "granary-transfer 1"
#ifdef GT_HAVE_VERBS
        " (tcp, rdma)";
#else
        " (tcp)";
#endif
}
