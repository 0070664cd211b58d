/* Hierarchies (hierarchy.c): the graphs of one capture (one root CUgraph
 * and the graphs the driver owns below it, reference-counted, destroyed
 * once, never after being retired) and the capture session that makes
 * them.  Internal. */
#ifndef CUCAPTURE_HIERARCHY_H
#define CUCAPTURE_HIERARCHY_H

#include <cuda.h>

#include "compiler.h"
#include "cucapture.h"

struct cucap_hier;
struct cucap_box;
struct cucap_cache_item;         /* streams.h */
struct cucap_registration;

/* A hierarchy for a capture about to begin in context ctx: its root is
 * the capture's graph, known and owned once the capture's end returns it
 * (cucap_i_hier_capture_over).  One reference. */
struct cucap_hier *cucap_i_hier_new_capture(CUcontext ctx);
/* A builder's hierarchy whose capture is over, made ready for the
 * builder's next capture (cucap_builder_reset) when the builder holds its
 * only reference: its graph destroyed (a failure goes to the warning
 * handler as caller's), its records cleared; it keeps its locks, its
 * place in the registry and the streams and events its captures gave
 * back (a bounded number), for the next splits.  1 when done, 0 when it
 * cannot be (the caller then lets it go).  What it buys (bench/RESULTS.md,
 * "What each mechanism buys"): with a new hierarchy every capture, the
 * update loop of one builder reset ran 1.077 times the hand-written loop
 * where it runs 1.040, with kept forks 1.055 where it runs 1.024 (K = 2,
 * H200, three runs each). */
int cucap_i_hier_recycle(struct cucap_hier *h, const char *caller);
/* Under the graph lock, a split of a recycled hierarchy's capture: up to
 * n streams and, when *event is NULL, an event of context ctx that its
 * earlier captures gave back.  Returns how many streams. */
size_t cucap_i_hier_take_ready(struct cucap_hier *h, CUcontext ctx, size_t n, CUstream *streams, CUevent *event);
/* Free the hierarchies kept for reuse (with cucap_i_drain_kept). */
void cucap_i_hier_spares_drain(void);
/* The driver's id of the capture, 0 until a join that queried the stream
 * which began it, ACTIVE, told the hierarchy; under the graph lock. */
void cucap_i_hier_learn_capture_id(struct cucap_hier *h, cuuint64_t id);
cuuint64_t cucap_i_hier_capture_id(const struct cucap_hier *h);
/* Whether the capture is over (its end returned): no stream is in it any more. */
int cucap_i_hier_is_capture_over(const struct cucap_hier *h);
/* Refuse to instantiate while a body failed or is still capturing (the
 * driver would run its graph empty or half-built); under the graph lock. */
CUresult cucap_i_hier_check_bodies(struct cucap_hier *h, const char *caller, cucap_error **err);
/* The stream that began its capture (it names the capture in messages). */
CUstream cucap_i_hier_origin(const struct cucap_hier *h);
/* Its captures begun so far: the number of the one running. */
unsigned long cucap_i_hier_capture_number(const struct cucap_hier *h);
/* The parameter block its captures' work reads (params.h), or NULL;
 * under the graph lock.  set takes the caller's reference and drops the
 * one to the block it replaces. */
struct cucap_params;
struct cucap_params *cucap_i_hier_params(const struct cucap_hier *h);
void cucap_i_hier_set_params(struct cucap_hier *h, struct cucap_params *p, const char *caller);
/* The context its capture runs in. */
CUcontext cucap_i_hier_context(const struct cucap_hier *h);
/* Whether conditional bodies were captured for its nodes (under the graph lock). */
int cucap_i_hier_has_bodies(const struct cucap_hier *h);
/* Whether the hierarchy owns a graph (its capture ended with one). */
int cucap_i_hier_is_owned(struct cucap_hier *h);

/* Every driver call that touches a graph of a hierarchy - the capture
 * graph through any stream of the capture, the root's end until its
 * outcome is settled, attaching a body, instantiate, dot print - runs
 * under the hierarchy's graph lock.  The driver does not synchronize a
 * graph internally ("Graph object thread safety" in the driver API
 * manual: no two calls on one graph are safe at once, instantiate
 * included), and nothing may use a graph between the driver discarding
 * it and the hierarchy retiring it.  The lock is exclusive and may be
 * taken again by the thread that holds it (a cucap_builder_enqueue
 * callback calling back into the library). */
