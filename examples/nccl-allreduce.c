/* nccl-allreduce: NCCL's all-reduce captured into CUDA graphs through
 * libcucapture, on every visible GPU of one process.
 *
 *   threads    one builder per device, each on a thread of its own: a
 *              buffer from the device's memory pool, a memset, ncclAllReduce
 *              on the builder's stream and the free, captured; then every
 *              thread launches its graph 100 times.
 *   one-graph  one capture spanning every device: a builder on device 0
 *              split onto each other device (cucap_builder_split_on), the
 *              collectives inside ncclGroupStart/ncclGroupEnd across the
 *              forks, joined back: one graph that runs the whole step.
 *
 * Both check the sums on the host.  With one GPU the communicator has one
 * rank (the collective is a copy), and the capture path is the same.
 *
 * Build: cc nccl-allreduce.c $(pkg-config --cflags --libs cucapture) \
 *            -I<CUDA include dir> -L<NCCL lib dir> -lnccl -lpthread
 * Usage: nccl-allreduce [threads|one-graph]   (default: both)
 * Exit status: 0 on success, 77 when no CUDA driver or GPU can be used,
 * 1 on any other failure. */
#define _POSIX_C_SOURCE 200809L   /* pthread barriers under -std=c11 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cucapture.h>
#include <cudaTypedefs.h>
#include <nccl.h>

#define COUNT 65536     /* floats per rank */
#define LAUNCHES 100
#define MAX_DEVICES 16

static PFN_cuCtxSetCurrent_v4000 set_current;
static PFN_cuDevicePrimaryCtxRetain_v7000 primary_retain;
static PFN_cuDevicePrimaryCtxRelease_v11000 primary_release;
static PFN_cuDeviceGetCount_v2000 device_count;
static PFN_cuMemAlloc_v3020 mem_alloc;
static PFN_cuMemFree_v3020 mem_free;
static PFN_cuMemsetD32Async_v3020 memset32_async;
static PFN_cuMemcpyDtoHAsync_v3020 copy_to_host;
static PFN_cuStreamSynchronize_v2000 stream_synchronize;

static int ranks;
static ncclComm_t comms[MAX_DEVICES];
static CUcontext contexts[MAX_DEVICES];    /* each device's primary context, NCCL's too */
static CUdeviceptr results[MAX_DEVICES];   /* each rank's sums, outside the graphs */
static pthread_barrier_t all_captured;

static int fail(const char *what, cucap_error *err)
{
    char *text = cucap_error_to_string(err);
    fprintf(stderr, "nccl-allreduce: %s failed: %s: %s\n", what, cucap_error_name(err),
            text ? text : cucap_error_message(err));
    free(text);
    cucap_error_free(err);
    return 1;
}

static int nccl_fail(const char *what, ncclResult_t rc)
{
    fprintf(stderr, "nccl-allreduce: %s failed: %s\n", what, ncclGetErrorString(rc));
    return 1;
}

