/* Graph builders: creation, the capture state machine (begin, end, reset,
 * close, destroy), a primary's kept forks and kept block, queries, the
 * capture lock as builders take it, and enqueue under it.  The struct and its checks:
 * builder-object.c, with its memory and list of open forks; what an
 * ended builder hands out: builder-complete.c; embed: embed.c; split and
 * join: split.c, join.c; conditional nodes:
 * conditional.c, and body.c for attaching a body; the capture:
 * capture.c and graph-owner.c; streams and events: stream-cache.c; the parameter block
 * and named kernels: builder-params.c. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builder-internal.h"
#include "capture-registry.h"
#include "driver.h"
#include "capture.h"
#include "graph-owner.h"
#include "error.h"
#include "body.h"
#include "builder-object.h"
#include "context-hold.h"
#include "device-table.h"
#include "builder-object.h"
#include "free-list.h"
#include "graph.h"
#include "params.h"
#include "stream-cache.h"

/* ---------------------------------------------------------------- creation */

/* Builders of cucap_builder_create destroyed between captures, kept with
 * their stream and context hold (not their parameter block) for the next
 * cucap_builder_create of their device, which then costs what a reset
 * does (no stream or context to find); in the device's entry of the
 * device table, until cucap_release_cached. */
void cucap_i_builder_kept_drain(void)
{
    struct cucap_device_entry *entry;
    cucap_builder *b;
    int dev;

    for (dev = 0; dev < cucap_i_device_entries(); dev++)
        while ((entry = cucap_i_device_entry(dev)) && (b = cucap_i_free_list_take(&entry->kept_builders)) != NULL) {
            (void)cucap_i_builder_close_as(b, "cucap_builder_destroy", "destroying a kept builder", NULL);
            cucap_i_builder_free(b);
        }
}

CUresult cucap_builder_create(CUdevice dev, cucap_builder **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create";
    struct cucap_device_entry *entry;
    struct ctx_hold *hold;
    CUstream s = NULL;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((entry = cucap_i_device_entry(dev)) && (*out = cucap_i_free_list_take(&entry->kept_builders)) != NULL)
        return CUDA_SUCCESS;
    if ((rc = cucap_i_ctx_hold_primary(dev, &hold, caller, err)) != CUDA_SUCCESS)
        return rc;
    /* the stream comes from the cache and goes back to it (release) */
    if ((rc = cucap_i_take_stream(hold, &s, caller)) != CUDA_SUCCESS)
        rc = cucap_i_fail_driver(err, rc, caller, "cuStreamCreate (with the stream's context made current)");
    else if (!(*out = cucap_i_builder_new(CUCAP_BUILDER_PRIMARY, CUCAP_BUILDER_NOT_STARTED, s, 1, hold))) {
        cucap_i_give_stream(hold, s, caller);
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    } else
        (*out)->cached_stream = 1;
    cucap_i_ctx_hold_release(hold);   /* the builder holds its own reference */
    return rc;
}

