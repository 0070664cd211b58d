/* A set of device pointers: the live allocations of a pool.  Not
 * thread-safe on its own; the pool locks around it. */
#ifndef CUCAPTURE_PTR_SET_H
#define CUCAPTURE_PTR_SET_H

#include <cuda.h>
#include <stddef.h>

struct cucap_ptr_set {
    CUdeviceptr *slots;              /* open addressing; 0 is empty, 1 a removed entry */
    size_t capacity, count, used;
};

int cucap_i_ptr_set_add(struct cucap_ptr_set *set, CUdeviceptr p);   /* 0, or -1 when out of memory */
int cucap_i_ptr_set_remove(struct cucap_ptr_set *set, CUdeviceptr p); /* 1 when it was there */
void cucap_i_ptr_set_clear(struct cucap_ptr_set *set);

#endif
