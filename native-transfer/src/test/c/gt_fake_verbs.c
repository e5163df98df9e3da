/* The libibverbs stand-in of gt_fake_verbs.h; compiled into the C test binaries only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_fake_verbs.h"
#include "gt_rdma.h"

#ifdef GT_HAVE_VERBS

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_OBJECTS 256

typedef struct fake_mr
{
    struct ibv_mr mr;       /* first: the transport sees an ibv_mr */
    int access;
} fake_mr;

typedef struct fake_cq
{
    struct ibv_cq cq;
    struct ibv_wc *entries;
    uint32_t *retires;      /* send-queue slots each entry gives back when polled */
    int capacity;
    int head;
    int count;
} fake_cq;

typedef struct fake_qp
{
    struct ibv_qp qp;
    fake_cq *send_cq;
    uint32_t max_send_wr;
    uint32_t in_flight;     /* posted work requests whose slot no polled completion has given back */
    uint32_t unsignalled;   /* posted since the last signalled one */
    int sig_all;
    int access;
    uint32_t dest_qp_num;
} fake_qp;

static pthread_mutex_t fake_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_device fake_device;
static int fake_devices;
static int fake_stalled;
static fake_mr *fake_mrs[FAKE_MAX_OBJECTS];
static fake_qp *fake_qps[FAKE_MAX_OBJECTS];
static int live_contexts;
static int live_pds;
static int live_cqs;
static uint32_t next_qp_num = 0x111;
static uint32_t next_key = 0x1000;
static int registrations_made; /* reg_mr calls that succeeded, ever */

static int add_object(void **table, void *object)
{
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if (table[i] == NULL)
        {
            table[i] = object;
            return 1;
        }
    }
    return 0;
}

static void remove_object(void **table, const void *object)
{
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if (table[i] == object)
        {
            table[i] = NULL;
        }
    }
}

static fake_qp *qp_by_number(const uint32_t qp_num)
{
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if (fake_qps[i] != NULL && fake_qps[i]->qp.qp_num == qp_num)
        {
            return fake_qps[i];
        }
    }
    return NULL;
}

static fake_mr *mr_by_key(const uint32_t key, const int remote)
{
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if (fake_mrs[i] != NULL && (remote ? fake_mrs[i]->mr.rkey : fake_mrs[i]->mr.lkey) == key)
        {
            return fake_mrs[i];
        }
    }
    return NULL;
}

static int mr_holds(const fake_mr *mr, const uint64_t address, const uint64_t length)
{
    const uint64_t base = (uint64_t)(uintptr_t)mr->mr.addr;
    return address >= base && length <= mr->mr.length && address - base <= mr->mr.length - length;
}

static struct ibv_device **fake_get_device_list(int *count)
{
    struct ibv_device **list = calloc(2, sizeof(struct ibv_device *));
    if (list == NULL)
    {
        return NULL;
    }
    pthread_mutex_lock(&fake_mutex);
    list[0] = fake_devices > 0 ? &fake_device : NULL;
    if (count != NULL)
    {
        *count = fake_devices > 0 ? 1 : 0;
    }
    pthread_mutex_unlock(&fake_mutex);
    return list;
}

static void fake_free_device_list(struct ibv_device **list)
{
    free(list);
}

static struct ibv_context *fake_open_device(struct ibv_device *device)
{
    if (device != &fake_device)
    {
        errno = ENODEV;
        return NULL;
    }
    struct ibv_context *context = calloc(1, sizeof(struct ibv_context));
    if (context != NULL)
    {
        context->device = device;
        pthread_mutex_lock(&fake_mutex);
        live_contexts++;
        pthread_mutex_unlock(&fake_mutex);
    }
    return context;
}

static int fake_close_device(struct ibv_context *context)
{
    free(context);
    pthread_mutex_lock(&fake_mutex);
    live_contexts--;
    pthread_mutex_unlock(&fake_mutex);
    return 0;
}

static struct ibv_pd *fake_alloc_pd(struct ibv_context *context)
{
    struct ibv_pd *pd = calloc(1, sizeof(struct ibv_pd));
    if (pd != NULL)
    {
        pd->context = context;
        pthread_mutex_lock(&fake_mutex);
        live_pds++;
        pthread_mutex_unlock(&fake_mutex);
    }
    return pd;
}

