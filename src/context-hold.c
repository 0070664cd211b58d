/* The context and capture mode a call runs in: holds on the context a
 * builder's stream or a pool lives in (a device's primary context,
 * retained once and shared by every holder of it, or the context of a
 * borrowed stream, which the caller keeps alive), making a context current
 * for a call, and relaxed capture mode for calls a capture would refuse. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "context-hold.h"
#include "device-table.h"
#include "driver.h"
#include "error.h"

/* The context a stream's work runs in.  For a stream of a green context
 * that is the green context's own CUcontext (cuCtxFromGreenCtx): streams
 * made with it current belong to the green context, so forks stay in the
 * SM partition the user chose.  cuStreamGetCtx_v2 returns the device's
 * primary context there and the green context beside it; the first
 * variant returns the converted context itself. */
static CUresult stream_context(CUstream s, CUcontext *ctx)
{
#if CUDA_VERSION >= 12050
    if (cucap_i_drv.cuStreamGetCtx_v2) {   /* CUDA 12.5 drivers and newer */
        CUgreenCtx green = NULL;
        CUresult rc = cucap_i_drv.cuStreamGetCtx_v2(s, ctx, &green);
        if (rc == CUDA_SUCCESS && green)
            rc = cucap_i_drv.cuCtxFromGreenCtx ? cucap_i_drv.cuCtxFromGreenCtx(ctx, green) : CUDA_ERROR_NOT_SUPPORTED;
        return rc;
    }
#endif
    return cucap_i_drv.cuStreamGetCtx(s, ctx);
}

void cucap_i_ctx_hold_release(struct ctx_hold *c)
{
    cucap_i_ctx_hold_release_by(c, 1);
}

void cucap_i_ctx_hold_ref_by(struct ctx_hold *c, size_t n)
{
    atomic_fetch_add_explicit(&c->refs, (int)n, memory_order_relaxed);
}

void cucap_i_ctx_hold_release_by(struct ctx_hold *c, size_t n)
{
    CUresult rc;

    if (!c || n == 0 || atomic_fetch_sub_explicit(&c->refs, (int)n, memory_order_acq_rel) != (int)n)
        return;
    if (c->retained && (rc = cucap_i_drv.cuDevicePrimaryCtxRelease(c->dev)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cuDevicePrimaryCtxRelease failed while releasing device %d's primary "
                     "context: " CUCAP_I_RESULT_FMT, (int)c->dev, CUCAP_I_RESULT_ARGS(rc));
    free(c);
}

/* Holds on primary contexts, shared by every object of the library on
 * the context: the device table keeps one reference, so the retain is
 * made once per device (until cucap_release_cached, which runs while no
 * other thread calls the library). */

/* The shared hold of ctx (or, ctx NULL, of dev's primary context) with a
 * reference for the caller, or NULL. */
static struct ctx_hold *shared_hold(CUcontext ctx, CUdevice dev)
{
    struct cucap_device_entry *entry;
    struct ctx_hold *h = NULL;
    int i;

    if (!ctx)
        h = (entry = cucap_i_device_entry(dev)) ? atomic_load_explicit(&entry->primary_hold, memory_order_acquire)
                                                : NULL;
    for (i = 0; ctx && !h && i < cucap_i_device_entries(); i++)
        if ((entry = cucap_i_device_entry(i)) &&
            (h = atomic_load_explicit(&entry->primary_hold, memory_order_acquire)) && h->ctx != ctx)
            h = NULL;
    if (h)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    return h;
}

/* Keep a new retained hold in its device's entry (a reference of its
 * own), unless another thread put one there first. */
static void share_hold(struct ctx_hold *hold)
{
    struct cucap_device_entry *entry = cucap_i_device_entry(hold->dev);
    struct ctx_hold *none = NULL;

    if (!entry)
        return;
    atomic_fetch_add_explicit(&hold->refs, 1, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&entry->primary_hold, &none, hold, memory_order_acq_rel,
                                                 memory_order_relaxed))
        atomic_fetch_sub_explicit(&hold->refs, 1, memory_order_relaxed);
}

void cucap_i_ctx_holds_drain(void)
{
    struct cucap_device_entry *entry;
    struct cucap_relaxed_scope scope;
    int dev, relaxed;

    relaxed = cucap_i_relaxed_enter(&scope, "cucap_release_cached", NULL) == CUDA_SUCCESS;
    for (dev = 0; dev < cucap_i_device_entries(); dev++)
        if ((entry = cucap_i_device_entry(dev)))
            cucap_i_ctx_hold_release(atomic_exchange_explicit(&entry->primary_hold, NULL, memory_order_acq_rel));
    if (relaxed)
        cucap_i_relaxed_leave(&scope, CUDA_SUCCESS, "cucap_release_cached", NULL);
}