CUresult cucap_builder_create_on_stream(CUstream s, cucap_builder **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create_on_stream";
    struct ctx_hold *hold;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: the legacy and per-thread default streams cannot capture; pass a stream made "
                            "with cuStreamCreate", caller);
    if ((rc = cucap_i_driver(caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_ctx_hold_of_stream(s, &hold, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(*out = cucap_i_builder_new(CUCAP_BUILDER_PRIMARY, CUCAP_BUILDER_NOT_STARTED, s, 0, hold)))
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    cucap_i_ctx_hold_release(hold);   /* the builder holds its own reference */
    return rc;
}

/* ---------------------------------------------------------------- spare streams */

/* A PRIMARY builder of a retained context keeps up to two streams of its
 * ending capture's joined forks, instead of giving them back to the
 * cache, and its next split takes them first: what a hand-written loop
 * does with its fork streams.  Called once the driver ended the capture
 * (every stream of it out of it), under its graph lock, before the
 * deferral gives the rest back. */
static void keep_spare_streams(cucap_builder *b)
{
    size_t room = sizeof b->spare_streams / sizeof b->spare_streams[0] - b->spare_count;

    if (b->kind == CUCAP_BUILDER_PRIMARY && b->ctx->retained && room)
        b->spare_count += cucap_i_deferral_take_joined(cucap_i_capture_deferral(b->h), b->ctx->ctx, room,
                                                       b->spare_streams + b->spare_count);
}

size_t cucap_i_builder_take_spare_streams(cucap_builder *b, size_t n, CUstream *out)
{
    size_t got = 0;

    while (got < n && b->spare_count)
        out[got++] = b->spare_streams[--b->spare_count];
    return got;
}

/* b's spare streams back to the cache (b is closed). */
static void give_back_spare_streams(cucap_builder *b, const char *caller)
{
    while (b->spare_count)
        cucap_i_give_stream(b->ctx, b->spare_streams[--b->spare_count], caller);
}

/* ---------------------------------------------------------------- begin and end */

/* b's links to its forks and to its split parent gone, under the graph
 * lock of h, the capture they take part in.  Only b's user makes or drops
 * b's own list: one that is not a fork and has none has no link. */
static void drop_fork_links(cucap_builder *b, struct cucap_capture *h)
{
    if (!h || (b->kind != CUCAP_BUILDER_FORKED && !b->forks))
        return;
    cucap_i_capture_lock(h);
    cucap_i_fork_links_release(b);
    cucap_i_capture_unlock(h);
}

/* A body whose capture failed, or could not be attached, may capture again:
 * its body graph was never touched. */
static int body_may_begin_again(const cucap_builder *b)
{
    return b->kind == CUCAP_BUILDER_BODY &&
           (b->state == CUCAP_BUILDER_INVALIDATED || (b->state == CUCAP_BUILDER_ENDED && b->record_failed));
}

/* begin, or with run a direct run's begin: the same checks and state,
 * no capture. */
static CUresult begin(cucap_builder *b, CUstreamCaptureMode mode, struct cucap_direct_run *run, const char *caller,
                      cucap_error **err)
{
    struct cucap_capture *h = NULL;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED || b->state == CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is already building%s", caller,
                            b->kind == CUCAP_BUILDER_FORKED ? " (a forked builder captures from its split on)" : "");
    if (b->state != CUCAP_BUILDER_NOT_STARTED && !body_may_begin_again(b))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot resume building after the capture ended (the builder is %s); create a "
                            "new builder", caller, cucap_i_state_names[b->state]);
    if (b->kind == CUCAP_BUILDER_BODY && (run || !cucap_i_box_graph(b->body_box)))
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the parent's capture was invalidated and the driver discarded its graph, this "
                            "body's graph with it", caller);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: %d is not a capture mode (GLOBAL, THREAD_LOCAL or RELAXED)", caller, (int)mode);
    /* the capture first: nothing to undo when memory is short; its
     * graph and the capture's id are learned when first needed (the end
     * returns the graph, a join sees the id) */
    if (!run && b->spare_h) {
        h = b->spare_h;
        b->spare_h = NULL;
    } else if (!(h = run ? cucap_i_capture_new_direct(b->ctx->ctx, b->stream, run)
                         : cucap_i_capture_new(b->ctx->ctx, b->stream)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    cucap_i_capture_set_mode(h, mode);
    if (!run && (rc = cucap_i_drv.cuStreamBeginCapture(b->stream, mode)) != CUDA_SUCCESS) {
        cucap_i_capture_unref(h, caller);
        return cucap_i_fail_driver(err, rc, caller, "cuStreamBeginCapture");
    }
    if (b->kind == CUCAP_BUILDER_BODY && b->h) {   /* a failed earlier capture of this body */
        drop_fork_links(b, b->h);   /* its forks stay in that capture */
        cucap_i_capture_unref(b->h, caller);
    }
    if (b->kind == CUCAP_BUILDER_BODY) {
        cucap_i_capture_mark_body(h);
        cucap_i_owner_set_body(cucap_i_capture_owner(b->parent_h), b->record, CUCAP_BODY_CAPTURING);
    }
    b->h = h;
    b->state = CUCAP_BUILDER_CAPTURING;
    b->capture_serial++;
    cucap_i_registry_add(&b->registration, b->stream, h);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_begin(cucap_builder *b, CUstreamCaptureMode mode, cucap_error **err)
{
    return begin(b, mode, NULL, "cucap_builder_begin", err);
}

CUresult cucap_i_builder_begin_direct(cucap_builder *b, struct cucap_direct_run *run, const char *caller,
                                      cucap_error **err)
{
    return begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, run, caller, err);
}

/* End the capture and settle who owns its graph, exclusive on the
 * capture from the end's start until the outcome is settled.  Returns
 * the driver's status and never reports it; *g is the graph or NULL. */
static CUresult end_capture(cucap_builder *b, CUgraph *out)
{
    CUstreamCaptureStatus status;
    CUgraph g = NULL;
    CUresult rc;
    int over = 0, locked;

    *out = NULL;
    if (b->state != CUCAP_BUILDER_CAPTURING || b->kind == CUCAP_BUILDER_FORKED)
        return CUDA_SUCCESS;
    /* sole: every fork closed, so no other thread may reach the capture */
    locked = cucap_i_capture_lock_unless_sole(b->h);
    if (cucap_i_capture_direct(b->h)) {   /* nothing to end: the work ran */
        cucap_i_capture_over(b->h, NULL);
        b->state = CUCAP_BUILDER_ENDED;
        if (locked)
            cucap_i_capture_unlock(b->h);
        cucap_i_registry_remove(&b->registration);
        return CUDA_SUCCESS;
    }
    rc = cucap_i_drv.cuStreamEndCapture(b->stream, &g);
    if (g || rc != CUDA_SUCCESS) {
        if (!g && rc != CUDA_SUCCESS &&
            cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
            status != CU_STREAM_CAPTURE_STATUS_NONE) {
            if (locked)
                cucap_i_capture_unlock(b->h);
            return rc;   /* a failed end that left the capture running (never caused by the library) */
        }
        over = 1;
    }
    keep_spare_streams(b);
    if (g) {
        /* owned, every stream of the capture out of it */
        cucap_i_capture_over(b->h, g);
        b->state = CUCAP_BUILDER_ENDED;
    } else {
        /* no graph: the driver discarded it, nothing may destroy it */
        cucap_i_owner_retire(cucap_i_capture_owner(b->h), cucap_i_owner_root_box(cucap_i_capture_owner(b->h)));
        b->state = CUCAP_BUILDER_INVALIDATED;
        if (b->kind == CUCAP_BUILDER_BODY) {
            b->record_failed = 1;
            cucap_i_owner_set_body(cucap_i_capture_owner(b->parent_h), b->record, CUCAP_BODY_FAILED);
        }
        if (rc == CUDA_SUCCESS)
            rc = CUDA_ERROR_UNKNOWN;   /* success without a graph: never seen */
        if (over)
            cucap_i_capture_over(b->h, NULL);   /* every stream of the capture is out of it */
    }
    if (locked)
        cucap_i_capture_unlock(b->h);
    cucap_i_registry_remove(&b->registration);
    *out = g;
    return rc;
}

static CUresult end_failed(cucap_builder *b, CUresult rc, const char *caller, const char *doing, cucap_error **err)
{
    cucap_i_fail(err, rc, "%s: cuStreamEndCapture failed while %s: " CUCAP_I_RESULT_FMT "%s", caller, doing,
                 CUCAP_I_RESULT_ARGS(rc),
                 b->state == CUCAP_BUILDER_INVALIDATED ? "; the driver discarded the graph" : "");
    cucap_i_capture_note_first_failure(b->h, err);
    return rc;
}

/* End the capture; a body's graph is then attached to its node. */
static CUresult end_and_attach(cucap_builder *b, const char *caller, const char *doing, cucap_error **err)
{
    CUgraph g = NULL;
    CUresult rc = end_capture(b, &g);

    if (rc != CUDA_SUCCESS)
        return end_failed(b, rc, caller, doing, err);
    if (g && b->kind == CUCAP_BUILDER_BODY) {
        rc = cucap_i_attach_body(cucap_i_capture_owner(b->parent_h), b->body_box, b->record, g, caller, err);
        b->record_failed = rc != CUDA_SUCCESS;
        return rc;
    }
    return CUDA_SUCCESS;
}

CUresult cucap_builder_end(cucap_builder *b, cucap_error **err)
{
    static const char caller[] = "cucap_builder_end";
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a forked builder is not ended: join it into its primary with cucap_builder_join "
                            "(ending a fork's stream would invalidate the whole capture)", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not building (it is %s)", caller,
                            cucap_i_state_names[b->state]);
    return end_and_attach(b, caller, "ending the capture", err);
}