/* Refused while a registration or a queue pair still uses the domain, as a device refuses it. */
static int fake_dealloc_pd(struct ibv_pd *pd)
{
    pthread_mutex_lock(&fake_mutex);
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if ((fake_mrs[i] != NULL && fake_mrs[i]->mr.pd == pd) || (fake_qps[i] != NULL && fake_qps[i]->qp.pd == pd))
        {
            pthread_mutex_unlock(&fake_mutex);
            return EBUSY;
        }
    }
    live_pds--;
    pthread_mutex_unlock(&fake_mutex);
    free(pd);
    return 0;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *address, const size_t length, const int access)
{
    if (pd == NULL || address == NULL || length == 0)
    {
        errno = EINVAL;
        return NULL;
    }
    fake_mr *mr = calloc(1, sizeof(fake_mr));
    if (mr == NULL)
    {
        errno = ENOMEM;
        return NULL;
    }
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = address;
    mr->mr.length = length;
    mr->access = access;
    pthread_mutex_lock(&fake_mutex);
    mr->mr.lkey = next_key++;
    mr->mr.rkey = next_key++;
    registrations_made++;
    const int added = add_object((void **)fake_mrs, mr);
    pthread_mutex_unlock(&fake_mutex);
    if (!added)
    {
        free(mr);
        errno = ENOMEM;
        return NULL;
    }
    return &mr->mr;
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
    pthread_mutex_lock(&fake_mutex);
    remove_object((void **)fake_mrs, mr);
    pthread_mutex_unlock(&fake_mutex);
    free(mr);
    return 0;
}

static struct ibv_cq *fake_create_cq(struct ibv_context *context, const int cqe, void *cq_context,
    struct ibv_comp_channel *channel, const int vector)
{
    if (cqe < 1 || cqe > 65536)
    {
        errno = EINVAL;
        return NULL;
    }
    fake_cq *cq = calloc(1, sizeof(fake_cq));
    struct ibv_wc *entries = calloc((size_t)cqe, sizeof(struct ibv_wc));
    uint32_t *retires = calloc((size_t)cqe, sizeof(uint32_t));
    if (cq == NULL || entries == NULL || retires == NULL)
    {
        free(cq);
        free(entries);
        free(retires);
        errno = ENOMEM;
        return NULL;
    }
    cq->cq.context = context;
    cq->cq.cqe = cqe;
    cq->entries = entries;
    cq->retires = retires;
    cq->capacity = cqe;
    pthread_mutex_lock(&fake_mutex);
    live_cqs++;
    pthread_mutex_unlock(&fake_mutex);
    return &cq->cq;
}

static int fake_destroy_cq(struct ibv_cq *cq)
{
    fake_cq *fake = (fake_cq *)cq;
    pthread_mutex_lock(&fake_mutex);
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        if (fake_qps[i] != NULL && fake_qps[i]->send_cq == fake)
        {
            pthread_mutex_unlock(&fake_mutex);
            return EBUSY;
        }
    }
    live_cqs--;
    pthread_mutex_unlock(&fake_mutex);
    free(fake->entries);
    free(fake->retires);
    free(fake);
    return 0;
}

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
    if (pd == NULL || init->qp_type != IBV_QPT_RC || init->send_cq == NULL || init->cap.max_send_wr == 0 ||
        init->cap.max_send_wr > 16384 || init->cap.max_send_sge == 0)
    {
        errno = EINVAL;
        return NULL;
    }
    fake_qp *qp = calloc(1, sizeof(fake_qp));
    if (qp == NULL)
    {
        errno = ENOMEM;
        return NULL;
    }
    qp->qp.context = pd->context;
    qp->qp.pd = pd;
    qp->qp.send_cq = init->send_cq;
    qp->qp.recv_cq = init->recv_cq;
    qp->qp.qp_type = IBV_QPT_RC;
    qp->qp.state = IBV_QPS_RESET;
    qp->send_cq = (fake_cq *)init->send_cq;
    qp->max_send_wr = init->cap.max_send_wr;
    qp->sig_all = init->sq_sig_all;
    pthread_mutex_lock(&fake_mutex);
    qp->qp.qp_num = next_qp_num++ & 0xFFFFFFu;
    const int added = add_object((void **)fake_qps, qp);
    pthread_mutex_unlock(&fake_mutex);
    if (!added)
    {
        free(qp);
        errno = ENOMEM;
        return NULL;
    }
    return &qp->qp;
}

static int fake_destroy_qp(struct ibv_qp *qp)
{
    pthread_mutex_lock(&fake_mutex);
    remove_object((void **)fake_qps, qp);
    pthread_mutex_unlock(&fake_mutex);
    free(qp);
    return 0;
}

