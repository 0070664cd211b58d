/* One capture driven from several threads: the library's own driver
 * calls on a capture are made one thread at a time (the driver does not
 * synchronize a graph), and cucap_builder_enqueue puts the application's
 * work under the same lock.  On the simulated driver and on the GPU. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "error-names.h"
#include "error.h"

BACKEND_SUITES(enqueue, 120);

/* ---------------------------------------------------------------- a watch on every call into a capture */

/* The library's calls that add to a capture graph through a stream, and
 * the tests' memset, are replaced by wrappers that note which thread is
 * inside which capture, hold the call open a moment (so that overlaps
 * happen when the locking allows them) and count two threads inside one
 * capture at once. */
#define WATCH_SLOTS 32
static struct {
    cuuint64_t id;
    pthread_t owner;
} inside[WATCH_SLOTS];
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int overlaps, watched_calls;

static PFN_cuStreamGetCaptureInfo_v12030 real_info;
static PFN_cuEventRecord_v2000 real_record;
static PFN_cuStreamWaitEvent_v3020 real_wait;
static PFN_cuStreamUpdateCaptureDependencies_v12030 real_update;
static PFN_cuStreamEndCapture_v10000 real_end;
static PFN_cuMemsetD8Async_v3020 real_memset;
static PFN_cuMemAllocFromPoolAsync_v11020 real_alloc;
static PFN_cuMemFreeAsync_v11020 real_free;

static int watch_enter(CUstream s)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    int i, slot = -1;

    if (real_info(s, &status, &id, NULL, NULL, NULL, NULL) != CUDA_SUCCESS || status == CU_STREAM_CAPTURE_STATUS_NONE)
        return -1;
    pthread_mutex_lock(&watch_lock);
    for (i = 0; i < WATCH_SLOTS; i++)
        if (inside[i].id == id && !pthread_equal(inside[i].owner, pthread_self()))
            atomic_fetch_add(&overlaps, 1);
    for (i = 0; i < WATCH_SLOTS && slot < 0; i++)
        if (inside[i].id == 0)
            slot = i;
    if (slot >= 0) {
        inside[slot].id = id;
        inside[slot].owner = pthread_self();
    }
    pthread_mutex_unlock(&watch_lock);
    atomic_fetch_add(&watched_calls, 1);
    usleep(100);
    return slot;
}

static void watch_leave(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&watch_lock);
    inside[slot].id = 0;
    pthread_mutex_unlock(&watch_lock);
}

/* A wrapper: the real call, inside the watch of stream s's capture. */
#define WATCHED(name, real, params, args)                                                      \
    static CUresult CUDAAPI name params                                                         \
    {                                                                                           \
        int slot = watch_enter(s);                                                              \
        CUresult rc = real args;                                                                \
        watch_leave(slot);                                                                      \
        return rc;                                                                              \
    }

WATCHED(watched_record, real_record, (CUevent e, CUstream s), (e, s))
WATCHED(watched_wait, real_wait, (CUstream s, CUevent e, unsigned int flags), (s, e, flags))
WATCHED(watched_update, real_update,
        (CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n, unsigned int flags),
        (s, deps, edges, n, flags))
WATCHED(watched_end, real_end, (CUstream s, CUgraph *g), (s, g))
WATCHED(watched_memset, real_memset, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), (d, v, n, s))
WATCHED(watched_alloc, real_alloc, (CUdeviceptr *d, size_t n, CUmemoryPool pool, CUstream s), (d, n, pool, s))
WATCHED(watched_free, real_free, (CUdeviceptr d, CUstream s), (d, s))

/* The replaced entries: table, entry point, wrapper, the real one. */
#define WATCH_LIST(X)                                                                           \
    X(cucap_i_drv, cuEventRecord, watched_record, real_record)                                  \
    X(cucap_i_drv, cuStreamWaitEvent, watched_wait, real_wait)                                  \
    X(cucap_i_drv, cuStreamUpdateCaptureDependencies, watched_update, real_update)              \
    X(cucap_i_drv, cuStreamEndCapture, watched_end, real_end)                                   \
    X(cucap_i_drv, cuMemAllocFromPoolAsync, watched_alloc, real_alloc)                          \
    X(cucap_i_drv, cuMemFreeAsync, watched_free, real_free)                                     \
    X(D, cuMemsetD8Async, watched_memset, real_memset)

static void watch_captures(void)
{
    real_info = cucap_i_drv.cuStreamGetCaptureInfo;
#define WRAP(table, entry, wrapper, real) real = table.entry; table.entry = wrapper;
    WATCH_LIST(WRAP)
#undef WRAP
}

