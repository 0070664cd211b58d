/* What builder.c gives the split, join, conditional, embed, complete,
 * parameter-block and host-callback calls (split.c, join.c, conditional.c,
 * embed.c, builder-complete.c, builder-params.c, builder-callback.c),
 * cucap_release_cached (teardown.c), and what graph sets, which stand
 * above it, use: runs without capture (eager-run.c) and the block a
 * capture for an update takes (graph-set.c).  Internal. */
#ifndef CUCAPTURE_BUILDER_INTERNAL_H
#define CUCAPTURE_BUILDER_INTERNAL_H

#include "builder-object.h"
#include "cucapture.h"
#include "error.h"

struct cucap_direct_run;         /* capture.h */

/* Destroy the builders kept for the next cucap_builder_create
 * (cucap_release_cached). */
void cucap_i_builder_kept_drain(void);
/* Close as `caller` would ("closing ..." for the note): end a live
 * capture first, release the stream, CLOSED. */
/* cucap_builder_enqueue on behalf of caller; a failure of fn is the
 * capture's failure, named `what`. */
CUresult cucap_i_builder_enqueue_as(cucap_builder *b, cucap_enqueue_fn fn, void *user_data, const char *caller,
                                    const char *what, cucap_error **err);
CUresult cucap_i_builder_close_as(cucap_builder *b, const char *caller, const char *doing, cucap_error **err);
/* Close fork f (not closed yet), as cucap_i_builder_close_as closes a
 * fork: it leaves its capture (nothing to end), its stream goes back (to
 * wait for the capture's end when it is still in it), CLOSED. */
void cucap_i_fork_release(cucap_builder *f, const char *caller);
/* Begin a direct run on a NOT_STARTED PRIMARY builder: CAPTURING
 * without a capture (struct cucap_direct_run); its end ends nothing. */
CUresult cucap_i_builder_begin_direct(cucap_builder *b, struct cucap_direct_run *run, const char *caller,
                                      cucap_error **err);

/* The block a PRIMARY builder's next capture takes when it asks for one
 * of p's size, instead of a new one (its last capture's, or a graph set's
 * kept executable graph's, whose block it is); a reference on p.
 * kept_params gives it (a reference) for a block of size bytes, or NULL. */
void cucap_i_builder_offer_params(cucap_builder *b, struct cucap_params *p);
struct cucap_params *cucap_i_builder_kept_params(cucap_builder *b, size_t size);

/* Up to n of the streams that b (a PRIMARY builder of a retained
 * context) kept from its last capture's joined forks, for a split of b on
 * its own context: written to out; how many.  Idle streams in no capture,
 * as the cache gives them. */
size_t cucap_i_builder_take_spare_streams(cucap_builder *b, size_t n, CUstream *out);

/* A primary builder's kept forks: the forks of cucap_builder_split_kept,
 * which stay the builder's from one capture to the next with their
 * streams and context, as well as the caller's until it destroys them.
 * The builder's user calls these. */
/* Up to n of b's kept forks that may be split into b's capture: CLOSED,
 * not split in this capture already, still the caller's (those the caller
 * destroyed leave the set).  Written to out; how many.  Under the graph
 * lock of b's capture. */
size_t cucap_i_kept_take(cucap_builder *b, size_t n, cucap_builder **out);
/* A new kept fork of b: CLOSED, b's context, no stream yet; NULL when out
 * of memory. */
cucap_builder *cucap_i_kept_new(cucap_builder *b);
/* A split hands kept fork f out: the caller holds it from now on, until
 * it destroys it. */
void cucap_i_kept_handed_out(cucap_builder *f);
/* b lets go of its kept forks (b is closed, or kept for another create):
 * each is freed once the caller destroyed it too (one never handed out
 * at once, with its stream and context). */
void cucap_i_kept_let_go_all(cucap_builder *b, const char *caller);
/* The caller destroys kept fork f, which is closed: its stream goes back
 * (to the cache when in no capture, destroyed otherwise, which is legal
 * in a capture), its context reference goes, and f is freed once its
 * builder let go too. */
void cucap_i_kept_fork_destroy(cucap_builder *f, const char *caller);

/* Before a split_kept's graph lock, b's kept forks that an earlier
 * capture left unjoined closed; as_last_time: the first n kept forks as
 * the last split left them (closed by their join, with their stream and
 * b's context, still the caller's, b with its split event), in forks,
 * or 0 taking none. */
void cucap_i_kept_close_stale(cucap_builder *b, const char *caller);
int cucap_i_kept_as_last_time(cucap_builder *b, size_t n, cucap_builder **forks);

/* Driver calls on the streams of a running capture take its
 * graph lock (cucap_i_capture_lock): one thread at a time adds to a capture
 * graph, and no fork, body or join of one thread ever calls into a
 * capture that another thread's end is tearing down (the driver may
 * crash then).  lock returns whether the capture is still running;
 * unlock whatever it returned. */
int cucap_i_builder_lock(const cucap_builder *b);
void cucap_i_builder_unlock(const cucap_builder *b);
int cucap_i_builders_lock_pair(const cucap_builder *a, const cucap_builder *b);
void cucap_i_builders_unlock_pair(const cucap_builder *a, const cucap_builder *b);

#endif
