/* A map from device pointers to the pool that allocated them: the live
 * allocations of every pool of the process.  Not thread-safe on its own:
 * live-pointers.c locks around it. */
#ifndef CUCAPTURE_PTR_SET_H
#define CUCAPTURE_PTR_SET_H

#include <cuda.h>
#include <stddef.h>

struct cucap_ptr_slot {
    CUdeviceptr ptr;                 /* 0 is empty, 1 a removed entry */
    const void *owner;
    int graph;                       /* made by a capture: the address stays its graph's after a free */
};

#define CUCAP_PTR_SET_SMALL 16

struct cucap_ptr_set {
    struct cucap_ptr_slot *slots;    /* open addressing: small, or on the heap when larger */
    size_t capacity, count, used;
    struct cucap_ptr_slot small[CUCAP_PTR_SET_SMALL];
};

/* Record p as owner's, made by a capture (graph 1) or not; an earlier
 * owner of the same address loses it (the driver hands out an address
 * again only once nothing holds it).  0, or -1 when out of memory. */
int cucap_i_ptr_set_add(struct cucap_ptr_set *set, CUdeviceptr p, const void *owner, int graph);
/* Remove p when owner holds it: 1; 2 when it is a graph's (it stays: its
 * graph's next launch makes it again); 0 when nobody holds it; -1 when
 * another owner does (then it stays). */
int cucap_i_ptr_set_remove(struct cucap_ptr_set *set, CUdeviceptr p, const void *owner);
/* Forget every pointer of owner.  A set emptied by removals holds no
 * heap memory. */
void cucap_i_ptr_set_remove_owner(struct cucap_ptr_set *set, const void *owner);

#endif