/* ---------------------------------------------------------------- close and destroy */

/* The last steps of every release: b's cached stream given back unless
 * its release took care of the stream already, b's references let go,
 * CLOSED. */
static void let_go_of_all(cucap_builder *b, int stream_done, const char *caller)
{
    if (!stream_done && b->cached_stream) {
        (void)cucap_i_builder_lock(b);
        cucap_i_give_back_stream(b->ctx, b->stream, b->h, caller);
        cucap_i_builder_unlock(b);
    }
    cucap_i_capture_unref(b->h, caller);
    cucap_i_capture_unref(b->spare_h, caller);
    cucap_i_capture_unref(b->parent_h, caller);
    cucap_i_ctx_hold_release(b->ctx);
    b->h = NULL;
    b->spare_h = NULL;
    b->parent_h = NULL;
    b->ctx = NULL;
    b->stream = NULL;
    b->state = CUCAP_BUILDER_CLOSED;
}

void cucap_i_fork_release(cucap_builder *f, const char *caller)
{
    cucap_i_registry_remove(&f->registration);
    drop_fork_links(f, f->h);
    let_go_of_all(f, 0, caller);
}

static void release(cucap_builder *b, const char *caller)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    int own_stream = b->kind == CUCAP_BUILDER_PRIMARY && b->owns_stream;
    CUresult rc;

    if (b->kind == CUCAP_BUILDER_FORKED) {
        cucap_i_fork_release(b, caller);
        return;
    }
    cucap_i_registry_remove(&b->registration);   /* a capture that could not be ended */
    if (b->split_event) {   /* in b's capture while it runs: reused once that is over */
        (void)cucap_i_builder_lock(b);
        cucap_i_give_event(b->ctx, b->h ? cucap_i_capture_deferral(b->h) : NULL, b->split_event, caller);
        cucap_i_builder_unlock(b);
        b->split_event = NULL;
    }
    give_back_spare_streams(b, caller);
    cucap_i_kept_let_go_all(b, caller);
    cucap_i_params_unref(b->params, caller);
    b->params = NULL;
    drop_fork_links(b, b->h);
    if (own_stream) {
        /* an origin stream whose capture could not be ended is left alone;
         * one in no capture goes back to the cache it came from, one in
         * somebody else's capture (joined into it) is destroyed */
        if (b->state == CUCAP_BUILDER_CAPTURING &&
            cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
            status != CU_STREAM_CAPTURE_STATUS_NONE)
            cucap_i_warn(CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's stream is still capturing and was not "
                         "destroyed", caller);
        else if (b->cached_stream && cucap_i_capture_direct(b->h))
            cucap_i_direct_give_stream(b->h, b->ctx, b->stream, caller);   /* behind the run's work */
        else if (b->cached_stream)
            cucap_i_give_back_stream(b->ctx, b->stream, NULL, caller);   /* its capture is over */
        else if ((rc = cucap_i_drv.cuStreamDestroy(b->stream)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "%s: cuStreamDestroy failed while releasing the builder's stream: " CUCAP_I_RESULT_FMT,
                         caller, CUCAP_I_RESULT_ARGS(rc));
    }
    let_go_of_all(b, own_stream, caller);
}

