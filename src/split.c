/* Split: a capture's forks, each a builder whose stream joins the
 * capture where its parent stands (one core behind cucap_builder_split,
 * cucap_builder_split_on and cucap_builder_split_kept). */
#include "config.h"

#include <stdlib.h>

#include "builder-internal.h"
#include "builder-object.h"
#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "capture.h"
#include "stream-cache.h"

/* A fork stream of context `on` waits on ev; a stream of another device's
 * context waits with that context current, as measured (doc/driver-facts.md,
 * "One capture across two devices"). */
static CUresult fork_wait(struct ctx_hold *on, struct ctx_hold *origin, CUstream s, CUevent ev)
{
    CUcontext saved = NULL;
    CUresult rc, left;

    if (on == origin)
        return cucap_i_drv.cuStreamWaitEvent(s, ev, 0);
    if ((rc = cucap_i_ctx_enter(on->ctx, &saved)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuStreamWaitEvent(s, ev, 0);
    left = cucap_i_ctx_leave(on->ctx, saved);
    return rc != CUDA_SUCCESS ? rc : left;
}

static CUresult check_split_arguments(const cucap_builder *b, size_t count, cucap_builder **forks, const char *caller,
                                     cucap_error **err)
{
    if (count < 2 || count > CUCAP_SPLIT_MAX)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: invalid split count: expecting 2 to %d, got %zu",
                            caller, CUCAP_SPLIT_MAX, count);
    if (!forks)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: forks is NULL", caller);
    return cucap_i_builder_check_open(b, caller, err);
}


/* The refusal of a split of a builder that does not capture, or a fork
 * whose primary's capture ended (which its state says). */
static CUresult not_capturing(const cucap_builder *b, const char *caller, cucap_error **err)
{
    cucap_builder_state state = cucap_builder_get_state(b);

    return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                        "%s: the builder must be building before it can be split (it is %s%s)", caller,
                        cucap_i_state_names[state],
                        cucap_builder_get_kind(b) == CUCAP_BUILDER_FORKED ? ": its primary's capture ended" : "");
}

/* The split's event and the forks' streams: streams whose forks joined
 * back into this capture first (hand-written code reuses its fork streams
 * the same way), the rest from the cache, in one step when they are of
 * one context.  Under the graph lock. */
