/* Join: forks brought back into their capture (cucap_builder_join and
 * cucap_builder_join_forks), in one step by capture dependencies where
 * it can, by events otherwise, and closed; and the same wait without the
 * close (cucap_builder_wait). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder-internal.h"
#include "capture-registry.h"
#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "builder-object.h"
#include "capture.h"
#include "stream-cache.h"

/* to's stream gains n capture dependencies, with their edge data. */
static CUresult add_to_stream(CUstream to, const CUgraphNode *nodes, const CUgraphEdgeData *edges, size_t n)
{
    return n ? cucap_i_drv.cuStreamUpdateCaptureDependencies(to, (CUgraphNode *)nodes, (CUgraphEdgeData *)edges, n,
                                                             CU_STREAM_ADD_CAPTURE_DEPENDENCIES)
             : CUDA_SUCCESS;
}

/* to's stream gains from's current capture dependencies, with their edge
 * data (without it, edges that carry data make the query LOSSY_QUERY):
 * the same graph as an event record and wait at a fraction of the cost
 * (doc/driver-facts.md, "Joining by capture dependencies").  Returns 0,
 * changing nothing, when from is not ACTIVE in capture `want` (any when
 * 0) or gave no edge data; 1 with *rc the driver's result and *id from's
 * capture.  from's arrays are the driver's until the next call on from's
 * stream; the one call that reads them is on to's. */
static int add_dependencies(CUstream to, CUstream from, cuuint64_t want, cuuint64_t *id, CUresult *rc)
{
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    CUstreamCaptureStatus status;
    size_t n = 0;

    if (cucap_i_drv.cuStreamGetCaptureInfo(from, &status, id, NULL, &deps, &edges, &n) != CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_ACTIVE || (want && *id != want) || (n && !edges))
        return 0;
    *rc = add_to_stream(to, deps, edges, n);
    return 1;
}

/* The fast join of `to` on `from` when both streams are ACTIVE in one
 * capture.  Returns 0 when it does not apply (anything else takes the
 * event path, whose errors users know), 1 when it ran with *rc its
 * result. */
static int wait_on_dependencies(const struct cucap_builder_facts *to, const struct cucap_builder_facts *from,
                                CUresult *rc)
{
    CUstreamCaptureStatus to_status;
    cuuint64_t to_id = 0, from_id = 0;
    int began = to->kind != CUCAP_BUILDER_FORKED && to->h;   /* to's stream began h's capture */

    /* across devices only the event join is measured; the root is asked
     * once all the same, for the capture's id (kept in the capture) */
    if (to->ctx->ctx != from->ctx->ctx && !(began && !cucap_i_capture_id(to->h)))
        return 0;
    if (cucap_i_drv.cuStreamGetCaptureInfo(to->stream, &to_status, &to_id, NULL, NULL, NULL, NULL) != CUDA_SUCCESS ||
        to_status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return 0;
    if (began)
        cucap_i_capture_learn_id(to->h, to_id);
    return to->ctx->ctx == from->ctx->ctx && add_dependencies(to->stream, from->stream, to_id, &from_id, rc);
}

/* `to` waits on everything captured on `from` so far. */
static CUresult wait_on(cucap_builder *to_builder, cucap_builder *from_builder, const char *caller, cucap_error **err)
{
    struct cucap_builder_facts to, from;
    CUevent ev = NULL;
    CUresult rc;
    const char *call = "cuEventCreate";

    cucap_i_builder_facts(to_builder, &to);
    cucap_i_builder_facts(from_builder, &from);
    if (wait_on_dependencies(&to, &from, &rc)) {
        if (rc != CUDA_SUCCESS) {
            rc = cucap_i_fail_in_capture(to.h, to.stream, rc, caller, "cuStreamUpdateCaptureDependencies", NULL, err);
            cucap_i_capture_failed(from.h, caller, rc);
        }
        return rc;
    }
    rc = cucap_i_take_event(from.ctx, &ev, caller);
    if (rc == CUDA_SUCCESS && (rc = cucap_i_drv.cuEventRecord(ev, from.stream)) != CUDA_SUCCESS)
        call = "cuEventRecord";
    if (rc == CUDA_SUCCESS && (rc = cucap_i_drv.cuStreamWaitEvent(to.stream, ev, 0)) != CUDA_SUCCESS)
        call = "cuStreamWaitEvent";
    if (rc != CUDA_SUCCESS && ev) {   /* the call on `from` or on `to` failed: the other capture learns it too */
        const struct cucap_builder_facts *on = !strcmp(call, "cuEventRecord") ? &from : &to;
        const struct cucap_builder_facts *other = on == &from ? &to : &from;
        rc = cucap_i_fail_in_capture(on->h, on->stream, rc, caller, call, NULL, err);
        cucap_i_capture_failed(other->h, caller, rc);
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, call);
    }
    if (ev)
        cucap_i_give_event(from.ctx, cucap_i_capture_deferral(from.h), ev, caller);
    return rc;
}

