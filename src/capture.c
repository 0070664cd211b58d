/* A hierarchy: one capture and its graphs (a root CUgraph and the graphs
 * the driver owns below it, reference-counted, destroyed once, never
 * after being retired), with what the capture keeps until it is over:
 * the records of its conditional bodies, the first library call that
 * failed while it ran, its parameter block and its deferred streams and
 * events.  This file owns struct cucap_capture; hierarchy.h has the library's
 * lock order. */
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
#include "error.h"
#include "node-names.h"
#include "params.h"
#include "stream-cache.h"

struct cucap_box {
    _Atomic(CUgraph) graph;          /* NULL once retired; the root's, until its capture's end returns it */
    int retired;                     /* the driver discarded it; under the short lock */
    struct cucap_box *parent;        /* NULL for the root */
    struct cucap_box *next;          /* the hierarchy's list, parents before children */
};

/* A conditional body of a node in this hierarchy, captured standalone. */
struct cucap_body_record {
    char node[96];                   /* "the IF node added by cucap_builder_if" */
    unsigned int index;
    enum cucap_body_status status;
    struct cucap_body_record *next;
};

struct cucap_capture {
    atomic_int refs;                 /* builders (forks included), graph references, executable graphs */
    pthread_mutex_t graph_lock;      /* recursive; see cucap_i_capture_lock */
    pthread_mutex_t lock;            /* the short lock: the box list, bodies, the failure record */
    CUcontext ctx;
    CUstream origin;                 /* the stream that began its capture */
    CUstreamCaptureMode mode;        /* the capture's, as begun */
    struct cucap_params *params;     /* the parameter block its capture's kernels read, or NULL; under
                                        the graph lock */
    struct cucap_node_names *names;  /* the nodes its capture named, or NULL; under the graph lock */
    struct cucap_direct_run *direct; /* not a capture: a direct run; NULL for a capture */
    struct cucap_box root;
    atomic_int owned;                /* the capture's end returned the root */
    atomic_int capture_over;         /* its capture ended: no stream of it captures any more */
    cuuint64_t capture_id;           /* 0 until a join sees it; under the graph lock */
    int body_capture;                /* the standalone capture of a conditional body */
    struct cucap_body_record *bodies;
    struct cucap_deferral deferral;
    CUresult first_failure_code;     /* CUDA_SUCCESS until a library call on the capture failed */
    char first_failure_call[128];
    char first_failure_streams[256];   /* for a call that found the capture invalidated */
};

/* ---------------------------------------------------------------- life and references */

static struct cucap_free_list free_hiers = CUCAP_FREE_LIST_INIT;

void cucap_i_capture_free_list_drain(void)
{
    cucap_i_free_list_drain(&free_hiers);
}

struct cucap_capture *cucap_i_capture_new(CUcontext ctx, CUstream origin)
{
    struct cucap_capture *h = cucap_i_free_list_take(&free_hiers);
    pthread_mutexattr_t recursive;

