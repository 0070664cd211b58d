/* The live allocations of every pool of the process, by address: an
 * address belongs to the pool that the driver last handed it to, so no
 * pool can free an address that another pool now holds.  An allocation
 * made by a capture keeps its address for its graph (each launch makes it
 * again), so a free does not forget it.  Thread-safe: the pointer set is
 * split into stripes by address, each behind a mutex held for a few
 * probes, so threads allocating at once rarely meet.  Internal. */
#ifndef CUCAPTURE_LIVE_POINTERS_H
#define CUCAPTURE_LIVE_POINTERS_H

#include <cuda.h>
#include <stddef.h>

/* Record ptr as owner's, made by a capture (graph 1) or not; 0, or -1
 * when out of memory. */
int cucap_i_live_add(CUdeviceptr ptr, const void *owner, int graph);
/* Forget ptr when owner holds it: 1; 2 when a capture made it (it
 * stays); 0 when nobody holds it; -1 when another owner does (it stays). */
int cucap_i_live_remove(CUdeviceptr ptr, const void *owner);
/* Forget every pointer of owner (it is being closed). */
void cucap_i_live_forget_owner(const void *owner);

#endif
