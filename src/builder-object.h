/* The builder object (builder-object.c): one struct for the three kinds
 * (primary, fork, conditional body), its memory, what other calls read of
 * it, and the checks of its state that every builder call makes.
 * builder.c runs its life; only builder-object.c and builder.c read and
 * write its fields (test/check-builder-fields.sh); the split, join,
 * conditional, embed, parameter-block, complete and update calls go
 * through the functions below and builder-internal.h's.
 * Internal. */
#ifndef CUCAPTURE_BUILDER_OBJECT_H
#define CUCAPTURE_BUILDER_OBJECT_H

#include <stdatomic.h>
#include <stddef.h>

#include "capture-registry.h"
#include "context-hold.h"
#include "cucapture.h"

struct cucap_capture;
struct cucap_box;
struct cucap_body_record;
struct cucap_params;
struct builder_slab;

/* test/check-builder-fields.sh compiles src/ without the struct: the
 * files that then fail are the ones that touch its fields. */
#ifndef CUCAP_BUILDER_OPAQUE
struct cucap_builder {
    /* every kind; a fork's part, which a slab zeroes for each fork it
     * hands out: what a capture loop touches first */
    cucap_builder_kind kind;
    cucap_builder_state state;
    CUstream stream;
    struct ctx_hold *ctx;
    struct cucap_capture *h;            /* from begin (forks: their parent's) */
    int owns_stream;
    int cached_stream;               /* the stream comes from the stream cache */
    unsigned char join_mark;         /* set while a join checks it (join.c) */
    int is_kept;                     /* FORKED: a kept fork, its builder's (and the caller's once handed out) */
    int handed_out;                  /* a kept fork: a split handed it to the caller */
    atomic_int holders;              /* a kept fork: its builder, and the caller once handed out */
    unsigned long kept_serial;       /* a kept fork: the capture of its builder it was last split in */
    struct cucap_registration registration;    /* the stream's entry in the capture registry */
    /* forks split from this builder and still open, for
     * cucap_builder_join_forks; guarded by h's graph lock (builder-object.c) */
    cucap_builder *split_parent;
    size_t split_index;              /* its place in split_parent->forks */
    struct builder_slab *slab;       /* allocated with the other forks of its split, or NULL */
    cucap_builder **forks;           /* NULL, few_forks, or on the heap when more */
    size_t fork_count, fork_cap;
    cucap_builder *few_forks[4];
    struct cucap_capture *parent_h;  /* BODY: the capture whose graph owner its capture is attached to */
    /* PRIMARY and BODY only: never written in a fork, so zero in a
     * slab's builders from the slab's making on (CUCAP_BUILDER_FORK_PART) */
    unsigned long capture_serial;    /* PRIMARY: counts its captures */
    struct cucap_capture *spare_h;   /* PRIMARY: its last capture, made ready to begin again once it was
                                        the builder's alone (start_over), or NULL */
    CUevent split_event;             /* PRIMARY of a retained context: its splits' event, kept from one
                                        capture to the next (one capture of it runs at a time) */
    size_t spare_count;
    CUstream spare_streams[2];       /* PRIMARY of a retained context: streams of its last capture's joined
                                        forks, for its next split (builder.c) */
    struct cucap_params *params;     /* PRIMARY: its last capture's parameter block, for the next capture
                                        that asks for one of that size */
    cucap_builder **kept;            /* PRIMARY: its kept forks (cucap_builder_split_kept), each with its
                                        stream, kept from one capture to the next */
    size_t kept_count, kept_cap;
    /* BODY only: the body graph of a conditional node in the parent's
     * capture */
    struct cucap_box *body_box;
    struct cucap_body_record *record;
    int record_failed;               /* the last capture failed or could not be attached */
};
/* The bytes of a fork's part. */
#define CUCAP_BUILDER_FORK_PART offsetof(struct cucap_builder, capture_serial)
#endif

extern const char *const cucap_i_state_names[];   /* by cucap_builder_state */

/* b's own state (a fork's does not follow its primary's end: see
 * cucap_builder_get_state), its capture (NULL before
 * begin), its context hold. */
cucap_builder_state cucap_i_builder_state(const cucap_builder *b);
struct cucap_capture *cucap_i_builder_capture(const cucap_builder *b);
struct ctx_hold *cucap_i_builder_ctx(const cucap_builder *b);
/* What a join reads of a builder, in one call: its kind, its own state,
 * its capture, its context hold and stream. */
struct cucap_builder_facts {
    cucap_builder_kind kind;
    cucap_builder_state state;
    struct cucap_capture *h;
    struct ctx_hold *ctx;
    CUstream stream;
};
void cucap_i_builder_facts(const cucap_builder *b, struct cucap_builder_facts *out);
/* Its stream, also once closed (cucap_builder_stream says NULL then); its
 * entry in the capture registry. */
CUstream cucap_i_builder_stream(const cucap_builder *b);
struct cucap_registration *cucap_i_builder_registration(cucap_builder *b);
/* A join's mark (join.c's check for a builder given twice): set to
 * mark, the old one returned. */
