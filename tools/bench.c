/* cucapture bench: the library and hand-written driver code doing the same
 * work in one process, interleaved, many repetitions; prints the median of
 * each side and the ratio library / raw.  No timing is asserted anywhere. */
#include "config.h"

#include <stdatomic.h>
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

static double quantile(const double *sorted, int n, double q)
{
    double at = q * (n - 1);
    int i = (int)at;

    return i + 1 < n ? sorted[i] + (at - i) * (sorted[i + 1] - sorted[i]) : sorted[n - 1];
}

/* Run lib and raw alternately `reps` times (after `warm` unrecorded rounds
 * of each); each call returns its own elapsed microseconds per operation.
 * Prints the medians, the median of the paired ratios library / raw, and
 * the median of the paired differences library - raw with its 10th and
 * 90th percentiles: the spread that says whether a ratio near 1 is a
 * difference at all.  The ratio is taken pair by pair because the two
 * calls of a pair run back to back: a host whose speed changes between
 * pairs (the H200 hosts have two speeds, 1.5 times apart, and change
 * between them within a row) moves both, and the ratio of the two medians
 * then falls wherever each median's side happened to change. */
static void row(const char *name, double (*lib)(void *), double (*raw)(void *), void *arg, int reps, int warm)
{
    double *l = malloc((size_t)reps * sizeof *l), *r = malloc((size_t)reps * sizeof *r),
           *d = malloc((size_t)reps * sizeof *d), *ratio = malloc((size_t)reps * sizeof *ratio), ml, mr;
    int i, ratios = 0;

    if (!l || !r || !d || !ratio) {
        printf("| %-52s | out of memory |\n", name);
        goto out;
    }
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
        d[i] = l[i] - r[i];
        if (r[i] > 0)
            ratio[ratios++] = l[i] / r[i];
    }
    ml = median(l, reps);
    mr = median(r, reps);
    qsort(d, (size_t)reps, sizeof *d, compare);
    printf("| %-52s | %12.3f | %12.3f | %6.3f | %9.3f [%9.3f, %9.3f] |\n", name, ml, mr,
           ratios ? median(ratio, ratios) : ml / mr, quantile(d, reps, 0.5), quantile(d, reps, 0.1),
           quantile(d, reps, 0.9));
    fflush(stdout);
out:
    free(l);
    free(r);
    free(d);
    free(ratio);
}

