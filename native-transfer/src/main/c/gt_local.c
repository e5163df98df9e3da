/*
 * Same-host transfers (docs/protocol.md "LOCAL_CONNECT"): a client on the node's own host reads and writes segment
 * memory with process_vm_readv / process_vm_writev, one copy by the kernel from one address space to the other,
 * instead of a send into loopback TCP and a receive out of it (two copies and the node's CPU for the receive). The
 * node tells where a segment lies in its memory; the client proves it can reach that memory by reading back a cookie,
 * and before every copy reads the node's table generation, which moves whenever the node's segment table changes
 * (a rekey, a segment leaving), so a path never outlives the table it was answered from.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <sys/uio.h>

void gt_local_info_encode(uint8_t out[GT_LOCAL_INFO_LENGTH], const gt_local_info *info)
{
    memset(out, 0, GT_LOCAL_INFO_LENGTH);
    gt_put_u32(out, GT_LOCAL_INFO_MAGIC);
    out[4] = GT_LOCAL_INFO_VERSION;
    gt_put_u32(out + 8, info->pid);
    gt_put_u64(out + 16, info->cookie);
    gt_put_u64(out + 24, info->cookie_address);
    gt_put_u64(out + 32, info->generation);
    gt_put_u64(out + 40, info->generation_address);
    gt_put_u64(out + 48, info->segment_address);
    gt_put_u64(out + 56, info->segment_length);
}

int gt_local_info_decode(const uint8_t in[GT_LOCAL_INFO_LENGTH], gt_local_info *info)
{
    memset(info, 0, sizeof(*info));
    if (gt_get_u32(in) != GT_LOCAL_INFO_MAGIC || in[4] != GT_LOCAL_INFO_VERSION || in[5] != 0 || in[6] != 0 ||
        in[7] != 0 || gt_get_u32(in + 12) != 0)
    {
        return GT_INVALID_PARAMS;
    }
    gt_local_info decoded = {
        .pid = gt_get_u32(in + 8),
        .cookie = gt_get_u64(in + 16),
        .cookie_address = gt_get_u64(in + 24),
        .generation = gt_get_u64(in + 32),
        .generation_address = gt_get_u64(in + 40),
        .segment_address = gt_get_u64(in + 48),
        .segment_length = gt_get_u64(in + 56),
    };
    if (decoded.pid == 0 || decoded.pid > INT32_MAX || decoded.cookie_address == 0 ||
        decoded.generation_address == 0 || decoded.segment_address == 0 || decoded.segment_length == 0 ||
        decoded.segment_address + decoded.segment_length < decoded.segment_address)
    {
        return GT_INVALID_PARAMS;
    }
    *info = decoded;
    return GT_OK;
}

int gt_local_exchange(const int fd, const uint64_t request_id, const uint32_t segment_id, gt_local_info *info,
    gt_error *error)
{
    memset(info, 0, sizeof(*info));
    uint8_t record[GT_LOCAL_INFO_LENGTH];
    const int status = gt_control_exchange(fd, GT_OPC_LOCAL_CONNECT, request_id, segment_id, NULL, 0, record,
        GT_LOCAL_INFO_LENGTH, "LOCAL_CONNECT", error);
    if (status != GT_OK)
    {
        return status;
    }
    if (gt_local_info_decode(record, info) != GT_OK)
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "the node's same-host record does not decode");
    }
    return GT_OK;
}

/* Reads count (address, length) ranges of process pid into local buffers in one call: 1 when all of it came. */
static int read_words(const gt_local_info *info, const uint64_t *addresses, uint64_t *words, const int count)
{
    struct iovec local[2];
    struct iovec remote[2];
    for (int i = 0; i < count; i++)
    {
        local[i].iov_base = &words[i];
        local[i].iov_len = sizeof(uint64_t);
        remote[i].iov_base = (void *)(uintptr_t)addresses[i];
        remote[i].iov_len = sizeof(uint64_t);
    }
    const ssize_t got = process_vm_readv((pid_t)info->pid, local, (unsigned long)count, remote,
        (unsigned long)count, 0);
    return got == (ssize_t)(count * sizeof(uint64_t));
}

