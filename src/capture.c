/* A capture: its state (running or over, its mode, the id the driver
 * gave it, a direct run's owner when it does not capture), its
 * references, the streams and events deferred to its end, the first
 * library call that failed while it ran, and the graph owner (graph-owner.c)
 * it gives its graph to at its end, whose graph lock is the capture's.
 * This file owns struct cucap_capture; capture.h has the library's lock
 * order. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture-registry.h"
#include "context-hold.h"
#include "driver.h"
#include "free-list.h"
#include "capture.h"
#include "graph-owner.h"
#include "params.h"
#include "error.h"
#include "stream-cache.h"

struct cucap_capture {
    /* zeroed for each new capture, up to its deferral; what a capture
     * reads first, first */
    atomic_int refs;                 /* builders (forks included) */
    atomic_int capture_over;         /* its capture ended: no stream of it captures any more */
    struct cucap_graph_owner *owner; /* the graph it makes, and the graph lock */
    CUcontext ctx;
    CUstream origin;                 /* the stream that began its capture */
    CUstreamCaptureMode mode;        /* the capture's, as begun */
    int body_capture;                /* the standalone capture of a conditional body */
    struct cucap_params *params;     /* the parameter block its work reads, or NULL; under the graph lock */
    struct cucap_direct_run *direct; /* not a capture: a direct run; NULL for a capture */
    cuuint64_t capture_id;           /* 0 until a join sees it; under the graph lock */
    CUresult first_failure_code;     /* CUDA_SUCCESS until a library call on the capture failed */
    struct cucap_deferral deferral;  /* set by cucap_i_deferral_init */
    /* the failure record, under the short lock, which stays made on the
     * free list; its text is read only once first_failure_code is set */
    pthread_mutex_t lock;
    char first_failure_call[128];
    char first_failure_streams[256];   /* for a call that found the capture invalidated */
};

/* ---------------------------------------------------------------- life and references */

static void free_capture(void *capture)
{
    struct cucap_capture *h = capture;

    pthread_mutex_destroy(&h->lock);
    free(h);
}

static struct cucap_free_list free_captures = CUCAP_FREE_LIST_FREEING(free_capture);

void cucap_i_capture_free_list_drain(void)
{
    cucap_i_free_list_drain(&free_captures);
    cucap_i_owner_free_list_drain();
}

struct cucap_capture *cucap_i_capture_new(CUcontext ctx, CUstream origin)
{
    struct cucap_capture *h = cucap_i_free_list_take_own(&free_captures, CUCAP_PER_THREAD_CAPTURES);
    struct cucap_graph_owner *owner = cucap_i_owner_new(ctx);

    if (h && owner) {
        memset(h, 0, offsetof(struct cucap_capture, deferral));
    } else if (owner && (h = cucap_i_aligned_calloc(sizeof *h))) {
        pthread_mutex_init(&h->lock, NULL);
    } else {
        cucap_i_owner_unref(owner, "cucap_builder_begin");
        if (h && !cucap_i_free_list_give_own(&free_captures, CUCAP_PER_THREAD_CAPTURES, h))
            free_capture(h);
        return NULL;
    }
    cucap_i_deferral_init(&h->deferral);
    atomic_init(&h->refs, 1);
    atomic_init(&h->capture_over, 0);
    h->owner = owner;
    h->ctx = ctx;
    h->origin = origin;
    return h;
}