/* A PRIMARY builder whose capture is over (ENDED or INVALIDATED), made
 * NOT_STARTED: the last capture's forks are no longer b's, and its
 * graph goes with the last reference to it.  A capture that was b's
 * alone (no other thread can reach it) is kept, emptied, for b's next
 * begin. */
static void start_over(cucap_builder *b, const char *caller)
{
    drop_fork_links(b, b->h);
    if (!b->spare_h && cucap_i_capture_start_over(b->h, caller))
        b->spare_h = b->h;
    else
        cucap_i_capture_unref(b->h, caller);
    b->h = NULL;
    b->state = CUCAP_BUILDER_NOT_STARTED;
}

CUresult cucap_builder_reset(cucap_builder *b, cucap_error **err)
{
    static const char caller[] = "cucap_builder_reset";
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind != CUCAP_BUILDER_PRIMARY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: only a PRIMARY builder is reset (a fork is joined and destroyed, a body begins "
                            "again after a failed capture)", caller);
    if (b->state == CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is capturing: end it first", caller);
    if (b->state != CUCAP_BUILDER_NOT_STARTED)
        start_over(b, caller);
    return CUDA_SUCCESS;
}

void cucap_builder_abandon(cucap_builder *b)
{
    static const char caller[] = "cucap_builder_abandon";
    CUgraph g = NULL;
    CUresult rc;

    if (!b || b->state != CUCAP_BUILDER_CAPTURING)
        return;
    if (b->kind == CUCAP_BUILDER_FORKED) {
        cucap_i_warn(CUDA_ERROR_ILLEGAL_STATE, "%s: a fork is not abandoned on its own: abandon its primary's "
                     "capture, or join the fork", caller);
        return;
    }
    /* the driver's UNJOINED, INVALIDATED or WRONG_THREAD still end the
     * capture: only a capture left running is a failure here */
    if ((rc = end_capture(b, &g)) != CUDA_SUCCESS && b->state == CUCAP_BUILDER_CAPTURING &&
        (rc = end_capture(b, &g)) != CUDA_SUCCESS && b->state == CUCAP_BUILDER_CAPTURING) {
        cucap_i_warn(rc, "%s: cuStreamEndCapture failed, twice, and left the capture running: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
        return;
    }
    if (b->kind == CUCAP_BUILDER_PRIMARY) {
        start_over(b, caller);   /* its graph, if the end made one, destroyed */
        return;
    }
    /* a body: its graph is never attached; its node's body stays empty,
     * and the parent refuses to instantiate, until it captures again */
    b->record_failed = 1;
    cucap_i_owner_set_body(cucap_i_capture_owner(b->parent_h), b->record, CUCAP_BODY_FAILED);
    b->state = CUCAP_BUILDER_INVALIDATED;
}

CUresult cucap_i_builder_close_as(cucap_builder *b, const char *caller, const char *doing, cucap_error **err)
{
    CUgraph ignored;
    CUresult rc;

    if (!b || b->state == CUCAP_BUILDER_CLOSED)
        return CUDA_SUCCESS;
    rc = end_and_attach(b, caller, doing, err);
    /* an end that failed and left the capture running: the builder is
     * going away, so try once more before its stream is abandoned */
    if (rc != CUDA_SUCCESS && b->state == CUCAP_BUILDER_CAPTURING && b->kind != CUCAP_BUILDER_FORKED)
        (void)end_capture(b, &ignored);
    release(b, caller);
    return rc;
}

CUresult cucap_builder_close(cucap_builder *b, cucap_error **err)
{
    return cucap_i_builder_close_as(b, "cucap_builder_close", "closing a builder that was still capturing", err);
}

/* A builder of cucap_builder_create whose capture is over (or never
 * began), made NOT_STARTED as a reset makes it and kept for the next
 * cucap_builder_create of its device: 1, or 0 when it cannot be (it is
 * then destroyed as any other). */
static int keep_for_create(cucap_builder *b)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    struct cucap_device_entry *entry;

    if (b->kind != CUCAP_BUILDER_PRIMARY || b->state == CUCAP_BUILDER_CAPTURING || b->state == CUCAP_BUILDER_CLOSED ||
        !b->cached_stream || !b->ctx->retained || !(entry = cucap_i_device_entry(b->ctx->dev)))
        return 0;
    /* as release proves before the cache gets the stream */
    if (cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL) != CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    if (cucap_i_capture_direct(b->h) && !cucap_i_stream_idle(b->ctx->ctx, b->stream, "cucap_builder_destroy"))
        return 0;   /* its stream is behind work in flight: destroyed (stream-cache.h) */
    if (b->h)   /* ENDED or INVALIDATED */
        start_over(b, "cucap_builder_destroy");
    cucap_i_kept_let_go_all(b, "cucap_builder_destroy");   /* its kept forks were its user's */
    /* its block stays with the executable graphs that read it: the next
     * create's captures are another user's, whose launches must not wait
     * for these graphs' */
    cucap_i_params_unref(b->params, "cucap_builder_destroy");
    b->params = NULL;
    return cucap_i_free_list_give(&entry->kept_builders, b);
}

void cucap_builder_destroy(cucap_builder *b)
{
    cucap_error *e = NULL;

    if (!b || keep_for_create(b))
        return;
    if (cucap_i_builder_close_as(b, "cucap_builder_destroy", "destroying a builder that was still capturing", &e) != CUDA_SUCCESS)
        cucap_i_warn_error(e);
    if (b->is_kept)
        cucap_i_kept_fork_destroy(b, "cucap_builder_destroy");
    else
        cucap_i_builder_free(b);
}

/* ---------------------------------------------------------------- kept forks */

/* A primary builder's kept forks: the forks of cucap_builder_split_kept,
 * which stay the builder's from one capture to the next with their
 * streams and context, as well as the caller's until it destroys them. */

static void let_go_of_kept(cucap_builder *f)
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
        cucap_i_give_back_stream(f->ctx, f->stream, NULL, caller);
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
        /* the caller destroyed it */
        if (f->handed_out && atomic_load_explicit(&f->holders, memory_order_acquire) == 1) {
            let_go_of_kept(f);
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
        let_go_of_kept(f);
    }
    if (b->kept) {
        free(b->kept);
        b->kept = NULL;
        b->kept_count = b->kept_cap = 0;
    }
}

