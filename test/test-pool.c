/* The pool module, on the simulated driver and on the GPU: setup under
 * every capture mode from the capturing thread and from another thread,
 * allocation under capture, the release threshold, the process-wide
 * device pool, restore failures (fault injection) and bad input. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "heap-count.h"

BACKEND_SUITES(pool, 60);
FAULT_BACKEND_SUITES(pool, 120);

static const char *mode_name(CUstreamCaptureMode m)
{
    return m == CU_STREAM_CAPTURE_MODE_GLOBAL ? "global"
           : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread_local" : "relaxed";
}

/* The three pool calls a user makes while something captures; each must
 * leave the capture alone and the thread's mode as it was. */
static void pool_setup_calls(void)
{
    cucap_pool *def = NULL, *dev = NULL, *own = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_pool_open_default(0, &def, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_not_null(def);
    cr_assert_eq(cucap_device_pool(0, &dev, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_not_null(dev);
    cr_assert_eq(cucap_pool_create(0, NULL, &own, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_not_null(own);
    cr_assert_eq(cucap_pool_handle(def), cucap_pool_handle(dev), "both wrap the device's current pool");
    cr_assert_neq(cucap_pool_handle(own), cucap_pool_handle(def));
    cr_assert_eq(cucap_pool_close(own, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_close(def, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
}

/* Capture on the calling thread in `mode`, with the thread's own mode set
 * to something unusual, run the pool calls, and check the capture. */
static void setup_under_capture_same_thread(CUstreamCaptureMode mode)
{
    CUstream s = new_stream();
    CUdeviceptr d;
    CUgraph g = NULL;
    unsigned char host[64];

    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 0x21, sizeof host, s), CUDA_SUCCESS);
    set_thread_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    pool_setup_calls();
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "the thread's mode was not restored");
    set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE, "%s capture was disturbed",
                 mode_name(mode));
    cr_assert_eq(D.cuMemsetD8Async(d, 0x42, sizeof host, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_not_null(g);
    run_graph(g, s);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[0], 0x42);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}

/* The cuda.core 1.2.0 failures (constructor and first touch under a global
 * or thread_local capture of the calling thread), now passing. */
BACKEND_TEST(pool, cuda_core_1_2_constructor_under_global_capture)
{
    setup_under_capture_same_thread(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

BACKEND_TEST(pool, cuda_core_1_2_constructor_under_thread_local_capture)
{
    setup_under_capture_same_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

BACKEND_TEST(pool, setup_under_relaxed_capture_same_thread)
{
    setup_under_capture_same_thread(CU_STREAM_CAPTURE_MODE_RELAXED);
}

static void first_touch_under_capture(CUstreamCaptureMode mode)
{
    CUstream s = new_stream();
    cucap_pool *p = NULL;
    cucap_error *err = NULL;
    CUgraph g = NULL;

    cr_assert_eq(D.cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_pool(0, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_not_null(g);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

BACKEND_TEST(pool, cuda_core_1_2_first_touch_under_global_capture)
{
    first_touch_under_capture(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

BACKEND_TEST(pool, cuda_core_1_2_first_touch_under_thread_local_capture)
{
    first_touch_under_capture(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

/* ---------------------------------------------------------------- capture on another thread */

struct capturer {
    CUstreamCaptureMode mode;
    pthread_barrier_t begun, done;
    CUresult end_rc;
    CUgraph graph;
    CUstream stream;
};

static void *capture_thread(void *p)
{
    struct capturer *c = p;

    D.cuCtxSetCurrent(gpu_context);
    D.cuStreamBeginCapture(c->stream, c->mode);
    pthread_barrier_wait(&c->begun);
    pthread_barrier_wait(&c->done);    /* the main thread ran the pool calls */
    c->end_rc = D.cuStreamEndCapture(c->stream, &c->graph);
    return NULL;
}

static void setup_under_capture_other_thread(CUstreamCaptureMode mode)
{
    struct capturer c;
    pthread_t t;
    CUdeviceptr d;

    memset(&c, 0, sizeof c);
    c.mode = mode;
    c.stream = new_stream();
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    pthread_barrier_init(&c.begun, NULL, 2);
    pthread_barrier_init(&c.done, NULL, 2);
    cr_assert_eq(pthread_create(&t, NULL, capture_thread, &c), 0);
    pthread_barrier_wait(&c.begun);
    cr_assert_eq(D.cuMemsetD8Async(d, 0x17, 64, c.stream), CUDA_SUCCESS);
    set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);   /* the default that used to kill global captures */
    pool_setup_calls();
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(capture_status(c.stream), CU_STREAM_CAPTURE_STATUS_ACTIVE, "%s capture on the other thread "
                 "was disturbed", mode_name(mode));
    pthread_barrier_wait(&c.done);
    pthread_join(t, NULL);
    cr_assert_eq(c.end_rc, CUDA_SUCCESS);
    cr_assert_not_null(c.graph);
    run_graph(c.graph, c.stream);
    cr_assert_eq(D.cuGraphDestroy(c.graph), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(c.stream), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}

BACKEND_TEST(pool, setup_under_global_capture_other_thread)
{
    setup_under_capture_other_thread(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

BACKEND_TEST(pool, setup_under_thread_local_capture_other_thread)
{
    setup_under_capture_other_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

BACKEND_TEST(pool, setup_under_relaxed_capture_other_thread)
{
    setup_under_capture_other_thread(CU_STREAM_CAPTURE_MODE_RELAXED);
}

/* ---------------------------------------------------------------- allocation under capture */

static void alloc_free_under_capture(CUstreamCaptureMode mode)
{
    CUstream s = new_stream();
    cucap_pool *p = NULL;
    cucap_error *err = NULL;
    CUdeviceptr a = 0, b = 0;
    CUgraph g = NULL;
    unsigned char host[256];
    size_t i;

    cr_assert_eq(cucap_device_pool(0, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    /* graph 1: an allocation node and a memset; the memory outlives the launch */
    cr_assert_eq(D.cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(p, sizeof host, s, &a, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_neq(a, 0);
    cr_assert_eq(D.cuMemsetD8Async(a, 0x9d, sizeof host, s), CUDA_SUCCESS);
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_eq(count_nodes(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC), 1);
    run_graph(g, s);
    memset(host, 0, sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, a, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x9d, "byte %zu is %#x", i, host[i]);
    cr_assert_eq(cucap_pool_free(p, a, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);

    /* graph 2: allocation and free nodes in one graph */
    cr_assert_eq(D.cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(p, 1024, s, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(b, 0x01, 1024, s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(p, b, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_eq(count_nodes(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC), 1);
    cr_assert_eq(count_nodes(g, CU_GRAPH_NODE_TYPE_MEM_FREE), 1);
    run_graph(g, s);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

BACKEND_TEST(pool, alloc_free_under_global_capture)
{
    alloc_free_under_capture(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

BACKEND_TEST(pool, alloc_free_under_thread_local_capture)
{
    alloc_free_under_capture(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

BACKEND_TEST(pool, alloc_free_under_relaxed_capture)
{
    alloc_free_under_capture(CU_STREAM_CAPTURE_MODE_RELAXED);
}

BACKEND_TEST(pool, alloc_free_outside_capture_and_from_a_created_pool)
{
    cucap_pool_options opts = { .max_size = 64u << 20, .ipc_enabled = 0 };
    cucap_pool *p = NULL;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    CUdeviceptr a = 0;
    unsigned char host[32];

    cr_assert_eq(cucap_pool_create(0, &opts, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_alloc(p, sizeof host, s, &a, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(a, 0x66, sizeof host, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, a, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[31], 0x66);
    cr_assert_eq(cucap_pool_free(p, a, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- graph allocations freed outside their graph */

static void check_filled(CUdeviceptr a, unsigned char value, int launch)
{
    unsigned char host[256];
    size_t i;

    memset(host, 0, sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, a, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], value, "launch %d: byte %zu is %#x", launch, i, host[i]);
}

/* NVIDIA's graphMemoryNodes: a capture allocates through the pool and does
 * not free; after each launch the program frees the allocation outside the
 * graph, and the next launch makes it again at the same address.  The pool
 * frees it after every launch, whether a builder or the driver's own
 * capture made it; a launch while it lives, and a second free, are the
 * driver's refusals (doc/driver-facts.md, "Graph allocations freed outside
 * the graph"); once the graph is gone the live allocation is freed once. */
static void freed_after_every_launch(int with_builder)
{
    cucap_pool *p = NULL;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    CUgraph g = NULL;
    CUdeviceptr a = 0, first = 0;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec raw = NULL;
    CUresult rc;
    int launch;

    cr_assert_eq(cucap_device_pool(0, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    if (with_builder) {
        cr_assert_eq(cucap_builder_create_on_stream(s, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
    } else {
        cr_assert_eq(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    }
    cr_assert_eq(cucap_pool_alloc(p, 256, s, &a, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(a, 0x5c, 256, s), CUDA_SUCCESS);
    if (with_builder) {
        cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        raw = cucap_exec_handle(exec);
    } else {
        cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
        memset(&params, 0, sizeof params);
        cr_assert_eq(D.cuGraphInstantiateWithParams(&raw, g, &params), CUDA_SUCCESS);
    }
    first = a;
    for (launch = 0; launch < 4; launch++) {
        cr_assert_eq(D.cuGraphLaunch(raw, s), CUDA_SUCCESS, "launch %d", launch);
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        check_filled(a, 0x5c, launch);
        cr_assert_eq(cucap_pool_free(p, a, s, &err), CUDA_SUCCESS, "launch %d: %s", launch, cucap_error_message(err));
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    }
    rc = cucap_pool_free(p, a, s, &err);
    cr_assert_eq(rc, CUDA_ERROR_INVALID_VALUE, "a second free after one launch: %s", cucap_result_name(rc));
    cr_assert(strstr(cucap_error_message(err), "cuMemFreeAsync"), "the driver refused it: %s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(D.cuGraphLaunch(raw, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphLaunch(raw, s), CUDA_ERROR_INVALID_VALUE, "the allocation lives: no launch makes it again");
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(a, first);
    /* the graph goes with its allocation alive: freed once, after */
    if (with_builder) {
        cucap_exec_destroy(exec);
        cucap_builder_destroy(b);
    } else {
        cr_assert_eq(D.cuGraphExecDestroy(raw), CUDA_SUCCESS);
        cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    }
    cr_assert_eq(cucap_pool_free(p, a, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(p, a, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

BACKEND_TEST(pool, a_builder_captures_allocation_is_freed_after_every_launch)
{
    freed_after_every_launch(1);
}

BACKEND_TEST(pool, a_driver_captures_allocation_is_freed_after_every_launch)
{
    freed_after_every_launch(0);
}

/* ---------------------------------------------------------------- release threshold */

static cuuint64_t threshold_of(CUmemoryPool pool)
{
    cuuint64_t v = 0;
    cr_assert_eq(D.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), CUDA_SUCCESS);
    return v;
}

BACKEND_TEST(pool, release_threshold_raised_from_zero)
{
    CUmemoryPool current;
    cucap_pool *p = NULL;
    cuuint64_t zero = 0;

    cr_assert_eq(D.cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemPoolSetAttribute(current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_open_default(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(threshold_of(current), UINT64_MAX);
    cucap_pool_close(p, NULL);
}

BACKEND_TEST(pool, release_threshold_left_alone_when_not_zero)
{
    CUmemoryPool current;
    cucap_pool *p = NULL;
    cuuint64_t chosen = 123456789;

    cr_assert_eq(D.cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemPoolSetAttribute(current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &chosen), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_pool(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(threshold_of(current), 123456789);
}

/* ---------------------------------------------------------------- the process-wide device pool */

#define TOUCHERS 8

struct touch {
    pthread_barrier_t *start;
    cucap_pool *got;
    CUresult rc;
};

static void *toucher(void *p)
{
    struct touch *t = p;

    pthread_barrier_wait(t->start);
    t->rc = cucap_device_pool(0, &t->got, NULL);
    return NULL;
}

BACKEND_TEST(pool, eight_threads_get_one_device_pool_under_global_capture)
{
    pthread_barrier_t start;
    pthread_t threads[TOUCHERS];
    struct touch touches[TOUCHERS];
    cucap_pool *again = NULL;
    CUstream s = new_stream();
    CUgraph g = NULL;
    int i;

    cr_assert_eq(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    pthread_barrier_init(&start, NULL, TOUCHERS);
    for (i = 0; i < TOUCHERS; i++) {
        touches[i].start = &start;
        touches[i].got = NULL;
        cr_assert_eq(pthread_create(&threads[i], NULL, toucher, &touches[i]), 0);
    }
    for (i = 0; i < TOUCHERS; i++)
        pthread_join(threads[i], NULL);
    for (i = 0; i < TOUCHERS; i++) {
        cr_assert_eq(touches[i].rc, CUDA_SUCCESS, "thread %d", i);
        cr_assert_not_null(touches[i].got);
        cr_assert_eq(touches[i].got, touches[0].got, "thread %d got another object", i);
    }
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE, "8 first touches killed a global capture");
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_pool(0, &again, NULL), CUDA_SUCCESS);
    cr_assert_eq(again, touches[0].got);
    cr_assert_eq(cucap_pool_close(again, NULL), CUDA_SUCCESS, "closing the borrowed pool is a no-op");
    cr_assert_eq(cucap_device_pool(0, &again, NULL), CUDA_SUCCESS);
    cr_assert_eq(again, touches[0].got, "the device pool survives a close");
    D.cuStreamDestroy(s);
}

/* ---------------------------------------------------------------- bad input */

BACKEND_TEST(pool, bad_input_is_refused_clearly)
{
    cucap_pool *p = (cucap_pool *)&p, *dev = NULL;
    cucap_error *err = NULL;
    cucap_pool_options bad_ipc = { .max_size = 0, .ipc_enabled = 2 };
    CUdeviceptr a = 0, out = 7;
    CUstream s = new_stream();

    cr_assert_eq(cucap_pool_open_default(99, &p, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(p, "a failed call leaves *out NULL");
    cr_assert_not_null(strstr(cucap_error_message(err), "device ordinal 99 is out of range"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_device_pool(-1, &dev, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_create(5000, NULL, &dev, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_open_default(0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_device_pool(0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_create(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_create(0, &bad_ipc, &p, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "ipc_enabled"));
    cucap_error_free(err);
    err = NULL;

    cr_assert_eq(cucap_device_pool(0, &dev, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(NULL, 16, s, &a, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_alloc(dev, 16, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_alloc(dev, 0, s, &out, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(out, 0);
    cr_assert_not_null(strstr(cucap_error_message(err), "size of 0"));
    cucap_error_free(err);
    err = NULL;

    cr_assert_eq(cucap_pool_alloc(dev, 256, s, &a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(dev, a + 1, s, &err), CUDA_ERROR_INVALID_VALUE, "an interior pointer");
    cr_assert_not_null(strstr(cucap_error_message(err), "not allocated by this pool"));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_pool_free(dev, a, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(dev, a, s, &err), CUDA_ERROR_INVALID_VALUE, "a double free");
    cr_assert_not_null(strstr(cucap_error_message(err), "already freed"));
    cucap_error_free(err);
    cr_assert_eq(cucap_pool_free(NULL, a, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(cucap_pool_handle(NULL));
    cr_assert_eq(cucap_pool_close(NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
}

BACKEND_TEST(pool, a_pool_frees_only_its_own_allocations)
{
    cucap_pool *mine = NULL, *other = NULL;
    CUstream s = new_stream();
    CUdeviceptr a = 0;

    cr_assert_eq(cucap_pool_create(0, NULL, &mine, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_create(0, NULL, &other, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(mine, 64, s, &a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(other, a, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_pool_free(mine, a, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(mine, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(other, NULL), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
}

/* A captured allocation whose graph was destroyed unlaunched gives its
 * address back to the driver, which may hand it to another pool: the first
 * pool must not free it any more. */
BACKEND_TEST(pool, an_address_handed_to_another_pool_is_that_pools)
{
    cucap_pool *a = NULL, *b = NULL;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    CUdeviceptr x = 0, y = 0, held[64];
    CUgraph g = NULL;
    int i, n = 0, found = 0;

    cr_assert_eq(cucap_pool_create(0, NULL, &a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_create(0, NULL, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(a, 4096, s, &x, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS, "never launched: the address is free again");
    for (i = 0; i < 64 && !found; i++) {
        cr_assert_eq(cucap_pool_alloc(b, 4096, s, &y, NULL), CUDA_SUCCESS);
        held[n++] = y;
        found = y == x;
    }
    if (!found) {   /* the driver chose other addresses: nothing to check */
        for (i = 0; i < n; i++)
            cr_assert_eq(cucap_pool_free(b, held[i], s, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_pool_close(a, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_pool_close(b, NULL), CUDA_SUCCESS);
        D.cuStreamDestroy(s);
        if (on_simulator())
            cr_assert_fail("the simulator reuses addresses: it should have handed x out again");
        return;
    }
    cr_assert_eq(cucap_pool_free(a, x, s, &err), CUDA_ERROR_INVALID_VALUE, "A no longer holds x");
    cr_assert_not_null(strstr(cucap_error_message(err), "another pool"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    for (i = 0; i < n; i++)
        cr_assert_eq(cucap_pool_free(b, held[i], s, NULL), CUDA_SUCCESS, "B frees its own, x included");
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(b, NULL), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
}

/* Options have reserved members for later releases: non-zero is refused. */
BACKEND_TEST(pool, reserved_option_members_must_be_zero)
{
    cucap_pool_options opts = { .max_size = 0, .ipc_enabled = 0 };
    cucap_complete_options complete = { .auto_free_on_launch = 0 };
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    opts.reserved_int[3] = 1;
    cr_assert_eq(cucap_pool_create(0, &opts, &p, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "reserved"), "%s", cucap_error_message(err));
    cr_assert_null(p);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    complete.reserved_ptr[0] = &opts;
    cr_assert_eq(cucap_builder_complete(b, &complete, &exec, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "reserved"), "%s", cucap_error_message(err));
    cr_assert_null(exec);
    cucap_error_free(err);
    cucap_builder_destroy(b);
}

/* The memory the pool keeps to know its live pointers follows them: the
 * library's heap grows with 1,000 live allocations and shrinks back once
 * they are freed, however many come and go after. */
BACKEND_TEST(pool, tracking_memory_follows_the_live_allocations)
{
    cucap_pool *p = NULL;
    CUstream s = new_stream();
    CUdeviceptr many[1000], x = 0;
    long before, peak;
    int i;

    cr_assert_eq(cucap_device_pool(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(p, 64, s, &x, NULL), CUDA_SUCCESS);   /* the first use's own objects */
    cr_assert_eq(cucap_pool_free(p, x, s, NULL), CUDA_SUCCESS);
    before = heap_count();
    for (i = 0; i < 1000; i++)
        cr_assert_eq(cucap_pool_alloc(p, 64, s, &many[i], NULL), CUDA_SUCCESS);
    peak = heap_count();
    cr_assert_gt(peak, before);
    for (i = 0; i < 1000; i++)
        cr_assert_eq(cucap_pool_free(p, many[i], s, NULL), CUDA_SUCCESS);
    for (i = 0; i < 200000; i++) {   /* at most one pointer live */
        cr_assert_eq(cucap_pool_alloc(p, 64, s, &x, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_pool_free(p, x, s, NULL), CUDA_SUCCESS);
    }
    cr_assert_leq(heap_count(), before, "%ld bytes held for no live pointer (%ld with 1,000 live)",
                  heap_count() - before, peak - before);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
}

/* A free the driver refused is not resurrected: the pool forgets the
 * pointer, so that it can never free an address handed out again. */
FAULT_BACKEND_TEST(pool, a_refused_free_forgets_the_pointer)
{
    cucap_pool *p = NULL;
    CUstream s = new_stream();
    CUdeviceptr x = 0;

    cr_assert_eq(cucap_pool_create(0, NULL, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(p, 64, s, &x, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuMemFreeAsync:1:CUDA_ERROR_INVALID_VALUE"), 0);
    cr_assert_eq(cucap_pool_free(p, x, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_pool_free(p, x, s, NULL), CUDA_ERROR_INVALID_VALUE, "no longer the pool's");
    cr_assert_eq(D.cuMemFreeAsync(x, s), CUDA_SUCCESS, "the caller still owns it through the driver");
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(p, NULL), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
}

/* ---------------------------------------------------------------- restore failures, by fault injection */

/* The thread's mode after a failed restore is RELAXED: put it back. */
static void repair_thread_mode(CUstreamCaptureMode mode)
{
    cr_assert_eq(set_rules(""), 0);
    set_thread_mode(mode);
}

FAULT_BACKEND_TEST(pool, restore_failure_alone_is_the_error)
{
    cucap_pool *p = (cucap_pool *)&p;
    cucap_error *err = NULL;
    CUresult rc;

    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    rc = cucap_pool_open_default(0, &p, &err);
    cr_assert_eq(rc, CUDA_ERROR_UNKNOWN);
    cr_assert_eq(cucap_error_code(err), rc);
    cr_assert_null(p);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_pool_open_default: cuThreadExchangeStreamCaptureMode "
                                                        "failed while restoring"), "%s", cucap_error_message(err));
    cr_assert_eq(cucap_error_note_count(err), 0);
    cucap_error_free(err);
    repair_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

FAULT_BACKEND_TEST(pool, restore_failure_after_a_failed_call_is_a_note)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(set_rules("cuMemPoolGetAttribute:1:CUDA_ERROR_INVALID_VALUE,"
                           "cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(p);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuMemPoolGetAttribute"), "%s", cucap_error_message(err));
    cr_assert_eq(cucap_error_note_count(err), 1);
    cr_assert_str_eq(cucap_error_note(err, 0),
                     "cuThreadExchangeStreamCaptureMode failed while restoring the thread's capture mode: "
                     "CUDA_ERROR_UNKNOWN: an unknown internal error occurred");
    cucap_error_free(err);
    repair_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

FAULT_BACKEND_TEST(pool, failed_call_still_restores_the_mode)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    set_thread_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cr_assert_eq(set_rules("cuMemPoolCreate:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(cucap_pool_create(0, NULL, &p, &err), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cr_assert_eq(cucap_error_note_count(err), 0);
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cucap_error_free(err);
    set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
}

FAULT_BACKEND_TEST(pool, restore_failure_after_create_destroys_the_new_pool)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:2:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_pool_create(0, NULL, &p, &err), CUDA_ERROR_UNKNOWN);
    cr_assert_null(p);
    cr_assert_eq(calls("cuMemPoolDestroy"), 1, "the pool made before the failed restore must be destroyed");
    cucap_error_free(err);
    repair_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("pool"), 0);
}

FAULT_BACKEND_TEST(pool, switch_failure_is_the_error)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:1:CUDA_ERROR_NOT_PERMITTED"), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, &err), CUDA_ERROR_NOT_PERMITTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "switching the thread to relaxed"));
    cr_assert_eq(calls("cuMemPoolGetAttribute"), 0, "nothing unsafe may run outside the scope");
    cucap_error_free(err);
}

FAULT_BACKEND_TEST(pool, failed_first_touch_caches_nothing)
{
    cucap_pool *p = NULL, *again = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(set_rules("cuMemPoolGetAttribute:1:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_device_pool(0, &p, &err), CUDA_ERROR_UNKNOWN);
    cr_assert_null(p);
    cucap_error_free(err);
    cr_assert_eq(cucap_device_pool(0, &p, NULL), CUDA_SUCCESS, "a later touch succeeds");
    cr_assert_not_null(p);
    cr_assert_eq(cucap_device_pool(0, &again, NULL), CUDA_SUCCESS);
    cr_assert_eq(again, p);
}

/* Every driver call of cucap_pool_open_default fails once, in turn: each
 * time the call fails cleanly, creates nothing and leaves the thread's
 * mode as it was (unless the failed call was the restore itself).  Twice:
 * the device's first open (which retains its primary context), and an
 * open that shares the retain of an earlier one. */
static void open_default_fails_in_turn(int first_open)
{
    cucap_pool *p = NULL;
    long total, i;

    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, NULL), CUDA_SUCCESS);
    cucap_pool_close(p, NULL);
    if (first_open)
        cucap_release_cached();
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, NULL), CUDA_SUCCESS);
    total = calls("*");
    cucap_pool_close(p, NULL);
    cr_assert_geq(total, first_open ? 5 : 4, "open_default made %ld driver calls", total);
    cr_assert_eq(calls("cuDevicePrimaryCtxRetain"), first_open, "the retain is made once per device");
    for (i = 1; i <= total; i++) {
        char rule[64];
        cucap_error *err = NULL;
        CUresult rc;
        if (first_open)
            cucap_release_cached();
        snprintf(rule, sizeof rule, "*:%ld:CUDA_ERROR_LAUNCH_TIMEOUT", i);
        cr_assert_eq(set_rules(rule), 0);
        p = NULL;
        rc = cucap_pool_open_default(0, &p, &err);
        cr_assert_eq(rc, CUDA_ERROR_LAUNCH_TIMEOUT, "call %ld of %ld", i, total);
        cr_assert_eq(cucap_error_code(err), rc);
        cr_assert_null(p);
        cucap_error_free(err);
        cr_assert_eq(set_rules(""), 0);
        if (thread_mode() != CU_STREAM_CAPTURE_MODE_GLOBAL)
            set_thread_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);   /* the restore was the failed call */
    }
}

FAULT_BACKEND_TEST(pool, every_driver_call_of_open_default_fails_in_turn)
{
    open_default_fails_in_turn(1);
}

FAULT_BACKEND_TEST(pool, every_driver_call_of_a_later_open_default_fails_in_turn)
{
    open_default_fails_in_turn(0);
}

/* The device checks (it exists, it has memory pools) reach the driver until
 * they succeed once, then never again. */
FAULT_BACKEND_TEST(pool, device_checks_are_made_until_they_pass_once)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(set_rules("cuDeviceGetAttribute:1:CUDA_ERROR_LAUNCH_TIMEOUT"), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, &err), CUDA_ERROR_LAUNCH_TIMEOUT);
    cr_assert_not_null(strstr(cucap_error_message(err), "MEMORY_POOLS_SUPPORTED"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_null(p);
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(cucap_pool_open_default(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(calls("cuDeviceGetAttribute"), 1);
    cucap_pool_close(p, NULL);
    cr_assert_eq(cucap_pool_open_default(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_create(0, NULL, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_close(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(calls("cuDeviceGetAttribute"), 1, "the checks were made again");
}

/* Found by the API fuzzer: closing an owned pool when the switch to relaxed
 * mode failed freed the object but never destroyed the driver's pool. */
FAULT_BACKEND_TEST(pool, close_destroys_the_pool_even_when_the_relaxed_switch_fails)
{
    cucap_pool *p = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_pool_create(0, NULL, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuThreadExchangeStreamCaptureMode:1:CUDA_ERROR_UNKNOWN"), 0);
    cr_assert_eq(cucap_pool_close(p, &err), CUDA_ERROR_UNKNOWN);
    cr_assert_not_null(strstr(cucap_error_message(err), "switching the thread to relaxed"), "%s",
                       cucap_error_message(err));
    cr_assert_eq(calls("cuMemPoolDestroy"), 1, "the pool must be destroyed all the same");
    cucap_error_free(err);
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("pool"), 0);
}

/* cucap_pool_destroy: close where no error can be returned; a failure
 * reaches the warning handler, success says nothing. */
static int destroy_warnings;
static CUresult destroy_warning_code;

static void count_destroy_warning(const cucap_error *w, void *data)
{
    (void)data;
    destroy_warnings++;
    destroy_warning_code = cucap_error_code(w);
}

FAULT_BACKEND_TEST(pool, destroy_reports_a_failed_close_to_the_warning_handler)
{
    cucap_pool *p = NULL;

    cucap_set_warning_handler(count_destroy_warning, NULL);
    cr_assert_eq(cucap_pool_create(0, NULL, &p, NULL), CUDA_SUCCESS);
    cucap_pool_destroy(p);
    cr_assert_eq(destroy_warnings, 0, "a clean destroy warns");
    cucap_pool_destroy(NULL);
    cr_assert_eq(cucap_pool_create(0, NULL, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuMemPoolDestroy:1:CUDA_ERROR_ILLEGAL_STATE"), 0);
    cucap_pool_destroy(p);
    cr_assert_eq(destroy_warnings, 1);
    cr_assert_eq(destroy_warning_code, CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(set_rules(""), 0);
    cucap_set_warning_handler(NULL, NULL);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("pool"), 1, "the pool the fault kept is the driver's");
}
