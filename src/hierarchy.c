/* Graph hierarchies and their references; executable graphs. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "hierarchy.h"
#include "internal.h"

struct cucap_box {
    CUgraph graph;                   /* NULL once retired */
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

/* A fork stream released while its capture still ran: it goes back to the
 * stream cache once the capture is over. */
struct deferred_stream {
    CUcontext ctx;
    CUdevice dev;
    CUstream stream;
};

struct cucap_hier {
    atomic_int refs;
    struct deferred_stream *deferred;
    size_t deferred_count, deferred_cap;
    pthread_mutex_t lock;
    struct cucap_box root;
    int owned;                       /* the capture's end returned the root */
    int body_capture;                /* the standalone capture of a conditional body */
    int capture_over;                /* its capture ended: no stream of it captures any more */
    char first_failure_call[128];
    CUresult first_failure_code;
    struct cucap_body_record *bodies;
};

struct cucap_graph {
    atomic_int refs;
    struct cucap_hier *h;
    struct cucap_box *box;
};

struct cucap_exec {
    CUgraphExec exec;
};

struct cucap_hier *cucap_i_hier_new_capture(CUgraph root)
{
    struct cucap_hier *h = calloc(1, sizeof *h);

    if (!h)
        return NULL;
    atomic_init(&h->refs, 1);
    pthread_mutex_init(&h->lock, NULL);
    h->root.graph = root;
    return h;
}

