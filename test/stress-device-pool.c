/* 8 threads touch cucap_device_pool at once, on the simulated driver, while
 * a 9th thread holds a global capture; all must get the one object and the
 * capture must stay ACTIVE.  A plain TAP program rather than a Criterion
 * suite, so that it also runs under ThreadSanitizer (which Criterion's
 * runner does not start under). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"

#define THREADS 8
#define ROUNDS 50

static pthread_barrier_t start;
static cucap_pool *got[THREADS];
static CUresult rc[THREADS];

static void *touch(void *arg)
{
    long i = (long)arg;

    pthread_barrier_wait(&start);
    rc[i] = cucap_device_pool(0, &got[i], NULL);
    return NULL;
}

int main(void)
{
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    CUcontext ctx;
    CUstream s;
    CUgraph g = NULL;
    CUstreamCaptureStatus st;
    pthread_t threads[THREADS];
    int ok = 1, round;
    long i;

    printf("TAP version 13\n1..2\n");
    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0 || cucap_init(NULL) != CUDA_SUCCESS) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) cannot be loaded\n");
        return 1;
    }
    D.cuDevicePrimaryCtxRetain(&ctx, 0);
    D.cuCtxSetCurrent(ctx);
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (round = 0; round < ROUNDS; round++) {
        pthread_barrier_init(&start, NULL, THREADS);
        for (i = 0; i < THREADS; i++)
            pthread_create(&threads[i], NULL, touch, (void *)i);
        for (i = 0; i < THREADS; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&start);
        for (i = 0; i < THREADS; i++)
            if (rc[i] != CUDA_SUCCESS || !got[i] || got[i] != got[0])
                ok = 0;
    }
    printf("%s 1 - %d threads x %d rounds get one device pool object\n", ok ? "ok" : "not ok", THREADS, ROUNDS);
    D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL);
    printf("%s 2 - the global capture stays ACTIVE\n", st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "ok" : "not ok");
    D.cuStreamEndCapture(s, &g);
    if (g)
        D.cuGraphDestroy(g);
    D.cuStreamDestroy(s);
    return 0;
}
