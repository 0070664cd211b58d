/* Executable graphs whose destroy is left until their launches are done
 * (deferred-destroy.c).  The driver's cuGraphExecDestroy of an executable
 * graph with conditional nodes waits for its launches in flight, on the
 * host (doc/driver-facts.md); no call of the library waits for the GPU,
 * so cucap_exec_destroy hands such a graph here instead, with an event
 * recorded behind its last launch, and a later cucap_exec_destroy or
 * cucap_release_cached destroys it once that event is reached.
 * Internal. */
#ifndef CUCAP_I_DEFERRED_DESTROY_H
#define CUCAP_I_DEFERRED_DESTROY_H

#include <cuda.h>

/* Destroy exec (of ctx) and done once done is reached: now if it is,
 * else at a later sweep.  Failures go to the warning handler. */
void cucap_i_exec_destroy_when_done(CUgraphExec exec, CUcontext ctx, CUevent done, const char *caller);
/* Destroy the executable graphs handed over whose last launch is done;
 * the others stay.  Waits for nothing. */
void cucap_i_deferred_destroys_sweep(const char *caller);

#endif
