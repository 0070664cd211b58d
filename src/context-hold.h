/* The context and capture mode a call runs in (context-hold.c): holds on
 * the context a builder's stream or a pool lives in, making a context
 * current, and relaxed capture mode for calls a capture would refuse.
 * Holds on the context a builder's stream or a pool lives in: a device's
 * primary context is retained once and shared by every holder of it (until
 * cucap_release_cached); another context is the caller's to keep alive.
 * Internal. */
#ifndef CUCAPTURE_CONTEXT_HOLD_H
#define CUCAPTURE_CONTEXT_HOLD_H

#include <stdatomic.h>
#include <stddef.h>

#include "cucapture.h"

/* Run capture-unsafe driver calls (pool attributes, pool creation and
 * destruction, instantiation, waits) with the calling thread in relaxed
 * capture mode, its own mode restored on every path.
 *     struct cucap_relaxed_scope scope;
 *     if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) != CUDA_SUCCESS) return rc;
 *     rc = ...the work, which fills *err on failure...;
 *     return cucap_i_relaxed_leave(&scope, rc, caller, err);
 * leave restores the thread's mode; a failed restore is a note on the
 * work's error, or the error itself when the work succeeded. */
struct cucap_relaxed_scope {
    CUstreamCaptureMode saved;
};
CUresult cucap_i_relaxed_enter(struct cucap_relaxed_scope *scope, const char *caller, cucap_error **err);
CUresult cucap_i_relaxed_leave(struct cucap_relaxed_scope *scope, CUresult work, const char *caller,
                               cucap_error **err);

struct ctx_hold {
    atomic_int refs;
    CUcontext ctx;
    CUdevice dev;
    int retained;                    /* the library retained ctx, dev's primary context */
};

void cucap_i_ctx_hold_release(struct ctx_hold *c);
/* n references at once (a split's or a join's forks) */
void cucap_i_ctx_hold_ref_by(struct ctx_hold *c, size_t n);
void cucap_i_ctx_hold_release_by(struct ctx_hold *c, size_t n);
/* Let go of the shared holds (cucap_release_cached). */
void cucap_i_ctx_holds_drain(void);
/* A hold on dev's primary context (checked, retained in relaxed thread
 * mode), with one reference for the caller. */
CUresult cucap_i_ctx_hold_primary(CUdevice dev, struct ctx_hold **out, const char *caller, cucap_error **err);
/* The same for a caller already in relaxed thread mode, for a device known to exist:
 * the shared hold when there is one, without a driver call, else a
 * retain. */
CUresult cucap_i_ctx_hold_primary_relaxed(CUdevice dev, struct ctx_hold **out, const char *caller, cucap_error **err);
/* A hold on the context s lives in, with one reference for the caller. */
CUresult cucap_i_ctx_hold_of_stream(CUstream s, struct ctx_hold **out, const char *caller, cucap_error **err);

/* Make ctx current, remembering the thread's own context;
 * leave puts it back (and costs nothing when it was ctx already). */
CUresult cucap_i_ctx_enter(CUcontext ctx, CUcontext *saved);
CUresult cucap_i_ctx_leave(CUcontext ctx, CUcontext saved);
/* The same for a public call: a failed switch is the call's error; a
 * failed restore a note on the work's error, or the error itself. */
CUresult cucap_i_ctx_enter_for(CUcontext ctx, CUcontext *saved, const char *caller, cucap_error **err);
CUresult cucap_i_ctx_leave_for(CUcontext ctx, CUcontext saved, CUresult work, const char *caller, cucap_error **err);

/* The work of a call that runs in an object's context (ctx; NULL: the
 * thread's own) with the thread in relaxed capture mode, and then puts
 * both back:
 *     struct cucap_work_scope w;
 *     if ((rc = cucap_i_work_enter(&w, ctx, caller, err)) != CUDA_SUCCESS) return rc;
 *     rc = ...the work, which fills *err on failure...;
 *     return cucap_i_work_leave(&w, rc, caller, err);
 * A failed switch is the call's error; a failed restore a note on the
 * work's error, or the error itself.  A destroy path, which reports
 * nothing, uses the quiet pair instead: failures go to the warning
 * handler, and the work runs all the same, in the thread's own context
 * or mode where the switch failed. */
struct cucap_work_scope {
    CUcontext ctx, saved;
    struct cucap_relaxed_scope relaxed;
    int in_ctx, in_relaxed;
};
CUresult cucap_i_work_enter(struct cucap_work_scope *w, CUcontext ctx, const char *caller, cucap_error **err);
CUresult cucap_i_work_leave(struct cucap_work_scope *w, CUresult work, const char *caller, cucap_error **err);
void cucap_i_work_enter_quietly(struct cucap_work_scope *w, CUcontext ctx, const char *caller);
void cucap_i_work_leave_quietly(struct cucap_work_scope *w, const char *caller);

#endif