void cucap_i_kept_fork_destroy(cucap_builder *f, const char *caller)
{
    release_kept(f, caller);   /* a join left it its stream */
    let_go_of_kept(f);
}

/* Kept forks of b's earlier captures that were left unjoined (their
 * capture is over, they still say so): closed, so that a split may take
 * them again.  Before the graph lock: closing takes their own capture's. */
void cucap_i_kept_close_stale(cucap_builder *b, const char *caller)
{
    size_t i;

    for (i = 0; i < b->kept_count; i++) {
        cucap_builder *f = b->kept[i];
        if (f->state != CUCAP_BUILDER_CLOSED && f->kept_serial != b->capture_serial &&
            (!f->handed_out || atomic_load_explicit(&f->holders, memory_order_acquire) == 2) &&
            cucap_builder_get_state(f) != CUCAP_BUILDER_CAPTURING)
            (void)cucap_i_builder_close_as(f, caller, "closing a kept fork that an earlier capture left unjoined",
                                           NULL);
    }
}

int cucap_i_kept_as_last_time(cucap_builder *b, size_t n, cucap_builder **forks)
{
    size_t i;

    if (n > b->kept_count || !b->split_event)
        return 0;
    for (i = 0; i < n; i++) {
        cucap_builder *f = b->kept[i];
        if (f->state != CUCAP_BUILDER_CLOSED || !f->stream || f->ctx != b->ctx || !f->handed_out ||
            f->kept_serial == b->capture_serial || atomic_load_explicit(&f->holders, memory_order_acquire) != 2)
            return 0;
        forks[i] = f;
    }
    return 1;
}