/* 1.0f, 2.0f, ... as the bits cuMemsetD32Async writes */
static unsigned int float_bits(float f)
{
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Capture rank d's share on stream s: a pooled buffer of d + 1's, the
 * collective into results[d], the free.  NCCL takes the CUstream as its
 * cudaStream_t (the same type). */
static int capture_rank(int d, CUstream s)
{
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr buf = 0;
    ncclResult_t nr;

    if (cucap_device_pool(d, &pool, &err) != CUDA_SUCCESS ||
        cucap_pool_alloc(pool, COUNT * sizeof(float), s, &buf, &err) != CUDA_SUCCESS)
        return fail("taking a buffer from the device's pool inside the capture", err);
    if (memset32_async(buf, float_bits((float)(d + 1)), COUNT, s) != CUDA_SUCCESS) {
        fprintf(stderr, "nccl-allreduce: cuMemsetD32Async failed\n");
        return 1;
    }
    nr = ncclAllReduce((const void *)buf, (void *)results[d], COUNT, ncclFloat, ncclSum, comms[d], (cudaStream_t)s);
    if (nr != ncclSuccess)
        return nccl_fail("ncclAllReduce inside the capture", nr);
    if (cucap_pool_free(pool, buf, s, &err) != CUDA_SUCCESS)
        return fail("freeing the buffer inside the capture", err);
    return 0;
}

/* Every rank's results must be 1 + 2 + ... + ranks. */
static int check_sums(const char *shape)
{
    static float host[COUNT];
    float want = (float)ranks * (float)(ranks + 1) / 2.0f;
    cucap_builder *b = NULL;
    cucap_error *err = NULL;
    int d;
    size_t i;

    for (d = 0; d < ranks; d++) {
        if (cucap_builder_create(d, &b, &err) != CUDA_SUCCESS)
            return fail("cucap_builder_create (for a stream to copy on)", err);
        if (copy_to_host(host, results[d], sizeof host, cucap_builder_stream(b)) != CUDA_SUCCESS ||
            stream_synchronize(cucap_builder_stream(b)) != CUDA_SUCCESS) {
            fprintf(stderr, "nccl-allreduce: copying rank %d's sums back failed\n", d);
            cucap_builder_destroy(b);
            return 1;
        }
        cucap_builder_destroy(b);
        for (i = 0; i < COUNT; i++)
            if (host[i] != want) {
                fprintf(stderr, "nccl-allreduce: %s: rank %d element %zu is %g, not %g\n", shape, d, i, host[i],
                        want);
                return 1;
            }
    }
    return 0;
}

/* ---------------------------------------------------------------- threads */

struct rank_thread {
    int device, status;
};

static void *rank_main(void *p)
{
    struct rank_thread *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    int n, captured = 0;

    r->status = 1;
    /* thread-local mode: NCCL's own calls on the other ranks' threads
     * cannot invalidate this capture */
    if (cucap_builder_create(r->device, &b, &err) != CUDA_SUCCESS)
        fail("cucap_builder_create", err);
    else if (set_current(contexts[r->device]) != CUDA_SUCCESS)   /* NCCL's device for this thread */
        fprintf(stderr, "nccl-allreduce: cuCtxSetCurrent failed\n");
    else if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err) != CUDA_SUCCESS)
        fail("cucap_builder_begin", err);
    else if (capture_rank(r->device, cucap_builder_stream(b)) == 0) {
        if (cucap_builder_end(b, &err) != CUDA_SUCCESS || cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS)
            fail("ending and instantiating the capture", err);
        else
            captured = 1;
    }
    /* every rank's graph must launch for any collective to complete */
    pthread_barrier_wait(&all_captured);
    if (captured) {
        for (n = 0; n < LAUNCHES && cucap_exec_launch(exec, cucap_builder_stream(b), &err) == CUDA_SUCCESS; n++)
            ;
        if (n < LAUNCHES)
            fail("cucap_exec_launch", err);
        else if (stream_synchronize(cucap_builder_stream(b)) != CUDA_SUCCESS)
            fprintf(stderr, "nccl-allreduce: rank %d: the launches failed\n", r->device);
        else
            r->status = 0;
    }
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    set_current(NULL);
    return NULL;
}

static int run_threads(void)
{
    struct rank_thread r[MAX_DEVICES];
    pthread_t t[MAX_DEVICES];
    int d, started = 0, status = 0;

    pthread_barrier_init(&all_captured, NULL, (unsigned)ranks);
    for (d = 0; d < ranks; d++) {
        r[d].device = d;
        if (pthread_create(&t[d], NULL, rank_main, &r[d]) != 0) {
            fprintf(stderr, "nccl-allreduce: pthread_create failed\n");
            exit(1);   /* the others wait at the barrier for this one */
        }
        started++;
    }
    for (d = 0; d < started; d++) {
        pthread_join(t[d], NULL);
        status |= r[d].status;
    }
    pthread_barrier_destroy(&all_captured);
    return status ? 1 : check_sums("threads");
}

/* ---------------------------------------------------------------- one graph */

static int run_one_graph(void)
{
    cucap_builder *b = NULL, *forks[MAX_DEVICES] = { NULL };
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    ncclResult_t nr;
    int d, n, status = 1;

    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return fail("cucap_builder_create", err);
    if (set_current(contexts[0]) != CUDA_SUCCESS) {
        fprintf(stderr, "nccl-allreduce: cuCtxSetCurrent failed\n");
        goto out;
    }
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err) != CUDA_SUCCESS) {
        fail("cucap_builder_begin", err);
        goto out;
    }
    forks[0] = b;
    for (d = 1; d < ranks; d++)
        if (cucap_builder_split_on(b, d, 2, &forks[d], &err) != CUDA_SUCCESS) {
            fail("cucap_builder_split_on", err);
            goto out;
        }
    if ((nr = ncclGroupStart()) != ncclSuccess) {
        nccl_fail("ncclGroupStart", nr);
        goto out;
    }
    for (d = 0; d < ranks; d++)
        if (capture_rank(d, cucap_builder_stream(forks[d])) != 0)
            break;
    if ((nr = ncclGroupEnd()) != ncclSuccess) {
        nccl_fail("ncclGroupEnd inside the capture", nr);
        goto out;
    }
    if (d < ranks)
        goto out;
    if (cucap_builder_join_forks(b, &err) != CUDA_SUCCESS || cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS) {
        fail("joining, ending and instantiating the capture", err);
        goto out;
    }
    for (n = 0; n < LAUNCHES; n++)
        if (cucap_exec_launch(exec, cucap_builder_stream(b), &err) != CUDA_SUCCESS) {
            fail("cucap_exec_launch", err);
            goto out;
        }
    if (stream_synchronize(cucap_builder_stream(b)) != CUDA_SUCCESS) {
        fprintf(stderr, "nccl-allreduce: the launches failed\n");
        goto out;
    }
    status = check_sums("one graph");
