/* cucapture bench: the library and hand-written driver code doing the same
 * work in one process, interleaved, many repetitions; prints the median of
 * each side and the ratio library / raw.  No timing is asserted anywhere. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/tool.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Run lib and raw alternately `reps` times (after `warm` unrecorded rounds
 * of each); each call returns its own elapsed microseconds per operation. */
static void row(const char *name, double (*lib)(void *), double (*raw)(void *), void *arg, int reps, int warm)
{
    double *l = malloc((size_t)reps * sizeof *l), *r = malloc((size_t)reps * sizeof *r), ml, mr;
    int i;

    for (i = 0; i < warm; i++) {
        lib(arg);
        raw(arg);
    }
    for (i = 0; i < reps; i++) {
        if (i % 2) {
            r[i] = raw(arg);
            l[i] = lib(arg);
        } else {
            l[i] = lib(arg);
            r[i] = raw(arg);
        }
    }
    ml = median(l, reps);
    mr = median(r, reps);
    printf("| %-52s | %12.3f | %12.3f | %6.3f |\n", name, ml, mr, ml / mr);
    fflush(stdout);
    free(l);
    free(r);
}

/* ---------------------------------------------------------------- the fork/join cycle */

#define MAX_K 64

struct cycle {
    int k;
    CUstream origin, forks[MAX_K];
    CUevent fork_event, join_events[MAX_K];
    CUdeviceptr d;
};

static double cycle_raw(void *p)
{
    struct cycle *c = p;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec exec = NULL;
    CUgraph g = NULL;
    double t0 = now_us();
    int i;

    D.cuStreamBeginCapture(c->origin, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuEventRecord(c->fork_event, c->origin);
    for (i = 1; i < c->k; i++)
        D.cuStreamWaitEvent(c->forks[i], c->fork_event, 0);
    D.cuMemsetD8Async(c->d, 0, 64, c->origin);
    for (i = 1; i < c->k; i++)
        D.cuMemsetD8Async(c->d + (CUdeviceptr)i * 64, (unsigned char)i, 64, c->forks[i]);
    for (i = 1; i < c->k; i++) {
        D.cuEventRecord(c->join_events[i], c->forks[i]);
        D.cuStreamWaitEvent(c->origin, c->join_events[i], 0);
    }
    D.cuStreamEndCapture(c->origin, &g);
    memset(&params, 0, sizeof params);
    D.cuGraphInstantiateWithParams(&exec, g, &params);
    D.cuGraphLaunch(exec, c->origin);
    D.cuStreamSynchronize(c->origin);
    D.cuGraphExecDestroy(exec);
    D.cuGraphDestroy(g);
    return now_us() - t0;
}

static double cycle_lib(void *p)
{
    struct cycle *c = p;
    cucap_builder *b = NULL, *all[MAX_K];
    cucap_exec *exec = NULL;
    double t0 = now_us();
    int i;

    cucap_builder_create_on_stream(c->origin, &b, NULL);
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    all[0] = b;
    cucap_builder_split(b, (size_t)c->k, all + 1, NULL);
    for (i = 0; i < c->k; i++)
        D.cuMemsetD8Async(c->d + (CUdeviceptr)i * 64, (unsigned char)i, 64, cucap_builder_stream(all[i]));
    cucap_builder_join(all, (size_t)c->k, NULL, NULL);
    cucap_builder_end(b, NULL);
    cucap_builder_complete(b, NULL, &exec, NULL);
    cucap_exec_launch(exec, c->origin, NULL);
    D.cuStreamSynchronize(c->origin);
    cucap_exec_destroy(exec);
    for (i = 0; i < c->k; i++)
        cucap_builder_destroy(all[i]);
    return now_us() - t0;
}

/* ---------------------------------------------------------------- capturing N memset nodes */

struct nodes {
    int n;
    CUstream s;
    CUdeviceptr d;
};

static double nodes_raw(void *p)
{
    struct nodes *x = p;
    CUgraph g = NULL;
    double t0 = now_us();
    int i;

    D.cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (i = 0; i < x->n; i++)
        D.cuMemsetD8Async(x->d, (unsigned char)i, 64, x->s);
    D.cuStreamEndCapture(x->s, &g);
    D.cuGraphDestroy(g);
    return now_us() - t0;
}

static double nodes_lib(void *p)
{
    struct nodes *x = p;
    cucap_builder *b = NULL;
    double t0 = now_us();
    int i;

    cucap_builder_create_on_stream(x->s, &b, NULL);
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    for (i = 0; i < x->n; i++)
        D.cuMemsetD8Async(x->d, (unsigned char)i, 64, cucap_builder_stream(b));
    cucap_builder_end(b, NULL);
    cucap_builder_destroy(b);
    return now_us() - t0;
}

/* ---------------------------------------------------------------- pools */

#define CALLS 1000

static double device_pool_lib(void *p)
{
    cucap_pool *pool;
    double t0 = now_us();
    int i;

    (void)p;
    for (i = 0; i < CALLS; i++)
        cucap_device_pool(0, &pool, NULL);
    return (now_us() - t0) / CALLS;
}

static double device_pool_raw(void *p)
{
    CUmemoryPool pool;
    double t0 = now_us();
    int i;

    (void)p;
    for (i = 0; i < CALLS; i++)
        D.cuDeviceGetMemPool(&pool, 0);
    return (now_us() - t0) / CALLS;
}

static double open_default_lib(void *p)
{
    cucap_pool *pool = NULL;
    double t0 = now_us();
    int i;

    (void)p;
    for (i = 0; i < CALLS; i++) {
        cucap_pool_open_default(0, &pool, NULL);
        cucap_pool_close(pool, NULL);
    }
    return (now_us() - t0) / CALLS;
}

/* the least raw code that does the same legally under capture: look the
 * pool up and read (and if 0, raise) its threshold in relaxed mode */
static double open_default_raw(void *p)
{
    CUmemoryPool pool;
    cuuint64_t threshold;
    double t0 = now_us();
    int i;

    (void)p;
    for (i = 0; i < CALLS; i++) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        D.cuDeviceGetMemPool(&pool, 0);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        if (threshold == 0) {
            threshold = UINT64_MAX;
            D.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        }
        D.cuThreadExchangeStreamCaptureMode(&mode);
    }
    return (now_us() - t0) / CALLS;
}

