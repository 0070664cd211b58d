/* A step run eagerly: a capture function's work done at once on a builder
 * that does not capture (a direct run, capture.h), between the work
 * queued on the caller's stream before and after it; its parameter block
 * memory of the run, freed behind it.  For graph sets, whose keys cannot
 * be captured.  Internal. */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "builder-internal.h"
#include "context-hold.h"
#include "driver.h"
#include "eager-run.h"
#include "error.h"
#include "hand-back.h"
#include "capture.h"
#include "staging.h"
#include "stream-cache.h"

/* The direct run of one step: its values, and the block made for them. */
struct cucap_eager_run {
    struct cucap_direct_run direct;  /* first: the builders see this */
    unsigned long long after;        /* the id of the stream the run follows, 0 when it cannot be read */
    struct ctx_hold *hold;
    const void *values;              /* the parameter block's values, or NULL */
    size_t size;
    CUdeviceptr block;               /* made by cucap_builder_params, freed behind the run */
    struct cucap_staging_ring staged;   /* the pinned buffer of values above 64 KiB */
};

/* ---------------------------------------------------------------- streams kept behind earlier runs */

/* Streams a run left behind its work (a fork's, or its builder's), kept
 * for later runs that follow the same stream: their origin waits for that
 * stream's work, which includes the earlier run's, so a fork on a kept
 * stream waits for nothing more.  Without them each run behind held work
 * made a new stream, and the driver's cuStreamCreate waited for the held
 * work once enough streams were left behind it (measured on the H100:
 * after 174 to 232).  A stream whose work is done goes back to the cache
 * as any other (capture.c); when the table is full, one of its idle
 * streams is destroyed, or else the new one is. */
#define KEPT_STREAMS 64

struct kept_stream {
    CUcontext ctx;
    unsigned long long after;        /* the id of the stream its run followed */
    CUstream s;
};

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept_stream kept[KEPT_STREAMS];
static size_t kept_count;

static CUstream take_kept_stream(struct cucap_direct_run *direct, CUcontext ctx)
{
    struct cucap_eager_run *run = (struct cucap_eager_run *)direct;
    CUstream s = NULL;
    size_t i;

    if (!run->after)
        return NULL;
    pthread_mutex_lock(&kept_lock);
    for (i = 0; i < kept_count; i++)
        if (kept[i].ctx == ctx && kept[i].after == run->after) {
            s = kept[i].s;
            kept[i] = kept[--kept_count];
            break;
        }
    pthread_mutex_unlock(&kept_lock);
    return s;
}

static int keep_stream(struct cucap_direct_run *direct, CUcontext ctx, CUstream s)
{
    struct cucap_eager_run *run = (struct cucap_eager_run *)direct;
    CUstream idle = NULL;
    size_t i;

    if (!run->after)
        return 0;
    pthread_mutex_lock(&kept_lock);
    for (i = 0; kept_count == KEPT_STREAMS && i < kept_count; i++)
        if (cucap_i_drv.cuStreamQuery(kept[i].s) == CUDA_SUCCESS) {
            idle = kept[i].s;
            kept[i] = kept[--kept_count];
        }
    if (kept_count < KEPT_STREAMS)
        kept[kept_count++] = (struct kept_stream){ ctx, run->after, s };
    else
        s = NULL;
    pthread_mutex_unlock(&kept_lock);
    if (idle)
        (void)cucap_i_drv.cuStreamDestroy(idle);
    return s != NULL;
}

/* Idle: to the cache; behind the run's work: kept, or destroyed when the
 * table is full; anything else (a stream some capture took) destroyed. */
