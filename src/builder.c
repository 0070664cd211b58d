/* Graph builders: the capture state machine, split and join. */
#include "config.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "hierarchy.h"
#include "internal.h"

/* The context a builder's stream lives in, shared with its forks; a
 * primary context the library retained is released with the last holder. */
struct ctx_hold {
    atomic_int refs;
    CUcontext ctx;
    CUdevice dev;
    int retained;
};

struct cucap_builder {
    cucap_builder_kind kind;
    cucap_builder_state state;
    CUstream stream;
    int owns_stream;
    struct ctx_hold *ctx;
    struct cucap_hier *h;            /* from begin (forks: their parent's) */
    int cached_stream;               /* the stream comes from the stream cache */
    struct cucap_registration registration;    /* the stream's entry in the capture registry */
    /* BODY only: the body graph of a conditional node in the parent's
     * hierarchy, which the body's standalone capture is attached to */
    struct cucap_hier *parent_h;
    struct cucap_box *body_box;
    struct cucap_body_record *record;
    int record_failed;               /* the last capture failed or could not be attached */
};

/* The context a stream's work runs in.  For a stream of a green context
 * that is the green context's own CUcontext (cuCtxFromGreenCtx): streams
 * made with it current belong to the green context, so forks stay in the
 * SM partition the user chose.  cuStreamGetCtx_v2 returns the device's
 * primary context there and the green context beside it; the first
 * variant returns the converted context itself. */
static CUresult stream_context(CUstream s, CUcontext *ctx)
{
#if CUDA_VERSION >= 12050
    CUgreenCtx green = NULL;
    CUresult rc = cucap_i_drv.cuStreamGetCtx(s, ctx, &green);

    if (rc == CUDA_SUCCESS && green)
        rc = cucap_i_drv.cuCtxFromGreenCtx ? cucap_i_drv.cuCtxFromGreenCtx(ctx, green) : CUDA_ERROR_NOT_SUPPORTED;
    return rc;
#else
    return cucap_i_drv.cuStreamGetCtx(s, ctx);
#endif
}

static const char *const state_names[] = { "NOT_STARTED", "CAPTURING", "ENDED", "INVALIDATED", "CLOSED" };