/* The transitions an RC queue pair takes to send, each with the attributes it must be given. */
static int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, const int mask)
{
    const int to_init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    const int to_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    const int to_rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
        IBV_QP_MAX_QP_RD_ATOMIC;
    fake_qp *fake = (fake_qp *)qp;
    if ((mask & IBV_QP_STATE) == 0)
    {
        return EINVAL;
    }
    pthread_mutex_lock(&fake_mutex);
    const enum ibv_qp_state from = qp->state;
    const enum ibv_qp_state to = attr->qp_state;
    int result = 0;
    if (to == IBV_QPS_ERR || to == IBV_QPS_RESET)
    {
        qp->state = to;
    }
    else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT && (mask & to_init) == to_init && attr->port_num == 1)
    {
        fake->access = (int)attr->qp_access_flags;
        qp->state = to;
    }
    else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR && (mask & to_rtr) == to_rtr && attr->dest_qp_num != 0 &&
        attr->dest_qp_num <= 0xFFFFFFu && attr->rq_psn <= 0xFFFFFFu && attr->path_mtu >= IBV_MTU_256 &&
        attr->path_mtu <= IBV_MTU_4096 && attr->ah_attr.port_num == 1)
    {
        fake->dest_qp_num = attr->dest_qp_num;
        qp->state = to;
    }
    else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS && (mask & to_rts) == to_rts && attr->sq_psn <= 0xFFFFFFu)
    {
        qp->state = to;
    }
    else
    {
        result = EINVAL;
    }
    pthread_mutex_unlock(&fake_mutex);
    return result;
}

static int fake_query_port(struct ibv_context *context, const uint8_t port, struct ibv_port_attr *attr)
{
    if (port != 1)
    {
        return EINVAL;
    }
    memset(attr, 0, sizeof(*attr));
    attr->state = IBV_PORT_ACTIVE;
    attr->max_mtu = IBV_MTU_4096;
    attr->active_mtu = IBV_MTU_4096;
    attr->lid = 7;
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
    return 0;
}

static int fake_query_gid(struct ibv_context *context, const uint8_t port, const int index, union ibv_gid *gid)
{
    if (port != 1 || index != 0)
    {
        return EINVAL;
    }
    memset(gid, 0, sizeof(*gid));
    gid->raw[0] = 0xFE;
    gid->raw[1] = 0x80;
    gid->raw[15] = 0x42;
    return 0;
}

/* One work request, at once: the copy it stands for, or the completion error a device would report. */
static enum ibv_wc_status execute(fake_qp *qp, const struct ibv_send_wr *wr)
{
    if (qp->qp.state == IBV_QPS_ERR)
    {
        return IBV_WC_WR_FLUSH_ERR;
    }
    const struct ibv_sge *sge = wr->sg_list;
    const int read = wr->opcode == IBV_WR_RDMA_READ;
    const fake_mr *local = mr_by_key(sge->lkey, 0);
    if (local == NULL || local->mr.pd != qp->qp.pd || !mr_holds(local, sge->addr, sge->length) ||
        (read && (local->access & IBV_ACCESS_LOCAL_WRITE) == 0))
    {
        return IBV_WC_LOC_PROT_ERR;
    }
    const fake_qp *peer = qp_by_number(qp->dest_qp_num);
    if (peer == NULL || (peer->qp.state != IBV_QPS_RTR && peer->qp.state != IBV_QPS_RTS) ||
        peer->dest_qp_num != qp->qp.qp_num)
    {
        return IBV_WC_RETRY_EXC_ERR; /* nobody answers at the other end */
    }
    const int needed = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    const fake_mr *target = mr_by_key(wr->wr.rdma.rkey, 1);
    if (target == NULL || target->mr.pd != peer->qp.pd || (target->access & needed) == 0 ||
        (peer->access & needed) == 0 || !mr_holds(target, wr->wr.rdma.remote_addr, sge->length))
    {
        return IBV_WC_REM_ACCESS_ERR;
    }
    uint8_t *mine = (uint8_t *)(uintptr_t)sge->addr;
    uint8_t *theirs = (uint8_t *)(uintptr_t)wr->wr.rdma.remote_addr;
    memmove(read ? mine : theirs, read ? theirs : mine, sge->length);
    return IBV_WC_SUCCESS;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    fake_qp *fake = (fake_qp *)qp;
    pthread_mutex_lock(&fake_mutex);
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR)
    {
        pthread_mutex_unlock(&fake_mutex);
        *bad = wr;
        return EINVAL;
    }
    for (; wr != NULL; wr = wr->next)
    {
        if ((wr->opcode != IBV_WR_RDMA_READ && wr->opcode != IBV_WR_RDMA_WRITE) || wr->num_sge != 1 ||
            wr->sg_list == NULL || (wr->send_flags & ~(unsigned)IBV_SEND_SIGNALED) != 0)
        {
            pthread_mutex_unlock(&fake_mutex);
            *bad = wr;
            return EINVAL;
        }
        if (fake->in_flight == fake->max_send_wr)
        {
            pthread_mutex_unlock(&fake_mutex);
            *bad = wr;
            return ENOMEM; /* the send queue is full */
        }
        fake->in_flight++;
        fake->unsignalled++;
        if (fake_stalled)
        {
            continue; /* on the wire, never answered */
        }
        const enum ibv_wc_status status = execute(fake, wr);
        if (status != IBV_WC_SUCCESS)
        {
            qp->state = IBV_QPS_ERR;
        }
        if (status == IBV_WC_SUCCESS && !fake->sig_all && (wr->send_flags & IBV_SEND_SIGNALED) == 0)
        {
            continue;
        }
        fake_cq *cq = fake->send_cq;
        if (cq->count == cq->capacity)
        {
            continue; /* a CQ overrun: the completion is lost, as on a device (the test then misses it) */
        }
        const int at = (cq->head + cq->count) % cq->capacity;
        memset(&cq->entries[at], 0, sizeof(struct ibv_wc));
        cq->entries[at].wr_id = wr->wr_id;
        cq->entries[at].status = status;
        cq->entries[at].opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
        cq->entries[at].byte_len = status == IBV_WC_SUCCESS ? wr->sg_list->length : 0;
        cq->entries[at].qp_num = qp->qp_num;
        cq->retires[at] = fake->unsignalled;
        fake->unsignalled = 0;
        cq->count++;
    }
    pthread_mutex_unlock(&fake_mutex);
    return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, const int count, struct ibv_wc *wc)
{
    fake_cq *fake = (fake_cq *)cq;
    pthread_mutex_lock(&fake_mutex);
    int n = 0;
    while (n < count && fake->count > 0)
    {
        wc[n] = fake->entries[fake->head];
        fake_qp *qp = qp_by_number(wc[n].qp_num);
        if (qp != NULL)
        {
            qp->in_flight -= fake->retires[fake->head];
        }
        fake->head = (fake->head + 1) % fake->capacity;
        fake->count--;
        n++;
    }
    pthread_mutex_unlock(&fake_mutex);
    return n;
}

