/* Graph hierarchies (one root CUgraph and the graphs the driver owns below
 * it, destroyed once, never after being retired), graph references,
 * instantiation, executable graphs and their update. */
#include "config.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder-internal.h"
#include "hierarchy-struct.h"
#include "driver.h"
#include "hierarchy.h"
#include "internal.h"
#include "spares.h"

struct cucap_graph {
    atomic_int refs;
    struct cucap_hier *h;
    struct cucap_box *box;
};

struct cucap_exec {
    CUgraphExec exec;
    CUcontext ctx;                   /* the context it was instantiated in */
};

/* Hierarchies freed, kept for the next captures. */
static struct cucap_spares spare_hiers;

void cucap_i_hier_spares_drain(void)
{
    cucap_i_spares_drain(&spare_hiers);
}

struct cucap_hier *cucap_i_hier_new_capture(CUcontext ctx)
{
    struct cucap_hier *h = cucap_i_spare_take(&spare_hiers);

    if (h)
        memset(h, 0, sizeof *h);
    else if (!(h = calloc(1, sizeof *h)))
        return NULL;
    if (pthread_mutex_init(&h->graph_lock, NULL) != 0) {
        free(h);
        return NULL;
    }
    atomic_init(&h->refs, 1);
    atomic_init(&h->owned, 0);
    atomic_init(&h->capture_over, 0);
    pthread_mutex_init(&h->lock, NULL);
    h->ctx = ctx;
    return h;
}

void cucap_i_hier_learn_capture_id(struct cucap_hier *h, cuuint64_t id)
{
    h->capture_id = id;
}

cuuint64_t cucap_i_hier_capture_id(const struct cucap_hier *h)
{
    return h->capture_id;
}

int cucap_i_hier_is_capture_over(const struct cucap_hier *h)
{
    return atomic_load_explicit(&h->capture_over, memory_order_acquire);
}

int cucap_i_hier_is_owned(struct cucap_hier *h)
{
    return atomic_load_explicit(&h->owned, memory_order_acquire) && cucap_i_hier_root(h) != NULL;
}

/* The graph locks this thread holds, with how often it took each.  A
 * thread holds at most a few at once (a join's pair, one more inside an
 * enqueue callback); one held beyond the table is locked plainly. */
#define HELD_LOCKS 8
static _Thread_local struct held_lock {
    struct cucap_hier *h;
    unsigned depth;
} held[HELD_LOCKS];

static struct held_lock *held_entry(const struct cucap_hier *h)
{
    int i;

    for (i = 0; i < HELD_LOCKS; i++)
        if (held[i].h == h)
            return &held[i];
    return NULL;
}

void cucap_i_hier_lock(struct cucap_hier *h)
{
    struct held_lock *e = held_entry(h);

    if (e) {
        e->depth++;
        return;
    }
    pthread_mutex_lock(&h->graph_lock);
    if ((e = held_entry(NULL)) != NULL) {
        e->h = h;
        e->depth = 1;
    }
}

void cucap_i_hier_unlock(struct cucap_hier *h)
{
    struct held_lock *e = held_entry(h);

    if (e && --e->depth > 0)
        return;
    if (e)
        e->h = NULL;
    pthread_mutex_unlock(&h->graph_lock);
}

