/* What pool.c shares with the rest of the library.  Internal. */
#ifndef CUCAP_I_POOL_INTERNAL_H
#define CUCAP_I_POOL_INTERNAL_H

#include "cucapture.h"

/* Free the pool objects kept for reuse (with cucap_i_drain_kept). */
void cucap_i_pool_spares_drain(void);

#endif