int cucap_i_builder_mark(cucap_builder *b, int mark);

/* What a split reads and writes: b's split event (a PRIMARY builder of a
 * retained context keeps it from one capture to the next), its count of
 * captures; a new fork of the split's slab started (CAPTURING in h, on
 * stream s from the cache, with a reference to ctx the caller adds for
 * all), a kept fork started again in capture `serial` of its builder, a
 * kept fork given a stream (NULL: it takes a new one next time; the
 * context too when a close gave it back); the split's n forks entered in
 * the capture registry for h. */
CUevent cucap_i_builder_split_event(const cucap_builder *b);
void cucap_i_builder_keep_split_event(cucap_builder *b, CUevent ev);
unsigned long cucap_i_builder_capture_serial(const cucap_builder *b);
cucap_builder *cucap_i_fork_start_new(struct builder_slab *slab, size_t i, CUstream s, struct ctx_hold *ctx,
                                      struct cucap_capture *h);
void cucap_i_fork_start_kept(cucap_builder *f, struct cucap_capture *h, unsigned long serial);
void cucap_i_kept_fork_set_stream(cucap_builder *f, CUstream s, struct ctx_hold *ctx);
void cucap_i_forks_register(cucap_builder *const *forks, size_t n, struct cucap_capture *h);

/* Forks a join closes (join.c's close_forks), under the graph lock of
 * their capture.  stream_to_give: the stream the close gives back, NULL
 * for a kept fork (it keeps its stream for its next split) and for a fork
 * on the caller's own stream; close_joined: f CLOSED, once its registry
 * entry and reference to the capture are gone and its stream given back
 * (a kept fork keeps its context too). */
CUstream cucap_i_fork_stream_to_give(const cucap_builder *f);
void cucap_i_fork_close_joined(cucap_builder *f);

/* A NOT_STARTED body builder on stream s (from the cache) for a body
 * whose record is `record`; placed, once its node exists, in the parent's
 * capture at the body graph's box, with a reference on parent_h that the
 * caller took for it. */
cucap_builder *cucap_i_builder_new_body(struct ctx_hold *ctx, CUstream s, struct cucap_body_record *record);
void cucap_i_builder_place_body(cucap_builder *body, struct cucap_capture *parent_h, struct cucap_box *box);
struct cucap_body_record *cucap_i_builder_body_record(const cucap_builder *b);
/* A body's parent capture and the box of its body graph there. */
struct cucap_capture *cucap_i_builder_body_capture(const cucap_builder *b);
struct cucap_box *cucap_i_builder_body_box(const cucap_builder *b);

/* Its list of open forks, for cucap_builder_join_forks: every call is
 * made under the graph lock of the capture the builders take part in
 * (cucap_i_capture_lock). */
/* Count new forks into b's list; -1, adding none, when out of memory. */
int cucap_i_fork_links_add(cucap_builder *b, cucap_builder *const *forks, size_t count);
/* b and its open forks (*n of them) in room when room_size is enough,
 * else in a new array (free it when it is not room); NULL when out of
 * memory. */
cucap_builder **cucap_i_fork_links_snapshot(cucap_builder *b, cucap_builder **room, size_t room_size, size_t *n);
/* Forget b in its split parent's list and its own forks' links (b is
 * being closed). */
void cucap_i_fork_links_release(cucap_builder *b);
/* cucap_i_fork_links_release for every builder but skip; skip (the
 * join's root, in its user's hands) lets go of its list once no fork is
 * on it. */
void cucap_i_fork_links_release_all(cucap_builder *const *builders, size_t count, cucap_builder *skip);

/* Its memory: one by one, a split's forks in one slab, kept for reuse. */
cucap_builder *cucap_i_builder_new(cucap_builder_kind kind, cucap_builder_state state, CUstream s, int owns,
                                   struct ctx_hold *ctx);
/* The forks of one split allocated together: take builder i of the
 * slab (its reference to ctx is the caller's to add, for all at once);
 * done returns the ones not taken.  Every builder, of a slab or
 * not, is freed on its own by cucap_i_builder_free (a slab with its last
 * builder). */
struct builder_slab *cucap_i_builder_slab_new(size_t count);
cucap_builder *cucap_i_builder_slab_take(struct builder_slab *slab, size_t i, cucap_builder_kind kind,
                                         cucap_builder_state state, CUstream s, int owns, struct ctx_hold *ctx);
void cucap_i_builder_slab_done(struct builder_slab *slab, size_t taken);
void cucap_i_builder_free(cucap_builder *b);
/* Free the builders and slabs kept for reuse (cucap_release_cached). */
void cucap_i_builder_free_lists_drain(void);


/* b is not NULL and not closed. */
CUresult cucap_i_builder_check_open(const cucap_builder *b, const char *caller, cucap_error **err);
/* b is open, ENDED and has a graph. */
CUresult cucap_i_builder_check_ended(const cucap_builder *b, const char *caller, cucap_error **err);
/* The refusal of a builder whose capture the driver discarded. */
CUresult cucap_i_builder_no_graph(const char *caller, cucap_error **err);

#endif