void cucap_i_hier_ref(struct cucap_hier *h)
{
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void cucap_i_hier_ref_by(struct cucap_hier *h, size_t n)
{
    atomic_fetch_add_explicit(&h->refs, (int)n, memory_order_relaxed);
}

void cucap_i_hier_unref(struct cucap_hier *h)
{
    cucap_i_hier_unref_by(h, 1);
}

void cucap_i_hier_unref_by(struct cucap_hier *h, size_t n)
{
    CUresult rc;

    if (!h || n == 0 || atomic_fetch_sub_explicit(&h->refs, (int)n, memory_order_acq_rel) != (int)n)
        return;
    if (h->owned && h->root.graph && (rc = cucap_i_drv.cuGraphDestroy(h->root.graph)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_graph_unref: cuGraphDestroy failed while destroying the last reference's graph: "
                     "%s: %s", cucap_i_result_label(rc), cucap_i_result_description(rc));
    while (h->root.next) {   /* the driver destroyed the graphs below the root with it */
        struct cucap_box *b = h->root.next;
        h->root.next = b->next;
        free(b);
    }
    cucap_i_hier_release_session(h);
    pthread_mutex_destroy(&h->graph_lock);
    pthread_mutex_destroy(&h->lock);
    if (!cucap_i_spare_give(&spare_hiers, h))
        free(h);
}

void cucap_i_hier_retire(struct cucap_hier *h, struct cucap_box *box)
{
    struct cucap_box *b;

    pthread_mutex_lock(&h->lock);
    box->graph = NULL;
    box->retired = 1;
    /* parents come before children: one sweep retires every descendant */
    for (b = h->root.next; b; b = b->next)
        if (b->parent && b->parent->retired) {
            b->graph = NULL;
            b->retired = 1;
        }
    pthread_mutex_unlock(&h->lock);
}

struct cucap_box *cucap_i_hier_root_box(struct cucap_hier *h)
{
    return &h->root;
}

struct cucap_box *cucap_i_hier_add_child(struct cucap_hier *h, struct cucap_box *parent, CUgraph graph)
{
    struct cucap_box *box = calloc(1, sizeof *box), **tail;

    if (!box)
        return NULL;
    box->graph = graph;
    box->parent = parent;
    pthread_mutex_lock(&h->lock);
    for (tail = &h->root.next; *tail; tail = &(*tail)->next)
        ;
    *tail = box;   /* after its parent, which is already listed */
    pthread_mutex_unlock(&h->lock);
    return box;
}

CUgraph cucap_i_box_graph(struct cucap_hier *h, const struct cucap_box *box)
{
    CUgraph g;

    pthread_mutex_lock(&h->lock);
    g = box->graph;
    pthread_mutex_unlock(&h->lock);
    return g;
}

CUgraph cucap_i_hier_root(struct cucap_hier *h)
{
    CUgraph g;

    pthread_mutex_lock(&h->lock);
    g = h->root.graph;
    pthread_mutex_unlock(&h->lock);
    return g;
}

cucap_graph *cucap_i_hier_graph(struct cucap_hier *h, struct cucap_box *box)
{
    cucap_graph *g = malloc(sizeof *g);

    if (!g)
        return NULL;
    atomic_init(&g->refs, 1);
    g->h = h;
    g->box = box ? box : &h->root;
    cucap_i_hier_ref(h);
    return g;
}

cucap_graph *cucap_graph_ref(cucap_graph *g)
{
    if (g)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void cucap_graph_unref(cucap_graph *g)
{
    if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    cucap_i_hier_unref(g->h);
    free(g);
}

CUgraph cucap_graph_handle(const cucap_graph *g)
{
    return g ? cucap_i_box_graph(g->h, g->box) : NULL;
}

/* The driver's result codes, by value: a driver of CUDA 12.8 or newer
 * gives CONDITIONAL_HANDLE_UNUSED (5) whatever headers built the library. */
enum { INSTANTIATE_CONDITIONAL_HANDLE_UNUSED = 5 };

static const char *instantiate_result_text(CUgraphInstantiateResult r, int device_launch)
{
    switch ((int)r) {
    case CUDA_GRAPH_INSTANTIATE_ERROR: return "the driver gave no further details";
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: return "the graph has an invalid structure, such as a cycle";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
        return device_launch ? "device launch was asked for a graph with a node type it does not support"
                             : "the graph holds a node of a type the driver does not allow where it stands (for "
                               "example a host-function node inside a conditional body)";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
        return "device launch was asked for a graph with nodes in several contexts";
    case INSTANTIATE_CONDITIONAL_HANDLE_UNUSED:
        return "a conditional handle was created on the graph but no conditional node uses it";
    default: return NULL;
    }
}

static unsigned int instantiate_flags(const cucap_complete_options *opts, CUstream *upload)
{
    unsigned int flags = 0;

    *upload = NULL;
    if (!opts)
        return 0;
    if (opts->auto_free_on_launch)
        flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    if (opts->upload_stream) {
        flags |= CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
        *upload = opts->upload_stream;
    }
    if (opts->device_launch)
        flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    if (opts->use_node_priority)
        flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    return (unsigned int)flags;
}

/* cuGraphInstantiateWithParams and its result, turned into the library's error. */
static CUresult instantiate_graph(CUgraph root, int conditional, const cucap_complete_options *opts,
                                  CUgraphExec *exec, const char *caller, cucap_error **err)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUresult rc;

    memset(&params, 0, sizeof params);
    params.flags = instantiate_flags(opts, &params.hUploadStream);
    params.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    rc = cucap_i_drv.cuGraphInstantiateWithParams(exec, root, &params);
    if (params.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) {
        const char *why = instantiate_result_text(params.result_out, opts && opts->device_launch);
        if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;   /* a failed result with a successful call: never seen */
        if (*exec)
            cucap_i_drv.cuGraphExecDestroy(*exec);
        *exec = NULL;
        if (why)
            return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: %s: %s", caller,
                                cucap_i_result_label(rc), why);
        return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: %s: unexpected instantiate "
                            "result %d", caller, cucap_i_result_label(rc), (int)params.result_out);
    }
    if (rc == CUDA_ERROR_NOT_SUPPORTED && conditional)
        return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: %s: %s (a graph with conditional "
                            "nodes has one executable graph at a time: destroy the other one first)", caller,
                            cucap_i_result_label(rc), cucap_i_result_description(rc));
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuGraphInstantiateWithParams");
    if (!*exec)
        return cucap_i_fail(err, CUDA_ERROR_UNKNOWN, "%s: cuGraphInstantiateWithParams returned no executable graph",
                            caller);
    return CUDA_SUCCESS;
}