static CUresult take_split_handles(cucap_builder *b, struct ctx_hold *on, size_t n, CUstream *streams, CUevent *ev,
                                   const char *caller, cucap_error **err)
{
    struct cucap_builder_facts at;
    struct cucap_deferral *d;
    const char *failed = "cuEventCreate";
    size_t joined = 0, spare = 0, kept = 0, i;
    CUresult rc;

    cucap_i_builder_facts(b, &at);
    d = cucap_i_capture_deferral(at.h);
    if (on == at.ctx) {
        if (on->retained && (joined = cucap_i_deferral_take_joined(d, on->ctx, n, streams)) == n && *ev)
            return CUDA_SUCCESS;
        /* then the builder's spare streams, kept from its last capture */
        if ((spare = cucap_i_builder_take_spare_streams(b, n - joined, streams + joined)) == n - joined && *ev)
            return CUDA_SUCCESS;
        /* a direct run's streams kept from earlier runs next (none in a capture) */
        if ((kept = cucap_i_direct_take_streams(at.h, on->ctx, n - joined - spare, streams + joined + spare)) ==
                n - joined - spare && *ev)
            return CUDA_SUCCESS;
        i = joined + spare + kept;
        rc = *ev ? cucap_i_take_streams(on, n - i, streams + i, caller)
                 : cucap_i_take_streams_and_event(on, n - i, streams + i, ev, &failed, caller);
        if (rc != CUDA_SUCCESS) {
            if (*ev) {   /* the builder's own event (so the context is retained): the streams failed */
                failed = "cuStreamCreate";
                cucap_i_cache_give_event(on->ctx, on->dev, *ev, caller);
                if (cucap_i_builder_split_event(b) == *ev)
                    cucap_i_builder_keep_split_event(b, NULL);
                *ev = NULL;
            }
            for (i = 0; i < joined; i++) {   /* still in this capture: back to wait for its end */
                struct cucap_cache_item item = { on->ctx, on->dev, streams[i], 0, 1 };
                if (cucap_i_defer(d, &item, 1, 0, caller) != 0)
                    cucap_i_drv.cuStreamDestroy(streams[i]);   /* legal in a capture */
            }
            for (; i < joined + spare; i++)   /* idle, in no capture */
                cucap_i_give_stream(on, streams[i], caller);
            for (; i < joined + spare + kept; i++)   /* back to the direct run that kept them */
                cucap_i_direct_give_stream(at.h, on, streams[i], caller);
            return cucap_i_fail_driver(err, rc, caller, failed);
        }
        return CUDA_SUCCESS;
    }
    if ((rc = cucap_i_take_event(at.ctx, ev, caller)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuEventCreate");
    if ((rc = cucap_i_take_streams(on, n, streams, caller)) != CUDA_SUCCESS) {
        cucap_i_give_event(at.ctx, NULL, *ev, caller);
        return cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
    }
    return CUDA_SUCCESS;
}

/* A split's last step on b's capture, under its graph lock (or sole):
 * n more references to the capture (the forks'), their registry
 * entries, the split's event e deferred to the capture's end with room
 * for the forks' streams, destroyed when b's context has no cache
 * (legal in a capture), or nothing when e is NULL (b keeps it). */
static void split_done(const struct cucap_builder_facts *at, CUevent e, cucap_builder *const *forks, size_t n,
                       const char *caller)
{
    struct cucap_cache_item item = { at->ctx->ctx, at->ctx->dev, e, 1, 0 };

    cucap_i_capture_ref_by(at->h, n);
    cucap_i_forks_register(forks, n, at->h);
    if (e && (!at->ctx->retained || cucap_i_defer(cucap_i_capture_deferral(at->h), &item, 1, n, caller) != 0))
        cucap_i_drv.cuEventDestroy(e);
}

/* A primary builder of a retained context records its splits on an event
 * it keeps (builder.c gives it back): its captures run one at a time, so
 * the event is never in two captures that both run.  Any other builder's
 * split event waits for its capture's end, deferred to the capture. */
static int keeps_split_event(const struct cucap_builder_facts *at, const struct ctx_hold *on)
{
    return at->kind == CUCAP_BUILDER_PRIMARY && on == at->ctx && at->ctx->retained;
}

/* After the split's record on ev: the event kept by b, or NULL when it
 * goes to the capture's deferral with the split (split_done). */
static CUevent keep_split_event(cucap_builder *b, const struct cucap_builder_facts *at, const struct ctx_hold *on,
                               CUevent ev)
{
    if (!keeps_split_event(at, on))
        return ev;
    cucap_i_builder_keep_split_event(b, ev);
    return NULL;
}

/* split_kept's forks ready for b's capture, under its graph lock: kept
 * ones of earlier captures, new ones when there are too few, a stream
 * for each that has none (one made by this call, or one whose stream a
 * close took), and the split's event. */
static CUresult take_kept(cucap_builder *b, size_t n, cucap_builder **forks, CUstream *streams, CUevent *ev,
                          const char *caller, cucap_error **err)
{
    size_t got = cucap_i_kept_take(b, n, forks), bare = 0, i;
    struct ctx_hold *ctx = cucap_i_builder_ctx(b);
    CUresult rc;

    while (got < n && (forks[got] = cucap_i_kept_new(b)) != NULL)
        got++;
    if (got < n)
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    for (i = 0; i < n; i++)
        bare += !cucap_i_builder_stream(forks[i]);
    if (bare == 0 && *ev)
        return CUDA_SUCCESS;   /* every fork has its stream, the builder its event */
    if ((rc = take_split_handles(b, ctx, bare, streams, ev, caller, err)) != CUDA_SUCCESS)
        return rc;
    for (i = 0, bare = 0; i < n; i++)
        if (!cucap_i_builder_stream(forks[i]))
            cucap_i_kept_fork_set_stream(forks[i], streams[bare++], ctx);
    return CUDA_SUCCESS;
}

/* The n forks' streams made to wait on ev, where b stands, and so
 * joined to its capture (kept forks their own streams, new ones from the
 * slab on streams[]): *made of them started; on a failure the streams
 * not started are given back. */
static CUresult start_forks(cucap_builder *b, const struct cucap_builder_facts *at, struct ctx_hold *on, CUevent ev,
                           size_t n, cucap_builder **forks, CUstream *streams, struct builder_slab *slab, int kept,
                           size_t *made, const char *caller, cucap_error **err)
{
    unsigned long serial = cucap_i_builder_capture_serial(b);
    CUresult rc = CUDA_SUCCESS;
    size_t i;

    for (*made = 0; *made < n; ++*made) {
        CUstream s = kept ? cucap_i_builder_stream(forks[*made]) : streams[*made];
        if ((rc = fork_wait(on, at->ctx, s, ev)) != CUDA_SUCCESS) {
            rc = cucap_i_fail_in_capture(at->h, at->stream, rc, caller, "cuStreamWaitEvent", NULL, err);
            /* it may have joined nothing, or the capture: destroying is legal; the rest joined nothing */
            cucap_i_drv.cuStreamDestroy(s);
            if (kept)
                cucap_i_kept_fork_set_stream(forks[*made], NULL, NULL);   /* it takes a new one next time */
            for (i = *made + 1; i < n && !kept; i++)
                cucap_i_give_stream(on, streams[i], caller);
            break;
        }
        if (kept)
            cucap_i_fork_start_kept(forks[*made], at->h, serial);
        else
            forks[*made] = cucap_i_fork_start_new(slab, *made, s, on, at->h);
    }
    if (!kept)
        cucap_i_ctx_hold_ref_by(on, *made);
    return rc;
}

/* A failed split hands out nothing: forks that did no work join
 * nothing, and those in the capture (the first `made`) leave it. */
static void hand_out_nothing(cucap_builder **forks, size_t n, size_t made, int kept, const char *caller)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (i < made && kept)
            (void)cucap_i_builder_close_as(forks[i], caller, "closing a fork of a split that failed", NULL);
        else if (i < made)
            cucap_builder_destroy(forks[i]);
        forks[i] = NULL;
    }
}