static void give_stream(struct cucap_direct_run *direct, struct ctx_hold *c, CUstream s, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    cucap_i_work_enter_quietly(&w, c->ctx, caller);
    rc = cucap_i_drv.cuStreamQuery(s);
    cucap_i_work_leave_quietly(&w, caller);
    if (rc == CUDA_SUCCESS)
        cucap_i_give_stream(c, s, caller);
    else if ((rc != CUDA_ERROR_NOT_READY || !keep_stream(direct, c->ctx, s)) &&
             (rc = cucap_i_drv.cuStreamDestroy(s)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuStreamDestroy failed on a stream behind an eager run: " CUCAP_I_RESULT_FMT, caller,
                     CUCAP_I_RESULT_ARGS(rc));
}

void cucap_i_eager_streams_drain(void)
{
    struct cucap_work_scope w;
    CUresult rc;

    pthread_mutex_lock(&kept_lock);
    while (kept_count) {
        struct kept_stream *k = &kept[--kept_count];
        cucap_i_work_enter_quietly(&w, k->ctx, "cucap_release_cached");
        if ((rc = cucap_i_drv.cuStreamDestroy(k->s)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "cucap_release_cached: cuStreamDestroy failed on a stream kept behind an eager run: "
                         CUCAP_I_RESULT_FMT, CUCAP_I_RESULT_ARGS(rc));
        cucap_i_work_leave_quietly(&w, "cucap_release_cached");
    }
    pthread_mutex_unlock(&kept_lock);
}

/* The run's block: memory of the run, from the device's pool in stream
 * order on s, holding the run's values once the copy queued behind it
 * ran. */
static CUresult eager_params(struct cucap_direct_run *direct, CUcontext ctx, CUdevice dev, CUstream s, size_t size,
                             CUdeviceptr *block, const char *caller, cucap_error **err)
{
    struct cucap_eager_run *run = (struct cucap_eager_run *)direct;
    struct cucap_work_scope w;
    CUmemoryPool pool = NULL;
    CUresult rc;

    if (run->block)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture has its parameter block already: one "
                            "per capture, so put every value its work reads in one struct", caller);
    if (run->values && size != run->size)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a block of %zu bytes, for values of %zu bytes",
                            caller, size, run->size);
    if ((rc = cucap_i_work_enter(&w, ctx, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuDeviceGetMemPool(&pool, dev)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuDeviceGetMemPool");
    else if ((rc = cucap_i_drv.cuMemAllocFromPoolAsync(&run->block, size, pool, s)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuMemAllocFromPoolAsync");
    else if (run->values)
        rc = cucap_i_staging_copy(&run->staged, run->hold, run->block, run->values, size, s, caller, err);
    if (rc == CUDA_SUCCESS)
        *block = run->block;
    return cucap_i_work_leave(&w, rc, caller, err);
}

static void free_eager_block(CUcontext ctx, struct cucap_eager_run *run, CUstream on, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    cucap_i_work_enter_quietly(&w, ctx, caller);
    if ((rc = cucap_i_drv.cuMemFreeAsync(run->block, on)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuMemFreeAsync failed while freeing an eager run's parameter block: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    cucap_i_work_leave_quietly(&w, caller);
}

/* later waits for the work queued on earlier so far. */
static CUresult order_after(CUcontext ctx, CUstream later, CUstream earlier, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_stream_after(ctx, later, earlier, NULL);

    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "ordering one stream after another (cuEventCreate, "
                                   "cuEventRecord, cuStreamWaitEvent)");
    return CUDA_SUCCESS;
}

/* s waits for the run's work on from (hand-back.h). */
static CUresult hand_back(struct ctx_hold *hold, CUstream s, CUstream from, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_hand_back(hold, s, from, NULL, caller);

    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "handing the run's work back to its stream (cuEventRecord and "
                                   "cuStreamWaitEvent, or cuStreamWriteValue64 and cuStreamWaitValue64)");
    return CUDA_SUCCESS;
}

/* fn on b; a failure without an error object gets one. */
static CUresult call_eagerly(cucap_capture_fn fn, cucap_builder *b, void *user_data, const char *caller,
                             cucap_error **err)
{
    cucap_error *e = NULL;
    CUresult rc = fn(b, user_data, &e);

    if (rc == CUDA_SUCCESS) {
        cucap_error_free(e);
        return rc;
    }
    if (!e)
        return cucap_i_fail(err, rc, "%s: the capture function failed: it returned %s", caller, cucap_result_name(rc));
    if (err && !*err)
        *err = e;   /* its own error, its notes with it */
    else
        cucap_error_free(e);
    return rc;
}

/* The run's builder: on s itself, borrowed, when s is a stream of hold's
 * context that a builder can borrow (the run's work then follows s's and
 * precedes what s queues next with no stream of its own, none left behind
 * work in flight); otherwise on a stream of the library's. */
static CUresult builder_for(struct ctx_hold *hold, CUstream s, cucap_builder **b, int *borrowed, cucap_error **err)
{
    CUcontext ctx = NULL;

    *borrowed = 0;
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD && cucap_i_drv.cuStreamGetCtx(s, &ctx) == CUDA_SUCCESS &&
        ctx == hold->ctx && cucap_builder_create_on_stream(s, b, NULL) == CUDA_SUCCESS) {
        *borrowed = 1;
        return CUDA_SUCCESS;
    }
    return cucap_builder_create(hold->dev, b, err);
}

CUresult cucap_i_run_eagerly(struct ctx_hold *hold, cucap_capture_fn fn, void *user_data, const void *values,
                             size_t values_size, CUstream s, const char *caller, cucap_error **err)
{
    CUcontext ctx = hold->ctx;
    struct cucap_eager_run run;
    cucap_builder *b = NULL;
    int borrowed = 0;
    CUresult rc, done;

    memset(&run, 0, sizeof run);
    run.direct.params = eager_params;
    run.direct.take_stream = take_kept_stream;
    run.direct.give_stream = give_stream;
    if (cucap_i_drv.cuStreamGetId(s, &run.after) != CUDA_SUCCESS)
        run.after = 0;   /* nothing kept for it */
    run.hold = hold;
    run.values = values;
    run.size = values_size;
    if ((rc = builder_for(hold, s, &b, &borrowed, err)) != CUDA_SUCCESS)
        return rc;
    if ((borrowed || (rc = order_after(ctx, cucap_builder_stream(b), s, caller, err)) == CUDA_SUCCESS) &&
        (rc = cucap_i_builder_begin_direct(b, &run.direct, caller, err)) == CUDA_SUCCESS) {
        rc = call_eagerly(fn, b, user_data, caller, err);
        /* forks left open are joined: their work is the step's too */
        done = cucap_builder_join_forks(b, rc == CUDA_SUCCESS ? err : NULL);
        rc = rc == CUDA_SUCCESS ? done : rc;
        done = cucap_builder_end(b, rc == CUDA_SUCCESS ? err : NULL);
        rc = rc == CUDA_SUCCESS ? done : rc;
        /* the block freed before s is handed its work back: what s waits
         * for then includes the free, so the memory is the pool's again
         * once s's work is done (forks were joined into b) */
        if (run.block)
            free_eager_block(ctx, &run, cucap_builder_stream(b), caller);
        if (!borrowed) {
            done = hand_back(hold, s, cucap_builder_stream(b), caller, rc == CUDA_SUCCESS ? err : NULL);
            rc = rc == CUDA_SUCCESS ? done : rc;
        }
    }
    cucap_i_staging_ring_give_back(&run.staged);
    cucap_builder_destroy(b);
    return rc;
}
