/* The public relaxed capture-mode scope, cucap_relaxed_mode: the
 * library's own relaxed scope (context-hold.c) for the caller's calls,
 * nested by a count per thread. */
#include "config.h"

#include "driver.h"
#include "error.h"
#include "context-hold.h"

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