/* What a split holds between its steps: the forks' streams (on the
 * stack for up to 16) and, for new forks, their slab. */
struct split_room {
    CUstream local[16], *streams;
    struct builder_slab *slab;
};

/* What differs before the lock: kept forks as the last split left them
 * need nothing new (*again); otherwise the forks are cleared, a kept
 * split closes stale kept forks, and room is made. */
static CUresult prepare_forks(cucap_builder *b, size_t n, cucap_builder **forks, int kept, struct split_room *room,
                              int *again, const char *caller, cucap_error **err)
{
    size_t i;

    room->streams = room->local;
    room->slab = NULL;
    if (kept && (*again = cucap_i_kept_as_last_time(b, n, forks)))
        return CUDA_SUCCESS;
    for (i = 0; i < n; i++)
        forks[i] = NULL;
    if (kept)
        cucap_i_kept_close_stale(b, caller);
    if ((n > 16 && !(room->streams = malloc(n * sizeof *room->streams))) ||
        (!kept && !(room->slab = cucap_i_builder_slab_new(n))))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    return CUDA_SUCCESS;
}

/* The split under the graph lock of b's running capture (or with b
 * its sole user): handles taken (unless again), one event recorded where b
 * stands, every fork's stream made to wait on it (*made started), the
 * forks linked to b. */
