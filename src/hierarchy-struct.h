/* The fields of a graph hierarchy, shared by graph.c (the ownership tree:
 * root, boxes, graph lock, references) and capture.c (the capture session:
 * deferred streams and events, body records, the first failure, the
 * registry; the end of the session hands the root its graph).  No other
 * file includes this. */
#ifndef CUCAPTURE_HIERARCHY_STRUCT_H
#define CUCAPTURE_HIERARCHY_STRUCT_H

#include <pthread.h>
#include <stdatomic.h>

#include "hierarchy.h"
#include "internal.h"

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
    atomic_int refs;
    pthread_mutex_t lock;            /* guards the fields below but the graphs' use */
    pthread_mutex_t graph_lock;      /* see cucap_i_hier_lock */
    CUcontext ctx;
    /* the ownership tree (graph.c) */
    struct cucap_box root;
    atomic_int owned;                /* the capture's end returned the root */
    /* the capture session (capture.c) */
    cuuint64_t capture_id;           /* 0 until a join sees it; under the graph lock */
    atomic_int capture_over;         /* its capture ended: no stream of it captures any more */
    int body_capture;                /* the standalone capture of a conditional body */
    struct cucap_cache_item *deferred;   /* few_deferred, or on the heap when more */
    size_t deferred_count, deferred_cap;
    struct cucap_cache_item few_deferred[4];
    char first_failure_call[128];
    CUresult first_failure_code;
    char first_failure_streams[256];   /* for a call that found the capture invalidated */
    struct cucap_body_record *bodies;
    /* the registry (capture.c): the entries of the capture's streams, under
     * lock, and the hierarchy's place among the running captures, under
     * the registry's lock */
    struct cucap_registration *streams;
    struct cucap_hier *registry_prev, *registry_next;
    int in_registry;
};

/* capture.c: free what the session still holds (the hierarchy's last
 * reference is going; a capture that never ended may leave streams). */
void cucap_i_hier_release_session(struct cucap_hier *h);
/* capture.c: refuse to instantiate while a body failed or is still
 * capturing (the driver would run its graph empty or half-built). */
CUresult cucap_i_hier_check_bodies(struct cucap_hier *h, const char *caller, cucap_error **err);

#endif
