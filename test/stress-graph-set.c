/* 8 threads run one graph set at once on the simulated driver, under a
 * budget of 3 graphs for 6 keys with one graph kept for updates, and
 * warm it up beside the runs: every run succeeds and writes its own
 * values, and the set never holds more graphs than its budget.  A plain
 * TAP program rather than a Criterion suite, so that it also runs under
 * ThreadSanitizer (which Criterion's runner does not start under). */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucapture.h"
#include "cucapture/graph-set.h"
#include "driver.h"
#include "test-driver.h"

#define THREADS 8
#define RUNS 300
#define KEYS 6

struct values {
    uint64_t thread, run;
};

static cucap_graph_set *set;
static CUcontext ctx;
static CUdeviceptr slots;            /* a slot of struct values per thread */
static pthread_barrier_t start;

struct worker {
    long index;
    char failure[256];
};

/* The step: the run's values from the block into the thread's slot. */
static CUresult step(cucap_builder *b, void *user_data, cucap_error **err)
{
    long thread = (long)(intptr_t)user_data;
    CUdeviceptr block = 0;
    CUresult rc;

    if ((rc = cucap_builder_params(b, sizeof(struct values), &block, err)) != CUDA_SUCCESS)
        return rc;
    return D.cuMemcpyDtoDAsync(slots + (CUdeviceptr)thread * sizeof(struct values), block, sizeof(struct values),
                               cucap_builder_stream(b));
}

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned seed = 7u + (unsigned)w->index;
    cucap_graph_set_stats stats;
    cucap_error *err = NULL;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUstream s = NULL;
    struct values v, got;
    uint64_t key, keys[KEYS];
    const void *key_ptrs[KEYS];
    size_t key_sizes[KEYS];
    void *users[KEYS];
    int i;

    D.cuCtxSetCurrent(ctx);
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    for (i = 0; i < KEYS; i++) {
        keys[i] = (uint64_t)w->index * 100 + (uint64_t)i;   /* each thread's keys: its slot is in the graph */
        key_ptrs[i] = &keys[i];
        key_sizes[i] = sizeof keys[i];
        users[i] = (void *)(intptr_t)w->index;
    }
    pthread_barrier_wait(&start);
    if (w->index % 2 && cucap_graph_set_warm(set, key_ptrs, key_sizes, KEYS / 2, step, users, &err) != CUDA_SUCCESS)
        snprintf(w->failure, sizeof w->failure, "warm-up: %s", cucap_error_message(err));
    for (i = 0; i < RUNS && !w->failure[0]; i++) {
        key = keys[rand_r(&seed) % KEYS];
        v.thread = (uint64_t)w->index;
        v.run = (uint64_t)i;
        if (cucap_graph_set_run(set, &key, sizeof key, step, (void *)(intptr_t)w->index, &v, sizeof v, s, NULL,
                                &err) != CUDA_SUCCESS) {
            snprintf(w->failure, sizeof w->failure, "run %d: %s", i, cucap_error_message(err));
            break;
        }
        D.cuThreadExchangeStreamCaptureMode(&mode);
        memset(&got, 0, sizeof got);
        if (D.cuStreamSynchronize(s) != CUDA_SUCCESS ||
            D.cuMemcpyDtoH(&got, slots + (CUdeviceptr)w->index * sizeof got, sizeof got) != CUDA_SUCCESS ||
            got.thread != v.thread || got.run != v.run)
            snprintf(w->failure, sizeof w->failure, "run %d: the slot holds %llu/%llu", i,
                     (unsigned long long)got.thread, (unsigned long long)got.run);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        cucap_graph_set_get_stats(set, &stats);
        if (stats.graphs > stats.budget_graphs)
            snprintf(w->failure, sizeof w->failure, "run %d: %zu graphs, over the budget of %zu", i, stats.graphs,
                     stats.budget_graphs);
    }
    cucap_error_free(err);
    D.cuStreamDestroy(s);
    return NULL;
}

int main(void)
{
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    cucap_graph_set_options opts;
    cucap_graph_set_stats stats;
    struct worker w[THREADS];
    pthread_t threads[THREADS];
    int ok = 1;
    long i;

    printf("TAP version 13\n1..2\n");
    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0 || cucap_init(NULL) != CUDA_SUCCESS) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) cannot be loaded\n");
        return 1;
    }
    D.cuDevicePrimaryCtxRetain(&ctx, 0);
    D.cuCtxSetCurrent(ctx);
    D.cuMemAlloc(&slots, THREADS * sizeof(struct values));
    memset(&opts, 0, sizeof opts);
    opts.budget_bytes = (size_t)1 << 30;
    opts.budget_graphs = 3;
    opts.kept_for_update = 1;
    opts.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    if (cucap_graph_set_create(0, &opts, &set, NULL) != CUDA_SUCCESS) {
        printf("Bail out! no graph set\n");
        return 1;
    }
    pthread_barrier_init(&start, NULL, THREADS);
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].index = i;
        pthread_create(&threads[i], NULL, work, &w[i]);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    for (i = 0; i < THREADS; i++)
        if (w[i].failure[0]) {
            printf("# thread %ld: %s\n", i, w[i].failure);
            ok = 0;
        }
    printf("%s 1 - %d threads ran one set %d times each, every run writing its own values\n", ok ? "ok" : "not ok",
           THREADS, RUNS);
    cucap_graph_set_get_stats(set, &stats);
    printf("%s 2 - %llu runs counted, %zu graphs held of a budget of 3 (%llu instantiations, %llu updates, %llu "
           "retirements, %llu eager runs)\n", stats.runs == (unsigned long long)THREADS * RUNS && stats.graphs <= 3 ?
           "ok" : "not ok", stats.runs, stats.graphs, stats.instantiations, stats.updates, stats.retirements,
           stats.eager_runs);
    cucap_graph_set_destroy(set);
    D.cuMemFree(slots);
    D.cuDevicePrimaryCtxRelease(0);
    return 0;
}