/* A new hold of dev's primary context, retained: the caller is in
 * relaxed thread mode (retaining a context is not a stream operation;
 * relaxed mode keeps any capture of the thread out of it all the same). */
static CUresult retain_primary(CUdevice dev, struct ctx_hold **out, const char *caller, cucap_error **err)
{
    struct ctx_hold *hold;
    CUresult rc;

    if (!(hold = calloc(1, sizeof *hold)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    hold->dev = dev;
    atomic_init(&hold->refs, 1);
    if ((rc = cucap_i_drv.cuDevicePrimaryCtxRetain(&hold->ctx, dev)) != CUDA_SUCCESS) {
        free(hold);
        return cucap_i_fail_driver(err, rc, caller, "cuDevicePrimaryCtxRetain");
    }
    hold->retained = 1;
    *out = hold;
    return CUDA_SUCCESS;
}

CUresult cucap_i_ctx_hold_primary_relaxed(CUdevice dev, struct ctx_hold **out, const char *caller, cucap_error **err)
{
    CUresult rc;

    if ((*out = shared_hold(NULL, dev)) != NULL)
        return CUDA_SUCCESS;
    if ((rc = retain_primary(dev, out, caller, err)) == CUDA_SUCCESS)
        share_hold(*out);
    return rc;
}

CUresult cucap_i_ctx_hold_primary(CUdevice dev, struct ctx_hold **out, const char *caller, cucap_error **err)
{
    struct cucap_relaxed_scope scope;
    struct ctx_hold *hold = NULL;
    CUresult rc;

    if ((*out = shared_hold(NULL, dev)) != NULL)
        return CUDA_SUCCESS;
    if ((rc = cucap_i_check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = retain_primary(dev, &hold, caller, err);
    rc = cucap_i_relaxed_leave(&scope, rc, caller, err);
    if (rc != CUDA_SUCCESS) {
        cucap_i_ctx_hold_release(hold);
        return rc;
    }
    share_hold(hold);
    *out = hold;
    return CUDA_SUCCESS;
}

/* The device of a context: cuCtxGetDevice_v2 (CUDA 13 drivers) reads any
 * context; before it, cuCtxGetDevice reads the current one only. */
static CUresult context_device(CUcontext ctx, CUdevice *dev)
{
    CUcontext saved = NULL;
    CUresult rc, left;

#if CUDA_VERSION >= 13000
    if (cucap_i_drv.cuCtxGetDevice_v2)
        return cucap_i_drv.cuCtxGetDevice_v2(dev, ctx);
#endif
    if ((rc = cucap_i_ctx_enter(ctx, &saved)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuCtxGetDevice(dev);
    left = cucap_i_ctx_leave(ctx, saved);
    return rc != CUDA_SUCCESS ? rc : left;
}

CUresult cucap_i_ctx_hold_of_stream(CUstream s, struct ctx_hold **out, const char *caller, cucap_error **err)
{
    struct cucap_relaxed_scope scope;
    struct ctx_hold *hold;
    CUcontext ctx = NULL;
    CUresult rc;

    *out = NULL;
    if ((rc = stream_context(s, &ctx)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCtx");
    if (!(hold = shared_hold(ctx, 0))) {
        if (!(hold = calloc(1, sizeof *hold)))
            return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        hold->ctx = ctx;
        atomic_init(&hold->refs, 1);
        /* a device's primary context is retained like cucap_builder_create's,
         * which lets forks reuse cached streams; another context is the
         * caller's to keep alive */
        if (context_device(hold->ctx, &hold->dev) == CUDA_SUCCESS &&
            cucap_i_relaxed_enter(&scope, caller, NULL) == CUDA_SUCCESS) {
            CUcontext primary = NULL;
            CUresult retain = cucap_i_drv.cuDevicePrimaryCtxRetain(&primary, hold->dev);
            if (cucap_i_relaxed_leave(&scope, retain, caller, NULL) == CUDA_SUCCESS && primary == hold->ctx)
                hold->retained = 1;
            else if (retain == CUDA_SUCCESS)
                cucap_i_drv.cuDevicePrimaryCtxRelease(hold->dev);
        }
        if (hold->retained)
            share_hold(hold);
    }
    *out = hold;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- relaxed capture mode for a call */

CUresult cucap_i_relaxed_enter(struct cucap_relaxed_scope *scope, const char *caller, cucap_error **err)
{
    CUresult rc;

    scope->saved = CU_STREAM_CAPTURE_MODE_RELAXED;
    rc = cucap_i_drv.cuThreadExchangeStreamCaptureMode(&scope->saved);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail(err, rc,
                            "%s: cuThreadExchangeStreamCaptureMode failed while switching the thread to "
                            "relaxed capture mode: " CUCAP_I_RESULT_FMT,
                            caller, CUCAP_I_RESULT_ARGS(rc));
    return CUDA_SUCCESS;
}

CUresult cucap_i_relaxed_leave(struct cucap_relaxed_scope *scope, CUresult work, const char *caller,
                               cucap_error **err)
{
    CUstreamCaptureMode mode = scope->saved;
    CUresult rc = cucap_i_drv.cuThreadExchangeStreamCaptureMode(&mode);

    if (rc == CUDA_SUCCESS)
        return work;
    if (work != CUDA_SUCCESS) {
        cucap_i_note_failure(err, "cuThreadExchangeStreamCaptureMode",
                             "restoring the thread's capture mode", rc);
        return work;
    }
    return cucap_i_fail(err, rc,
                        "%s: cuThreadExchangeStreamCaptureMode failed while restoring the thread's capture "
                        "mode; the thread is left in relaxed mode: " CUCAP_I_RESULT_FMT,
                        caller, CUCAP_I_RESULT_ARGS(rc));
}

/* ---------------------------------------------------------------- making a context current for a call */

CUresult cucap_i_ctx_enter(CUcontext ctx, CUcontext *saved)
{
    CUresult rc = cucap_i_drv.cuCtxGetCurrent(saved);

    if (rc == CUDA_SUCCESS && *saved != ctx)
        rc = cucap_i_drv.cuCtxSetCurrent(ctx);
    return rc;
}

CUresult cucap_i_ctx_enter_for(CUcontext ctx, CUcontext *saved, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_ctx_enter(ctx, saved);

    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "making the object's context current (cuCtxSetCurrent)");
    return CUDA_SUCCESS;
}

CUresult cucap_i_ctx_leave_for(CUcontext ctx, CUcontext saved, CUresult work, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_ctx_leave(ctx, saved);

    if (rc == CUDA_SUCCESS)
        return work;
    if (work != CUDA_SUCCESS) {
        cucap_i_note_failure(err, "cuCtxSetCurrent", "restoring the thread's context", rc);
        return work;
    }
    return cucap_i_fail_driver(err, rc, caller, "restoring the thread's context (cuCtxSetCurrent)");
}

CUresult cucap_i_ctx_leave(CUcontext ctx, CUcontext saved)
{
    return saved == ctx ? CUDA_SUCCESS : cucap_i_drv.cuCtxSetCurrent(saved);
}

/* ---------------------------------------------------------------- a call's work in a context, in relaxed mode */

CUresult cucap_i_work_enter(struct cucap_work_scope *w, CUcontext ctx, const char *caller, cucap_error **err)
{
    CUresult rc;

    w->ctx = ctx;
    w->in_ctx = w->in_relaxed = 0;
    if (ctx && (rc = cucap_i_ctx_enter_for(ctx, &w->saved, caller, err)) != CUDA_SUCCESS)
        return rc;
    w->in_ctx = ctx != NULL;
    if ((rc = cucap_i_relaxed_enter(&w->relaxed, caller, err)) != CUDA_SUCCESS) {
        if (w->in_ctx)
            (void)cucap_i_ctx_leave(ctx, w->saved);
        w->in_ctx = 0;
        return rc;
    }
    w->in_relaxed = 1;
    return CUDA_SUCCESS;
}

CUresult cucap_i_work_leave(struct cucap_work_scope *w, CUresult work, const char *caller, cucap_error **err)
{
    if (w->in_relaxed)
        work = cucap_i_relaxed_leave(&w->relaxed, work, caller, err);
    if (w->in_ctx)
        work = cucap_i_ctx_leave_for(w->ctx, w->saved, work, caller, err);
    w->in_ctx = w->in_relaxed = 0;
    return work;
}

void cucap_i_work_enter_quietly(struct cucap_work_scope *w, CUcontext ctx, const char *caller)
{
    cucap_error *err = NULL;
    CUresult rc;

    w->ctx = ctx;
    w->in_ctx = w->in_relaxed = 0;
    if (ctx && (rc = cucap_i_ctx_enter(ctx, &w->saved)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuCtxSetCurrent failed while making the object's context current; the work runs in "
                     "the thread's own context: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    else
        w->in_ctx = ctx != NULL;
    if (cucap_i_relaxed_enter(&w->relaxed, caller, &err) != CUDA_SUCCESS)
        cucap_i_warn_error(err);
    else
        w->in_relaxed = 1;
}

void cucap_i_work_leave_quietly(struct cucap_work_scope *w, const char *caller)
{
    cucap_error *err = NULL;
    CUresult rc;

    if (w->in_relaxed && cucap_i_relaxed_leave(&w->relaxed, CUDA_SUCCESS, caller, &err) != CUDA_SUCCESS)
        cucap_i_warn_error(err);
    if (w->in_ctx && (rc = cucap_i_ctx_leave(w->ctx, w->saved)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuCtxSetCurrent failed while restoring the thread's context: " CUCAP_I_RESULT_FMT,
                     caller, CUCAP_I_RESULT_ARGS(rc));
    w->in_ctx = w->in_relaxed = 0;
}
