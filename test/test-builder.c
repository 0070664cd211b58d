/* The builder and hierarchy modules, on the simulated driver and on the
 * GPU: the operation x state matrix, invalidated teardown in every mode,
 * unjoined forks, join partial failure, a real fork/join graph with exec
 * update, and fault injection over a whole cycle. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "builder-internal.h"
#include "capture.h"
#include "error-names.h"
#include "error.h"

BACKEND_SUITES(builder, 120);
FAULT_BACKEND_SUITES(builder, 300);

/* ---------------------------------------------------------------- warnings */

static int warnings;
static CUresult last_warning;

static void count_warning(const cucap_error *w, void *data)
{
    (void)data;
    warnings++;
    last_warning = cucap_error_code(w);
}

/* ---------------------------------------------------------------- making builders in each state */

enum start { P_NOT_STARTED, P_CAPTURING, P_ENDED, P_INVALIDATED, P_CLOSED, F_CAPTURING, F_CLOSED, START_COUNT };
static const char *const start_names[] = { "PRIMARY/NOT_STARTED", "PRIMARY/CAPTURING", "PRIMARY/ENDED",
                                           "PRIMARY/INVALIDATED", "PRIMARY/CLOSED", "FORKED/CAPTURING",
                                           "FORKED/CLOSED" };

struct setup {
    cucap_builder *b;        /* the builder in the wanted state */
    cucap_builder *primary;  /* its primary when b is a fork */
};

static cucap_builder *new_builder(void)
{
    cucap_builder *b = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return b;
}

static struct setup make(enum start s)
{
    struct setup x = { NULL, NULL };
    cucap_builder *p = new_builder(), *f = NULL;

    if (s == P_NOT_STARTED) {
        x.b = p;
        return x;
    }
    if (s == P_CLOSED) {
        cr_assert_eq(cucap_builder_close(p, NULL), CUDA_SUCCESS);
        x.b = p;
        return x;
    }
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    if (s == P_ENDED)
        cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    if (s == P_INVALIDATED) {
        cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(p)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        cr_assert_eq(cucap_builder_end(p, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    if (s == F_CAPTURING || s == F_CLOSED) {
        cr_assert_eq(cucap_builder_split(p, 2, &f, NULL), CUDA_SUCCESS);
        if (s == F_CLOSED)
            cr_assert_eq(cucap_builder_close(f, NULL), CUDA_SUCCESS);
        x.b = f;
        x.primary = p;
        return x;
    }
    x.b = p;
    return x;
}

static void unmake(struct setup x)
{
    cucap_builder_destroy(x.b);
    cucap_builder_destroy(x.primary);
}

/* ---------------------------------------------------------------- the operation x state matrix */

enum op { OP_BEGIN, OP_END, OP_SPLIT, OP_IS_BUILDING, OP_COMPLETE, OP_GRAPH, OP_DOT, OP_EMBED_PARENT,
          OP_EMBED_CHILD, OP_CLOSE, OP_COUNT };
static const char *const op_names[] = { "begin", "end", "split", "is_building", "complete", "graph", "dot_print",
                                        "embed as parent", "embed as child", "close" };

#define OK CUDA_SUCCESS
#define IS CUDA_ERROR_ILLEGAL_STATE

/* expected result and state afterwards, per start x op (contract and
 * cuda-core-behaviour.md section 2.3) */
static const struct { CUresult rc; cucap_builder_state after; } expect[START_COUNT][OP_COUNT] = {
    [P_NOT_STARTED] = { { OK, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_NOT_STARTED },
                        { IS, CUCAP_BUILDER_NOT_STARTED }, { OK, CUCAP_BUILDER_NOT_STARTED },
                        { IS, CUCAP_BUILDER_NOT_STARTED }, { IS, CUCAP_BUILDER_NOT_STARTED },
                        { IS, CUCAP_BUILDER_NOT_STARTED }, { IS, CUCAP_BUILDER_NOT_STARTED },
                        { IS, CUCAP_BUILDER_NOT_STARTED }, { OK, CUCAP_BUILDER_CLOSED } },
    [P_CAPTURING] = { { IS, CUCAP_BUILDER_CAPTURING }, { OK, CUCAP_BUILDER_ENDED }, { OK, CUCAP_BUILDER_CAPTURING },
                      { OK, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING },
                      { IS, CUCAP_BUILDER_CAPTURING }, { OK, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING },
                      { OK, CUCAP_BUILDER_CLOSED } },
    [P_ENDED] = { { IS, CUCAP_BUILDER_ENDED }, { IS, CUCAP_BUILDER_ENDED }, { IS, CUCAP_BUILDER_ENDED },
                  { OK, CUCAP_BUILDER_ENDED }, { OK, CUCAP_BUILDER_ENDED }, { OK, CUCAP_BUILDER_ENDED },
                  { OK, CUCAP_BUILDER_ENDED }, { IS, CUCAP_BUILDER_ENDED }, { OK, CUCAP_BUILDER_ENDED },
                  { OK, CUCAP_BUILDER_CLOSED } },
    [P_INVALIDATED] = { { IS, CUCAP_BUILDER_INVALIDATED }, { IS, CUCAP_BUILDER_INVALIDATED },
                        { IS, CUCAP_BUILDER_INVALIDATED }, { OK, CUCAP_BUILDER_INVALIDATED },
                        { IS, CUCAP_BUILDER_INVALIDATED }, { IS, CUCAP_BUILDER_INVALIDATED },
                        { IS, CUCAP_BUILDER_INVALIDATED }, { IS, CUCAP_BUILDER_INVALIDATED },
                        { IS, CUCAP_BUILDER_INVALIDATED }, { OK, CUCAP_BUILDER_CLOSED } },
    [P_CLOSED] = { { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { OK, CUCAP_BUILDER_CLOSED } },
    [F_CAPTURING] = { { IS, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING }, { OK, CUCAP_BUILDER_CAPTURING },
                      { OK, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING },
                      { IS, CUCAP_BUILDER_CAPTURING }, { OK, CUCAP_BUILDER_CAPTURING }, { IS, CUCAP_BUILDER_CAPTURING },
                      { OK, CUCAP_BUILDER_CLOSED } },
    [F_CLOSED] = { { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED }, { IS, CUCAP_BUILDER_CLOSED },
                   { OK, CUCAP_BUILDER_CLOSED } },
};

static CUresult apply(enum op op, cucap_builder *b, cucap_error **err)
{
    char path[64];
    cucap_builder *other = NULL, *fork = NULL;
    cucap_exec *exec = NULL;
    cucap_graph *g = NULL;
    int building;
    CUresult rc;

    switch (op) {
    case OP_BEGIN: return cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, err);
    case OP_END: return cucap_builder_end(b, err);
    case OP_SPLIT:
        rc = cucap_builder_split(b, 2, &fork, err);
        if (rc == CUDA_SUCCESS) {
            cr_assert_eq(cucap_builder_get_kind(fork), CUCAP_BUILDER_FORKED);
            cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, fork }, 2, NULL, NULL), CUDA_SUCCESS);
        } else {
            cr_assert_null(fork, "a failed split hands out nothing");
        }
        cucap_builder_destroy(fork);
        return rc;
    case OP_IS_BUILDING: return cucap_builder_is_building(b, &building, err);
    case OP_COMPLETE:
        rc = cucap_builder_complete(b, NULL, &exec, err);
        cr_assert((rc == CUDA_SUCCESS) == (exec != NULL));
        cucap_exec_destroy(exec);
        return rc;
    case OP_GRAPH:
        rc = cucap_builder_graph(b, &g, err);
        cr_assert((rc == CUDA_SUCCESS) == (g != NULL));
        cucap_graph_unref(g);
        return rc;
    case OP_DOT:
        snprintf(path, sizeof path, "/tmp/cucapture-test-%d.dot", (int)getpid());
        rc = cucap_builder_dot_print(b, path, 0, err);
        if (rc == CUDA_SUCCESS)
            cr_assert_eq(access(path, R_OK), 0, "dot_print wrote no file");
        unlink(path);
        return rc;
    case OP_EMBED_PARENT: {
        struct setup child = make(P_ENDED);
        rc = cucap_builder_embed(b, child.b, err);
        unmake(child);
        return rc;
    }
    case OP_EMBED_CHILD:
        other = new_builder();
        cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        rc = cucap_builder_embed(other, b, err);
        cr_assert_eq(cucap_builder_end(other, NULL), CUDA_SUCCESS);
        cucap_builder_destroy(other);
        return rc;
    case OP_CLOSE: return cucap_builder_close(b, err);
    default: return CUDA_ERROR_UNKNOWN;
    }
}

BACKEND_TEST(builder, operation_by_state_matrix)
{
    int s, op;

    for (s = 0; s < START_COUNT; s++)
        for (op = 0; op < OP_COUNT; op++) {
            struct setup x = make((enum start)s);
            cucap_error *err = NULL;
            CUresult rc = apply((enum op)op, x.b, &err);
            cr_assert_eq(rc, expect[s][op].rc, "%s on %s: %s (%s)", op_names[op], start_names[s],
                         cucap_i_result_label(rc), cucap_error_message(err));
            cr_assert_eq(cucap_error_code(err), rc, "%s on %s: the error object disagrees", op_names[op],
                         start_names[s]);
            if (rc != CUDA_SUCCESS)
                cr_assert_eq(strncmp(cucap_error_message(err), "cucap_", 6), 0, "%s", cucap_error_message(err));
            cr_assert_eq(cucap_builder_get_state(x.b), expect[s][op].after, "%s on %s left state %d", op_names[op],
                         start_names[s], cucap_builder_get_state(x.b));
            cucap_error_free(err);
            unmake(x);
        }
}

/* Every split of a closed builder is refused, whatever device it names
 * (split_on read the closed builder's context before it checked it). */