/* ---------------------------------------------------------------- the block a primary keeps */

struct cucap_params *cucap_i_builder_kept_params(cucap_builder *b, size_t size)
{
    if (b->kind != CUCAP_BUILDER_PRIMARY || !b->params || cucap_i_params_size(b->params) != size)
        return NULL;
    cucap_i_params_ref(b->params);
    return b->params;
}

void cucap_i_builder_offer_params(cucap_builder *b, struct cucap_params *p)
{
    if (b->kind != CUCAP_BUILDER_PRIMARY || b->params == p)
        return;
    cucap_i_params_ref(p);
    cucap_i_params_unref(b->params, "cucap_builder_params");
    b->params = p;
}

/* ---------------------------------------------------------------- queries */

cucap_builder_state cucap_builder_get_state(const cucap_builder *b)
{
    if (!b)
        return CUCAP_BUILDER_CLOSED;
    /* a fork is in its primary's capture: once that is over, so is the fork */
    if (b->kind == CUCAP_BUILDER_FORKED && b->state == CUCAP_BUILDER_CAPTURING && cucap_i_capture_is_over(b->h))
        return cucap_i_capture_has_graph(b->h) ? CUCAP_BUILDER_ENDED : CUCAP_BUILDER_INVALIDATED;
    return b->state;
}

