/* The stream and event cache, and the deferral of a capture's streams
 * and events to its end (stream-cache.c).  Internal. */
#ifndef CUCAP_I_STREAM_CACHE_H
#define CUCAP_I_STREAM_CACHE_H

#include <stddef.h>

#include "cucapture.h"
#include "context-hold.h"

/* A new non-blocking stream (CUCAP_I_STREAM) or timing-free event
 * (CUCAP_I_EVENT) made with ctx current, the thread's own context given
 * back: the one place that does this. */
enum { CUCAP_I_STREAM, CUCAP_I_EVENT };
CUresult cucap_i_create_in(CUcontext ctx, int kind, void **out);
/* later waits for the work queued on earlier so far: ev recorded on
 * earlier (a fresh event of ctx, destroyed after, when ev is NULL) and
 * waited for on later, with ctx current where either is the NULL, legacy
 * or per-thread stream (a current context's own).  The host does not
 * wait.  0, or the driver's error. */
CUresult cucap_i_stream_after(CUcontext ctx, CUstream later, CUstream earlier, CUevent ev);
/* ev (of ctx) recorded on s, with ctx current where s is the NULL, legacy
 * or per-thread stream.  0, or the driver's error. */
CUresult cucap_i_event_record_in(CUcontext ctx, CUevent ev, CUstream s);
/* Whether s (of ctx) has no work left to do, asked in relaxed thread mode
 * (a query is no call for another thread's global capture to refuse).  A
 * stream that ran work (an eager run's, or its forks') goes back to the
 * cache, or with its builder to the builders kept for reuse, only then:
 * one behind work held in flight would hand the wait on to its next
 * taker. */
int cucap_i_stream_idle(CUcontext ctx, CUstream s, const char *caller);

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
/* Destroy the cached streams and events and release the primary
 * contexts the cache retained (cucap_release_cached). */
void cucap_i_stream_cache_drain(void);

/* A stream or event that took part in a capture waits in the capture's
 * deferral until the capture is over, then goes back to the cache; after
 * the end it goes back at once.  So no stream or event is ever handed to
 * a second capture while the first may still touch it.  Every call on a
 * deferral but destroy is made under the graph lock of its capture
 * (cucap_i_capture_lock), which guards it. */
struct cucap_deferral {
    int over;                        /* the capture ended: give back at once */
    struct cucap_cache_item *items;  /* few, or on the heap when more */
    size_t count, cap;
    struct cucap_cache_item few[4];
};
void cucap_i_deferral_init(struct cucap_deferral *d);
/* Defer n items, or give them back at once when the capture is over,
 * with room made for `more` after them when it can be.  -1, deferring
 * none, when out of memory (the caller then destroys them, which is legal
 * in a capture). */
int cucap_i_defer(struct cucap_deferral *d, const struct cucap_cache_item *items, size_t n, size_t more,
                  const char *caller);
/* Up to n streams of ctx whose forks joined back into the capture,
 * taken back from those deferred, for another split of the same capture
 * (each is still in it, so its next work follows its last, as a
 * hand-written fork stream's does).  Returns how many. */
size_t cucap_i_deferral_take_joined(struct cucap_deferral *d, CUcontext ctx, size_t n, CUstream *streams);
/* The capture is over: everything deferred back to the cache. */
void cucap_i_deferral_end(struct cucap_deferral *d, const char *caller);
/* A deferral let go of: whatever is still deferred (a capture that never
 * ended) destroyed, which is legal during a capture. */
void cucap_i_deferral_destroy(struct cucap_deferral *d);


/* Streams and events of forks, bodies and joins, from the cache
 * in a primary context the builders retain, made and destroyed otherwise. */
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
/* An event of c recorded in the capture of deferral d (NULL: in none that
 * may still run) given back: to the cache once that capture is over,
 * destroyed when c is not a cached context or d cannot keep it. */
void cucap_i_give_event(struct ctx_hold *c, struct cucap_deferral *d, CUevent e, const char *caller);

#endif
