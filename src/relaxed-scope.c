/* The relaxed capture-mode scope: calls that a capture would refuse (pool
 * attributes, pool creation and destruction) run with the calling thread
 * switched to CU_STREAM_CAPTURE_MODE_RELAXED, and the thread's own mode is
 * restored on every path. */
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