CUresult cucap_builder_is_building(const cucap_builder *b, int *building, cucap_error **err)
{
    static const char caller[] = "cucap_builder_is_building";
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    if (!building)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: building is NULL", caller);
    *building = 0;
    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_FORKED && !cucap_i_builder_lock(b)) {   /* its primary's capture is over */
        cucap_i_builder_unlock(b);
        return CUDA_SUCCESS;
    }
    rc = cucap_i_drv.cuStreamGetCaptureInfo(b->stream, &status, NULL, NULL, NULL, NULL, NULL);
    if (b->kind == CUCAP_BUILDER_FORKED)
        cucap_i_builder_unlock(b);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                            "%s: the driver invalidated the capture; call cucap_builder_end to end it (it reports "
                            "why)", caller);
    *building = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- the capture lock, and enqueue under it */

/* See builder-internal.h.  Returns whether the capture is still running;
 * the caller unlocks with cucap_i_builder_unlock whatever it returned. */
int cucap_i_builder_lock(const cucap_builder *b)
{
    return b->h ? cucap_i_capture_lock_running(b->h) : 0;
}

void cucap_i_builder_unlock(const cucap_builder *b)
{
    if (b->h)
        cucap_i_capture_unlock(b->h);
}

/* The same for two builders (join's root and another), in a fixed order. */
int cucap_i_builders_lock_pair(const cucap_builder *a, const cucap_builder *b)
{
    int running;

    if (!a->h || !b->h || a->h == b->h)
        return cucap_i_builder_lock(a) & (a->h == b->h ? 1 : cucap_i_builder_lock(b));
    if ((uintptr_t)a->h < (uintptr_t)b->h) {
        running = cucap_i_builder_lock(a);
        return cucap_i_builder_lock(b) & running;
    }
    running = cucap_i_builder_lock(b);
    return cucap_i_builder_lock(a) & running;
}

void cucap_i_builders_unlock_pair(const cucap_builder *a, const cucap_builder *b)
{
    cucap_i_builder_unlock(a);
    if (b->h != a->h)
        cucap_i_builder_unlock(b);
}

CUresult cucap_builder_enqueue(cucap_builder *b, cucap_enqueue_fn fn, void *user_data, cucap_error **err)
{
    return cucap_i_builder_enqueue_as(b, fn, user_data, "cucap_builder_enqueue", "the work of cucap_builder_enqueue",
                                      err);
}

CUresult cucap_i_builder_enqueue_as(cucap_builder *b, cucap_enqueue_fn fn, void *user_data, const char *caller,
                                    const char *what, cucap_error **err)
{
    struct cucap_capture *h;
    CUcontext ctx, saved = NULL;
    CUstream s;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: fn is NULL", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING || !b->h)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[b->state]);
    /* fn may close b: nothing of b is read after it runs */
    h = b->h;
    ctx = b->ctx->ctx;
    s = b->stream;
    cucap_i_capture_ref(h);
    if (!cucap_i_builder_lock(b)) {
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's capture ended (its primary's end came "
                          "first); the work was not enqueued", caller);
    } else if ((rc = cucap_i_ctx_enter_for(ctx, &saved, caller, err)) == CUDA_SUCCESS) {
        if ((rc = fn(s, user_data)) != CUDA_SUCCESS) {
            cucap_i_capture_failed(h, what, rc);
            cucap_i_fail(err, rc, "%s: the work failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
        }
        rc = cucap_i_ctx_leave_for(ctx, saved, rc, caller, err);
    }
    cucap_i_capture_unlock(h);
    cucap_i_capture_unref(h, caller);
    return rc;
}
