/* A graph owner: a root graph and the graphs the driver owns below it,
 * reference-counted, destroyed once, never after being retired, with
 * the nodes its capture named and the records of its conditional bodies.
 * This file owns struct cucap_graph_owner. */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "free-list.h"
#include "graph-owner.h"
#include "node-names.h"

struct cucap_box {
    _Atomic(CUgraph) graph;          /* NULL once retired, and the root's until the owner takes it */
    int retired;                     /* the driver discarded it; under the short lock */
    struct cucap_box *parent;        /* NULL for the root */
    struct cucap_box *next;          /* the owner's list, parents before children */
};

/* A conditional body of one of its nodes, captured standalone. */
struct cucap_body_record {
    char node[96];                   /* "the IF node added by cucap_builder_if" */
    unsigned int index;
    enum cucap_body_status status;
    struct cucap_body_record *next;
};

struct cucap_graph_owner {
    pthread_mutex_t graph_lock;      /* recursive; see cucap_i_owner_lock */
    /* from here to the short lock zeroed for each new owner (the locks
     * stay made on the free list) */
    atomic_int refs;                 /* its capture, graph references, executable graphs that keep its names */
    atomic_int owned;                /* it took the root */
    CUcontext ctx;
    struct cucap_node_names *names;  /* the nodes its capture named, or NULL; under the graph lock */
    struct cucap_box root;
    struct cucap_body_record *bodies;
    pthread_mutex_t lock;            /* the short lock: the box list and the body records */
};

/* ---------------------------------------------------------------- life and references */

static void free_owner(void *owner)
{
    struct cucap_graph_owner *o = owner;

    pthread_mutex_destroy(&o->graph_lock);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

static struct cucap_free_list free_owners = CUCAP_FREE_LIST_FREEING(free_owner);

void cucap_i_owner_free_list_drain(void)
{
    cucap_i_free_list_drain(&free_owners);
}

struct cucap_graph_owner *cucap_i_owner_new(CUcontext ctx)
{
    struct cucap_graph_owner *o = cucap_i_free_list_take_own(&free_owners, CUCAP_PER_THREAD_OWNERS);
    pthread_mutexattr_t recursive;

    if (o) {
        memset(&o->refs, 0, offsetof(struct cucap_graph_owner, lock) - offsetof(struct cucap_graph_owner, refs));
    } else {
        if (!(o = cucap_i_aligned_calloc(sizeof *o)))
            return NULL;
        pthread_mutexattr_init(&recursive);
        pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&o->graph_lock, &recursive);
        pthread_mutexattr_destroy(&recursive);
        pthread_mutex_init(&o->lock, NULL);
    }
    atomic_init(&o->refs, 1);
    atomic_init(&o->owned, 0);
    atomic_init(&o->root.graph, NULL);
    o->ctx = ctx;
    return o;
}

void cucap_i_owner_take(struct cucap_graph_owner *o, CUgraph graph)
{
    atomic_store_explicit(&o->root.graph, graph, memory_order_release);
    atomic_store_explicit(&o->owned, 1, memory_order_release);
}

