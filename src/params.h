/* The parameter block of a capture (params.c): device memory that the
 * captured work reads, written before each launch.  Internal. */
#ifndef CUCAP_I_PARAMS_H
#define CUCAP_I_PARAMS_H

#include "cucapture.h"
#include "context-hold.h"

struct cucap_params;

/* A block of size bytes in hold's context, from the library's pool of
 * blocks of its device (allocated in relaxed thread mode, which a capture on this or
 * another thread allows), with one reference; the block holds a
 * reference on hold. */
CUresult cucap_i_params_new(struct ctx_hold *hold, size_t size, struct cucap_params **out, const char *caller,
                            cucap_error **err);
void cucap_i_params_ref(struct cucap_params *p);
/* The last reference gives the block back to its pool behind the last
 * launch that reads it, without waiting on the host (but when the driver
 * refuses that: then it waits for that launch and frees the block);
 * failures go to the warning handler as caller's. */
void cucap_i_params_unref(struct cucap_params *p, const char *caller);
CUdeviceptr cucap_i_params_block(const struct cucap_params *p);
/* Whether every launch that reads the block is done (the event behind the
 * last one reached). */
int cucap_i_params_idle(const struct cucap_params *p);
/* Whether work queued on s from now on follows every launch that reads
 * the block: the last one was on s, or all are done. */
int cucap_i_params_free_for(struct cucap_params *p, CUstream s);
/* dev's pool of blocks (made on first use), for the library's other small
 * stream-ordered memory too. */
CUresult cucap_i_params_pool(CUdevice dev, CUmemoryPool *out, const char *caller, cucap_error **err);
/* The pools of blocks destroyed (cucap_release_cached); blocks still
 * alive keep theirs until they are freed. */
void cucap_i_params_pools_drain(void);
size_t cucap_i_params_size(const struct cucap_params *p);

/* Launch exec on s, reading the block: values (size bytes, the block's
 * size; NULL: the block as the last launch left it) are copied in first,
 * on s, after every earlier launch that reads the block on any stream.
 * In ctx, which the caller makes current. */
CUresult cucap_i_params_launch(struct cucap_params *p, CUgraphExec exec, const void *values, CUstream s,
                               const char *caller, cucap_error **err);

#endif
