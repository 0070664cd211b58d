/* The relaxed capture-mode scope (relaxed-scope.c).  Internal. */
#ifndef CUCAP_I_RELAXED_SCOPE_H
#define CUCAP_I_RELAXED_SCOPE_H

#include "cucapture.h"

/* Run capture-unsafe driver calls with the calling
 * thread in relaxed capture mode.
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

#endif
