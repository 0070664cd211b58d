/* Graph references (a graph of a graph owner, shared), instantiation,
 * and executable graphs: launch, upload, update, destroy. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder-object.h"
#include "driver.h"
#include "capture.h"
#include "graph-owner.h"
#include "error.h"
#include "context-hold.h"
#include "deferred-destroy.h"
#include "free-list.h"
#include "graph.h"
#include "node-signature.h"
#include "node-names.h"
#include "params.h"
#include "reaper.h"

struct cucap_graph {
    atomic_int refs;
    struct cucap_graph_owner *o;
    struct cucap_box *box;
    struct cucap_params *params;     /* the block its nodes read, or NULL; a reference */
};

struct cucap_exec {
    CUgraphExec exec;
    CUcontext ctx;                   /* the context it was instantiated in */
    int any_context;                 /* 1: update, launch and upload on a stream need no context current */
    struct cucap_params *params;     /* the parameter block its graph reads (that of the capture it was
                                        instantiated or last updated from), or NULL */
    struct cucap_node_names *names;  /* the nodes its capture named, with this graph's values, or NULL */
    struct cucap_graph_owner *names_of;   /* the owner of the graph whose nodes those are, kept while it has them */
    struct cucap_signature *signature;   /* of the graph it runs; NULL when the driver could not say */
    /* With conditional nodes, whose destroy waits for the launches in
     * flight (deferred-destroy.h), or with host callback data set by name,
     * given back once no launch can run it: an event recorded behind each
     * launch and upload, made at the first, and a lock that keeps a launch
     * and its record together. */
    int tracked;
    int lost_track;                  /* a launch went without its event */
    CUevent done;
    pthread_mutex_t launch_lock;
};

struct cucap_params *cucap_i_exec_params(const cucap_exec *e)
{
    return e ? e->params : NULL;
}

cucap_graph *cucap_i_graph_new(struct cucap_graph_owner *o, struct cucap_box *box, struct cucap_params *params)
{
    cucap_graph *g = malloc(sizeof *g);

    if (!g)
        return NULL;
    atomic_init(&g->refs, 1);
    g->o = o;
    g->box = box ? box : cucap_i_owner_root_box(o);
    g->params = params;
    cucap_i_owner_ref(o);
    cucap_i_params_ref(params);
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
    cucap_i_owner_unref(g->o, "cucap_graph_unref");
    cucap_i_params_unref(g->params, "cucap_graph_unref");
    free(g);
}

CUgraph cucap_graph_handle(const cucap_graph *g)
{
    return g ? cucap_i_box_graph(g->box) : NULL;
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
        return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: " CUCAP_I_RESULT_FMT
                            " (a graph with conditional nodes has one executable graph at a time: destroy the other "
                            "one first)", caller, CUCAP_I_RESULT_ARGS(rc));
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuGraphInstantiateWithParams");
    if (!*exec)
        return cucap_i_fail(err, CUDA_ERROR_UNKNOWN, "%s: cuGraphInstantiateWithParams returned no executable graph",
                            caller);
    return CUDA_SUCCESS;
}

