/* The live allocations of every pool of the process, by address: an
 * address belongs to the pool that the driver last handed it to, so no
 * pool can free an address that another pool now holds.  Thread-safe:
 * the pointer set is split into stripes by address, each behind a
 * spinlock held for a few probes, so the allocation path takes no mutex
 * and threads allocating at once rarely meet.  Internal. */
#ifndef CUCAPTURE_LIVE_POINTERS_H
#define CUCAPTURE_LIVE_POINTERS_H

#include <cuda.h>
#include <stddef.h>

/* Record ptr as owner's; 0, or -1 when out of memory. */
int cucap_i_live_add(CUdeviceptr ptr, const void *owner);
/* Forget ptr when owner holds it: 1; 0 when nobody holds it; -1 when
 * another owner does (it stays). */
int cucap_i_live_remove(CUdeviceptr ptr, const void *owner);
/* Forget every pointer of owner (it is being closed). */
void cucap_i_live_forget_owner(const void *owner);

#endif
