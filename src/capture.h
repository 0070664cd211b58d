/* Captures (capture.c): a capture's state, references, deferred streams
 * and events and first failure, and the graph owner (graph-owner.h) it
 * gives its graph to at its end.  Internal.
 *
 * Locks of the library, and the order in which they are taken (a thread
 * holding one only ever takes those below it):
 *
 *   0. a graph set's lock (graph-set.c): its keys, its lists of graphs,
 *      the room set aside for the graphs being made, and every launch of
 *      them.  Not held while a capture function runs or a graph is
 *      instantiated or updated.
 *   1. a graph owner's graph lock (cucap_i_owner_lock, which a capture
 *      takes as cucap_i_capture_lock): every driver call on one of its
 *      graphs, and its capture's deferred streams and events
 *      (stream-cache.c) and the lists of its builders' open forks
 *      (builder-object.c).  Recursive.  Two of them (an embed of one capture
 *      into another) are taken in address order.  Not taken where the
 *      caller's reference is the capture's only one and the capture's
 *      the only one to its owner (a split of a primary with no fork
 *      open, an end after the join, a complete): no other thread can
 *      reach the capture then.
 *   2. a parameter block's lock (params.c): one launch at a time.
 *   3. a short lock, never two at once: a graph owner's (graph-owner.c:
 *      its box tree and body records) or a capture's (capture.c: its
 *      first-failure record).
 *   4. the registry lock (capture-registry.c): the streams of running
 *      captures past its quick slots, and every lookup (an entry taken
 *      out of a quick slot while a lookup runs waits for it).
 *   5. the locks of process-wide tables, each alone, never two at once:
 *      the stream cache (stream-cache.c), the writers of the shared
 *      context holds (context-hold.c), the device-pool table (pool.c),
 *      a stripe of the live pointers (live-pointers.c), the warning
 *      handler (error.c).
 *
 * Locks 3 to 5 guard a few instructions each and never span a driver
 * call, a callback or a warning.  Every lock is a pthread mutex.  What is
 * not under a lock is atomic: the reference counts of captures, graph
 * owners, graphs, contexts and slabs, the slots of the free lists (free-list.c,
 * also the kept builders of builder.c), the registry's quick slots, the shared holds' lookups and
 * the device pools' (filled once, emptied only by cucap_release_cached,
 * which runs alone).  The state of the whole process is listed in README,
 * "Process-wide state". */
#ifndef CUCAPTURE_CAPTURE_H
#define CUCAPTURE_CAPTURE_H

#include <cuda.h>

#include "compiler.h"
#include "cucapture.h"

struct cucap_capture;
struct cucap_graph_owner;        /* graph-owner.h */
struct cucap_deferral;           /* stream-cache.h */
struct cucap_direct_run;         /* below */

/* A capture about to begin on stream origin in context ctx, with a new
 * graph owner that takes the capture's graph once its end returns it
 * (cucap_i_capture_over).  One reference, or NULL when out of memory. */
struct cucap_capture *cucap_i_capture_new(CUcontext ctx, CUstream origin);
/* The same for a direct run (see struct cucap_direct_run). */
struct cucap_capture *cucap_i_capture_new_direct(CUcontext ctx, CUstream origin, struct cucap_direct_run *run);
void cucap_i_capture_ref(struct cucap_capture *h);
void cucap_i_capture_ref_by(struct cucap_capture *h, size_t n);
/* The last reference destroys the streams and events of a capture that
 * never ended and drops the capture's reference to its graph owner; a
 * failure goes to the warning handler as caller's. */
void cucap_i_capture_unref(struct cucap_capture *h, const char *caller);
/* When the caller's reference is the only one to h (not a direct run's)
 * and h's the only one to its graph owner: what h's last unref would
 * destroy destroyed (its graph, its streams and events, its parameter
 * block's reference), and h made a capture about to begin on the same
 * stream in the same context, as cucap_i_capture_new makes one, still
 * the caller's (1).  0, changing nothing, otherwise: the caller then
 * unrefs it. */
int cucap_i_capture_start_over(struct cucap_capture *h, const char *caller);
/* The graph owner the capture gives its graph to: a reference of the
 * capture's, as long as the caller holds one to the capture. */
struct cucap_graph_owner *cucap_i_capture_owner(const struct cucap_capture *h);
/* The parameter block its work reads (params.h), or NULL; under the
 * graph lock until the capture is over.  set takes the caller's
 * reference and drops the one to the block it replaces. */
struct cucap_params;
struct cucap_params *cucap_i_capture_params(const struct cucap_capture *h);
void cucap_i_capture_set_params(struct cucap_capture *h, struct cucap_params *p, const char *caller);
/* n references at once that are not the last (a join's forks'). */
void cucap_i_capture_unref_by(struct cucap_capture *h, size_t n);
/* Free the captures and graph owners kept for reuse (cucap_release_cached). */
void cucap_i_capture_free_list_drain(void);

/* The graph lock of its graph owner (cucap_i_owner_lock). */
void cucap_i_capture_lock(struct cucap_capture *h);
void cucap_i_capture_unlock(struct cucap_capture *h);
/* Lock, then whether the capture still runs (it is not over). */
int cucap_i_capture_lock_running(struct cucap_capture *h);
/* The same, unless sole (below): *locked says whether it locked. */
int cucap_i_capture_lock_running_unless_sole(struct cucap_capture *h, int *locked);
/* Lock, unless the caller's reference is the only one to the capture
 * and the capture's the only one to its owner (then no other thread can
 * reach the graphs): whether it locked. */
int cucap_i_capture_lock_unless_sole(struct cucap_capture *h);

/* The driver's id of the capture, 0 until a join that queried the stream
 * which began it, ACTIVE, told the capture; under the graph lock. */