static CUresult split_locked(cucap_builder *b, const struct cucap_builder_facts *at, struct ctx_hold *on, size_t n,
                             cucap_builder **forks, int kept, int again, struct split_room *room, size_t *made,
                             const char *caller, cucap_error **err)
{
    CUevent ev = keeps_split_event(at, on) ? cucap_i_builder_split_event(b) : NULL;
    CUresult rc;
    size_t i;

    if (!again && (rc = kept ? take_kept(b, n, forks, room->streams, &ev, caller, err)
                             : take_split_handles(b, on, n, room->streams, &ev, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuEventRecord(ev, at->stream)) != CUDA_SUCCESS) {
        rc = cucap_i_fail_in_capture(at->h, at->stream, rc, caller, "cuEventRecord", NULL, err);
        cucap_i_give_event(at->ctx, cucap_i_capture_deferral(at->h), ev, caller);
        if (keeps_split_event(at, on))
            cucap_i_builder_keep_split_event(b, NULL);
        for (i = 0; i < n && !kept; i++)
            cucap_i_give_stream(on, room->streams[i], caller);
        return rc;
    }
    rc = start_forks(b, at, on, ev, n, forks, room->streams, room->slab, kept, made, caller, err);
    if (rc == CUDA_SUCCESS && cucap_i_fork_links_add(b, forks, n) != 0)
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    split_done(at, keep_split_event(b, at, on, ev), forks, *made, caller);
    return rc;
}

/* Every split: count - 1 forks of b whose streams are of context `on`,
 * new ones (their builders in one slab) or, kept, b's kept forks. */
static CUresult split(cucap_builder *b, struct ctx_hold *on, size_t count, cucap_builder **forks, int kept,
                      const char *caller, cucap_error **err)
{
    struct split_room room;
    struct cucap_builder_facts at;
    size_t n = count - 1, made = 0, i;
    int again = 0, locked, running;
    CUresult rc;

    if ((rc = check_split_arguments(b, count, forks, caller, err)) != CUDA_SUCCESS)
        return rc;
    cucap_i_builder_facts(b, &at);
    if (kept && at.kind != CUCAP_BUILDER_PRIMARY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: only a primary builder keeps forks (this one is %s); "
                            "use cucap_builder_split", caller,
                            at.kind == CUCAP_BUILDER_FORKED ? "a fork" : "a conditional body");
    if (at.state != CUCAP_BUILDER_CAPTURING)
        return not_capturing(b, caller, err);
    if ((rc = prepare_forks(b, n, forks, kept, &room, &again, caller, err)) == CUDA_SUCCESS) {
        /* sole: b the capture's only builder, so no other thread may reach it */
        running = cucap_i_capture_lock_running_unless_sole(at.h, &locked);
        if (running)
            rc = split_locked(b, &at, on, n, forks, kept, again, &room, &made, caller, err);
        if (locked)
            cucap_i_capture_unlock(at.h);
        if (!running)   /* a fork whose primary's capture ended */
            rc = not_capturing(b, caller, err);
    }
    if (room.slab)
        cucap_i_builder_slab_done(room.slab, made);
    if (room.streams != room.local)
        free(room.streams);
    if (rc != CUDA_SUCCESS)
        hand_out_nothing(forks, n, made, kept, caller);
    for (i = 0; i < n && rc == CUDA_SUCCESS && kept; i++)
        cucap_i_kept_handed_out(forks[i]);
    return rc;
}

CUresult cucap_builder_split(cucap_builder *b, size_t count, cucap_builder **forks, cucap_error **err)
{
    return split(b, b ? cucap_i_builder_ctx(b) : NULL, count, forks, 0, "cucap_builder_split", err);
}

CUresult cucap_builder_split_kept(cucap_builder *b, size_t count, cucap_builder **forks, cucap_error **err)
{
    return split(b, b ? cucap_i_builder_ctx(b) : NULL, count, forks, 1, "cucap_builder_split_kept", err);
}

CUresult cucap_builder_split_on(cucap_builder *b, CUdevice dev, size_t count, cucap_builder **forks,
                                cucap_error **err)
{
    static const char caller[] = "cucap_builder_split_on";
    struct ctx_hold *own = b ? cucap_i_builder_ctx(b) : NULL, *on;   /* NULL once closed */
    CUresult rc;

    if (own && own->retained && own->dev == dev)
        return split(b, own, count, forks, 0, caller, err);
    if ((rc = check_split_arguments(b, count, forks, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_ctx_hold_primary(dev, &on, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = split(b, on, count, forks, 0, caller, err);
    cucap_i_ctx_hold_release(on);   /* each fork holds its own reference */
    return rc;
}