/* No builder twice, in O(K): each builder is marked while the check runs
 * and unmarked after it (a builder is in one thread's hands at a time,
 * so no other join marks it meanwhile).  Only a refused join pays the
 * pairwise scan that names the first repeat. */
static CUresult check_distinct(cucap_builder *const *builders, size_t count, const char *caller, cucap_error **err)
{
    size_t i, first;
    int repeat = 0;

    for (i = 0; i < count; i++)
        repeat |= cucap_i_builder_mark(builders[i], 1);
    for (i = 0; i < count; i++)
        (void)cucap_i_builder_mark(builders[i], 0);
    if (!repeat)
        return CUDA_SUCCESS;
    for (i = 1; i < count; i++)
        for (first = 0; first < i; first++)
            if (builders[first] == builders[i])
                return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: builder %zu is builder %zu again", caller,
                                    i, first);
    return CUDA_SUCCESS;   /* not reached: a builder was marked twice */
}

/* Builders of two captures: the driver would invalidate both
 * (CUDA_ERROR_STREAM_CAPTURE_MERGE, doc/driver-facts.md), so the join is
 * refused before it touches either. */
static CUresult other_capture(cucap_builder *const *builders, size_t count, const cucap_builder *root, size_t i,
                              const char *caller, cucap_error **err)
{
    struct cucap_builder_facts r_facts, i_facts;
    size_t r = 0;

    while (r < count && builders[r] != root)
        r++;
    cucap_i_builder_facts(root, &r_facts);
    cucap_i_builder_facts(builders[i], &i_facts);
    return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                        "%s: builder %zu is in another capture than the root (builder %zu): the root's capture was "
                        "begun on stream %p, builder %zu's on stream %p; the driver would invalidate both "
                        "(CUDA_ERROR_STREAM_CAPTURE_MERGE), so nothing was done and both captures go on",
                        caller, i, r, (void *)cucap_i_capture_origin(r_facts.h), i,
                        (void *)cucap_i_capture_origin(i_facts.h));
}

/* join's checks before it touches anything: distinct, open builders, the
 * root capturing (a root that is not would silently join the capture of
 * whichever builder it waits on), every other builder capturing too, in
 * the root's capture.
 * Unless full, whether root's capture is over is left
 * to the caller, who learns it with the capture's lock (a fork in it is
 * then checked again, fully). */
static CUresult check_join(cucap_builder *const *builders, size_t count, cucap_builder *root, int full,
                           const char *caller, cucap_error **err)
{
    struct cucap_builder_facts r, b;
    size_t i;

    cucap_i_builder_facts(root, &r);
    for (i = 0; i < count; i++) {
        cucap_builder_state state;
        cucap_i_builder_facts(builders[i], &b);
        state = full || b.h != r.h ? cucap_builder_get_state(builders[i]) : b.state;
        if (state == CUCAP_BUILDER_CAPTURING)
            continue;
        if (builders[i] == root)
            return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                                "%s: the root (builder %zu, %s) is not capturing (it is %s): join waits on the "
                                "others from a running capture", caller, i,
                                b.kind == CUCAP_BUILDER_FORKED ? "a fork" :
                                b.kind == CUCAP_BUILDER_BODY ? "a conditional body" : "a primary",
                                cucap_i_state_names[state]);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: builder %zu is not capturing (it is %s%s)", caller,
                            i, cucap_i_state_names[state],
                            b.kind == CUCAP_BUILDER_FORKED ? ": its primary's capture ended" : "");
    }
    /* a root whose capture is over is refused as such, with the lock */
    for (i = 0; i < count; i++) {
        cucap_i_builder_facts(builders[i], &b);
        if (b.h != r.h && cucap_builder_get_state(root) == CUCAP_BUILDER_CAPTURING)
            return other_capture(builders, count, root, i, caller, err);
    }
    return check_distinct(builders, count, caller, err);
}


