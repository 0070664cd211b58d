/* What pool.c shares with the rest of the library and the tests.  Internal. */
#ifndef CUCAP_I_POOL_INTERNAL_H
#define CUCAP_I_POOL_INTERNAL_H

#include <stddef.h>

#include "cucapture.h"

/* The memory the pools use to track live allocations (tests). */
size_t cucap_i_pool_tracked_bytes(void);
/* Free the pool objects kept for reuse (with cucap_i_drain_kept). */
void cucap_i_pool_spares_drain(void);

#endif