static void ctx_hold_release(struct ctx_hold *c)
{
    CUresult rc;

    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (c->retained && (rc = cucap_i_drv.cuDevicePrimaryCtxRelease(c->dev)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_builder_destroy: cuDevicePrimaryCtxRelease failed while releasing device %d's "
                     "primary context: %s: %s", (int)c->dev, cucap_i_result_label(rc), cucap_i_result_description(rc));
    free(c);
}

static cucap_builder *builder_new(cucap_builder_kind kind, cucap_builder_state state, CUstream s, int owns,
                                  struct ctx_hold *ctx)
{
    cucap_builder *b = calloc(1, sizeof *b);

    if (!b)
        return NULL;
    b->kind = kind;
    b->state = state;
    b->stream = s;
    b->owns_stream = owns;
    b->ctx = ctx;
    atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
    return b;
}

static CUresult check_open(const cucap_builder *b, const char *caller, cucap_error **err)
{
    if (!b)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the builder is NULL", caller);
    if (b->state == CUCAP_BUILDER_CLOSED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder has been closed", caller);
    return CUDA_SUCCESS;
}

static CUresult no_graph(const char *caller, cucap_error **err)
{
    return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                        "%s: the capture was invalidated and the driver discarded its graph; this builder has no "
                        "graph", caller);
}

/* Driver calls on the streams of a running capture take its hierarchy's
 * graph lock shared; the root's end takes it exclusive.  So no fork,
 * body or join of one thread ever calls into a capture that another
 * thread's end is tearing down (the H200 crashes in cuStreamWaitEvent
 * then).  Returns whether the capture is still running; the caller
 * unlocks with capture_unlock whatever it returned. */
static int capture_lock(const cucap_builder *b)
{
    if (!b->h)
        return 0;
    cucap_i_hier_lock_shared(b->h);
    return !cucap_i_hier_is_capture_over(b->h);
}

static void capture_unlock(const cucap_builder *b)
{
    if (b->h)
        cucap_i_hier_unlock(b->h);
}

/* The same for two builders (join's root and another), in a fixed order. */
static int capture_lock_pair(const cucap_builder *a, const cucap_builder *b)
{
    int running;

    if (!a->h || !b->h || a->h == b->h)
        return capture_lock(a) & (a->h == b->h ? 1 : capture_lock(b));
    if ((uintptr_t)a->h < (uintptr_t)b->h) {
        running = capture_lock(a);
        return capture_lock(b) & running;
    }
    running = capture_lock(b);
    return capture_lock(a) & running;
}

static void capture_unlock_pair(const cucap_builder *a, const cucap_builder *b)
{
    capture_unlock(a);
    if (b->h != a->h)
        capture_unlock(b);
}

/* Make a new non-blocking stream in ctx. */
static CUresult stream_in(CUcontext ctx, CUstream *s, const char *caller, cucap_error **err)
{
    CUcontext saved = NULL;
    CUresult rc = cucap_i_ctx_enter(ctx, &saved), left;

    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "making the stream's context current (cuCtxSetCurrent)");
    rc = cucap_i_drv.cuStreamCreate(s, CU_STREAM_NON_BLOCKING);
    if (rc != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
    left = cucap_i_ctx_leave(ctx, saved);
    if (left == CUDA_SUCCESS)
        return rc;
    if (rc != CUDA_SUCCESS) {
        cucap_i_note_failure(err, "cuCtxSetCurrent", "restoring the thread's context", left);
        return rc;
    }
    cucap_i_drv.cuStreamDestroy(*s);
    return cucap_i_fail_driver(err, left, caller, "restoring the thread's context (cuCtxSetCurrent)");
}

/* Streams and events of forks, bodies and joins: reused through the cache
 * in a primary context the builders retain, made and destroyed otherwise. */
static CUresult take_stream(struct ctx_hold *c, CUstream *s, const char *caller)
{
    return c->retained ? cucap_i_cache_take_stream(c->ctx, c->dev, s, caller) : stream_in(c->ctx, s, "", NULL);
}

static void give_stream(struct ctx_hold *c, CUstream s, const char *caller)
{
    if (c->retained)
        cucap_i_cache_give_stream(c->ctx, c->dev, s, caller);
    else
        cucap_i_drv.cuStreamDestroy(s);
}

static CUresult take_event(struct ctx_hold *c, CUevent *e, const char *caller)
{
    CUcontext saved = NULL;
    CUresult rc, left;

    if (c->retained)
        return cucap_i_cache_take_event(c->ctx, c->dev, e, caller);
    if ((rc = cucap_i_ctx_enter(c->ctx, &saved)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
    left = cucap_i_ctx_leave(c->ctx, saved);
    if (rc == CUDA_SUCCESS && left != CUDA_SUCCESS) {
        cucap_i_drv.cuEventDestroy(*e);
        rc = left;
    }
    return rc;
}

/* An event recorded in h's capture: reused only once that capture is over,
 * so that no event is ever recorded in two captures that may both still run
 * (the driver crashes when a capture's end races a re-record of its event). */
static void give_event(struct ctx_hold *c, struct cucap_hier *h, CUevent e)
{
    if (c->retained && h && cucap_i_hier_defer_event(h, c->ctx, c->dev, e) == 0)
        return;
    cucap_i_drv.cuEventDestroy(e);   /* legal during capture */
}

#if CUDA_VERSION >= 13000
#  define CTX_GET_DEVICE(ctx, dev) cucap_i_drv.cuCtxGetDevice((dev), (ctx))
#else
#  define CTX_GET_DEVICE(ctx, dev) context_device((ctx), (dev))
/* before CUDA 13 cuCtxGetDevice reads the current context only */
static CUresult context_device(CUcontext ctx, CUdevice *dev)
{
    CUcontext saved = NULL;
    CUresult rc = cucap_i_ctx_enter(ctx, &saved), left;

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuCtxGetDevice(dev);
    left = cucap_i_ctx_leave(ctx, saved);
    return rc != CUDA_SUCCESS ? rc : left;
}
#endif

/* ---------------------------------------------------------------- creation */

CUresult cucap_builder_create(CUdevice dev, cucap_builder **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create";
    struct cucap_relaxed_scope scope;
    struct ctx_hold *hold;
    CUstream s = NULL;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = cucap_i_check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(hold = calloc(1, sizeof *hold)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    hold->dev = dev;
    /* retaining a context is not a stream operation; relaxed mode keeps
     * any capture of this thread out of it all the same */
    if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) != CUDA_SUCCESS) {
        free(hold);
        return rc;
    }
    rc = cucap_i_drv.cuDevicePrimaryCtxRetain(&hold->ctx, dev);
    if (rc != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuDevicePrimaryCtxRetain");
    hold->retained = rc == CUDA_SUCCESS;
    rc = cucap_i_relaxed_leave(&scope, rc, caller, err);
    if (rc == CUDA_SUCCESS)
        rc = stream_in(hold->ctx, &s, caller, err);
    if (rc == CUDA_SUCCESS && !(*out = builder_new(CUCAP_BUILDER_PRIMARY, CUCAP_BUILDER_NOT_STARTED, s, 1, hold))) {
        cucap_i_drv.cuStreamDestroy(s);
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    if (rc != CUDA_SUCCESS) {
        atomic_init(&hold->refs, 1);
        ctx_hold_release(hold);
    }
    return rc;
}

CUresult cucap_builder_create_on_stream(CUstream s, cucap_builder **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create_on_stream";
    struct cucap_relaxed_scope scope;
    struct ctx_hold *hold;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: the legacy and per-thread default streams cannot capture; pass a stream made "
                            "with cuStreamCreate", caller);
    if ((rc = cucap_i_driver(caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(hold = calloc(1, sizeof *hold)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    if ((rc = stream_context(s, &hold->ctx)) != CUDA_SUCCESS) {
        free(hold);
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCtx");
    }
    /* a device's primary context is retained like cucap_builder_create's,
     * which lets forks reuse cached streams; another context is the
     * caller's to keep alive */
    if (CTX_GET_DEVICE(hold->ctx, &hold->dev) == CUDA_SUCCESS &&
        cucap_i_relaxed_enter(&scope, caller, NULL) == CUDA_SUCCESS) {
        CUcontext primary = NULL;
        CUresult retain = cucap_i_drv.cuDevicePrimaryCtxRetain(&primary, hold->dev);
        if (cucap_i_relaxed_leave(&scope, retain, caller, NULL) == CUDA_SUCCESS && primary == hold->ctx)
            hold->retained = 1;
        else if (retain == CUDA_SUCCESS)
            cucap_i_drv.cuDevicePrimaryCtxRelease(hold->dev);
    }
    if (!(*out = builder_new(CUCAP_BUILDER_PRIMARY, CUCAP_BUILDER_NOT_STARTED, s, 0, hold))) {
        atomic_init(&hold->refs, 1);
        ctx_hold_release(hold);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- begin and end */

/* A body whose capture failed, or could not be attached, may capture again:
 * its body graph was never touched. */
static int body_may_begin_again(const cucap_builder *b)
{
    return b->kind == CUCAP_BUILDER_BODY &&
           (b->state == CUCAP_BUILDER_INVALIDATED || (b->state == CUCAP_BUILDER_ENDED && b->record_failed));
}

CUresult cucap_builder_begin(cucap_builder *b, CUstreamCaptureMode mode, cucap_error **err)
{
    static const char caller[] = "cucap_builder_begin";
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph graph = NULL, ended = NULL;
    struct cucap_hier *h = NULL;
    cuuint64_t id = 0;
    CUresult rc, undo;

    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED || b->state == CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is already building%s", caller,
                            b->kind == CUCAP_BUILDER_FORKED ? " (a forked builder captures from its split on)" : "");
    if (b->state != CUCAP_BUILDER_NOT_STARTED && !body_may_begin_again(b))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot resume building after the capture ended (the builder is %s); create a "
                            "new builder", caller, state_names[b->state]);
    if (b->kind == CUCAP_BUILDER_BODY && !cucap_i_box_graph(b->parent_h, b->body_box))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the parent's capture was invalidated and the driver discarded its graph, this "
                            "body's graph with it", caller);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: %d is not a capture mode (GLOBAL, THREAD_LOCAL or RELAXED)", caller, (int)mode);
    if ((rc = cucap_i_drv.cuStreamBeginCapture(b->stream, mode)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamBeginCapture");
    rc = cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, &id, &graph, NULL, NULL, NULL);
    if (rc == CUDA_SUCCESS && (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph))
        rc = cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                          "%s: the capture was invalidated as soon as it began", caller);
    else if (rc != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    else if (!(h = cucap_i_hier_new_capture(graph, b->ctx->ctx, id)))
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    if (rc != CUDA_SUCCESS) {
        /* a failed begin leaves nothing begun */
        undo = cucap_i_drv.cuStreamEndCapture(b->stream, &ended);
        if (ended)
            cucap_i_drv.cuGraphDestroy(ended);
        if (undo != CUDA_SUCCESS && undo != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
            cucap_i_note_failure(err, "cuStreamEndCapture", "ending the capture just begun", undo);
        return rc;
    }
    if (b->kind == CUCAP_BUILDER_BODY) {
        cucap_i_hier_unref(b->h);   /* a failed earlier capture of this body */
        cucap_i_hier_mark_body_capture(h);
        cucap_i_hier_set_body(b->parent_h, b->record, CUCAP_BODY_CAPTURING);
    }
    b->h = h;
    b->state = CUCAP_BUILDER_CAPTURING;
    cucap_i_capture_register(&b->registration, b->stream, h);
    return CUDA_SUCCESS;
}

/* Node types the driver allows in a conditional body (CUDA 12.3 to 13.0);
 * a body holding another type makes the parent's instantiate fail. */
static int allowed_in_body(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET ||
           t == CU_GRAPH_NODE_TYPE_EMPTY || t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

/* The first node of g (or of a child graph in it) that a body may not
 * hold: CUDA_SUCCESS and *bad set to its type, or -1 in *bad for none. */
static CUresult find_disallowed_node(CUgraph g, int depth, int *bad)
{
    CUgraphNode stack_nodes[64], *nodes = stack_nodes;
    size_t n = 0, i;
    CUresult rc;

    *bad = -1;
    if ((rc = cucap_i_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS || n == 0)
        return rc;
    if (n > 64 && !(nodes = malloc(n * sizeof *nodes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = cucap_i_drv.cuGraphGetNodes(g, nodes, &n);
    for (i = 0; rc == CUDA_SUCCESS && i < n && *bad < 0; i++) {
        CUgraphNodeType t;
        CUgraph child;
        if ((rc = cucap_i_drv.cuGraphNodeGetType(nodes[i], &t)) != CUDA_SUCCESS)
            break;
        if (!allowed_in_body(t))
            *bad = (int)t;
        else if (t == CU_GRAPH_NODE_TYPE_GRAPH && depth < 8 &&
                 (rc = cucap_i_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &child)) == CUDA_SUCCESS)
            rc = find_disallowed_node(child, depth + 1, bad);
    }
    if (nodes != stack_nodes)
        free(nodes);
    return rc;
}

static const char *node_type_text(CUgraphNodeType t);

/* A body's capture ended with graph g: add it to the node's body graph as a
 * child-graph node (the driver clones it).  Capturing straight into the
 * body graph instead crashes the driver when that capture is invalidated.
 * Exclusive on the parent's hierarchy: the parent's end may be discarding
 * the body graph at this moment. */
static CUresult attach_body(cucap_builder *b, CUgraph g, const char *caller, cucap_error **err)
{
    CUgraphNode node;
    CUgraph body;
    CUresult rc;
    int bad = -1;

    if ((rc = find_disallowed_node(g, 0, &bad)) == CUDA_SUCCESS && bad >= 0) {
        rc = cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                          "%s: body %u of %s holds a %s node, which the driver does not allow in a conditional "
                          "body (allowed: kernel, memset, memcpy, empty, child graph and conditional nodes); the "
                          "body is marked failed: capture it again without that work", caller,
                          cucap_i_body_index(b->record), cucap_i_body_node(b->record),
                          node_type_text((CUgraphNodeType)bad));
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuGraphGetNodes (reading the captured body)");
    } else {
        cucap_i_hier_lock_exclusive(b->parent_h);
        body = cucap_i_box_graph(b->parent_h, b->body_box);
        if (!body)
            rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                              "%s: the parent's capture was invalidated and the driver discarded its graph, this "
                              "body's graph with it; the body cannot be attached", caller);
        else if ((rc = cucap_i_drv.cuGraphAddChildGraphNode(&node, body, NULL, 0, g)) != CUDA_SUCCESS)
            cucap_i_fail(err, rc, "%s: cuGraphAddChildGraphNode failed while attaching the captured body to its "
                         "conditional node: %s: %s; the body is marked failed", caller, cucap_i_result_label(rc),
                         cucap_i_result_description(rc));
        cucap_i_hier_unlock(b->parent_h);
    }
    b->record_failed = rc != CUDA_SUCCESS;
    cucap_i_hier_set_body(b->parent_h, b->record, rc == CUDA_SUCCESS ? CUCAP_BODY_ATTACHED : CUCAP_BODY_FAILED);
    return rc;
}

/* End the capture and settle who owns its graph, exclusive on the
 * hierarchy from the end's start until the outcome is settled.  Returns
 * the driver's status and never reports it; *g is the graph or NULL. */
static CUresult end_capture(cucap_builder *b, CUgraph *out)
{
    CUstreamCaptureStatus status;
    CUgraph g = NULL;
    CUresult rc;
    int over = 0;

    *out = NULL;
    if (b->state != CUCAP_BUILDER_CAPTURING || b->kind == CUCAP_BUILDER_FORKED)
        return CUDA_SUCCESS;
    cucap_i_hier_lock_exclusive(b->h);
    rc = cucap_i_drv.cuStreamEndCapture(b->stream, &g);
    if (g || rc != CUDA_SUCCESS) {
        if (!g && rc != CUDA_SUCCESS &&
            cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
            status != CU_STREAM_CAPTURE_STATUS_NONE) {
            cucap_i_hier_unlock(b->h);
            return rc;   /* a failed end that left the capture running (never caused by the library) */
        }
        over = 1;
    }
    if (g) {
        cucap_i_hier_own(b->h, g);
        b->state = CUCAP_BUILDER_ENDED;
    } else {
        /* no graph: the driver discarded it, nothing may destroy it */
        cucap_i_hier_retire(b->h, cucap_i_hier_root_box(b->h));
        b->state = CUCAP_BUILDER_INVALIDATED;
        if (b->kind == CUCAP_BUILDER_BODY) {
            b->record_failed = 1;
            cucap_i_hier_set_body(b->parent_h, b->record, CUCAP_BODY_FAILED);
        }
        if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;   /* success without a graph: never seen */
    }
    cucap_i_hier_unlock(b->h);
    if (over)
        cucap_i_hier_capture_over(b->h);   /* every stream of the capture is out of it */
    cucap_i_capture_unregister(&b->registration);
    *out = g;
    return rc;
}

static CUresult end_failed(cucap_builder *b, CUresult rc, const char *caller, const char *doing, cucap_error **err)
{
    cucap_i_fail(err, rc, "%s: cuStreamEndCapture failed while %s: %s: %s%s", caller, doing,
                 cucap_i_result_label(rc), cucap_i_result_description(rc),
                 b->state == CUCAP_BUILDER_INVALIDATED ? "; the driver discarded the graph" : "");
    cucap_i_hier_note_first_failure(b->h, err);
    return rc;
}

/* End the capture; a body's graph is then attached to its node. */
static CUresult end_and_attach(cucap_builder *b, const char *caller, const char *doing, cucap_error **err)
{
    CUgraph g = NULL;
    CUresult rc = end_capture(b, &g);

    if (rc != CUDA_SUCCESS)
        return end_failed(b, rc, caller, doing, err);
    if (g && b->kind == CUCAP_BUILDER_BODY)
        return attach_body(b, g, caller, err);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_end(cucap_builder *b, cucap_error **err)
{
    static const char caller[] = "cucap_builder_end";
    CUresult rc;

    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a forked builder is not ended: join it into its primary with cucap_builder_join "
                            "(ending a fork's stream would invalidate the whole capture)", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not building (it is %s)", caller,
                            state_names[b->state]);
    return end_and_attach(b, caller, "ending the capture", err);
}

/* ---------------------------------------------------------------- close and destroy */

/* A cached stream goes back to the cache only when the driver says it is in
 * no capture.  One still in its own hierarchy's capture waits for that
 * capture's end; one in another capture (a body or orphan joined into
 * somebody else's) is destroyed, which is legal during a capture, so that
 * no later builder is ever handed a stream inside a capture it is not
 * part of. */
static void release_cached_stream(cucap_builder *b, const char *caller)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUresult rc;

    rc = cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, &id, NULL, NULL, NULL, NULL);
    if (rc == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_NONE) {
        give_stream(b->ctx, b->stream, caller);
        return;
    }
    if (rc == CUDA_SUCCESS && b->ctx->retained && b->h && id == cucap_i_hier_capture_id(b->h) &&
        cucap_i_hier_defer_stream(b->h, b->ctx->ctx, b->ctx->dev, b->stream) == 0)
        return;
    if ((rc = cucap_i_drv.cuStreamDestroy(b->stream)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuStreamDestroy failed while releasing the builder's stream: %s: %s", caller,
                     cucap_i_result_label(rc), cucap_i_result_description(rc));
}

static void release(cucap_builder *b, const char *caller)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    cucap_i_capture_unregister(&b->registration);
    if (b->cached_stream) {
        (void)capture_lock(b);
        release_cached_stream(b, caller);
        capture_unlock(b);
    } else if (b->owns_stream) {
        /* an origin stream whose capture could not be ended is left alone */
        if (b->kind != CUCAP_BUILDER_FORKED && b->state == CUCAP_BUILDER_CAPTURING &&
            cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
            status != CU_STREAM_CAPTURE_STATUS_NONE)
            cucap_i_warn(CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's stream is still capturing and was not "
                         "destroyed", caller);
        else if ((rc = cucap_i_drv.cuStreamDestroy(b->stream)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "%s: cuStreamDestroy failed while releasing the builder's stream: %s: %s", caller,
                         cucap_i_result_label(rc), cucap_i_result_description(rc));
    }
    cucap_i_hier_unref(b->h);
    cucap_i_hier_unref(b->parent_h);
    ctx_hold_release(b->ctx);
    b->h = NULL;
    b->parent_h = NULL;
    b->ctx = NULL;
    b->stream = NULL;
    b->state = CUCAP_BUILDER_CLOSED;
}

static CUresult close_as(cucap_builder *b, const char *caller, const char *doing, cucap_error **err)
{
    CUgraph ignored;
    CUresult rc;

    if (!b || b->state == CUCAP_BUILDER_CLOSED)
        return CUDA_SUCCESS;
    rc = end_and_attach(b, caller, doing, err);
    /* an end that failed and left the capture running: the builder is
     * going away, so try once more before its stream is abandoned */
    if (rc != CUDA_SUCCESS && b->state == CUCAP_BUILDER_CAPTURING && b->kind != CUCAP_BUILDER_FORKED)
        (void)end_capture(b, &ignored);
    release(b, caller);
    return rc;
}

CUresult cucap_builder_close(cucap_builder *b, cucap_error **err)
{
    return close_as(b, "cucap_builder_close", "closing a builder that was still capturing", err);
}

void cucap_builder_destroy(cucap_builder *b)
{
    cucap_error *e = NULL;

    if (!b)
        return;
    if (close_as(b, "cucap_builder_destroy", "destroying a builder that was still capturing", &e) != CUDA_SUCCESS)
        cucap_i_warn_error(e);
    free(b);
}

/* ---------------------------------------------------------------- split and join */

/* `to` waits on everything captured on `from` so far. */
static CUresult wait_on(cucap_builder *to, cucap_builder *from, const char *caller, cucap_error **err)
{
    CUevent ev = NULL;
    CUresult rc;
    const char *call = "cuEventCreate";

    rc = take_event(from->ctx, &ev, caller);
    if (rc == CUDA_SUCCESS && (rc = cucap_i_drv.cuEventRecord(ev, from->stream)) != CUDA_SUCCESS)
        call = "cuEventRecord";
    if (rc == CUDA_SUCCESS && (rc = cucap_i_drv.cuStreamWaitEvent(to->stream, ev, 0)) != CUDA_SUCCESS)
        call = "cuStreamWaitEvent";
    if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, call);
        cucap_i_hier_capture_failed(to->h, caller, rc);
        cucap_i_hier_capture_failed(from->h, caller, rc);
    }
    if (ev)
        give_event(from->ctx, from->h, ev);
    return rc;
}

#define SPLIT_MAX CUCAP_SPLIT_MAX

CUresult cucap_builder_split(cucap_builder *b, size_t count, cucap_builder **forks, cucap_error **err)
{
    static const char caller[] = "cucap_builder_split";
    cucap_builder_state state;
    CUevent ev = NULL;
    size_t made = 0, i;
    CUresult rc;

    if (count < 2 || count > SPLIT_MAX)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: invalid split count: expecting 2 to %d, got %zu",
                            caller, SPLIT_MAX, count);
    if (!forks)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: forks is NULL", caller);
    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((state = cucap_builder_get_state(b)) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the builder must be building before it can be split (it is %s%s)", caller,
                            state_names[state], b->kind == CUCAP_BUILDER_FORKED ? ": its primary's capture ended" : "");
    for (i = 0; i < count - 1; i++)
        forks[i] = NULL;
    if (!capture_lock(b)) {   /* the primary's capture ended since the check above */
        capture_unlock(b);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the builder must be building before it can be split (its primary's capture "
                            "ended)", caller);
    }
    /* one event where b stands; every new stream waits on it and so joins the capture there */
    if ((rc = take_event(b->ctx, &ev, caller)) != CUDA_SUCCESS) {
        capture_unlock(b);
        return cucap_i_fail_driver(err, rc, caller, "cuEventCreate");
    }
    if ((rc = cucap_i_drv.cuEventRecord(ev, b->stream)) != CUDA_SUCCESS) {
        cucap_i_hier_capture_failed(b->h, caller, rc);
        give_event(b->ctx, b->h, ev);
        capture_unlock(b);
        return cucap_i_fail_driver(err, rc, caller, "cuEventRecord");
    }
    for (made = 0; made < count - 1; made++) {
        cucap_builder *f;
        CUstream s = NULL;
        if ((rc = take_stream(b->ctx, &s, caller)) != CUDA_SUCCESS) {
            cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
            break;
        }
        if ((rc = cucap_i_drv.cuStreamWaitEvent(s, ev, 0)) != CUDA_SUCCESS) {
            cucap_i_hier_capture_failed(b->h, caller, rc);
            cucap_i_fail_driver(err, rc, caller, "cuStreamWaitEvent");
            cucap_i_drv.cuStreamDestroy(s);   /* it may have joined nothing, or the capture: destroying is legal */
            break;
        }
        if (!(f = builder_new(CUCAP_BUILDER_FORKED, CUCAP_BUILDER_CAPTURING, s, 1, b->ctx))) {
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
            cucap_i_drv.cuStreamDestroy(s);
            break;
        }
        f->cached_stream = 1;
        f->h = b->h;
        cucap_i_hier_ref(b->h);
        cucap_i_capture_register(&f->registration, s, b->h);
        forks[made] = f;
    }
    give_event(b->ctx, b->h, ev);
    capture_unlock(b);
    if (rc != CUDA_SUCCESS) {
        /* a failed split hands out nothing: forks that did no work join
         * nothing, and their streams can go */
        for (i = 0; i < made; i++) {
            cucap_builder_destroy(forks[i]);
            forks[i] = NULL;
        }
        return rc;
    }
    return CUDA_SUCCESS;
}

/* join's checks before it touches anything: distinct, open builders, the
 * root capturing (a root that is not would silently join the capture of
 * whichever builder it waits on), every other builder capturing too. */
static CUresult check_join(cucap_builder *const *builders, size_t count, cucap_builder *root, const char *caller,
                           cucap_error **err)
{
    size_t i, j;

    for (i = 0; i < count; i++) {
        cucap_builder_state state = cucap_builder_get_state(builders[i]);
        if (state == CUCAP_BUILDER_CAPTURING)
            continue;
        if (builders[i] == root)
            return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                                "%s: the root (builder %zu, %s) is not capturing (it is %s): join waits on the "
                                "others from a running capture", caller, i,
                                builders[i]->kind == CUCAP_BUILDER_FORKED ? "a fork" :
                                builders[i]->kind == CUCAP_BUILDER_BODY ? "a conditional body" : "a primary",
                                state_names[state]);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: builder %zu is not capturing (it is %s%s)", caller,
                            i, state_names[state],
                            builders[i]->kind == CUCAP_BUILDER_FORKED ? ": its primary's capture ended" : "");
    }
    for (i = 0; i < count; i++)
        for (j = 0; j < i; j++)
            if (builders[j] == builders[i])
                return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: builder %zu is builder %zu again", caller,
                                    i, j);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_join(cucap_builder *const *builders, size_t count, cucap_builder **root_out,
                            cucap_error **err)
{
    static const char caller[] = "cucap_builder_join";
    cucap_builder *root = NULL;
    CUresult rc = CUDA_SUCCESS, closed;
    size_t i;

    /* inputs are read before any output is written: root_out may point into builders */
    if (!builders || count < 2) {
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: must join at least two builders, got %zu", caller,
                            builders ? count : 0);
    }
    for (i = 0; i < count; i++) {
        if (!builders[i])
            return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: builder %zu is NULL", caller, i);
        if (builders[i]->state == CUCAP_BUILDER_CLOSED)
            return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: builder %zu has been closed", caller, i);
    }
    for (i = 0; i < count && !root; i++)
        if (builders[i]->kind != CUCAP_BUILDER_FORKED)
            root = builders[i];
    if (!root)
        root = builders[0];
    if ((rc = check_join(builders, count, root, caller, err)) != CUDA_SUCCESS)
        return rc;

    for (i = 0; i < count && rc == CUDA_SUCCESS; i++) {
        cucap_error *close_err = NULL;
        if (builders[i] == root)
            continue;
        if (!capture_lock_pair(root, builders[i]))
            rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture of builder %zu or of the root ended "
                              "while join ran (its end came from another thread)", caller, i);
        else
            rc = wait_on(root, builders[i], caller, err);
        capture_unlock_pair(root, builders[i]);
        if (rc != CUDA_SUCCESS)
            break;
        closed = close_as(builders[i], caller, "closing a joined builder", err ? &close_err : NULL);
        if (closed != CUDA_SUCCESS) {
            rc = closed;   /* only a non-forked builder's end can fail */
            if (err)
                *err = close_err;
        }
    }
    /* whatever happened, no builder but the root is left open */
    for (i = 0; i < count; i++) {
        cucap_error *close_err = NULL;
        if (builders[i] == root || builders[i]->state == CUCAP_BUILDER_CLOSED)
            continue;
        closed = close_as(builders[i], caller, "closing a builder that join could not join", &close_err);
        if (closed != CUDA_SUCCESS) {
            if (rc == CUDA_SUCCESS) {
                rc = closed;
                if (err)
                    *err = close_err;
                close_err = NULL;
            } else {
                char what[64];
                snprintf(what, sizeof what, "closing builder %zu, which join could not join", i);
                cucap_i_note_failure(err, "cucap_builder_close", what, closed);
            }
        }
        cucap_error_free(close_err);
    }
    if (root_out)
        *root_out = root;
    return rc;
}

/* ---------------------------------------------------------------- queries */

CUstream cucap_builder_stream(const cucap_builder *b)
{
    return b ? b->stream : NULL;
}

cucap_builder_kind cucap_builder_get_kind(const cucap_builder *b)
{
    return b ? b->kind : CUCAP_BUILDER_PRIMARY;
}

cucap_builder_state cucap_builder_get_state(const cucap_builder *b)
{
    if (!b)
        return CUCAP_BUILDER_CLOSED;
    /* a fork is in its primary's capture: once that is over, so is the fork */
    if (b->kind == CUCAP_BUILDER_FORKED && b->state == CUCAP_BUILDER_CAPTURING && cucap_i_hier_is_capture_over(b->h))
        return cucap_i_hier_is_owned(b->h) ? CUCAP_BUILDER_ENDED : CUCAP_BUILDER_INVALIDATED;
    return b->state;
}

CUresult cucap_builder_is_building(const cucap_builder *b, int *building, cucap_error **err)
{
    static const char caller[] = "cucap_builder_is_building";
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    if (!building)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: building is NULL", caller);
    *building = 0;
    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED && !capture_lock(b)) {   /* its primary's capture is over */
        capture_unlock(b);
        return CUDA_SUCCESS;
    }
    rc = cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL);
    if (b->kind == CUCAP_BUILDER_FORKED)
        capture_unlock(b);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                            "%s: the driver invalidated the capture; call cucap_builder_end to end it (it reports "
                            "why)", caller);
    *building = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