void cucap_i_capture_ref(struct cucap_capture *h)
{
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void cucap_i_capture_ref_by(struct cucap_capture *h, size_t n)
{
    atomic_fetch_add_explicit(&h->refs, (int)n, memory_order_relaxed);
}

static void destroy_capture(struct cucap_capture *h, const char *caller)
{
    cucap_i_deferral_destroy(&h->deferral);   /* a capture that never ended: destroying them is legal */
    cucap_i_owner_unref(h->owner, caller);
    cucap_i_params_unref(h->params, caller);
    if (!cucap_i_free_list_give_own(&free_captures, CUCAP_PER_THREAD_CAPTURES, h))
        free_capture(h);
}

int cucap_i_capture_start_over(struct cucap_capture *h, const char *caller)
{
    struct cucap_graph_owner *owner;
    CUcontext ctx;
    CUstream origin;

    if (!h || h->direct || atomic_load_explicit(&h->refs, memory_order_acquire) != 1 ||
        !cucap_i_owner_start_over(h->owner, caller))
        return 0;
    owner = h->owner;
    ctx = h->ctx;
    origin = h->origin;
    cucap_i_deferral_destroy(&h->deferral);
    cucap_i_params_unref(h->params, caller);
    memset(h, 0, offsetof(struct cucap_capture, deferral));
    cucap_i_deferral_init(&h->deferral);
    atomic_init(&h->refs, 1);
    atomic_init(&h->capture_over, 0);
    h->owner = owner;
    h->ctx = ctx;
    h->origin = origin;
    return 1;
}

/* The only reference left needs no atomic decrement: no thread can take
 * another from it (a registry entry's builder holds its own, and the
 * entry goes before that reference does). */
void cucap_i_capture_unref(struct cucap_capture *h, const char *caller)
{
    if (h && (atomic_load_explicit(&h->refs, memory_order_acquire) == 1 ||
              atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1))
        destroy_capture(h, caller);
}

struct cucap_graph_owner *cucap_i_capture_owner(const struct cucap_capture *h)
{
    return h->owner;
}

struct cucap_params *cucap_i_capture_params(const struct cucap_capture *h)
{
    return h->params;
}

void cucap_i_capture_set_params(struct cucap_capture *h, struct cucap_params *p, const char *caller)
{
    struct cucap_params *old = h->params;

    h->params = p;
    cucap_i_params_unref(old, caller);
}

void cucap_i_capture_unref_by(struct cucap_capture *h, size_t n)
{
    atomic_fetch_sub_explicit(&h->refs, (int)n, memory_order_release);
}

/* ---------------------------------------------------------------- the graph lock */

void cucap_i_capture_lock(struct cucap_capture *h)
{
    cucap_i_owner_lock(h->owner);
}

void cucap_i_capture_unlock(struct cucap_capture *h)
{
    cucap_i_owner_unlock(h->owner);
}

int cucap_i_capture_lock_unless_sole(struct cucap_capture *h)
{
    if (atomic_load_explicit(&h->refs, memory_order_acquire) == 1 && cucap_i_owner_is_sole(h->owner))
        return 0;
    cucap_i_capture_lock(h);
    return 1;
}

int cucap_i_capture_lock_running(struct cucap_capture *h)
{
    cucap_i_capture_lock(h);
    return !cucap_i_capture_is_over(h);
}

int cucap_i_capture_lock_running_unless_sole(struct cucap_capture *h, int *locked)
{
    *locked = cucap_i_capture_lock_unless_sole(h);
    return !cucap_i_capture_is_over(h);
}

/* ---------------------------------------------------------------- the capture */

void cucap_i_capture_learn_id(struct cucap_capture *h, cuuint64_t id)
{
    h->capture_id = id;
}

cuuint64_t cucap_i_capture_id(const struct cucap_capture *h)
{
    return h->capture_id;
}

int cucap_i_capture_is_over(const struct cucap_capture *h)
{
    return atomic_load_explicit(&h->capture_over, memory_order_acquire);
}

void cucap_i_capture_set_mode(struct cucap_capture *h, CUstreamCaptureMode mode)
{
    h->mode = mode;
}

CUstream cucap_i_capture_origin(const struct cucap_capture *h)
{
    return h->origin;
}

CUcontext cucap_i_capture_context(const struct cucap_capture *h)
{
    return h->ctx;
}

int cucap_i_capture_has_graph(struct cucap_capture *h)
{
    return cucap_i_owner_has_graph(h->owner);
}

struct cucap_deferral *cucap_i_capture_deferral(struct cucap_capture *h)
{
    return &h->deferral;
}

void cucap_i_capture_over(struct cucap_capture *h, CUgraph ended)
{
    if (ended)
        cucap_i_owner_take(h->owner, ended);
    atomic_store_explicit(&h->capture_over, 1, memory_order_release);
    cucap_i_deferral_end(&h->deferral, "cucap_builder_end");
}

void cucap_i_give_back_stream(struct ctx_hold *c, CUstream s, struct cucap_capture *h, const char *caller)
{
    struct cucap_cache_item item = { c->ctx, c->dev, s, 0, 0 };
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUresult rc;

    if (h && h->direct) {
        cucap_i_direct_give_stream(h, c, s, caller);
        return;
    }
    rc = cucap_i_drv.cuStreamGetCaptureInfo(s, &status, &id, NULL, NULL, NULL, NULL);
    if (rc == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_NONE) {
        cucap_i_give_stream(c, s, caller);
        return;
    }
    /* a capture id not learned yet (no join saw it): not provably this
     * capture, so destroyed rather than kept */
    if (rc == CUDA_SUCCESS && c->retained && h && id && id == h->capture_id &&
        cucap_i_defer(&h->deferral, &item, 1, 0, caller) == 0)
        return;
    if ((rc = cucap_i_drv.cuStreamDestroy(s)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuStreamDestroy failed while releasing a builder's stream: " CUCAP_I_RESULT_FMT, caller,
                     CUCAP_I_RESULT_ARGS(rc));
}

struct cucap_capture *cucap_i_capture_new_direct(CUcontext ctx, CUstream origin, struct cucap_direct_run *run)
{
    struct cucap_capture *h = cucap_i_capture_new(ctx, origin);

    if (h)
        h->direct = run;
    return h;
}

size_t cucap_i_direct_take_streams(const struct cucap_capture *h, CUcontext ctx, size_t n, CUstream *out)
{
    size_t i = 0;

    if (h && h->direct && h->direct->take_stream)
        while (i < n && (out[i] = h->direct->take_stream(h->direct, ctx)) != NULL)
            i++;
    return i;
}

void cucap_i_direct_give_stream(const struct cucap_capture *h, struct ctx_hold *c, CUstream s, const char *caller)
{
    h->direct->give_stream(h->direct, c, s, caller);
}

struct cucap_direct_run *cucap_i_capture_direct(const struct cucap_capture *h)
{
    return h ? h->direct : NULL;
}

/* ---------------------------------------------------------------- conditional bodies */

void cucap_i_capture_mark_body(struct cucap_capture *h)
{
    h->body_capture = 1;
}

int cucap_i_capture_is_body(const struct cucap_capture *h)
{
    return h && h->body_capture;
}

/* ---------------------------------------------------------------- capture failures */

int cucap_i_is_capture_error(CUresult code)
{
    return (code >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && code <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

/* A call that found the capture INVALIDATED did not invalidate it:
 * something outside the library did. */
void cucap_i_capture_failed(struct cucap_capture *h, const char *call, CUresult code)
{
    char streams[256];

    if (!h || !cucap_i_is_capture_error(code))
        return;
    streams[0] = '\0';
    if (code == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)   /* before the short lock: the registry's is taken alone */
        cucap_i_registry_describe(h, h->origin, streams, sizeof streams);
    pthread_mutex_lock(&h->lock);
    if (h->first_failure_code == CUDA_SUCCESS) {
        snprintf(h->first_failure_call, sizeof h->first_failure_call, "%s", call);
        h->first_failure_code = code;
        snprintf(h->first_failure_streams, sizeof h->first_failure_streams, "%s", streams);
    }
    pthread_mutex_unlock(&h->lock);
}

CUresult cucap_i_fail_in_capture(struct cucap_capture *h, CUstream s, CUresult rc, const char *caller, const char *call,
                                 const char *consequence, cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;

    /* the driver does not always say (an event wait in a capture that
     * another thread's global-mode call invalidated gives INVALID_VALUE) */
    if (!cucap_i_is_capture_error(rc) &&
        cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
        status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                     "%s: %s failed: " CUCAP_I_RESULT_FMT
                     ", because the capture had been invalidated before this call by a call "
                     "made outside the library on one of its streams (synchronizing one of them, a synchronous "
                     "allocation or free, or another thread's global-mode call such as a legacy-stream "
                     "operation)%s", caller, call, CUCAP_I_RESULT_ARGS(rc),
                     consequence ? consequence : "");
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        cucap_i_fail(err, rc, "%s: %s failed: " CUCAP_I_RESULT_FMT "%s", caller, call, CUCAP_I_RESULT_ARGS(rc),
                     consequence ? consequence : "");
    }
    cucap_i_capture_failed(h, caller, rc);
    return rc;
}

/* For the registry: a reference to a capture that still runs. */
static int take_running(struct cucap_capture *h)
{
    if (cucap_i_capture_is_over(h))
        return 0;
    cucap_i_capture_ref(h);
    return 1;
}

void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code)
{
    struct cucap_capture *h;

    if (!cucap_i_is_capture_error(code) || !(h = cucap_i_registry_find(s, take_running)))
        return;
    cucap_i_capture_failed(h, call, code);
    cucap_i_capture_unref(h, call);
}

struct cucap_capture *cucap_i_capture_lock_stream(CUstream s)
{
    struct cucap_capture *h = cucap_i_registry_find(s, take_running);

    if (h)
        cucap_i_capture_lock(h);
    return h;
}

void cucap_i_capture_unlock_stream(struct cucap_capture *h, const char *caller)
{
    if (!h)
        return;
    cucap_i_capture_unlock(h);
    cucap_i_capture_unref(h, caller);
}

/* What a capture's mode lets through, for the note of a capture that
 * something outside the library invalidated. */
static const char *mode_note(CUstreamCaptureMode mode)
{
    switch (mode) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
        return "the capture ran in global mode: a call that capture forbids (a synchronization, a synchronous "
               "allocation or free) made in global mode by any thread invalidates it; thread_local mode limits "
               "that to the capturing thread's own calls, relaxed mode lets them all through";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
        return "the capture ran in thread_local mode: only the capturing thread's own calls that capture "
               "forbids invalidate it, other threads' do not; relaxed mode lets them through";
    default:
        return "the capture ran in relaxed mode: no thread's synchronous allocation or free invalidates it, "
               "work on one of its streams does (synchronizing it, or legacy-stream work while it is a "
               "blocking stream)";
    }
}

void cucap_i_capture_note_first_failure(struct cucap_capture *h, cucap_error **err)
{
    char call[128], streams[256], doing[640];
    CUresult code;

    if (!h)
        return;
    call[0] = streams[0] = '\0';
    pthread_mutex_lock(&h->lock);
    if ((code = h->first_failure_code) != CUDA_SUCCESS) {
        snprintf(call, sizeof call, "%s", h->first_failure_call);
        snprintf(streams, sizeof streams, "%s", h->first_failure_streams);
    }
    pthread_mutex_unlock(&h->lock);
    if (!call[0]) {
        /* no library call failed first: something outside the library did it */
        unsigned int flags = CU_STREAM_NON_BLOCKING;
        if (!err || !*err || cucap_error_code(*err) != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
            return;
        cucap_i_error_add_note(*err, "no libcucapture call on this capture failed before its end: a call made "
                                     "outside the library invalidated it, such as synchronizing one of its "
                                     "streams, a synchronous allocation or free (cuMemAlloc, cudaMalloc, "
                                     "cuMemFree) on the capturing thread in global or thread_local mode, or "
                                     "another thread's global-mode call such as a legacy-stream operation");
        if (h->origin && h->origin != CU_STREAM_LEGACY && h->origin != CU_STREAM_PER_THREAD &&
            cucap_i_drv.cuStreamGetFlags(h->origin, &flags) == CUDA_SUCCESS && !(flags & CU_STREAM_NON_BLOCKING))
            cucap_i_error_add_note(*err, "the capture's stream is a blocking stream (created without "
                                         "CU_STREAM_NON_BLOCKING): work that any thread queued on the legacy "
                                         "default stream while it captured (a memset, copy or kernel launch with "
                                         "no stream or stream 0, or a synchronous copy) waits for it, which the "
                                         "driver refuses (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) and which "
                                         "invalidates the capture; capture a non-blocking stream, or queue that "
                                         "work on a stream of the capture");
        cucap_i_error_add_note(*err, "%s", mode_note(h->mode));
        return;
    }
    if (code == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        snprintf(doing, sizeof doing,
                 "this capture ran (the first library call on it that failed; the capture was invalidated "
                 "before that call, by a call made outside the library on one of its streams: synchronizing one "
                 "of them, a synchronous allocation or free, or another thread's global-mode call such as a "
                 "legacy-stream operation%s%s)", streams[0] ? "; its streams: " : "", streams);
    else
        snprintf(doing, sizeof doing, "this capture ran (the first library call on it that failed)");
    cucap_i_note_failure(err, call, doing, code);
}
