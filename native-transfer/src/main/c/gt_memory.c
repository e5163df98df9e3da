/* Registered memory regions: every local address an operation touches is resolved and bounds-checked here. */
#include "gt_internal.h"

#include <stdlib.h>

#define SLOT_BITS 20u
#define SLOT_MASK ((1u << SLOT_BITS) - 1u)
#define MAX_REGIONS (1u << SLOT_BITS)

void gt_regions_init(gt_region_table *table)
{
    memset(table, 0, sizeof(*table));
}

void gt_regions_free(gt_region_table *table)
{
    free(table->regions);
    free(table->free_slots);
    memset(table, 0, sizeof(*table));
}

int gt_regions_add(gt_region_table *table, void *address, const uint64_t length, uint32_t *id)
{
    if (address == NULL || length == 0)
    {
        return GT_INVALID_PARAMS;
    }
    if ((uintptr_t)address + length < (uintptr_t)address)
    {
        return GT_INVALID_PARAMS;
    }
    uint32_t slot;
    if (table->free_count > 0)
    {
        slot = table->free_slots[--table->free_count];
    }
    else
    {
        if (table->count == MAX_REGIONS - 1)
        {
            return GT_UNAVAILABLE;
        }
        if (table->count + 1 >= table->capacity)
        {
            const uint32_t capacity = table->capacity == 0 ? 64 : table->capacity * 2;
            gt_region *regions = realloc(table->regions, capacity * sizeof(gt_region));
            if (regions == NULL)
            {
                return GT_INTERNAL_ERROR;
            }
            memset(regions + table->capacity, 0, (capacity - table->capacity) * sizeof(gt_region));
            uint32_t *free_slots = realloc(table->free_slots, capacity * sizeof(uint32_t));
            if (free_slots == NULL)
            {
                table->regions = regions;
                return GT_INTERNAL_ERROR;
            }
            table->regions = regions;
            table->free_slots = free_slots;
            table->capacity = capacity;
        }
        slot = ++table->count; /* slot 0 is never used, so no id is 0 */
    }
    gt_region *region = &table->regions[slot];
    region->address = address;
    region->length = length;
    region->used = 1;
    region->transport = NULL;
    region->generation = (region->generation + 1) & (0xFFFFFFFFu >> SLOT_BITS);
    if (region->generation == 0)
    {
        region->generation = 1;
    }
    *id = (region->generation << SLOT_BITS) | slot;
    return GT_OK;
}

gt_region *gt_regions_get(const gt_region_table *table, const uint32_t id)
{
    const uint32_t slot = id & SLOT_MASK;
    if (slot == 0 || slot > table->count)
    {
        return NULL;
    }
    gt_region *region = &table->regions[slot];
    if (!region->used || region->generation != id >> SLOT_BITS)
    {
        return NULL;
    }
    return region;
}

int gt_regions_remove(gt_region_table *table, const uint32_t id)
{
    gt_region *region = gt_regions_get(table, id);
    if (region == NULL)
    {
        return GT_INVALID_PARAMS;
    }
    region->used = 0;
    region->address = NULL;
    region->length = 0;
    region->transport = NULL;
    table->free_slots[table->free_count++] = id & SLOT_MASK;
    return GT_OK;
}

uint8_t *gt_regions_resolve(const gt_region_table *table, const uint32_t id, const uint64_t offset,
    const uint64_t length)
{
    const gt_region *region = gt_regions_get(table, id);
    if (region == NULL || offset > region->length || length > region->length - offset)
    {
        return NULL;
    }
    return region->address + offset;
}