    if (h)
        memset(h, 0, sizeof *h);
    else if (!(h = calloc(1, sizeof *h)))
        return NULL;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&h->graph_lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    pthread_mutex_init(&h->lock, NULL);
    cucap_i_deferral_init(&h->deferral);
    atomic_init(&h->refs, 1);
    atomic_init(&h->owned, 0);
    atomic_init(&h->capture_over, 0);
    atomic_init(&h->root.graph, NULL);
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

static void destroy_hier(struct cucap_capture *h, const char *caller)
{
    CUgraph root = atomic_load_explicit(&h->root.graph, memory_order_acquire);
    CUresult rc;

    if (atomic_load_explicit(&h->owned, memory_order_acquire) && root &&
        (rc = cucap_i_drv.cuGraphDestroy(root)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuGraphDestroy failed while destroying the last capture's graph: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    while (h->root.next) {   /* the driver destroyed the graphs below the root with it */
        struct cucap_box *b = h->root.next;
        h->root.next = b->next;
        free(b);
    }
    while (h->bodies) {
        struct cucap_body_record *r = h->bodies;
        h->bodies = r->next;
        free(r);
    }
    cucap_i_deferral_destroy(&h->deferral);   /* a capture that never ended: destroying them is legal */
    cucap_i_params_unref(h->params, caller);
    (void)cucap_i_names_free(h->names);   /* a capture's list owns no data */
    pthread_mutex_destroy(&h->graph_lock);
    pthread_mutex_destroy(&h->lock);
    if (!cucap_i_free_list_give(&free_hiers, h))
        free(h);
}

void cucap_i_capture_unref(struct cucap_capture *h, const char *caller)
{
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        destroy_hier(h, caller);
}

void cucap_i_capture_unref_by(struct cucap_capture *h, size_t n)
{
    atomic_fetch_sub_explicit(&h->refs, (int)n, memory_order_release);
}

/* ---------------------------------------------------------------- the graph lock */

void cucap_i_capture_lock(struct cucap_capture *h)
{
    pthread_mutex_lock(&h->graph_lock);
}

void cucap_i_capture_unlock(struct cucap_capture *h)
{
    pthread_mutex_unlock(&h->graph_lock);
}

int cucap_i_capture_lock_unless_sole(struct cucap_capture *h)
{
    if (atomic_load_explicit(&h->refs, memory_order_acquire) == 1)
        return 0;
    cucap_i_capture_lock(h);
    return 1;
}

int cucap_i_capture_lock_running(struct cucap_capture *h)
{
    cucap_i_capture_lock(h);
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
    return atomic_load_explicit(&h->owned, memory_order_acquire) && cucap_i_capture_root(h) != NULL;
}

struct cucap_deferral *cucap_i_capture_deferral(struct cucap_capture *h)
{
    return &h->deferral;
}

void cucap_i_capture_over(struct cucap_capture *h, CUgraph ended)
{
    if (ended) {
        atomic_store_explicit(&h->root.graph, ended, memory_order_release);
        atomic_store_explicit(&h->owned, 1, memory_order_release);
    }
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

struct cucap_node_names **cucap_i_capture_names(struct cucap_capture *h)
{
    return &h->names;
}

struct cucap_capture *cucap_i_capture_new_owning(CUcontext ctx, CUgraph graph)
{
    struct cucap_capture *h = cucap_i_capture_new(ctx, NULL);

    if (h)
        cucap_i_capture_over(h, graph);
    return h;
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

/* ---------------------------------------------------------------- the ownership tree */

void cucap_i_capture_retire(struct cucap_capture *h, struct cucap_box *box)
{
    struct cucap_box *b;

    pthread_mutex_lock(&h->lock);
    atomic_store_explicit(&box->graph, NULL, memory_order_release);
    box->retired = 1;
    /* parents come before children: one sweep retires every descendant */
    for (b = h->root.next; b; b = b->next)
        if (b->parent && b->parent->retired) {
            atomic_store_explicit(&b->graph, NULL, memory_order_release);
            b->retired = 1;
        }
    pthread_mutex_unlock(&h->lock);
}

struct cucap_box *cucap_i_capture_root_box(struct cucap_capture *h)
{
    return &h->root;
}

CUgraph cucap_i_capture_root(struct cucap_capture *h)
{
    return cucap_i_box_graph(&h->root);
}

struct cucap_box *cucap_i_capture_add_child(struct cucap_capture *h, struct cucap_box *parent, CUgraph graph)
{
    struct cucap_box *box = calloc(1, sizeof *box), **tail;

    if (!box)
        return NULL;
    atomic_init(&box->graph, graph);
    box->parent = parent;
    pthread_mutex_lock(&h->lock);
    for (tail = &h->root.next; *tail; tail = &(*tail)->next)
        ;
    *tail = box;   /* after its parent, which is already listed */
    pthread_mutex_unlock(&h->lock);
    return box;
}

CUgraph cucap_i_box_graph(const struct cucap_box *box)
{
    return atomic_load_explicit(&((struct cucap_box *)box)->graph, memory_order_acquire);
}

/* ---------------------------------------------------------------- conditional bodies */

int cucap_i_capture_has_bodies(const struct cucap_capture *h)
{
    return h->bodies != NULL;
}

void cucap_i_capture_mark_body(struct cucap_capture *h)
{
    h->body_capture = 1;
}

int cucap_i_capture_is_body(const struct cucap_capture *h)
{
    return h && h->body_capture;
}

struct cucap_body_record *cucap_i_capture_add_body(struct cucap_capture *h, const char *node, unsigned int index)
{
    struct cucap_body_record *r = calloc(1, sizeof *r);

    if (!r)
        return NULL;
    snprintf(r->node, sizeof r->node, "%s", node);
    r->index = index;
    r->status = CUCAP_BODY_EMPTY;
    pthread_mutex_lock(&h->lock);
    r->next = h->bodies;
    h->bodies = r;
    pthread_mutex_unlock(&h->lock);
    return r;
}

unsigned int cucap_i_body_index(const struct cucap_body_record *r)
{
    return r->index;
}

const char *cucap_i_body_node(const struct cucap_body_record *r)
{
    return r->node;
}

void cucap_i_capture_set_body(struct cucap_capture *h, struct cucap_body_record *r, enum cucap_body_status status)
{
    pthread_mutex_lock(&h->lock);
    r->status = status;
    pthread_mutex_unlock(&h->lock);
}

CUresult cucap_i_capture_check_bodies(struct cucap_capture *h, const char *caller, cucap_error **err)
{
    const struct cucap_body_record *r;
    char node[96];
    unsigned int index = 0;
    enum cucap_body_status status = CUCAP_BODY_EMPTY;

    pthread_mutex_lock(&h->lock);
    for (r = h->bodies; r; r = r->next)
        if (r->status == CUCAP_BODY_FAILED || r->status == CUCAP_BODY_CAPTURING) {
            snprintf(node, sizeof node, "%s", r->node);
            index = r->index;
            status = r->status;
            if (status == CUCAP_BODY_FAILED)
                break;
        }
    pthread_mutex_unlock(&h->lock);
    if (status == CUCAP_BODY_FAILED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s was invalidated (its capture failed); capture that body again "
                            "before completing", caller, index, node);
    if (status == CUCAP_BODY_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s is still capturing; end it before completing", caller, index, node);
    return CUDA_SUCCESS;
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
    if (!h->first_failure_call[0]) {
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
    pthread_mutex_lock(&h->lock);
    snprintf(call, sizeof call, "%s", h->first_failure_call);
    snprintf(streams, sizeof streams, "%s", h->first_failure_streams);
    code = h->first_failure_code;
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
