/* What pool.c shares with the rest of the library.  Internal. */
#ifndef CUCAP_I_POOL_INTERNAL_H
#define CUCAP_I_POOL_INTERNAL_H

#include "cucapture.h"

/* Free the pool objects kept for reuse, and those of cucap_device_pool
 * (cucap_release_cached). */
void cucap_i_pool_free_list_drain(void);
void cucap_i_pool_device_pools_drain(void);

#endif
