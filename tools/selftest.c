/* cucapture selftest: the capture scenarios users hit, run on this
 * machine's driver, one PASS or FAIL line each. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tools/tool.h"

static char reason[512];
static CUcontext ctx;

static const char *fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const char *fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return reason;
}

static const char *failed_call(const char *what, cucap_error *err)
{
    fail("%s: %s", what, cucap_error_message(err));
    cucap_error_free(err);
    return reason;
}

static CUstreamCaptureStatus status_of(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL);
    return st;
}

/* ---------------------------------------------------------------- pool setup under capture */

static const char *pool_calls(void)
{
    cucap_pool *def = NULL, *dev = NULL, *own = NULL;
    cucap_error *err = NULL;

    if (cucap_pool_open_default(0, &def, &err) != CUDA_SUCCESS)
        return failed_call("cucap_pool_open_default", err);
    cucap_pool_close(def, NULL);
    if (cucap_device_pool(0, &dev, &err) != CUDA_SUCCESS)
        return failed_call("cucap_device_pool", err);
    if (cucap_pool_create(0, NULL, &own, &err) != CUDA_SUCCESS)
        return failed_call("cucap_pool_create", err);
    if (cucap_pool_close(own, &err) != CUDA_SUCCESS)
        return failed_call("cucap_pool_close", err);
    return NULL;
}