CUresult cucap_i_instantiate(struct cucap_graph_owner *o, const struct cucap_box *box, struct cucap_params *params,
                             const cucap_complete_options *opts, cucap_exec **out, const char *caller,
                             cucap_error **err)
{
    struct cucap_work_scope w;
    CUgraphExec exec = NULL;
    CUgraph root;
    cucap_exec *e;
    CUresult rc;

    if (opts && !cucap_i_reserved_zero(opts->reserved_int, sizeof opts->reserved_int, opts->reserved_ptr,
                                       sizeof opts->reserved_ptr / sizeof opts->reserved_ptr[0]))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the options' reserved members must be zero", caller);
    if (!(e = cucap_i_aligned_calloc(sizeof *e)))   /* what an update and a launch read: one line */
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    cucap_i_owner_lock(o);
    root = cucap_i_box_graph(box ? box : cucap_i_owner_root_box(o));
    if (!root)
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                          "%s: the capture was invalidated and the driver discarded its graph; there is no "
                          "graph to instantiate", caller);
    else
        rc = cucap_i_owner_check_bodies(o, caller, err);
    if (rc == CUDA_SUCCESS && (rc = cucap_i_work_enter(&w, cucap_i_owner_context(o), caller, err)) == CUDA_SUCCESS) {
        rc = instantiate_graph(root, cucap_i_owner_has_bodies(o), opts, &exec, caller, err);
        rc = cucap_i_work_leave(&w, rc, caller, err);
    }
    e->names = NULL;
    e->signature = NULL;
    if (rc == CUDA_SUCCESS && (rc = cucap_i_signature_of(root, &e->signature)) != CUDA_SUCCESS)
        cucap_i_fail(err, rc, "%s: the graph's nodes could not be read: " CUCAP_I_RESULT_FMT, caller,
                     CUCAP_I_RESULT_ARGS(rc));
    if (rc == CUDA_SUCCESS && (!box || box == cucap_i_owner_root_box(o)))   /* names are the root's */
        rc = cucap_i_names_copy(*cucap_i_owner_names(o), &e->names, caller, err);
    cucap_i_owner_unlock(o);
    if (rc != CUDA_SUCCESS) {
        if (exec)
            cucap_i_exec_destroy_handle(exec, cucap_i_owner_context(o), caller);
        cucap_i_signature_free(e->signature);
        free(e);
        return rc;
    }
    e->tracked = cucap_i_signature_has_conditionals(e->signature);
    e->done = NULL;
    e->lost_track = 0;
    pthread_mutex_init(&e->launch_lock, NULL);
    e->names_of = e->names ? o : NULL;
    if (e->names_of)
        cucap_i_owner_ref(o);
    e->exec = exec;
    e->ctx = cucap_i_owner_context(o);
    e->any_context = cucap_i_one_device();
    e->params = params;
    cucap_i_params_ref(e->params);
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
    return cucap_i_instantiate(g->o, g->box, g->params, opts, out, "cucap_graph_instantiate", err);
}

/* Whether a call on e, and for a launch or upload on stream s, needs the
 * graph's context current.  With one device the driver takes the context
 * from the handles: update, launch and upload on a stream run in the
 * graph's context whatever is current, or with nothing current
 * (doc/driver-facts.md, "The current context and an executable graph"),
 * so an executable graph made then has any_context set.  The legacy and
 * per-thread streams are the current context's, and across devices it was
 * not measured: then the graph's context is made current around the
 * call. */
static int needs_current_context(const cucap_exec *e, CUstream s, int on_stream)
{
    if (!e->any_context || (on_stream && e->tracked))   /* its event is recorded in its context */
        return 1;
    return on_stream && (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD);
}

/* A launch or upload that the driver refused, reported. */
static CUresult exec_failed(CUstream s, int upload, CUresult rc, const char *caller, cucap_error **err)
{
    cucap_i_fail(err, rc, "%s: %s failed: " CUCAP_I_RESULT_FMT "%s", caller, upload ? "cuGraphUpload" : "cuGraphLaunch",
                 CUCAP_I_RESULT_ARGS(rc),
                 rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                     ? " (an executable graph cannot be launched into a stream that is capturing; the "
                       "driver invalidated that capture; embed a graph with cucap_builder_embed instead)" : "");
    cucap_i_capture_stream_failed(s, upload ? "cucap_exec_upload (cuGraphUpload)" : "cucap_exec_launch (cuGraphLaunch)",
                                  rc);
    return rc;
}

/* Record e's event behind the launch or upload just made on s (e has
 * conditional nodes or owns host callback data; its launch lock is held;
 * its context current).  A failure is warned: the destroy may then wait. */
