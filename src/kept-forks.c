/* A primary builder's kept forks: what cucap_builder_split_kept hands out
 * again capture after capture, so that a loop that splits the same way
 * each time makes no fork object and takes no stream or context
 * reference per capture.  A kept fork has two holders once a split
 * handed it out, its builder and the caller; whichever lets go last
 * frees it. */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "builder-object.h"
#include "builder-object.h"
#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "kept-forks.h"
#include "hierarchy.h"
#include "stream-cache.h"

static void let_go(cucap_builder *f)
{
    if (atomic_fetch_sub_explicit(&f->holders, 1, memory_order_acq_rel) == 1)
        cucap_i_builder_free(f);
}

/* A closed kept fork's stream (to the cache when it is in no capture,
 * destroyed otherwise, which is legal in a capture) and context
 * reference. */
static void release_kept(cucap_builder *f, const char *caller)
{
    if (f->stream) {
        cucap_i_give_back_stream(f->ctx, f->stream, NULL, 0, caller);
        f->stream = NULL;
    }
    if (f->ctx)
        cucap_i_ctx_hold_release(f->ctx);
    f->ctx = NULL;
}

size_t cucap_i_kept_take(cucap_builder *b, size_t n, cucap_builder **out)
{
    size_t i, kept = 0, got = 0;

    for (i = 0; i < b->kept_count; i++) {
        cucap_builder *f = b->kept[i];
        if (f->handed_out && atomic_load_explicit(&f->holders, memory_order_acquire) == 1) {   /* the caller destroyed it */
            let_go(f);
            continue;
        }
        b->kept[kept++] = f;
        if (got < n && f->state == CUCAP_BUILDER_CLOSED && f->kept_serial != b->capture_serial)
            out[got++] = f;
    }
    b->kept_count = kept;
    return got;
}

cucap_builder *cucap_i_kept_new(cucap_builder *b)
{
    cucap_builder *f, **grown;

    if (b->kept_count == b->kept_cap) {
        size_t cap = b->kept_cap ? 2 * b->kept_cap : 4;
        if (!(grown = realloc(b->kept, cap * sizeof *grown)))
            return NULL;
        b->kept = grown;
        b->kept_cap = cap;
    }
    if (!(f = cucap_i_builder_new(CUCAP_BUILDER_FORKED, CUCAP_BUILDER_CLOSED, NULL, 1, b->ctx)))
        return NULL;
    f->cached_stream = 1;
    f->is_kept = 1;
    atomic_init(&f->holders, 1);   /* the caller's once a split hands it out (cucap_i_kept_handed_out) */
    b->kept[b->kept_count++] = f;
    return f;
}

void cucap_i_kept_handed_out(cucap_builder *f)
{
    if (f->handed_out)
        return;
    f->handed_out = 1;
    atomic_store_explicit(&f->holders, 2, memory_order_relaxed);   /* nobody else holds it yet */
}

void cucap_i_kept_let_go_all(cucap_builder *b, const char *caller)
{
    size_t i;

    for (i = 0; i < b->kept_count; i++) {
        cucap_builder *f = b->kept[i];
        if (!f->handed_out)   /* made by a split that failed: only b ever held it */
            release_kept(f, caller);
        let_go(f);
    }
    free(b->kept);
    b->kept = NULL;
    b->kept_count = b->kept_cap = 0;
}

void cucap_i_kept_fork_destroy(cucap_builder *f, const char *caller)
{
    release_kept(f, caller);   /* a join left it its stream */
    let_go(f);
}
