/* The builder object: its memory (primary and body builders one by one,
 * a split's forks in one slab, both kept for reuse once freed), its list
 * of open forks, what the calls that are not builder.c's read of it, and
 * the checks of its state that every builder call makes. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builder-object.h"
#include "context-hold.h"
#include "error.h"
#include "free-list.h"

const char *const cucap_i_state_names[] = { "NOT_STARTED", "CAPTURING", "ENDED", "INVALIDATED", "CLOSED" };

CUresult cucap_i_builder_check_open(const cucap_builder *b, const char *caller, cucap_error **err)
{
    if (!b)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the builder is NULL", caller);
    if (b->state == CUCAP_BUILDER_CLOSED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder has been closed", caller);
    return CUDA_SUCCESS;
}

CUresult cucap_i_builder_no_graph(const char *caller, cucap_error **err)
{
    return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                        "%s: the capture was invalidated and the driver discarded its graph; this builder has no "
                        "graph", caller);
}

CUresult cucap_i_builder_check_ended(const cucap_builder *b, const char *caller, cucap_error **err)
{
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->state == CUCAP_BUILDER_INVALIDATED)
        return cucap_i_builder_no_graph(caller, err);
    if (b->state != CUCAP_BUILDER_ENDED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the graph has not finished building (the builder "
                            "is %s; end it first)", caller, cucap_i_state_names[b->state]);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- what others read */

/* NULL once closed (a kept fork keeps its stream and context for its
 * next split, but they are not the caller's meanwhile) */
CUstream cucap_builder_stream(const cucap_builder *b)
{
    return b && b->state != CUCAP_BUILDER_CLOSED ? b->stream : NULL;
}

CUcontext cucap_builder_context(const cucap_builder *b)
{
    return b && b->state != CUCAP_BUILDER_CLOSED && b->ctx ? b->ctx->ctx : NULL;
}

cucap_builder_kind cucap_builder_get_kind(const cucap_builder *b)
{
    return b ? b->kind : CUCAP_BUILDER_PRIMARY;
}

cucap_builder_state cucap_i_builder_state(const cucap_builder *b)
{
    return b->state;
}

struct cucap_capture *cucap_i_builder_capture(const cucap_builder *b)
{
    return b->h;
}

struct ctx_hold *cucap_i_builder_ctx(const cucap_builder *b)
{
    return b->ctx;
}

void cucap_i_builder_facts(const cucap_builder *b, struct cucap_builder_facts *out)
{
    *out = (struct cucap_builder_facts){ b->kind, b->state, b->h, b->ctx, b->stream };
}

CUstream cucap_i_builder_stream(const cucap_builder *b)
{
    return b->stream;
}

struct cucap_registration *cucap_i_builder_registration(cucap_builder *b)
{
    return &b->registration;
}

int cucap_i_builder_mark(cucap_builder *b, int mark)
{
    int was = b->join_mark;

    b->join_mark = (unsigned char)mark;
    return was;
}

/* ---------------------------------------------------------------- forks a split starts */

CUevent cucap_i_builder_split_event(const cucap_builder *b)
{
    return b->split_event;
}

void cucap_i_builder_keep_split_event(cucap_builder *b, CUevent ev)
{
    b->split_event = ev;
}

unsigned long cucap_i_builder_capture_serial(const cucap_builder *b)
{
    return b->capture_serial;
}

cucap_builder *cucap_i_fork_start_new(struct builder_slab *slab, size_t i, CUstream s, struct ctx_hold *ctx,
                                      struct cucap_capture *h)
{
    cucap_builder *f = cucap_i_builder_slab_take(slab, i, CUCAP_BUILDER_FORKED, CUCAP_BUILDER_CAPTURING, s, 1, ctx);

    f->cached_stream = 1;
    f->h = h;
    return f;
}

void cucap_i_fork_start_kept(cucap_builder *f, struct cucap_capture *h, unsigned long serial)
{
    f->kept_serial = serial;
    f->state = CUCAP_BUILDER_CAPTURING;
    f->h = h;
}

void cucap_i_kept_fork_set_stream(cucap_builder *f, CUstream s, struct ctx_hold *ctx)
{
    f->stream = s;
    if (s && !f->ctx) {   /* a close gave its context back */
        f->ctx = ctx;
        cucap_i_ctx_hold_ref_by(ctx, 1);
    }
}

void cucap_i_forks_register(cucap_builder *const *forks, size_t n, struct cucap_capture *h)
{
    size_t i;

    for (i = 0; i < n; i++) {
        forks[i]->registration.stream = forks[i]->stream;
        forks[i]->registration.next = i + 1 < n ? &forks[i + 1]->registration : NULL;
    }
    if (n)
        cucap_i_registry_add_chain(&forks[0]->registration, n, h);
}