static const char *pool_same_thread(CUstreamCaptureMode mode)
{
    cucap_builder *b = NULL;
    const char *why;
    cucap_error *err = NULL;

    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return failed_call("cucap_builder_create", err);
    cucap_builder_begin(b, mode, NULL);
    why = pool_calls();
    if (!why && status_of(cucap_builder_stream(b)) != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        why = fail("the capture was disturbed");
    if (!why && cucap_builder_end(b, &err) != CUDA_SUCCESS)
        why = failed_call("cucap_builder_end", err);
    cucap_builder_destroy(b);
    return why;
}

struct other {
    CUstreamCaptureMode mode;
    CUstream s;
    pthread_barrier_t begun, done;
    CUresult end;
};

static void *capture_elsewhere(void *p)
{
    struct other *o = p;
    CUgraph g = NULL;

    D.cuCtxSetCurrent(ctx);
    D.cuStreamBeginCapture(o->s, o->mode);
    pthread_barrier_wait(&o->begun);
    pthread_barrier_wait(&o->done);
    o->end = D.cuStreamEndCapture(o->s, &g);
    if (g)
        D.cuGraphDestroy(g);
    return NULL;
}

static const char *pool_other_thread(CUstreamCaptureMode mode)
{
    struct other o;
    pthread_t t;
    const char *why;

    memset(&o, 0, sizeof o);
    o.mode = mode;
    if (D.cuStreamCreate(&o.s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return fail("cuStreamCreate failed");
    pthread_barrier_init(&o.begun, NULL, 2);
    pthread_barrier_init(&o.done, NULL, 2);
    pthread_create(&t, NULL, capture_elsewhere, &o);
    pthread_barrier_wait(&o.begun);
    why = pool_calls();
    if (!why && status_of(o.s) != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        why = fail("the other thread's capture was disturbed");
    pthread_barrier_wait(&o.done);
    pthread_join(t, NULL);
    if (!why && o.end != CUDA_SUCCESS)
        why = fail("the other thread's capture ended with %s", cucap_result_name(o.end));
    pthread_barrier_destroy(&o.begun);
    pthread_barrier_destroy(&o.done);
    D.cuStreamDestroy(o.s);
    return why;
}

static const char *pool_global_same(void) { return pool_same_thread(CU_STREAM_CAPTURE_MODE_GLOBAL); }
static const char *pool_thread_local_same(void) { return pool_same_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static const char *pool_relaxed_same(void) { return pool_same_thread(CU_STREAM_CAPTURE_MODE_RELAXED); }
static const char *pool_global_other(void) { return pool_other_thread(CU_STREAM_CAPTURE_MODE_GLOBAL); }
static const char *pool_thread_local_other(void) { return pool_other_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static const char *pool_relaxed_other(void) { return pool_other_thread(CU_STREAM_CAPTURE_MODE_RELAXED); }

/* ---------------------------------------------------------------- builders */

static int warnings;
static void count_warning(const cucap_error *w, void *data)
{
    (void)w;
    (void)data;
    warnings++;
}

static const char *invalidated_teardown(void)
{
    int round;

    warnings = 0;
    for (round = 0; round < 50; round++) {
        cucap_builder *b = NULL;
        if (cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS)
            break;
        cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
        D.cuStreamSynchronize(cucap_builder_stream(b));   /* invalidates the capture */
        cucap_builder_destroy(b);                          /* must not destroy the discarded graph */
    }
    return warnings == 50 ? NULL : fail("%d of 50 invalidated teardowns were reported", warnings);
}

static const char *unjoined_fork(void)
{
    cucap_builder *b = NULL, *f = NULL;
    CUdeviceptr d;
    CUresult rc;
    const char *why = NULL;

    if (D.cuMemAlloc(&d, 64) != CUDA_SUCCESS || cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS)
        return fail("setup failed");
    cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    cucap_builder_split(b, 2, &f, NULL);
    D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(f));
    cucap_builder_destroy(f);
    rc = cucap_builder_end(b, NULL);
    if (rc != CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        why = fail("end returned %s, not CUDA_ERROR_STREAM_CAPTURE_UNJOINED", cucap_result_name(rc));
    else if (cucap_builder_get_state(b) != CUCAP_BUILDER_INVALIDATED)
        why = fail("the builder is not INVALIDATED");
    cucap_builder_destroy(b);
    D.cuMemFree(d);
    return why;
}

/* Two captures joined: the driver would invalidate both (MERGE); the
 * library refuses, and both end and run. */
static const char *join_of_two_captures(void)
{
    cucap_builder *root = NULL, *other = NULL, *f = NULL;
    cucap_exec *e = NULL;
    CUresult rc;
    const char *why = NULL;
    int i;

    cucap_builder_create(0, &root, NULL);
    cucap_builder_create(0, &other, NULL);
    cucap_builder_begin(root, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    cucap_builder_split(root, 2, &f, NULL);
    rc = cucap_builder_join((cucap_builder *const[]){ root, other, f }, 3, NULL, NULL);
    if (rc != CUDA_ERROR_INVALID_VALUE)
        why = fail("join returned %s, not CUDA_ERROR_INVALID_VALUE", cucap_result_name(rc));
    else if (cucap_builder_get_state(other) != CUCAP_BUILDER_CAPTURING || cucap_builder_get_state(f) != CUCAP_BUILDER_CAPTURING)
        why = fail("the refused join closed a builder");
    else if ((rc = cucap_builder_join((cucap_builder *const[]){ root, f }, 2, NULL, NULL)) != CUDA_SUCCESS)
        why = fail("the join of one capture returned %s", cucap_result_name(rc));
    for (i = 0; i < 2 && !why; i++) {
        cucap_builder *b = i ? other : root;
        if ((rc = cucap_builder_end(b, NULL)) != CUDA_SUCCESS ||
            (rc = cucap_builder_complete(b, NULL, &e, NULL)) != CUDA_SUCCESS ||
            (rc = cucap_exec_launch(e, cucap_builder_stream(b), NULL)) != CUDA_SUCCESS)
            why = fail("capture %d did not end and launch: %s", i, cucap_result_name(rc));
        cucap_exec_destroy(e);
        e = NULL;
    }
    cucap_builder_destroy(f);
    cucap_builder_destroy(other);
    cucap_builder_destroy(root);
    return why;
}

static const char *conditional_body(void)
{
    cucap_builder *p = NULL, *body = NULL;
    CUgraphConditionalHandle h;
    cucap_exec *exec = NULL;
    CUdeviceptr d;
    unsigned char host[16];
    CUresult rc;
    const char *why = NULL;

    if (D.cuMemAlloc(&d, sizeof host) != CUDA_SUCCESS || cucap_builder_create(0, &p, NULL) != CUDA_SUCCESS)
        return fail("setup failed");
    D.cuMemsetD8(d, 0, sizeof host);
    D.cuStreamSynchronize(NULL);   /* the builders' non-blocking streams do not wait for the legacy one */
    cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    if ((rc = cucap_builder_create_condition(p, 1, 1, &h, NULL)) != CUDA_SUCCESS ||
        (rc = cucap_builder_if(p, h, &body, NULL)) != CUDA_SUCCESS) {
        why = fail("adding the IF node failed: %s", cucap_result_name(rc));
        goto out;
    }
    cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    D.cuStreamSynchronize(cucap_builder_stream(body));   /* invalidates the body capture */
    if ((rc = cucap_builder_end(body, NULL)) != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
        why = fail("the body's end returned %s", cucap_result_name(rc));
        goto out;
    }
    cucap_builder_end(p, NULL);
    if ((rc = cucap_builder_complete(p, NULL, &exec, NULL)) != CUDA_ERROR_ILLEGAL_STATE) {
        why = fail("complete with a failed body returned %s", cucap_result_name(rc));
        goto out;
    }
    cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    D.cuMemsetD8Async(d, 0x42, sizeof host, cucap_builder_stream(body));
    if (cucap_builder_end(body, NULL) != CUDA_SUCCESS || cucap_builder_complete(p, NULL, &exec, NULL) != CUDA_SUCCESS ||
        cucap_exec_launch(exec, cucap_builder_stream(body), NULL) != CUDA_SUCCESS) {
        why = fail("the re-captured body did not complete and launch");
        goto out;
    }
    D.cuStreamSynchronize(cucap_builder_stream(body));
    D.cuMemcpyDtoH(host, d, sizeof host);
    if (host[0] != 0x42)
        why = fail("the body did not run (byte %#x)", host[0]);
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    cucap_builder_destroy(p);
    D.cuMemFree(d);
    return why;
}

static const char *fork_join_graph(void)
{
    enum { K = 4, SPAN = 256 };
    cucap_builder *b = NULL, *forks[K - 1], *all[K];
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char host[K * SPAN];
    CUdeviceptr d;
    const char *why = NULL;
    int i;

    if (D.cuMemAlloc(&d, sizeof host) != CUDA_SUCCESS || cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return fail("setup failed");
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS ||
        cucap_builder_split(b, K, forks, &err) != CUDA_SUCCESS) {
        why = failed_call("begin/split", err);
        goto out;
    }
    all[0] = b;
    for (i = 1; i < K; i++)
        all[i] = forks[i - 1];
    for (i = 0; i < K; i++)
        D.cuMemsetD8Async(d + (CUdeviceptr)i * SPAN, (unsigned char)(0x10 + i), SPAN, cucap_builder_stream(all[i]));
    if (cucap_builder_join(all, K, NULL, &err) != CUDA_SUCCESS || cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS ||
        cucap_exec_launch(exec, cucap_builder_stream(b), &err) != CUDA_SUCCESS) {
        why = failed_call("join/end/complete/launch", err);
    } else {
        D.cuStreamSynchronize(cucap_builder_stream(b));
        D.cuMemcpyDtoH(host, d, sizeof host);
        for (i = 0; i < K * SPAN && !why; i++)
            if (host[i] != (unsigned char)(0x10 + i / SPAN))
                why = fail("byte %d is %#x, not %#x", i, host[i], 0x10 + i / SPAN);
    }
    for (i = 0; i < K - 1; i++)
        cucap_builder_destroy(forks[i]);
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
    return why;
}

/* Set by a scenario that cannot run on this machine: why. */
static const char *skip_reason;

/* Memory of device dev, allocated in its primary context, which stays
 * retained until memory_on_free (the driver destroys a primary context,
 * and the memory in it, at its last release); device 0's context is
 * current again afterwards. */
static CUresult memory_on(CUdevice dev, size_t bytes, CUdeviceptr *out)
{
    CUcontext other;
    CUresult rc;

    if ((rc = D.cuDevicePrimaryCtxRetain(&other, dev)) != CUDA_SUCCESS)
        return rc;
    if ((rc = D.cuCtxSetCurrent(other)) == CUDA_SUCCESS)
        rc = D.cuMemAlloc(out, bytes);
    D.cuCtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS)
        D.cuDevicePrimaryCtxRelease(dev);
    return rc;
}

static void memory_on_free(CUdevice dev, CUdeviceptr p)
{
    D.cuMemFree(p);
    D.cuDevicePrimaryCtxRelease(dev);
}

static const char *fork_across_devices(void)
{
    enum { SPAN = 256 };
    cucap_builder *b = NULL, *all[2] = { NULL, NULL };
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char host[SPAN];
    CUdeviceptr d0 = 0, d1 = 0;
    const char *why = NULL;
    int n = 0, i;

    if (D.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 2) {
        skip_reason = "one device here; it needs two";
        return NULL;
    }
    if (D.cuMemAlloc(&d0, SPAN) != CUDA_SUCCESS || memory_on(1, SPAN, &d1) != CUDA_SUCCESS ||
        cucap_builder_create(0, &b, &err) != CUDA_SUCCESS) {
        why = fail("setup failed");
        goto out;
    }
    all[0] = b;
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS ||
        cucap_builder_split_on(b, 1, 2, &all[1], &err) != CUDA_SUCCESS) {
        why = failed_call("begin/split_on", err);
        goto out;
    }
    D.cuMemsetD8Async(d0, 0x31, SPAN, cucap_builder_stream(b));
    D.cuMemsetD8Async(d1, 0x32, SPAN, cucap_builder_stream(all[1]));
    if (cucap_builder_join(all, 2, NULL, &err) != CUDA_SUCCESS || cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS ||
        cucap_exec_launch(exec, cucap_builder_stream(b), &err) != CUDA_SUCCESS) {
        why = failed_call("join/end/complete/launch", err);
        goto out;
    }
    D.cuStreamSynchronize(cucap_builder_stream(b));
    D.cuMemcpyDtoH(host, d0, SPAN);
    for (i = 0; i < SPAN && !why; i++)
        if (host[i] != 0x31)
            why = fail("device 0's byte %d is %#x, not 0x31", i, host[i]);
    D.cuMemcpyDtoH(host, d1, SPAN);
    for (i = 0; i < SPAN && !why; i++)
        if (host[i] != 0x32)
            why = fail("device 1's byte %d is %#x, not 0x32", i, host[i]);
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(all[1]);
    cucap_builder_destroy(b);
    if (d0)
        D.cuMemFree(d0);
    if (d1)
        memory_on_free(1, d1);
    return why;
}

static const struct {
    const char *name;
    const char *(*run)(void);
} scenarios[] = {
    { "pool setup under a global capture of this thread", pool_global_same },
    { "pool setup under a thread_local capture of this thread", pool_thread_local_same },
    { "pool setup under a relaxed capture of this thread", pool_relaxed_same },
    { "pool setup under a global capture of another thread", pool_global_other },
    { "pool setup under a thread_local capture of another thread", pool_thread_local_other },
    { "pool setup under a relaxed capture of another thread", pool_relaxed_other },
    { "invalidated capture torn down without end (50 rounds)", invalidated_teardown },
    { "unjoined fork reported by end", unjoined_fork },
    { "a join of two captures is refused, and both run", join_of_two_captures },
    { "conditional body invalidated, refused, captured again, run", conditional_body },
    { "fork/join graph of 4 branches runs with the right results", fork_join_graph },
    { "one capture forked across two devices runs both devices' work", fork_across_devices },
};

int tool_selftest(int require_gpu)
{
    size_t i, failed = 0, skipped = 0, n = sizeof scenarios / sizeof scenarios[0];
    const char *where;

    if (tool_fallback_to_simulator("selftest", require_gpu) < 0)
        return TOOL_CANNOT_RUN;
    if (tool_open_device("selftest", &ctx) != 0)
        return TOOL_CANNOT_RUN;
    if (require_gpu && tool_on_simulator()) {
        fprintf(stderr, "cucapture selftest: --require-gpu, but the driver is the simulated one\n");
        tool_close_device(ctx);
        return TOOL_CANNOT_RUN;
    }
    /* nobody may take a result on the simulator for a GPU's */
    where = tool_on_simulator() ? " [simulated driver, not a GPU]" : "";
    /* the scenarios break captures on purpose: their warnings are expected */
    cucap_set_warning_handler(count_warning, NULL);
    for (i = 0; i < n; i++) {
        const char *why;
        skip_reason = NULL;
        why = scenarios[i].run();
        if (why) {
            failed++;
            printf("FAIL %s: %s%s\n", scenarios[i].name, why, where);
        } else if (skip_reason) {
            skipped++;
            printf("SKIP %s: %s%s\n", scenarios[i].name, skip_reason, where);
        } else {
            printf("PASS %s%s\n", scenarios[i].name, where);
        }
        fflush(stdout);
    }
    printf("%zu passed, %zu failed, %zu skipped%s\n", n - failed - skipped, failed, skipped, where);
    cucap_set_warning_handler(NULL, NULL);
    tool_close_device(ctx);
    return failed ? 1 : 0;
}
