/* A hierarchy: the graphs of one capture (a root CUgraph and the graphs
 * the driver owns below it, reference-counted, destroyed once, never after
 * being retired) and the capture session that makes them (streams and
 * events that wait for its end before being reused, the records of its
 * conditional bodies, the first library call that failed while it ran,
 * and the registry of running captures, each with the entries of its
 * streams; the registry lives in the hierarchies it lists, under their
 * locks).  This file owns struct cucap_hier. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context-hold.h"
#include "driver.h"
#include "hierarchy.h"
#include "internal.h"
#include "owner-lock.h"
#include "params.h"
#include "spares.h"
#include "streams.h"

struct cucap_box {
    CUgraph graph;                   /* NULL once retired; the root's, until its capture's end returns it */
    int retired;                     /* the driver discarded it */
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

/* A hierarchy: the graphs of one capture (a root and the graphs the
 * driver owns below it) with the capture session that made them, shared
 * by reference among the builders, graph references and executable
 * graphs that use it. */
struct cucap_hier {
    /* what every capture touches first, in the first cache lines */
    atomic_int refs;                 /* every holder's but a fork's */
    atomic_int fork_refs;            /* forks' (their splits and joins change it under lock, with no
                                        atomic operation of its own); h goes when both are 0 */
    struct cucap_owner_lock lock;    /* guards the fields below but the graphs' use (short sections) */
    struct cucap_owner_lock graph_lock;   /* see cucap_i_hier_lock */
    unsigned graph_depth;            /* how often the holder took it; the holder's */
    atomic_uintptr_t graph_owner;    /* the holding thread (pthread_self), 0 when free */
    CUcontext ctx;
    CUstream origin;                 /* the stream that began its capture */
    unsigned long captures;          /* its captures begun (a recycled one has several) */
    struct cucap_params *params;     /* the parameter block its captures' kernels read, or NULL; under
                                        the graph lock, kept when recycled */
    /* the ownership tree */
    struct cucap_box root;
    atomic_int owned;                /* the capture's end returned the root */
    /* the capture session */
    atomic_int capture_over;         /* its capture ended: no stream of it captures any more */
    cuuint64_t capture_id;           /* 0 until a join sees it; under the graph lock */
    int body_capture;                /* the standalone capture of a conditional body */
    int recycles;                    /* recycled by its builder (cucap_i_hier_recycle) */
    int in_registry;
    CUresult first_failure_code;     /* CUDA_SUCCESS until a library call on the capture failed */
    struct cucap_cache_item *deferred;   /* few_deferred, or on the heap when more */
    size_t deferred_count, deferred_cap;
    /* recycled: what its captures deferred stays here once they are over,
     * for its next capture's splits, under the graph lock; and it stays
     * in the registry */
    struct cucap_cache_item *ready;  /* few_ready, or on the heap when more */
    size_t ready_count, ready_cap;
    struct cucap_body_record *bodies;
    /* the registry: the entries of the capture's streams, under
     * lock, and the hierarchy's place among the running captures, under
     * the registry's lock */
    struct cucap_registration *streams;
    struct cucap_hier *registry_prev, *registry_next;
    /* the rest */
    struct cucap_cache_item few_deferred[4];
    struct cucap_cache_item few_ready[4];
    char first_failure_call[128];
    char first_failure_streams[256];   /* for a call that found the capture invalidated */
};

static void release_session(struct cucap_hier *h);

/* ---------------------------------------------------------------- life, lock, references, the ownership tree */

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
    cucap_i_owner_lock_init(&h->graph_lock, 0);
    atomic_init(&h->refs, 1);
    atomic_init(&h->fork_refs, 0);
    atomic_init(&h->owned, 0);
    atomic_init(&h->capture_over, 0);
    atomic_init(&h->graph_owner, 0);
    cucap_i_owner_lock_init(&h->lock, 1);
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

CUstream cucap_i_hier_origin(const struct cucap_hier *h)
{
    return h->origin;
}

unsigned long cucap_i_hier_capture_number(const struct cucap_hier *h)
{
    return h->captures;
}

struct cucap_params *cucap_i_hier_params(const struct cucap_hier *h)
{
    return h->params;
}