struct dependency {
    CUgraphNode node;
    CUgraphEdgeData edge;
};

static int same_dependency(const struct dependency *x, const struct dependency *y)
{
    return x->node == y->node && memcmp(&x->edge, &y->edge, sizeof x->edge) == 0;
}

/* Keep the first of each repeated dependency, in O(n): an open-addressing
 * table of indices, at least twice the size of the set (on the stack for
 * up to 128 dependencies).  Returns how many are kept, in all[0 ..
 * kept-1]; -1 when out of memory. */
static long unique_dependencies(struct dependency *all, size_t n)
{
    size_t local[256], *slots = local, size = 8, kept = 0, i, at;

    if (n < 2)
        return (long)n;
    while (size < 2 * n)
        size *= 2;
    if (size > 256 && !(slots = malloc(size * sizeof *slots)))
        return -1;
    for (i = 0; i < size; i++)
        slots[i] = SIZE_MAX;
    for (i = 0; i < n; i++) {
        at = ((uintptr_t)all[i].node >> 4) * 0x9e3779b97f4a7c15u & (size - 1);
        while (slots[at] != SIZE_MAX && !same_dependency(&all[slots[at]], &all[i]))
            at = (at + 1) & (size - 1);
        if (slots[at] == SIZE_MAX) {
            all[kept] = all[i];
            slots[at] = kept++;
        }
    }
    if (slots != local)
        free(slots);
    return (long)kept;
}

/* join_by_dependencies for a root and one fork, their facts r and f. */
static int join_one_by_dependencies(const struct cucap_builder_facts *r, const struct cucap_builder_facts *f,
                                    const char *caller, cucap_error **err, CUresult *rc, cuuint64_t *learned)
{
    cuuint64_t id = 0;

    if (!add_dependencies(r->stream, f->stream, 0, &id, rc))
        return 0;
    if (*rc == CUDA_SUCCESS)   /* the root is in the capture the fork is in: h's */
        *learned = id;
    else
        *rc = cucap_i_fail_in_capture(r->h, r->stream, *rc, caller, "cuStreamUpdateCaptureDependencies", NULL, err);
    return 1;
}

/* The dependency nodes, with their edge data, of every builder but the
 * root, appended to *all (local's 128 first, then the heap; *total of
 * them), all of them ACTIVE in one capture, whose id is left in *id.  0
 * when one is not, or out of memory. */
static int gather_dependencies(cucap_builder *root, cucap_builder *const *builders, size_t count,
                               struct dependency *local, struct dependency **all, size_t *total, cuuint64_t *id)
{
    CUstreamCaptureStatus status;
    struct dependency *grown;
    cuuint64_t this_id = 0;
    size_t cap = 128, i, j;

    for (i = 0; i < count; i++) {
        const CUgraphNode *deps = NULL;
        const CUgraphEdgeData *data = NULL;
        size_t n = 0;
        if (builders[i] == root)
            continue;
        if (cucap_i_drv.cuStreamGetCaptureInfo(cucap_i_builder_stream(builders[i]), &status, &this_id, NULL, &deps,
                                               &data, &n) != CUDA_SUCCESS ||
            status != CU_STREAM_CAPTURE_STATUS_ACTIVE || (*id && this_id != *id))
            return 0;
        *id = this_id;
        if (*total + n > cap) {
            size_t want = 2 * (*total + n);
            if (!(grown = *all == local ? malloc(want * sizeof **all) : realloc(*all, want * sizeof **all)))
                return 0;
            if (*all == local)
                memcpy(grown, local, *total * sizeof **all);
            *all = grown;
            cap = want;
        }
        /* the arrays are the driver's until the next call on this stream: copied now */
        for (j = 0; j < n; j++, ++*total) {
            (*all)[*total].node = deps[j];
            if (data)
                (*all)[*total].edge = data[j];
            else
                memset(&(*all)[*total].edge, 0, sizeof (*all)[*total].edge);
        }
    }
    return 1;
}

