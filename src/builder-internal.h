/* The builder object, shared by builder.c and the files that serve it
 * (builder-memory.c, fork.c, fork-links.c, conditional.c, embed.c), which
 * call builder.c and never the other way round.  Internal. */
#ifndef CUCAPTURE_BUILDER_INTERNAL_H
#define CUCAPTURE_BUILDER_INTERNAL_H

#include <stdatomic.h>

#include "cucapture.h"
#include "context-hold.h"
#include "hierarchy.h"
#include "internal.h"

struct cucap_builder {
    /* what a capture loop touches, first */
    cucap_builder_kind kind;
    cucap_builder_state state;
    CUstream stream;
    struct ctx_hold *ctx;
    struct cucap_hier *h;            /* from begin (forks: their parent's) */
    struct cucap_hier *kept_h;       /* PRIMARY, after a reset: the last capture's hierarchy, for the next */
    int owns_stream;
    int cached_stream;               /* the stream comes from the stream cache */
    unsigned char join_mark;         /* set while a join checks it (fork.c) */
    int joined_in_capture;           /* a join saw its stream ACTIVE in h's capture */
    struct cucap_registration registration;    /* the stream's entry in the capture registry */
    /* forks split from this builder and still open, for
     * cucap_builder_join_forks; guarded by h's graph lock (fork-links.c) */
    cucap_builder *split_parent;
    size_t split_index;              /* its place in split_parent->forks */
    cucap_builder **forks;           /* NULL, few_forks, or on the heap when more */
    size_t fork_count, fork_cap;
    cucap_builder *few_forks[4];
    /* cucap_builder_split_kept (kept-forks.c): a PRIMARY builder's forks
     * kept from one capture to the next, each with its stream */
    cucap_builder **kept;            /* PRIMARY: its kept forks */
    size_t kept_count, kept_cap;
    unsigned long capture_serial;    /* PRIMARY: counts its captures */
    CUevent split_event;             /* PRIMARY of a retained context: its splits' event, kept from one
                                        capture to the next (one capture of it runs at a time) */
    int is_kept;                     /* FORKED: a kept fork, its builder's (and the caller's once handed out) */
    int handed_out;                  /* a kept fork: a split handed it to the caller */
    atomic_int holders;              /* a kept fork: its builder, and the caller once handed out */
    unsigned long kept_serial;       /* a kept fork: the capture of its builder it was last split in */
    struct builder_slab *slab;       /* allocated with the other forks of its split, or NULL */
    /* BODY only: the body graph of a conditional node in the parent's
     * hierarchy, which the body's standalone capture is attached to */
    struct cucap_hier *parent_h;
    struct cucap_box *body_box;
    struct cucap_body_record *record;
    int record_failed;               /* the last capture failed or could not be attached */
};

extern const char *const cucap_i_state_names[];   /* by cucap_builder_state */

/* builder.c */
/* Destroy the builders kept for the next cucap_builder_create (with
 * cucap_i_drain_kept). */
void cucap_i_builder_kept_drain(void);
CUresult cucap_i_builder_check_open(const cucap_builder *b, const char *caller, cucap_error **err);
CUresult cucap_i_builder_check_ended(const cucap_builder *b, const char *caller, cucap_error **err);
CUresult cucap_i_builder_no_graph(const char *caller, cucap_error **err);
/* Close as `caller` would ("closing ..." for the note): end a live
 * capture first, release the stream, CLOSED. */
CUresult cucap_i_builder_close_as(cucap_builder *b, const char *caller, const char *doing, cucap_error **err);

/* Driver calls on the streams of a running capture take its hierarchy's
 * graph lock (cucap_i_hier_lock): one thread at a time adds to a capture
 * graph, and no fork, body or join of one thread ever calls into a
 * capture that another thread's end is tearing down (the H200 crashes in
 * cuStreamWaitEvent then).  lock returns whether the capture is still
 * running; unlock whatever it returned. */
int cucap_i_capture_lock(const cucap_builder *b);
void cucap_i_capture_unlock(const cucap_builder *b);
int cucap_i_capture_lock_pair(const cucap_builder *a, const cucap_builder *b);
void cucap_i_capture_unlock_pair(const cucap_builder *a, const cucap_builder *b);


#endif
