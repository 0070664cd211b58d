/* The error module: codes, names, notes, to_string, the warning handler
 * and the out-of-memory paths. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error-names.h"
#include "error.h"

/* Linked with --wrap=malloc/realloc: the library's allocations come here,
 * and a test can make the next ones fail. */
void *__real_malloc(size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_realloc(void *p, size_t size);

static int fail_after = -1;   /* -1: never; n: the (n+1)-th allocation fails */

static int allocation_fails(void)
{
    if (fail_after < 0)
        return 0;
    if (fail_after == 0)
        return 1;
    fail_after--;
    return 0;
}

void *__wrap_malloc(size_t size)
{
    return allocation_fails() ? NULL : __real_malloc(size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return allocation_fails() ? NULL : __real_realloc(p, size);
}

/* An error object made as the library makes them, by cucap_i_fail. */
static cucap_error *made_error(CUresult code, const char *message)
{
    cucap_error *e = NULL;

    cr_assert_eq(cucap_i_fail(&e, code, "%s", message), e ? cucap_error_code(e) : code);
    return e;
}

Test(error, keeps_code_name_and_message)
{
    cucap_error *e = made_error(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                                "cucap_builder_end: capture 7 was invalidated");

    cr_assert_eq(cucap_error_code(e), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_str_eq(cucap_error_name(e), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
    cr_assert_str_eq(cucap_error_message(e), "cucap_builder_end: capture 7 was invalidated");
    cr_assert_eq(cucap_error_note_count(e), 0);
    cr_assert_null(cucap_error_note(e, 0));
    cucap_error_free(e);
}

Test(error, names_every_kind_of_code)
{
    static const struct { CUresult code; const char *name; } cases[] = {
        { CUDA_SUCCESS, "CUDA_SUCCESS" },
        { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" },
        { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE" },
        { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED" },
        { CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED" },
        { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN" },
        { (CUresult)123456, "CUDA_ERROR_UNRECOGNIZED" },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cucap_error *e = made_error(cases[i].code, "x");
        cr_assert_str_eq(cucap_error_name(e), cases[i].name);
        cucap_error_free(e);
    }
}

Test(error, notes_keep_their_order)
{
    cucap_error *e = made_error(CUDA_ERROR_INVALID_VALUE, "primary");

    cucap_i_error_add_note(e, "first %s", "note");
    cucap_i_error_add_note(e, "second");
    cucap_i_error_add_note(e, "third %d", 3);
    cr_assert_eq(cucap_error_note_count(e), 3);
    cr_assert_str_eq(cucap_error_note(e, 0), "first note");
    cr_assert_str_eq(cucap_error_note(e, 1), "second");
    cr_assert_str_eq(cucap_error_note(e, 2), "third 3");
    cr_assert_null(cucap_error_note(e, 3));
    cr_assert_eq(cucap_error_code(e), CUDA_ERROR_INVALID_VALUE, "notes never replace the error");
    cr_assert_str_eq(cucap_error_message(e), "primary");
    cucap_error_free(e);
}

Test(error, failure_note_has_the_contract_format)
{
    cucap_error *e = made_error(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cucap_pool_open_default: x");

    cucap_i_note_failure(&e, "cuThreadExchangeStreamCaptureMode", "restoring the thread's capture mode",
                         CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_error_note_count(e), 1);
    cr_assert_str_eq(cucap_error_note(e, 0),
                     "cuThreadExchangeStreamCaptureMode failed while restoring the thread's capture mode: "
                     "CUDA_ERROR_INVALID_VALUE: an argument is NULL or out of range");
    cucap_error_free(e);
}

Test(error, failure_note_without_an_error_is_harmless)
{
    cucap_error *none = NULL;

    cucap_i_note_failure(NULL, "cuX", "doing y", CUDA_ERROR_UNKNOWN);
    cucap_i_note_failure(&none, "cuX", "doing y", CUDA_ERROR_UNKNOWN);
    cr_assert_null(none);
}

Test(error, to_string_lists_message_then_notes)
{
    cucap_error *e = made_error(CUDA_ERROR_STREAM_CAPTURE_MERGE, "cucap_builder_join: failed");
    char *s;

    s = cucap_error_to_string(e);
    cr_assert_str_eq(s, "cucap_builder_join: failed");
    free(s);
    cucap_i_error_add_note(e, "one");
    cucap_i_error_add_note(e, "two");
    s = cucap_error_to_string(e);
    cr_assert_str_eq(s, "cucap_builder_join: failed\n  note: one\n  note: two");
    free(s);
    cucap_error_free(e);
}

Test(error, null_error_reads_as_success)
{
    char *s = cucap_error_to_string(NULL);

    cr_assert_eq(cucap_error_code(NULL), CUDA_SUCCESS);
    cr_assert_str_eq(cucap_error_name(NULL), "CUDA_SUCCESS");
    cr_assert_str_eq(cucap_error_message(NULL), "");
    cr_assert_eq(cucap_error_note_count(NULL), 0);
    cr_assert_null(cucap_error_note(NULL, 0));
    cr_assert_str_eq(s, "");
    free(s);
    cucap_error_free(NULL);
}

Test(error, fail_fills_err_and_returns_the_code)
{
    cucap_error *e = NULL;

    cr_assert_eq(cucap_i_fail(NULL, CUDA_ERROR_ILLEGAL_STATE, "f: %s", "no err"), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(cucap_i_fail(&e, CUDA_ERROR_ILLEGAL_STATE, "f: %s", "closed"), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(cucap_error_code(e), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_str_eq(cucap_error_message(e), "f: closed");
    cucap_error_free(e);
}

Test(error, out_of_memory_gives_the_static_error)
{
    cucap_error *e, *again;

    fail_after = 0;
    e = made_error(CUDA_ERROR_INVALID_VALUE, "lost");
    fail_after = 1;   /* the object succeeds, its message fails */
    again = made_error(CUDA_ERROR_INVALID_VALUE, "lost too");
    fail_after = -1;
    cr_assert_not_null(e);
    cr_assert_eq(e, again, "both failures must give the one static error of that code");
    cr_assert_eq(cucap_error_code(e), CUDA_ERROR_INVALID_VALUE, "the static error carries the caller's code");
    cr_assert_str_eq(cucap_error_name(e), "CUDA_ERROR_INVALID_VALUE");
    cr_assert_not_null(strstr(cucap_error_message(e), "out of memory"));
    cucap_i_error_add_note(e, "never stored");
    cr_assert_eq(cucap_error_note_count(e), 0);
    cucap_error_free(e);
    cucap_error_free(e);
    cr_assert_eq(cucap_error_code(again), CUDA_ERROR_INVALID_VALUE, "freeing it is harmless");
}

Test(error, out_of_memory_in_fail_keeps_code_and_object_equal)
{
    cucap_error *e = NULL;
    CUresult rc;

    fail_after = 0;
    rc = cucap_i_fail(&e, CUDA_ERROR_ILLEGAL_STATE, "f: closed");
    fail_after = -1;
    /* the returned code always equals the object's, and is the caller's */
    cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(cucap_error_code(e), rc);
    cucap_error_free(e);
}

Test(error, every_code_has_its_own_fallback)
{
    static const CUresult codes[] = { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, CUDA_ERROR_STREAM_CAPTURE_MERGE,
                                      CUDA_ERROR_STREAM_CAPTURE_UNJOINED, CUDA_ERROR_NOT_SUPPORTED,
                                      CUDA_ERROR_UNKNOWN, CUDA_ERROR_OUT_OF_MEMORY };
    size_t i;

    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        cucap_error *e = NULL;
        CUresult rc;
        fail_after = 0;
        rc = cucap_i_fail(&e, codes[i], "f: %zu", i);
        fail_after = -1;
        cr_assert_eq(rc, codes[i]);
        cr_assert_eq(cucap_error_code(e), codes[i]);
        cr_assert_not_null(strstr(cucap_error_message(e), "out of memory"));
        cucap_i_error_add_note(e, "never stored on a static error");
        cr_assert_eq(cucap_error_note_count(e), 0);
        cucap_error_free(e);
        cr_assert_eq(cucap_error_code(e), codes[i], "freeing a static error is harmless");
    }
}


Test(error, note_allocation_failure_keeps_earlier_notes)
{
    cucap_error *e = made_error(CUDA_ERROR_UNKNOWN, "primary");
    char *s;

    cucap_i_error_add_note(e, "kept");
    fail_after = 0;   /* the note text */
    cucap_i_error_add_note(e, "dropped");
    fail_after = 1;   /* the note text succeeds, the list does not grow */
    cucap_i_error_add_note(e, "dropped too");
    fail_after = -1;
    cr_assert_eq(cucap_error_note_count(e), 1);
    cr_assert_str_eq(cucap_error_note(e, 0), "kept");
    fail_after = 0;
    s = cucap_error_to_string(e);
    fail_after = -1;
    cr_assert_null(s, "to_string reports exhaustion with NULL");
    cucap_error_free(e);
}

/* ---------------------------------------------------------------- warning handler */

struct seen {
    int calls;
    CUresult code;
    char message[256];
    void *user_data;
};

static struct seen seen;

static void record_warning(const cucap_error *w, void *user_data)
{
    seen.calls++;
    seen.code = cucap_error_code(w);
    strncpy(seen.message, cucap_error_message(w), sizeof seen.message - 1);
    seen.user_data = user_data;
}

Test(warning, handler_receives_warnings)
{
    int token;

    cucap_set_warning_handler(record_warning, &token);
    cucap_i_warn(CUDA_ERROR_INVALID_HANDLE, "cucap_builder_destroy: %s", "stream gone");
    cr_assert_eq(seen.calls, 1);
    cr_assert_eq(seen.code, CUDA_ERROR_INVALID_HANDLE);
    cr_assert_str_eq(seen.message, "cucap_builder_destroy: stream gone");
    cr_assert_eq(seen.user_data, &token);
    cucap_set_warning_handler(NULL, NULL);
}

Test(warning, deinitialized_and_success_are_never_reported)
{
    cucap_set_warning_handler(record_warning, NULL);
    cucap_i_warn(CUDA_ERROR_DEINITIALIZED, "cucap_pool_close: shutting down");
    cucap_i_warn(CUDA_SUCCESS, "nothing");
    cucap_i_warn_error(made_error(CUDA_ERROR_DEINITIALIZED, "exit"));
    cucap_i_warn_error(NULL);
    cr_assert_eq(seen.calls, 0);
    cucap_set_warning_handler(NULL, NULL);
}

Test(warning, warn_error_passes_notes, .init = cr_redirect_stderr)
{
    cucap_error *e = made_error(CUDA_ERROR_UNKNOWN, "cucap_builder_destroy: end failed");

    cucap_i_error_add_note(e, "and a note");
    cucap_i_warn_error(e);
    fflush(stderr);
    cr_assert_stderr_eq_str("libcucapture: warning: cucap_builder_destroy: end failed\n  note: and a note\n");
}

Test(warning, default_handler_writes_one_line, .init = cr_redirect_stderr)
{
    cucap_i_warn(CUDA_ERROR_INVALID_HANDLE, "cucap_exec_destroy: bad exec");
    fflush(stderr);
    cr_assert_stderr_eq_str("libcucapture: warning: cucap_exec_destroy: bad exec\n");
}

Test(warning, null_restores_the_default, .init = cr_redirect_stderr)
{
    cucap_set_warning_handler(record_warning, NULL);
    cucap_i_warn(CUDA_ERROR_UNKNOWN, "to the handler");
    cucap_set_warning_handler(NULL, NULL);
    cucap_i_warn(CUDA_ERROR_UNKNOWN, "to stderr");
    fflush(stderr);
    cr_assert_eq(seen.calls, 1);
    cr_assert_str_eq(seen.message, "to the handler");
    cr_assert_stderr_eq_str("libcucapture: warning: to stderr\n");
}

Test(warning, out_of_memory_still_warns, .init = cr_redirect_stderr)
{
    cucap_set_warning_handler(record_warning, NULL);
    fail_after = 0;
    cucap_i_warn(CUDA_ERROR_INVALID_HANDLE, "lost message");
    fail_after = -1;
    cr_assert_eq(seen.calls, 1);
    cr_assert_eq(seen.code, CUDA_ERROR_INVALID_HANDLE, "the fallback error keeps the warning's code");
    cucap_set_warning_handler(NULL, NULL);
}

Test(warning, an_error_already_set_is_left_alone_and_reported)
{
    cucap_error *first = made_error(CUDA_ERROR_INVALID_VALUE, "the caller's"), *e = first;

    cucap_set_warning_handler(record_warning, NULL);
    seen.calls = 0;
    cr_assert_eq(cucap_i_fail(&e, CUDA_ERROR_ILLEGAL_STATE, "second"), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(e, first, "the caller's object is not replaced");
    cr_assert_str_eq(cucap_error_message(e), "the caller's");
    cr_assert_eq(seen.calls, 1, "the caller bug is reported");
    cr_assert_eq(seen.code, CUDA_ERROR_ILLEGAL_STATE);
    cucap_set_warning_handler(NULL, NULL);
    cucap_error_free(first);
}

Test(error, result_name_names_any_code)
{
    cr_assert_str_eq(cucap_result_name(CUDA_ERROR_STREAM_CAPTURE_UNJOINED), "CUDA_ERROR_STREAM_CAPTURE_UNJOINED");
    cr_assert_str_eq(cucap_result_name(CUDA_SUCCESS), "CUDA_SUCCESS");
    cr_assert_str_eq(cucap_result_name((CUresult)123456), "CUDA_ERROR_UNRECOGNIZED");
}

Test(error, header_version_macros_match_the_library)
{
    char expect[32];

    snprintf(expect, sizeof expect, "%d.%d.%d", CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH);
    cr_assert_str_eq(cucap_version_string(), expect);
    cr_assert_eq(CUCAP_VERSION, CUCAP_VERSION_NUMBER(CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH));
    cr_assert(CUCAP_VERSION >= CUCAP_VERSION_NUMBER(1, 3, 0));
}