void cucap_i_hier_ref(struct cucap_hier *h)
{
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void cucap_i_hier_unref(struct cucap_hier *h)
{
    CUresult rc;

    if (!h || atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (h->owned && h->root.graph && (rc = cucap_i_drv.cuGraphDestroy(h->root.graph)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_graph_unref: cuGraphDestroy failed while destroying the last reference's graph: "
                     "%s: %s", cucap_i_result_label(rc), cucap_i_result_description(rc));
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
    while (h->deferred_count)   /* a capture that never ended: destroying a fork stream is legal */
        cucap_i_drv.cuStreamDestroy(h->deferred[--h->deferred_count].stream);
    free(h->deferred);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

void cucap_i_hier_own(struct cucap_hier *h, CUgraph g)
{
    pthread_mutex_lock(&h->lock);
    h->root.graph = g;
    h->owned = 1;
    pthread_mutex_unlock(&h->lock);
}

void cucap_i_hier_retire(struct cucap_hier *h, struct cucap_box *box)
{
    struct cucap_box *b;

    pthread_mutex_lock(&h->lock);
    box->graph = NULL;
    /* parents come before children: one sweep retires every descendant */
    for (b = h->root.next; b; b = b->next)
        if (b->parent && !b->parent->graph)
            b->graph = NULL;
    pthread_mutex_unlock(&h->lock);
}

int cucap_i_hier_defer_stream(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUstream s)
{
    int over;

    pthread_mutex_lock(&h->lock);
    over = h->capture_over;
    if (!over && h->deferred_count == h->deferred_cap) {
        size_t cap = h->deferred_cap ? h->deferred_cap * 2 : 8;
        struct deferred_stream *grown = realloc(h->deferred, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&h->lock);
            return -1;
        }
        h->deferred = grown;
        h->deferred_cap = cap;
    }
    if (!over) {
        h->deferred[h->deferred_count].ctx = ctx;
        h->deferred[h->deferred_count].dev = dev;
        h->deferred[h->deferred_count++].stream = s;
    }
    pthread_mutex_unlock(&h->lock);
    if (over)   /* the capture is over already */
        cucap_i_cache_give_stream(ctx, dev, s);
    return 0;
}

void cucap_i_hier_capture_over(struct cucap_hier *h)
{
    struct deferred_stream *d;
    size_t n, i;

    pthread_mutex_lock(&h->lock);
    d = h->deferred;
    n = h->deferred_count;
    h->deferred = NULL;
    h->deferred_count = h->deferred_cap = 0;
    h->capture_over = 1;
    pthread_mutex_unlock(&h->lock);
    for (i = 0; i < n; i++)
        cucap_i_cache_give_stream(d[i].ctx, d[i].dev, d[i].stream);
    free(d);
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

void cucap_i_hier_mark_body_capture(struct cucap_hier *h)
{
    h->body_capture = 1;
}

int cucap_i_hier_is_body_capture(const struct cucap_hier *h)
{
    return h && h->body_capture;
}

struct cucap_body_record *cucap_i_hier_add_body(struct cucap_hier *h, const char *node, unsigned int index)
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

void cucap_i_hier_set_body(struct cucap_hier *h, struct cucap_body_record *r, enum cucap_body_status status)
{
    pthread_mutex_lock(&h->lock);
    r->status = status;
    pthread_mutex_unlock(&h->lock);
}

/* Refuse to instantiate while a body failed or is still capturing: the
 * driver would run the body graph empty or half-built. */
static CUresult check_bodies(struct cucap_hier *h, const char *caller, cucap_error **err)
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

CUgraph cucap_i_hier_root(struct cucap_hier *h)
{
    CUgraph g;

    pthread_mutex_lock(&h->lock);
    g = h->root.graph;
    pthread_mutex_unlock(&h->lock);
    return g;
}

/* ---------------------------------------------------------------- capture failures */

int cucap_i_is_capture_error(CUresult code)
{
    return (code >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && code <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

void cucap_i_hier_capture_failed(struct cucap_hier *h, const char *call, CUresult code)
{
    if (!h || !cucap_i_is_capture_error(code))
        return;
    pthread_mutex_lock(&h->lock);
    if (!h->first_failure_call[0]) {
        snprintf(h->first_failure_call, sizeof h->first_failure_call, "%s", call);
        h->first_failure_code = code;
    }
    pthread_mutex_unlock(&h->lock);
}

void cucap_i_hier_note_first_failure(struct cucap_hier *h, cucap_error **err)
{
    char call[128];
    CUresult code;

    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    snprintf(call, sizeof call, "%s", h->first_failure_call);
    code = h->first_failure_code;
    pthread_mutex_unlock(&h->lock);
    if (call[0])
        cucap_i_note_failure(err, call, "this capture ran (the first library call on it that failed)", code);
}

/* The streams taking part in captures; the entries live in the builders. */
static struct cucap_registration *registrations;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

void cucap_i_capture_register(struct cucap_registration *r, CUstream s, struct cucap_hier *h)
{
    r->stream = s;
    r->h = h;
    r->prev = NULL;
    pthread_mutex_lock(&registry_lock);
    r->next = registrations;
    if (registrations)
        registrations->prev = r;
    registrations = r;
    r->linked = 1;
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_capture_unregister(struct cucap_registration *r)
{
    pthread_mutex_lock(&registry_lock);
    if (r->linked) {
        if (r->prev)
            r->prev->next = r->next;
        else
            registrations = r->next;
        if (r->next)
            r->next->prev = r->prev;
        r->linked = 0;
    }
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code)
{
    struct cucap_registration *r;

    if (!cucap_i_is_capture_error(code))
        return;
    pthread_mutex_lock(&registry_lock);
    for (r = registrations; r; r = r->next)
        if (r->stream == s) {
            cucap_i_hier_capture_failed(r->h, call, code);
            break;
        }
    pthread_mutex_unlock(&registry_lock);
}

/* ---------------------------------------------------------------- references */

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

/* ---------------------------------------------------------------- instantiation */

static const char *instantiate_result_text(CUgraphInstantiateResult r)
{
    switch (r) {
    case CUDA_GRAPH_INSTANTIATE_ERROR: return "the driver gave no further details";
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: return "the graph has an invalid structure, such as a cycle";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
        return "device launch was asked for a graph with a node type it does not support";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
        return "device launch was asked for a graph with nodes in several contexts";
    case CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED:
        return "a conditional handle was created on the graph but no conditional node uses it";
    default: return NULL;
    }
}

CUresult cucap_i_hier_instantiate(struct cucap_hier *h, const struct cucap_box *box,
                                  const cucap_complete_options *opts, cucap_exec **out, const char *caller,
                                  cucap_error **err)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraph root = cucap_i_box_graph(h, box ? box : &h->root);
    CUgraphExec exec = NULL;
    cucap_exec *e;
    CUresult rc;

    if (!root)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the capture was invalidated and the driver discarded its graph; there is no "
                            "graph to instantiate", caller);
    if ((rc = check_bodies(h, caller, err)) != CUDA_SUCCESS)
        return rc;
    memset(&params, 0, sizeof params);
    if (opts) {
        if (opts->auto_free_on_launch)
            params.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        if (opts->upload_stream) {
            params.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
            params.hUploadStream = opts->upload_stream;
        }
        if (opts->device_launch)
            params.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
        if (opts->use_node_priority)
            params.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    }
    params.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    rc = cucap_i_drv.cuGraphInstantiateWithParams(&exec, root, &params);
    if (params.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) {
        const char *why = instantiate_result_text(params.result_out);
        if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;   /* a failed result with a successful call: never seen */
        if (exec)
            cucap_i_drv.cuGraphExecDestroy(exec);
        if (why)
            return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: %s: %s", caller,
                                cucap_i_result_label(rc), why);
        return cucap_i_fail(err, rc, "%s: cuGraphInstantiateWithParams failed: %s: unexpected instantiate "
                            "result %d", caller, cucap_i_result_label(rc), (int)params.result_out);
    }
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuGraphInstantiateWithParams");
    if (!exec)
        return cucap_i_fail(err, CUDA_ERROR_UNKNOWN, "%s: cuGraphInstantiateWithParams returned no executable graph",
                            caller);
    e = malloc(sizeof *e);
    if (!e) {
        cucap_i_drv.cuGraphExecDestroy(exec);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    e->exec = exec;
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

/* ---------------------------------------------------------------- executable graphs */

CUresult cucap_exec_launch(cucap_exec *e, CUstream s, cucap_error **err)
{
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "cucap_exec_launch: the executable graph is NULL");
    if ((rc = cucap_i_drv.cuGraphLaunch(e->exec, s)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, "cucap_exec_launch", "cuGraphLaunch");
    return CUDA_SUCCESS;
}

CUresult cucap_exec_upload(cucap_exec *e, CUstream s, cucap_error **err)
{
    CUresult rc;

    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "cucap_exec_upload: the executable graph is NULL");
    if ((rc = cucap_i_drv.cuGraphUpload(e->exec, s)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, "cucap_exec_upload", "cuGraphUpload");
    return CUDA_SUCCESS;
}

CUgraphExec cucap_exec_handle(const cucap_exec *e)
{
    return e ? e->exec : NULL;
}

void cucap_exec_destroy(cucap_exec *e)
{
    CUresult rc;

    if (!e)
        return;
    if ((rc = cucap_i_drv.cuGraphExecDestroy(e->exec)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_exec_destroy: cuGraphExecDestroy failed: %s: %s", cucap_i_result_label(rc),
                     cucap_i_result_description(rc));
    free(e);
}
