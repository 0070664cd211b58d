/* A step run eagerly (eager-run.c).  Internal. */
#ifndef CUCAP_I_EAGER_RUN_H
#define CUCAP_I_EAGER_RUN_H

#include "cucapture.h"
#include "context-hold.h"

/* fn run on a builder of hold's device and context that does not capture:
 * forks are real streams joined by events, pool allocations are
 * stream-ordered, the parameter block holds values (values_size bytes, or
 * none); its work follows what s had queued, and what s queues next
 * follows it.  fn's error comes out as its own, with its notes. */
CUresult cucap_i_run_eagerly(struct ctx_hold *hold, cucap_capture_fn fn, void *user_data, const void *values,
                             size_t values_size, CUstream s, const char *caller, cucap_error **err);

/* The streams kept behind earlier runs destroyed (cucap_release_cached);
 * failures go to the warning handler. */
void cucap_i_eager_streams_drain(void);

#endif