static void unwatch_captures(void)
{
#define RESTORE(table, entry, wrapper, real) table.entry = real;
    WATCH_LIST(RESTORE)
#undef RESTORE
}

/* ---------------------------------------------------------------- work for enqueue */

struct fill {
    CUdeviceptr at;
    unsigned char value;
    int calls;
    CUcontext current;               /* the context current while the work ran */
};

static CUresult fill_64(CUstream s, void *data)
{
    struct fill *f = data;
    f->calls++;
    D.cuCtxGetCurrent(&f->current);
    return D.cuMemsetD8Async(f->at, f->value, 64, s);
}

static CUresult synchronize_stream(CUstream s, void *data)
{
    (void)data;
    return relaxed_synchronize(s);
}

static size_t node_count(cucap_builder *b)
{
    cucap_graph *g = NULL;
    size_t n = 0;

    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphGetNodes(cucap_graph_handle(g), NULL, &n), CUDA_SUCCESS);
    cucap_graph_unref(g);
    return n;
}

static cucap_builder *begun(CUstreamCaptureMode mode)
{
    cucap_builder *b = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, mode, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return b;
}

/* ---------------------------------------------------------------- several threads, one capture */

struct fork_thread {
    cucap_builder *fork;
    CUdeviceptr memory;
    int rounds, failures;
};

/* A fresh thread (no current context) working on its own fork of a
 * capture that other threads work on too: its work through enqueue, an
 * allocation from the device pool, a fork of its fork split and joined
 * back. */
static void *drive_fork(void *p)
{
    struct fork_thread *t = p;
    cucap_pool *pool = NULL;
    int r;

    if (cucap_device_pool(0, &pool, NULL) != CUDA_SUCCESS)
        t->failures++;
    for (r = 0; r < t->rounds && pool; r++) {
        struct fill f = { t->memory, (unsigned char)r, 0, NULL };
        cucap_builder *sub = NULL;
        cucap_error *err = NULL;
        CUdeviceptr scratch = 0;
        if (cucap_pool_alloc(pool, 256, cucap_builder_stream(t->fork), &scratch, &err) != CUDA_SUCCESS ||
            cucap_pool_free(pool, scratch, cucap_builder_stream(t->fork), &err) != CUDA_SUCCESS ||
            cucap_builder_enqueue(t->fork, fill_64, &f, &err) != CUDA_SUCCESS ||
            cucap_builder_split(t->fork, 2, &sub, &err) != CUDA_SUCCESS ||
            cucap_builder_enqueue(sub, fill_64, &f, &err) != CUDA_SUCCESS ||
            cucap_builder_join((cucap_builder *const[]){ t->fork, sub }, 2, NULL, &err) != CUDA_SUCCESS) {
            fprintf(stderr, "drive_fork: %s\n", cucap_error_message(err));
            t->failures++;
        }
        cucap_error_free(err);
        cucap_builder_destroy(sub);
    }
    return NULL;
}