/* join_by_dependencies for more than one fork, with room for their
 * dependencies; its own frame, which a one-fork join does not pay for. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int join_many_by_dependencies(const struct cucap_builder_facts *r, cucap_builder *root,
                                     cucap_builder *const *builders, size_t count, const char *caller,
                                     cucap_error **err, CUresult *rc, cuuint64_t *learned)
{
    struct dependency local[128], *all = local;
    CUgraphNode nodes_local[128], *nodes = nodes_local;
    CUgraphEdgeData edges_local[128], *edges = edges_local;
    size_t total = 0, kept = 0;
    long unique;
    cuuint64_t root_id = 0;
    int applied = 0;

    /* the root is not asked: every builder but the root is of root's
     * capture, and a stream leaves a capture only at its end, which
     * takes every stream out of it (doc/driver-facts.md, "Ending a
     * capture"), so one ACTIVE in it proves the capture, and the root in
     * it, still running */
    if (!gather_dependencies(root, builders, count, local, &all, &total, &root_id))
        goto out;
    /* forks that did nothing since the split share their dependency: once each */
    if ((unique = unique_dependencies(all, total)) < 0)
        goto out;
    if ((size_t)unique > 128 && (!(nodes = malloc((size_t)unique * sizeof *nodes)) ||
                                 !(edges = malloc((size_t)unique * sizeof *edges))))
        goto out;
    for (kept = 0; kept < (size_t)unique; kept++) {
        nodes[kept] = all[kept].node;
        edges[kept] = all[kept].edge;
    }
    *rc = add_to_stream(r->stream, nodes, edges, kept);
    applied = 1;
    if (*rc == CUDA_SUCCESS)   /* the root is in the capture the forks are in: h's */
        *learned = root_id;
    if (*rc != CUDA_SUCCESS)
        *rc = cucap_i_fail_in_capture(r->h, r->stream, *rc, caller, "cuStreamUpdateCaptureDependencies", NULL,
                                      err);
out:
    if (all != local)
        free(all);
    if (nodes != nodes_local)
        free(nodes);
    if (edges != edges_local)
        free(edges);
    return applied;
}

/* The whole join in one step when every builder is ACTIVE in the root's
 * capture and context (doc/driver-facts.md, "Joining by capture
 * dependencies"): each builder's dependency nodes, with their edge data
 * (without it, edges that carry data make the query LOSSY_QUERY), read
 * once and added to the root's with one call.  Returns 0, having changed
 * nothing, when that does not apply; the pairwise join then runs and
 * reports what users know.  Returns 1 with *rc the call's result.  The
 * capture id of h, when the root's query taught it, is left in *learned. */
static int join_by_dependencies(cucap_builder *root, cucap_builder *const *builders, size_t count, int running,
                                const char *caller, cucap_error **err, CUresult *rc, cuuint64_t *learned)
{
    struct cucap_builder_facts r, b;
    size_t i;

    cucap_i_builder_facts(root, &r);
    for (i = 0; i < count; i++) {
        cucap_i_builder_facts(builders[i], &b);
        if (builders[i] != root && (b.h != r.h || b.ctx->ctx != r.ctx->ctx))
            return 0;
    }
    if (!running)
        return 0;
    if (count == 2) {   /* one fork: its arrays as the driver gave them, to the root's stream */
        if (builders[0] != root)
            cucap_i_builder_facts(builders[0], &b);   /* the loop left the last builder's in b */
        return join_one_by_dependencies(&r, &b, caller, err, rc, learned);
    }
    return join_many_by_dependencies(&r, root, builders, count, caller, err, rc, learned);
}

/* ---------------------------------------------------------------- the close */

#define CLOSE_BATCH 8

/* A fork's stream that cannot wait for the capture's end: destroyed,
 * which is legal while the capture runs. */
static void destroy_stream(CUstream s, const char *caller)
{
    CUresult rc = cucap_i_drv.cuStreamDestroy(s);

    if (rc != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuStreamDestroy failed while closing a fork: " CUCAP_I_RESULT_FMT, caller,
                     CUCAP_I_RESULT_ARGS(rc));
}