/* open, has a graph, ENDED */
static CUresult check_ended(const cucap_builder *b, const char *caller, cucap_error **err)
{
    CUresult rc;

    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->state == CUCAP_BUILDER_INVALIDATED)
        return no_graph(caller, err);
    if (b->state != CUCAP_BUILDER_ENDED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the graph has not finished building (the builder "
                            "is %s; end it first)", caller, state_names[b->state]);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_complete(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **out,
                                cucap_error **err)
{
    static const char caller[] = "cucap_builder_complete";
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = check_ended(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a conditional body is completed with its parent, not alone", caller);
    return cucap_i_hier_instantiate(b->h, NULL, opts, out, caller, err);
}

CUresult cucap_builder_graph(cucap_builder *b, cucap_graph **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_graph";
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the graph is unavailable on forked builders; use the primary", caller);
    if (b->kind == CUCAP_BUILDER_BODY &&
        (b->state == CUCAP_BUILDER_NOT_STARTED || b->state == CUCAP_BUILDER_ENDED)) {
        /* the node's body graph, which lives in the parent's hierarchy */
        if (!(*out = cucap_i_hier_graph(b->parent_h, b->body_box)))
            return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        return CUDA_SUCCESS;
    }
    if (b->state == CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the graph is unavailable while the capture is in progress; end it first", caller);
    if (b->state == CUCAP_BUILDER_INVALIDATED)
        return no_graph(caller, err);
    if (b->state == CUCAP_BUILDER_NOT_STARTED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: there is no graph before begin", caller);
    if (!(*out = cucap_i_hier_graph(b->h, NULL)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_dot_print(cucap_builder *b, const char *path, unsigned int flags, cucap_error **err)
{
    static const char caller[] = "cucap_builder_dot_print";
    CUresult rc;

    if (!path)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: path is NULL", caller);
    if ((rc = check_ended(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    cucap_i_hier_lock_shared(b->h);
    rc = cucap_i_drv.cuGraphDebugDotPrint(cucap_i_hier_root(b->h), path, flags);
    cucap_i_hier_unlock(b->h);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail(err, rc, "%s: cuGraphDebugDotPrint could not write '%s': %s: %s", caller, path,
                            cucap_i_result_label(rc), cucap_i_result_description(rc));
    return CUDA_SUCCESS;
}

static CUresult embed_locked(cucap_builder *parent, cucap_builder *child, const char *caller, cucap_error **err);

CUresult cucap_builder_embed(cucap_builder *parent, cucap_builder *child, cucap_error **err)
{
    static const char caller[] = "cucap_builder_embed";
    CUresult rc;

    if ((rc = check_ended(child, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = check_open(parent, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (parent->state != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the parent graph is not being built (it is %s)",
                            caller, state_names[parent->state]);
    (void)capture_lock_pair(parent, child);
    if (cucap_i_hier_is_capture_over(parent->h))
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the parent graph is not being built (its capture "
                          "ended)", caller);
    else
        rc = embed_locked(parent, child, caller, err);
    capture_unlock_pair(parent, child);
    return rc;
}

/* embed, under the locks of both captures */
static CUresult embed_locked(cucap_builder *parent, cucap_builder *child, const char *caller, cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph capture_graph = NULL;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUgraphNode node = NULL;
    CUresult rc;

    rc = cucap_i_drv.cuStreamGetCaptureInfo(parent->stream, &status, NULL, &capture_graph, &deps, NULL, &n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the parent graph is not being built (the driver reports its capture %s)", caller,
                            status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "over");
    rc = cucap_i_drv.cuGraphAddChildGraphNode(&node, capture_graph, deps, n, cucap_i_hier_root(child->h));
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail(err, rc, "%s: cuGraphAddChildGraphNode failed: %s: %s%s", caller, cucap_i_result_label(rc),
                            cucap_i_result_description(rc),
                            rc == CUDA_ERROR_NOT_SUPPORTED
                                ? " (a graph with allocation, free or conditional nodes cannot be embedded)" : "");
    rc = cucap_i_drv.cuStreamUpdateCaptureDependencies(parent->stream, &node, NULL, 1,
                                                        CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    if (rc != CUDA_SUCCESS) {
        cucap_i_hier_capture_failed(parent->h, caller, rc);
        return cucap_i_fail(err, rc, "%s: cuStreamUpdateCaptureDependencies failed: %s: %s; the child-graph node "
                            "stays in the graph, with nothing captured after it depending on it", caller,
                            cucap_i_result_label(rc), cucap_i_result_description(rc));
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- conditional nodes */

#define IF_ELSE_SWITCH_FLOOR 12080    /* IF with two bodies and SWITCH: CUDA 12.8 drivers */
#define SWITCH_MAX ((unsigned int)CUCAP_SWITCH_MAX)

/* Conditional calls write into the capture graph: under the capture's
 * lock (see capture_lock), refused once a fork's primary ended. */
static CUresult conditional_lock(const cucap_builder *b, const char *caller, cucap_error **err)
{
    if (!b || b->state == CUCAP_BUILDER_CLOSED || !b->h)
        return CUDA_SUCCESS;   /* the prologue refuses these */
    if (!capture_lock(b) && b->state == CUCAP_BUILDER_CAPTURING) {
        capture_unlock(b);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the capture ended)",
                            caller);
    }
    return CUDA_SUCCESS;
}

static void conditional_unlock(const cucap_builder *b)
{
    if (b && b->state != CUCAP_BUILDER_CLOSED)
        capture_unlock(b);
}

/* The checks every conditional call shares; fills the capture point. */
static CUresult conditional_prologue(cucap_builder *b, int driver_floor, const char *caller, CUgraph *graph,
                                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n,
                                     cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    if ((rc = check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_driver_version() < driver_floor)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                            "%s: driver version %d does not support this conditional node (it needs CUDA %d.%d)",
                            caller, cucap_driver_version(), driver_floor / 1000, driver_floor % 1000 / 10);
    if (cucap_i_hier_is_body_capture(b->h))
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                            "%s: conditional nodes cannot be nested inside a conditional body: a body is captured "
                            "standalone and attached as a child graph, and the driver refuses child graphs that "
                            "hold conditional nodes (CUDA_ERROR_NOT_SUPPORTED, measured on CUDA 13.0)", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the builder is %s)", caller,
                            state_names[b->state]);
    rc = cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, graph, deps, edges, n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the driver reports the "
                            "capture %s; call cucap_builder_end)", caller,
                            status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "over");
    return CUDA_SUCCESS;
}

CUresult cucap_builder_create_condition(cucap_builder *b, unsigned int default_value, int assign_default,
                                        CUgraphConditionalHandle *out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create_condition";
    CUgraph graph = NULL;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = 0;
    if ((rc = conditional_lock(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = conditional_prologue(b, 12030, caller, &graph, NULL, NULL, NULL, err)) == CUDA_SUCCESS &&
        (rc = cucap_i_drv.cuGraphConditionalHandleCreate(out, graph, b->ctx->ctx, assign_default ? default_value : 0,
                                                         assign_default ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0)) !=
            CUDA_SUCCESS) {
        cucap_i_hier_capture_failed(b->h, caller, rc);
        cucap_i_fail_driver(err, rc, caller, "cuGraphConditionalHandleCreate");
    }
    conditional_unlock(b);
    return rc;
}

/* Add a conditional node at b's capture point and hand out one BODY
 * builder per body graph. */
static CUresult add_conditional_locked(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                       unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                       cucap_builder **bodies, cucap_error **err);

static CUresult add_conditional(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                cucap_builder **bodies, cucap_error **err)
{
    unsigned int i;
    CUresult rc;

    for (i = 0; i < size; i++)
        bodies[i] = NULL;
    if ((rc = conditional_lock(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = add_conditional_locked(b, c, type, size, driver_floor, caller, node_name, bodies, err);
    conditional_unlock(b);
    return rc;
}

static CUresult add_conditional_locked(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                       unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                       cucap_builder **bodies, cucap_error **err)
{
    CUgraph graph = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUgraphNodeParams params;
    CUgraphNode node = NULL;
    unsigned int i, made;
    CUresult rc;

    if ((rc = conditional_prologue(b, driver_floor, caller, &graph, &deps, &edges, &n, err)) != CUDA_SUCCESS)
        return rc;
    /* everything that can fail comes before the node, which cannot be removed */
    for (made = 0; made < size; made++) {
        CUstream s = NULL;
        if ((rc = take_stream(b->ctx, &s, caller)) != CUDA_SUCCESS) {
            cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
            break;
        }
        if (!(bodies[made] = builder_new(CUCAP_BUILDER_BODY, CUCAP_BUILDER_NOT_STARTED, s, 1, b->ctx))) {
            give_stream(b->ctx, s, caller);
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
            break;
        }
        bodies[made]->cached_stream = 1;
        if (!(bodies[made]->record = cucap_i_hier_add_body(b->h, node_name, made))) {
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
            made++;
            break;
        }
    }
    if (rc == CUDA_SUCCESS) {
        memset(&params, 0, sizeof params);
        params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        params.conditional.handle = c;
        params.conditional.type = type;
        params.conditional.size = size;
        params.conditional.ctx = b->ctx->ctx;
        rc = cucap_i_drv.cuGraphAddNode(&node, graph, deps, edges, n, &params);
        if (rc != CUDA_SUCCESS) {
            cucap_i_fail_driver(err, rc, caller, "cuGraphAddNode");
        } else if ((rc = cucap_i_drv.cuStreamUpdateCaptureDependencies(b->stream, &node, NULL, 1,
                                                                        CU_STREAM_SET_CAPTURE_DEPENDENCIES)) !=
                   CUDA_SUCCESS) {
            cucap_i_fail(err, rc, "%s: cuStreamUpdateCaptureDependencies failed: %s: %s; the conditional node "
                         "stays in the graph, with nothing captured after it depending on it", caller,
                         cucap_i_result_label(rc), cucap_i_result_description(rc));
        }
        if (rc != CUDA_SUCCESS)
            cucap_i_hier_capture_failed(b->h, caller, rc);
    }
    for (i = 0; rc == CUDA_SUCCESS && i < size; i++) {
        cucap_builder *body = bodies[i];
        body->body_box = cucap_i_hier_add_child(b->h, cucap_i_hier_root_box(b->h), params.conditional.phGraph_out[i]);
        if (!body->body_box)
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        body->parent_h = b->h;
        cucap_i_hier_ref(b->h);
    }
    if (rc != CUDA_SUCCESS) {
        for (i = 0; i < size; i++) {
            if (bodies[i] && bodies[i]->record)
                cucap_i_hier_set_body(b->h, bodies[i]->record, CUCAP_BODY_EMPTY);
            cucap_builder_destroy(bodies[i]);
            bodies[i] = NULL;
        }
        return rc;
    }
    return CUDA_SUCCESS;
}

CUresult cucap_builder_if(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_if";

    if (!then_body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: then_body is NULL", caller);
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_IF, 1, 12030, caller, "the IF node added by cucap_builder_if",
                           then_body, err);
}

CUresult cucap_builder_if_else(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body,
                               cucap_builder **else_body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_if_else";
    cucap_builder *bodies[2];
    CUresult rc;

    if (!then_body || !else_body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: then_body or else_body is NULL", caller);
    *then_body = *else_body = NULL;
    rc = add_conditional(b, c, CU_GRAPH_COND_TYPE_IF, 2, IF_ELSE_SWITCH_FLOOR, caller,
                         "the IF-ELSE node added by cucap_builder_if_else", bodies, err);
    if (rc == CUDA_SUCCESS) {
        *then_body = bodies[0];
        *else_body = bodies[1];
    }
    return rc;
}

CUresult cucap_builder_while(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_while";

    if (!body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: body is NULL", caller);
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_WHILE, 1, 12030, caller,
                           "the WHILE node added by cucap_builder_while", body, err);
}

CUresult cucap_builder_switch(cucap_builder *b, CUgraphConditionalHandle c, size_t count, cucap_builder **bodies,
                              cucap_error **err)
{
    static const char caller[] = "cucap_builder_switch";

    if (!bodies)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: bodies is NULL", caller);
    if (count == 0 || count > SWITCH_MAX)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a switch has 1 to %u bodies, got %zu", caller,
                            SWITCH_MAX, count);
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_SWITCH, (unsigned int)count, IF_ELSE_SWITCH_FLOOR, caller,
                           "the SWITCH node added by cucap_builder_switch", bodies, err);
}

/* ---------------------------------------------------------------- exec update */

static const char *update_result_text(CUgraphExecUpdateResult r)
{
    switch (r) {
    case CU_GRAPH_EXEC_UPDATE_ERROR: return "CU_GRAPH_EXEC_UPDATE_ERROR (an invalid value)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED (the topology changed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED (a node's type changed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED (a kernel's function changed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED (parameters changed in a way that is not supported)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED (something about the node is not supported)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: return "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE (the function changed in an unsupported way)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED (node attributes changed)";
    default: return "an unknown update result";
    }
}

static const char *node_type_text(CUgraphNodeType t)
{
    static const char *const names[] = { "kernel", "memcpy", "memset", "host function", "child graph", "empty", "event wait",
                                         "event record", "semaphore signal", "semaphore wait", "allocation", "free",
                                         "batch memory operation", "conditional" };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

CUresult cucap_exec_update(cucap_exec *e, cucap_builder *source, cucap_error **err)
{
    static const char caller[] = "cucap_exec_update";
    CUgraphExecUpdateResultInfo info;
    CUgraphNodeType type;
    CUcontext ctx, saved = NULL;
    char where[96] = "";
    CUresult rc, left;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if ((rc = check_ended(source, caller, err)) != CUDA_SUCCESS)
        return rc;
    ctx = cucap_i_exec_context(e);
    if ((rc = cucap_i_ctx_enter(ctx, &saved)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "making the graph's context current (cuCtxSetCurrent)");
    memset(&info, 0, sizeof info);
    cucap_i_hier_lock_shared(source->h);
    rc = cucap_i_drv.cuGraphExecUpdate(cucap_exec_handle(e), cucap_i_hier_root(source->h), &info);
    cucap_i_hier_unlock(source->h);
    if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        /* name the node only when the driver named one */
        if (info.errorNode && cucap_i_drv.cuGraphNodeGetType(info.errorNode, &type) == CUDA_SUCCESS)
            snprintf(where, sizeof where, ", at node %p (a %s node)", (void *)info.errorNode, node_type_text(type));
        else if (info.errorNode)
            snprintf(where, sizeof where, ", at node %p", (void *)info.errorNode);
        cucap_i_fail(err, rc, "%s: the executable graph cannot be updated from this graph: %s%s", caller,
                     update_result_text(info.result), where);
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuGraphExecUpdate");
    }
    if ((left = cucap_i_ctx_leave(ctx, saved)) != CUDA_SUCCESS) {
        if (rc != CUDA_SUCCESS)
            cucap_i_note_failure(err, "cuCtxSetCurrent", "restoring the thread's context", left);
        else
            rc = cucap_i_fail_driver(err, left, caller, "restoring the thread's context (cuCtxSetCurrent)");
    }
    return rc;
}