BACKEND_TEST(builder, splits_of_a_closed_builder_are_refused)
{
    cucap_builder *b = NULL, *forks[1] = { NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_close(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_on(b, 0, 2, forks, &err), CUDA_ERROR_ILLEGAL_STATE, "%s",
                 cucap_error_message(err));
    cr_assert(strstr(cucap_error_message(err), "closed"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_split_kept(b, 2, forks, &err), CUDA_ERROR_ILLEGAL_STATE, "%s",
                 cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_null(forks[0]);
    cucap_builder_destroy(b);
}

BACKEND_TEST(builder, bad_arguments)
{
    cucap_builder *b = new_builder(), *out = (cucap_builder *)&b, *forks[2];
    cucap_error *err = NULL;
    int building;

    cr_assert_eq(cucap_builder_create(0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_create(77, &out, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(out);
    cr_assert_not_null(strstr(cucap_error_message(err), "device ordinal 77"));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create_on_stream(NULL, &out, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_create_on_stream(CU_STREAM_LEGACY, &out, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_begin(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_begin(b, (CUstreamCaptureMode)7, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "not a capture mode"));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_NOT_STARTED, "a bad mode begins nothing");
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 1, forks, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_split(b, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_join(NULL, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_join(&b, 1, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, NULL }, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, b }, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    {
        /* the first repeat by position is named, whatever the addresses' order */
        cucap_builder *f[2];
        err = NULL;
        cr_assert_eq(cucap_builder_split(b, 3, f, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f[0], f[1], f[0], b }, 5, NULL, &err),
                     CUDA_ERROR_INVALID_VALUE);
        cr_assert_str_eq(cucap_error_message(err), "cucap_builder_join: builder 3 is builder 1 again");
        cucap_error_free(err);
        err = NULL;
        cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ f[1], b, f[0], b, f[1] }, 5, NULL, &err),
                     CUDA_ERROR_INVALID_VALUE);
        cr_assert_str_eq(cucap_error_message(err), "cucap_builder_join: builder 3 is builder 1 again");
        cucap_error_free(err);
        err = NULL;
        cr_assert_eq(cucap_builder_get_state(f[0]), CUCAP_BUILDER_CAPTURING, "a refused join closes nothing");
        cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f[0], f[1] }, 3, NULL, NULL), CUDA_SUCCESS);
    }
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CAPTURING, "rejected joins touch nothing");
    cr_assert_eq(cucap_builder_is_building(b, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_is_building(b, &building, NULL), CUDA_SUCCESS);
    cr_assert_eq(building, 1);
    cr_assert_eq(cucap_builder_dot_print(b, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_complete(b, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_graph(b, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_close(NULL, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(NULL);
    cr_assert_null(cucap_builder_stream(NULL));
    cr_assert_eq(cucap_builder_get_state(NULL), CUCAP_BUILDER_CLOSED);
    cr_assert_eq(cucap_builder_close(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_close(b, NULL), CUDA_SUCCESS, "a second close does nothing");
    cr_assert_null(cucap_builder_stream(b));
    cucap_builder_destroy(b);
}

/* ---------------------------------------------------------------- invalidated teardown */

#define ROUNDS 200

static void invalidate_then_destroy(CUstreamCaptureMode mode)
{
    int i;

    cucap_set_warning_handler(count_warning, NULL);
    for (i = 0; i < ROUNDS; i++) {
        cucap_builder *b = new_builder();
        int before = warnings;
        cr_assert_eq(cucap_builder_begin(b, mode, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        cucap_builder_destroy(b);   /* no end: destroy ends it, and must not destroy the discarded graph */
        cr_assert_eq(warnings, before + 1, "round %d: the failed end was not reported", i);
        cr_assert_eq(last_warning, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    cucap_set_warning_handler(NULL, NULL);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

static void invalidate_end_close_destroy(CUstreamCaptureMode mode)
{
    int i;

    cucap_set_warning_handler(count_warning, NULL);
    for (i = 0; i < ROUNDS; i++) {
        cucap_builder *b = new_builder();
        cucap_error *err = NULL;
        cr_assert_eq(cucap_builder_begin(b, mode, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_INVALIDATED);
        cucap_error_free(err);
        cr_assert_eq(cucap_builder_close(b, NULL), CUDA_SUCCESS);
        cucap_builder_destroy(b);
    }
    cr_assert_eq(warnings, 0, "nothing is left to report after end reported it");
    cucap_set_warning_handler(NULL, NULL);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("graph"), 0);
}

BACKEND_TEST(builder, invalidate_then_destroy_global) { invalidate_then_destroy(CU_STREAM_CAPTURE_MODE_GLOBAL); }
BACKEND_TEST(builder, invalidate_then_destroy_thread_local) { invalidate_then_destroy(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
BACKEND_TEST(builder, invalidate_then_destroy_relaxed) { invalidate_then_destroy(CU_STREAM_CAPTURE_MODE_RELAXED); }
BACKEND_TEST(builder, invalidate_end_close_destroy_global) { invalidate_end_close_destroy(CU_STREAM_CAPTURE_MODE_GLOBAL); }
BACKEND_TEST(builder, invalidate_end_close_destroy_thread_local) { invalidate_end_close_destroy(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
BACKEND_TEST(builder, invalidate_end_close_destroy_relaxed) { invalidate_end_close_destroy(CU_STREAM_CAPTURE_MODE_RELAXED); }

BACKEND_TEST(builder, invalidated_end_names_the_library_call_that_failed)
{
    cucap_builder *b = new_builder();
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;

    cr_assert_eq(cucap_device_pool(0, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(b), &d, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 1);
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "cucap_pool_alloc (cuMemAllocFromPoolAsync) failed"), "%s",
                       cucap_error_note(err, 0));
    cucap_error_free(err);
    cucap_builder_destroy(b);
}

/* A capture invalidated by a raw synchronous allocation on its thread,
 * no library call failing first: the end still says what can do that. */
BACKEND_TEST(builder, an_end_invalidated_from_outside_says_what_invalidates)
{
    cucap_builder *b = new_builder();
    cucap_error *err = NULL;
    CUdeviceptr d = 0;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 2, "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "a synchronous allocation or free"), "%s",
                       cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "no libcucapture call on this capture failed"), "%s",
                       cucap_error_note(err, 0));
    /* the mode it ran in, and what the others would have let through */
    cr_assert_not_null(strstr(cucap_error_note(err, 1), "the capture ran in global mode"), "%s",
                       cucap_error_note(err, 1));
    cr_assert_not_null(strstr(cucap_error_note(err, 1), "relaxed mode lets them all through"), "%s",
                       cucap_error_note(err, 1));
    cucap_error_free(err);
    cucap_builder_destroy(b);
}

/* A capture of a program's own blocking stream, invalidated by work on
 * the legacy default stream (a memset with stream 0, as a port from eager
 * code leaves behind) from a fresh thread with no context of its own
 * (the program's thread), no library call failing: the end names the
 * blocking stream and what to do. */
struct legacy_memset {
    CUcontext ctx;
    CUdeviceptr d;
    CUresult rc;
};

static void *memset_on_the_legacy_stream(void *p)
{
    struct legacy_memset *m = p;

    D.cuCtxSetCurrent(m->ctx);
    m->rc = D.cuMemsetD8Async(m->d, 1, 64, NULL);
    return NULL;
}

BACKEND_TEST(builder, an_end_invalidated_by_legacy_stream_work_names_the_blocking_stream)
{
    struct legacy_memset m = { NULL, 0, CUDA_SUCCESS };
    cucap_builder *b = NULL;
    cucap_error *err = NULL;
    CUstream s = NULL;
    pthread_t t;
    size_t i;
    int named = 0;

    cr_assert_eq(D.cuCtxGetCurrent(&m.ctx), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamCreate(&s, 0), CUDA_SUCCESS);   /* blocking, as cudaStreamCreate makes it */
    cr_assert_eq(D.cuMemAlloc(&m.d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_on_stream(s, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(m.d, 2, 64, s), CUDA_SUCCESS);
    cr_assert_eq(pthread_create(&t, NULL, memset_on_the_legacy_stream, &m), 0);
    pthread_join(t, NULL);
    cr_assert_eq(m.rc, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "the legacy-stream memset returned %d", (int)m.rc);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    for (i = 0; i < cucap_error_note_count(err); i++) {
        named |= strstr(cucap_error_note(err, i), "the capture's stream is a blocking stream") != NULL;
        named |= (strstr(cucap_error_note(err, i), "the capture ran in thread_local mode") != NULL) << 1;
    }
    cr_assert(named & 1, "no note names the blocking stream: %s", cucap_error_message(err));
    cr_assert(named & 2, "no note names the capture's mode: %s", cucap_error_message(err));
    cucap_error_free(err);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
    D.cuMemFree(m.d);
}

/* The registry finds a stream's capture among several running: a pool
 * call that fails on a fork of one is that capture's first failure, and
 * the other capture's pool calls and end are untouched. */
BACKEND_TEST(builder, a_pool_call_on_a_fork_is_recorded_in_its_own_capture)
{
    cucap_builder *a = new_builder(), *b = new_builder(), *fa = NULL, *fb = NULL;
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;
    size_t i;
    int named = 0;

    cr_assert_eq(cucap_device_pool(0, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(a, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(a, 2, &fa, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &fb, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(fa)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(fa), &d, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(fb), &d, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(pool, d, cucap_builder_stream(fb), NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, fb }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(a, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    for (i = 0; i < cucap_error_note_count(err); i++)
        named += strstr(cucap_error_note(err, i), "cucap_pool_alloc (cuMemAllocFromPoolAsync) failed") != NULL;
    cr_assert_eq(named, 1, "%s", cucap_error_note_count(err) ? cucap_error_note(err, 0) : "no note");
    cucap_error_free(err);
    cucap_builder_destroy(fa);
    cucap_builder_destroy(fb);
    cucap_builder_destroy(a);
    cucap_builder_destroy(b);
}

/* A pool call on a fork finds its capture whether the fork's entry is in
 * one of the registry's 64 quick slots or in the list beyond them, and the
 * slots a capture freed serve the next one. */
static void pool_failure_found_on_fork(size_t count, size_t which)
{
    cucap_builder *a = new_builder(), **forks = calloc(count - 1, sizeof *forks);
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;
    size_t i;
    int named = 0;

    cr_assert_not_null(forks);
    cr_assert_eq(cucap_device_pool(0, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(a, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(a, count, forks, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(forks[which])), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(forks[which]), &d, NULL),
                 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_end(a, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    for (i = 0; i < cucap_error_note_count(err); i++)
        named += strstr(cucap_error_note(err, i), "cucap_pool_alloc (cuMemAllocFromPoolAsync) failed") != NULL;
    cr_assert_eq(named, 1, "fork %zu of %zu: %s", which, count - 1,
                 cucap_error_note_count(err) ? cucap_error_note(err, 0) : "no note");
    cucap_error_free(err);
    for (i = 0; i < count - 1; i++)
        cucap_builder_destroy(forks[i]);
    cucap_builder_destroy(a);
    free(forks);
}

BACKEND_TEST(builder, a_pool_call_finds_the_capture_of_a_fork_in_a_quick_slot_or_the_list)
{
    pool_failure_found_on_fork(100, 0);    /* the origin and the first 63 forks take the slots */
    pool_failure_found_on_fork(100, 98);   /* in the list */
    pool_failure_found_on_fork(100, 98);   /* the slots freed by the last capture are taken again */
    pool_failure_found_on_fork(2, 0);
}

/* A builder's next split takes the streams of its last capture's joined
 * forks, as a hand-written loop reuses its fork streams: another
 * builder's split in between does not get them from the cache. */
static CUstream split_join_end(cucap_builder *b)
{
    cucap_builder *f = NULL;
    CUstream s;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    s = cucap_builder_stream(f);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    return s;
}

BACKEND_TEST(builder, a_split_takes_the_streams_of_the_builders_last_forks)
{
    cucap_builder *a = new_builder(), *other = new_builder();
    CUstream first = split_join_end(a), between;

    between = split_join_end(other);
    cr_assert_neq(between, first, "another builder's fork got the stream %p that a's last fork had", (void *)first);
    cr_assert_eq(cucap_builder_reset(a, NULL), CUDA_SUCCESS);
    cr_assert_eq(split_join_end(a), first);
    cucap_builder_destroy(other);
    cucap_builder_destroy(a);
}

/* ---------------------------------------------------------------- forks */

static void unjoined(int destroy_fork_first)
{
    cucap_builder *b = new_builder(), *f = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 3, 64, cucap_builder_stream(f)), CUDA_SUCCESS);
    if (destroy_fork_first)
        cucap_builder_destroy(f);
    else
        cr_assert_eq(cucap_builder_close(f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_INVALIDATED);
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_close(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(b);
    if (!destroy_fork_first)
        cucap_builder_destroy(f);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

BACKEND_TEST(builder, unjoined_fork_fork_destroyed_first) { unjoined(1); }
BACKEND_TEST(builder, unjoined_fork_root_destroyed_first) { unjoined(0); }

BACKEND_TEST(builder, forked_end_is_refused_and_the_capture_stays_active)
{
    cucap_builder *b = new_builder(), *f = NULL;
    cucap_error *err = NULL;
    int building = 0;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(f, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_builder_join"));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_is_building(b, &building, NULL), CUDA_SUCCESS);
    cr_assert_eq(building, 1);
    cr_assert_eq(cucap_builder_is_building(f, &building, NULL), CUDA_SUCCESS);
    cr_assert_eq(building, 1);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ f, b }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
}

/* End b, instantiate, launch, wait (in relaxed mode: other global
 * captures may be running): its graph runs. */
static void end_and_run(cucap_builder *b)
{
    cucap_relaxed_mode relaxed;
    cucap_exec *e = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &e, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(e, cucap_builder_stream(b), &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_relaxed_mode_enter(&relaxed, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_relaxed_mode_leave(&relaxed, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_exec_destroy(e);
}

/* The driver would answer CUDA_ERROR_STREAM_CAPTURE_MERGE and invalidate
 * both captures: the library refuses before any driver call, names both
 * captures, and both end and run afterwards.  Also a fork with another
 * capture's root, and a conditional body (its own capture) with its
 * parent's. */
BACKEND_TEST(builder, join_refuses_builders_of_other_captures)
{
    cucap_builder *root = new_builder(), *other = new_builder(), *third = new_builder(), *f = NULL, *got = NULL;
    cucap_builder *body = NULL, *all[4];
    CUgraphConditionalHandle c;
    cucap_error *err = NULL;
    unsigned char host[4 * 64];
    char name[2][32];
    CUdeviceptr d = 0;
    int i;

    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(root, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(third, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(root, 2, &f, NULL), CUDA_SUCCESS);
    all[0] = root, all[1] = f, all[2] = other, all[3] = third;
    for (i = 0; i < 4; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + 64 * (CUdeviceptr)i, (unsigned char)(0x30 + i), 64,
                                       cucap_builder_stream(all[i])), CUDA_SUCCESS);
    cucap_set_warning_handler(count_warning, NULL);
    warnings = 0;

    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ root, f, other, third }, 4, &got, &err),
                 CUDA_ERROR_INVALID_VALUE);
    snprintf(name[0], sizeof name[0], "%p", (void *)cucap_builder_stream(root));
    snprintf(name[1], sizeof name[1], "%p", (void *)cucap_builder_stream(other));
    cr_assert_not_null(strstr(cucap_error_message(err), "builder 2 is in another capture than the root (builder 0)"),
                       "%s", cucap_error_message(err));
    for (i = 0; i < 2; i++)
        cr_assert_not_null(strstr(cucap_error_message(err), name[i]), "%s names %s", cucap_error_message(err),
                           name[i]);
    cr_assert_not_null(strstr(cucap_error_message(err), "CUDA_ERROR_STREAM_CAPTURE_MERGE"));
    cucap_error_free(err);
    err = NULL;
    cr_assert_null(got, "a refused join writes no root");
    /* a fork of root joined into another capture's primary */
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ f, other }, 2, NULL, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "builder 0 is in another capture than the root (builder 1)"),
                       "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    /* a conditional body captures on its own: not in its parent's capture */
    cr_assert_eq(cucap_builder_create_condition(third, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(third, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ third, body }, 2, NULL, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = NULL;

    for (i = 0; i < 4; i++) {
        cr_assert_eq(cucap_builder_get_state(all[i]), CUCAP_BUILDER_CAPTURING, "builder %d", i);
        cr_assert_eq(capture_status(cucap_builder_stream(all[i])), CU_STREAM_CAPTURE_STATUS_ACTIVE, "builder %d", i);
    }
    cr_assert_eq(capture_status(cucap_builder_stream(body)), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(cucap_builder_end(body, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ root, f }, 2, &got, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(got, root);
    end_and_run(root);
    end_and_run(other);
    end_and_run(third);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < 4; i++)
        cr_assert_eq(host[64 * i + 7], 0x30 + i, "span %d is %#x", i, host[64 * i + 7]);
    cr_assert_eq(warnings, 0);
    cucap_set_warning_handler(NULL, NULL);
    cucap_builder_destroy(body);
    cucap_builder_destroy(f);
    cucap_builder_destroy(third);
    cucap_builder_destroy(root);
    cucap_builder_destroy(other);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* Two splits in one capture: the second takes the stream the first fork
 * joined back with, as hand-written code reuses its fork stream, and the
 * graph has the edges of that hand-written code (its fork's next work
 * follows its last). */
static size_t edges_of(CUgraph g)
{
    size_t n = 0;

    cr_assert_eq(D.cuGraphGetEdges(g, NULL, NULL, NULL, &n), CUDA_SUCCESS);
    return n;
}

BACKEND_TEST(builder, a_second_split_of_a_capture_reuses_a_joined_forks_stream)
{
    cucap_builder *b = new_builder(), *f1 = NULL, *f2 = NULL;
    cucap_graph *g = NULL;
    CUstream s = new_stream(), extra = new_stream(), first;
    CUevent ev[2];
    CUgraph raw = NULL;
    CUdeviceptr d = 0;
    int round;

    cr_assert_eq(D.cuMemAlloc(&d, 256), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f1, NULL), CUDA_SUCCESS);
    first = cucap_builder_stream(f1);
    cr_assert_eq(D.cuMemsetD8Async(d + 64, 2, 64, first), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 3, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f2, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_stream(f2), first, "the second split took the joined fork's stream");
    cr_assert_eq(D.cuMemsetD8Async(d + 128, 4, 64, cucap_builder_stream(f2)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 192, 5, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);

    /* the same by hand: one fork stream, events */
    for (round = 0; round < 2; round++)
        cr_assert_eq(D.cuEventCreate(&ev[round], CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    for (round = 0; round < 2; round++) {
        cr_assert_eq(D.cuMemsetD8Async(d, (unsigned char)(1 + 2 * round), 64, s), CUDA_SUCCESS);
        cr_assert_eq(D.cuEventRecord(ev[0], s), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamWaitEvent(extra, ev[0], 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d + 64 + 64 * (CUdeviceptr)round, (unsigned char)(2 + 2 * round), 64, extra),
                     CUDA_SUCCESS);
        cr_assert_eq(D.cuEventRecord(ev[1], extra), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamWaitEvent(s, ev[1], 0), CUDA_SUCCESS);
    }
    cr_assert_eq(D.cuMemsetD8Async(d + 192, 5, 64, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamEndCapture(s, &raw), CUDA_SUCCESS);
    cr_assert_eq(edges_of(cucap_graph_handle(g)), edges_of(raw), "library %zu edges, hand-written %zu",
                 edges_of(cucap_graph_handle(g)), edges_of(raw));
    cr_assert_eq(D.cuGraphDestroy(raw), CUDA_SUCCESS);
    for (round = 0; round < 2; round++)
        cr_assert_eq(D.cuEventDestroy(ev[round]), CUDA_SUCCESS);
    cucap_graph_unref(g);
    cucap_builder_destroy(f2);
    cucap_builder_destroy(f1);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuStreamDestroy(extra), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    D.cuMemFree(d);
}

/* ---------------------------------------------------------------- giving a capture up */

/* A capture given up with a fork still open: the thread is no longer
 * capturing (a synchronous allocation works), nothing is warned, and the
 * builder captures and runs again; a fork or a builder that does not
 * capture is left alone. */
BACKEND_TEST(builder, abandon_ends_the_capture_and_the_builder_begins_again)
{
    cucap_builder *b = new_builder(), *f = NULL, *g = NULL, *fg = NULL;
    cucap_error *err = NULL;
    unsigned char host[64];
    CUdeviceptr d = 0, scratch = 0;
    int mode;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cucap_set_warning_handler(count_warning, NULL);
    for (mode = 0; mode < 3; mode++) {
        warnings = 0;
        cr_assert_eq(cucap_builder_begin(b, all_modes[mode], NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d, 0xee, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d, 0xee, 64, cucap_builder_stream(f)), CUDA_SUCCESS);
        cucap_builder_abandon(f);   /* a fork alone: refused, with a warning */
        cr_assert_eq(warnings, 1);
        cr_assert_eq(last_warning, CUDA_ERROR_ILLEGAL_STATE);
        cr_assert_eq(cucap_builder_get_state(f), CUCAP_BUILDER_CAPTURING);
        cucap_builder_abandon(b);
        cr_assert_eq(warnings, 1, "an unjoined fork is no failure of a capture given up");
        cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_NOT_STARTED);
        cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_NONE);
        cr_assert_neq(cucap_builder_get_state(f), CUCAP_BUILDER_CAPTURING, "its fork's capture is over too");
        cr_assert_eq(D.cuMemAlloc(&scratch, 64), CUDA_SUCCESS, "the thread is no longer capturing");
        cr_assert_eq(D.cuMemFree(scratch), CUDA_SUCCESS);
        cucap_builder_abandon(b);   /* not capturing: nothing */
        cucap_builder_abandon(NULL);
        cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_NOT_STARTED);
        cucap_builder_destroy(f);
        /* the same builder captures, runs and is reset as before */
        cr_assert_eq(cucap_builder_begin(b, all_modes[mode], NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_split(b, 2, &fg, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d, (unsigned char)(0x40 + mode), 64, cucap_builder_stream(fg)), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, fg }, 2, NULL, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        end_and_run(b);
        cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
        cr_assert_eq(host[5], 0x40 + mode);
        cucap_builder_abandon(b);   /* ENDED: not capturing, left as it is */
        cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_ENDED);
        cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
        cucap_builder_destroy(fg);
        cr_assert_eq(warnings, 1);
    }
    /* a builder of its own, given up without a fork, destroyed at once */
    g = new_builder();
    cr_assert_eq(cucap_builder_begin(g, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(g)), CUDA_SUCCESS);
    cucap_builder_abandon(g);
    cucap_builder_destroy(g);
    cr_assert_eq(warnings, 1);
    cucap_set_warning_handler(NULL, NULL);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* A body given up: its node's body stays empty and the parent refuses to
 * be instantiated, naming it, until the body captures again. */
BACKEND_TEST(builder, an_abandoned_body_captures_again)
{
    cucap_builder *p = new_builder(), *body = NULL;
    CUgraphConditionalHandle c;
    cucap_exec *e = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;
    unsigned char host[64];

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(p, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(p, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 0xee, 64, cucap_builder_stream(body)), CUDA_SUCCESS);
    cucap_builder_abandon(body);
    cr_assert_eq(cucap_builder_get_state(body), CUCAP_BUILDER_INVALIDATED);
    cr_assert_eq(capture_status(cucap_builder_stream(body)), CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(cucap_builder_end(p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(p, NULL, &e, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_builder_if"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(d, 0x21, 64, cucap_builder_stream(body)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(p, NULL, &e, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(e, cucap_builder_stream(p), &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(p)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[9], 0x21, "the body of its second capture ran");
    cucap_exec_destroy(e);
    cucap_builder_destroy(body);
    cucap_builder_destroy(p);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* ---------------------------------------------------------------- a real graph */

#define SPLIT 4
#define SPAN 256

static cucap_builder *capture_four_ways(CUdeviceptr d, unsigned char base)
{
    cucap_builder *b = new_builder(), *forks[SPLIT - 1], *all[SPLIT], *root = NULL;
    cucap_error *err = NULL;
    int i;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, SPLIT, forks, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    all[0] = b;
    for (i = 0; i < SPLIT - 1; i++)
        all[i + 1] = forks[i];
    for (i = 0; i < SPLIT; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + (CUdeviceptr)i * SPAN, (unsigned char)(base + i), SPAN,
                                       cucap_builder_stream(all[i])), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join(all, SPLIT, &root, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(root, b);
    for (i = 0; i < SPLIT - 1; i++) {
        cr_assert_eq(cucap_builder_get_state(forks[i]), CUCAP_BUILDER_CLOSED);
        cucap_builder_destroy(forks[i]);
    }
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return b;
}

static void check_spans(CUdeviceptr d, unsigned char base)
{
    unsigned char host[SPLIT * SPAN];
    int i;

    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < SPLIT * SPAN; i++)
        cr_assert_eq(host[i], (unsigned char)(base + i / SPAN), "byte %d is %#x", i, host[i]);
}

BACKEND_TEST(builder, fork_join_graph_runs_and_updates)
{
    CUdeviceptr d;
    cucap_builder *first, *second, *other;
    cucap_exec *exec = NULL;
    cucap_graph *g = NULL;
    cucap_error *err = NULL;
    CUstream s = new_stream();

    cr_assert_eq(D.cuMemAlloc(&d, SPLIT * SPAN), CUDA_SUCCESS);
    first = capture_four_ways(d, 0x10);
    cr_assert_eq(cucap_builder_complete(first, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_spans(d, 0x10);

    second = capture_four_ways(d, 0x50);
    cr_assert_eq(cucap_exec_update(exec, second, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_spans(d, 0x50);

    /* another topology: the update is refused and says why */
    other = new_builder();
    cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 16, cucap_builder_stream(other)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(other, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_update(exec, other, &err), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_not_null(strstr(cucap_error_message(err), "CU_GRAPH_EXEC_UPDATE_ERROR"), "%s", cucap_error_message(err));
    /* a node is named only when the driver names one: never "(nil)" */
    cr_assert_null(strstr(cucap_error_message(err), "(nil)"), "%s", cucap_error_message(err));
    cr_assert_null(strstr(cucap_error_message(err), "0x0"), "%s", cucap_error_message(err));
    cucap_error_free(err);

    /* the graph outlives its builder */
    cr_assert_eq(cucap_builder_graph(first, &g, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(first);
    cr_assert_not_null(cucap_graph_handle(g));
    cr_assert_eq(cucap_graph_ref(g), g);
    cucap_graph_unref(g);
    cucap_exec_destroy(exec);
    exec = NULL;
    cr_assert_eq(cucap_graph_instantiate(g, NULL, &exec, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_upload(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_spans(d, 0x10);
    cucap_exec_destroy(exec);
    cucap_graph_unref(g);
    cucap_builder_destroy(second);
    cucap_builder_destroy(other);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("exec"), 0);
    }
}

BACKEND_TEST(builder, embed_and_builder_on_a_borrowed_stream)
{
    CUstream s = new_stream();
    cucap_builder *parent = NULL, *child = new_builder();
    cucap_exec *exec = NULL;
    CUdeviceptr d;
    unsigned char host[32];

    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(child, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 0x77, sizeof host, cucap_builder_stream(child)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(child, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_on_stream(s, &parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_stream(parent), s);
    cr_assert_eq(cucap_builder_begin(parent, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_embed(parent, child, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(parent, NULL, &exec, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[7], 0x77);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(parent);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS, "the borrowed stream is still the caller's");
    cucap_builder_destroy(child);
    D.cuMemFree(d);
}

/* ---------------------------------------------------------------- fault injection over a whole cycle */

static CUresult cycle(CUdeviceptr d)
{
    cucap_builder *b = NULL, *forks[2] = { NULL, NULL }, *all[3];
    cucap_exec *exec = NULL;
    CUstream s;
    CUresult rc;
    int i;

    if ((rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
        return rc;
    s = cucap_builder_stream(b);
    if ((rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) != CUDA_SUCCESS)
        goto out;
    if ((rc = cucap_builder_split(b, 3, forks, NULL)) == CUDA_SUCCESS) {
        all[0] = b;
        all[1] = forks[0];
        all[2] = forks[1];
        for (i = 0; i < 3 && rc == CUDA_SUCCESS; i++)
            rc = D.cuMemsetD8Async(d + (CUdeviceptr)i * 16, (unsigned char)i, 16, cucap_builder_stream(all[i]));
        if (rc == CUDA_SUCCESS)
            rc = cucap_builder_join(all, 3, NULL, NULL);
    }
    {
        CUresult end = cucap_builder_end(b, NULL);
        if (rc == CUDA_SUCCESS)
            rc = end;
    }
    if (rc == CUDA_SUCCESS && (rc = cucap_builder_complete(b, NULL, &exec, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_exec_launch(exec, s, NULL)) == CUDA_SUCCESS)
        rc = D.cuStreamSynchronize(s);
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(forks[0]);
    cucap_builder_destroy(forks[1]);
    cucap_builder_destroy(b);
    return rc;
}

/* Failures the library recovers from fully, so that they need no report:
 * a status query while a fork's stream is released (the stream waits for
 * the capture's end), the stream cache's retain of its context (the call
 * makes fresh streams instead). */
static int recovered_silently(const char *call)
{
    return call && (!strcmp(call, "cuStreamGetCaptureInfo") || !strcmp(call, "cuDevicePrimaryCtxRetain"));
}

static int is_cleanup(const char *call)
{
    return call && (strstr(call, "Destroy") || !strcmp(call, "cuDevicePrimaryCtxRelease"));
}

FAULT_BACKEND_TEST(builder, every_driver_call_of_a_cycle_fails_in_turn)
{
    CUdeviceptr d;
    long total, i;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cycle(d), CUDA_SUCCESS);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cycle(d), CUDA_SUCCESS);
    total = calls("*");
    cr_assert_geq(total, 20, "the cycle made %ld driver calls", total);
    cucap_set_warning_handler(count_warning, NULL);
    for (i = 1; i <= total; i++) {
        char rule[64];
        const char *failed;
        int before = warnings;
        long streams = on_simulator() ? sim_live_settled("stream") : 0, graphs = on_simulator() ? sim_live_settled("graph") : 0;
        CUresult rc;

        snprintf(rule, sizeof rule, "*:%ld:CUDA_ERROR_ECC_UNCORRECTABLE", i);
        cr_assert_eq(set_rules(rule), 0);
        rc = cycle(d);
        failed = last_injected();
        cr_assert_eq(injected(), 1, "call %ld", i);
        /* a failed status query while a fork's stream is released is fully
         * recovered from (the stream waits for the capture's end), so it
         * needs no report; every other failure is returned or warned about */
        cr_assert(rc != CUDA_SUCCESS || warnings > before || recovered_silently(failed),
                  "call %ld (%s) failed and nobody heard: no error, no warning", i, failed);
        if (on_simulator() && !is_cleanup(failed)) {
            cr_assert_eq(sim_live_settled("stream"), streams, "call %ld (%s) leaked a stream", i, failed);
            cr_assert_eq(sim_live_settled("graph"), graphs, "call %ld (%s) leaked a graph", i, failed);
            cr_assert_eq(sim_live_settled("exec"), 0, "call %ld (%s) leaked an exec", i, failed);
        }
        if (thread_mode() != CU_STREAM_CAPTURE_MODE_GLOBAL)
            set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    }
    cucap_set_warning_handler(NULL, NULL);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cycle(d), CUDA_SUCCESS, "the library works again once the driver does");
    D.cuMemFree(d);
}

/* The same sweep as a user meets it: each cycle on a fresh thread with no
 * current context (so every stream and event the library makes is made
 * with its context made current and the thread's NULL restored, calls a
 * fixture's current context skips), for every failure code a driver call
 * can give, over a fork/join cycle and over a re-capture + update +
 * launch.  A stale handle handed on after a failure stops the simulator
 * (it quarantines destroyed streams and events) and ASan. */

/* re-capture the cycle's fork/join into an existing exec, then launch it */
static CUresult update_cycle(CUdeviceptr d, cucap_exec *exec, unsigned char value)
{
    cucap_builder *b = NULL, *fork = NULL;
    CUresult rc;

    if ((rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_split(b, 2, &fork, NULL)) == CUDA_SUCCESS &&
        (rc = D.cuMemsetD8Async(d, value, 16, cucap_builder_stream(b))) == CUDA_SUCCESS &&
        (rc = D.cuMemsetD8Async(d + 16, value, 16, cucap_builder_stream(fork))) == CUDA_SUCCESS)
        rc = cucap_builder_join_forks(b, NULL);
    if (cucap_builder_get_state(b) == CUCAP_BUILDER_CAPTURING) {
        CUresult end = cucap_builder_end(b, NULL);
        if (rc == CUDA_SUCCESS)
            rc = end;
    }
    if (rc == CUDA_SUCCESS && (rc = cucap_exec_update(exec, b, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_exec_launch(exec, cucap_builder_stream(b), NULL)) == CUDA_SUCCESS)
        rc = D.cuStreamSynchronize(cucap_builder_stream(b));
    cucap_builder_destroy(fork);
    cucap_builder_destroy(b);
    return rc;
}

/* the same with one builder reset for every capture and a kept fork,
 * both living from one cycle (and thread) to the next */
static CUresult kept_update_cycle(CUdeviceptr d, cucap_exec *exec, cucap_builder **b, cucap_builder **fork)
{
    CUresult rc;

    if (!*b && (rc = cucap_builder_create(0, b, NULL)) != CUDA_SUCCESS)
        return rc;
    if (cucap_builder_get_state(*b) == CUCAP_BUILDER_CAPTURING)   /* the last cycle's end failed: again */
        (void)cucap_builder_end(*b, NULL);
    if ((rc = cucap_builder_reset(*b, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_begin(*b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_split_kept(*b, 2, fork, NULL)) == CUDA_SUCCESS &&
        (rc = D.cuMemsetD8Async(d, 0x5a, 16, cucap_builder_stream(*b))) == CUDA_SUCCESS &&
        (rc = D.cuMemsetD8Async(d + 16, 0x5a, 16, cucap_builder_stream(*fork))) == CUDA_SUCCESS)
        rc = cucap_builder_join_forks(*b, NULL);
    if (cucap_builder_get_state(*b) == CUCAP_BUILDER_CAPTURING) {
        CUresult end = cucap_builder_end(*b, NULL);
        if (rc == CUDA_SUCCESS)
            rc = end;
    }
    if (rc == CUDA_SUCCESS && (rc = cucap_exec_update(exec, *b, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_exec_launch(exec, cucap_builder_stream(*b), NULL)) == CUDA_SUCCESS)
        rc = D.cuStreamSynchronize(cucap_builder_stream(*b));
    return rc;
}

enum workload { FORK_JOIN, UPDATE_LAUNCH, KEPT_UPDATE_LAUNCH };

struct sweep_run {
    enum workload workload;
    CUdeviceptr d;
    cucap_exec *exec;   /* UPDATE_LAUNCH: made outside the faults */
    CUresult rc;
    cucap_builder *kept, *kept_fork;   /* KEPT_UPDATE_LAUNCH: from cycle to cycle */
};

static void *sweep_thread(void *arg)
{
    struct sweep_run *r = arg;

    r->rc = r->workload == FORK_JOIN       ? cycle(r->d)
            : r->workload == UPDATE_LAUNCH ? update_cycle(r->d, r->exec, 0x5a)
                                           : kept_update_cycle(r->d, r->exec, &r->kept, &r->kept_fork);
    return NULL;
}

static CUresult run_fresh(struct sweep_run *r)
{
    pthread_t t;

    cr_assert_eq(pthread_create(&t, NULL, sweep_thread, r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    return r->rc;
}

static void sweep_from_fresh_threads(enum workload workload, const char *name)
{
    static const CUresult codes[] = { CUDA_ERROR_UNKNOWN, CUDA_ERROR_OUT_OF_MEMORY,
                                      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, CUDA_ERROR_DEINITIALIZED,
                                      CUDA_ERROR_ECC_UNCORRECTABLE };
    struct sweep_run r = { workload, 0, NULL, CUDA_SUCCESS, NULL, NULL };
    cucap_builder *b = NULL;
    size_t c;
    long total, i;

    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(D.cuMemAlloc(&r.d, 64), CUDA_SUCCESS);
    if (workload != FORK_JOIN) {   /* the exec the loop updates */
        cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        {
            cucap_builder *fork = NULL;
            cr_assert_eq(cucap_builder_split(b, 2, &fork, NULL), CUDA_SUCCESS);
            cr_assert_eq(D.cuMemsetD8Async(r.d, 1, 16, cucap_builder_stream(b)), CUDA_SUCCESS);
            cr_assert_eq(D.cuMemsetD8Async(r.d + 16, 1, 16, cucap_builder_stream(fork)), CUDA_SUCCESS);
            cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
            cucap_builder_destroy(fork);
        }
        cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_complete(b, NULL, &r.exec, NULL), CUDA_SUCCESS);
        cucap_builder_destroy(b);
    }
    cr_assert_eq(run_fresh(&r), CUDA_SUCCESS, "%s: the workload fails without faults", name);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(run_fresh(&r), CUDA_SUCCESS);
    total = calls("*");
    cr_assert_geq(total, 10, "%s made %ld driver calls", name, total);
    cucap_set_warning_handler(count_warning, NULL);
    for (c = 0; c < sizeof codes / sizeof codes[0]; c++)
        for (i = 1; i <= total; i++) {
            char rule[64];
            const char *failed;
            int before = warnings;
            long streams = on_simulator() ? sim_live_settled("stream") : 0;
            long events = on_simulator() ? sim_live_settled("event") : 0;
            CUresult rc;

            snprintf(rule, sizeof rule, "*:%ld:%d", i, (int)codes[c]);
            cr_assert_eq(set_rules(rule), 0);
            rc = run_fresh(&r);
            failed = last_injected();
            cr_assert_eq(injected(), 1, "%s, rule %s", name, rule);
            /* warnings of a driver shutting down are not given (cucap_set_warning_handler(3)) */
            cr_assert(rc != CUDA_SUCCESS || warnings > before || codes[c] == CUDA_ERROR_DEINITIALIZED ||
                          recovered_silently(failed),
                      "%s, rule %s (%s): failed and nobody heard", name, rule, failed);
            /* the next cycle, without faults, works and hands out only live handles */
            cr_assert_eq(set_rules(""), 0);
            cr_assert_eq(run_fresh(&r), CUDA_SUCCESS, "%s, after rule %s (%s): the next cycle failed", name, rule,
                         failed);
            /* a kept builder's stream, its fork's and the split's event
             * live in the builder, its recycled hierarchy or the cache,
             * depending on what failed: bounded, every one of them gone
             * with the builder (below) */
            if (on_simulator() && workload == KEPT_UPDATE_LAUNCH) {
                cr_assert_leq(sim_live_settled("stream"), 2, "%s, rule %s (%s) leaked a stream", name, rule, failed);
                cr_assert_leq(sim_live_settled("event"), 1, "%s, rule %s (%s) leaked an event", name, rule, failed);
            } else if (on_simulator() && !is_cleanup(failed)) {
                cr_assert_eq(sim_live_settled("stream"), streams, "%s, rule %s (%s) leaked a stream", name, rule, failed);
                cr_assert_eq(sim_live_settled("event"), events, "%s, rule %s (%s) leaked an event", name, rule, failed);
            }
        }
    cucap_set_warning_handler(NULL, NULL);
    cucap_exec_destroy(r.exec);
    cucap_builder_destroy(r.kept_fork);
    cucap_builder_destroy(r.kept);
    if (on_simulator() && workload == KEPT_UPDATE_LAUNCH) {   /* (a graph whose destroy was made to fail stays) */
        cr_assert_eq(sim_live_settled("stream"), 0, "%s: a stream outlived its builder", name);
        cr_assert_eq(sim_live_settled("event"), 0, "%s: an event outlived its builder", name);
    }
    D.cuMemFree(r.d);
}

FAULT_BACKEND_TEST(builder, every_failure_of_a_fork_join_cycle_from_fresh_threads)
{
    sweep_from_fresh_threads(FORK_JOIN, "fork/join");
}

FAULT_BACKEND_TEST(builder, every_failure_of_an_update_and_launch_from_fresh_threads)
{
    sweep_from_fresh_threads(UPDATE_LAUNCH, "update + launch");
}

FAULT_BACKEND_TEST(builder, every_failure_of_a_kept_fork_update_loop_from_fresh_threads)
{
    sweep_from_fresh_threads(KEPT_UPDATE_LAUNCH, "kept-fork update + launch");
}

/* ---------------------------------------------------------------- a capture another thread invalidated */

/* Another thread, in global mode with the primary context current,
 * synchronizes a stream of its own: the driver refuses and invalidates
 * every global capture (doc/driver-facts.md, "Calls from another thread during a global capture"). */
static void *invalidating_sync(void *arg)
{
    CUresult *rc = arg;
    CUcontext ctx = NULL;
    CUstream s = NULL;

    if ((*rc = D.cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS)
        return NULL;
    if ((*rc = D.cuCtxSetCurrent(ctx)) == CUDA_SUCCESS && (*rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS) {
        *rc = D.cuStreamSynchronize(s);
        D.cuStreamDestroy(s);
    }
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
    return NULL;
}

static CUresult invalidate_from_another_thread(void)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_t t;

    if (pthread_create(&t, NULL, invalidating_sync, &rc) != 0 || pthread_join(t, NULL) != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    return rc;
}

struct outside_invalidation {
    int join;                      /* split, or join forks split before the invalidation */
    int invalidate;                /* 0: the capture stays active (the driver's code is kept) */
    CUresult other, call, end;
    char message[1024], end_text[4096];
};

static void *capture_invalidated_by_another_thread(void *arg)
{
    struct outside_invalidation *r = arg;
    cucap_builder *b = NULL, *f = NULL;
    cucap_error *err = NULL;

    r->call = r->end = CUDA_ERROR_UNKNOWN;
    if (cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS ||
        cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) != CUDA_SUCCESS ||
        (r->join && cucap_builder_split(b, 2, &f, NULL) != CUDA_SUCCESS)) {
        cucap_builder_destroy(b);
        return NULL;
    }
    r->other = r->invalidate ? invalidate_from_another_thread() : CUDA_SUCCESS;
    /* the driver's answer seen on the H200 for a wait on an event of such a capture */
    set_rules("cuEventRecord:1:CUDA_ERROR_INVALID_VALUE");
    r->call = r->join ? cucap_builder_join((cucap_builder *const[]){ b, f }, 2, NULL, &err)
                      : cucap_builder_split(b, 2, &f, &err);
    snprintf(r->message, sizeof r->message, "%s", err ? cucap_error_message(err) : "");
    cucap_error_free(err);
    err = NULL;
    set_rules("");
    r->end = cucap_builder_end(b, &err);
    if (err) {
        char *text = cucap_error_to_string(err);
        snprintf(r->end_text, sizeof r->end_text, "%s", text ? text : "");
        free(text);
    }
    cucap_error_free(err);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
    return NULL;
}

static void check_outside_invalidation(int join)
{
    struct outside_invalidation r;
    const char *name = join ? "cucap_builder_join" : "cucap_builder_split";
    pthread_t t;

    memset(&r, 0, sizeof r);
    r.join = join;
    r.invalidate = 1;
    cr_assert_eq(pthread_create(&t, NULL, capture_invalidated_by_another_thread, &r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(r.other, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the other thread's synchronize gave %d", r.other);
    cr_assert_eq(r.call, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s gave %d: %s", name, r.call, r.message);
    cr_assert_not_null(strstr(r.message, name), "%s", r.message);
    cr_assert_not_null(strstr(r.message, "cuEventRecord failed: CUDA_ERROR_INVALID_VALUE"), "%s", r.message);
    cr_assert_not_null(strstr(r.message, "invalidated before this call"), "%s", r.message);
    cr_assert_not_null(strstr(r.message, "another thread's global-mode call"), "%s", r.message);
    cr_assert_eq(r.end, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_not_null(strstr(r.end_text, name), "the end names the call that found the capture broken: %s",
                       r.end_text);

    /* the capture still active: the driver's code is reported as it is
     * (a join of active forks takes no event, so a split shows it) */
    if (join)
        return;
    memset(&r, 0, sizeof r);
    r.join = join;
    cr_assert_eq(pthread_create(&t, NULL, capture_invalidated_by_another_thread, &r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(r.call, CUDA_ERROR_INVALID_VALUE, "%s gave %d: %s", name, r.call, r.message);
    cr_assert_null(strstr(r.message, "invalidated"), "%s", r.message);
}

FAULT_BACKEND_TEST(builder, a_split_in_a_capture_another_thread_invalidated_says_so)
{
    check_outside_invalidation(0);
}

FAULT_BACKEND_TEST(builder, a_join_in_a_capture_another_thread_invalidated_says_so)
{
    check_outside_invalidation(1);
}

/* ---------------------------------------------------------------- found by the API fuzzer */

/* The stream cache switched to relaxed mode to retain its context and
 * dropped a failed restore silently, leaving the thread relaxed. */
FAULT_BACKEND_TEST(builder, a_failed_restore_in_the_stream_cache_is_reported)
{
    cucap_builder *b = new_builder(), *f = NULL;

    cucap_release_cached();   /* the next split makes the cache, in relaxed mode */
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    warnings = 0;
    cucap_set_warning_handler(count_warning, NULL);
    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS, "the split itself works with fresh streams");
    cr_assert_eq(warnings, 1, "the failed restore must reach the warning handler");
    cr_assert_eq(last_warning, CUDA_ERROR_UNKNOWN);
    cucap_set_warning_handler(NULL, NULL);
    cr_assert_eq(set_rules(""), 0);
    set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);   /* the failed restore left it relaxed */
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
}

/* A failed end that left the capture running stranded the capture and its
 * stream when the builder was closed; close now tries the end once more. */
FAULT_BACKEND_TEST(builder, close_retries_an_end_that_left_the_capture_running)
{
    cucap_builder *b = new_builder();
    cucap_error *err = NULL;
    CUstream s;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    s = cucap_builder_stream(b);
    cr_assert_eq(set_rules("cuStreamEndCapture:1:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_builder_close(b, &err), CUDA_ERROR_UNKNOWN);
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CLOSED);
    cr_assert_eq(calls("cuStreamEndCapture"), 2, "the end is tried once more");
    /* released into the stream cache, in no capture, not stranded */
    cr_assert_eq(calls("cuStreamDestroy"), 0, "the stream goes back to the cache");
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    cucap_builder_destroy(b);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("graph"), 0);
    }
}

/* A join that fails while its capture runs closes its forks the one way
 * a join closes forks: their streams, which are in that capture, wait
 * for its end and then go back to the cache.  Ten captures, each with
 * a join refused by the driver and then abandoned, destroy no stream and
 * make none after the first (a general release destroyed both forks'
 * streams each time, as not provably in the capture). */
FAULT_BACKEND_TEST(builder, a_failed_join_leaves_its_forks_streams_to_the_capture_s_end)
{
    cucap_builder *b = new_builder(), *forks[3] = { NULL, NULL, NULL };
    cucap_error *err = NULL;
    CUdeviceptr d;
    long made = 0;
    int i;

    cr_assert_eq(D.cuMemAlloc(&d, 128), CUDA_SUCCESS);
    for (i = 0; i < 10; i++) {
        if (i == 1)
            made = calls("cuStreamCreate");
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        forks[0] = b;
        cr_assert_eq(cucap_builder_split(b, 3, &forks[1], NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(forks[1])), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d + 64, 2, 64, cucap_builder_stream(forks[2])), CUDA_SUCCESS);
        cr_assert_eq(set_rules("cuStreamUpdateCaptureDependencies:1:CUDA_ERROR_ILLEGAL_STATE"), 0);
        cr_assert_neq(cucap_builder_join(forks, 3, NULL, &err), CUDA_SUCCESS, "the join was not refused");
        cucap_error_free(err);
        err = NULL;
        cr_assert_eq(injected(), 1, "the join never asked for the capture dependencies (%ld)", injected());
        cr_assert_eq(cucap_builder_get_state(forks[1]), CUCAP_BUILDER_CLOSED);
        cr_assert_eq(cucap_builder_get_state(forks[2]), CUCAP_BUILDER_CLOSED);
        cucap_builder_destroy(forks[1]);
        cucap_builder_destroy(forks[2]);
        cucap_builder_abandon(b);
        cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_NOT_STARTED);
        cr_assert_eq(calls("cuStreamDestroy"), 0, "capture %d: a fork's stream was destroyed", i);
    }
    cr_assert_eq(calls("cuStreamCreate") - made, 0, "the later captures made %ld streams",
                 calls("cuStreamCreate") - made);
    cucap_builder_destroy(b);
    cr_assert_eq(set_rules(""), 0);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* ---------------------------------------------------------------- isolation (issue: never break another capture) */

/* A body's stream that the user made part of another capture, then the
 * body destroyed: the stream must not go back to the cache, or the next
 * split of an unrelated builder merges two captures. */
BACKEND_TEST(builder, a_destroyed_builder_never_hands_out_a_stream_inside_another_capture)
{
    cucap_builder *p = new_builder(), *q = new_builder(), *fp = NULL, *body = NULL, *fq = NULL;
    CUgraphConditionalHandle c;
    CUevent ev;
    CUdeviceptr d;
    int building = 0;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 2, &fp, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(fp)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(q, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(q, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(q, c, &body, NULL), CUDA_SUCCESS);
    /* the body's stream joins P's capture behind the library's back */
    cr_assert_eq(D.cuEventRecord(ev, cucap_builder_stream(fp)), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamWaitEvent(cucap_builder_stream(body), ev, 0), CUDA_SUCCESS);
    cr_assert_eq(capture_status(cucap_builder_stream(body)), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cucap_builder_destroy(body);
    cr_assert_eq(cucap_builder_split(q, 2, &fq, NULL), CUDA_SUCCESS, "Q's fork must be a stream of no capture");
    cr_assert_eq(cucap_builder_is_building(q, &building, NULL), CUDA_SUCCESS, "Q stays ACTIVE");
    cr_assert_eq(building, 1);
    cr_assert_eq(cucap_builder_is_building(p, &building, NULL), CUDA_SUCCESS, "P stays ACTIVE");
    cr_assert_eq(building, 1);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ q, fq }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ p, fp }, 2, NULL, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(fq);
    cucap_builder_destroy(fp);
    cucap_builder_destroy(q);
    cucap_builder_destroy(p);
    D.cuEventDestroy(ev);
    D.cuMemFree(d);
}

static void noop_host(void *p)
{
    (void)p;
}

/* cucap_exec_launch's refusals, from a fresh thread with no context
 * current: a NULL executable graph, and a launch into a capturing stream,
 * which the driver refuses and which invalidates that capture; the
 * capture's end then names the launch. */
struct launch_refusals {
    CUresult made, null_exec, launch, end;
    char null_message[200], launch_message[400], end_note[400];
    size_t end_notes;
};

static void copy_message(char *to, size_t size, cucap_error **err)
{
    snprintf(to, size, "%s", *err ? cucap_error_message(*err) : "(no error)");
    cucap_error_free(*err);
    *err = NULL;
}

static void *launch_refusals_thread(void *p)
{
    struct launch_refusals *r = p;
    cucap_builder *made = NULL, *capturing = NULL;
    cucap_graph *g = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    if ((r->made = cucap_builder_create(0, &made, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_builder_begin(made, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
        (r->made = D.cuLaunchHostFunc(cucap_builder_stream(made), noop_host, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_builder_end(made, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_builder_graph(made, &g, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_graph_instantiate(g, NULL, &exec, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_builder_create(0, &capturing, NULL)) == CUDA_SUCCESS &&
        (r->made = cucap_builder_begin(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS) {
        r->null_exec = cucap_exec_launch(NULL, cucap_builder_stream(made), &err);
        copy_message(r->null_message, sizeof r->null_message, &err);
        r->launch = cucap_exec_launch(exec, cucap_builder_stream(capturing), &err);
        copy_message(r->launch_message, sizeof r->launch_message, &err);
        r->end = cucap_builder_end(capturing, &err);
        r->end_notes = err ? cucap_error_note_count(err) : 0;
        snprintf(r->end_note, sizeof r->end_note, "%s", r->end_notes ? cucap_error_note(err, 0) : "(no note)");
        cucap_error_free(err);
    }
    cucap_graph_unref(g);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(capturing);
    cucap_builder_destroy(made);
    return NULL;
}

BACKEND_TEST(builder, a_refused_launch_says_why_and_the_capture_it_broke_names_it)
{
    struct launch_refusals r = { 0 };
    pthread_t t;

    cr_assert_eq(pthread_create(&t, NULL, launch_refusals_thread, &r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(r.made, CUDA_SUCCESS);
    cr_assert_eq(r.null_exec, CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(r.null_message, "cucap_exec_launch: the executable graph is NULL"), "%s", r.null_message);
    cr_assert_eq(r.launch, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s", r.launch_message);
    cr_assert_not_null(strstr(r.launch_message, "cucap_exec_launch: cuGraphLaunch failed"), "%s", r.launch_message);
    cr_assert_not_null(strstr(r.launch_message, "embed a graph with cucap_builder_embed"), "%s", r.launch_message);
    cr_assert_eq(r.end, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(r.end_notes, 1);
    cr_assert_not_null(strstr(r.end_note, "cucap_exec_launch (cuGraphLaunch) failed"), "%s", r.end_note);
}

/* join's root must be capturing: a NOT_STARTED body or a fork whose
 * capture ended would silently join the capture of whatever it waits on. */
BACKEND_TEST(builder, join_refuses_a_root_that_is_not_capturing)
{
    cucap_builder *p = new_builder(), *q = new_builder(), *r = new_builder(), *fp = NULL, *fr = NULL, *body = NULL;
    CUgraphConditionalHandle c;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 2, &fp, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(q, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(q, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(q, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ body, fp }, 2, NULL, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "root"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "NOT_STARTED"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_get_state(fp), CUCAP_BUILDER_CAPTURING, "a refused join touches nothing");
    cr_assert_eq(capture_status(cucap_builder_stream(body)), CU_STREAM_CAPTURE_STATUS_NONE);
    /* a fork whose capture ended, as the root */
    cr_assert_eq(cucap_builder_begin(r, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(r, 2, &fr, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuLaunchHostFunc(cucap_builder_stream(fr), noop_host, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(r, NULL), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cr_assert_eq(cucap_builder_get_state(fr), CUCAP_BUILDER_INVALIDATED, "a fork's capture ends with its primary's");
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ fr, fp }, 2, NULL, &err), CUDA_ERROR_ILLEGAL_STATE);
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ p, fp }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(fr);
    cucap_builder_destroy(r);
    cucap_builder_destroy(body);
    cucap_builder_destroy(q);
    cucap_builder_destroy(fp);
    cucap_builder_destroy(p);
}

BACKEND_TEST(builder, a_fork_whose_capture_ended_reports_it_and_cannot_split)
{
    cucap_builder *p = new_builder(), *f = NULL, *g[1] = { NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_get_state(f), CUCAP_BUILDER_CAPTURING);
    cr_assert_eq(D.cuLaunchHostFunc(cucap_builder_stream(f), noop_host, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cr_assert_eq(cucap_builder_get_state(f), CUCAP_BUILDER_INVALIDATED);
    cr_assert_eq(cucap_builder_split(f, 2, g, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_null(g[0], "no fork of no capture is handed out");
    cr_assert_not_null(strstr(cucap_error_message(err), "primary's capture ended"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cucap_builder_destroy(p);
    cucap_builder_destroy(f);
}

/* root may point into the array: inputs are read before outputs are written */
BACKEND_TEST(builder, join_writes_the_root_after_reading_the_array)
{
    cucap_builder *p = new_builder(), *f = NULL, *arr[2];

    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 2, &f, NULL), CUDA_SUCCESS);
    arr[0] = f;
    arr[1] = p;
    cr_assert_eq(cucap_builder_join(arr, 2, &arr[0], NULL), CUDA_SUCCESS);
    cr_assert_eq(arr[0], p);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    cucap_builder_destroy(p);
}

BACKEND_TEST(builder, split_refuses_a_count_no_array_holds_before_writing)
{
    cucap_builder *p = new_builder(), *forks[2] = { (cucap_builder *)&forks, (cucap_builder *)&forks };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, SIZE_MAX / 8 + 2, forks, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "65536"), "%s", cucap_error_message(err));
    cr_assert_eq(forks[0], (cucap_builder *)&forks, "nothing written");
    cucap_error_free(err);
    cucap_builder_destroy(p);
}

/* ---------------------------------------------------------------- a thread that never made a context current */

struct fresh {
    CUresult create, begin, work, end, complete, launch, alloc, free_rc;
    CUcontext current_after;
};

static void *fresh_thread(void *p)
{
    struct fresh *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_pool *pool = NULL;
    CUdeviceptr a = 0;

    r->create = cucap_builder_create(0, &b, NULL);
    r->begin = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    r->work = cucap_device_pool(0, &pool, NULL);
    if (r->work == CUDA_SUCCESS)
        r->work = cucap_pool_alloc(pool, 64, cucap_builder_stream(b), &a, NULL);
    if (r->work == CUDA_SUCCESS)
        r->work = cucap_pool_free(pool, a, cucap_builder_stream(b), NULL);
    r->end = cucap_builder_end(b, NULL);
    r->complete = cucap_builder_complete(b, NULL, &exec, NULL);
    r->launch = cucap_exec_launch(exec, NULL, NULL);
    a = 0;
    r->alloc = cucap_pool_alloc(pool, 64, NULL, &a, NULL);
    r->free_rc = cucap_pool_free(pool, a, NULL, NULL);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuCtxGetCurrent(&r->current_after);
    return NULL;
}

BACKEND_TEST(builder, a_fresh_thread_without_a_context_can_do_everything)
{
    struct fresh r;
    pthread_t t;

    memset(&r, 0xff, sizeof r);
    cr_assert_eq(pthread_create(&t, NULL, fresh_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.create, CUDA_SUCCESS);
    cr_assert_eq(r.begin, CUDA_SUCCESS);
    cr_assert_eq(r.work, CUDA_SUCCESS);
    cr_assert_eq(r.end, CUDA_SUCCESS);
    cr_assert_eq(r.complete, CUDA_SUCCESS, "instantiate needs a context: the library makes it current");
    cr_assert_eq(r.launch, CUDA_SUCCESS, "launch on the NULL stream");
    cr_assert_eq(r.alloc, CUDA_SUCCESS, "an allocation on the NULL stream needs a context");
    cr_assert_eq(r.free_rc, CUDA_SUCCESS);
    cr_assert_null(r.current_after, "the thread's own (no) context is restored");
}

/* ---------------------------------------------------------------- a warning handler that calls the library */

static cucap_builder *reentrant_target;
static char reentrant_message[512];
static CUresult reentrant_rc = CUDA_ERROR_UNKNOWN;

static void reentrant_warning(const cucap_error *w, void *data)
{
    cucap_builder *f = NULL;

    (void)data;
    snprintf(reentrant_message, sizeof reentrant_message, "%s", cucap_error_message(w));
    if (reentrant_target) {
        cucap_builder *b = reentrant_target;
        reentrant_target = NULL;   /* once */
        reentrant_rc = cucap_builder_split(b, 2, &f, NULL);
        cucap_builder_destroy(f);
    }
}

FAULT_BACKEND_TEST(builder, a_warning_handler_may_call_the_library)
{
    cucap_builder *b = new_builder(), *other = new_builder(), *f = NULL, *body = NULL;
    CUgraphConditionalHandle c;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cucap_release_cached();   /* the next split makes the cache, in relaxed mode */
    reentrant_target = other;
    cucap_set_warning_handler(reentrant_warning, NULL);
    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(reentrant_rc, CUDA_SUCCESS, "the handler's own split ran (no lock held)");
    cr_assert_eq(strncmp(reentrant_message, "cucap_builder_split:", 20), 0, "%s", reentrant_message);
    /* the message names the public function that was called */
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cucap_release_cached();
    reentrant_message[0] = '\0';
    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(strncmp(reentrant_message, "cucap_builder_if:", 17), 0, "%s", reentrant_message);
    cucap_set_warning_handler(NULL, NULL);
    {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_GLOBAL;
        D.cuThreadExchangeStreamCaptureMode(&m);
    }
    cucap_builder_destroy(body);
    cucap_builder_destroy(f);
    cucap_builder_destroy(other);
    cucap_builder_destroy(b);
}

#if CUDA_VERSION >= 12050   /* green contexts and cuStreamGetCtx_v2 */
/* ---------------------------------------------------------------- green contexts */

/* A green context over part of device 0's SMs, and a stream of it. */
struct green {
    CUgreenCtx ctx;
    CUstream stream;
    unsigned int sms;
};

#define ENTRY(symbol, version) ((PFN_##symbol##_v##version)cucap_i_driver_entry_point_at(#symbol, version))

static int make_green(struct green *g)
{
    CUdevResource all, part[1], rest;
    CUdevResourceDesc desc;
    unsigned int groups = 1;

    memset(g, 0, sizeof *g);
    if (!cucap_i_driver_entry_point_at("cuGreenCtxCreate", 12040) ||
        !cucap_i_driver_entry_point_at("cuGreenCtxStreamCreate", 12050))
        return 0;
    cr_assert_eq(ENTRY(cuDeviceGetDevResource, 12040)(0, &all, CU_DEV_RESOURCE_TYPE_SM),
                 CUDA_SUCCESS);
    cr_assert_eq(ENTRY(cuDevSmResourceSplitByCount, 12040)(part, &groups, &all,
                                                                                                &rest, 0, 8),
                 CUDA_SUCCESS);
    cr_assert_eq(groups, 1);
    cr_assert_lt(part[0].sm.smCount, all.sm.smCount, "a part of the SMs");
    g->sms = part[0].sm.smCount;
    cr_assert_eq(ENTRY(cuDevResourceGenerateDesc, 12040)(&desc, part, 1), CUDA_SUCCESS);
    cr_assert_eq(ENTRY(cuGreenCtxCreate, 12040)(&g->ctx, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM),
                 CUDA_SUCCESS);
    cr_assert_eq(ENTRY(cuGreenCtxStreamCreate, 12050)(&g->stream, g->ctx,
                                                                                      CU_STREAM_NON_BLOCKING, 0),
                 CUDA_SUCCESS);
    return 1;
}

static CUgreenCtx green_of(CUstream s)
{
    CUcontext ctx = NULL;
    CUgreenCtx green = NULL;

    cr_assert_eq(D.cuStreamGetCtx_v2(s, &ctx, &green), CUDA_SUCCESS);
    return green;
}

BACKEND_TEST(builder, forks_of_a_green_context_stream_stay_in_the_green_context)
{
    cucap_builder *b = NULL, *f[2] = { NULL, NULL }, *body = NULL;
    CUgraphConditionalHandle c;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    struct green g;
    CUstream launch = new_stream();
    CUdeviceptr d;

    if (!make_green(&g))
        cr_skip_test("the driver has no green contexts (CUDA 12.5 needed)");
    cr_assert_eq(green_of(g.stream), g.ctx);
    cr_assert_eq(D.cuMemAlloc(&d, 256), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_on_stream(g.stream, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 3, f, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(green_of(cucap_builder_stream(f[0])), g.ctx, "a fork of a green stream is a green stream");
    cr_assert_eq(green_of(cucap_builder_stream(f[1])), g.ctx);
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(green_of(cucap_builder_stream(body)), g.ctx, "so is a body's");
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(f[0])), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 64, 2, 64, cucap_builder_stream(f[1])), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 128, 3, 64, cucap_builder_stream(body)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f[0], f[1] }, 3, NULL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, launch, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(launch), CUDA_SUCCESS);
    {
        unsigned char host[192];
        int i;
        cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
        for (i = 0; i < 192; i++)
            cr_assert_eq(host[i], i / 64 + 1, "byte %d", i);
    }
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    cucap_builder_destroy(f[0]);
    cucap_builder_destroy(f[1]);
    cucap_builder_destroy(b);
    D.cuStreamDestroy(launch);
    D.cuStreamDestroy(g.stream);
    cr_assert_eq(ENTRY(cuGreenCtxDestroy, 12040)(g.ctx), CUDA_SUCCESS);
    D.cuMemFree(d);
}
#endif

/* ---------------------------------------------------------------- joining every fork, the context */

BACKEND_TEST(builder, join_forks_joins_every_open_fork)
{
    cucap_builder *b = new_builder(), *f[3] = { NULL, NULL, NULL }, *g = NULL, *more[1] = { NULL };
    cucap_error *err = NULL;
    CUdeviceptr d;
    int i;

    cr_assert_eq(D.cuMemAlloc(&d, 256), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "no fork yet: nothing to join");
    cr_assert_eq(cucap_builder_split(b, 4, f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &g, NULL), CUDA_SUCCESS);
    for (i = 0; i < 3; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + (CUdeviceptr)i * 64, (unsigned char)i, 64, cucap_builder_stream(f[i])),
                     CUDA_SUCCESS);
    cucap_builder_destroy(g);   /* idle and gone: not joined, no crash */
    cr_assert_eq(cucap_builder_split(f[0], 2, more, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(f[0], &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_get_state(more[0]), CUCAP_BUILDER_CLOSED, "a fork's own forks join into it");
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    for (i = 0; i < 3; i++)
        cr_assert_eq(cucap_builder_get_state(f[i]), CUCAP_BUILDER_CLOSED);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "every fork was joined: %s", cucap_error_message(err));
    cucap_builder_destroy(more[0]);
    for (i = 0; i < 3; i++)
        cucap_builder_destroy(f[i]);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_builder_join_forks(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    D.cuMemFree(d);
}

/* A builder's list of open forks across splits of every size and
 * captures of a reset builder: it starts in the builder, moves to the
 * heap past a few, shrinks as forks go, and join_forks always sees each
 * open fork once (more than fit its snapshot on the stack, too). */
BACKEND_TEST(builder, join_forks_after_splits_of_every_size_over_captures)
{
    static const size_t sizes[][3] = { { 2, 3, 2 }, { 5, 2, 9 }, { 3, 17, 4 }, { 2, 2, 2 } };
    cucap_builder *b = new_builder(), *f[40];
    cucap_error *err = NULL;
    size_t c, s, i, n;

    for (c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL), CUDA_SUCCESS);
        for (s = 0, n = 0; s < 3; s++) {
            cr_assert_eq(cucap_builder_split(b, sizes[c][s], f + n, NULL), CUDA_SUCCESS);
            n += sizes[c][s] - 1;
        }
        cucap_builder_destroy(f[0]);   /* the last one takes its place in the list */
        f[0] = NULL;
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "capture %zu: %s", c, cucap_error_message(err));
        for (i = 1; i < n; i++)
            cr_assert_eq(cucap_builder_get_state(f[i]), CUCAP_BUILDER_CLOSED, "capture %zu, fork %zu", c, i);
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "nothing left to join: %s",
                     cucap_error_message(err));
        cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "capture %zu: %s", c, cucap_error_message(err));
        for (i = 1; i < n; i++)
            cucap_builder_destroy(f[i]);
    }
    cucap_builder_destroy(b);
}

BACKEND_TEST(builder, a_primary_destroyed_before_its_forks)
{
    cucap_builder *b = new_builder(), *f = NULL;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_builder_join_forks(f, NULL), CUDA_SUCCESS, "the fork forgot its parent; it has no forks");
    cucap_builder_destroy(f);
}

struct left_behind {
    CUresult rc;
    cucap_builder_state fork_state;
};

/* Destroyed mid-capture, from a fresh thread: a builder whose kept forks
 * and split fork are still in its capture, then the forks, in the order
 * a program unwinding on an error might (the builder's kept split event
 * waits for the capture's end; the last fork's reference frees the
 * capture's hierarchy). */
static void *left_behind_thread(void *p)
{
    struct left_behind *r = p;
    cucap_builder *b = NULL, *kept[2] = { NULL, NULL }, *f = NULL;
    int round;

    for (round = 0; round < 3 && r->rc == CUDA_SUCCESS; round++) {
        if ((r->rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS ||
            (r->rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) != CUDA_SUCCESS ||
            (r->rc = cucap_builder_split_kept(b, 3, kept, NULL)) != CUDA_SUCCESS ||
            (r->rc = cucap_builder_split(b, 2, &f, NULL)) != CUDA_SUCCESS)
            break;
        cucap_builder_destroy(b);   /* ends the capture: the forks did no work, so it ends well */
        r->fork_state = cucap_builder_get_state(kept[0]);
        cucap_builder_destroy(f);
        cucap_builder_destroy(kept[1]);
        cucap_builder_destroy(kept[0]);
        b = f = kept[0] = kept[1] = NULL;
    }
    return NULL;
}

BACKEND_TEST(builder, a_builder_destroyed_mid_capture_before_its_kept_forks_leaves_nothing)
{
    struct left_behind r = { CUDA_SUCCESS, CUCAP_BUILDER_CAPTURING };
    pthread_t t;

    warnings = 0;
    cucap_set_warning_handler(count_warning, NULL);
    cr_assert_eq(pthread_create(&t, NULL, left_behind_thread, &r), 0);
    pthread_join(t, NULL);
    cucap_set_warning_handler(NULL, NULL);
    cr_assert_eq(r.rc, CUDA_SUCCESS, "%s", cucap_result_name(r.rc));
    cr_assert_eq(warnings, 0, "nothing failed on the way down: %s", cucap_result_name(last_warning));
    cr_assert_neq(r.fork_state, CUCAP_BUILDER_CAPTURING, "a kept fork's capture is over with its builder's");
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("event"), 0, "the kept split event went back");
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("graph"), 0, "the capture's graph went with its last fork");
    }
}

BACKEND_TEST(builder, the_context_of_a_builder_is_its_devices_primary_context)
{
    cucap_builder *b = new_builder(), *f = NULL;
    CUcontext primary = NULL;

    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_context(b), primary);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_context(f), primary, "forks share it");
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_null(cucap_builder_context(f), "closed: NULL");
    cr_assert_null(cucap_builder_context(NULL));
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
    D.cuDevicePrimaryCtxRelease(0);
}

/* A library call that finds the capture invalidated did not invalidate
 * it: the note says so, names the usual culprits and the streams. */
BACKEND_TEST(builder, the_note_blames_the_call_outside_the_library)
{
    cucap_builder *b = new_builder(), *f = NULL;
    cucap_error *err = NULL;
    char origin[32], fork[32];

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    snprintf(origin, sizeof origin, "%p", (void *)cucap_builder_stream(b));
    snprintf(fork, sizeof fork, "%p", (void *)cucap_builder_stream(f));
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(f)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f }, 2, NULL, NULL),
                 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 1);
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "cucap_builder_join failed"), "%s", cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "invalidated before that call"), "%s",
                       cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "outside the library"), "%s", cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "synchronizing"), "%s", cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), origin), "names the origin: %s", cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 0), fork), "names the fork: %s", cucap_error_note(err, 0));
    cucap_error_free(err);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
}

/* A join of forks active in the root's capture asks the driver about each
 * fork once and never about the root (a fork active in the capture proves
 * the root in it), adds their work to the root in one call and makes no
 * event; from a thread with no current context, on both backends. */
struct join_calls {
    CUdeviceptr d;
    CUresult split, join, end, complete, launch;
    long queries, updates, records, waits;
    unsigned char host[256];
};

static void *join_calls_thread(void *p)
{
    struct join_calls *r = p;
    cucap_builder *b = NULL, *f[3] = { NULL, NULL, NULL };
    cucap_exec *exec = NULL;
    long q, u, e, w;
    int i;

    r->split = cucap_builder_create(0, &b, NULL);
    if (r->split == CUDA_SUCCESS && (r->split = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) ==
                                        CUDA_SUCCESS)
        r->split = cucap_builder_split(b, 4, f, NULL);
    if (r->split != CUDA_SUCCESS)
        return NULL;
    D.cuCtxSetCurrent(cucap_builder_context(b));   /* the user's own driver calls */
    for (i = 0; i < 3; i++)
        D.cuMemsetD8Async(r->d + (CUdeviceptr)i * 64, (unsigned char)(i + 1), 64, cucap_builder_stream(f[i]));
    D.cuCtxSetCurrent(NULL);
    q = calls("cuStreamGetCaptureInfo");
    u = calls("cuStreamUpdateCaptureDependencies");
    e = calls("cuEventRecord");
    w = calls("cuStreamWaitEvent");
    r->join = cucap_builder_join_forks(b, NULL);
    r->queries = calls("cuStreamGetCaptureInfo") - q;
    r->updates = calls("cuStreamUpdateCaptureDependencies") - u;
    r->records = calls("cuEventRecord") - e;
    r->waits = calls("cuStreamWaitEvent") - w;
    D.cuCtxSetCurrent(cucap_builder_context(b));
    D.cuMemsetD8Async(r->d, 9, 192, cucap_builder_stream(b));   /* after every fork's work */
    D.cuCtxSetCurrent(NULL);
    r->end = cucap_builder_end(b, NULL);
    r->complete = cucap_builder_complete(b, NULL, &exec, NULL);
    r->launch = cucap_exec_launch(exec, NULL, NULL);
    D.cuCtxSetCurrent(cucap_builder_context(b));
    D.cuStreamSynchronize(NULL);
    D.cuMemcpyDtoH(r->host, r->d, sizeof r->host);
    D.cuCtxSetCurrent(NULL);
    cucap_exec_destroy(exec);
    for (i = 0; i < 3; i++)
        cucap_builder_destroy(f[i]);
    cucap_builder_destroy(b);
    return NULL;
}

FAULT_BACKEND_TEST(builder, a_join_asks_each_fork_once_and_never_the_root)
{
    struct join_calls r;
    pthread_t t;
    int i;

    memset(&r, 0, sizeof r);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(D.cuMemAlloc(&r.d, 256), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(r.d, 0, 256), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    cr_assert_eq(pthread_create(&t, NULL, join_calls_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.split, CUDA_SUCCESS);
    cr_assert_eq(r.join, CUDA_SUCCESS);
    cr_assert_eq(r.queries, 3, "one query per fork, none of the root: %ld", r.queries);
    cr_assert_eq(r.updates, 1, "one call adds every fork's work: %ld", r.updates);
    cr_assert_eq(r.records + r.waits, 0, "no event: %ld records, %ld waits", r.records, r.waits);
    cr_assert_eq(r.end, CUDA_SUCCESS);
    cr_assert_eq(r.complete, CUDA_SUCCESS);
    cr_assert_eq(r.launch, CUDA_SUCCESS);
    for (i = 0; i < 256; i++)
        cr_assert_eq(r.host[i], i < 192 ? 9 : 0, "byte %d: the root's work runs after every fork's", i);
    D.cuMemFree(r.d);
}

/* ---------------------------------------------------------------- the update loop */

/* One iteration of the loop programs with changing parameters run: a
 * builder per capture, two branches, update, launch, destroy. */
static CUresult update_loop_iteration(cucap_exec **exec, CUstream launch)
{
    cucap_builder *b = NULL, *f = NULL;
    CUresult rc;

    if ((rc = cucap_builder_create(0, &b, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_split(b, 2, &f, NULL)) == CUDA_SUCCESS &&
        (rc = cucap_builder_join_forks(b, NULL)) == CUDA_SUCCESS && (rc = cucap_builder_end(b, NULL)) == CUDA_SUCCESS)
        rc = *exec ? cucap_exec_update(*exec, b, NULL) : cucap_builder_complete(b, NULL, exec, NULL);
    if (rc == CUDA_SUCCESS)
        rc = cucap_exec_launch(*exec, launch, NULL);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
    return rc;
}

struct loop_calls {
    CUresult rc;
    long made, destroyed;
};

static void *update_loop_thread(void *p)
{
    static const char *const makers[] = { "cuStreamCreate", "cuEventCreate" };
    static const char *const destroyers[] = { "cuStreamDestroy", "cuEventDestroy" };
    struct loop_calls *r = p;
    cucap_exec *exec = NULL;
    int i, n;

    r->rc = update_loop_iteration(&exec, NULL);   /* fills the cache */
    for (i = 0; i < 2; i++) {
        r->made -= calls(makers[i]);
        r->destroyed -= calls(destroyers[i]);
    }
    for (n = 0; n < 5 && r->rc == CUDA_SUCCESS; n++)
        r->rc = update_loop_iteration(&exec, NULL);
    for (i = 0; i < 2; i++) {
        r->made += calls(makers[i]);
        r->destroyed += calls(destroyers[i]);
    }
    cucap_exec_destroy(exec);
    return NULL;
}

/* A builder's own stream comes from the stream cache and goes back to it,
 * as its forks' do: once the cache is warm, the loop makes and destroys no
 * stream and no event (measured: cuStreamCreate and cuStreamDestroy were
 * 5.7 of the 6.7 us the loop spent above hand-written code on the H200). */
FAULT_BACKEND_TEST(builder, the_update_loop_makes_and_destroys_no_stream_once_warm)
{
    struct loop_calls r = { CUDA_ERROR_UNKNOWN, 0, 0 };
    pthread_t t;

    cr_assert_eq(pthread_create(&t, NULL, update_loop_thread, &r), 0);   /* no current context there */
    pthread_join(t, NULL);
    cr_assert_eq(r.rc, CUDA_SUCCESS);
    cr_assert_eq(r.made, 0, "streams or events made in a warm loop: %ld", r.made);
    cr_assert_eq(r.destroyed, 0, "streams or events destroyed in a warm loop: %ld", r.destroyed);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

struct context_calls {
    CUdeviceptr d;
    CUstream launch;                 /* made by the main thread */
    CUresult rc;
    long on_stream, on_null;          /* context calls of update + launch on a stream; of a NULL-stream launch */
    CUcontext after_stream, after_null;
    unsigned char host[64];
};

/* One capture of `value` into d, completed or updated into *exec; with
 * context_calls (over the fault layer), the update's context calls are
 * added to it. */
static CUresult capture_value(cucap_builder *b, CUdeviceptr d, unsigned char value, cucap_exec **exec,
                              long *context_calls)
{
    CUresult rc;
    long before;

    if ((rc = cucap_builder_reset(b, NULL)) != CUDA_SUCCESS ||
        (rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) != CUDA_SUCCESS)
        return rc;
    D.cuCtxSetCurrent(cucap_builder_context(b));   /* the user's own driver call */
    D.cuMemsetD8Async(d, value, 64, cucap_builder_stream(b));
    D.cuCtxSetCurrent(NULL);
    if ((rc = cucap_builder_end(b, NULL)) != CUDA_SUCCESS)
        return rc;
    if (!*exec)
        return cucap_builder_complete(b, NULL, exec, NULL);
    if (!context_calls)
        return cucap_exec_update(*exec, b, NULL);
    before = calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent");
    rc = cucap_exec_update(*exec, b, NULL);
    *context_calls += calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent") - before;
    return rc;
}

static void *context_calls_thread(void *p)
{
    struct context_calls *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    long before;
    int n;

    if ((r->rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
        goto out;
    for (n = 1; n <= 4 && r->rc == CUDA_SUCCESS; n++) {
        if ((r->rc = capture_value(b, r->d, (unsigned char)n, &exec, &r->on_stream)) != CUDA_SUCCESS)
            break;
        before = calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent");
        r->rc = cucap_exec_launch(exec, r->launch, NULL);
        r->on_stream += calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent") - before;
    }
    D.cuCtxGetCurrent(&r->after_stream);
    D.cuCtxSetCurrent(cucap_builder_context(b));
    D.cuStreamSynchronize(r->launch);   /* before the legacy stream's launch writes the last value */
    D.cuCtxSetCurrent(NULL);
    if (r->rc == CUDA_SUCCESS && (r->rc = capture_value(b, r->d, 9, &exec, &r->on_stream)) == CUDA_SUCCESS) {
        before = calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent");
        r->rc = cucap_exec_launch(exec, NULL, NULL);   /* the legacy stream of the graph's context */
        r->on_null = calls("cuCtxGetCurrent") + calls("cuCtxSetCurrent") - before;
    }
    D.cuCtxGetCurrent(&r->after_null);
    D.cuCtxSetCurrent(cucap_builder_context(b));
    D.cuStreamSynchronize(NULL);
    D.cuMemcpyDtoH(r->host, r->d, sizeof r->host);
    D.cuCtxSetCurrent(NULL);
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    return NULL;
}

/* Update and a launch on a stream ask nothing about the thread's context
 * where there is one device: the driver takes it from the handles
 * (doc/driver-facts.md, "The current context and an executable graph").
 * From a fresh thread with no context current, each update writes the
 * new value, and the thread is left as it was. */
FAULT_BACKEND_TEST(builder, update_and_launch_on_a_stream_leave_the_threads_context_alone)
{
    struct context_calls r;
    pthread_t t;
    int devices = 0, i;

    memset(&r, 0, sizeof r);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(D.cuDeviceGetCount(&devices), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&r.d, 64), CUDA_SUCCESS);
    r.launch = new_stream();
    cr_assert_eq(pthread_create(&t, NULL, context_calls_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.rc, CUDA_SUCCESS);
    for (i = 0; i < 64; i++)
        cr_assert_eq(r.host[i], 9, "byte %d: the last update's value, launched on the legacy stream", i);
    cr_assert_null(r.after_stream, "the fresh thread has no context after update and launch on a stream");
    cr_assert_null(r.after_null, "the fresh thread has no context after a launch on the legacy stream");
    if (devices == 1)
        cr_assert_eq(r.on_stream, 0, "one device: %ld context calls in 4 updates and 4 launches", r.on_stream);
    else
        cr_assert_gt(r.on_stream, 0, "%d devices: the graph's context is made current", devices);
    cr_assert_gt(r.on_null, 0, "the legacy stream is the current context's: the graph's is made current");
    cr_assert_eq(D.cuStreamDestroy(r.launch), CUDA_SUCCESS);
    D.cuMemFree(r.d);
}

/* The same with a second context of the device current (one the user
 * made): the graph runs in its own context, and the user's stays current. */
BACKEND_TEST(builder, update_and_launch_with_another_context_of_the_device_current)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    CUcontext own = NULL, other = NULL, current = NULL;
    CUdeviceptr d = 0;
    CUstream launch = new_stream();
    unsigned char host[64];
    CUresult rc;
    int n, i;

    cr_assert_eq(D.cuCtxGetCurrent(&own), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(capture_value(b, d, 1, &exec, NULL), CUDA_SUCCESS);
    rc = D.cuCtxCreate ? D.cuCtxCreate(&other, 0, 0) : CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_ERROR_NOT_SUPPORTED && on_simulator()) {
        cucap_exec_destroy(exec);
        cucap_builder_destroy(b);
        cr_assert_eq(D.cuCtxSetCurrent(own), CUDA_SUCCESS);
        cr_skip_test("the simulated driver models primary contexts only (cuCtxCreate is not modelled)");
    }
    cr_assert_eq(rc, CUDA_SUCCESS);   /* the new context is current now */
    for (n = 2; n <= 3; n++) {
        cr_assert_eq(capture_value(b, d, (unsigned char)n, &exec, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuCtxSetCurrent(other), CUDA_SUCCESS);   /* capture_value leaves none current */
        cr_assert_eq(cucap_exec_launch(exec, launch, NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuCtxGetCurrent(&current), CUDA_SUCCESS);
        cr_assert_eq(current, other, "the user's context stays current");
    }
    cr_assert_eq(D.cuCtxSetCurrent(own), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(launch), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < 64; i++)
        cr_assert_eq(host[i], 3, "byte %d: the last update ran in the graph's own context", i);
    cr_assert_eq(D.cuCtxDestroy(other), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(own), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuStreamDestroy(launch), CUDA_SUCCESS);
    D.cuMemFree(d);
}

/* Streams handed out by the cache to builders of several fresh threads at
 * once: no stream is ever held by two live builders. */
enum { SHARING_THREADS = 8, SHARING_ROUNDS = 40, HELD_MAX = 3 * SHARING_THREADS };

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static CUstream held[HELD_MAX];
static _Atomic int shared_twice;

static void hold_stream(CUstream s)
{
    int i, free_slot = -1;

    pthread_mutex_lock(&held_lock);
    for (i = 0; i < HELD_MAX; i++) {
        if (held[i] == s)
            shared_twice++;
        if (!held[i] && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0)
        held[free_slot] = s;
    pthread_mutex_unlock(&held_lock);
}

static void drop_stream(CUstream s)
{
    int i;

    pthread_mutex_lock(&held_lock);
    for (i = 0; i < HELD_MAX; i++)
        if (held[i] == s) {
            held[i] = NULL;
            break;
        }
    pthread_mutex_unlock(&held_lock);
}

static void *sharing_thread(void *p)
{
    CUresult *rc = p;
    int n;

    for (n = 0; n < SHARING_ROUNDS && *rc == CUDA_SUCCESS; n++) {
        cucap_builder *b = NULL, *f = NULL;
        if ((*rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
            break;
        hold_stream(cucap_builder_stream(b));
        if ((*rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL)) == CUDA_SUCCESS &&
            (*rc = cucap_builder_split(b, 2, &f, NULL)) == CUDA_SUCCESS) {
            CUstream fork_stream = cucap_builder_stream(f);
            hold_stream(fork_stream);
            *rc = cucap_builder_join_forks(b, NULL);
            drop_stream(fork_stream);   /* closed: kept by the capture until it ends */
        }
        if (*rc == CUDA_SUCCESS)
            *rc = cucap_builder_end(b, NULL);
        drop_stream(cucap_builder_stream(b));
        cucap_builder_destroy(f);
        cucap_builder_destroy(b);
    }
    return NULL;
}

BACKEND_TEST(builder, threads_sharing_the_stream_cache_never_hold_one_stream_twice)
{
    pthread_t t[SHARING_THREADS];
    CUresult rc[SHARING_THREADS];
    int i;

    shared_twice = 0;
    for (i = 0; i < SHARING_THREADS; i++) {
        rc[i] = CUDA_SUCCESS;
        cr_assert_eq(pthread_create(&t[i], NULL, sharing_thread, &rc[i]), 0);
    }
    for (i = 0; i < SHARING_THREADS; i++)
        pthread_join(t[i], NULL);
    for (i = 0; i < SHARING_THREADS; i++)
        cr_assert_eq(rc[i], CUDA_SUCCESS, "thread %d: %d", i, (int)rc[i]);
    cr_assert_eq(shared_twice, 0, "a stream was held by two live builders");
    if (on_simulator())
        cr_assert_eq(sim_live_settled("stream"), 0);
}

/* ---------------------------------------------------------------- complete into an executable graph */

enum { INTO_SPAN = 64, INTO_MAX = 3 };

/* An ENDED builder whose k branches write value + i into span i of d. */
static cucap_builder *capture_branches(CUdeviceptr d, int k, unsigned char value, cucap_builder **forks)
{
    cucap_builder *b = NULL;
    int i;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, (size_t)k, forks, NULL), CUDA_SUCCESS);
    for (i = 0; i < k; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + (CUdeviceptr)i * INTO_SPAN, (unsigned char)(value + i), INTO_SPAN,
                                       cucap_builder_stream(i ? forks[i - 1] : b)),
                     CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

struct into_run {
    CUdeviceptr d;
    cucap_exec *first, *second, *third;
    cucap_completion how[3];
    CUresult launch;
};

static void into_step(struct into_run *r, cucap_exec **exec, int k, unsigned char value, cucap_completion *how)
{
    cucap_builder *forks[INTO_MAX - 1] = { NULL };
    cucap_builder *b = capture_branches(r->d, k, value, forks);
    cucap_error *err = NULL;
    int i;

    cr_assert_eq(cucap_builder_complete_into(b, NULL, exec, how, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    if (r->launch == CUDA_SUCCESS)
        r->launch = cucap_exec_launch(*exec, cucap_builder_stream(b), NULL);
    if (r->launch == CUDA_SUCCESS)
        r->launch = relaxed_synchronize(cucap_builder_stream(b));
    for (i = 0; i < k - 1; i++)
        cucap_builder_destroy(forks[i]);
    cucap_builder_destroy(b);
}

static void *into_thread(void *p)
{
    struct into_run *r = p;
    cucap_exec *exec = NULL;

    r->launch = CUDA_SUCCESS;
    into_step(r, &exec, 2, 10, &r->how[0]);
    r->first = exec;
    into_step(r, &exec, 2, 20, &r->how[1]);   /* the same topology */
    r->second = exec;
    into_step(r, &exec, 3, 30, &r->how[2]);   /* one branch more */
    r->third = exec;
    cucap_exec_destroy(exec);
    return NULL;
}

/* From a fresh thread: the first call instantiates, the same topology
 * updates in place, another topology instantiates anew; each launch runs
 * the graph just captured. */
BACKEND_TEST(builder, complete_into_updates_when_it_can_and_instantiates_when_it_must)
{
    unsigned char host[INTO_MAX * INTO_SPAN];
    struct into_run r;
    pthread_t t;
    int i;

    memset(&r, 0, sizeof r);
    cr_assert_eq(D.cuMemAlloc(&r.d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(pthread_create(&t, NULL, into_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.launch, CUDA_SUCCESS);
    cr_assert_eq(r.how[0], CUCAP_COMPLETED_INSTANTIATED);
    cr_assert_eq(r.how[1], CUCAP_COMPLETED_UPDATED);
    cr_assert_eq(r.second, r.first, "updated in place");
    cr_assert_eq(r.how[2], CUCAP_COMPLETED_INSTANTIATED, "a third branch cannot be an update");
    cr_assert_neq(r.third, r.second);
    cr_assert_eq(D.cuMemcpyDtoH(host, r.d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < INTO_MAX; i++)
        cr_assert_eq(host[i * INTO_SPAN], 30 + i, "branch %d ran the last graph", i);
    cr_assert_eq(D.cuMemFree(r.d), CUDA_SUCCESS);
}

BACKEND_TEST(builder, complete_into_refuses_bad_arguments_and_leaves_exec_alone)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = (cucap_exec *)&b;   /* never touched */
    cucap_completion how = (cucap_completion)0;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete_into(b, NULL, NULL, &how, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(cucap_error_message(err), "cucap_builder_complete_into") == cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, &err), CUDA_ERROR_ILLEGAL_STATE,
                 "a builder that never captured has no graph");
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_complete_into(NULL, NULL, &exec, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(exec, (cucap_exec *)&b);
    cr_assert_eq(how, (cucap_completion)0);
    cucap_builder_destroy(b);
}

/* The driver's answers, injected: a refused update instantiates anew; any
 * other update failure is the error; an instantiation that fails after a
 * refused update leaves the old executable graph in place and usable. */
FAULT_BACKEND_TEST(builder, complete_into_follows_the_update_result)
{
    cucap_builder *forks[1] = { NULL }, *b;
    cucap_exec *exec = NULL, *old;
    cucap_completion how;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;

    cr_assert_eq(D.cuMemAlloc(&d, 2 * INTO_SPAN), CUDA_SUCCESS);
    b = capture_branches(d, 2, 1, forks);
    cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, NULL), CUDA_SUCCESS);
    old = exec;

    cr_assert_eq(set_rules("cuGraphExecUpdate:1:CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"), 0);
    cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(how, CUCAP_COMPLETED_INSTANTIATED);
    cr_assert_neq(exec, old);
    old = exec;

    cr_assert_eq(set_rules("cuGraphExecUpdate:1:CUDA_ERROR_UNKNOWN"), 0);
    how = (cucap_completion)0;
    cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, &err), CUDA_ERROR_UNKNOWN);
    cr_assert(strstr(cucap_error_message(err), "cucap_builder_complete_into: ") == cucap_error_message(err), "%s",
              cucap_error_message(err));
    cr_assert(strstr(cucap_error_message(err), "cuGraphExecUpdate") != NULL, "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(exec, old);
    cr_assert_eq(how, (cucap_completion)0);

    cr_assert_eq(set_rules("cuGraphExecUpdate:1:CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,"
                           "cuGraphInstantiateWithParams:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, &err), CUDA_ERROR_OUT_OF_MEMORY);
    cucap_error_free(err);
    cr_assert_eq(exec, old, "the old executable graph stays the caller's");
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_exec_launch(exec, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(relaxed_synchronize(cucap_builder_stream(b)), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(forks[0]);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("exec"), 0);
    }
}

/* ---------------------------------------------------------------- one builder, capture after capture */

struct reset_run {
    CUdeviceptr d;
    CUresult rc;
    int same_stream, not_started;
    cucap_graph *first_graph;
};

static void *reset_thread(void *p)
{
    struct reset_run *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    CUstream s;
    int n;

    if ((r->rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
        return NULL;
    s = cucap_builder_stream(b);
    r->same_stream = r->not_started = 1;
    for (n = 0; n < 3 && r->rc == CUDA_SUCCESS; n++) {
        cucap_builder *f = NULL;
        if ((r->rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
            (r->rc = cucap_builder_split(b, 2, &f, NULL)) == CUDA_SUCCESS &&
            (r->rc = D.cuMemsetD8Async(r->d, (unsigned char)(40 + n), 64, cucap_builder_stream(b))) == CUDA_SUCCESS &&
            (r->rc = D.cuMemsetD8Async(r->d + 64, (unsigned char)(50 + n), 64, cucap_builder_stream(f))) ==
                CUDA_SUCCESS &&
            (r->rc = cucap_builder_join_forks(b, NULL)) == CUDA_SUCCESS &&
            (r->rc = cucap_builder_end(b, NULL)) == CUDA_SUCCESS &&
            (n > 0 || (r->rc = cucap_builder_graph(b, &r->first_graph, NULL)) == CUDA_SUCCESS) &&
            (r->rc = cucap_builder_complete_into(b, NULL, &exec, NULL, NULL)) == CUDA_SUCCESS &&
            (r->rc = cucap_exec_launch(exec, s, NULL)) == CUDA_SUCCESS)
            r->rc = relaxed_synchronize(s);
        cucap_builder_destroy(f);
        if (r->rc == CUDA_SUCCESS)
            r->rc = cucap_builder_reset(b, NULL);
        r->same_stream &= cucap_builder_stream(b) == s;
        r->not_started &= cucap_builder_get_state(b) == CUCAP_BUILDER_NOT_STARTED;
    }
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    return NULL;
}

/* From a fresh thread: one builder captures three times, reset between,
 * on the same stream; a graph reference taken before a reset stays valid. */
BACKEND_TEST(builder, a_reset_builder_captures_again_on_its_own_stream)
{
    struct reset_run r;
    unsigned char host[128];
    cucap_exec *again = NULL;
    pthread_t t;

    memset(&r, 0, sizeof r);
    cr_assert_eq(D.cuMemAlloc(&r.d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(pthread_create(&t, NULL, reset_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.rc, CUDA_SUCCESS);
    cr_assert(r.same_stream, "the stream is kept across resets");
    cr_assert(r.not_started);
    cr_assert_eq(D.cuMemcpyDtoH(host, r.d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[0], 42);
    cr_assert_eq(host[64], 52);
    cr_assert_not_null(cucap_graph_handle(r.first_graph));
    cr_assert_eq(cucap_graph_instantiate(r.first_graph, NULL, &again, NULL), CUDA_SUCCESS,
                 "the first capture's graph outlives the resets");
    cucap_exec_destroy(again);
    cucap_graph_unref(r.first_graph);
    cr_assert_eq(D.cuMemFree(r.d), CUDA_SUCCESS);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* What reset refuses, and a fork left out of an invalidated capture: the
 * builder's next capture does not join it, and it is destroyed later. */
BACKEND_TEST(builder, reset_refuses_what_it_cannot_reset_and_forgets_old_forks)
{
    cucap_builder *b = NULL, *f = NULL, *g = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_reset(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS, "NOT_STARTED: nothing to do");
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_reset(b, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert(strstr(cucap_error_message(err), "cucap_builder_reset: ") == cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_ACTIVE, "left capturing");
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_reset(f, NULL), CUDA_ERROR_ILLEGAL_STATE, "a fork is not reset");
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(f)), CUDA_SUCCESS);   /* work left unjoined */
    cr_assert_neq(cucap_builder_end(b, NULL), CUDA_SUCCESS, "a fork was left unjoined");
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_INVALIDATED);
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS, "only this capture's fork is joined");
    cr_assert_eq(cucap_builder_get_state(g), CUCAP_BUILDER_CLOSED);
    cr_assert_neq(cucap_builder_get_state(f), CUCAP_BUILDER_CLOSED, "the old fork is not touched");
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    cucap_builder_destroy(g);
    cucap_builder_close(b, NULL);
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_ERROR_ILLEGAL_STATE, "a closed builder is not reset");
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("graph"), 0);
}

/* One capture of *b, reset for it, or destroyed and a new one created
 * when by_create; invalidated (by a synchronize on its stream, then a
 * pool call that fails, when pool_call) or not; its end's error, NULL
 * when it ended well. */
static cucap_error *capture_again(cucap_builder **bp, int by_create, CUdeviceptr d, int invalidate, int pool_call)
{
    cucap_builder *b, *f = NULL;
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr a = 0;

    if (by_create) {
        cucap_builder_destroy(*bp);
        *bp = NULL;
        cr_assert_eq(cucap_builder_create(0, bp, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_get_state(*bp), CUCAP_BUILDER_NOT_STARTED);
        cr_assert_eq(capture_status(cucap_builder_stream(*bp)), CU_STREAM_CAPTURE_STATUS_NONE);
        cr_assert_eq(cucap_builder_join_forks(*bp, NULL), CUDA_SUCCESS, "no forks");
    }
    b = *bp;
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 7, 64, cucap_builder_stream(f)), CUDA_SUCCESS);
    if (invalidate) {
        cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        if (pool_call) {
            cr_assert_eq(cucap_device_pool(0, &pool, NULL), CUDA_SUCCESS);
            cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(f), &a, NULL),
                         CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
    }
    if (!invalidate)   /* a join would be this capture's first failing library call */
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    if (cucap_builder_end(b, &err) == CUDA_SUCCESS)
        cr_assert(!invalidate, "an invalidated capture ended well");
    cucap_builder_destroy(f);
    return err;
}

/* A builder reset after every capture (or destroyed and created again,
 * by_create) keeps its capture's records only for that capture: the
 * registry finds its streams in the third capture (a pool call that fails
 * is named), and the fourth, invalidated from outside, names no library
 * call of the third.  A graph reference of the first capture outlives
 * the rest.  From a thread with no current context. */
static void each_capture_names_its_own_failure(int by_create)
{
    cucap_builder *b = NULL;
    cucap_graph *first = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err;
    CUdeviceptr d = 0;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_null(capture_again(&b, by_create, d, 0, 0));
    cr_assert_eq(cucap_builder_graph(b, &first, NULL), CUDA_SUCCESS);
    cr_assert_null(capture_again(&b, by_create, d, 0, 0));
    err = capture_again(&b, by_create, d, 1, 1);
    cr_assert_eq(cucap_error_code(err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 1);
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "cucap_pool_alloc (cuMemAllocFromPoolAsync) failed"), "%s",
                       cucap_error_note(err, 0));
    cucap_error_free(err);
    err = capture_again(&b, by_create, d, 1, 0);
    cr_assert_eq(cucap_error_code(err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 2);
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "no libcucapture call on this capture failed"), "%s",
                       cucap_error_note(err, 0));
    cr_assert_not_null(strstr(cucap_error_note(err, 1), "the capture ran in"), "%s", cucap_error_note(err, 1));
    cucap_error_free(err);
    cr_assert_null(capture_again(&b, by_create, d, 0, 0), "after two invalidated captures");
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_ENDED);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_graph_instantiate(first, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_exec_destroy(exec);
    cucap_graph_unref(first);
    gpu_make_current();
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

BACKEND_TEST(builder, a_reset_builder_names_each_captures_own_failure) { each_capture_names_its_own_failure(0); }
BACKEND_TEST(builder, a_builder_created_after_each_capture_names_its_own_failure)
{
    each_capture_names_its_own_failure(1);
}

static char recycle_warning[512];

static void keep_warning(const cucap_error *w, void *data)
{
    (void)data;
    snprintf(recycle_warning, sizeof recycle_warning, "%s", cucap_error_message(w));
}

/* The last capture's graph is destroyed when its builder is reset or
 * destroyed and kept for the next capture: a failure of that destroy goes
 * to the warning handler under the name of the call that was made. */
FAULT_BACKEND_TEST(builder, a_failed_graph_destroy_on_reset_or_destroy_names_the_call)
{
    static const char *const callers[] = { "cucap_builder_reset: cuGraphDestroy failed",
                                           "cucap_builder_destroy: cuGraphDestroy failed" };
    cucap_builder *b = NULL;
    int c;

    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cucap_set_warning_handler(keep_warning, NULL);
    for (c = 0; c < 2; c++) {
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
        recycle_warning[0] = '\0';
        cr_assert_eq(set_rules("cuGraphDestroy:1:CUDA_ERROR_INVALID_VALUE"), 0);
        if (c == 0)
            cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS, "a failed destroy is a warning");
        else
            cucap_builder_destroy(b);
        cr_assert_eq(set_rules(""), 0);
        cr_assert_eq(strncmp(recycle_warning, callers[c], strlen(callers[c])), 0, "%s", recycle_warning);
    }
    cucap_set_warning_handler(NULL, NULL);
}

/* A reset builder's split takes the streams and event its last capture
 * gave back; when the split fails for want of more, they go to the cache
 * (the next split makes none) and nothing leaks. */
FAULT_BACKEND_TEST(builder, a_reset_builders_failed_split_gives_its_kept_streams_back)
{
    cucap_builder *b = NULL, *f[3] = { NULL, NULL, NULL };
    cucap_error *err = NULL;
    long made;
    int c;

    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    for (c = 0; c < 3; c++) {
        cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        if (c == 2) {
            cr_assert_eq(set_rules("cuStreamCreate:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
            cr_assert_eq(cucap_builder_split(b, 4, f, &err), CUDA_ERROR_OUT_OF_MEMORY);
            cr_assert_not_null(strstr(cucap_error_message(err), "cuStreamCreate"), "%s", cucap_error_message(err));
            cucap_error_free(err);
            cr_assert_null(f[0]);
            cr_assert_eq(set_rules(""), 0);
        }
        made = calls("cuStreamCreate") + calls("cuEventCreate");
        cr_assert_eq(cucap_builder_split(b, 2, f, NULL), CUDA_SUCCESS);
        if (c == 2)
            cr_assert_eq(calls("cuStreamCreate") + calls("cuEventCreate"), made, "the split made a stream or event");
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cucap_builder_destroy(f[0]);
        f[0] = NULL;
    }
    cucap_builder_destroy(b);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

/* ---------------------------------------------------------------- kept forks (cucap_builder_split_kept) */

/* A loop with one builder reset and kept forks, as a program runs it:
 * from a thread with no current context (it makes the context current
 * only for its own driver calls), four captures, each fork writing its
 * own value; the same forks and streams come back every capture, closed
 * between captures, and what each capture computed is right. */
struct kept_loop {
    CUdeviceptr d;
    int failed_at;                   /* 0, or the line of the first failure */
    CUresult rc;
    cucap_builder *first[3], *again[3];
    CUstream first_streams[3];
    int same_forks, same_streams, closed_between, all_capturing;
    unsigned char host[4][256];
};

#define KEPT_CHECK(r, call)                                                                  \
    do {                                                                                     \
        CUresult rc_ = (call);                                                               \
        if (rc_ != CUDA_SUCCESS && !(r)->failed_at) {                                        \
            (r)->failed_at = __LINE__;                                                       \
            (r)->rc = rc_;                                                                   \
        }                                                                                    \
    } while (0)

static void *kept_loop_thread(void *p)
{
    struct kept_loop *r = p;
    cucap_builder *b = NULL, *f[3] = { NULL, NULL, NULL };
    cucap_exec *exec = NULL;
    int c, i;

    r->same_forks = r->same_streams = r->closed_between = r->all_capturing = 1;
    KEPT_CHECK(r, cucap_builder_create(0, &b, NULL));
    for (c = 0; c < 4 && !r->failed_at; c++) {
        KEPT_CHECK(r, cucap_builder_reset(b, NULL));
        KEPT_CHECK(r, cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL));
        KEPT_CHECK(r, cucap_builder_split_kept(b, 4, f, NULL));
        if (r->failed_at)
            break;
        for (i = 0; i < 3; i++) {
            if (c == 0) {
                r->first[i] = f[i];
                r->first_streams[i] = cucap_builder_stream(f[i]);
            } else {
                r->same_forks &= f[i] == r->first[i];
                r->same_streams &= cucap_builder_stream(f[i]) == r->first_streams[i];
            }
            r->all_capturing &= cucap_builder_get_state(f[i]) == CUCAP_BUILDER_CAPTURING;
        }
        D.cuCtxSetCurrent(cucap_builder_context(b));
        for (i = 0; i < 3; i++)
            KEPT_CHECK(r, D.cuMemsetD8Async(r->d + (CUdeviceptr)i * 64, (unsigned char)(16 * c + i + 1), 64,
                                            cucap_builder_stream(f[i])));
        KEPT_CHECK(r, D.cuMemsetD8Async(r->d + 192, (unsigned char)(16 * c + 9), 64, cucap_builder_stream(b)));
        D.cuCtxSetCurrent(NULL);
        KEPT_CHECK(r, cucap_builder_join_forks(b, NULL));
        for (i = 0; i < 3; i++)
            r->closed_between &= cucap_builder_get_state(f[i]) == CUCAP_BUILDER_CLOSED &&
                                 !cucap_builder_stream(f[i]) && !cucap_builder_context(f[i]);
        KEPT_CHECK(r, cucap_builder_end(b, NULL));
        KEPT_CHECK(r, cucap_builder_complete_into(b, NULL, &exec, NULL, NULL));
        KEPT_CHECK(r, cucap_exec_launch(exec, cucap_builder_stream(b), NULL));
        D.cuCtxSetCurrent(cucap_builder_context(b));
        KEPT_CHECK(r, D.cuStreamSynchronize(cucap_builder_stream(b)));
        KEPT_CHECK(r, D.cuMemcpyDtoH(r->host[c], r->d, 256));
        D.cuCtxSetCurrent(NULL);
    }
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);   /* before its kept forks: any order */
    for (i = 0; i < 3; i++)
        cucap_builder_destroy(f[i]);
    return NULL;
}

BACKEND_TEST(builder, kept_forks_come_back_capture_after_capture)
{
    struct kept_loop r;
    pthread_t t;
    int c, i;

    memset(&r, 0, sizeof r);
    cr_assert_eq(D.cuMemAlloc(&r.d, 256), CUDA_SUCCESS);
    cr_assert_eq(pthread_create(&t, NULL, kept_loop_thread, &r), 0);
    pthread_join(t, NULL);
    cr_assert_eq(r.failed_at, 0, "the call at line %d failed: %s", r.failed_at, cucap_result_name(r.rc));
    cr_assert(r.all_capturing, "a split hands its forks out capturing");
    cr_assert(r.same_forks, "every capture gets the first capture's forks");
    cr_assert(r.same_streams, "with their streams");
    cr_assert(r.closed_between, "a join closes them: no stream, no context until the next split");
    for (c = 0; c < 4; c++)
        for (i = 0; i < 256; i++)
            cr_assert_eq(r.host[c][i], i < 192 ? 16 * c + i / 64 + 1 : 16 * c + 9, "capture %d, byte %d", c, i);
    D.cuMemFree(r.d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0, "every stream went with the builders");
        cr_assert_eq(sim_live_settled("event"), 0);
        cr_assert_eq(sim_live_settled("graph"), 0);
    }
}

/* Two kept splits in one capture get different forks; the next capture
 * gets the same two again.  A kept fork the caller destroyed is given up
 * (a new one takes its place); one left unjoined when its capture ended is
 * closed by the next split and handed out again. */
BACKEND_TEST(builder, kept_forks_per_capture_given_up_and_left_unjoined)
{
    cucap_builder *b = new_builder(), *a = NULL, *c = NULL, *a2 = NULL, *c2 = NULL, *g = NULL, *three[2];
    cucap_error *err = NULL;
    CUdeviceptr d;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &c, NULL), CUDA_SUCCESS);
    cr_assert_neq(a, c, "a fork is handed out once per capture");
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));

    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &a2, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &c2, NULL), CUDA_SUCCESS);
    cr_assert((a2 == a && c2 == c) || (a2 == c && c2 == a), "the next capture gets the same two");
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_builder_destroy(c);   /* given up */

    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 3, three, NULL), CUDA_SUCCESS, "a new fork takes the given-up one's place");
    cr_assert(three[0] == a || three[1] == a, "the one kept");
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));

    /* a fork with work never joined: the end says UNJOINED */
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(g)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_neq(cucap_builder_get_state(g), CUCAP_BUILDER_CAPTURING, "its capture is over");
    cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &a2, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(b, 2, &c2, NULL), CUDA_SUCCESS);
    cr_assert(a2 == g || c2 == g, "the unjoined fork comes back");
    cr_assert_eq(cucap_builder_get_state(g), CUCAP_BUILDER_CAPTURING);
    cr_assert_eq(D.cuMemsetD8Async(d, 2, 64, cucap_builder_stream(g)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert(g == three[0] || g == three[1], "b has kept no other fork");
    cucap_builder_destroy(three[0]);
    cucap_builder_destroy(b);
    cucap_builder_destroy(three[1]);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

BACKEND_TEST(builder, split_kept_refuses_what_it_cannot_keep)
{
    cucap_builder *b = new_builder(), *f = NULL, *kept[2] = { NULL, NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_split_kept(NULL, 2, kept, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_split_kept(b, 1, kept, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_split_kept(b, 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_split_kept(b, 2, kept, &err), CUDA_ERROR_ILLEGAL_STATE, "not capturing");
    cr_assert_not_null(strstr(cucap_error_message(err), "must be building"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_kept(f, 3, kept, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "only a primary builder keeps forks"), "%s",
                       cucap_error_message(err));
    cr_assert_null(kept[0]);
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
}

/* Several threads, each with its own builder and kept forks, re-capture,
 * update and launch at once; the builders go before or after their forks. */
struct kept_worker {
    CUdeviceptr d;
    int index;
    CUresult rc;
};

static void *kept_worker_thread(void *p)
{
    struct kept_worker *w = p;
    cucap_builder *b = NULL, *f[2] = { NULL, NULL };
    cucap_exec *exec = NULL;
    int c, i;

    if ((w->rc = cucap_builder_create(0, &b, NULL)) != CUDA_SUCCESS)
        return NULL;
    for (c = 0; c < 50 && w->rc == CUDA_SUCCESS; c++) {
        if ((w->rc = cucap_builder_reset(b, NULL)) != CUDA_SUCCESS ||
            (w->rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL)) != CUDA_SUCCESS ||
            (w->rc = cucap_builder_split_kept(b, 3, f, NULL)) != CUDA_SUCCESS)
            break;
        D.cuCtxSetCurrent(cucap_builder_context(b));
        for (i = 0; i < 2 && w->rc == CUDA_SUCCESS; i++)
            w->rc = D.cuMemsetD8Async(w->d + (CUdeviceptr)(w->index * 2 + i) * 32, (unsigned char)c, 32,
                                      cucap_builder_stream(f[i]));
        D.cuCtxSetCurrent(NULL);
        if (w->rc != CUDA_SUCCESS || (w->rc = cucap_builder_join_forks(b, NULL)) != CUDA_SUCCESS ||
            (w->rc = cucap_builder_end(b, NULL)) != CUDA_SUCCESS ||
            (w->rc = cucap_builder_complete_into(b, NULL, &exec, NULL, NULL)) != CUDA_SUCCESS)
            break;
        w->rc = cucap_exec_launch(exec, cucap_builder_stream(b), NULL);
    }
    D.cuCtxSetCurrent(cucap_builder_context(b));
    if (D.cuStreamSynchronize(cucap_builder_stream(b)) != CUDA_SUCCESS && w->rc == CUDA_SUCCESS)
        w->rc = CUDA_ERROR_UNKNOWN;
    D.cuCtxSetCurrent(NULL);
    cucap_exec_destroy(exec);
    if (w->index % 2)
        cucap_builder_destroy(b);
    for (i = 0; i < 2; i++)
        cucap_builder_destroy(f[i]);
    if (!(w->index % 2))
        cucap_builder_destroy(b);
    return NULL;
}

BACKEND_TEST(builder, kept_forks_on_several_threads_at_once)
{
    struct kept_worker w[4];
    pthread_t t[4];
    unsigned char host[256];
    int i;

    cr_assert_eq(D.cuMemAlloc(&w[0].d, 256), CUDA_SUCCESS);
    for (i = 0; i < 4; i++) {
        w[i].d = w[0].d;
        w[i].index = i;
        w[i].rc = CUDA_ERROR_UNKNOWN;
        cr_assert_eq(pthread_create(&t[i], NULL, kept_worker_thread, &w[i]), 0);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].rc, CUDA_SUCCESS, "thread %d: %s", i, cucap_result_name(w[i].rc));
    }
    cr_assert_eq(D.cuMemcpyDtoH(host, w[0].d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < 256; i++)
        cr_assert_eq(host[i], 49, "byte %d: every thread's last capture ran", i);
    D.cuMemFree(w[0].d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

/* The graph and session locks of a reset builder's capture are the
 * beginning thread's (taken without an atomic operation) until another
 * thread takes them in a capture; a builder handed to another thread between captures moves
 * its lock with it, and one whose capture was shared takes the sleep
 * lock from then on.  Every capture's graph comes out whole either way. */
struct shared_capture {
    cucap_builder *b, *f[2];
    CUdeviceptr d;
    cucap_exec *exec;
    unsigned char value;
    int share;                       /* the second fork's work on another thread */
    CUresult rc;
};

static CUresult fill_32(CUstream s, void *p)
{
    struct shared_capture *c = p;
    int fork = s == cucap_builder_stream(c->f[1]);

    return D.cuMemsetD8Async(c->d + (CUdeviceptr)fork * 32, c->value, 32, s);
}

/* On another thread: work under the capture's graph lock, and pool calls
 * on the fork's stream, which look the capture up among the running ones
 * under each one's session lock. */
static void *fill_second_fork(void *p)
{
    struct shared_capture *c = p;
    cucap_pool *pool = NULL;
    CUdeviceptr scratch = 0;

    if ((c->rc = cucap_builder_enqueue(c->f[1], fill_32, c, NULL)) == CUDA_SUCCESS &&
        (c->rc = cucap_device_pool(0, &pool, NULL)) == CUDA_SUCCESS &&
        (c->rc = cucap_pool_alloc(pool, 256, cucap_builder_stream(c->f[1]), &scratch, NULL)) == CUDA_SUCCESS)
        c->rc = cucap_pool_free(pool, scratch, cucap_builder_stream(c->f[1]), NULL);
    return NULL;
}

static void *capture_once(void *p)
{
    struct shared_capture *c = p;
    pthread_t t;
    CUresult second = CUDA_SUCCESS;

    c->value++;
    if ((c->rc = cucap_builder_reset(c->b, NULL)) != CUDA_SUCCESS ||
        (c->rc = cucap_builder_begin(c->b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) != CUDA_SUCCESS ||
        (c->rc = cucap_builder_split_kept(c->b, 3, c->f, NULL)) != CUDA_SUCCESS)
        return NULL;
    if (c->share) {
        cr_assert_eq(pthread_create(&t, NULL, fill_second_fork, c), 0);
        second = cucap_builder_enqueue(c->f[0], fill_32, c, NULL);
        pthread_join(t, NULL);
        if (c->rc == CUDA_SUCCESS)
            c->rc = second;
    } else if ((c->rc = cucap_builder_enqueue(c->f[0], fill_32, c, NULL)) == CUDA_SUCCESS) {
        c->rc = cucap_builder_enqueue(c->f[1], fill_32, c, NULL);
    }
    if (c->rc != CUDA_SUCCESS || (c->rc = cucap_builder_join_forks(c->b, NULL)) != CUDA_SUCCESS ||
        (c->rc = cucap_builder_end(c->b, NULL)) != CUDA_SUCCESS ||
        (c->rc = cucap_builder_complete_into(c->b, NULL, &c->exec, NULL, NULL)) != CUDA_SUCCESS)
        return NULL;
    c->rc = cucap_exec_launch(c->exec, cucap_builder_stream(c->b), NULL);
    return NULL;
}

static void capture_after(struct shared_capture *c, int share, int on_another_thread)
{
    pthread_t t;

    c->share = share;
    if (on_another_thread) {
        cr_assert_eq(pthread_create(&t, NULL, capture_once, c), 0);
        pthread_join(t, NULL);
    } else {
        capture_once(c);
    }
    cr_assert_eq(c->rc, CUDA_SUCCESS, "capture %d: %s", c->value, cucap_result_name(c->rc));
}

static void *capture_shared_and_not(void *p)
{
    struct shared_capture *c = p;
    unsigned char host[64];
    int i;

    cr_assert_eq(cucap_builder_create(0, &c->b, NULL), CUDA_SUCCESS);
    for (i = 0; i < 6; i++)
        capture_after(c, 0, 0);
    capture_after(c, 0, 1);   /* the builder handed to another thread between captures */
    capture_after(c, 0, 0);
    for (i = 0; i < 6; i++)
        capture_after(c, i % 2 == 0, 0);   /* another thread takes the capture's lock in every other one */
    D.cuCtxSetCurrent(cucap_builder_context(c->b));
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(c->b)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, c->d, sizeof host), CUDA_SUCCESS);
    D.cuCtxSetCurrent(NULL);
    for (i = 0; i < 64; i++)
        cr_assert_eq(host[i], c->value, "byte %d: the last capture ran whole", i);
    cucap_exec_destroy(c->exec);
    cucap_builder_destroy(c->f[0]);
    cucap_builder_destroy(c->b);
    cucap_builder_destroy(c->f[1]);
    return NULL;
}

BACKEND_TEST(builder, a_reset_builder_captures_alone_and_with_another_thread_in_turn)
{
    struct shared_capture c = { 0 };
    pthread_t t;

    cr_assert_eq(D.cuMemAlloc(&c.d, 64), CUDA_SUCCESS);
    cr_assert_eq(pthread_create(&t, NULL, capture_shared_and_not, &c), 0);   /* a fresh thread, no context */
    pthread_join(t, NULL);
    D.cuMemFree(c.d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

/* A kept split that fails (here in a capture invalidated before it) hands
 * out nothing, and what it made for the caller goes with the builder. */
BACKEND_TEST(builder, a_failed_split_kept_leaves_nothing_behind)
{
    cucap_builder *b = new_builder(), *f[3] = { NULL, NULL, NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_builder_split_kept(b, 4, f, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s",
                 cucap_error_message(err));
    cr_assert(!f[0] && !f[1] && !f[2], "a failed split hands out nothing");
    cucap_error_free(err);
    cucap_builder_destroy(b);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0, "the forks made for the split went with the builder");
        cr_assert_eq(sim_live_settled("event"), 0);
    }
}

/* ---------------------------------------------------------------- complete_into_why */

static cucap_builder *capture_memsets(CUdeviceptr d, int count)
{
    cucap_builder *b = NULL;
    int i;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    for (i = 0; i < count; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + (CUdeviceptr)i * 64, (unsigned char)(i + 1), 64, cucap_builder_stream(b)),
                     CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

/* graphConditionalNodes and simpleCudaGraphs print the driver's
 * cudaGraphExecUpdateResult when an update is refused: so does the
 * library, as an out value, and says nothing when it updated. */
BACKEND_TEST(builder, complete_into_why_gives_the_drivers_reason_for_a_refused_update)
{
    cucap_builder *b;
    cucap_exec *exec = NULL, *first;
    cucap_completion how;
    cucap_update_refusal why;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;

    cr_assert_eq(D.cuMemAlloc(&d, 256), CUDA_SUCCESS);
    b = capture_memsets(d, 1);
    memset(&why, 0x55, sizeof why);
    cr_assert_eq(cucap_builder_complete_into_why(b, NULL, &exec, &how, &why, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(how, CUCAP_COMPLETED_INSTANTIATED);
    cr_assert_eq(why.result, CU_GRAPH_EXEC_UPDATE_SUCCESS, "nothing was refused");
    cr_assert_null(why.node);
    cr_assert_str_empty(why.message);
    first = exec;
    cucap_builder_destroy(b);

    b = capture_memsets(d, 1);
    memset(&why, 0x55, sizeof why);
    cr_assert_eq(cucap_builder_complete_into_why(b, NULL, &exec, &how, &why, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(how, CUCAP_COMPLETED_UPDATED);
    cr_assert_eq(exec, first);
    cr_assert_eq(why.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    cr_assert_str_empty(why.message);
    cucap_builder_destroy(b);

    b = capture_memsets(d, 2);
    cr_assert_eq(cucap_builder_complete_into_why(b, NULL, &exec, &how, &why, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(how, CUCAP_COMPLETED_INSTANTIATED);
    cr_assert_eq(why.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "result %d", (int)why.result);
    cr_assert(strstr(why.message, "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED (the topology changed)"), "%s",
              why.message);
    cr_assert_eq(cucap_exec_launch(exec, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete_into_why(b, NULL, NULL, &how, &why, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(cucap_error_message(err), "cucap_builder_complete_into_why: exec is NULL"), "%s",
              cucap_error_message(err));
    cucap_error_free(err);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
}

/* ---------------------------------------------------------------- wait */

static void wait_refused(CUresult rc, CUresult want, cucap_error *why, const char *says)
{
    cr_assert_eq(rc, want, "%s: %s", cucap_result_name(rc), cucap_error_message(why));
    cr_assert(strstr(cucap_error_message(why), says), "\"%s\" does not say \"%s\"", cucap_error_message(why), says);
    cucap_error_free(why);
}

#define WAIT_REFUSED(b, other, want, says)                                                        \
    do {                                                                                          \
        cucap_error *why = NULL;                                                                  \
        CUresult rc_ = cucap_builder_wait(b, other, &why);                                        \
        wait_refused(rc_, want, why, says);                                                       \
    } while (0)

/* graphMemoryNodes' cudaStreamWaitEvent between two streams of one
 * capture: the primary's next work waits for what its fork captured so
 * far, and not for what the fork captures later; both stay open. */
BACKEND_TEST(builder, wait_orders_after_the_others_work_so_far_and_leaves_both_open)
{
    cucap_builder *b = new_builder(), *f = NULL, *other = new_builder();
    cucap_exec *exec = NULL;
    cucap_graph *g = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0;
    unsigned char host[256];

    cr_assert_eq(D.cuMemAlloc(&d, 256), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0, 256), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    WAIT_REFUSED(b, other, CUDA_ERROR_ILLEGAL_STATE, "is not capturing (it is NOT_STARTED)");
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 64, 2, 64, cucap_builder_stream(f)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_wait(b, f, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_get_state(f), CUCAP_BUILDER_CAPTURING, "the fork stays open");
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CAPTURING);
    cr_assert_eq(D.cuMemcpyDtoDAsync(d + 128, d + 64, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 192, 3, 64, cucap_builder_stream(f)), CUDA_SUCCESS);

    WAIT_REFUSED(b, b, CUDA_ERROR_INVALID_VALUE, "cannot wait on itself");
    WAIT_REFUSED(b, NULL, CUDA_ERROR_INVALID_VALUE, "other is NULL");
    WAIT_REFUSED(NULL, f, CUDA_ERROR_INVALID_VALUE, "the builder is NULL");
    cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    WAIT_REFUSED(b, other, CUDA_ERROR_INVALID_VALUE, "another capture");
    cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(capture_status(cucap_builder_stream(other)), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(cucap_builder_end(other, NULL), CUDA_SUCCESS);

    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    WAIT_REFUSED(b, f, CUDA_ERROR_ILLEGAL_STATE, "is not capturing (it is ENDED)");
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    /* the split's edge and the fork's own, the primary's own, and the wait's: 4 */
    cr_assert_eq(edges_of(cucap_graph_handle(g)), 4);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert(host[0] == 1 && host[64] == 2 && host[128] == 2 && host[192] == 3, "%d %d %d %d", host[0], host[64],
              host[128], host[192]);
    cucap_exec_destroy(exec);
    cucap_graph_unref(g);
    cucap_builder_destroy(f);
    cucap_builder_destroy(other);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
}