/* Node and edge counts of a graph; -1 when it cannot be read. */
static int graph_shape(CUgraph g, size_t *nodes, size_t *edges)
{
    *nodes = *edges = 0;
    if (!g || D.cuGraphGetNodes(g, NULL, nodes) != CUDA_SUCCESS ||
        D.cuGraphGetEdges(g, NULL, NULL, NULL, edges) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* Before a row is timed: the library's graph and the raw code's must have
 * the same shape (a split that failed must not look fast). */
static int same_shape(const char *name, CUgraph lib, CUgraph raw)
{
    size_t ln, le, rn, re;

    if (graph_shape(lib, &ln, &le) != 0 || graph_shape(raw, &rn, &re) != 0) {
        printf("| %-52s | not timed: a graph could not be built or read |\n", name);
        return 0;
    }
    if (ln != rn || le != re) {
        printf("| %-52s | not timed: the library's graph has %zu nodes and %zu edges, the raw code's %zu and %zu |\n",
               name, ln, le, rn, re);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- the fork/join cycle */

#define MAX_K 64

struct cycle {
    int k;
    CUstream origin, forks[MAX_K];
    CUevent fork_event, join_events[MAX_K];
    CUdeviceptr d;
};

/* The raw side's instantiate, launch, wait and teardown of a captured graph. */
static void run_raw_graph(CUgraph g, CUstream s)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec exec = NULL;

    memset(&params, 0, sizeof params);
    D.cuGraphInstantiateWithParams(&exec, g, &params);
    D.cuGraphLaunch(exec, s);
    D.cuStreamSynchronize(s);
    D.cuGraphExecDestroy(exec);
    D.cuGraphDestroy(g);
}

/* The fork/join capture a careful programmer writes: streams and events
 * made once beforehand, an event fork and an event join. */
static CUgraph capture_raw(struct cycle *c)
{
    CUgraph g = NULL;
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
    return g;
}

/* The same capture through the library; returns the ended builder, and
 * its forks (closed by the join) through all[1 .. k-1]. */
static cucap_builder *capture_lib(struct cycle *c, cucap_builder **all)
{
    cucap_builder *b = NULL;
    int i;

    cucap_builder_create_on_stream(c->origin, &b, NULL);
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    all[0] = b;
    for (i = 1; i < c->k; i++)
        all[i] = NULL;
    cucap_builder_split(b, (size_t)c->k, all + 1, NULL);
    for (i = 0; i < c->k; i++)
        D.cuMemsetD8Async(c->d + (CUdeviceptr)i * 64, (unsigned char)i, 64, cucap_builder_stream(all[i]));
    cucap_builder_join(all, (size_t)c->k, NULL, NULL);
    cucap_builder_end(b, NULL);
    return b;
}

static void destroy_all(cucap_builder **all, int k)
{
    int i;

    for (i = 0; i < k; i++)
        cucap_builder_destroy(all[i]);
}

static double cycle_raw(void *p)
{
    struct cycle *c = p;
    double t0 = now_us();

    run_raw_graph(capture_raw(c), c->origin);
    return now_us() - t0;
}

/* The library side's complete, launch, wait and teardown of an ended
 * builder b = all[0] and its k - 1 joined forks. */
static void run_lib_graph(cucap_builder **all, int k, CUstream s)
{
    cucap_exec *exec = NULL;

    cucap_builder_complete(all[0], NULL, &exec, NULL);
    cucap_exec_launch(exec, s, NULL);
    D.cuStreamSynchronize(s);
    cucap_exec_destroy(exec);
    destroy_all(all, k);
}

static double cycle_lib(void *p)
{
    struct cycle *c = p;
    cucap_builder *all[MAX_K];
    double t0 = now_us();

    capture_lib(c, all);
    run_lib_graph(all, c->k, c->origin);
    return now_us() - t0;
}

/* the capture phase alone: begin .. end and the graph's destruction */
static double phase_raw(void *p)
{
    double t0 = now_us();

    D.cuGraphDestroy(capture_raw(p));
    return now_us() - t0;
}

static double phase_lib(void *p)
{
    struct cycle *c = p;
    cucap_builder *all[MAX_K];
    double t0 = now_us();

    capture_lib(c, all);
    destroy_all(all, c->k);
    return now_us() - t0;
}

static int cycle_shapes_match(const char *name, struct cycle *c)
{
    cucap_builder *all[MAX_K];
    cucap_graph *lib = NULL;
    CUgraph raw = capture_raw(c);
    int same;

    cucap_builder_graph(capture_lib(c, all), &lib, NULL);
    same = same_shape(name, lib ? cucap_graph_handle(lib) : NULL, raw);
    cucap_graph_unref(lib);
    destroy_all(all, c->k);
    if (raw)
        D.cuGraphDestroy(raw);
    return same;
}

/* A row for each K, named "<what>, K=<k>, <per>"; returns how many rows
 * were not timed because the graphs' shapes differ. */
static int cycle_rows(struct cycle *c, const char *what, const char *per, double (*lib)(void *),
                      double (*raw)(void *), int reps, int warm)
{
    static const int ks[] = { 2, 8, 64 };
    int i, mismatched = 0;

    for (i = 0; i < 3; i++) {
        char name[80];
        c->k = ks[i];
        snprintf(name, sizeof name, "%s, K=%d, %s", what, ks[i], per);
        if (cycle_shapes_match(name, c))
            row(name, lib, raw, c, reps, warm);
        else
            mismatched++;
    }
    return mismatched;
}

/* ---------------------------------------------------------------- across two devices */

static CUcontext ctx_of_bench;   /* device 0's, current while the bench runs */

struct across {
    CUstream origin, other;          /* device 0's, device 1's */
    CUevent fork_event, join_event;  /* of the context of the stream that records each */
    CUdeviceptr d0, d1;
};

static CUgraph across_capture_raw(struct across *x)
{
    CUgraph g = NULL;

    D.cuStreamBeginCapture(x->origin, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuEventRecord(x->fork_event, x->origin);
    D.cuStreamWaitEvent(x->other, x->fork_event, 0);
    D.cuMemsetD8Async(x->d0, 1, 64, x->origin);
    D.cuMemsetD8Async(x->d1, 2, 64, x->other);
    D.cuEventRecord(x->join_event, x->other);
    D.cuStreamWaitEvent(x->origin, x->join_event, 0);
    D.cuStreamEndCapture(x->origin, &g);
    return g;
}

static cucap_builder *across_capture_lib(struct across *x, cucap_builder **all)
{
    cucap_builder *b = NULL;

    cucap_builder_create_on_stream(x->origin, &b, NULL);
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    all[0] = b;
    all[1] = NULL;
    cucap_builder_split_on(b, 1, 2, all + 1, NULL);
    D.cuMemsetD8Async(x->d0, 1, 64, cucap_builder_stream(b));
    D.cuMemsetD8Async(x->d1, 2, 64, cucap_builder_stream(all[1]));
    cucap_builder_join(all, 2, NULL, NULL);
    cucap_builder_end(b, NULL);
    return b;
}

static double across_raw(void *p)
{
    struct across *x = p;
    double t0 = now_us();

    run_raw_graph(across_capture_raw(x), x->origin);
    return now_us() - t0;
}

static double across_lib(void *p)
{
    struct across *x = p;
    cucap_builder *all[2];
    double t0 = now_us();

    across_capture_lib(x, all);
    run_lib_graph(all, 2, x->origin);
    return now_us() - t0;
}

/* The two-device row, where there are two devices. */
static int across_row(CUstream origin, CUdeviceptr d0, int reps, int quick)
{
    static const char name[] = "fork/join cycle across two devices, per cycle";
    struct across x;
    cucap_builder *all[2];
    cucap_graph *lib = NULL;
    CUcontext other;
    CUgraph raw;
    int n = 0, same;

    if (D.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 2) {
        printf("| %-52s | not run: one device here |\n", name);
        return 1;
    }
    memset(&x, 0, sizeof x);
    x.origin = origin;
    x.d0 = d0;
    D.cuEventCreate(&x.fork_event, CU_EVENT_DISABLE_TIMING);
    if (D.cuDevicePrimaryCtxRetain(&other, 1) != CUDA_SUCCESS) {
        printf("| %-52s | not run: device 1's context cannot be retained |\n", name);
        D.cuEventDestroy(x.fork_event);
        return 0;
    }
    D.cuCtxSetCurrent(other);
    D.cuStreamCreate(&x.other, CU_STREAM_NON_BLOCKING);
    D.cuEventCreate(&x.join_event, CU_EVENT_DISABLE_TIMING);
    D.cuMemAlloc(&x.d1, 64);
    D.cuCtxSetCurrent(ctx_of_bench);
    raw = across_capture_raw(&x);
    cucap_builder_graph(across_capture_lib(&x, all), &lib, NULL);
    same = same_shape(name, lib ? cucap_graph_handle(lib) : NULL, raw);
    cucap_graph_unref(lib);
    destroy_all(all, 2);
    if (raw)
        D.cuGraphDestroy(raw);
    if (same)
        row(name, across_lib, across_raw, &x, reps, quick ? 1 : 10);
    D.cuStreamDestroy(x.other);
    D.cuEventDestroy(x.join_event);
    D.cuEventDestroy(x.fork_event);
    D.cuMemFree(x.d1);
    D.cuDevicePrimaryCtxRelease(1);
    return same;
}

/* ---------------------------------------------------------------- capturing N memset nodes */

struct nodes {
    int n;
    CUstream s;
    CUdeviceptr d;
};

static CUgraph nodes_capture_raw(struct nodes *x)
{
    CUgraph g = NULL;
    int i;

    D.cuStreamBeginCapture(x->s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (i = 0; i < x->n; i++)
        D.cuMemsetD8Async(x->d, (unsigned char)i, 64, x->s);
    D.cuStreamEndCapture(x->s, &g);
    return g;
}

static cucap_builder *nodes_capture_lib(struct nodes *x)
{
    cucap_builder *b = NULL;
    int i;

    cucap_builder_create_on_stream(x->s, &b, NULL);
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    for (i = 0; i < x->n; i++)
        D.cuMemsetD8Async(x->d, (unsigned char)i, 64, cucap_builder_stream(b));
    cucap_builder_end(b, NULL);
    return b;
}

static double nodes_raw(void *p)
{
    double t0 = now_us();

    D.cuGraphDestroy(nodes_capture_raw(p));
    return now_us() - t0;
}

static double nodes_lib(void *p)
{
    double t0 = now_us();

    cucap_builder_destroy(nodes_capture_lib(p));
    return now_us() - t0;
}

static int nodes_shapes_match(const char *name, struct nodes *x)
{
    cucap_builder *b;
    cucap_graph *lib = NULL;
    CUgraph raw = nodes_capture_raw(x);
    int same;

    b = nodes_capture_lib(x);
    cucap_builder_graph(b, &lib, NULL);
    same = same_shape(name, lib ? cucap_graph_handle(lib) : NULL, raw);
    cucap_graph_unref(lib);
    cucap_builder_destroy(b);
    if (raw)
        D.cuGraphDestroy(raw);
    return same;
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

/* the raw code caches its pool handle too, as a careful programmer does */
static _Atomic(CUmemoryPool) cached_pool;

static double device_pool_raw(void *p)
{
    CUmemoryPool pool;
    double t0 = now_us();
    int i;

    (void)p;
    for (i = 0; i < CALLS; i++)
        if (!(pool = atomic_load_explicit(&cached_pool, memory_order_acquire)) &&
            D.cuDeviceGetMemPool(&pool, 0) == CUDA_SUCCESS)
            atomic_store_explicit(&cached_pool, pool, memory_order_release);
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
    double t0;
    int i;

    D.cuStreamSynchronize(a->s);   /* each sample starts from an idle stream */
    t0 = now_us();
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
    double t0;
    int i;

    D.cuStreamSynchronize(a->s);   /* each sample starts from an idle stream */
    t0 = now_us();
    for (i = 0; i < CALLS; i++) {
        D.cuMemAllocFromPoolAsync(&d, 4096, cucap_pool_handle(a->pool), a->s);
        D.cuMemFreeAsync(d, a->s);
    }
    return (now_us() - t0) / CALLS;
}

/* The same in relaxed thread mode around each call, as the library makes
 * them: in the default global mode an allocation or a free outside a
 * capture invalidates every other thread's global capture
 * (doc/driver-facts.md), which the library never does. */
static double alloc_raw_relaxed(void *p)
{
    struct alloc *a = p;
    CUdeviceptr d;
    double t0;
    int i;

    D.cuStreamSynchronize(a->s);
    t0 = now_us();
    for (i = 0; i < CALLS; i++) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuMemAllocFromPoolAsync(&d, 4096, cucap_pool_handle(a->pool), a->s);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuMemFreeAsync(d, a->s);
        D.cuThreadExchangeStreamCaptureMode(&mode);
    }
    return (now_us() - t0) / CALLS;
}

/* ---------------------------------------------------------------- a replayed graph launched with new values */

/* The same graph, a copy out of a block its launches fill, made twice:
 * through the library, whose block cucap_exec_launch_params fills, and by
 * hand, whose block the program fills with cuMemcpyHtoDAsync before
 * cuGraphLaunch.  16 bytes go from the program's pageable memory, as the
 * driver takes them at the call; 256 KiB the hand-written side copies
 * through pinned buffers of its own, each reused once an event behind its
 * last copy is reached, as it must to change the values at once without
 * waiting for the stream.  One stream.  A third row gives the 16 bytes'
 * hand-written side an event recorded behind each launch, as a program
 * must that may launch the graph from another stream next (and as
 * cucap_exec_launch_params does): the difference the library's ordering
 * of a block's launches across streams costs, apart. */
#define PARAMS_LAUNCHES 200
#define PARAMS_PINNED 8   /* the hand-written side's pinned buffers, taken in turn */

struct params_launch {
    CUstream s;
    size_t size;
    uint64_t *values;                /* the program's, pageable */
    cucap_exec *lib;
    CUgraphExec raw;
    CUdeviceptr raw_block;
    void *pinned[PARAMS_PINNED];     /* the hand-written side's, above 64 KiB */
    CUevent copied[PARAMS_PINNED];
    CUevent behind;                  /* recorded behind each hand-written launch, or NULL */
};

static double params_lib(void *p)
{
    struct params_launch *x = p;
    double t0;
    int i;

    D.cuStreamSynchronize(x->s);
    t0 = now_us();
    for (i = 0; i < PARAMS_LAUNCHES; i++) {
        x->values[0] = (uint64_t)i;
        cucap_exec_launch_params(x->lib, x->values, x->size, x->s, NULL);
    }
    return (now_us() - t0) / PARAMS_LAUNCHES;
}

static double params_raw(void *p)
{
    struct params_launch *x = p;
    double t0;
    int i, k;

    D.cuStreamSynchronize(x->s);
    t0 = now_us();
    for (i = 0; i < PARAMS_LAUNCHES; i++) {
        x->values[0] = (uint64_t)i;
        if (!x->pinned[0]) {
            D.cuMemcpyHtoDAsync(x->raw_block, x->values, x->size, x->s);
        } else {
            k = i % PARAMS_PINNED;
            D.cuEventSynchronize(x->copied[k]);
            memcpy(x->pinned[k], x->values, x->size);
            D.cuMemcpyHtoDAsync(x->raw_block, x->pinned[k], x->size, x->s);
            D.cuEventRecord(x->copied[k], x->s);
        }
        D.cuGraphLaunch(x->raw, x->s);
        if (x->behind)
            D.cuEventRecord(x->behind, x->s);
    }
    return (now_us() - t0) / PARAMS_LAUNCHES;
}

/* 0 when the graphs could not be made (the row says so).  out holds size
 * bytes. */
static int params_row(CUstream s, CUdeviceptr out, size_t size, int with_event, int reps, int warm)
{
    struct params_launch x = { s, size, NULL, NULL, NULL, 0, { NULL }, { NULL }, NULL };
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    cucap_builder *b = NULL;
    cucap_graph *lib_graph = NULL;
    CUdeviceptr block = 0;
    CUgraph g = NULL;
    char name[64];
    int ok, k;

    if (with_event)
        snprintf(name, sizeof name, "the same, an event behind each raw launch too");
    else
        snprintf(name, sizeof name, "a launch with new values (%s), per launch", size < 1024 ? "16 bytes" : "256 KiB");
    memset(&ip, 0, sizeof ip);
    ok = (x.values = calloc(1, size)) != NULL &&
         (!with_event || D.cuEventCreate(&x.behind, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    for (k = 0; ok && size > 65536 && k < PARAMS_PINNED; k++)
        ok = D.cuMemAllocHost(&x.pinned[k], size) == CUDA_SUCCESS &&
             D.cuEventCreate(&x.copied[k], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
    ok = ok && cucap_builder_create(0, &b, NULL) == CUDA_SUCCESS &&
         cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) == CUDA_SUCCESS &&
         cucap_builder_params(b, size, &block, NULL) == CUDA_SUCCESS &&
         D.cuMemcpyDtoDAsync(out, block, size, cucap_builder_stream(b)) == CUDA_SUCCESS &&
         cucap_builder_end(b, NULL) == CUDA_SUCCESS && cucap_builder_complete(b, NULL, &x.lib, NULL) == CUDA_SUCCESS &&
         cucap_builder_graph(b, &lib_graph, NULL) == CUDA_SUCCESS &&
         D.cuMemAlloc(&x.raw_block, size) == CUDA_SUCCESS &&
         D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS &&
         D.cuMemcpyDtoDAsync(out, x.raw_block, size, s) == CUDA_SUCCESS &&
         D.cuStreamEndCapture(s, &g) == CUDA_SUCCESS && same_shape(name, cucap_graph_handle(lib_graph), g) &&
         D.cuGraphInstantiateWithParams(&x.raw, g, &ip) == CUDA_SUCCESS;
    if (ok)
        row(name, params_lib, params_raw, &x, reps, warm);
    else
        printf("| %-52s | not timed: a graph could not be made |\n", name);
    D.cuStreamSynchronize(s);
    if (x.raw)
        D.cuGraphExecDestroy(x.raw);
    if (g)
        D.cuGraphDestroy(g);
    if (x.raw_block)
        D.cuMemFree(x.raw_block);
    for (k = 0; k < PARAMS_PINNED; k++) {
        if (x.copied[k])
            D.cuEventDestroy(x.copied[k]);
        if (x.pinned[k])
            D.cuMemFreeHost(x.pinned[k]);
    }
    if (x.behind)
        D.cuEventDestroy(x.behind);
    free(x.values);
    cucap_exec_destroy(x.lib);
    cucap_graph_unref(lib_graph);
    cucap_builder_destroy(b);
    return ok;
}

/* The 256 KiB row, into an output buffer of its own. */
static int params_values_row(CUstream s, int reps, int warm)
{
    CUdeviceptr out = 0;
    int ok;

    if (D.cuMemAlloc(&out, 256 << 10) != CUDA_SUCCESS) {
        printf("| %-52s | not timed: no device memory for its output |\n", "a launch with new values (256 KiB)");
        return 0;
    }
    ok = params_row(s, out, 256 << 10, 0, reps, warm);
    D.cuMemFree(out);
    return ok;
}

/* ---------------------------------------------------------------- the update loop */

/* What a program with changing parameters runs for every step: capture the
 * same topology again with a new value, update the executable graph it
 * already has, launch it.  Both sides launch on one kept stream and wait
 * for it once per LOOP_BATCH iterations. */
enum { LOOP_BATCH = 10 };
#define LOOP_REPS(reps) (5 * (reps))   /* 10 iterations each: about 0.1 s a side per row */

struct loop {
    int k;
    unsigned char value;             /* the "new scalar" of each capture */
    CUstream capture, forks[MAX_K], launch;   /* the raw side's, kept */
    CUevent fork_event, join_events[MAX_K];
    CUdeviceptr d;
    cucap_exec *lib_exec;
    CUgraphExec raw_exec;
    cucap_builder *kept;             /* the library side's one builder when keep */
    cucap_builder *kept_forks[MAX_K];   /* and its kept forks when keep == LOOP_KEPT_FORKS */
    int keep;                        /* LOOP_PER_CAPTURE, LOOP_RESET, LOOP_KEPT_FORKS */
    int cut;                         /* LOOP_WHOLE, or the loop cut short (--steps) */
};
enum { LOOP_WHOLE, LOOP_NO_LAUNCH, LOOP_CAPTURE_ONLY };
enum { LOOP_PER_CAPTURE, LOOP_RESET, LOOP_KEPT_FORKS };

/* The library side's split: kept forks come back every capture. */
static void loop_split(struct loop *x, cucap_builder **all)
{
    int i;

    if (x->keep == LOOP_KEPT_FORKS) {
        cucap_builder_split_kept(all[0], (size_t)x->k, all + 1, NULL);
        for (i = 1; i < x->k; i++)
            x->kept_forks[i] = all[i];
    } else
        cucap_builder_split(all[0], (size_t)x->k, all + 1, NULL);
}

static void loop_memsets(struct loop *x, CUstream const *streams)
{
    int i;

    for (i = 0; i < x->k; i++)
        D.cuMemsetD8Async(x->d + (CUdeviceptr)i * 64, (unsigned char)(x->value + i), 64, streams[i]);
}

/* One capture each way; the library's builder is ENDED, its forks closed.
 * With keep, the builder is the kept one, reset for the capture. */
static cucap_builder *loop_capture_lib(struct loop *x, cucap_builder **all)
{
    CUstream streams[MAX_K];
    int i;

    all[0] = NULL;
    for (i = 1; i < x->k; i++)
        all[i] = NULL;
    if (x->keep) {
        if (!x->kept)
            cucap_builder_create(0, &x->kept, NULL);
        cucap_builder_reset(x->kept, NULL);
        all[0] = x->kept;
    } else
        cucap_builder_create(0, &all[0], NULL);
    cucap_builder_begin(all[0], CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    loop_split(x, all);
    for (i = 0; i < x->k; i++)
        streams[i] = cucap_builder_stream(all[i]);
    loop_memsets(x, streams);
    cucap_builder_join_forks(all[0], NULL);
    cucap_builder_end(all[0], NULL);
    return all[0];
}

static CUgraph loop_capture_raw(struct loop *x)
{
    CUstream streams[MAX_K];
    CUgraph g = NULL;
    int i;

    streams[0] = x->capture;
    D.cuStreamBeginCapture(x->capture, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuEventRecord(x->fork_event, x->capture);
    for (i = 1; i < x->k; i++) {
        D.cuStreamWaitEvent(x->forks[i], x->fork_event, 0);
        streams[i] = x->forks[i];
    }
    loop_memsets(x, streams);
    for (i = 1; i < x->k; i++) {
        D.cuEventRecord(x->join_events[i], x->forks[i]);
        D.cuStreamWaitEvent(x->capture, x->join_events[i], 0);
    }
    D.cuStreamEndCapture(x->capture, &g);
    return g;
}

/* What one capture of the library side made: all of it, or with keep its
 * forks only, or nothing when they are kept too. */
static void loop_release_lib(struct loop *x, cucap_builder **all)
{
    if (x->keep == LOOP_RESET)
        destroy_all(all + 1, x->k - 1);
    else if (x->keep == LOOP_PER_CAPTURE)
        destroy_all(all, x->k);
}

static double loop_lib(void *p)
{
    struct loop *x = p;
    cucap_builder *all[MAX_K];
    double t0 = now_us();
    int n;

    for (n = 0; n < LOOP_BATCH; n++) {
        x->value++;
        loop_capture_lib(x, all);
        if (x->cut != LOOP_CAPTURE_ONLY)
            cucap_exec_update(x->lib_exec, all[0], NULL);
        if (x->cut == LOOP_WHOLE)
            cucap_exec_launch(x->lib_exec, x->launch, NULL);
        loop_release_lib(x, all);
    }
    D.cuStreamSynchronize(x->launch);
    return (now_us() - t0) / LOOP_BATCH;
}

static double loop_raw(void *p)
{
    struct loop *x = p;
    CUgraphExecUpdateResultInfo info;
    double t0 = now_us();
    int n;

    for (n = 0; n < LOOP_BATCH; n++) {
        CUgraph g;
        x->value++;
        g = loop_capture_raw(x);
        if (x->cut != LOOP_CAPTURE_ONLY)
            D.cuGraphExecUpdate(x->raw_exec, g, &info);
        if (x->cut == LOOP_WHOLE)
            D.cuGraphLaunch(x->raw_exec, x->launch);
        D.cuGraphDestroy(g);
    }
    D.cuStreamSynchronize(x->launch);
    return (now_us() - t0) / LOOP_BATCH;
}

/* The one executable graph both sides update and launch, from a first
 * capture of the library's side; 0 when the row cannot be timed (the
 * shapes differ, or the raw side's graph does not update it).  One graph
 * for both, because two executable graphs of the same graph are not
 * always equally fast: on the H200 the raw loop ran up to 0.11 us per
 * iteration faster on a process's first executable graph than on later
 * ones, and with one executable graph two copies of it differed by
 * 0.013 us at most (bench/RESULTS.md, "Method"). */
static int loop_prepare(const char *name, struct loop *x)
{
    cucap_builder *all[MAX_K];
    cucap_graph *lib = NULL;
    CUgraphExecUpdateResultInfo info;
    CUgraph raw = loop_capture_raw(x);
    int same;

    cucap_builder_graph(loop_capture_lib(x, all), &lib, NULL);
    same = same_shape(name, lib ? cucap_graph_handle(lib) : NULL, raw);
    x->lib_exec = NULL;
    x->raw_exec = NULL;
    if (same && cucap_graph_instantiate(lib, NULL, &x->lib_exec, NULL) != CUDA_SUCCESS) {
        printf("| %-52s | not timed: a graph could not be instantiated |\n", name);
        same = 0;
    } else if (same) {
        x->raw_exec = cucap_exec_handle(x->lib_exec);
        if (D.cuGraphExecUpdate(x->raw_exec, raw, &info) != CUDA_SUCCESS) {
            printf("| %-52s | not timed: the raw code's graph does not update the executable graph |\n", name);
            same = 0;
        }
    }
    cucap_graph_unref(lib);
    loop_release_lib(x, all);
    if (raw)
        D.cuGraphDestroy(raw);
    return same;
}

static void loop_finish(struct loop *x)
{
    D.cuStreamSynchronize(x->launch);
    cucap_exec_destroy(x->lib_exec);   /* the raw side's too */
    cucap_builder_destroy(x->kept);
    destroy_all(x->kept_forks + 1, MAX_K - 1);
    memset(x->kept_forks, 0, sizeof x->kept_forks);
    x->lib_exec = NULL;
    x->raw_exec = NULL;
    x->kept = NULL;
}

static const int loop_ks[] = { 2, 8 };

static int loop_rows(struct loop *x, int reps, int warm)
{
    int i, mismatched = 0;

    for (i = 0; i < 6; i++) {
        static const char *const kinds[] = { "per iteration", "one builder reset", "reset, kept forks" };
        char name[80];
        x->k = loop_ks[i % 2];
        x->keep = i / 2;
        snprintf(name, sizeof name, "update loop, K=%d, %s", x->k, kinds[x->keep]);
        if (loop_prepare(name, x))
            row(name, loop_lib, loop_raw, x, reps, warm);
        else
            mismatched++;
        loop_finish(x);
    }
    x->keep = 0;
    return mismatched;
}

static int loop_open(struct loop *x, CUdeviceptr d)
{
    int i, ok = 1;

    memset(x, 0, sizeof *x);
    x->d = d;
    ok &= D.cuStreamCreate(&x->capture, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    ok &= D.cuStreamCreate(&x->launch, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    ok &= D.cuEventCreate(&x->fork_event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
    for (i = 1; i < MAX_K; i++) {
        ok &= D.cuStreamCreate(&x->forks[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
        ok &= D.cuEventCreate(&x->join_events[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
    }
    return ok;
}

static void loop_close(struct loop *x)
{
    int i;

    for (i = 1; i < MAX_K; i++) {
        if (x->forks[i])
            D.cuStreamDestroy(x->forks[i]);
        if (x->join_events[i])
            D.cuEventDestroy(x->join_events[i]);
    }
    if (x->fork_event)
        D.cuEventDestroy(x->fork_event);
    if (x->capture)
        D.cuStreamDestroy(x->capture);
    if (x->launch)
        D.cuStreamDestroy(x->launch);
}

/* ---------------------------------------------------------------- --steps: where a capture's time goes */

enum { LIB_STEPS = 7, RAW_STEPS = 6, STEP_REPS = 401 };
static const char *const lib_step_names[LIB_STEPS] = {
    "cucap_builder_create_on_stream", "cucap_builder_begin", "cucap_builder_split", "the memsets",
    "cucap_builder_join", "cucap_builder_end", "cucap_builder_destroy (all, the graph with them)",
};
static const char *const raw_step_names[RAW_STEPS] = {
    "cuStreamBeginCapture", "fork: cuEventRecord + a cuStreamWaitEvent per fork", "the memsets",
    "join: a cuEventRecord + cuStreamWaitEvent per fork", "cuStreamEndCapture", "cuGraphDestroy",
};

/* One capture of each side, the time of each step into lib[] and raw[]. */
static void time_steps(struct cycle *c, double *lib, double *raw)
{
    cucap_builder *b = NULL, *all[MAX_K];
    CUgraph g = NULL;
    double t[LIB_STEPS + 1];
    int i;

    t[0] = now_us();
    cucap_builder_create_on_stream(c->origin, &b, NULL);
    t[1] = now_us();
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    all[0] = b;
    t[2] = now_us();
    cucap_builder_split(b, (size_t)c->k, all + 1, NULL);
    t[3] = now_us();
    for (i = 0; i < c->k; i++)
        D.cuMemsetD8Async(c->d + (CUdeviceptr)i * 64, (unsigned char)i, 64, cucap_builder_stream(all[i]));
    t[4] = now_us();
    cucap_builder_join(all, (size_t)c->k, NULL, NULL);
    t[5] = now_us();
    cucap_builder_end(b, NULL);
    t[6] = now_us();
    destroy_all(all, c->k);
    t[7] = now_us();
    for (i = 0; i < LIB_STEPS; i++)
        lib[i] = t[i + 1] - t[i];

    t[0] = now_us();
    D.cuStreamBeginCapture(c->origin, CU_STREAM_CAPTURE_MODE_GLOBAL);
    t[1] = now_us();
    D.cuEventRecord(c->fork_event, c->origin);
    for (i = 1; i < c->k; i++)
        D.cuStreamWaitEvent(c->forks[i], c->fork_event, 0);
    t[2] = now_us();
    D.cuMemsetD8Async(c->d, 0, 64, c->origin);
    for (i = 1; i < c->k; i++)
        D.cuMemsetD8Async(c->d + (CUdeviceptr)i * 64, (unsigned char)i, 64, c->forks[i]);
    t[3] = now_us();
    for (i = 1; i < c->k; i++) {
        D.cuEventRecord(c->join_events[i], c->forks[i]);
        D.cuStreamWaitEvent(c->origin, c->join_events[i], 0);
    }
    t[4] = now_us();
    D.cuStreamEndCapture(c->origin, &g);
    t[5] = now_us();
    D.cuGraphDestroy(g);
    t[6] = now_us();
    for (i = 0; i < RAW_STEPS; i++)
        raw[i] = t[i + 1] - t[i];
}

/* A table of steps: the median of each over `reps` rounds of each side,
 * interleaved, one column per K.  time(arg, k, lib, raw) runs one round
 * and writes each step's microseconds into lib[] and raw[]. */
struct steps {
    const char *title;
    const int *ks;
    int columns;
    const char *const *lib_names, *const *raw_names;
    int lib_steps, raw_steps;
    void (*time)(void *arg, int k, double *lib, double *raw);
    void *arg;
};

enum { MAX_STEPS = 10, MAX_COLUMNS = 2 };

static void steps_table(const struct steps *t, int reps)
{
    int rows = t->lib_steps + t->raw_steps, k, r, i;
    double *lib = malloc((size_t)reps * MAX_STEPS * sizeof *lib), *raw = malloc((size_t)reps * MAX_STEPS * sizeof *raw);
    double *column = malloc((size_t)reps * sizeof *column), medians[MAX_COLUMNS][2 * MAX_STEPS];

    if (!lib || !raw || !column) {
        printf("steps: out of memory\n");
        goto out;
    }
    for (k = 0; k < t->columns; k++) {
        for (r = 0; r < 10; r++)
            t->time(t->arg, t->ks[k], lib, raw);
        for (r = 0; r < reps; r++)
            t->time(t->arg, t->ks[k], lib + (size_t)r * MAX_STEPS, raw + (size_t)r * MAX_STEPS);
        for (i = 0; i < rows; i++) {
            int is_lib = i < t->lib_steps, step = is_lib ? i : i - t->lib_steps;
            for (r = 0; r < reps; r++)
                column[r] = (is_lib ? lib : raw)[(size_t)r * MAX_STEPS + step];
            medians[k][i] = median(column, reps);
        }
    }
    printf("\n%s (medians in microseconds, %d rounds of each side):\n\n", t->title, reps);
    printf("| %-56s |", "step");
    for (k = 0; k < t->columns; k++)
        printf(" K=%-6d |", t->ks[k]);
    printf("\n|----------------------------------------------------------|");
    for (k = 0; k < t->columns; k++)
        printf("---------:|");
    printf("\n");
    for (i = 0; i < rows; i++) {
        int is_lib = i < t->lib_steps;
        printf("| %-4s %-51s |", is_lib ? "lib" : "raw",
               is_lib ? t->lib_names[i] : t->raw_names[i - t->lib_steps]);
        for (k = 0; k < t->columns; k++)
            printf(" %8.3f |", medians[k][i]);
        printf("\n");
    }
out:
    free(lib);
    free(raw);
    free(column);
}

static void capture_steps(void *arg, int k, double *lib, double *raw)
{
    struct cycle *c = arg;

    c->k = k;
    time_steps(c, lib, raw);
}

static const int capture_step_ks[] = { 2, 64 };

static const char *const loop_lib_step_names[] = {
    "cucap_builder_create", "cucap_builder_begin", "cucap_builder_split", "the memsets",
    "cucap_builder_join_forks", "cucap_builder_end", "cucap_exec_update", "cucap_exec_launch",
    "cucap_builder_destroy (all, the graph with them)",
};
static const char *const loop_raw_step_names[] = {
    "cuStreamBeginCapture", "fork: cuEventRecord + a cuStreamWaitEvent per fork", "the memsets",
    "join: a cuEventRecord + cuStreamWaitEvent per fork", "cuStreamEndCapture", "cuGraphExecUpdate",
    "cuGraphLaunch", "cuGraphDestroy",
};

/* One iteration of the update loop on each side, step by step; the launch
 * stream is waited for outside the timed steps. */
static void loop_steps(void *arg, int k, double *lib, double *raw)
{
    struct loop *x = arg;
    cucap_builder *all[MAX_K];
    CUstream streams[MAX_K];
    CUgraphExecUpdateResultInfo info;
    CUgraph g = NULL;
    double t[10];
    int i;

    if (k != x->k) {   /* a new column: the executable graphs of this K */
        loop_finish(x);
        x->k = k;
        if (!loop_prepare("update loop steps", x)) {
            memset(lib, 0, MAX_STEPS * sizeof *lib);
            memset(raw, 0, MAX_STEPS * sizeof *raw);
            return;
        }
    }
    x->value++;
    for (i = 1; i < x->k; i++)
        all[i] = NULL;
    t[0] = now_us();
    if (x->keep) {
        cucap_builder_reset(x->kept, NULL);
        all[0] = x->kept;
    } else
        cucap_builder_create(0, &all[0], NULL);
    t[1] = now_us();
    cucap_builder_begin(all[0], CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    t[2] = now_us();
    loop_split(x, all);
    t[3] = now_us();
    for (i = 0; i < x->k; i++)
        streams[i] = cucap_builder_stream(all[i]);
    loop_memsets(x, streams);
    t[4] = now_us();
    cucap_builder_join_forks(all[0], NULL);
    t[5] = now_us();
    cucap_builder_end(all[0], NULL);
    t[6] = now_us();
    cucap_exec_update(x->lib_exec, all[0], NULL);
    t[7] = now_us();
    cucap_exec_launch(x->lib_exec, x->launch, NULL);
    t[8] = now_us();
    loop_release_lib(x, all);
    t[9] = now_us();
    for (i = 0; i < 9; i++)
        lib[i] = t[i + 1] - t[i];
    D.cuStreamSynchronize(x->launch);

    x->value++;   /* the shared executable graph gets new values from each side */
    t[0] = now_us();
    D.cuStreamBeginCapture(x->capture, CU_STREAM_CAPTURE_MODE_GLOBAL);
    t[1] = now_us();
    D.cuEventRecord(x->fork_event, x->capture);
    streams[0] = x->capture;
    for (i = 1; i < x->k; i++) {
        D.cuStreamWaitEvent(x->forks[i], x->fork_event, 0);
        streams[i] = x->forks[i];
    }
    t[2] = now_us();
    loop_memsets(x, streams);
    t[3] = now_us();
    for (i = 1; i < x->k; i++) {
        D.cuEventRecord(x->join_events[i], x->forks[i]);
        D.cuStreamWaitEvent(x->capture, x->join_events[i], 0);
    }
    t[4] = now_us();
    D.cuStreamEndCapture(x->capture, &g);
    t[5] = now_us();
    D.cuGraphExecUpdate(x->raw_exec, g, &info);
    t[6] = now_us();
    D.cuGraphLaunch(x->raw_exec, x->launch);
    t[7] = now_us();
    D.cuGraphDestroy(g);
    t[8] = now_us();
    for (i = 0; i < 8; i++)
        raw[i] = t[i + 1] - t[i];
    D.cuStreamSynchronize(x->launch);
}

static const char *const loop_reset_step_names[] = {
    "cucap_builder_reset (the graph with it)", "cucap_builder_begin", "cucap_builder_split", "the memsets",
    "cucap_builder_join_forks", "cucap_builder_end", "cucap_exec_update", "cucap_exec_launch",
    "cucap_builder_destroy (the forks)",
};

static const char *const loop_kept_step_names[] = {
    "cucap_builder_reset (the graph with it)", "cucap_builder_begin", "cucap_builder_split_kept", "the memsets",
    "cucap_builder_join_forks", "cucap_builder_end", "cucap_exec_update", "cucap_exec_launch",
    "nothing to destroy (the forks are kept)",
};

/* The kept-fork loop cut short after each of its phases, each side timed
 * whole as the rows are: the step tables time every call on its own,
 * which a loop that runs them back to back does not pay for. */
static int loop_cut_table(struct loop *x, int reps)
{
    static const char *const cuts[] = { "the whole iteration", "up to the update", "up to the end" };
    int i, mismatched = 0;

    printf("\nThe loop with one builder reset and kept forks, cut short (medians of %d rounds of %d iterations, "
           "microseconds per iteration):\n\n", reps, LOOP_BATCH);
    printf("| %-52s | %12s | %12s | %6s | %33s |\n", "work", "library", "raw driver", "ratio",
           "library - raw: median [p10, p90]");
    printf("|------------------------------------------------------|-------------:|-------------:|-------:|"
           "----------------------------------:|\n");
    for (i = 0; i < 6; i++) {
        char name[80];
        x->k = loop_ks[i / 3];
        x->keep = LOOP_KEPT_FORKS;
        x->cut = LOOP_WHOLE;   /* the first capture makes the executable graphs */
        snprintf(name, sizeof name, "kept-fork loop, K=%d, %s", x->k, cuts[i % 3]);
        if (loop_prepare(name, x)) {
            x->cut = i % 3;
            row(name, loop_lib, loop_raw, x, reps, 5);
        } else
            mismatched++;
        loop_finish(x);
    }
    x->cut = LOOP_WHOLE;
    x->keep = LOOP_PER_CAPTURE;
    return mismatched;
}

/* The bench's own floor: the hand-written K = 2 loop timed against a
 * second copy of itself (its own capture streams and events, the same
 * executable graph and launch stream) as the rows time the library
 * against it; its ratio and spread are what the instrument shows for two
 * loops that do the same work. */
struct loop_pair {
    struct loop *copy, *original;
};

static double loop_raw_copy(void *p)
{
    return loop_raw(((struct loop_pair *)p)->copy);
}

static double loop_raw_original(void *p)
{
    return loop_raw(((struct loop_pair *)p)->original);
}

static int loop_floor_row(struct loop *x, int reps)
{
    static const char name[] = "hand-written K=2 loop, a copy against itself",
                      own[] = "the same, the copy with its own executable graph";
    struct loop copy;
    struct loop_pair pair = { &copy, x };
    int timed = 0;

    if (loop_open(&copy, x->d)) {
        D.cuStreamDestroy(copy.launch);
        copy.launch = x->launch;   /* as the library's side shares it */
        copy.k = x->k = 2;
        copy.keep = x->keep = LOOP_KEPT_FORKS;
        copy.cut = x->cut = LOOP_WHOLE;
        if (loop_prepare(name, x) && loop_prepare(name, &copy)) {
            CUgraphExec its_own = copy.raw_exec;
            copy.raw_exec = x->raw_exec;   /* as the library's side shares it */
            row(name, loop_raw_copy, loop_raw_original, &pair, reps, 5);
            copy.raw_exec = its_own;       /* what sharing it takes away */
            row(own, loop_raw_copy, loop_raw_original, &pair, reps, 5);
            timed = 1;
        }
        loop_finish(&copy);
        loop_finish(x);
        copy.launch = NULL;
    }
    loop_close(&copy);
    x->keep = LOOP_PER_CAPTURE;
    if (!timed)
        printf("| %-52s | not timed: its executable graphs could not be made |\n", name);
    return !timed;
}

static void loop_steps_table(struct loop *x, int reps)
{
    struct steps t = { "Where an update loop iteration's time goes", loop_ks, 2, loop_lib_step_names,
                       loop_raw_step_names, 9, 8, loop_steps, x };
    struct steps reset = { "The same with one builder reset for every capture", loop_ks, 2, loop_reset_step_names,
                           loop_raw_step_names, 9, 8, loop_steps, x };
    struct steps kept = { "The same with one builder reset and kept forks", loop_ks, 2, loop_kept_step_names,
                          loop_raw_step_names, 9, 8, loop_steps, x };

    x->k = 0;
    x->keep = LOOP_PER_CAPTURE;
    steps_table(&t, reps);
    loop_finish(x);
    x->k = 0;
    x->keep = LOOP_RESET;
    steps_table(&reset, reps);
    loop_finish(x);
    x->k = 0;
    x->keep = LOOP_KEPT_FORKS;
    steps_table(&kept, reps);
    loop_finish(x);
    x->keep = LOOP_PER_CAPTURE;
}

int tool_bench(int argc, char **argv)
{
    static const int ns[] = { 10, 1000, 10000 };
    int quick = 0, steps = 0, reps, i, mismatched = 0;
    struct cycle c;
    struct nodes x;
    struct alloc a;
    struct loop l;
    CUcontext ctx;
    CUstream capture;
    CUgraph g = NULL;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--steps"))
            steps = 1;
        else {
            fprintf(stderr, "cucapture bench: unknown option '%s' (--quick, --steps)\n", argv[i]);
            return 2;
        }
    }
    reps = quick ? 5 : 201;
    if (tool_open_device("bench", &ctx) != 0)
        return TOOL_CANNOT_RUN;
    ctx_of_bench = ctx;
    printf("libcucapture %s, driver %d%s, %d repetitions per row (%d for the update loop, whose differences are "
           "smaller), medians in microseconds\n\n",
           cucap_version_string(), cucap_driver_version(),
           tool_on_simulator() ? " [simulated driver, not a GPU: the times say nothing about a GPU]" : "", reps,
           LOOP_REPS(reps));
    printf("| %-52s | %12s | %12s | %6s | %-33s |\n", "work", "library", "raw driver", "ratio",
           "library - raw: median [p10, p90]");
    printf("|%s|%s|%s|%s|%s|\n", "------------------------------------------------------", "-------------:",
           "-------------:", "-------:", "----------------------------------:");

    memset(&c, 0, sizeof c);
    D.cuStreamCreate(&c.origin, CU_STREAM_NON_BLOCKING);
    for (i = 1; i < MAX_K; i++) {
        D.cuStreamCreate(&c.forks[i], CU_STREAM_NON_BLOCKING);
        D.cuEventCreate(&c.join_events[i], CU_EVENT_DISABLE_TIMING);
    }
    D.cuEventCreate(&c.fork_event, CU_EVENT_DISABLE_TIMING);
    D.cuMemAlloc(&c.d, MAX_K * 64);
    mismatched += cycle_rows(&c, "capture phase, fork/join", "per capture", phase_lib, phase_raw, reps,
                             quick ? 1 : 10);
    mismatched += cycle_rows(&c, "fork/join cycle", "per cycle", cycle_lib, cycle_raw, reps, quick ? 1 : 10);

    x.s = c.origin;
    x.d = c.d;
    for (i = 0; i < 3; i++) {
        char name[80];
        x.n = ns[i];
        snprintf(name, sizeof name, "capture of %d memset nodes, per capture", ns[i]);
        if (nodes_shapes_match(name, &x))
            row(name, nodes_lib, nodes_raw, &x, ns[i] >= 10000 ? (quick ? 3 : 41) : reps, quick ? 1 : 5);
        else
            mismatched++;
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

    if (!across_row(c.origin, c.d, reps, quick))
        mismatched++;

    a.s = c.origin;
    cucap_device_pool(0, &a.pool, NULL);
    row("pool alloc + free (4 KiB), stream-ordered, per pair", alloc_lib, alloc_raw, &a, reps, 2);
    row("the same, raw calls in relaxed mode as the library's", alloc_lib, alloc_raw_relaxed, &a, reps, 2);
    D.cuStreamSynchronize(c.origin);
    if (!params_row(c.origin, c.d, 16, 0, reps, quick ? 1 : 5) ||
        !params_row(c.origin, c.d, 16, 1, reps, quick ? 1 : 5))
        mismatched++;
    if (!params_values_row(c.origin, reps, quick ? 1 : 5))
        mismatched++;

    if (!loop_open(&l, c.d)) {
        printf("| %-52s | not timed: the raw side's streams and events could not be made |\n", "update loop");
        mismatched++;
    } else
        mismatched += loop_rows(&l, LOOP_REPS(reps), quick ? 1 : 5);

    if (steps) {
        struct steps t = { "Where a capture's time goes", capture_step_ks, 2, lib_step_names, raw_step_names,
                           LIB_STEPS, RAW_STEPS, capture_steps, &c };
        steps_table(&t, quick ? 5 : STEP_REPS);
        if (l.launch) {
            loop_steps_table(&l, quick ? 5 : STEP_REPS);
            mismatched += loop_cut_table(&l, LOOP_REPS(reps));
            mismatched += loop_floor_row(&l, LOOP_REPS(reps));
        }
    }
    loop_close(&l);
    for (i = 1; i < MAX_K; i++) {
        D.cuStreamDestroy(c.forks[i]);
        D.cuEventDestroy(c.join_events[i]);
    }
    D.cuEventDestroy(c.fork_event);
    D.cuStreamDestroy(c.origin);
    D.cuMemFree(c.d);
    tool_close_device(ctx);
    if (mismatched)
        fprintf(stderr, "cucapture bench: %d rows not timed: the library's and the raw code's graphs differ\n",
                mismatched);
    return mismatched ? 1 : 0;
}