/* ---------------------------------------------------------------- forks a join closes */

CUstream cucap_i_fork_stream_to_give(const cucap_builder *f)
{
    return f->is_kept || !f->cached_stream ? NULL : f->stream;
}

void cucap_i_fork_close_joined(cucap_builder *f)
{
    f->h = NULL;
    f->state = CUCAP_BUILDER_CLOSED;
    if (f->is_kept)
        return;
    cucap_i_ctx_hold_release(f->ctx);
    f->ctx = NULL;
    f->stream = NULL;
}

/* ---------------------------------------------------------------- conditional bodies */

cucap_builder *cucap_i_builder_new_body(struct ctx_hold *ctx, CUstream s, struct cucap_body_record *record)
{
    cucap_builder *b = cucap_i_builder_new(CUCAP_BUILDER_BODY, CUCAP_BUILDER_NOT_STARTED, s, 1, ctx);

    if (b) {
        b->cached_stream = 1;
        b->record = record;
    }
    return b;
}

void cucap_i_builder_place_body(cucap_builder *body, struct cucap_capture *parent_h, struct cucap_box *box)
{
    body->body_box = box;
    body->parent_h = parent_h;
}

struct cucap_body_record *cucap_i_builder_body_record(const cucap_builder *b)
{
    return b ? b->record : NULL;
}

struct cucap_capture *cucap_i_builder_body_capture(const cucap_builder *b)
{
    return b->parent_h;
}

struct cucap_box *cucap_i_builder_body_box(const cucap_builder *b)
{
    return b->body_box;
}

/* ---------------------------------------------------------------- its open forks */

/* Every builder's list of the forks split from it and still open, and
 * each fork's link back to its parent, for cucap_builder_join_forks.
 * A fork captures in its parent's capture, and a parent lets go of its
 * forks before it leaves that capture (reset, a body's new capture,
 * close): so the graph lock of that capture, which the callers hold,
 * guards both ends of every link. */

int cucap_i_fork_links_add(cucap_builder *b, cucap_builder *const *forks, size_t count)
{
    cucap_builder **grown;
    size_t cap, i;

    if (!b->forks) {
        b->forks = b->few_forks;
        b->fork_cap = sizeof b->few_forks / sizeof b->few_forks[0];
    }
    if (b->fork_count + count > b->fork_cap) {
        cap = b->fork_cap;
        while (cap < b->fork_count + count)
            cap *= 2;
        if (!(grown = b->forks == b->few_forks ? malloc(cap * sizeof *grown) : realloc(b->forks, cap * sizeof *grown)))
            return -1;
        if (b->forks == b->few_forks)
            memcpy(grown, b->few_forks, b->fork_count * sizeof *grown);
        b->forks = grown;
        b->fork_cap = cap;
    }
    for (i = 0; i < count; i++) {
        forks[i]->split_parent = b;
        forks[i]->split_index = b->fork_count;
        b->forks[b->fork_count++] = forks[i];
    }
    return 0;
}

/* b's list gone (its memory, when on the heap). */
static void drop_list(cucap_builder *b)
{
    if (b->forks && b->forks != b->few_forks)
        free(b->forks);
    b->forks = NULL;
    b->fork_count = b->fork_cap = 0;
}

/* b out of its parent's list (in O(1): the last one takes its place) and
 * its own forks orphaned. */
static void unlink_fork(cucap_builder *b)
{
    size_t i;

    if (b->split_parent) {
        cucap_builder *p = b->split_parent, *last = p->forks[--p->fork_count];
        p->forks[b->split_index] = last;
        last->split_index = b->split_index;
        b->split_parent = NULL;
    }
    for (i = 0; i < b->fork_count; i++)
        b->forks[i]->split_parent = NULL;
    drop_list(b);
}

void cucap_i_fork_links_release(cucap_builder *b)
{
    if (b->split_parent || b->forks)
        unlink_fork(b);
}

void cucap_i_fork_links_release_all(cucap_builder *const *builders, size_t count, cucap_builder *skip)
{
    size_t i;

    for (i = 0; i < count; i++)
        if (builders[i] != skip)
            unlink_fork(builders[i]);
    if (skip && skip->fork_count == 0)   /* a root whose forks are all joined: no list left */
        drop_list(skip);
}

cucap_builder **cucap_i_fork_links_snapshot(cucap_builder *b, cucap_builder **room, size_t room_size, size_t *n)
{
    cucap_builder **all;
    size_t i;

    *n = b->fork_count;
    if ((all = *n + 1 <= room_size ? room : malloc((*n + 1) * sizeof *all)) != NULL) {
        all[0] = b;
        for (i = 0; i < *n; i++)
            all[i + 1] = b->forks[i];
    }
    return all;
}