out:
    cucap_exec_destroy(exec);
    for (d = 1; d < ranks; d++)
        cucap_builder_destroy(forks[d]);
    cucap_builder_destroy(b);
    return status;
}

int main(int argc, char **argv)
{
    const char *shape = argc > 1 ? argv[1] : "both";
    int devices[MAX_DEVICES], count = 0, d, status = 0, version = 0;
    cucap_error *err = NULL;
    ncclResult_t nr;

    if (strcmp(shape, "both") && strcmp(shape, "threads") && strcmp(shape, "one-graph")) {
        fprintf(stderr, "usage: nccl-allreduce [threads|one-graph]\n");
        return 2;
    }
    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "nccl-allreduce: no usable CUDA driver: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 77;
    }
    set_current = (PFN_cuCtxSetCurrent_v4000)cucap_driver_entry_point("cuCtxSetCurrent");
    primary_retain = (PFN_cuDevicePrimaryCtxRetain_v7000)cucap_driver_entry_point("cuDevicePrimaryCtxRetain");
    primary_release = (PFN_cuDevicePrimaryCtxRelease_v11000)cucap_driver_entry_point("cuDevicePrimaryCtxRelease");
    device_count = (PFN_cuDeviceGetCount_v2000)cucap_driver_entry_point("cuDeviceGetCount");
    mem_alloc = (PFN_cuMemAlloc_v3020)cucap_driver_entry_point("cuMemAlloc");
    mem_free = (PFN_cuMemFree_v3020)cucap_driver_entry_point("cuMemFree");
    memset32_async = (PFN_cuMemsetD32Async_v3020)cucap_driver_entry_point("cuMemsetD32Async");
    copy_to_host = (PFN_cuMemcpyDtoHAsync_v3020)cucap_driver_entry_point("cuMemcpyDtoHAsync");
    stream_synchronize = (PFN_cuStreamSynchronize_v2000)cucap_driver_entry_point("cuStreamSynchronize");
    if (!set_current || !primary_retain || !primary_release || !device_count || !mem_alloc || !mem_free || !memset32_async || !copy_to_host ||
        !stream_synchronize) {
        fprintf(stderr, "nccl-allreduce: the driver lacks an entry point this program needs\n");
        return 1;
    }
    if (device_count(&count) != CUDA_SUCCESS || count < 1) {
        fprintf(stderr, "nccl-allreduce: no CUDA device\n");
        return 77;
    }
    ranks = count < MAX_DEVICES ? count : MAX_DEVICES;
    for (d = 0; d < ranks; d++)
        devices[d] = d;
    if ((nr = ncclCommInitAll(comms, ranks, devices)) != ncclSuccess)
        return nccl_fail("ncclCommInitAll", nr);
    ncclGetVersion(&version);
    /* the results live outside the graphs, in each device's primary context */
    for (d = 0; d < ranks && status == 0; d++)
        if (primary_retain(&contexts[d], d) != CUDA_SUCCESS || set_current(contexts[d]) != CUDA_SUCCESS ||
            mem_alloc(&results[d], COUNT * sizeof(float)) != CUDA_SUCCESS) {
            fprintf(stderr, "nccl-allreduce: allocating rank %d's results failed\n", d);
            status = 1;
        }
    if (status == 0 && strcmp(shape, "one-graph"))
        status = run_threads();
    if (status == 0 && strcmp(shape, "threads"))
        status = run_one_graph();
    for (d = 0; d < ranks; d++) {
        ncclCommDestroy(comms[d]);
        if (contexts[d]) {
            if (results[d] && set_current(contexts[d]) == CUDA_SUCCESS)
                mem_free(results[d]);
            primary_release(d);
        }
    }
    set_current(NULL);
    if (status == 0)
        printf("nccl-allreduce: NCCL %d, %d rank%s, %s: %d launches, sums %g: OK\n", version, ranks,
               ranks == 1 ? "" : "s", shape, LAUNCHES, (double)ranks * (ranks + 1) / 2);
    return status;
}
