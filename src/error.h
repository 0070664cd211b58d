/* Error objects as the library makes them, notes, the warning handler,
 * names and descriptions of results (error.c).  Internal. */
#ifndef CUCAP_I_ERROR_H
#define CUCAP_I_ERROR_H

#include <stdarg.h>

#include "compiler.h"
#include "cucapture.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Report a failure to the caller: stores a new error in *err when err is
 * not NULL and returns its code (code, or CUDA_ERROR_OUT_OF_MEMORY when
 * only the static error could be had). */
CUresult cucap_i_fail(cucap_error **err, CUresult code, const char *fmt, ...) CUCAP_PRINTF(3, 4) CUCAP_COLD;

/* Append a note; silently does nothing on the static out-of-memory error
 * or when memory for the note cannot be had. */
void cucap_i_error_add_note(cucap_error *e, const char *fmt, ...) CUCAP_PRINTF(2, 3) CUCAP_COLD;

/* Append the note "<call> failed while <doing>: <NAME>: <description>"
 * to *err when err and *err are not NULL. */
void cucap_i_note_failure(cucap_error **err, const char *call, const char *doing, CUresult code) CUCAP_COLD;

/* A description of a code for messages and notes: never NULL. */
const char *cucap_i_result_description(CUresult code);

/* A name for a code for messages and notes: never NULL. */
const char *cucap_i_result_label(CUresult code);

/* A failed call's code inside a message, as every message writes it,
 * "NAME: description":
 *     cucap_i_warn(rc, "%s: cuStreamDestroy failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc)); */
#define CUCAP_I_RESULT_FMT "%s: %s"
#define CUCAP_I_RESULT_ARGS(code) cucap_i_result_label(code), cucap_i_result_description(code)

/* The loaded driver's cuGetErrorName and cuGetErrorString, which the two
 * above ask for codes the library's tables lack (driver.c sets them). */
typedef CUresult (*cucap_i_error_text_fn)(CUresult code, const char **text);
void cucap_i_error_use_driver(cucap_i_error_text_fn name, cucap_i_error_text_fn string);

/* Pass a failure that cannot be returned to the warning handler.
 * CUDA_ERROR_DEINITIALIZED and CUDA_SUCCESS are dropped. */
void cucap_i_warn(CUresult code, const char *fmt, ...) CUCAP_PRINTF(2, 3) CUCAP_COLD;

/* The same for a finished error object, which this takes over and frees. */
void cucap_i_warn_error(cucap_error *e) CUCAP_COLD;

/* Whether an options struct's reserved members are all zero. */
int cucap_i_reserved_zero(const int *ints, size_t int_bytes, void *const *ptrs, size_t ptr_count);

/* A driver call failed: "<caller>: <call> failed: NAME: description". */
CUresult cucap_i_fail_driver(cucap_error **err, CUresult rc, const char *caller, const char *call) CUCAP_COLD;

#ifdef __cplusplus
}
#endif

/* "host function", "memset", ...: a graph node type in words. */
const char *cucap_i_node_type_text(CUgraphNodeType t);

#endif
