/* Builders of one capture used from many threads at once: each thread
 * owns a fork of one capture and loops a split of it, a memset through
 * cucap_builder_enqueue on the new fork, a pool allocation and free on
 * it, and a join, LOOPS times.  Prints microseconds per loop (wall time
 * over every thread's loops) for 1 to 256 threads, median of ROUNDS
 * rounds [lowest, highest], after one untimed round of 4 threads.  Run on
 * a GPU: bench/contention [rounds [most threads]] (3 rounds, up to 256
 * threads by default). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#define LOOPS 200

static PFN_cuMemsetD8Async_v3020 memset_async;
static CUdeviceptr target;
static cucap_pool *pool;
static pthread_barrier_t start;

struct thread {
    cucap_builder *fork;
    CUresult rc;
};

static CUresult fill(CUstream s, void *unused)
{
    (void)unused;
    return memset_async(target, 1, 64, s);
}

static void *loop(void *p)
{
    struct thread *t = p;
    cucap_builder *pair[2];
    CUdeviceptr scratch;
    int i;

    pthread_barrier_wait(&start);
    for (i = 0; i < LOOPS && t->rc == CUDA_SUCCESS; i++) {
        pair[0] = t->fork;
        if ((t->rc = cucap_builder_split(t->fork, 2, &pair[1], NULL)) != CUDA_SUCCESS ||
            (t->rc = cucap_builder_enqueue(pair[1], fill, NULL, NULL)) != CUDA_SUCCESS ||
            (t->rc = cucap_pool_alloc(pool, 256, cucap_builder_stream(pair[1]), &scratch, NULL)) != CUDA_SUCCESS ||
            (t->rc = cucap_pool_free(pool, scratch, cucap_builder_stream(pair[1]), NULL)) != CUDA_SUCCESS ||
            (t->rc = cucap_builder_join(pair, 2, NULL, NULL)) != CUDA_SUCCESS)
            break;
        cucap_builder_destroy(pair[1]);
    }
    return NULL;
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One round at n threads: microseconds per loop, or a negative value on failure. */
static double round_at(int n)
{
    cucap_builder *b = NULL, **all = calloc((size_t)n + 1, sizeof *all);
    struct thread *t = calloc((size_t)n, sizeof *t);
    pthread_t *ids = calloc((size_t)n, sizeof *ids);
    cucap_error *err = NULL;
    double began, us = -1;
    int i, ok = 1;

    if (!all || !t || !ids || cucap_builder_create(0, &b, &err) != CUDA_SUCCESS ||
        cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, &err) != CUDA_SUCCESS)
        goto out;
    all[0] = b;
    if (n == 1)
        t[0].fork = b;
    else if (cucap_builder_split(b, (size_t)n, all + 1, &err) != CUDA_SUCCESS)
        goto out;
    for (i = 1; i < n; i++)
        t[i - 1].fork = all[i];
    if (n > 1)
        t[n - 1].fork = b;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (i = 0; i < n; i++)
        pthread_create(&ids[i], NULL, loop, &t[i]);
    pthread_barrier_wait(&start);
    began = now_us();
    for (i = 0; i < n; i++)
        pthread_join(ids[i], NULL);
    us = (now_us() - began) / ((double)n * LOOPS);
    pthread_barrier_destroy(&start);
    for (i = 0; i < n; i++)
        if (t[i].rc != CUDA_SUCCESS) {
            fprintf(stderr, "contention: a thread failed: %s\n", cucap_result_name(t[i].rc));
            ok = 0;
        }
    if (n > 1 && cucap_builder_join(all, (size_t)n, NULL, &err) != CUDA_SUCCESS)
        ok = 0;
    if (ok && cucap_builder_end(b, &err) != CUDA_SUCCESS)
        ok = 0;
    if (!ok)
        us = -1;
out:
    if (err)
        fprintf(stderr, "contention: %s\n", cucap_error_message(err));
    cucap_error_free(err);
    for (i = 1; all && i < n; i++)
        cucap_builder_destroy(all[i]);
    cucap_builder_destroy(b);
    free(all);
    free(t);
    free(ids);
    return us;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const int counts[] = { 1, 4, 16, 64, 256 };
    int rounds = argc > 1 ? atoi(argv[1]) : 3, most = argc > 2 ? atoi(argv[2]) : 256, c, r;
    PFN_cuMemAlloc_v3020 mem_alloc;
    PFN_cuCtxSetCurrent_v4000 set_current;
    CUcontext ctx;
    cucap_builder *probe = NULL;
    cucap_error *err = NULL;
    double *us;

    if (rounds < 1 || rounds > 100 || !(us = calloc((size_t)rounds, sizeof *us)))
        return 2;
    if (cucap_init(&err) != CUDA_SUCCESS || cucap_device_pool(0, &pool, &err) != CUDA_SUCCESS ||
        cucap_builder_create(0, &probe, &err) != CUDA_SUCCESS) {
        fprintf(stderr, "contention: %s\n", cucap_error_message(err));
        return 1;
    }
    memset_async = (PFN_cuMemsetD8Async_v3020)cucap_driver_entry_point("cuMemsetD8Async");
    mem_alloc = (PFN_cuMemAlloc_v3020)cucap_driver_entry_point("cuMemAlloc");
    set_current = (PFN_cuCtxSetCurrent_v4000)cucap_driver_entry_point("cuCtxSetCurrent");
    ctx = cucap_builder_context(probe);
    if (!memset_async || !mem_alloc || !set_current || set_current(ctx) != CUDA_SUCCESS ||
        mem_alloc(&target, 64) != CUDA_SUCCESS) {
        fprintf(stderr, "contention: the driver's entry points or memory are not available\n");
        return 1;
    }
    /* untimed: the process's first captures, pool allocations and
     * streams would otherwise be charged to the first count's rounds */
    if (round_at(4) < 0)
        return 1;
    printf("threads  us per loop (median [lowest, highest] of %d rounds, %d loops a thread, after one untimed "
           "round)\n", rounds, LOOPS);
    for (c = 0; c < (int)(sizeof counts / sizeof counts[0]) && counts[c] <= most; c++) {
        for (r = 0; r < rounds; r++)
            if ((us[r] = round_at(counts[c])) < 0)
                return 1;
        qsort(us, (size_t)rounds, sizeof *us, by_value);
        printf("%7d  %.1f [%.1f, %.1f]\n", counts[c], us[rounds / 2], us[0], us[rounds - 1]);
    }
    cucap_builder_destroy(probe);
    free(us);
    cucap_release_cached();
    return 0;
}
