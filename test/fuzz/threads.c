/* The thread harness of the API fuzzer: several threads run pseudo-random
 * sequences on builders of their own (begin in any mode, split, memsets,
 * join, end, complete, launch, teardown in any order) while all of them
 * share the process-wide device pool, allocating and freeing through it,
 * on the simulated driver.  Run under ThreadSanitizer by CI (configure
 * --enable-sanitizers=thread); a plain TAP program, since Criterion's runner
 * does not start under TSan.
 *     fuzz-threads [THREADS [ROUNDS [SEED]]] */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cucapture.h"
#include "driver.h"

#define D cucap_i_drv

static CUcontext ctx;
static int rounds;
static unsigned seed;

struct worker {
    unsigned rng;
    int failures;          /* invariant breaks */
    int built;             /* graphs that ran */
};

static unsigned rnd(struct worker *w)
{
    w->rng = w->rng * 1103515245u + 12345u;
    return w->rng >> 16;
}

static void *work(void *p)
{
    static const CUstreamCaptureMode modes[3] = { CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                  CU_STREAM_CAPTURE_MODE_RELAXED };
    struct worker *w = p;
    cucap_pool *pool;
    int r;

    D.cuCtxSetCurrent(ctx);
    for (r = 0; r < rounds; r++) {
        cucap_builder *b = NULL, *forks[3] = { NULL, NULL, NULL }, *all[4];
        cucap_exec *exec = NULL;
        CUdeviceptr d = 0;
        size_t n = 1 + rnd(w) % 3, i;
        /* global captures of other threads are legal company: only this
         * thread's own work may fail, and only with a capture error */
        CUstreamCaptureMode mode = modes[rnd(w) % 3];

        if (cucap_device_pool(0, &pool, NULL) != CUDA_SUCCESS || cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS) {
            w->failures++;   /* nothing here is refused by anyone's capture */
            continue;
        }
        if (cucap_builder_begin(b, mode, NULL) != CUDA_SUCCESS) {
            /* another thread's synchronize may kill a global capture at
             * once: begin then undoes itself */
            if (cucap_builder_get_state(b) != CUCAP_BUILDER_NOT_STARTED)
                w->failures++;
            cucap_builder_destroy(b);
            continue;
        }
        if (cucap_pool_alloc(pool, 256, cucap_builder_stream(b), &d, NULL) == CUDA_SUCCESS &&
            cucap_builder_split(b, n + 1, forks, NULL) == CUDA_SUCCESS) {
            all[0] = b;
            for (i = 0; i < n; i++)
                all[i + 1] = forks[i];
            for (i = 0; i <= n; i++)
                D.cuMemsetD8Async(d + i * 64, (unsigned char)i, 64, cucap_builder_stream(all[i]));
            if (rnd(w) % 8 == 0)
                D.cuStreamSynchronize(cucap_builder_stream(all[rnd(w) % (n + 1)]));   /* invalidate */
            cucap_builder_join(all, n + 1, NULL, NULL);
            cucap_pool_free(pool, d, cucap_builder_stream(b), NULL);
        }
        if (cucap_builder_end(b, NULL) == CUDA_SUCCESS &&
            cucap_builder_complete(b, NULL, &exec, NULL) == CUDA_SUCCESS &&
            cucap_exec_launch(exec, cucap_builder_stream(b), NULL) == CUDA_SUCCESS) {
            D.cuStreamSynchronize(cucap_builder_stream(b));
            w->built++;
        } else if (cucap_builder_get_state(b) == CUCAP_BUILDER_CAPTURING) {
            w->failures++;   /* end always settles the state */
        }
        cucap_exec_destroy(exec);
        /* teardown in an order of the round's choosing */
        if (rnd(w) % 2) {
            cucap_builder_destroy(b);
            b = NULL;
        }
        for (i = 0; i < 3; i++)
            cucap_builder_destroy(forks[i]);
        cucap_builder_destroy(b);
    }
    return NULL;
}

static void quiet(const cucap_error *w, void *data)
{
    (void)w;
    (void)data;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4, i, failures = 0, built = 0;
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    pthread_t t[16];
    struct worker w[16];

    rounds = argc > 2 ? atoi(argv[2]) : 200;
    seed = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    if (threads < 1 || threads > 16)
        threads = 4;
    printf("TAP version 13\n1..2\n");
    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0 || cucap_init(NULL) != CUDA_SUCCESS ||
        D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) cannot be used\n");
        return 1;
    }
    cucap_set_warning_handler(quiet, NULL);
    for (i = 0; i < threads; i++) {
        w[i].rng = seed * 7919u + (unsigned)i;
        w[i].failures = w[i].built = 0;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
        built += w[i].built;
    }
    printf("%s 1 - %d threads x %d rounds: every end settled its builder (%d invariant breaks)\n",
           failures ? "not ok" : "ok", threads, rounds, failures);
    printf("%s 2 - graphs were built and ran (%d)\n", built > 0 ? "ok" : "not ok", built);
    return 0;
}