BACKEND_TEST(enqueue, one_capture_is_driven_by_one_thread_at_a_time)
{
    enum { THREADS = 4, ROUNDS = 25 };
    cucap_builder *p, *all[THREADS + 1];
    struct fork_thread t[THREADS];
    pthread_t threads[THREADS];
    CUdeviceptr d;
    int i;

    cr_assert_eq(D.cuMemAlloc(&d, 64 * THREADS), CUDA_SUCCESS);
    p = begun(CU_STREAM_CAPTURE_MODE_RELAXED);
    all[0] = p;
    cr_assert_eq(cucap_builder_split(p, THREADS + 1, all + 1, NULL), CUDA_SUCCESS);
    watch_captures();
    for (i = 0; i < THREADS; i++) {
        t[i] = (struct fork_thread){ all[i + 1], d + 64 * (CUdeviceptr)i, ROUNDS, 0 };
        cr_assert_eq(pthread_create(&threads[i], NULL, drive_fork, &t[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        cr_expect_eq(t[i].failures, 0, "thread %d: %d failed rounds", i, t[i].failures);
    }
    cr_assert_eq(cucap_builder_join(all, THREADS + 1, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    unwatch_captures();
    cr_expect_gt(atomic_load(&watched_calls), THREADS * ROUNDS * 6, "the watch saw the calls");
    cr_expect_eq(atomic_load(&overlaps), 0, "%d times two threads were inside one capture at once",
                 atomic_load(&overlaps));
    cr_expect_eq(node_count(p), (size_t)(THREADS * ROUNDS * 4),
                 "every allocation, free and memset of every thread is in the graph");
    for (i = 0; i <= THREADS; i++)
        cucap_builder_destroy(all[i]);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- the call itself */

BACKEND_TEST(enqueue, runs_the_work_in_the_capture_in_the_builders_context)
{
    struct fill f = { 0, 7, 0, NULL };
    cucap_builder *p;
    CUcontext now = NULL;

    cr_assert_eq(D.cuMemAlloc(&f.at, 64), CUDA_SUCCESS);   /* before the capture: a global one refuses it */
    p = begun(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);   /* as on a fresh thread */
    cr_assert_eq(cucap_builder_enqueue(p, fill_64, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(f.calls, 1);
    cr_assert_eq(f.current, cucap_builder_context(p), "the work runs with the builder's context current");
    cr_assert_eq(D.cuCtxGetCurrent(&now), CUDA_SUCCESS);
    cr_assert_null(now, "the caller's (no) context is current again");
    cr_assert_eq(D.cuCtxSetCurrent(cucap_builder_context(p)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(node_count(p), 1, "the memset was captured, not run");
    cucap_builder_destroy(p);
    cr_assert_eq(D.cuMemFree(f.at), CUDA_SUCCESS);
}

BACKEND_TEST(enqueue, refuses_bad_input_and_builders_that_are_not_capturing)
{
    cucap_builder *p = NULL, *q = begun(CU_STREAM_CAPTURE_MODE_GLOBAL), *f = NULL;
    struct fill work = { 0, 1, 0, NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_enqueue(NULL, fill_64, &work, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_enqueue(q, NULL, NULL, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "fn is NULL"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_enqueue(p, fill_64, &work, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "NOT_STARTED"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    /* a fork whose primary's capture ended: its work would run outside any capture */
    cr_assert_eq(cucap_builder_split(q, 2, &f, NULL), CUDA_SUCCESS);
    (void)cucap_builder_end(q, NULL);   /* ended or invalidated, the capture is over */
    cr_assert_eq(cucap_builder_enqueue(f, fill_64, &work, &err), CUDA_ERROR_ILLEGAL_STATE);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(work.calls, 0, "refused work never runs");
    cucap_builder_destroy(f);
    cr_assert_eq(cucap_builder_enqueue(q, fill_64, &work, &err), CUDA_ERROR_ILLEGAL_STATE);
    cucap_error_free(err);
    cucap_builder_destroy(q);
    cucap_builder_destroy(p);
}

BACKEND_TEST(enqueue, failed_work_is_the_error_and_the_end_names_it)
{
    cucap_builder *p = begun(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_enqueue(p, synchronize_stream, NULL, &err), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_error_code(err), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "the work failed"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_end(p, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_error_note_count(err), 1);
    cr_assert_not_null(strstr(cucap_error_note(err, 0), "cucap_builder_enqueue"), "%s", cucap_error_note(err, 0));
    cucap_error_free(err);
    cucap_builder_destroy(p);
}

/* The work may call back into the library on the same capture: the lock
 * is taken again, not waited for. */
struct reentry {
    cucap_builder *fork;
    CUdeviceptr at;
    CUresult split, join, inner_enqueue;
};

static CUresult split_and_join_inside(CUstream s, void *data)
{
    struct reentry *r = data;
    struct fill f = { r->at, 9, 0, NULL };
    cucap_builder *sub = NULL;

    (void)s;
    r->split = cucap_builder_split(r->fork, 2, &sub, NULL);
    r->inner_enqueue = cucap_builder_enqueue(sub, fill_64, &f, NULL);
    r->join = cucap_builder_join((cucap_builder *const[]){ r->fork, sub }, 2, NULL, NULL);
    cucap_builder_destroy(sub);
    return CUDA_SUCCESS;
}

BACKEND_TEST(enqueue, work_that_calls_back_into_the_library_on_the_same_capture)
{
    cucap_builder *p, *f = NULL;
    struct reentry r;

    memset(&r, 0, sizeof r);
    cr_assert_eq(D.cuMemAlloc(&r.at, 64), CUDA_SUCCESS);
    p = begun(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(cucap_builder_split(p, 2, &f, NULL), CUDA_SUCCESS);
    r.fork = f;
    cr_assert_eq(cucap_builder_enqueue(p, split_and_join_inside, &r, NULL), CUDA_SUCCESS);
    cr_assert_eq(r.split, CUDA_SUCCESS);
    cr_assert_eq(r.inner_enqueue, CUDA_SUCCESS);
    cr_assert_eq(r.join, CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ p, f }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(node_count(p), 1);
    cucap_builder_destroy(f);
    cucap_builder_destroy(p);
    cr_assert_eq(D.cuMemFree(r.at), CUDA_SUCCESS);
}