void cucap_i_hier_set_params(struct cucap_hier *h, struct cucap_params *p, const char *caller)
{
    struct cucap_params *old = h->params;

    h->params = p;
    cucap_i_params_unref(old, caller);
}

CUcontext cucap_i_hier_context(const struct cucap_hier *h)
{
    return h->ctx;
}

int cucap_i_hier_is_owned(struct cucap_hier *h)
{
    return atomic_load_explicit(&h->owned, memory_order_acquire) && cucap_i_hier_root(h) != NULL;
}

/* The lock of short sections (a spin lock below it) */
static void session_lock(struct cucap_hier *h)
{
    cucap_i_owner_lock(&h->lock, 0);
}

static void session_unlock(struct cucap_hier *h)
{
    cucap_i_owner_unlock(&h->lock);
}

/* The holder of a graph lock is named by pthread_self() (a thread-local
 * variable would cost a __tls_get_addr call in a shared library); only
 * the holder ever finds its own name in graph_owner.  The lock of a
 * recycled hierarchy belongs to the thread that began its capture until
 * another thread takes it (owner-lock.h). */
void cucap_i_hier_lock(struct cucap_hier *h)
{
    uintptr_t self = (uintptr_t)pthread_self();

    if (atomic_load_explicit(&h->graph_owner, memory_order_relaxed) == self) {
        h->graph_depth++;
        return;
    }
    cucap_i_owner_lock(&h->graph_lock, self);
    atomic_store_explicit(&h->graph_owner, self, memory_order_relaxed);
    h->graph_depth = 1;
}

void cucap_i_hier_unlock(struct cucap_hier *h)
{
    if (--h->graph_depth > 0)
        return;
    atomic_store_explicit(&h->graph_owner, 0, memory_order_relaxed);
    cucap_i_owner_unlock(&h->graph_lock);
}

static int lock_way(const struct cucap_owner_lock *l)
{
    if (cucap_i_owner_lock_was_revoked(l))
        return -1;
    return atomic_load_explicit(&l->owner, memory_order_acquire) != 0;
}

int cucap_i_hier_lock_way(const struct cucap_hier *h)
{
    return lock_way(&h->graph_lock);
}

int cucap_i_hier_session_lock_way(const struct cucap_hier *h)
{
    return lock_way(&h->lock);
}

/* No holder but the caller's one reference. */
static int sole(struct cucap_hier *h)
{
    return atomic_load_explicit(&h->refs, memory_order_acquire) == 1 &&
           atomic_load_explicit(&h->fork_refs, memory_order_acquire) == 0;
}

int cucap_i_hier_lock_unless_sole(struct cucap_hier *h)
{
    if (sole(h))
        return 0;
    cucap_i_hier_lock(h);
    return 1;
}

int cucap_i_hier_lock_running(struct cucap_hier *h)
{
    cucap_i_hier_lock(h);
    return !cucap_i_hier_is_capture_over(h);
}