static const gt_verbs_api fake_api = {
    .get_device_list = fake_get_device_list,
    .free_device_list = fake_free_device_list,
    .open_device = fake_open_device,
    .close_device = fake_close_device,
    .alloc_pd = fake_alloc_pd,
    .dealloc_pd = fake_dealloc_pd,
    .reg_mr = fake_reg_mr,
    .dereg_mr = fake_dereg_mr,
    .create_cq = fake_create_cq,
    .destroy_cq = fake_destroy_cq,
    .create_qp = fake_create_qp,
    .destroy_qp = fake_destroy_qp,
    .modify_qp = fake_modify_qp,
    .query_port = fake_query_port,
    .query_gid = fake_query_gid,
    .post_send = fake_post_send,
    .poll_cq = fake_poll_cq,
};

int fake_verbs_install(const int devices)
{
    pthread_mutex_lock(&fake_mutex);
    fake_devices = devices > 0 ? 1 : 0;
    pthread_mutex_unlock(&fake_mutex);
    gt_rdma_use_api(&fake_api);
    return 1;
}

void fake_verbs_uninstall(void)
{
    gt_rdma_use_api(NULL);
}

void fake_verbs_stall(const int stalled)
{
    pthread_mutex_lock(&fake_mutex);
    fake_stalled = stalled;
    pthread_mutex_unlock(&fake_mutex);
}

int fake_verbs_registrations(void)
{
    pthread_mutex_lock(&fake_mutex);
    const int made = registrations_made;
    pthread_mutex_unlock(&fake_mutex);
    return made;
}

int fake_verbs_live(void)
{
    pthread_mutex_lock(&fake_mutex);
    int live = live_contexts + live_pds + live_cqs;
    for (int i = 0; i < FAKE_MAX_OBJECTS; i++)
    {
        live += (fake_mrs[i] != NULL) + (fake_qps[i] != NULL);
    }
    pthread_mutex_unlock(&fake_mutex);
    return live;
}

int fake_verbs_qp_state(const uint32_t qp_num)
{
    pthread_mutex_lock(&fake_mutex);
    const fake_qp *qp = qp_by_number(qp_num);
    const int state = qp == NULL ? -1 : (int)qp->qp.state;
    pthread_mutex_unlock(&fake_mutex);
    return state;
}

#else

int fake_verbs_install(const int devices)
{
    return 0;
}

int fake_verbs_registrations(void)
{
    return 0;
}

void fake_verbs_uninstall(void)
{
}

int fake_verbs_live(void)
{
    return 0;
}

void fake_verbs_stall(const int stalled)
{
}

int fake_verbs_qp_state(const uint32_t qp_num)
{
    return -1;
}

#endif
