/**
 * \file        cucapture/error.h
 * \brief       Error objects, notes and the warning handler
 *
 * Every fallible libcucapture function returns a CUresult and takes a
 * trailing `cucap_error **err`.  `err` may be NULL.  When it is not NULL,
 * `*err` must be NULL on entry; on failure it receives a new error object
 * that the caller frees with cucap_error_free(), and on success it is left
 * NULL.  The returned CUresult always equals cucap_error_code(*err).
 *
 * A secondary failure that happens while a primary error is being returned
 * (a failed capture-mode restore, a failed rollback, a builder that a join
 * could not close) becomes a note on the primary error; it never replaces
 * it.  Failures that cannot be returned (destroy functions) are passed to
 * the warning handler.
 */
#ifndef CUCAPTURE_ERROR_H
#define CUCAPTURE_ERROR_H

#include <stddef.h>
#include <cuda.h>

/**
 * \brief       Marks a declaration as part of the exported interface
 *
 * Expands to a default-visibility attribute while the library itself is
 * built and to nothing for its users.
 */
#if defined(CUCAP_BUILDING) && defined(__GNUC__)
#  define CUCAP_API __attribute__((visibility("default")))
#else
#  define CUCAP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * \brief       An error: a CUresult, a message and an ordered list of notes
 *
 * Opaque.  Created only by the library; freed with cucap_error_free().
 */
typedef struct cucap_error cucap_error;

/**
 * \brief       The error's CUresult
 *
 * \return      The code; CUDA_SUCCESS for a NULL error.
 */
CUCAP_API CUresult cucap_error_code(const cucap_error *e);

/**
 * \brief       The symbolic name of the error's code
 *
 * \return      A static string such as "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
 *              for a code newer than the library, the loaded driver's name
 *              for it, else "CUDA_ERROR_UNRECOGNIZED"; "CUDA_SUCCESS" for a
 *              NULL error.  Valid for the life of the process.
 */
CUCAP_API const char *cucap_error_name(const cucap_error *e);

/**
 * \brief       The symbolic name of any CUresult, for logging
 *
 * \param       code    A code returned by this library or by the driver.
 * \return      A static string such as "CUDA_ERROR_INVALID_VALUE"; for a
 *              code newer than the library, the loaded driver's name for
 *              it, else "CUDA_ERROR_UNRECOGNIZED".  Never NULL; valid for
 *              the life of the process.
 */
CUCAP_API const char *cucap_result_name(CUresult code);

/**
 * \brief       The error's message
 *
 * The message starts with the name of the library function that failed,
 * for example "cucap_builder_end: ...", and says what was wrong.
 *
 * \return      A string owned by the error, valid until cucap_error_free();
 *              "" for a NULL error.
 */
CUCAP_API const char *cucap_error_message(const cucap_error *e);

/**
 * \brief       How many notes the error carries
 */
CUCAP_API size_t cucap_error_note_count(const cucap_error *e);

/**
 * \brief       The i-th note, in the order the notes were added
 *
 * Note text has the form
 * "<call> failed while <doing what>: <ERROR_NAME>: <description>".
 *
 * \return      A string owned by the error, or NULL when i is out of range.
 */
CUCAP_API const char *cucap_error_note(const cucap_error *e, size_t i);

/**
 * \brief       The message followed by one line per note
 *
 * Each note line is prefixed with "  note: ".  No trailing newline.
 *
 * \return      A string allocated with malloc() that the caller must free(),
 *              or NULL when memory is exhausted.
 */
CUCAP_API char *cucap_error_to_string(const cucap_error *e);

/**
 * \brief       Free an error object
 *
 * NULL, and the static out-of-memory error that the library returns when
 * an error object cannot be allocated, are accepted and ignored.
 */
CUCAP_API void cucap_error_free(cucap_error *e);

/**
 * \brief       Receives the failures that cannot be returned
 *
 * Called with an error object that the handler must not free and must not
 * keep after it returns.  May be called from any thread.
 */
typedef void (*cucap_warning_fn)(const cucap_error *warning, void *user_data);

/**
 * \brief       Install a warning handler
 *
 * \param       fn          The handler, or NULL to restore the default,
 *                          which writes one line to stderr prefixed
 *                          "libcucapture: warning: ".
 * \param       user_data   Passed to fn unchanged.
 *
 * CUDA_ERROR_DEINITIALIZED (a destroy during process exit) is never
 * reported.  Thread-safe.
 */
CUCAP_API void cucap_set_warning_handler(cucap_warning_fn fn, void *user_data);

/**
 * \brief       Hand an error to the warning handler
 *
 * For cleanup paths of the caller's own that cannot return a failure (a
 * C++ destructor, say): e goes to the installed handler exactly as the
 * library's destroy functions send theirs, CUDA_ERROR_DEINITIALIZED
 * excepted.  e stays the caller's to free.
 *
 * \param       e       An error object, or NULL (ignored).
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API void cucap_warn(const cucap_error *e);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_ERROR_H */