CUresult cucap_i_hier_instantiate(struct cucap_hier *h, const struct cucap_box *box,
                                  const cucap_complete_options *opts, cucap_exec **out, const char *caller,
                                  cucap_error **err)
{
    struct cucap_relaxed_scope scope;
    CUgraphExec exec = NULL;
    CUcontext saved = NULL;
    CUgraph root;
    cucap_exec *e;
    CUresult rc;

    if (opts && !cucap_i_reserved_zero(opts->reserved_int, sizeof opts->reserved_int, opts->reserved_ptr,
                                       sizeof opts->reserved_ptr / sizeof opts->reserved_ptr[0]))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the options' reserved members must be zero", caller);
    if (!(e = malloc(sizeof *e)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    cucap_i_hier_lock(h);
    root = cucap_i_box_graph(h, box ? box : &h->root);
    if (!root)
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                          "%s: the capture was invalidated and the driver discarded its graph; there is no "
                          "graph to instantiate", caller);
    else
        rc = cucap_i_hier_check_bodies(h, caller, err);
    if (rc == CUDA_SUCCESS && (rc = cucap_i_ctx_enter_for(h->ctx, &saved, caller, err)) == CUDA_SUCCESS) {
        if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) == CUDA_SUCCESS) {
            rc = instantiate_graph(root, h->bodies != NULL, opts, &exec, caller, err);
            rc = cucap_i_relaxed_leave(&scope, rc, caller, err);
        }
        rc = cucap_i_ctx_leave_for(h->ctx, saved, rc, caller, err);
    }
    cucap_i_hier_unlock(h);
    if (rc != CUDA_SUCCESS) {
        if (exec)
            cucap_i_exec_destroy_handle(exec, h->ctx, caller);
        free(e);
        return rc;
    }
    e->exec = exec;
    e->ctx = h->ctx;
    *out = e;
    return CUDA_SUCCESS;
}

CUresult cucap_graph_instantiate(cucap_graph *g, const cucap_complete_options *opts, cucap_exec **out,
                                 cucap_error **err)
{
    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "cucap_graph_instantiate: out is NULL");
    *out = NULL;
    if (!g)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "cucap_graph_instantiate: the graph is NULL");
    return cucap_i_hier_instantiate(g->h, g->box, opts, out, "cucap_graph_instantiate", err);
}

