/* Graph owners (graph-owner.c): a graph and the graphs the driver owns
 * below it (conditional bodies), reference-counted, destroyed once,
 * never after being retired; with the nodes a capture named in it, the
 * records of its conditional bodies, and the graph lock.  A capture
 * makes one and gives it its graph at its end (capture.h); an adopted or
 * cloned graph is a graph owner alone.  The parameter block its nodes
 * read is held by each reference to the graph that may instantiate it
 * (the capture, graph references, executable graphs).  Internal. */
#ifndef CUCAPTURE_GRAPH_OWNER_H
#define CUCAPTURE_GRAPH_OWNER_H

#include <cuda.h>

#include "cucapture.h"

struct cucap_graph_owner;
struct cucap_box;
struct cucap_node_names;         /* node-names.h */

/* An owner of no graph yet, for graphs of context ctx.  One reference,
 * or NULL when out of memory. */
struct cucap_graph_owner *cucap_i_owner_new(CUcontext ctx);
/* o owns graph from now on (a capture's end returned it, or a program
 * gave it). */
void cucap_i_owner_take(struct cucap_graph_owner *o, CUgraph graph);
void cucap_i_owner_ref(struct cucap_graph_owner *o);
/* The last reference destroys the graph it owns and is not retired; a
 * failure goes to the warning handler as caller's. */
void cucap_i_owner_unref(struct cucap_graph_owner *o, const char *caller);
/* Whether the caller's reference is the only one. */
int cucap_i_owner_is_sole(struct cucap_graph_owner *o);
/* When the caller's reference is the only one: o's graphs destroyed as
 * its last unref destroys them, and o made an owner of no graph again,
 * still the caller's (1); 0, changing nothing, otherwise. */
int cucap_i_owner_start_over(struct cucap_graph_owner *o, const char *caller);
/* Free the owners kept for reuse (cucap_release_cached). */
void cucap_i_owner_free_list_drain(void);

/* The graph lock.  Every driver call that touches one of its graphs -
 * the capture graph through any stream of the capture that makes it,
 * that capture's end until its outcome is settled, attaching a body,
 * instantiate, update, dot print - runs under it: the driver does not
 * synchronize a graph internally ("Graph object thread safety" in the
 * driver API manual), and nothing may use a graph between the driver
 * discarding it and the owner retiring it.  The thread that holds it may
 * take it again (a cucap_builder_enqueue callback calling back into the
 * library). */
void cucap_i_owner_lock(struct cucap_graph_owner *o);
void cucap_i_owner_unlock(struct cucap_graph_owner *o);
/* Lock, unless the caller's reference is the only one (then no other
 * thread can reach the graphs): whether it locked. */
int cucap_i_owner_lock_unless_sole(struct cucap_graph_owner *o);

CUcontext cucap_i_owner_context(const struct cucap_graph_owner *o);
/* Whether it owns a graph that is not retired. */
int cucap_i_owner_has_graph(struct cucap_graph_owner *o);

/* The list of the nodes its capture named (node-names.h), NULL until
 * one is named; under the graph lock. */
struct cucap_node_names **cucap_i_owner_names(struct cucap_graph_owner *o);

/* The ownership tree.  The driver discarded a graph: retire its box and
 * every box below it, so nothing reads or destroys them again.  Does not
 * allocate, report or call the driver. */
void cucap_i_owner_retire(struct cucap_graph_owner *o, struct cucap_box *box);
struct cucap_box *cucap_i_owner_root_box(struct cucap_graph_owner *o);
CUgraph cucap_i_owner_root(struct cucap_graph_owner *o);   /* NULL until taken, and once retired */
/* A box for a graph the driver owns below parent (a conditional body). */
struct cucap_box *cucap_i_owner_add_child(struct cucap_graph_owner *o, struct cucap_box *parent, CUgraph graph);
CUgraph cucap_i_box_graph(const struct cucap_box *box);   /* NULL once retired */

/* Conditional bodies of its nodes: instantiation is refused while one of
 * them failed or is still capturing. */
enum cucap_body_status { CUCAP_BODY_EMPTY, CUCAP_BODY_CAPTURING, CUCAP_BODY_ATTACHED, CUCAP_BODY_FAILED };
struct cucap_body_record;
struct cucap_body_record *cucap_i_owner_add_body(struct cucap_graph_owner *o, const char *node, unsigned int index);
unsigned int cucap_i_body_index(const struct cucap_body_record *r);
const char *cucap_i_body_node(const struct cucap_body_record *r);   /* "the IF node added by ..." */
void cucap_i_owner_set_body(struct cucap_graph_owner *o, struct cucap_body_record *r, enum cucap_body_status status);
/* Whether conditional bodies were captured for its nodes. */
int cucap_i_owner_has_bodies(const struct cucap_graph_owner *o);
/* Refuse to instantiate while a body failed or is still capturing (the
 * driver would run its graph empty or half-built). */
CUresult cucap_i_owner_check_bodies(struct cucap_graph_owner *o, const char *caller, cucap_error **err);

#endif
