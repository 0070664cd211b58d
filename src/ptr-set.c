/* The pointer map, with linear probing.  Its memory follows the live
 * pointers: it grows at half full, shrinks at an eighth, and removed
 * entries are swept out before they crowd the table; the smallest table
 * lives in the map itself, so a map of a few pointers never allocates. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "ptr-set.h"

#define REMOVED ((CUdeviceptr)1)
#define MIN_CAPACITY CUCAP_PTR_SET_SMALL

static size_t slot_of(CUdeviceptr p, size_t capacity)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (capacity - 1);
}

static int resize(struct cucap_ptr_set *set, size_t capacity)
{
    struct cucap_ptr_slot small[MIN_CAPACITY] = { { 0, NULL, 0 } };
    struct cucap_ptr_slot *slots = small;
    size_t i;

    if (capacity > MIN_CAPACITY && !(slots = calloc(capacity, sizeof *slots)))
        return -1;
    for (i = 0; i < set->capacity; i++) {
        CUdeviceptr p = set->slots[i].ptr;
        size_t j;
        if (p == 0 || p == REMOVED)
            continue;
        for (j = slot_of(p, capacity); slots[j].ptr; j = (j + 1) & (capacity - 1))
            ;
        slots[j] = set->slots[i];
    }
    if (set->slots != set->small)
        free(set->slots);
    if (slots == small) {
        memcpy(set->small, small, sizeof small);
        slots = set->small;
    }
    set->slots = slots;
    set->capacity = capacity;
    set->used = set->count;
    return 0;
}

static struct cucap_ptr_slot *find(const struct cucap_ptr_set *set, CUdeviceptr p)
{
    size_t i;

    if (!set->capacity || p == 0 || p == REMOVED)
        return NULL;
    for (i = slot_of(p, set->capacity); set->slots[i].ptr; i = (i + 1) & (set->capacity - 1))
        if (set->slots[i].ptr == p)
            return &set->slots[i];
    return NULL;
}

static void clear(struct cucap_ptr_set *set)
{
    if (set->slots != set->small)
        free(set->slots);
    set->slots = NULL;
    set->capacity = set->count = set->used = 0;
}

/* After a removal: a table mostly empty shrinks (out of memory: it stays
 * larger, still correct). */
static void after_removal(struct cucap_ptr_set *set)
{
    if (set->count == 0 && set->slots != set->small)
        clear(set);
    else if (set->capacity > MIN_CAPACITY && set->count * 8 < set->capacity)
        (void)resize(set, set->capacity / 2);
}

int cucap_i_ptr_set_add(struct cucap_ptr_set *set, CUdeviceptr p, const void *owner, int graph)
{
    struct cucap_ptr_slot *known = find(set, p);
    size_t i;

    if (known) {
        known->owner = owner;
        known->graph = graph;
        return 0;
    }
    if ((set->used + 1) * 2 > set->capacity) {
        size_t capacity = set->capacity ? set->capacity : MIN_CAPACITY;
        if ((set->count + 1) * 4 > capacity)   /* else mostly removed entries: sweep at the same size */
            capacity = set->capacity ? set->capacity * 2 : MIN_CAPACITY;
        if (resize(set, capacity) != 0)
            return -1;
    }
    for (i = slot_of(p, set->capacity); set->slots[i].ptr && set->slots[i].ptr != REMOVED;
         i = (i + 1) & (set->capacity - 1))
        ;
    if (set->slots[i].ptr == 0)
        set->used++;
    set->slots[i].ptr = p;
    set->slots[i].owner = owner;
    set->slots[i].graph = graph;
    set->count++;
    return 0;
}

/* Empty a slot: a removed mark only where a probe may have to pass it,
 * that is when the next slot is taken; marks that then end a run are
 * emptied too. */
static void forget(struct cucap_ptr_set *set, struct cucap_ptr_slot *slot)
{
    size_t mask = set->capacity - 1, i = (size_t)(slot - set->slots);

    slot->owner = NULL;
    slot->graph = 0;
    set->count--;
    if (set->slots[(i + 1) & mask].ptr) {
        slot->ptr = REMOVED;
        return;
    }
    slot->ptr = 0;
    set->used--;
    for (i = (i - 1) & mask; set->slots[i].ptr == REMOVED; i = (i - 1) & mask) {
        set->slots[i].ptr = 0;
        set->used--;
    }
}

int cucap_i_ptr_set_remove(struct cucap_ptr_set *set, CUdeviceptr p, const void *owner)
{
    struct cucap_ptr_slot *slot = find(set, p);

    if (!slot)
        return 0;
    if (slot->owner != owner)
        return -1;
    if (slot->graph)
        return 2;
    forget(set, slot);
    after_removal(set);
    return 1;
}

void cucap_i_ptr_set_remove_owner(struct cucap_ptr_set *set, const void *owner)
{
    size_t i;

    for (i = 0; i < set->capacity; i++)
        if (set->slots[i].ptr > REMOVED && set->slots[i].owner == owner) {
            set->slots[i].ptr = REMOVED;
            set->slots[i].owner = NULL;
            set->slots[i].graph = 0;
            set->count--;
        }
    if (set->capacity)
        after_removal(set);
}
