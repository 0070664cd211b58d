/* Error objects, notes and the warning handler. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error-names.h"
#include "error.h"

struct cucap_error {
    CUresult code;
    char *message;
    size_t note_count;
    char **notes;
};

/* Returned when an error object cannot be allocated, one per code (the
 * driver's codes are below 1000), so that the code a call returns always
 * equals its error's; never freed. */
#define FALLBACK_CODES 1000
static char fallback_message[] = "libcucapture: out of memory while reporting an error";
static cucap_error fallback_errors[FALLBACK_CODES];
static cucap_error cucap_oom_error = { CUDA_ERROR_OUT_OF_MEMORY, fallback_message, 0, NULL };
static pthread_once_t fallback_once = PTHREAD_ONCE_INIT;

static void init_fallbacks(void)
{
    size_t i;

    for (i = 0; i < FALLBACK_CODES; i++) {
        fallback_errors[i].code = (CUresult)i;
        fallback_errors[i].message = fallback_message;
    }
}

static cucap_error *fallback_error(CUresult code)
{
    if ((unsigned int)code >= FALLBACK_CODES)
        return &cucap_oom_error;
    pthread_once(&fallback_once, init_fallbacks);
    return &fallback_errors[code];
}

static int is_static(const cucap_error *e)
{
    return e == &cucap_oom_error || (e >= fallback_errors && e < fallback_errors + FALLBACK_CODES);
}

static char *format_alloc(const char *fmt, va_list ap) CUCAP_PRINTF(1, 0);

static char *format_alloc(const char *fmt, va_list ap)
{
    va_list copy;
    int len;
    char *s;

    va_copy(copy, ap);
    len = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (len < 0)
        return NULL;
    s = malloc((size_t)len + 1);
    if (s)
        vsnprintf(s, (size_t)len + 1, fmt, ap);
    return s;
}

/* A new error, or the static out-of-memory error. */
CUCAP_PRINTF(2, 0) static cucap_error *error_newv(CUresult code, const char *fmt, va_list ap)
{
    cucap_error *e = malloc(sizeof *e);

    if (!e)
        return fallback_error(code);
    e->message = format_alloc(fmt, ap);
    if (!e->message) {
        free(e);
        return fallback_error(code);
    }
    e->code = code;
    e->note_count = 0;
    e->notes = NULL;
    return e;
}

CUresult cucap_i_fail(cucap_error **err, CUresult code, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    va_start(ap, fmt);
    if (*err) {
        /* as GLib: a caller that passes an error already set has a bug;
         * its object (maybe freed already: never read) is left alone and
         * the new error goes to the warning handler */
        cucap_error *lost = error_newv(code, fmt, ap);
        va_end(ap);
        cucap_i_warn(code, "an error was reported into a cucap_error * that was not NULL (a previous error "
                     "not freed and reset, or an uninitialised pointer); the caller's object is left as it was; "
                     "this error: %s", cucap_error_message(lost));
        cucap_error_free(lost);
        return code;
    }
    *err = error_newv(code, fmt, ap);
    va_end(ap);
    return (*err)->code;
}

CUresult cucap_i_fail_driver(cucap_error **err, CUresult rc, const char *caller, const char *call)
{
    return cucap_i_fail(err, rc, "%s: %s failed: " CUCAP_I_RESULT_FMT, caller, call, CUCAP_I_RESULT_ARGS(rc));
}

void cucap_i_error_add_note(cucap_error *e, const char *fmt, ...)
{
    va_list ap;
    char *note;
    char **notes;

    if (!e || is_static(e))
        return;
    va_start(ap, fmt);
    note = format_alloc(fmt, ap);
    va_end(ap);
    if (!note)
        return;
    notes = realloc(e->notes, (e->note_count + 1) * sizeof *notes);
    if (!notes) {
        free(note);
        return;
    }
    notes[e->note_count++] = note;
    e->notes = notes;
}

