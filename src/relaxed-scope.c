/* The relaxed capture-mode scope: calls that a capture would refuse (pool
 * attributes, pool creation and destruction, instantiation, waits) run
 * with the calling thread switched to CU_STREAM_CAPTURE_MODE_RELAXED, and
 * the thread's own mode is restored on every path.  The library's calls
 * use the internal scope; cucap_relaxed_mode is the same for the
 * caller's own, nested by a count per thread. */
#include "config.h"

#include "driver.h"
#include "internal.h"
#include "relaxed-scope.h"

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

/* ---------------------------------------------------------------- the public scope */

enum { SCOPE_OPEN = 0x52454c58u, SCOPE_LEFT = 0x4c454654u };

/* the calling thread's open public scopes */
static _Thread_local unsigned int open_scopes;

CUresult cucap_relaxed_mode_enter(cucap_relaxed_mode *scope, cucap_error **err)
{
    static const char caller[] = "cucap_relaxed_mode_enter";
    struct cucap_relaxed_scope inner;
    CUresult rc;

    if (!scope)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: scope is NULL", caller);
    scope->state = 0;
    if ((rc = cucap_i_driver(caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_relaxed_enter(&inner, caller, err)) != CUDA_SUCCESS)
        return rc;
    scope->saved = inner.saved;
    scope->depth = ++open_scopes;
    scope->thread = &open_scopes;
    scope->state = SCOPE_OPEN;
    return CUDA_SUCCESS;
}

CUresult cucap_relaxed_mode_leave(cucap_relaxed_mode *scope, cucap_error **err)
{
    static const char caller[] = "cucap_relaxed_mode_leave";
    struct cucap_relaxed_scope inner;

    if (!scope)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: scope is NULL", caller);
    if (scope->state != SCOPE_OPEN)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the scope is not open (%s)", caller,
                            scope->state == SCOPE_LEFT ? "it was left already" : "it was never entered");
    if (scope->thread != &open_scopes)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the scope was entered on another thread (a thread's capture mode is its own: "
                            "leave the scope on the thread that entered it); nothing was changed", caller);
    if (scope->depth != open_scopes)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the scope is not this thread's innermost open one (it is number %u, the "
                            "thread has %u open): scopes are left in the reverse order of entering, on the "
                            "thread that entered them; nothing was changed", caller, scope->depth, open_scopes);
    open_scopes--;
    scope->state = SCOPE_LEFT;
    inner.saved = scope->saved;
    return cucap_i_relaxed_leave(&inner, CUDA_SUCCESS, caller, err);
}