void cucap_i_hier_lock(struct cucap_hier *h);
void cucap_i_hier_unlock(struct cucap_hier *h);
/* How the graph lock is taken now: 1 when a thread (the one that began a
 * reset builder's capture) takes it without an atomic operation, 0 when
 * everybody takes the sleep lock, -1 when another thread revoked the
 * owner's way (owner-lock.h). */
int cucap_i_hier_lock_way(const struct cucap_hier *h);
/* The same of the lock of its session's short sections. */
int cucap_i_hier_session_lock_way(const struct cucap_hier *h);
/* Lock, unless the caller's reference is the only one (then no other
 * thread can reach the graphs): whether it locked. */
int cucap_i_hier_lock_unless_sole(struct cucap_hier *h);
/* Lock, then whether the capture still runs (it is not over). */
int cucap_i_hier_lock_running(struct cucap_hier *h);
void cucap_i_hier_ref(struct cucap_hier *h);
/* The last reference destroys the root graph when it is owned and live;
 * a failure goes to the warning handler. */
void cucap_i_hier_unref(struct cucap_hier *h);
/* A fork's reference, which its split took (cucap_i_hier_split_and_unlock)
 * and a join did not release, let go of. */
void cucap_i_hier_fork_unref(struct cucap_hier *h);

/* The driver discarded a graph: retire its box and every box below it, so
 * nothing reads or destroys them again.  Does not allocate, report or call
 * the driver. */
void cucap_i_hier_retire(struct cucap_hier *h, struct cucap_box *box);
struct cucap_box *cucap_i_hier_root_box(struct cucap_hier *h);
CUgraph cucap_i_hier_root(struct cucap_hier *h);   /* NULL once retired */
/* The same for a caller that holds h's graph lock, under which the root
 * is set and retired: no other lock needed. */
CUgraph cucap_i_hier_root_locked(const struct cucap_hier *h);

/* A box for a graph the driver owns below parent (a conditional body). */
struct cucap_box *cucap_i_hier_add_child(struct cucap_hier *h, struct cucap_box *parent, CUgraph graph);
CUgraph cucap_i_box_graph(struct cucap_hier *h, const struct cucap_box *box);   /* NULL once retired */

/* Conditional bodies of nodes in this hierarchy: instantiation is refused
 * while one of them failed or is still capturing. */
enum cucap_body_status { CUCAP_BODY_EMPTY, CUCAP_BODY_CAPTURING, CUCAP_BODY_ATTACHED, CUCAP_BODY_FAILED };
struct cucap_body_record;
struct cucap_body_record *cucap_i_hier_add_body(struct cucap_hier *h, const char *node, unsigned int index);
unsigned int cucap_i_body_index(const struct cucap_body_record *r);
const char *cucap_i_body_node(const struct cucap_body_record *r);   /* "the IF node added by ..." */
void cucap_i_hier_set_body(struct cucap_hier *h, struct cucap_body_record *r, enum cucap_body_status status);

/* The hierarchy of a body's own standalone capture: no conditional node
 * may be captured into it (a child graph cannot hold one). */
void cucap_i_hier_mark_body_capture(struct cucap_hier *h);
int cucap_i_hier_is_body_capture(const struct cucap_hier *h);

/* The first library call that failed with a capture error while the
 * hierarchy's capture ran, kept for the note of a later end. */
void cucap_i_hier_capture_failed(struct cucap_hier *h, const char *call, CUresult code);
/* A driver call on stream s of h's capture failed with rc: report it in
 * *err, as STREAM_CAPTURE_INVALIDATED (the driver's code in the message)
 * when the capture is found invalidated, and record it on h.  consequence,
 * if not NULL, ends the message.  Returns the code reported. */
CUresult cucap_i_fail_in_capture(struct cucap_hier *h, CUstream s, CUresult rc, const char *caller, const char *call,
                                 const char *consequence, cucap_error **err);
void cucap_i_hier_note_first_failure(struct cucap_hier *h, cucap_error **err);

/* A stream or event that took part in the hierarchy's capture waits here
 * until the capture is over (cucap_i_hier_capture_over), then goes back to
 * the stream cache; after the end it goes back at once.  So no stream or
 * event is ever handed to a second capture while the first may still touch
 * it.  -1 when out of memory (the caller then destroys it). */
