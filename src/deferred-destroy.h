/* Executable graphs whose destroy is left until their launches are done
 * (deferred-destroy.c).  The driver's cuGraphExecDestroy of an executable
 * graph with conditional nodes waits for its launches in flight, on the
 * host (doc/driver-facts.md), and the host callback data an executable
 * graph owns (set by name) may be given back only once no launch can run
 * it; no call of the library waits for the GPU, so cucap_exec_destroy
 * hands such a graph here instead, with an event recorded behind its last
 * launch, and a later cucap_exec_destroy or cucap_release_cached destroys
 * it and hands its data to the reaper once that event is reached.
 * Internal. */
#ifndef CUCAP_I_DEFERRED_DESTROY_H
#define CUCAP_I_DEFERRED_DESTROY_H

#include <cuda.h>

struct cucap_reaped;

/* Destroy exec (of ctx) and done, and give owned (a chain, or NULL) to
 * the reaper, once done is reached: now if it is, else at a later sweep.
 * Failures go to the warning handler. */
void cucap_i_exec_destroy_when_done(CUgraphExec exec, CUcontext ctx, CUevent done, struct cucap_reaped *owned,
                                    const char *caller);
/* Destroy the executable graphs handed over whose last launch is done;
 * the others stay.  Waits for nothing. */
void cucap_i_deferred_destroys_sweep(const char *caller);

#endif