struct alloc {
    CUstream s;
    cucap_pool *pool;
};

static double alloc_lib(void *p)
{
    struct alloc *a = p;
    CUdeviceptr d;
    double t0 = now_us();
    int i;

    for (i = 0; i < CALLS; i++) {
        cucap_pool_alloc(a->pool, 4096, a->s, &d, NULL);
        cucap_pool_free(a->pool, d, a->s, NULL);
    }
    return (now_us() - t0) / CALLS;
}

static double alloc_raw(void *p)
{
    struct alloc *a = p;
    CUdeviceptr d;
    double t0 = now_us();
    int i;

    for (i = 0; i < CALLS; i++) {
        D.cuMemAllocFromPoolAsync(&d, 4096, cucap_pool_handle(a->pool), a->s);
        D.cuMemFreeAsync(d, a->s);
    }
    return (now_us() - t0) / CALLS;
}

int tool_bench(int argc, char **argv)
{
    static const int ks[] = { 2, 8, 64 }, ns[] = { 10, 1000, 10000 };
    int quick = argc > 1 && !strcmp(argv[1], "--quick"), reps = quick ? 5 : 201, i;
    struct cycle c;
    struct nodes x;
    struct alloc a;
    CUcontext ctx;
    CUstream capture;
    CUgraph g = NULL;

    if (argc > 1 && !quick) {
        fprintf(stderr, "cucapture bench: unknown option '%s' (only --quick)\n", argv[1]);
        return 2;
    }
    if (tool_open_device("bench", &ctx) != 0)
        return TOOL_CANNOT_RUN;
    printf("libcucapture %s, driver %d, %d repetitions per row, medians in microseconds\n\n",
           cucap_version_string(), cucap_driver_version(), reps);
    printf("| %-52s | %12s | %12s | %6s |\n", "work", "library", "raw driver", "ratio");
    printf("|%s|%s|%s|%s|\n", "------------------------------------------------------", "--------------",
           "--------------", "--------");

    memset(&c, 0, sizeof c);
    D.cuStreamCreate(&c.origin, CU_STREAM_NON_BLOCKING);
    for (i = 1; i < MAX_K; i++) {
        D.cuStreamCreate(&c.forks[i], CU_STREAM_NON_BLOCKING);
        D.cuEventCreate(&c.join_events[i], CU_EVENT_DISABLE_TIMING);
    }
    D.cuEventCreate(&c.fork_event, CU_EVENT_DISABLE_TIMING);
    D.cuMemAlloc(&c.d, MAX_K * 64);
    for (i = 0; i < 3; i++) {
        char name[80];
        c.k = ks[i];
        snprintf(name, sizeof name, "fork/join cycle, K=%d, per cycle", ks[i]);
        row(name, cycle_lib, cycle_raw, &c, reps, quick ? 1 : 10);
    }

    x.s = c.origin;
    x.d = c.d;
    for (i = 0; i < 3; i++) {
        char name[80];
        x.n = ns[i];
        snprintf(name, sizeof name, "capture of %d memset nodes, per capture", ns[i]);
        row(name, nodes_lib, nodes_raw, &x, ns[i] >= 10000 ? (quick ? 3 : 41) : reps, quick ? 1 : 5);
    }

    /* under a global capture of this thread */
    D.cuStreamCreate(&capture, CU_STREAM_NON_BLOCKING);
    D.cuStreamBeginCapture(capture, CU_STREAM_CAPTURE_MODE_GLOBAL);
    {
        cucap_pool *first;
        cucap_device_pool(0, &first, NULL);   /* the first touch, not timed */
    }
    row("cucap_device_pool after first touch, global capture", device_pool_lib, device_pool_raw, NULL, reps, 2);
    row("cucap_pool_open_default + close, global capture", open_default_lib, open_default_raw, NULL, reps, 2);
    D.cuStreamEndCapture(capture, &g);
    if (g)
        D.cuGraphDestroy(g);
    D.cuStreamDestroy(capture);

    a.s = c.origin;
    cucap_device_pool(0, &a.pool, NULL);
    row("pool alloc + free (4 KiB), stream-ordered, per pair", alloc_lib, alloc_raw, &a, reps, 2);
    D.cuStreamSynchronize(c.origin);

    for (i = 1; i < MAX_K; i++) {
        D.cuStreamDestroy(c.forks[i]);
        D.cuEventDestroy(c.join_events[i]);
    }
    D.cuEventDestroy(c.fork_event);
    D.cuStreamDestroy(c.origin);
    D.cuMemFree(c.d);
    tool_close_device(ctx);
    return 0;
}