static void mark_launch(cucap_exec *e, CUstream s, const char *caller)
{
    CUresult rc;

    if ((!e->done && (rc = cucap_i_drv.cuEventCreate(&e->done, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) ||
        (rc = cucap_i_drv.cuEventRecord(e->done, s)) != CUDA_SUCCESS) {
        e->lost_track = 1;
        cucap_i_warn(rc, "%s: no event could be recorded behind a launch; destroying the executable graph may "
                     "wait for that launch, and host callback data it owns is not given back: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    }
}

/* The same with the graph's context current around the call. */
static CUresult exec_in_context(cucap_exec *e, CUstream s, int upload, const char *caller, cucap_error **err)
{
    CUcontext saved = NULL;
    CUresult rc;

    if ((rc = cucap_i_ctx_enter_for(e->ctx, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (e->tracked)
        pthread_mutex_lock(&e->launch_lock);
    rc = upload ? cucap_i_drv.cuGraphUpload(e->exec, s) : cucap_i_drv.cuGraphLaunch(e->exec, s);
    if (rc == CUDA_SUCCESS && e->tracked)
        mark_launch(e, s, caller);
    if (e->tracked)
        pthread_mutex_unlock(&e->launch_lock);
    if (rc != CUDA_SUCCESS)
        exec_failed(s, upload, rc, caller, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

/* cuGraphLaunch or cuGraphUpload on s, in the graph's context. */
static CUresult exec_on_stream(cucap_exec *e, CUstream s, int upload, const char *caller, cucap_error **err)
{
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if (needs_current_context(e, s, 1))
        return exec_in_context(e, s, upload, caller, err);
    rc = upload ? cucap_i_drv.cuGraphUpload(e->exec, s) : cucap_i_drv.cuGraphLaunch(e->exec, s);
    return rc == CUDA_SUCCESS ? rc : exec_failed(s, upload, rc, caller, err);
}

/* A launch of a graph that reads a parameter block: values (size bytes;
 * NULL: none, the block as the last launch left it) copied in first, in
 * the graph's context, ordered behind every earlier launch reading the
 * block (params.c). */
static CUresult launch_reading_params(cucap_exec *e, const void *values, size_t size, CUstream s, const char *caller,
                                      cucap_error **err)
{
    CUcontext saved = NULL;
    CUresult rc;

    if (values && size != cucap_i_params_size(e->params))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: the values are %zu bytes, the graph's parameter block %zu; nothing was launched",
                            caller, size, cucap_i_params_size(e->params));
    if ((rc = cucap_i_ctx_enter_for(e->ctx, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (e->tracked)
        pthread_mutex_lock(&e->launch_lock);
    if ((rc = cucap_i_params_launch(e->params, e->exec, values, s, caller, err)) != CUDA_SUCCESS)
        cucap_i_capture_stream_failed(s, caller, rc);
    else if (e->tracked)
        mark_launch(e, s, caller);
    if (e->tracked)
        pthread_mutex_unlock(&e->launch_lock);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_launch_params(cucap_exec *e, const void *values, size_t size, CUstream s, cucap_error **err)
{
    static const char caller[] = "cucap_exec_launch_params";

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if (!values)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: values is NULL", caller);
    if (!e->params)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the graph reads no parameter block (its capture made none with "
                            "cucap_builder_params); launch it with cucap_exec_launch", caller);
    return launch_reading_params(e, values, size, s, caller, err);
}


size_t cucap_exec_params_size(const cucap_exec *e)
{
    return e && e->params ? cucap_i_params_size(e->params) : 0;
}

/* exec_on_stream's launch written out: the call a loop makes after every
 * update, a few instructions around the driver's. */
CUresult cucap_exec_launch(cucap_exec *e, CUstream s, cucap_error **err)
{
    CUresult rc;

    if (e && e->params)
        return launch_reading_params(e, NULL, 0, s, "cucap_exec_launch", err);
    if (!e || needs_current_context(e, s, 1))
        return exec_on_stream(e, s, 0, "cucap_exec_launch", err);
    rc = cucap_i_drv.cuGraphLaunch(e->exec, s);
    return rc == CUDA_SUCCESS ? rc : exec_failed(s, 0, rc, "cucap_exec_launch", err);
}

CUresult cucap_exec_upload(cucap_exec *e, CUstream s, cucap_error **err)
{
    return exec_on_stream(e, s, 1, "cucap_exec_upload", err);
}

CUgraphExec cucap_exec_handle(const cucap_exec *e)
{
    return e ? e->exec : NULL;
}

/* cuGraphExecDestroy in ctx and relaxed thread mode (a global-mode destroy
 * invalidates other threads' global captures); every failure goes to the
 * warning handler. */
void cucap_i_exec_destroy_handle(CUgraphExec exec, CUcontext ctx, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    cucap_i_work_enter_quietly(&w, ctx, caller);
    if ((rc = cucap_i_drv.cuGraphExecDestroy(exec)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuGraphExecDestroy failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    cucap_i_work_leave_quietly(&w, caller);
}

/* Give owned, the first of a chain, to the reaper: the rest. */
static struct cucap_reaped *next_owned(struct cucap_reaped *owned)
{
    struct cucap_reaped *next = owned->next;

    owned->next = NULL;
    cucap_i_reap(owned);
    return next;
}

void cucap_exec_destroy(cucap_exec *e)
{
    struct cucap_reaped *owned;

    if (!e)
        return;
    cucap_i_deferred_destroys_sweep("cucap_exec_destroy");
    /* the host callback data it owns goes once no launch can run it */
    if ((owned = cucap_i_names_free(e->names)) != NULL && e->lost_track)
        owned = NULL;
    if (e->done) {
        cucap_i_exec_destroy_when_done(e->exec, e->ctx, e->done, owned, "cucap_exec_destroy");
    } else {
        cucap_i_exec_destroy_handle(e->exec, e->ctx, "cucap_exec_destroy");
        while (owned)   /* no launch since it was set */
            owned = next_owned(owned);
    }
    pthread_mutex_destroy(&e->launch_lock);
    cucap_i_params_unref(e->params, "cucap_exec_destroy");
    cucap_i_owner_unref(e->names_of, "cucap_exec_destroy");
    cucap_i_signature_free(e->signature);
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

/* Update e from o's root graph, in e's context, under o's graph lock
 * unless the caller's reference (to c, the capture that made o, when the
 * caller holds that) is the only one; a refused update names the driver's
 * reason (and the node, when the driver names one), in the error and in
 * *refusal when not NULL. */
CUresult cucap_i_exec_update(cucap_exec *e, struct cucap_graph_owner *o, struct cucap_params *params,
                             struct cucap_capture *c, cucap_update_refusal *refusal, const char *caller,
                             cucap_error **err)
{
    CUgraphExecUpdateResultInfo info;
    struct cucap_signature *signature = NULL;
    CUgraphNodeType type;
    CUcontext ctx = e->ctx, saved = NULL;
    char where[240], differs[200];
    CUresult rc;
    int locked;

    where[0] = differs[0] = '\0';
    if (!needs_current_context(e, NULL, 0))
        saved = ctx;   /* nothing to enter or leave */
    else if ((rc = cucap_i_ctx_enter_for(ctx, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    memset(&info, 0, sizeof info);
    locked = c ? cucap_i_capture_lock_unless_sole(c) : cucap_i_owner_lock_unless_sole(o);
    /* the driver's own checks pass some updates it then runs wrong */
    if (!cucap_i_signature_has_kernels(e->signature))
        rc = cucap_i_drv.cuGraphExecUpdate(e->exec, cucap_i_owner_root(o), &info);   /* its types are the driver's to check */
    else if ((rc = cucap_i_signature_of(cucap_i_owner_root(o), &signature)) != CUDA_SUCCESS)
        snprintf(differs, sizeof differs, "its nodes could not be read");
    else if (e->signature &&
             cucap_i_signature_differs(e->signature, signature, &info.result, &info.errorNode, differs, sizeof differs))
        rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    else
        rc = cucap_i_drv.cuGraphExecUpdate(e->exec, cucap_i_owner_root(o), &info);
    if (rc == CUDA_SUCCESS && signature) {   /* its graph's now */
        cucap_i_signature_free(e->signature);
        e->signature = signature;
        signature = NULL;
    }
    cucap_i_signature_free(signature);
    if (rc == CUDA_SUCCESS && e->params != params) {   /* it now reads the source's block */
        struct cucap_params *old = e->params;
        e->params = params;
        cucap_i_params_ref(e->params);
        cucap_i_params_unref(old, caller);
    }
    if (rc == CUDA_SUCCESS)
        cucap_i_names_updated(e->names, *cucap_i_owner_names(o));
    /* name the node only when the driver named one (a node of the locked graph) */
    if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE && differs[0])
        snprintf(where, sizeof where, ": %s", differs);
    else if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE && info.errorNode) {
        if (cucap_i_drv.cuGraphNodeGetType(info.errorNode, &type) == CUDA_SUCCESS)
            snprintf(where, sizeof where, ", at node %p (a %s node)", (void *)info.errorNode, cucap_i_node_type_text(type));
        else
            snprintf(where, sizeof where, ", at node %p", (void *)info.errorNode);
    }
    if (locked)
        cucap_i_owner_unlock(o);
    if (refusal) {
        memset(refusal, 0, sizeof *refusal);
        refusal->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    if (rc == CUDA_SUCCESS && saved == ctx)
        return rc;
    if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        if (refusal) {
            refusal->result = info.result;
            refusal->node = info.errorNode;
            snprintf(refusal->message, sizeof refusal->message, "%s%s", update_result_text(info.result), where);
        }
        cucap_i_fail(err, rc, "%s: the executable graph cannot be updated from this graph: %s%s", caller,
                     update_result_text(info.result), where);
    } else if (rc != CUDA_SUCCESS && differs[0]) {
        cucap_i_fail(err, rc, "%s: the graph's nodes could not be read to check the update: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuGraphExecUpdate");
    }
    return cucap_i_ctx_leave_for(ctx, saved, rc, caller, err);
}

CUresult cucap_exec_update(cucap_exec *e, cucap_builder *source, cucap_error **err)
{
    static const char caller[] = "cucap_exec_update";
    struct cucap_capture *h;
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if ((rc = cucap_i_builder_check_ended(source, caller, err)) != CUDA_SUCCESS)
        return rc;
    h = cucap_i_builder_capture(source);   /* holding source's reference */
    return cucap_i_exec_update(e, cucap_i_capture_owner(h), cucap_i_capture_params(h), h, NULL, caller, err);
}

CUresult cucap_exec_update_graph(cucap_exec *e, cucap_graph *source, cucap_error **err)
{
    static const char caller[] = "cucap_exec_update_graph";

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if (!source)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph is NULL", caller);
    if (source->box != cucap_i_owner_root_box(source->o))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph is a conditional body; an executable "
                            "graph is updated from a whole graph", caller);
    if (!cucap_graph_handle(source))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture was invalidated and the driver "
                            "discarded its graph", caller);
    /* holding source's reference */
    return cucap_i_exec_update(e, source->o, source->params, NULL, NULL, caller, err);
}

/* ---------------------------------------------------------------- named nodes */

/* A change to a node of e by name, ready: *c filled in, e's context
 * current unless e needs none (the caller then leaves it with
 * cucap_i_ctx_leave_for(e->ctx, *saved, ...)), and the data replaced
 * earlier given back once no launch can run it. */
static CUresult begin_change(cucap_exec *e, const char *name, int in_context, struct cucap_node_change *c,
                             CUcontext *saved, const char *caller, cucap_error **err)
{
    CUresult rc;

    *saved = e ? e->ctx : NULL;
    *c = (struct cucap_node_change){ e ? e->exec : NULL, e ? e->ctx : NULL, name, caller, 0 };
    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the executable graph is NULL", caller);
    if ((in_context || e->done || needs_current_context(e, NULL, 0)) &&
        (rc = cucap_i_ctx_enter_for(e->ctx, saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    c->launches_done = !e->done || cucap_i_drv.cuEventQuery(e->done) == CUDA_SUCCESS;
    if (c->launches_done)
        cucap_i_names_launches_done(e->names);
    return CUDA_SUCCESS;
}

CUresult cucap_exec_set_kernel_arg(cucap_exec *e, const char *name, unsigned int index, const void *value,
                                   size_t size, cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_kernel_arg";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 0, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_names_set_kernel_arg(e->names, &c, index, value, size, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_memcpy(cucap_exec *e, const char *name, CUdeviceptr dst, CUdeviceptr src, size_t size,
                               cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_memcpy";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_names_set_memcpy(e->names, &c, dst, src, size, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_memset(cucap_exec *e, const char *name, CUdeviceptr dst, unsigned int value,
                               cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_memset";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_names_set_memset(e->names, &c, dst, value, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_host_callback(cucap_exec *e, const char *name, CUhostFn fn, void *data, CUhostFn free_data,
                                      cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_host_callback";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS) {
        if (free_data)
            free_data(data);
        return rc;
    }
    if ((rc = cucap_i_names_set_host_callback(e->names, &c, fn, data, free_data, err)) != CUDA_SUCCESS && free_data)
        free_data(data);   /* refused: given back at once */
    if (rc == CUDA_SUCCESS && cucap_i_names_own_data(e->names))
        e->tracked = 1;   /* its launches from here on may run the data */
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_child_graph(cucap_exec *e, const char *name, cucap_graph *g, cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_child_graph";
    struct cucap_node_change c;
    CUcontext saved;
    CUgraph graph;
    CUresult rc;

    if (!g)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph is NULL", caller);
    if (!(graph = cucap_graph_handle(g)))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the graph's capture was invalidated and the driver "
                            "discarded it", caller);
    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    cucap_i_owner_lock(g->o);
    rc = cucap_i_names_set_child_graph(e->names, &c, graph, err);
    cucap_i_owner_unlock(g->o);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_event(cucap_exec *e, const char *name, CUevent event, cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_event";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_names_set_event(e->names, &c, event, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

CUresult cucap_exec_set_enabled(cucap_exec *e, const char *name, int enabled, cucap_error **err)
{
    static const char caller[] = "cucap_exec_set_enabled";
    struct cucap_node_change c;
    CUcontext saved;
    CUresult rc;

    if ((rc = begin_change(e, name, 1, &c, &saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_names_set_enabled(e->names, &c, enabled, err);
    return cucap_i_ctx_leave_for(e->ctx, saved, rc, caller, err);
}

/* ---------------------------------------------------------------- graphs the library did not capture */

/* A new reference to a new graph owner that owns graph, in ctx: no
 * capture made it. */
static CUresult own_graph(CUcontext ctx, CUgraph graph, struct cucap_params *params, cucap_graph **out,
                          const char *caller, cucap_error **err)
{
    struct cucap_graph_owner *o = cucap_i_owner_new(ctx);

    if (o)
        cucap_i_owner_take(o, graph);
    if (!o || !(*out = cucap_i_graph_new(o, NULL, params))) {
        if (o)
            cucap_i_owner_unref(o, caller);   /* destroys graph */
        else
            (void)cucap_i_drv.cuGraphDestroy(graph);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    cucap_i_owner_unref(o, caller);   /* the reference *out holds stays */
    return CUDA_SUCCESS;
}

CUresult cucap_graph_adopt(CUgraph graph, cucap_graph **out, cucap_error **err)
{
    static const char caller[] = "cucap_graph_adopt";
    CUcontext ctx = NULL;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (!graph)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph is NULL", caller);
    if ((rc = cucap_i_drv.cuCtxGetCurrent(&ctx)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuCtxGetCurrent");
    if (!ctx)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_CONTEXT, "%s: no context is current: make current the context "
                            "the graph's nodes belong to (it instantiates the graph)", caller);
    return own_graph(ctx, graph, NULL, out, caller, err);
}

CUresult cucap_graph_clone(cucap_graph *g, cucap_graph **out, cucap_error **err)
{
    static const char caller[] = "cucap_graph_clone";
    CUgraph from, clone = NULL;
    struct cucap_params *params;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (!g)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph is NULL", caller);
    cucap_i_owner_lock(g->o);
    from = cucap_i_box_graph(g->box);
    rc = from ? cucap_i_drv.cuGraphClone(&clone, from) : CUDA_ERROR_ILLEGAL_STATE;
    params = g->params;   /* the clone's nodes read the same block */
    if (params)
        cucap_i_params_ref(params);
    cucap_i_owner_unlock(g->o);
    if (rc == CUDA_SUCCESS)
        rc = own_graph(cucap_i_owner_context(g->o), clone, params, out, caller, err);
    else if (rc == CUDA_ERROR_ILLEGAL_STATE)
        cucap_i_fail(err, rc, "%s: the capture was invalidated and the driver discarded its graph", caller);
    else if (rc == CUDA_ERROR_NOT_SUPPORTED)
        cucap_i_fail(err, rc, "%s: cuGraphClone failed: " CUCAP_I_RESULT_FMT " (the driver clones no graph with "
                     "memory allocation or free nodes, or with conditional nodes)", caller, CUCAP_I_RESULT_ARGS(rc));
    else
        cucap_i_fail_driver(err, rc, caller, "cuGraphClone");
    cucap_i_params_unref(params, caller);
    return rc;
}