/* ---------------------------------------------------------------- memory */

/* Fork slabs whose builders were all freed, and freed primary builders,
 * kept for the next captures: a split of many forks would otherwise
 * allocate and clear a large block each time. */
#define FREE_SLAB_MAX 256           /* builders; larger slabs go back to the heap */
static struct cucap_free_list free_slabs = CUCAP_FREE_LIST_FREEING(free),
                              free_builders = CUCAP_FREE_LIST_FREEING(free);

static void builder_init(cucap_builder *b, cucap_builder_kind kind, cucap_builder_state state, CUstream s, int owns,
                         struct ctx_hold *ctx)
{
    b->kind = kind;
    b->state = state;
    b->stream = s;
    b->owns_stream = owns;
    b->ctx = ctx;
}

cucap_builder *cucap_i_builder_new(cucap_builder_kind kind, cucap_builder_state state, CUstream s, int owns,
                                  struct ctx_hold *ctx)
{
    cucap_builder *b = cucap_i_free_list_take_own(&free_builders, CUCAP_PER_THREAD_BUILDERS);

    if (b)
        memset(b, 0, sizeof *b);
    else
        b = cucap_i_aligned_calloc(sizeof *b);
    if (b) {
        builder_init(b, kind, state, s, owns, ctx);
        cucap_i_ctx_hold_ref_by(ctx, 1);
    }
    return b;
}

struct builder_slab {
    atomic_size_t live;              /* builders not yet freed */
    size_t count;                    /* builders handed out */
    size_t capacity;                 /* builders it has room for */
    _Alignas(64) cucap_builder builders[];   /* the first starting a cache line */
};

static struct builder_slab *take_free_slab(size_t count)
{
    struct builder_slab *slab = cucap_i_free_list_take_own(&free_slabs, CUCAP_PER_THREAD_SLABS);

    if (slab && slab->capacity < count) {   /* too small for this split: kept for another */
        if (!cucap_i_free_list_give_own(&free_slabs, CUCAP_PER_THREAD_SLABS, slab))
            free(slab);
        slab = NULL;
    }
    return slab;
}

static void give_free_slab(struct builder_slab *slab)
{
    if (slab->capacity > FREE_SLAB_MAX || !cucap_i_free_list_give_own(&free_slabs, CUCAP_PER_THREAD_SLABS, slab))
        free(slab);
}

void cucap_i_builder_free_lists_drain(void)
{
    cucap_i_free_list_drain(&free_slabs);
    cucap_i_free_list_drain(&free_builders);
}

struct builder_slab *cucap_i_builder_slab_new(size_t count)
{
    struct builder_slab *slab = take_free_slab(count);
    size_t capacity = 4;

    if (slab) {
        size_t i;
        for (i = 0; i < count; i++)   /* a constant size: no call */
            memset(&slab->builders[i], 0, CUCAP_BUILDER_FORK_PART);
    } else {
        while (capacity < count && capacity <= SIZE_MAX / 2)
            capacity *= 2;
        if (capacity < count || capacity > (SIZE_MAX - sizeof *slab) / sizeof slab->builders[0] ||
            !(slab = cucap_i_aligned_calloc(sizeof *slab + capacity * sizeof slab->builders[0])))
            return NULL;
        slab->capacity = capacity;
    }
    atomic_init(&slab->live, count);
    slab->count = count;
    return slab;
}

cucap_builder *cucap_i_builder_slab_take(struct builder_slab *slab, size_t i, cucap_builder_kind kind,
                                         cucap_builder_state state, CUstream s, int owns, struct ctx_hold *ctx)
{
    cucap_builder *b = &slab->builders[i];

    builder_init(b, kind, state, s, owns, ctx);
    b->slab = slab;
    return b;
}

void cucap_i_builder_slab_done(struct builder_slab *slab, size_t taken)
{
    size_t unused = slab->count - taken;

    if (unused && atomic_fetch_sub_explicit(&slab->live, unused, memory_order_acq_rel) == unused)
        give_free_slab(slab);
}

void cucap_i_builder_free(cucap_builder *b)
{
    struct builder_slab *slab = b->slab;

    if (!slab) {
        if (!cucap_i_free_list_give_own(&free_builders, CUCAP_PER_THREAD_BUILDERS, b))
            free(b);
    }
    /* a split of one fork: no other builder shares the slab, no count to take */
    else if (slab->count == 1 || atomic_fetch_sub_explicit(&slab->live, 1, memory_order_acq_rel) == 1)
        give_free_slab(slab);
}