/* cuGraphLaunch or cuGraphUpload on s, in the graph's context. */
static CUresult exec_on_stream(cucap_exec *e, CUstream s, int upload, const char *caller, cucap_error **err)
{
    const char *call = upload ? "cuGraphUpload" : "cuGraphLaunch";
    CUcontext saved = NULL;
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if ((rc = cucap_i_ctx_enter_for(e->ctx, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = upload ? cucap_i_drv.cuGraphUpload(e->exec, s) : cucap_i_drv.cuGraphLaunch(e->exec, s);
    if (rc != CUDA_SUCCESS) {
        cucap_i_fail(err, rc, "%s: %s failed: %s: %s%s", caller, call, cucap_i_result_label(rc),
                     cucap_i_result_description(rc),
                     rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                         ? " (an executable graph cannot be launched into a stream that is capturing; the "
                           "driver invalidated that capture; embed a graph with cucap_builder_embed instead)" : "");
        cucap_i_capture_stream_failed(s, upload ? "cucap_exec_upload (cuGraphUpload)"
                                                : "cucap_exec_launch (cuGraphLaunch)", rc);
    }
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_launch(cucap_exec *e, CUstream s, cucap_error **err)
{
    return exec_on_stream(e, s, 0, "cucap_exec_launch", err);
}

CUresult cucap_exec_upload(cucap_exec *e, CUstream s, cucap_error **err)
{
    return exec_on_stream(e, s, 1, "cucap_exec_upload", err);
}

CUgraphExec cucap_exec_handle(const cucap_exec *e)
{
    return e ? e->exec : NULL;
}

CUcontext cucap_i_exec_context(const cucap_exec *e)
{
    return e->ctx;
}

/* cuGraphExecDestroy in ctx and relaxed thread mode (a global-mode destroy
 * invalidates other threads' global captures); every failure goes to the
 * warning handler. */
void cucap_i_exec_destroy_handle(CUgraphExec exec, CUcontext ctx, const char *caller)
{
    struct cucap_relaxed_scope scope;
    cucap_error *err = NULL;
    CUcontext saved = NULL;
    CUresult rc, entered;
    int in_ctx;

    if (!(in_ctx = (rc = cucap_i_ctx_enter(ctx, &saved)) == CUDA_SUCCESS))
        cucap_i_warn(rc, "%s: cuCtxSetCurrent failed while making the graph's context current; the executable "
                     "graph is destroyed in the thread's own context: %s: %s", caller, cucap_i_result_label(rc),
                     cucap_i_result_description(rc));
    if ((entered = cucap_i_relaxed_enter(&scope, caller, &err)) != CUDA_SUCCESS) {
        cucap_i_warn_error(err);
        err = NULL;
    }
    if ((rc = cucap_i_drv.cuGraphExecDestroy(exec)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuGraphExecDestroy failed: %s: %s", caller, cucap_i_result_label(rc),
                     cucap_i_result_description(rc));
    if (entered == CUDA_SUCCESS && cucap_i_relaxed_leave(&scope, CUDA_SUCCESS, caller, &err) != CUDA_SUCCESS)
        cucap_i_warn_error(err);
    if (in_ctx && (rc = cucap_i_ctx_leave(ctx, saved)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuCtxSetCurrent failed while restoring the thread's context: %s: %s", caller,
                     cucap_i_result_label(rc), cucap_i_result_description(rc));
}

void cucap_exec_destroy(cucap_exec *e)
{
    if (!e)
        return;
    cucap_i_exec_destroy_handle(e->exec, e->ctx, "cucap_exec_destroy");
    free(e);
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

const char *cucap_i_node_type_text(CUgraphNodeType t)
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
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if ((rc = cucap_i_builder_check_ended(source, caller, err)) != CUDA_SUCCESS)
        return rc;
    ctx = cucap_i_exec_context(e);
    if ((rc = cucap_i_ctx_enter_for(ctx, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    memset(&info, 0, sizeof info);
    cucap_i_hier_lock(source->h);
    rc = cucap_i_drv.cuGraphExecUpdate(cucap_exec_handle(e), cucap_i_hier_root(source->h), &info);
    /* name the node only when the driver named one (a node of the locked graph) */
    if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE && info.errorNode) {
        if (cucap_i_drv.cuGraphNodeGetType(info.errorNode, &type) == CUDA_SUCCESS)
            snprintf(where, sizeof where, ", at node %p (a %s node)", (void *)info.errorNode, cucap_i_node_type_text(type));
        else
            snprintf(where, sizeof where, ", at node %p", (void *)info.errorNode);
    }
    cucap_i_hier_unlock(source->h);
    if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        cucap_i_fail(err, rc, "%s: the executable graph cannot be updated from this graph: %s%s", caller,
                     update_result_text(info.result), where);
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuGraphExecUpdate");
    }
    return cucap_i_ctx_leave_for(ctx, saved, rc, caller, err);
}