void cucap_i_capture_learn_id(struct cucap_capture *h, cuuint64_t id);
cuuint64_t cucap_i_capture_id(const struct cucap_capture *h);
/* Whether the capture is over (its end returned): no stream is in it any more. */
int cucap_i_capture_is_over(const struct cucap_capture *h);
/* The stream that began its capture (it names the capture in messages). */
CUstream cucap_i_capture_origin(const struct cucap_capture *h);
/* The mode its capture began in (for the notes of its end). */
void cucap_i_capture_set_mode(struct cucap_capture *h, CUstreamCaptureMode mode);
CUcontext cucap_i_capture_context(const struct cucap_capture *h);
/* Whether its end gave its owner a graph that is not retired. */
int cucap_i_capture_has_graph(struct cucap_capture *h);
/* Where the streams and events of its capture wait for its end. */
struct cucap_deferral *cucap_i_capture_deferral(struct cucap_capture *h);
/* A stream of c that a builder used, given back: to h's direct run when
 * h is one; to the cache when the driver says it is in no capture; to
 * wait for the end of h's capture when it is still in that one;
 * destroyed otherwise (in another capture, which is legal, or c has no
 * cache), so that no later builder is ever handed a stream inside a
 * capture it is not part of.  h NULL: in no capture of the library's
 * that may still run.  (A join closes its forks itself: join.c.) */
struct ctx_hold;
void cucap_i_give_back_stream(struct ctx_hold *c, CUstream s, struct cucap_capture *h, const char *caller);
/* The capture is over; `ended`, when not NULL, is the graph its end
 * returned, which its graph owner owns from now on (the caller holds the
 * graph lock).  The streams and events deferred to the end go back to
 * the cache. */
void cucap_i_capture_over(struct cucap_capture *h, CUgraph ended);

/* A direct run: a capture that does not capture, whose builders do
 * their work on their streams at once (forks wait on events, pool
 * allocations are stream-ordered; no graph, so no conditional node and
 * no embedded graph).  What a capture takes from the library its owner
 * supplies through the operations below, which is the whole seam between
 * the builders and whoever runs work directly (a graph set's step run
 * without capturing, for one).  Owned by its owner; given to the builder at its begin
 * (cucap_i_builder_begin_direct). */
struct cucap_direct_run {
    /* The parameter block of size bytes for work on stream s of ctx
     * (device dev), made on the first cucap_builder_params. */
    CUresult (*params)(struct cucap_direct_run *run, CUcontext ctx, CUdevice dev, CUstream s, size_t size,
                       CUdeviceptr *block, const char *caller, cucap_error **err);
    /* A stream of ctx for a fork that the owner kept from an earlier run
     * (give_stream), or NULL: a new fork's work may queue behind that
     * run's, which the run's origin follows already. */
    CUstream (*take_stream)(struct cucap_direct_run *run, CUcontext ctx);
    /* Stream s of c, which the run's builders used (a fork's, or a
     * builder's own), handed back: to the cache once its work is done,
     * else kept behind the run's work for a later run, or destroyed.  A
     * stream behind work in flight never goes back to the cache
     * (stream-cache.h), and a new one each run would make the driver's
     * cuStreamCreate wait once enough are left behind it (measured:
     * doc/driver-facts.md). */
    void (*give_stream)(struct cucap_direct_run *run, struct ctx_hold *c, CUstream s, const char *caller);
};
struct cucap_direct_run *cucap_i_capture_direct(const struct cucap_capture *h);   /* NULL: a real capture */
/* Up to n streams of ctx that h's direct run kept from earlier runs (none
 * for a capture): how many were written to out. */
size_t cucap_i_direct_take_streams(const struct cucap_capture *h, CUcontext ctx, size_t n, CUstream *out);
/* Stream s of c handed back to h's direct run (give_stream above). */
void cucap_i_direct_give_stream(const struct cucap_capture *h, struct ctx_hold *c, CUstream s, const char *caller);
/* A conditional body's own standalone capture: no conditional node
 * may be captured into it (a child graph cannot hold one). */
void cucap_i_capture_mark_body(struct cucap_capture *h);
int cucap_i_capture_is_body(const struct cucap_capture *h);

/* Record a capture error of call on h's capture: the first one is kept
 * for the note of its end (cucap_i_capture_note_first_failure), with the
 * capture's streams when the call found it invalidated; other codes and
 * h NULL are ignored. */
void cucap_i_capture_failed(struct cucap_capture *h, const char *call, CUresult code) CUCAP_COLD;
void cucap_i_capture_note_first_failure(struct cucap_capture *h, cucap_error **err);
/* A driver call on stream s of h's capture failed with rc: report it in
 * *err, as STREAM_CAPTURE_INVALIDATED (the driver's code in the message)
 * when the capture is found invalidated, and record it on h.  consequence,
 * if not NULL, ends the message.  Returns the code reported. */
CUresult cucap_i_fail_in_capture(struct cucap_capture *h, CUstream s, CUresult rc, const char *caller, const char *call,
                                 const char *consequence, cucap_error **err) CUCAP_COLD;
/* The same as cucap_i_capture_failed for a call that knows only the
 * stream: the capture it takes part in, if any. */
void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code) CUCAP_COLD;
/* For a call that only knows a stream: the graph lock of the capture the
 * stream takes part in, referenced (NULL, locking nothing, for a stream
 * the library did not register). */
struct cucap_capture *cucap_i_capture_lock_stream(CUstream s);
void cucap_i_capture_unlock_stream(struct cucap_capture *h, const char *caller);
/* Whether a code is one of the driver's capture errors. */
int cucap_i_is_capture_error(CUresult code);

#endif