int gt_local_verify(const gt_local_info *info, gt_error *error)
{
    const uint64_t addresses[2] = { info->cookie_address, info->generation_address };
    uint64_t words[2] = { 0, 0 };
    if (!read_words(info, addresses, words, 2))
    {
        return gt_fail(error, GT_UNAVAILABLE, "cannot read the memory of process %u: %s", info->pid,
            strerror(errno));
    }
    if (words[0] != info->cookie)
    {
        return gt_fail(error, GT_UNAVAILABLE, "process %u is not the node that answered (another host or PID "
            "namespace)", info->pid);
    }
    if (words[1] != info->generation)
    {
        return gt_fail(error, GT_UNAVAILABLE, "the node's segment table changed during the exchange");
    }
    return GT_OK;
}

int gt_local_generation(const gt_local_info *info, uint64_t *generation)
{
    return read_words(info, &info->generation_address, generation, 1);
}

int gt_local_copy(const gt_local_info *info, const int write, const uint64_t offset, uint8_t *local,
    const uint64_t length)
{
    if (offset > info->segment_length || length > info->segment_length - offset)
    {
        return GT_INVALID_PARAMS;
    }
    uint64_t done = 0;
    while (done < length)
    {
        /* The kernel moves at most MAX_RW_COUNT (INT_MAX rounded down to a page) per call and may stop short. */
        const uint64_t want = length - done < (1u << 30) ? length - done : (1u << 30);
        struct iovec here = { .iov_base = local + done, .iov_len = want };
        struct iovec there = { .iov_base = (void *)(uintptr_t)(info->segment_address + offset + done), .iov_len = want };
        const ssize_t moved = write ? process_vm_writev((pid_t)info->pid, &here, 1, &there, 1, 0) :
            process_vm_readv((pid_t)info->pid, &here, 1, &there, 1, 0);
        if (moved <= 0)
        {
            return GT_TRANSFER_FAIL;
        }
        done += (uint64_t)moved;
    }
    return GT_OK;
}

/* Appends [base, base + length) to iov (count entries so far), merged into the last entry when it ends there. */
static uint32_t iov_append(struct iovec *iov, const uint32_t count, void *base, const size_t length)
{
    if (count > 0 && (uint8_t *)iov[count - 1].iov_base + iov[count - 1].iov_len == (uint8_t *)base)
    {
        iov[count - 1].iov_len += length;
        return count;
    }
    iov[count].iov_base = base;
    iov[count].iov_len = length;
    return count + 1;
}

int gt_local_read_ranges(const gt_local_info *info, const gt_local_range *ranges, const uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
    {
        if (ranges[i].offset > info->segment_length || ranges[i].length > info->segment_length - ranges[i].offset)
        {
            return GT_INVALID_PARAMS;
        }
    }
    struct iovec here[GT_LOCAL_IOV_MAX];
    struct iovec there[GT_LOCAL_IOV_MAX];
    uint32_t next = 0;
    while (next < count)
    {
        const uint32_t start = next;
        uint32_t locals = 0;
        uint32_t remotes = 0;
        uint64_t want = 0;
        /* One call moves less than 1 GiB (the kernel stops at MAX_RW_COUNT, INT_MAX rounded down to a page). */
        while (next < count && want + ranges[next].length <= (1u << 30))
        {
            const gt_local_range *r = &ranges[next];
            if (r->length == 0)
            {
                next++; /* nothing to move */
                continue;
            }
            void *remote = (void *)(uintptr_t)(info->segment_address + r->offset);
            const int local_fits = locals < GT_LOCAL_IOV_MAX ||
                (uint8_t *)here[locals - 1].iov_base + here[locals - 1].iov_len == r->local;
            const int remote_fits = remotes < GT_LOCAL_IOV_MAX ||
                (uint8_t *)there[remotes - 1].iov_base + there[remotes - 1].iov_len == (uint8_t *)remote;
            if (!local_fits || !remote_fits)
            {
                break;
            }
            locals = iov_append(here, locals, r->local, r->length);
            remotes = iov_append(there, remotes, remote, r->length);
            want += r->length;
            next++;
        }
        if (next == start)
        {
            /* A range of 1 GiB or more: the one-range copy splits it. */
            const gt_local_range *r = &ranges[next++];
            const int status = gt_local_copy(info, 0, r->offset, r->local, r->length);
            if (status != GT_OK)
            {
                return status;
            }
            continue;
        }
        if (want == 0)
        {
            continue; /* only empty ranges */
        }
        const ssize_t moved = process_vm_readv((pid_t)info->pid, here, locals, there, remotes, 0);
        if (moved < 0 || (uint64_t)moved != want)
        {
            return GT_TRANSFER_FAIL;
        }
    }
    return GT_OK;
}