/* Up to CLOSE_BATCH of close_forks' forks closed in one step. */
static void close_batch(cucap_builder *const *builders, size_t count, cucap_builder *root, struct cucap_capture *h,
                        int running, int joined, const char *caller)
{
    struct cucap_cache_item items[CLOSE_BATCH];
    struct cucap_registration *entries[CLOSE_BATCH];
    cucap_builder *closing[CLOSE_BATCH];
    int direct = cucap_i_capture_direct(h) != NULL;   /* its streams may be behind its work */
    size_t i, n = 0, n_items = 0;

    for (i = 0; i < count; i++) {
        cucap_builder *f = builders[i];
        struct ctx_hold *ctx = cucap_i_builder_ctx(f);
        CUstream given;
        if (f == root || cucap_i_builder_state(f) == CUCAP_BUILDER_CLOSED)
            continue;
        closing[n] = f;
        entries[n++] = cucap_i_builder_registration(f);
        if (!(given = cucap_i_fork_stream_to_give(f)))
            continue;   /* a kept fork keeps its own, a fork on the caller's stream leaves it */
        if (direct)
            cucap_i_direct_give_stream(h, ctx, given, caller);
        else if (running && ctx->retained)
            items[n_items++] = (struct cucap_cache_item){ ctx->ctx, ctx->dev, given, 0, joined };
        else
            destroy_stream(given, caller);   /* no cache for its context, or the capture ended meanwhile */
    }
    if (n_items && cucap_i_defer(cucap_i_capture_deferral(h), items, n_items, 0, caller) != 0)
        for (i = 0; i < n_items; i++)   /* out of memory */
            destroy_stream(items[i].handle, caller);
    cucap_i_fork_links_release_all(closing, n, root);
    cucap_i_registry_remove_all(entries, n);
    cucap_i_capture_unref_by(h, n);   /* the root's reference stays: never the last */
    for (i = 0; i < n; i++)
        cucap_i_fork_close_joined(closing[i]);
}

/* Close every builder of builders but root that is still open: forks of
 * root's capture, whose graph lock the caller holds (running: whether the
 * capture runs).  Out of the fork lists and the registry, their
 * references to the capture dropped; their streams, which are in that
 * capture while it runs, deferred to its end (joined: their work joined
 * into it, so a later split may take them), handed back to a direct run,
 * or destroyed (a context without a cache, a capture that ended while
 * the join ran, out of memory); a kept fork keeps its stream and context
 * for its next split.  learned: the capture's id, when a join learned it.
 * The one way a join closes forks, joined or not. */
static void close_forks(cucap_builder *const *builders, size_t count, cucap_builder *root, cuuint64_t learned,
                        int running, int joined, const char *caller)
{
    struct cucap_capture *h = cucap_i_builder_capture(root);
    size_t start;

    if (learned)
        cucap_i_capture_learn_id(h, learned);
    for (start = 0; start < count; start += CLOSE_BATCH)
        close_batch(builders + start, count - start < CLOSE_BATCH ? count - start : CLOSE_BATCH, root, h, running,
                    joined, caller);
}

/* The join once its checks passed, under one hold of the capture's lock
 * (running: whether root's capture still runs), which it releases: every
 * fork joined in one step by capture dependencies, or each waited on,
 * then closed; whatever failed, no builder but the root is left open. */
static CUresult join_checked(cucap_builder *const *builders, size_t count, cucap_builder *root, int running,
                             const char *caller, cucap_error **err)
{
    CUresult rc = CUDA_SUCCESS;
    cuuint64_t learned = 0;
    size_t i;

    if (!join_by_dependencies(root, builders, count, running, caller, err, &rc, &learned))
        for (i = 0; i < count && rc == CUDA_SUCCESS; i++)
            if (builders[i] != root)
                rc = running ? wait_on(root, builders[i], caller, err)
                             : cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture of builder %zu or of "
                                            "the root ended while join ran (its end came from another thread)",
                                            caller, i);
    close_forks(builders, count, root, learned, running, rc == CUDA_SUCCESS, caller);
    cucap_i_builder_unlock(root);
    return rc;
}

