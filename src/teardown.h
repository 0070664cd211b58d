/* Destroying everything kept (teardown.c).  Internal. */
#ifndef CUCAP_I_TEARDOWN_H
#define CUCAP_I_TEARDOWN_H

#include "cucapture.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Destroy everything cached and kept (for leak checks); only
 * while no other library call runs. */
void cucap_i_drain_kept(void);

#ifdef __cplusplus
}
#endif

#endif
