/* The stream and event cache (streams.c).  Internal. */
#ifndef CUCAP_I_STREAMS_H
#define CUCAP_I_STREAMS_H

#include <stddef.h>

#include "cucapture.h"
#include "context-hold.h"

/* A new non-blocking stream (CUCAP_I_STREAM) or timing-free event
 * (CUCAP_I_EVENT) made with ctx current, the thread's own context given
 * back: the one place that does this. */
enum { CUCAP_I_STREAM, CUCAP_I_EVENT };
CUresult cucap_i_create_in(CUcontext ctx, int kind, void **out);

/* Non-blocking streams and timing-free events of device
 * dev's primary context ctx, reused.  A stream given back must not be part
 * of a capture, an event not recorded in a capture that may still run.
 * Only for primary contexts.  caller is the public function on whose
 * behalf it runs, for warnings; no warning is issued under the cache's
 * lock. */
CUresult cucap_i_cache_take_stream(CUcontext ctx, CUdevice dev, CUstream *out, const char *caller);
void cucap_i_cache_give_stream(CUcontext ctx, CUdevice dev, CUstream s, const char *caller);
/* Streams and events given back together (a capture's deferred ones):
 * one locked step for those the caches take. */
struct cucap_cache_item {
    CUcontext ctx;
    CUdevice dev;
    void *handle;                    /* CUstream or CUevent */
    int is_event;
    int joined;                      /* a stream whose fork joined back into the capture it waits on */
};
void cucap_i_cache_give_items(const struct cucap_cache_item *items, size_t n, const char *caller);
CUresult cucap_i_cache_take_event(CUcontext ctx, CUdevice dev, CUevent *out, const char *caller);
void cucap_i_cache_give_event(CUcontext ctx, CUdevice dev, CUevent e, const char *caller);
/* Destroy the cached streams and events (with cucap_i_drain_kept). */
void cucap_i_stream_cache_drain(void);


/* Streams and events of forks, bodies and joins, from the cache
 * in a primary context the builders retain, made and destroyed otherwise.
 * An event recorded in h's capture is reused only once that capture is
 * over. */
CUresult cucap_i_stream_in(CUcontext ctx, CUstream *s, const char *caller, cucap_error **err);
CUresult cucap_i_take_stream(struct ctx_hold *c, CUstream *s, const char *caller);
/* n at once (a split's): none handed out on failure */
CUresult cucap_i_take_streams(struct ctx_hold *c, size_t n, CUstream *out, const char *caller);
void cucap_i_give_stream(struct ctx_hold *c, CUstream s, const char *caller);
/* n streams and one event of c, in one step for the cache: a split's;
 * on failure nothing is handed out and *failed names the call. */
CUresult cucap_i_take_streams_and_event(struct ctx_hold *c, size_t n, CUstream *out, CUevent *e,
                                        const char **failed, const char *caller);
CUresult cucap_i_take_event(struct ctx_hold *c, CUevent *e, const char *caller);

#endif
