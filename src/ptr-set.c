/* A hash set of device pointers, with linear probing. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "ptr-set.h"

#define REMOVED ((CUdeviceptr)1)

static size_t slot_of(CUdeviceptr p, size_t capacity)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (capacity - 1);
}

static int grow(struct cucap_ptr_set *set)
{
    size_t capacity = set->capacity ? set->capacity * 2 : 64, i;
    CUdeviceptr *slots = calloc(capacity, sizeof *slots);

    if (!slots)
        return -1;
    for (i = 0; i < set->capacity; i++) {
        CUdeviceptr p = set->slots[i];
        size_t j;
        if (p == 0 || p == REMOVED)
            continue;
        for (j = slot_of(p, capacity); slots[j]; j = (j + 1) & (capacity - 1))
            ;
        slots[j] = p;
    }
    free(set->slots);
    set->slots = slots;
    set->capacity = capacity;
    set->used = set->count;
    return 0;
}

int cucap_i_ptr_set_add(struct cucap_ptr_set *set, CUdeviceptr p)
{
    size_t i;

    if ((set->used + 1) * 2 > set->capacity && grow(set) != 0)
        return -1;
    for (i = slot_of(p, set->capacity); set->slots[i] && set->slots[i] != REMOVED;
         i = (i + 1) & (set->capacity - 1))
        if (set->slots[i] == p)
            return 0;
    if (set->slots[i] == 0)
        set->used++;
    set->slots[i] = p;
    set->count++;
    return 0;
}

int cucap_i_ptr_set_remove(struct cucap_ptr_set *set, CUdeviceptr p)
{
    size_t i;

    if (!set->capacity || p == 0 || p == REMOVED)
        return 0;
    for (i = slot_of(p, set->capacity); set->slots[i]; i = (i + 1) & (set->capacity - 1))
        if (set->slots[i] == p) {
            set->slots[i] = REMOVED;
            set->count--;
            return 1;
        }
    return 0;
}

void cucap_i_ptr_set_clear(struct cucap_ptr_set *set)
{
    free(set->slots);
    set->slots = NULL;
    set->capacity = set->count = set->used = 0;
}
