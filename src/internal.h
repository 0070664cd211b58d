/* Internal declarations shared by the library's modules.  Never installed. */
#ifndef CUCAPTURE_INTERNAL_H
#define CUCAPTURE_INTERNAL_H

#include <stdarg.h>

#include "cucapture.h"
#include "error-names.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#  define CUCAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#  define CUCAP_PRINTF(fmt, args)
#endif


/* error.c */

/* A new error, or the static out-of-memory error. */
cucap_error *cucap_i_error_new(CUresult code, const char *fmt, ...) CUCAP_PRINTF(2, 3);
cucap_error *cucap_i_error_newv(CUresult code, const char *fmt, va_list ap) CUCAP_PRINTF(2, 0);

/* Report a failure to the caller: stores a new error in *err when err is
 * not NULL and returns its code (code, or CUDA_ERROR_OUT_OF_MEMORY when
 * only the static error could be had). */
CUresult cucap_i_fail(cucap_error **err, CUresult code, const char *fmt, ...) CUCAP_PRINTF(3, 4);

/* Append a note; silently does nothing on the static out-of-memory error
 * or when memory for the note cannot be had. */
void cucap_i_error_add_note(cucap_error *e, const char *fmt, ...) CUCAP_PRINTF(2, 3);

/* Append the note "<call> failed while <doing>: <NAME>: <description>"
 * to *err when err and *err are not NULL. */
void cucap_i_note_failure(cucap_error **err, const char *call, const char *doing, CUresult code);

/* A description of a code for messages and notes: never NULL. */
const char *cucap_i_result_description(CUresult code);

/* A name for a code for messages and notes: never NULL. */
const char *cucap_i_result_label(CUresult code);

/* The loaded driver's cuGetErrorName and cuGetErrorString, which the two
 * above ask for codes the library's tables lack (driver.c sets them). */
typedef CUresult (*cucap_i_error_text_fn)(CUresult code, const char **text);
void cucap_i_error_use_driver(cucap_i_error_text_fn name, cucap_i_error_text_fn string);

/* Pass a failure that cannot be returned to the warning handler.
 * CUDA_ERROR_DEINITIALIZED and CUDA_SUCCESS are dropped. */
void cucap_i_warn(CUresult code, const char *fmt, ...) CUCAP_PRINTF(2, 3);

/* The same for a finished error object, which this takes over and frees. */
void cucap_i_warn_error(cucap_error *e);

/* relaxed-scope.c: run capture-unsafe driver calls with the calling
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

/* context-hold.c: make ctx current, remembering the thread's own context;
 * leave puts it back (and costs nothing when it was ctx already). */
CUresult cucap_i_ctx_enter(CUcontext ctx, CUcontext *saved);
CUresult cucap_i_ctx_leave(CUcontext ctx, CUcontext saved);
/* The same for a public call: a failed switch is the call's error; a
 * failed restore a note on the work's error, or the error itself. */
CUresult cucap_i_ctx_enter_for(CUcontext ctx, CUcontext *saved, const char *caller, cucap_error **err);
CUresult cucap_i_ctx_leave_for(CUcontext ctx, CUcontext saved, CUresult work, const char *caller, cucap_error **err);

/* A new non-blocking stream (CUCAP_I_STREAM) or timing-free event
 * (CUCAP_I_EVENT) made with ctx current, the thread's own context given
 * back: the one place that does this. */
enum { CUCAP_I_STREAM, CUCAP_I_EVENT };
CUresult cucap_i_create_in(CUcontext ctx, int kind, void **out);

/* streams.c: non-blocking streams and timing-free events of device
 * dev's primary context ctx, reused.  A stream given back must not be part
 * of a capture, an event not recorded in a capture that may still run.
 * Only for primary contexts.  caller is the public function on whose
 * behalf it runs, for warnings; no warning is issued under the cache's
 * lock. */
CUresult cucap_i_cache_take_stream(CUcontext ctx, CUdevice dev, CUstream *out, const char *caller);
void cucap_i_cache_give_stream(CUcontext ctx, CUdevice dev, CUstream s, const char *caller);
/* Streams and events given back together (a capture's deferred ones):
 * one locked step for those the caches take. */
struct cucap_cache_item {
    CUcontext ctx;
    CUdevice dev;
    void *handle;                    /* CUstream or CUevent */
    int is_event;
};
void cucap_i_cache_give_items(const struct cucap_cache_item *items, size_t n, const char *caller);
CUresult cucap_i_cache_take_event(CUcontext ctx, CUdevice dev, CUevent *out, const char *caller);
void cucap_i_cache_give_event(CUcontext ctx, CUdevice dev, CUevent e, const char *caller);
/* Destroy the cached streams and events (with cucap_i_drain_kept). */
void cucap_i_stream_cache_drain(void);

/* teardown.c: destroy everything cached and kept (for leak checks); only
 * while no other library call runs. */
void cucap_i_drain_kept(void);

/* pool.c: the memory the pools use to track live allocations (tests). */
size_t cucap_i_pool_tracked_bytes(void);
/* pool.c: free the pool objects kept for reuse (with cucap_i_drain_kept). */
void cucap_i_pool_spares_drain(void);

/* error.c: whether an options struct's reserved members are all zero. */
int cucap_i_reserved_zero(const int *ints, size_t int_bytes, void *const *ptrs, size_t ptr_count);

/* A driver call failed: "<caller>: <call> failed: NAME: description". */
CUresult cucap_i_fail_driver(cucap_error **err, CUresult rc, const char *caller, const char *call);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_INTERNAL_H */