void cucap_i_hier_ref(struct cucap_hier *h)
{
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

/* Under lock: the forks' references changed by n (no atomic operation:
 * every change is under lock). */
static void add_fork_refs_locked(struct cucap_hier *h, int n)
{
    atomic_store_explicit(&h->fork_refs, atomic_load_explicit(&h->fork_refs, memory_order_relaxed) + n,
                          memory_order_release);
}

static void destroy_hier(struct cucap_hier *h)
{
    CUresult rc;

    if (h->owned && h->root.graph && (rc = cucap_i_drv.cuGraphDestroy(h->root.graph)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_graph_unref: cuGraphDestroy failed while destroying the last reference's graph: "
                     CUCAP_I_RESULT_FMT, CUCAP_I_RESULT_ARGS(rc));
    while (h->root.next) {   /* the driver destroyed the graphs below the root with it */
        struct cucap_box *b = h->root.next;
        h->root.next = b->next;
        free(b);
    }
    release_session(h);
    cucap_i_params_unref(h->params, "cucap_graph_unref");
    cucap_i_capture_registry_remove(h);   /* a recycled hierarchy that outlived its builder's hold */
    if (!cucap_i_spare_give(&spare_hiers, h))
        free(h);
}

void cucap_i_hier_unref(struct cucap_hier *h)
{
    int refs, last;

    if (!h)
        return;
    /* not the last: one atomic operation; the last is taken under lock,
     * where a fork's release checks it (cucap_i_hier_fork_unref) */
    refs = atomic_load_explicit(&h->refs, memory_order_relaxed);
    while (refs > 1)
        if (atomic_compare_exchange_weak_explicit(&h->refs, &refs, refs - 1, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return;
    session_lock(h);
    last = atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1 &&
           atomic_load_explicit(&h->fork_refs, memory_order_acquire) == 0;
    session_unlock(h);
    if (last)
        destroy_hier(h);
}

void cucap_i_hier_fork_unref(struct cucap_hier *h)
{
    int last;

    if (!h)
        return;
    session_lock(h);
    add_fork_refs_locked(h, -1);
    last = atomic_load_explicit(&h->fork_refs, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&h->refs, memory_order_acquire) == 0;
    session_unlock(h);
    if (last)
        destroy_hier(h);
}

int cucap_i_hier_recycle(struct cucap_hier *h, const char *caller)
{
    CUresult rc;

    if (!sole(h) || h->body_capture ||
        !atomic_load_explicit(&h->capture_over, memory_order_acquire))
        return 0;
    if (h->owned && h->root.graph && (rc = cucap_i_drv.cuGraphDestroy(h->root.graph)) != CUDA_SUCCESS)
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
    h->root.graph = NULL;
    h->root.retired = 0;
    atomic_store_explicit(&h->owned, 0, memory_order_relaxed);
    h->capture_id = 0;
    if (h->first_failure_code != CUDA_SUCCESS) {   /* the text only when a failure wrote it */
        h->first_failure_call[0] = '\0';
        h->first_failure_code = CUDA_SUCCESS;
        h->first_failure_streams[0] = '\0';
    }
    h->recycles = 1;
    return 1;
}

void cucap_i_hier_retire(struct cucap_hier *h, struct cucap_box *box)
{
    struct cucap_box *b;

    session_lock(h);
    box->graph = NULL;
    box->retired = 1;
    /* parents come before children: one sweep retires every descendant */
    for (b = h->root.next; b; b = b->next)
        if (b->parent && b->parent->retired) {
            b->graph = NULL;
            b->retired = 1;
        }
    session_unlock(h);
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
    session_lock(h);
    for (tail = &h->root.next; *tail; tail = &(*tail)->next)
        ;
    *tail = box;   /* after its parent, which is already listed */
    session_unlock(h);
    return box;
}

CUgraph cucap_i_box_graph(struct cucap_hier *h, const struct cucap_box *box)
{
    CUgraph g;

    session_lock(h);
    g = box->graph;
    session_unlock(h);
    return g;
}

CUgraph cucap_i_hier_root_locked(const struct cucap_hier *h)
{
    return h->root.graph;
}

CUgraph cucap_i_hier_root(struct cucap_hier *h)
{
    CUgraph g;

    session_lock(h);
    g = h->root.graph;
    session_unlock(h);
    return g;
}

/* ---------------------------------------------------------------- the capture session */

static void destroy_item(const struct cucap_cache_item *d)
{
    if (d->is_event)
        cucap_i_drv.cuEventDestroy((CUevent)d->handle);
    else
        cucap_i_drv.cuStreamDestroy((CUstream)d->handle);
}

static void give_item(const struct cucap_cache_item *d, const char *caller)
{
    if (d->is_event)
        cucap_i_cache_give_event(d->ctx, d->dev, (CUevent)d->handle, caller);
    else
        cucap_i_cache_give_stream(d->ctx, d->dev, (CUstream)d->handle, caller);
}

/* Room for cap deferred items (more than there are): the few in the
 * hierarchy itself, more on the heap.  -1 when out of memory. */
static int grow_deferred(struct cucap_hier *h, size_t cap)
{
    struct cucap_cache_item *grown;

    if (cap <= sizeof h->few_deferred / sizeof h->few_deferred[0] && !h->deferred) {
        h->deferred = h->few_deferred;
        h->deferred_cap = sizeof h->few_deferred / sizeof h->few_deferred[0];
        return 0;
    }
    if (h->deferred == h->few_deferred) {
        if (!(grown = malloc(cap * sizeof *grown)))
            return -1;
        memcpy(grown, h->few_deferred, h->deferred_count * sizeof *grown);
    } else if (!(grown = realloc(h->deferred, cap * sizeof *grown))) {
        return -1;
    }
    h->deferred = grown;
    h->deferred_cap = cap;
    return 0;
}

/* Under h->lock, the capture still running: defer one item, with room made
 * for `more` after it (best effort).  -1 when out of memory. */
static int defer_locked(struct cucap_hier *h, const struct cucap_cache_item *item, size_t more)
{
    if (h->deferred_count + 1 + more > h->deferred_cap) {
        size_t cap = h->deferred_cap ? h->deferred_cap * 2 : 4;
        if (cap < h->deferred_count + 1 + more)
            cap = h->deferred_count + 1 + more;
        if (grow_deferred(h, cap) != 0 && h->deferred_count == h->deferred_cap &&
            grow_deferred(h, h->deferred_count + 1) != 0)
            return -1;
    }
    h->deferred[h->deferred_count++] = *item;
    return 0;
}

static int defer(struct cucap_hier *h, CUcontext ctx, CUdevice dev, void *handle, int is_event, int joined,
                 size_t more)
{
    struct cucap_cache_item item = { ctx, dev, handle, is_event, joined };
    int over, rc = 0;

    session_lock(h);
    over = atomic_load_explicit(&h->capture_over, memory_order_relaxed);
    if (!over)
        rc = defer_locked(h, &item, more);
    session_unlock(h);
    if (over)   /* the capture is over already */
        give_item(&item, "cucap_builder_destroy");
    return rc;
}

int cucap_i_hier_defer_stream(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUstream s, int joined)
{
    return defer(h, ctx, dev, s, 0, joined, 0);
}

int cucap_i_hier_defer_event(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUevent e)
{
    return defer(h, ctx, dev, e, 1, 0, 0);
}

size_t cucap_i_hier_take_joined(struct cucap_hier *h, CUcontext ctx, size_t n, CUstream *streams)
{
    size_t i, got = 0;

    session_lock(h);
    for (i = h->deferred_count; i-- > 0 && got < n;) {
        struct cucap_cache_item *item = &h->deferred[i];
        if (item->is_event || !item->joined || item->ctx != ctx)
            continue;
        streams[got++] = (CUstream)item->handle;
        *item = h->deferred[--h->deferred_count];   /* one visited already, or itself */
    }
    session_unlock(h);
    return got;
}

static void unlink_locked(struct cucap_hier *h, struct cucap_registration *r);
static void add_to_registry(struct cucap_hier *h);

/* Under the graph lock: items of a capture that is over kept for the
 * next captures' splits, as many as there is room for, up to READY_MAX
 * (a join by events takes its events from the cache: those would pile up
 * here otherwise); how many. */
#define READY_MAX 64
static size_t keep_ready(struct cucap_hier *h, const struct cucap_cache_item *items, size_t n)
{
    size_t room, cap;
    struct cucap_cache_item *grown;

    if (!h->ready) {
        h->ready = h->few_ready;
        h->ready_cap = sizeof h->few_ready / sizeof h->few_ready[0];
    }
    if (n > READY_MAX - h->ready_count)
        n = READY_MAX - h->ready_count;
    room = h->ready_cap - h->ready_count;
    if (room < n) {
        cap = h->ready_count + n;
        if ((grown = h->ready == h->few_ready ? malloc(cap * sizeof *grown) : realloc(h->ready, cap * sizeof *grown))) {
            if (h->ready == h->few_ready)
                memcpy(grown, h->few_ready, h->ready_count * sizeof *grown);
            h->ready = grown;
            h->ready_cap = cap;
        }
        room = h->ready_cap - h->ready_count;
    }
    if (n > room)
        n = room;
    memcpy(h->ready + h->ready_count, items, n * sizeof *items);
    h->ready_count += n;
    return n;
}

size_t cucap_i_hier_take_ready(struct cucap_hier *h, CUcontext ctx, size_t n, CUstream *streams, CUevent *event)
{
    size_t i = h->ready_count, got = 0;

    while (i-- > 0 && (got < n || !*event)) {
        struct cucap_cache_item *item = &h->ready[i];
        if (item->ctx != ctx || (item->is_event ? *event != NULL : got == n))
            continue;
        if (item->is_event)
            *event = (CUevent)item->handle;
        else
            streams[got++] = (CUstream)item->handle;
        *item = h->ready[--h->ready_count];
    }
    return got;
}

void cucap_i_hier_capture_over(struct cucap_hier *h, CUgraph ended, struct cucap_registration *origin)
{
    struct cucap_cache_item *d;
    size_t n, kept;

    session_lock(h);
    if (origin && origin->linked)
        unlink_locked(h, origin);
    if (ended) {   /* the ownership tree's root, in the same step */
        h->root.graph = ended;
        atomic_store_explicit(&h->owned, 1, memory_order_release);
    }
    d = h->deferred;
    n = h->deferred_count;
    h->deferred = NULL;
    h->deferred_count = h->deferred_cap = 0;
    atomic_store_explicit(&h->capture_over, 1, memory_order_release);
    session_unlock(h);
    kept = ended && h->recycles && n ? keep_ready(h, d, n) : 0;
    if (n > kept)
        cucap_i_cache_give_items(d + kept, n - kept, "cucap_builder_end");
    if (d && d != h->few_deferred)   /* those stay: the hierarchy lives on, and no item is deferred any more */
        free(d);
}

int cucap_i_hier_has_bodies(const struct cucap_hier *h)
{
    return h->bodies != NULL;
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
    session_lock(h);
    r->next = h->bodies;
    h->bodies = r;
    session_unlock(h);
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

void cucap_i_hier_set_body(struct cucap_hier *h, struct cucap_body_record *r, enum cucap_body_status status)
{
    session_lock(h);
    r->status = status;
    session_unlock(h);
}

/* Refuse to instantiate while a body failed or is still capturing: the
 * driver would run the body graph empty or half-built. */
CUresult cucap_i_hier_check_bodies(struct cucap_hier *h, const char *caller, cucap_error **err)
{
    const struct cucap_body_record *r;
    char node[96];
    unsigned int index = 0;
    enum cucap_body_status status = CUCAP_BODY_EMPTY;

    session_lock(h);
    for (r = h->bodies; r; r = r->next)
        if (r->status == CUCAP_BODY_FAILED || r->status == CUCAP_BODY_CAPTURING) {
            snprintf(node, sizeof node, "%s", r->node);
            index = r->index;
            status = r->status;
            if (status == CUCAP_BODY_FAILED)
                break;
        }
    session_unlock(h);
    if (status == CUCAP_BODY_FAILED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s was invalidated (its capture failed); capture that body again "
                            "before completing", caller, index, node);
    if (status == CUCAP_BODY_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s is still capturing; end it before completing", caller, index, node);
    return CUDA_SUCCESS;
}

static void release_session(struct cucap_hier *h)
{
    while (h->bodies) {
        struct cucap_body_record *r = h->bodies;
        h->bodies = r->next;
        free(r);
    }
    while (h->deferred_count)   /* a capture that never ended: destroying its streams and events is legal */
        destroy_item(&h->deferred[--h->deferred_count]);
    if (h->deferred != h->few_deferred)
        free(h->deferred);
    h->deferred = NULL;
    cucap_i_cache_give_items(h->ready, h->ready_count, "cucap_builder_destroy");
    if (h->ready != h->few_ready)
        free(h->ready);
    h->ready = NULL;
    h->ready_count = h->ready_cap = 0;
}

/* ---------------------------------------------------------------- capture failures */

int cucap_i_is_capture_error(CUresult code)
{
    return (code >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && code <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

/* The hierarchies whose capture runs; each keeps its streams' entries. */
static struct cucap_hier *running;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_size_t registered;     /* hierarchies listed: none, no lookup */

/* Under h->lock: "the origin 0x... and forks 0x..., 0x..." for the
 * streams of h's capture that are still registered. */
static void describe_streams(const struct cucap_hier *h, char *buf, size_t size)
{
    const struct cucap_registration *r, *origin = NULL;
    size_t used = 0;
    int forks = 0;

    buf[0] = '\0';
    for (r = h->streams; r; r = r->next)   /* newest first: the origin registered first comes last */
        origin = r;
    if (!origin)
        return;
    used = (size_t)snprintf(buf, size, "the origin %p", (void *)origin->stream);
    for (r = h->streams; r && used < size; r = r->next)
        if (r != origin)
            used += (size_t)snprintf(buf + used, size - used, "%s%p", forks++ ? ", " : " and forks ",
                                     (void *)r->stream);
}

/* Record the first library call on h's capture that failed with a
 * capture error.  A call that found the capture INVALIDATED did not
 * invalidate it: something outside the library did. */
static void record_failure(struct cucap_hier *h, const char *call, CUresult code)
{
    if (!h || !cucap_i_is_capture_error(code))
        return;
    session_lock(h);
    if (!h->first_failure_call[0]) {
        snprintf(h->first_failure_call, sizeof h->first_failure_call, "%s", call);
        h->first_failure_code = code;
        if (code == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
            describe_streams(h, h->first_failure_streams, sizeof h->first_failure_streams);
        else
            h->first_failure_streams[0] = '\0';
    }
    session_unlock(h);
}

void cucap_i_hier_capture_failed(struct cucap_hier *h, const char *call, CUresult code)
{
    record_failure(h, call, code);
}

CUresult cucap_i_fail_in_capture(struct cucap_hier *h, CUstream s, CUresult rc, const char *caller, const char *call,
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
    record_failure(h, caller, rc);
    return rc;
}

void cucap_i_hier_note_first_failure(struct cucap_hier *h, cucap_error **err)
{
    char call[128], streams[256], doing[640];
    CUresult code;

    if (!h)
        return;
    session_lock(h);
    snprintf(call, sizeof call, "%s", h->first_failure_call);
    snprintf(streams, sizeof streams, "%s", h->first_failure_streams);
    code = h->first_failure_code;
    session_unlock(h);
    if (!call[0]) {
        /* no library call failed first: something outside the library did it */
        if (err && *err && cucap_error_code(*err) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
            cucap_i_error_add_note(*err, "no libcucapture call on this capture failed before its end: a call made "
                                         "outside the library invalidated it, such as synchronizing one of its "
                                         "streams, a synchronous allocation or free (cuMemAlloc, cudaMalloc, "
                                         "cuMemFree) on the capturing thread in global or thread_local mode, or "
                                         "another thread's global-mode call such as a legacy-stream operation");
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

/* Under h->lock: r into h's entries, or out of them. */
static void link_locked(struct cucap_hier *h, struct cucap_registration *r)
{
    r->h = h;
    r->prev = NULL;
    r->next = h->streams;
    if (h->streams)
        h->streams->prev = r;
    h->streams = r;
    r->linked = 1;
}

static void unlink_locked(struct cucap_hier *h, struct cucap_registration *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        h->streams = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->linked = 0;
}

void cucap_i_capture_register_origin(struct cucap_registration *r, CUstream s, struct cucap_hier *h)
{
    r->stream = s;
    h->origin = s;
    h->captures++;
    /* h is new, or recycled: no other thread walks its entries before
     * the registry lists it, or before its capture runs again */
    link_locked(h, r);
    if (h->recycles) {
        /* a builder reset for every capture: its captures' locks are most
         * likely taken by the thread that begins them alone */
        cucap_i_owner_lock_give(&h->graph_lock, (uintptr_t)pthread_self());
        cucap_i_owner_lock_give(&h->lock, (uintptr_t)pthread_self());
        if (!h->in_registry)
            add_to_registry(h);
        atomic_store_explicit(&h->capture_over, 0, memory_order_release);
        return;
    }
    add_to_registry(h);
}

void cucap_i_capture_registry_end(struct cucap_hier *h)
{
    if (!h->recycles)
        cucap_i_capture_registry_remove(h);
}

static void add_to_registry(struct cucap_hier *h)
{
    pthread_mutex_lock(&registry_lock);
    h->registry_prev = NULL;
    h->registry_next = running;
    if (running)
        running->registry_prev = h;
    running = h;
    h->in_registry = 1;
    atomic_fetch_add_explicit(&registered, 1, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_capture_registry_remove(struct cucap_hier *h)
{
    if (!h || !h->in_registry)
        return;
    pthread_mutex_lock(&registry_lock);
    if (h->registry_prev)
        h->registry_prev->registry_next = h->registry_next;
    else
        running = h->registry_next;
    if (h->registry_next)
        h->registry_next->registry_prev = h->registry_prev;
    h->in_registry = 0;
    atomic_fetch_sub_explicit(&registered, 1, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_capture_unregister(struct cucap_registration *r)
{
    if (!r->linked)
        return;
    session_lock(r->h);
    unlink_locked(r->h, r);
    session_unlock(r->h);
}

void cucap_i_hier_split_and_unlock(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUevent e, int keep_event,
                                   struct cucap_registration *chain, size_t n)
{
    struct cucap_cache_item item = { ctx, dev, e, 1, 0 };
    struct cucap_registration *r, *next;
    size_t i;
    int over, kept = 0;

    session_lock(h);
    add_fork_refs_locked(h, (int)n);
    for (r = chain, i = 0; i < n && r; r = next, i++) {
        next = r->next;
        link_locked(h, r);
    }
    over = atomic_load_explicit(&h->capture_over, memory_order_relaxed);
    if (e && keep_event && !over)   /* with room for the forks' streams, which their join defers */
        kept = defer_locked(h, &item, n) == 0;
    session_unlock(h);
    if (e && keep_event && over)
        give_item(&item, "cucap_builder_split");
    else if (e && !kept)
        destroy_item(&item);
    cucap_i_hier_unlock(h);
}

int cucap_i_hier_forks_joined(struct cucap_hier *h, cuuint64_t id, const struct cucap_cache_item *items,
                              size_t n_items, struct cucap_registration *const *entries, size_t n)
{
    size_t i;
    int over;

    if (id)
        h->capture_id = id;
    session_lock(h);
    over = atomic_load_explicit(&h->capture_over, memory_order_relaxed);
    if (!over && h->deferred_count + n_items > h->deferred_cap &&
        grow_deferred(h, h->deferred_count + n_items) != 0) {
        session_unlock(h);
        return -1;
    }
    for (i = 0; i < n; i++)
        if (entries[i]->linked)
            unlink_locked(h, entries[i]);
    if (!over && n_items) {
        memcpy(h->deferred + h->deferred_count, items, n_items * sizeof *items);
        h->deferred_count += n_items;
    }
    add_fork_refs_locked(h, -(int)n);   /* the joiner's reference stays: never the last */
    session_unlock(h);
    if (over && n_items)   /* the capture is over already */
        cucap_i_cache_give_items(items, n_items, "cucap_builder_join");
    return 0;
}

/* The hierarchy of the running capture that s takes part in, referenced,
 * or NULL. */
static struct cucap_hier *capture_of_stream(CUstream s)
{
    struct cucap_hier *h, *found = NULL;
    struct cucap_registration *r;

    if (!s || atomic_load_explicit(&registered, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    for (h = running; h && !found; h = h->registry_next) {
        session_lock(h);
        for (r = atomic_load_explicit(&h->capture_over, memory_order_acquire) ? NULL : h->streams; r; r = r->next)
            if (r->stream == s) {
                found = h;
                cucap_i_hier_ref(h);
                break;
            }
        session_unlock(h);
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code)
{
    struct cucap_hier *h;

    if (!cucap_i_is_capture_error(code) || !(h = capture_of_stream(s)))
        return;
    record_failure(h, call, code);
    cucap_i_hier_unref(h);
}

struct cucap_hier *cucap_i_capture_lock_stream(CUstream s)
{
    struct cucap_hier *h = capture_of_stream(s);

    if (h)
        cucap_i_hier_lock(h);
    return h;
}

void cucap_i_capture_unlock_stream(struct cucap_hier *h)
{
    if (!h)
        return;
    cucap_i_hier_unlock(h);
    cucap_i_hier_unref(h);
}

/* An event recorded in h's capture: reused only once that capture is over,
 * so that no event is ever recorded in two captures that may both still run
 * (the driver crashes when a capture's end races a re-record of its event). */
void cucap_i_give_event(struct ctx_hold *c, struct cucap_hier *h, CUevent e)
{
    if (c->retained && h && cucap_i_hier_defer_event(h, c->ctx, c->dev, e) == 0)
        return;
    cucap_i_drv.cuEventDestroy(e);   /* legal during capture */
}