void cucap_i_owner_ref(struct cucap_graph_owner *o)
{
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

/* Its graphs destroyed and its records freed: an owner of no graph. */
static void clear_owner(struct cucap_graph_owner *o, const char *caller)
{
    CUgraph root = atomic_load_explicit(&o->root.graph, memory_order_acquire);
    CUresult rc;

    if (atomic_load_explicit(&o->owned, memory_order_acquire) && root &&
        (rc = cucap_i_drv.cuGraphDestroy(root)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuGraphDestroy failed while destroying the last capture's graph: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    while (o->root.next) {   /* the driver destroyed the graphs below the root with it */
        struct cucap_box *b = o->root.next;
        o->root.next = b->next;
        free(b);
    }
    while (o->bodies) {
        struct cucap_body_record *r = o->bodies;
        o->bodies = r->next;
        free(r);
    }
    (void)cucap_i_names_free(o->names);   /* a capture's list owns no data */
}

static void destroy_owner(struct cucap_graph_owner *o, const char *caller)
{
    clear_owner(o, caller);
    if (!cucap_i_free_list_give_own(&free_owners, CUCAP_PER_THREAD_OWNERS, o))
        free_owner(o);
}

int cucap_i_owner_start_over(struct cucap_graph_owner *o, const char *caller)
{
    CUcontext ctx = o->ctx;

    if (!cucap_i_owner_is_sole(o))
        return 0;
    clear_owner(o, caller);
    memset(&o->refs, 0, offsetof(struct cucap_graph_owner, lock) - offsetof(struct cucap_graph_owner, refs));
    atomic_init(&o->refs, 1);
    o->ctx = ctx;
    return 1;
}

/* The only reference left needs no atomic decrement: no thread can take
 * another from it. */
void cucap_i_owner_unref(struct cucap_graph_owner *o, const char *caller)
{
    if (o && (atomic_load_explicit(&o->refs, memory_order_acquire) == 1 ||
              atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1))
        destroy_owner(o, caller);
}

int cucap_i_owner_is_sole(struct cucap_graph_owner *o)
{
    return atomic_load_explicit(&o->refs, memory_order_acquire) == 1;
}

/* ---------------------------------------------------------------- the graph lock */

void cucap_i_owner_lock(struct cucap_graph_owner *o)
{
    pthread_mutex_lock(&o->graph_lock);
}

void cucap_i_owner_unlock(struct cucap_graph_owner *o)
{
    pthread_mutex_unlock(&o->graph_lock);
}

int cucap_i_owner_lock_unless_sole(struct cucap_graph_owner *o)
{
    if (cucap_i_owner_is_sole(o))
        return 0;
    cucap_i_owner_lock(o);
    return 1;
}

/* ---------------------------------------------------------------- what it holds */

CUcontext cucap_i_owner_context(const struct cucap_graph_owner *o)
{
    return o->ctx;
}

int cucap_i_owner_has_graph(struct cucap_graph_owner *o)
{
    return atomic_load_explicit(&o->owned, memory_order_acquire) && cucap_i_owner_root(o) != NULL;
}

struct cucap_node_names **cucap_i_owner_names(struct cucap_graph_owner *o)
{
    return &o->names;
}

/* ---------------------------------------------------------------- the ownership tree */

void cucap_i_owner_retire(struct cucap_graph_owner *o, struct cucap_box *box)
{
    struct cucap_box *b;

    pthread_mutex_lock(&o->lock);
    atomic_store_explicit(&box->graph, NULL, memory_order_release);
    box->retired = 1;
    /* parents come before children: one sweep retires every descendant */
    for (b = o->root.next; b; b = b->next)
        if (b->parent && b->parent->retired) {
            atomic_store_explicit(&b->graph, NULL, memory_order_release);
            b->retired = 1;
        }
    pthread_mutex_unlock(&o->lock);
}

struct cucap_box *cucap_i_owner_root_box(struct cucap_graph_owner *o)
{
    return &o->root;
}

CUgraph cucap_i_owner_root(struct cucap_graph_owner *o)
{
    return cucap_i_box_graph(&o->root);
}

struct cucap_box *cucap_i_owner_add_child(struct cucap_graph_owner *o, struct cucap_box *parent, CUgraph graph)
{
    struct cucap_box *box = calloc(1, sizeof *box), **tail;

    if (!box)
        return NULL;
    atomic_init(&box->graph, graph);
    box->parent = parent;
    pthread_mutex_lock(&o->lock);
    for (tail = &o->root.next; *tail; tail = &(*tail)->next)
        ;
    *tail = box;   /* after its parent, which is already listed */
    pthread_mutex_unlock(&o->lock);
    return box;
}

CUgraph cucap_i_box_graph(const struct cucap_box *box)
{
    return atomic_load_explicit(&((struct cucap_box *)box)->graph, memory_order_acquire);
}

/* ---------------------------------------------------------------- conditional bodies */

int cucap_i_owner_has_bodies(const struct cucap_graph_owner *o)
{
    return o->bodies != NULL;
}

struct cucap_body_record *cucap_i_owner_add_body(struct cucap_graph_owner *o, const char *node, unsigned int index)
{
    struct cucap_body_record *r = calloc(1, sizeof *r);

    if (!r)
        return NULL;
    snprintf(r->node, sizeof r->node, "%s", node);
    r->index = index;
    r->status = CUCAP_BODY_EMPTY;
    pthread_mutex_lock(&o->lock);
    r->next = o->bodies;
    o->bodies = r;
    pthread_mutex_unlock(&o->lock);
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

void cucap_i_owner_set_body(struct cucap_graph_owner *o, struct cucap_body_record *r, enum cucap_body_status status)
{
    pthread_mutex_lock(&o->lock);
    r->status = status;
    pthread_mutex_unlock(&o->lock);
}

CUresult cucap_i_owner_check_bodies(struct cucap_graph_owner *o, const char *caller, cucap_error **err)
{
    const struct cucap_body_record *r;
    char node[96];
    unsigned int index = 0;
    enum cucap_body_status status = CUCAP_BODY_EMPTY;

    pthread_mutex_lock(&o->lock);
    for (r = o->bodies; r; r = r->next)
        if (r->status == CUCAP_BODY_FAILED || r->status == CUCAP_BODY_CAPTURING) {
            snprintf(node, sizeof node, "%s", r->node);
            index = r->index;
            status = r->status;
            if (status == CUCAP_BODY_FAILED)
                break;
        }
    pthread_mutex_unlock(&o->lock);
    if (status == CUCAP_BODY_FAILED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s was invalidated (its capture failed); capture that body again "
                            "before completing", caller, index, node);
    if (status == CUCAP_BODY_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: body %u of %s is still capturing; end it before completing", caller, index, node);
    return CUDA_SUCCESS;
}