void cucap_i_note_failure(cucap_error **err, const char *call, const char *doing, CUresult code)
{
    if (err && *err)
        cucap_i_error_add_note(*err, "%s failed while %s: " CUCAP_I_RESULT_FMT, call, doing,
                               CUCAP_I_RESULT_ARGS(code));
}

/* Our own words for the codes the library itself produces or that capture
 * work meets most; others come from the driver when it is loaded. */
static const struct {
    CUresult code;
    const char *text;
} cucap_descriptions[] = {
    { CUDA_SUCCESS, "no error" },
    { CUDA_ERROR_INVALID_VALUE, "an argument is NULL or out of range" },
    { CUDA_ERROR_OUT_OF_MEMORY, "memory is exhausted" },
    { CUDA_ERROR_NOT_INITIALIZED, "the driver has not been initialised" },
    { CUDA_ERROR_DEINITIALIZED, "the driver is shutting down" },
    { CUDA_ERROR_NO_DEVICE, "no CUDA device is available" },
    { CUDA_ERROR_INVALID_DEVICE, "the device ordinal does not name a device" },
    { CUDA_ERROR_INVALID_CONTEXT, "no valid context is current" },
    { CUDA_ERROR_FILE_NOT_FOUND, "a file was not found" },
    { CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "a shared library lacks a required symbol" },
    { CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "a shared library could not be loaded" },
    { CUDA_ERROR_OPERATING_SYSTEM, "an operating-system call failed" },
    { CUDA_ERROR_INVALID_HANDLE, "a handle is invalid or was destroyed" },
    { CUDA_ERROR_ILLEGAL_STATE, "the object is in a state that does not allow the call" },
    { CUDA_ERROR_NOT_FOUND, "a named symbol or object was not found" },
    { CUDA_ERROR_NOT_READY, "the work is not finished yet" },
    { CUDA_ERROR_NOT_SUPPORTED, "the operation is not supported by this driver or device" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the call is not allowed while a stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the stream capture was invalidated by an earlier error" },
    { CUDA_ERROR_STREAM_CAPTURE_MERGE, "the call would merge two independent captures" },
    { CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "the capture was not begun on this stream" },
    { CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "a forked stream was never joined back to the capture's origin" },
    { CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "the call would cross the capture's dependency boundary" },
    { CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "the call would wait on the legacy stream during capture" },
    { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "the capture was begun on another thread" },
    { CUDA_ERROR_CAPTURED_EVENT, "the event was recorded in a capture and cannot be used this way" },
    { CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the executable graph cannot be updated from this graph" },
    { CUDA_ERROR_STUB_LIBRARY, "the loaded driver is a stub library, not a real driver" },
    { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "the kernel driver and the user-mode driver differ in version" },
    { CUDA_ERROR_UNKNOWN, "an unknown internal error occurred" },
};

/* The loaded driver's cuGetErrorName and cuGetErrorString, for codes
 * the tables here do not know; set by driver.c once it has them. */
static _Atomic(cucap_i_error_text_fn) driver_name, driver_string;

void cucap_i_error_use_driver(cucap_i_error_text_fn name, cucap_i_error_text_fn string)
{
    atomic_store_explicit(&driver_name, name, memory_order_release);
    atomic_store_explicit(&driver_string, string, memory_order_release);
}

static const char *ask_driver(_Atomic(cucap_i_error_text_fn) *fn, CUresult code)
{
    cucap_i_error_text_fn f = atomic_load_explicit(fn, memory_order_acquire);
    const char *s = NULL;

    if (f && f(code, &s) != CUDA_SUCCESS)
        s = NULL;
    return s;
}

const char *cucap_i_result_description(CUresult code)
{
    size_t i;
    const char *s;

    for (i = 0; i < sizeof cucap_descriptions / sizeof cucap_descriptions[0]; i++)
        if (cucap_descriptions[i].code == code)
            return cucap_descriptions[i].text;
    s = ask_driver(&driver_string, code);
    return s ? s : "no description is available for this code";
}

const char *cucap_i_result_label(CUresult code)
{
    const char *s = cucap_i_result_name(code);

    if (!s)
        s = ask_driver(&driver_name, code);
    return s ? s : "CUDA_ERROR_UNRECOGNIZED";
}

CUresult cucap_error_code(const cucap_error *e)
{
    return e ? e->code : CUDA_SUCCESS;
}

int cucap_i_reserved_zero(const int *ints, size_t int_bytes, void *const *ptrs, size_t ptr_count)
{
    size_t i;

    for (i = 0; i < int_bytes / sizeof *ints; i++)
        if (ints[i])
            return 0;
    for (i = 0; i < ptr_count; i++)
        if (ptrs[i])
            return 0;
    return 1;
}

const char *cucap_result_name(CUresult code)
{
    return cucap_i_result_label(code);
}

const char *cucap_error_name(const cucap_error *e)
{
    return cucap_i_result_label(cucap_error_code(e));
}

const char *cucap_error_message(const cucap_error *e)
{
    return e ? e->message : "";
}

size_t cucap_error_note_count(const cucap_error *e)
{
    return e ? e->note_count : 0;
}

const char *cucap_error_note(const cucap_error *e, size_t i)
{
    return e && i < e->note_count ? e->notes[i] : NULL;
}

char *cucap_error_to_string(const cucap_error *e)
{
    static const char note_prefix[] = "\n  note: ";
    const char *message = cucap_error_message(e);
    size_t len = strlen(message) + 1, i;
    char *s, *p;

    for (i = 0; i < cucap_error_note_count(e); i++)
        len += sizeof note_prefix - 1 + strlen(e->notes[i]);
    s = malloc(len);
    if (!s)
        return NULL;
    p = stpcpy(s, message);
    for (i = 0; i < cucap_error_note_count(e); i++)
        p = stpcpy(stpcpy(p, note_prefix), e->notes[i]);
    return s;
}

void cucap_error_free(cucap_error *e)
{
    size_t i;

    if (!e || is_static(e))
        return;
    for (i = 0; i < e->note_count; i++)
        free(e->notes[i]);
    free(e->notes);
    free(e->message);
    free(e);
}

/* ---------------------------------------------------------------- warnings */

static void default_warning_handler(const cucap_error *warning, void *user_data)
{
    char *text = cucap_error_to_string(warning);

    (void)user_data;
    fprintf(stderr, "libcucapture: warning: %s\n", text ? text : cucap_error_message(warning));
    free(text);
}

static pthread_mutex_t warning_lock = PTHREAD_MUTEX_INITIALIZER;
static cucap_warning_fn warning_fn = default_warning_handler;
static void *warning_user_data;

void cucap_set_warning_handler(cucap_warning_fn fn, void *user_data)
{
    pthread_mutex_lock(&warning_lock);
    warning_fn = fn ? fn : default_warning_handler;
    warning_user_data = fn ? user_data : NULL;
    pthread_mutex_unlock(&warning_lock);
}

void cucap_warn(const cucap_error *e)
{
    cucap_warning_fn fn;
    void *user_data;

    if (!e || e->code == CUDA_SUCCESS || e->code == CUDA_ERROR_DEINITIALIZED)
        return;
    pthread_mutex_lock(&warning_lock);
    fn = warning_fn;
    user_data = warning_user_data;
    pthread_mutex_unlock(&warning_lock);
    fn(e, user_data);
}

void cucap_i_warn_error(cucap_error *e)
{
    cucap_warn(e);
    cucap_error_free(e);
}

void cucap_i_warn(CUresult code, const char *fmt, ...)
{
    va_list ap;
    cucap_error *e;

    if (code == CUDA_SUCCESS || code == CUDA_ERROR_DEINITIALIZED)
        return;
    va_start(ap, fmt);
    e = error_newv(code, fmt, ap);
    va_end(ap);
    cucap_i_warn_error(e);
}

const char *cucap_i_node_type_text(CUgraphNodeType t)
{
    static const char *const names[] = { "kernel", "memcpy", "memset", "host function", "child graph", "empty", "event wait",
                                         "event record", "semaphore signal", "semaphore wait", "allocation", "free",
                                         "batch memory operation", "conditional" };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}