CUresult cucap_builder_join(cucap_builder *const *builders, size_t count, cucap_builder **root_out,
                            cucap_error **err)
{
    static const char caller[] = "cucap_builder_join";
    cucap_builder *root = NULL;
    CUresult rc;
    size_t i;
    int running;

    /* inputs are read before any output is written: root_out may point into builders */
    if (!builders || count < 2) {
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: must join at least two builders, got %zu", caller,
                            builders ? count : 0);
    }
    for (i = 0; i < count; i++) {
        struct cucap_builder_facts f;
        if (!builders[i])
            return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: builder %zu is NULL", caller, i);
        cucap_i_builder_facts(builders[i], &f);
        if (f.state == CUCAP_BUILDER_CLOSED)
            return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: builder %zu has been closed", caller, i);
        if (!root && f.kind != CUCAP_BUILDER_FORKED)
            root = builders[i];
    }
    if (!root)
        root = builders[0];
    if ((rc = check_join(builders, count, root, 0, caller, err)) != CUDA_SUCCESS)
        return rc;

    /* the one-step join and the close of its forks under one hold of the
     * capture's lock */
    if (!(running = cucap_i_builder_lock(root))) {
        cucap_i_builder_unlock(root);
        if ((rc = check_join(builders, count, root, 1, caller, err)) != CUDA_SUCCESS)
            return rc;
        (void)cucap_i_builder_lock(root);
    }
    rc = join_checked(builders, count, root, running, caller, err);
    if (root_out)
        *root_out = root;
    return rc;
}

/* Whether join's checks pass for b and its open forks, all[1 .. n], as
 * join_forks finds them with the capture's lock held: b and every fork
 * capturing in b's running capture (distinct and open, as the list keeps
 * them), so that the join may skip them. */
static int forks_ready_to_join(cucap_builder *b, cucap_builder *const *all, size_t n)
{
    struct cucap_builder_facts root, f;
    size_t i;

    cucap_i_builder_facts(b, &root);
    if (root.state != CUCAP_BUILDER_CAPTURING || cucap_i_capture_is_over(root.h))
        return 0;
    for (i = 1; i <= n; i++) {
        cucap_i_builder_facts(all[i], &f);
        if (f.state != CUCAP_BUILDER_CAPTURING || f.h != root.h)
            return 0;
    }
    return 1;
}

CUresult cucap_builder_join_forks(cucap_builder *b, cucap_error **err)
{
    static const char caller[] = "cucap_builder_join_forks";
    cucap_builder *room[16], **all;
    struct cucap_capture *h;
    size_t n;
    CUresult rc;
    int joined = 0, held = 1;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(h = cucap_i_builder_capture(b)))
        return CUDA_SUCCESS;   /* no capture, no forks */
    /* the list and the join under one hold of the lock that guards it,
     * which the join releases */
    cucap_i_capture_lock(h);
    if (!(all = cucap_i_fork_links_snapshot(b, room, sizeof room / sizeof room[0], &n)))
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    else if (n == 0)
        rc = CUDA_SUCCESS;   /* nothing to join */
    else {
        joined = 1;
        if (forks_ready_to_join(b, all, n)) {
            held = 0;
            rc = join_checked(all, n + 1, b, 1, "cucap_builder_join", err);
        } else
            rc = cucap_builder_join(all, n + 1, NULL, err);
    }
    if (held)
        cucap_i_capture_unlock(h);
    if (joined && rc != CUDA_SUCCESS && err && *err)
        cucap_i_error_add_note(*err, "%s joined the %zu open forks split from this builder", caller, n);
    if (all && all != room)
        free(all);
    return rc;
}

CUresult cucap_builder_wait(cucap_builder *b, cucap_builder *other, cucap_error **err)
{
    static const char caller[] = "cucap_builder_wait";
    cucap_builder *pair[2] = { b, other };
    CUresult rc;
    size_t i;

    if (!b || !other)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: %s is NULL", caller, b ? "other" : "the builder");
    if (b == other)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a builder cannot wait on itself", caller);
    for (i = 0; i < 2; i++) {
        cucap_builder_state state = cucap_builder_get_state(pair[i]);
        if (state != CUCAP_BUILDER_CAPTURING)
            return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: %s is not capturing (it is %s%s)", caller,
                                i ? "other" : "the builder", cucap_i_state_names[state],
                                cucap_builder_get_kind(pair[i]) == CUCAP_BUILDER_FORKED && state != CUCAP_BUILDER_CLOSED
                                    ? ": its primary's capture ended" : "");
    }
    if (cucap_i_builder_capture(b) != cucap_i_builder_capture(other))
        return other_capture(pair, 2, b, 1, caller, err);
    if (!cucap_i_builder_lock(b))
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture ended while the call ran (its end came "
                          "from another thread)", caller);
    else
        rc = wait_on(b, other, caller, err);
    cucap_i_builder_unlock(b);
    return rc;
}