/* joined: the stream's fork joined back into h's capture. */
int cucap_i_hier_defer_stream(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUstream s, int joined);
int cucap_i_hier_defer_event(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUevent e);
/* Under the graph lock, h's capture running: up to n streams of ctx whose
 * forks joined back into this capture, taken from those deferred to its
 * end, for another split of the same capture.  Each is still in the
 * capture, so its next work follows its last, as a hand-written fork
 * stream's does: the graph gets the same edges as hand-written code
 * (which the H200 runs faster than the fewest edges; bench/RESULTS.md,
 * "The decode step").  Returns how many. */
size_t cucap_i_hier_take_joined(struct cucap_hier *h, CUcontext ctx, size_t n, CUstream *streams);
/* An event of c recorded in h's capture (h NULL: in none that may still
 * run) given back: to the cache once that capture is over, destroyed when
 * c is not a cached context or the hierarchy cannot keep it. */
struct ctx_hold;
void cucap_i_give_event(struct ctx_hold *c, struct cucap_hier *h, CUevent e);
/* The capture is over; `ended`, when not NULL, is the graph its end
 * returned, which the hierarchy owns from now on (the caller holds the
 * graph lock then), and `origin`, when not NULL, the ending builder's
 * registry entry, forgotten (in the same step).  The streams and events
 * deferred to the end go back to the cache, or, when the hierarchy is
 * recycled and the capture made a graph, stay for its next capture. */
void cucap_i_hier_capture_over(struct cucap_hier *h, CUgraph ended, struct cucap_registration *origin);

/* Streams taking part in a capture, so that calls that only know a stream
 * (cucap_pool_alloc, cucap_pool_free) find its capture.  The registry
 * lists the hierarchies whose capture runs; each keeps the entries of its
 * streams under its own lock, so that a split or a join registers or
 * forgets its forks in the step it takes on the hierarchy anyway.  Only
 * the thread using an entry's builder links or unlinks the entry. */
struct cucap_registration {         /* kept in the registering builder */
    CUstream stream;
    struct cucap_hier *h;
    struct cucap_registration *prev, *next;
    int linked;
};
/* begin: the origin's entry, and its new hierarchy into the registry (a
 * recycled one: its capture running again) */
void cucap_i_capture_register_origin(struct cucap_registration *r, CUstream s, struct cucap_hier *h);
/* An entry out of its hierarchy; one not linked is fine. */
void cucap_i_capture_unregister(struct cucap_registration *r);
/* The hierarchy out of the registry (its capture is over, or its origin
 * is let go); one not there is fine.  Only its origin's user calls it. */
void cucap_i_capture_registry_remove(struct cucap_hier *h);
/* The capture is over: out of the registry, unless the hierarchy is
 * recycled (a lookup passes over a capture that is over). */
void cucap_i_capture_registry_end(struct cucap_hier *h);
/* A split's last step on h, whose graph lock the caller holds: n more
 * references to h (its forks'), their entries (chained through next,
 * each with its stream) registered, the split's event e deferred to the
 * capture's end with room for the forks' streams when it can be kept (a
 * context the library retained), destroyed otherwise (legal in a
 * capture), or nothing when e is NULL (the builder keeps it), and the
 * graph lock released. */
void cucap_i_hier_split_and_unlock(struct cucap_hier *h, CUcontext ctx, CUdevice dev, CUevent e, int keep_event,
                                   struct cucap_registration *chain, size_t n);
/* A one-step join's last step on h, whose graph lock the caller holds:
 * the capture's id learned (when id is not 0), the n joined forks'
 * entries forgotten and their references to h dropped, and the n_items
 * streams of those that give theirs back deferred to the capture's end.
 * -1, changing nothing but the id, when out of memory. */
int cucap_i_hier_forks_joined(struct cucap_hier *h, cuuint64_t id, const struct cucap_cache_item *items,
                              size_t n_items, struct cucap_registration *const *entries, size_t n);
void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code);
/* For a call that only knows a stream: the graph lock of the capture the
 * stream takes part in, referenced (NULL, locking nothing, for a stream
 * the library did not register). */
struct cucap_hier *cucap_i_capture_lock_stream(CUstream s);
void cucap_i_capture_unlock_stream(struct cucap_hier *h);

/* Whether a code is one of the driver's capture errors. */
int cucap_i_is_capture_error(CUresult code);

#endif
