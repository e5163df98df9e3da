/*
 * Segment memory for storage nodes: anonymous private mappings aligned to the 2 MiB huge-page size, optionally
 * advised to be backed by transparent huge pages. A segment's pages are touched by the kernel on every socket copy
 * into or out of it; with 4 KiB pages a large segment costs a page-table walk (and, in a VM, often a second-level
 * one) per 4 KiB, with 2 MiB pages one per 2 MiB, and first-touch faults drop by the same factor of 512.
 */
#include "gt_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t round_up_huge(const uint64_t length)
{
    return (length + GT_HUGE_PAGE_BYTES - 1) & ~(uint64_t)(GT_HUGE_PAGE_BYTES - 1);
}

int gt_memory_map(const uint64_t length, const int huge, void **address, uint64_t *mapped_length, gt_error *error)
{
    if (address == NULL || mapped_length == NULL)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "no place for the mapping's address or length");
    }
    *address = NULL;
    *mapped_length = 0;
    if (length == 0 || length > GT_MAX_MAPPING_BYTES)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "mapping length must be in 1..%llu, was %llu",
            (unsigned long long)GT_MAX_MAPPING_BYTES, (unsigned long long)length);
    }
    const uint64_t wanted = round_up_huge(length);
    /* Over-map by one huge page, then trim both ends so that the mapping starts on a 2 MiB boundary. */
    const uint64_t reserved = wanted + GT_HUGE_PAGE_BYTES;
    uint8_t *raw = mmap(NULL, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
    {
        const int cause = errno;
        return gt_fail(error, GT_INTERNAL_ERROR, "mmap of %llu bytes failed: %s", (unsigned long long)reserved,
            strerror(cause));
    }
    uint8_t *start = (uint8_t *)(((uintptr_t)raw + GT_HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(GT_HUGE_PAGE_BYTES - 1));
    const uint64_t head = (uint64_t)(start - raw);
    const uint64_t tail = reserved - head - wanted;
    if (head > 0)
    {
        munmap(raw, head);
    }
    if (tail > 0)
    {
        munmap(start + wanted, tail);
    }
    if (huge && madvise(start, wanted, MADV_HUGEPAGE) != 0)
    {
        const int cause = errno;
        munmap(start, wanted);
        return gt_fail(error, GT_UNAVAILABLE, "madvise(MADV_HUGEPAGE) refused: %s (kernel without transparent huge "
            "pages?)", strerror(cause));
    }
    *address = start;
    *mapped_length = wanted;
    return GT_OK;
}

int gt_memory_unmap(void *address, const uint64_t mapped_length)
{
    if (address == NULL || mapped_length == 0 || ((uintptr_t)address & (GT_HUGE_PAGE_BYTES - 1)) != 0 ||
        (mapped_length & (GT_HUGE_PAGE_BYTES - 1)) != 0)
    {
        return GT_INVALID_PARAMS;
    }
    return munmap(address, mapped_length) == 0 ? GT_OK : GT_INVALID_PARAMS;
}
