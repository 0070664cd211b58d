/* NCCL collectives captured through libcucapture, on the GPUs only (NCCL
 * cannot run on the simulated driver): one builder per device on threads
 * of their own, one capture spanning every device, a collective whose
 * capture is invalidated, and a device pool allocating inside each
 * capture.  With one GPU the communicator has one rank.  Built when
 * configure found NCCL; otherwise the suite says SKIP and why. */
#include "config.h"   /* HAVE_NCCL */

#include <criterion/criterion.h>

#include "backend.h"

#ifndef HAVE_NCCL

Test(nccl_gpu, collectives_captured_through_builders)
{
    cr_skip_test("built without NCCL: configure found no nccl.h and libnccl.so.2 (see --with-nccl)");
}

#else

#include <pthread.h>
#include <nccl.h>
#include <cudaTypedefs.h>

#define COUNT 4096
#define LAUNCHES 10
#define MAX_RANKS 8

static int ranks;
static ncclComm_t comms[MAX_RANKS];
static CUcontext contexts[MAX_RANKS];
static CUdeviceptr results[MAX_RANKS];
static PFN_cuMemsetD32Async_v3020 memset32;

static unsigned int float_bits(float f)
{
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void nccl_setup(void)
{
    int devices[MAX_RANKS], d, n = 0;

    gpu_setup();
    memset32 = (PFN_cuMemsetD32Async_v3020)cucap_driver_entry_point("cuMemsetD32Async");
    cr_assert_not_null(memset32);
    cr_assert_eq(D.cuDeviceGetCount(&n), CUDA_SUCCESS);
    ranks = n < MAX_RANKS ? n : MAX_RANKS;
    for (d = 0; d < ranks; d++) {
        devices[d] = d;
        cr_assert_eq(D.cuDevicePrimaryCtxRetain(&contexts[d], d), CUDA_SUCCESS);
        cr_assert_eq(D.cuCtxSetCurrent(contexts[d]), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemAlloc(&results[d], COUNT * sizeof(float)), CUDA_SUCCESS);
    }
    cr_assert_eq(ncclCommInitAll(comms, ranks, devices), ncclSuccess);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

static void nccl_teardown(void)
{
    int d;

    for (d = 0; d < ranks; d++) {
        ncclResult_t async = ncclInternalError;
        ncclCommGetAsyncError(comms[d], &async);
        cr_expect_eq(async, ncclSuccess, "rank %d's communicator reports %s", d, ncclGetErrorString(async));
        cr_expect_eq(ncclCommDestroy(comms[d]), ncclSuccess, "rank %d's communicator is destroyed cleanly", d);
        D.cuCtxSetCurrent(contexts[d]);
        D.cuMemFree(results[d]);
        D.cuDevicePrimaryCtxRelease(d);
    }
    D.cuCtxSetCurrent(NULL);
    gpu_teardown();
}

TestSuite(nccl_gpu, .init = nccl_setup, .fini = nccl_teardown, .timeout = 120);

/* Rank d's share on s: a buffer of d + 1's from the device's pool, the
 * all-reduce into results[d], the free. */
static ncclResult_t capture_rank(int d, CUstream s)
{
    cucap_pool *pool = NULL;
    CUdeviceptr buf = 0;
    ncclResult_t nr;

    cr_assert_eq(cucap_device_pool(d, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(pool, COUNT * sizeof(float), s, &buf, NULL), CUDA_SUCCESS,
                 "the device's pool allocates inside the capture");
    cr_assert_eq(memset32(buf, float_bits((float)(d + 1)), COUNT, s), CUDA_SUCCESS);
    nr = ncclAllReduce((const void *)buf, (void *)results[d], COUNT, ncclFloat, ncclSum, comms[d], (cudaStream_t)s);
    cr_assert_eq(cucap_pool_free(pool, buf, s, NULL), CUDA_SUCCESS);
    return nr;
}

static void clear_results(void)
{
    int d;

    for (d = 0; d < ranks; d++) {
        cr_assert_eq(D.cuCtxSetCurrent(contexts[d]), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8(results[d], 0, COUNT * sizeof(float)), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    }
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

static void assert_sums(void)
{
    static float host[COUNT];
    float want = (float)ranks * (float)(ranks + 1) / 2.0f;
    int d;
    size_t i;

    for (d = 0; d < ranks; d++) {
        cr_assert_eq(D.cuCtxSetCurrent(contexts[d]), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemcpyDtoH(host, results[d], sizeof host), CUDA_SUCCESS);
        for (i = 0; i < COUNT; i++)
            cr_assert_eq(host[i], want, "rank %d element %zu: %g, not %g", d, i, host[i], want);
    }
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- one builder per device, one thread each */

static pthread_barrier_t captured;

struct rank_run {
    int device;
    CUresult create, begin, end, complete, launch, sync;
    ncclResult_t collective;
    CUcontext current_before;
};

static void *rank_thread(void *p)
{
    struct rank_run *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    int n;

    D.cuCtxGetCurrent(&r->current_before);   /* a fresh thread: none */
    r->create = cucap_builder_create(r->device, &b, NULL);
    D.cuCtxSetCurrent(contexts[r->device]);   /* NCCL's device for this thread */
    r->begin = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL);
    r->collective = capture_rank(r->device, cucap_builder_stream(b));
    r->end = cucap_builder_end(b, NULL);
    r->complete = cucap_builder_complete(b, NULL, &exec, NULL);
    pthread_barrier_wait(&captured);   /* every rank launches, or none completes */
    r->launch = CUDA_SUCCESS;
    for (n = 0; n < LAUNCHES && r->launch == CUDA_SUCCESS; n++)
        r->launch = cucap_exec_launch(exec, cucap_builder_stream(b), NULL);
    r->sync = D.cuStreamSynchronize(cucap_builder_stream(b));
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuCtxSetCurrent(NULL);
    return NULL;
}

Test(nccl_gpu, one_builder_per_device_on_threads_of_their_own)
{
    struct rank_run r[MAX_RANKS];
    pthread_t t[MAX_RANKS];
    int d;

    clear_results();
    cr_assert_eq(pthread_barrier_init(&captured, NULL, (unsigned)ranks), 0);
    for (d = 0; d < ranks; d++) {
        memset(&r[d], 0xff, sizeof r[d]);
        r[d].device = d;
        cr_assert_eq(pthread_create(&t[d], NULL, rank_thread, &r[d]), 0);
    }
    for (d = 0; d < ranks; d++)
        pthread_join(t[d], NULL);
    pthread_barrier_destroy(&captured);
    for (d = 0; d < ranks; d++) {
        cr_assert_null(r[d].current_before);
        cr_assert_eq(r[d].create, CUDA_SUCCESS);
        cr_assert_eq(r[d].begin, CUDA_SUCCESS);
        cr_assert_eq(r[d].collective, ncclSuccess, "rank %d: ncclAllReduce in the capture: %s", d,
                     ncclGetErrorString(r[d].collective));
        cr_assert_eq(r[d].end, CUDA_SUCCESS);
        cr_assert_eq(r[d].complete, CUDA_SUCCESS);
        cr_assert_eq(r[d].launch, CUDA_SUCCESS);
        cr_assert_eq(r[d].sync, CUDA_SUCCESS);
    }
    assert_sums();
}

/* ---------------------------------------------------------------- one capture spanning every device */

static void one_graph(void)
{
    cucap_builder *b = NULL, *forks[MAX_RANKS] = { NULL };
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    ncclResult_t nr = ncclSuccess;
    int d, n;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(contexts[0]), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL), CUDA_SUCCESS);
    forks[0] = b;
    for (d = 1; d < ranks; d++)
        cr_assert_eq(cucap_builder_split_on(b, d, 2, &forks[d], NULL), CUDA_SUCCESS);
    cr_assert_eq(ncclGroupStart(), ncclSuccess);
    for (d = 0; d < ranks && nr == ncclSuccess; d++)
        nr = capture_rank(d, cucap_builder_stream(forks[d]));
    cr_assert_eq(nr, ncclSuccess, "ncclAllReduce in the capture: %s", ncclGetErrorString(nr));
    cr_assert_eq(ncclGroupEnd(), ncclSuccess, "ncclGroupEnd in the capture");
    cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    for (n = 0; n < LAUNCHES; n++)
        cr_assert_eq(cucap_exec_launch(exec, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    for (d = 1; d < ranks; d++)
        cucap_builder_destroy(forks[d]);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

Test(nccl_gpu, one_capture_spans_every_device)
{
    clear_results();
    one_graph();
    assert_sums();
}

/* A synchronous call on the capturing stream invalidates the capture the
 * collective is in: end says so, the builder and its pool allocation are
 * torn down without a crash, the communicator stays usable, and the next
 * capture works. */
Test(nccl_gpu, an_invalidated_collective_capture_tears_down_and_the_next_works)
{
    cucap_builder *b = NULL, *forks[MAX_RANKS] = { NULL };
    cucap_error *err = NULL;
    ncclResult_t nr = ncclSuccess;
    int d;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(contexts[0]), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL), CUDA_SUCCESS);
    forks[0] = b;
    for (d = 1; d < ranks; d++)
        cr_assert_eq(cucap_builder_split_on(b, d, 2, &forks[d], NULL), CUDA_SUCCESS);
    cr_assert_eq(ncclGroupStart(), ncclSuccess);
    for (d = 0; d < ranks && nr == ncclSuccess; d++)
        nr = capture_rank(d, cucap_builder_stream(forks[d]));
    cr_assert_eq(ncclGroupEnd(), ncclSuccess);
    cr_assert_eq(nr, ncclSuccess);
    cr_assert_neq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_SUCCESS,
                  "a synchronize of a capturing stream is refused, and invalidates the capture");
    if (ranks > 1) {
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s",
                     cucap_error_message(err));
        cucap_error_free(err);
        err = NULL;
    }
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_INVALIDATED);
    for (d = 1; d < ranks; d++)
        cucap_builder_destroy(forks[d]);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    clear_results();
    one_graph();
    assert_sums();
}

#endif
