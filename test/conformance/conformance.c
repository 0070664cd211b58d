/* Runs every row of doc/driver-facts.md against the driver that is loaded
 * (the simulator when built as conformance-sim, the real driver as
 * conformance-gpu), prints one TAP line per row with the call, its result
 * and the capture status after it, and fails on any difference from the
 * measured facts.  The lines after "ok N - " are the same on every
 * conforming driver, so two runs can be compared with diff. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "error-names.h"
#include "error.h"

CUcontext conf_ctx;
CUdevice conf_dev;
const CUstreamCaptureMode conf_modes[3] = {
    CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED,
};

static int rows, failed;

const char *conf_mode_name(CUstreamCaptureMode m)
{
    switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL: return "global";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: return "thread_local";
    case CU_STREAM_CAPTURE_MODE_RELAXED: return "relaxed";
    default: return "invalid";
    }
}

const char *conf_code(CUresult rc)
{
    return cucap_i_result_label(rc);
}

const char *conf_status_name(CUstreamCaptureStatus s)
{
    switch (s) {
    case CU_STREAM_CAPTURE_STATUS_NONE: return "NONE";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE: return "ACTIVE";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED: return "INVALIDATED";
    default: return "?";
    }
}

const char *conf_status(CUstream s)
{
    CUstreamCaptureStatus st;

    if (D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL) != CUDA_SUCCESS)
        return "query-failed";
    return conf_status_name(st);
}

void conf_append(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;

    if (used + 1 >= size)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

void conf_row(const char *what, const char *mode, const char *observed, const char *expected)
{
    int ok = strcmp(observed, expected) == 0;

    rows++;
    if (!ok)
        failed++;
    printf("%s %d - %s [%s]: %s\n", ok ? "ok" : "not ok", rows, what, mode, observed);
    if (!ok)
        printf("# expected: %s\n", expected);
    fflush(stdout);
}

CUstream conf_stream(void)
{
    CUstream s = NULL;
    CUresult rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);

    if (rc != CUDA_SUCCESS) {
        printf("Bail out! cuStreamCreate: %s\n", conf_code(rc));
        exit(1);
    }
    return s;
}

void conf_drop(CUstream s)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;

    if (D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
        st != CU_STREAM_CAPTURE_STATUS_NONE &&
        D.cuStreamEndCapture(s, &g) == CUDA_SUCCESS && g)
        D.cuGraphDestroy(g);
    D.cuStreamDestroy(s);
}

struct thread_call {
    void (*fn)(void *);
    void *arg;
};

static void *thread_main(void *p)
{
    struct thread_call *call = p;

    D.cuCtxSetCurrent(conf_ctx);
    call->fn(call->arg);
    return NULL;
}

void conf_on_thread(void (*fn)(void *), void *arg)
{
    struct thread_call call = { fn, arg };
    pthread_t t;

    if (pthread_create(&t, NULL, thread_main, &call) != 0) {
        printf("Bail out! pthread_create failed\n");
        exit(1);
    }
    pthread_join(t, NULL);
}

CUstream conf_fork(CUstream from)
{
    CUstream s = conf_stream();
    CUevent e;

    D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    D.cuEventRecord(e, from);
    D.cuStreamWaitEvent(s, e, 0);
    D.cuEventDestroy(e);
    return s;
}

void conf_join(CUstream origin, CUstream fork)
{
    CUevent e;

    D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    D.cuEventRecord(e, fork);
    D.cuStreamWaitEvent(origin, e, 0);
    D.cuEventDestroy(e);
}

CUresult conf_add_conditional(CUstream s, CUgraphConditionalNodeType type, unsigned int size,
                              unsigned int default_value, CUgraphConditionalHandle *h, CUgraph *bodies)
{
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUgraphNode node;
    CUgraphNodeParams p;
    CUresult rc;
    unsigned int i;

    rc = D.cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = D.cuGraphConditionalHandleCreate(h, g, conf_ctx, default_value, CU_GRAPH_COND_ASSIGN_DEFAULT);
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = *h;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = conf_ctx;
    rc = D.cuGraphAddNode(&node, g, deps, NULL, n, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (i = 0; i < size; i++)
        bodies[i] = p.conditional.phGraph_out[i];
    return D.cuStreamUpdateCaptureDependencies(s, &node, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

static int gpu_absent(CUresult rc)
{
    return rc == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED || rc == CUDA_ERROR_STUB_LIBRARY ||
           rc == CUDA_ERROR_NO_DEVICE || rc == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
           rc == CUDA_ERROR_SYSTEM_NOT_READY || rc == CUDA_ERROR_NOT_SUPPORTED;
}

static void select_driver(void)
{
#ifdef CONFORMANCE_SIMULATOR
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    if (!sim || !*sim) {
        printf("Bail out! CUCAPTURE_TEST_SIM is not set: run through make check\n");
        exit(1);
    }
    setenv("CUCAPTURE_DRIVER", sim, 1);
#else
    unsetenv("CUCAPTURE_DRIVER");
#endif
}

int main(int argc, char **argv)
{
    cucap_error *err = NULL;
    CUresult rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    select_driver();
    rc = cucap_init(&err);
    if (argc == 4 && strcmp(argv[1], "--body-child") == 0) {
        if (rc != CUDA_SUCCESS)
            return 2;
        D.cuDeviceGet(&conf_dev, 0);
        D.cuDevicePrimaryCtxRetain(&conf_ctx, conf_dev);
        D.cuCtxSetCurrent(conf_ctx);
        return conf_body_child(argv[2], argv[3]);
    }
    if (rc != CUDA_SUCCESS) {
        const char *required = getenv("CUCAPTURE_REQUIRE_GPU");
        int must = required && strcmp(required, "1") == 0;
#ifdef CONFORMANCE_SIMULATOR
        must = 1;
#endif
        if (gpu_absent(rc) && !must) {
            printf("1..0 # SKIP no usable CUDA GPU: %s\n", cucap_error_message(err));
            cucap_error_free(err);
            return 0;
        }
        printf("Bail out! %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 1;
    }
    if (D.cuDeviceGet(&conf_dev, 0) != CUDA_SUCCESS ||
        D.cuDevicePrimaryCtxRetain(&conf_ctx, conf_dev) != CUDA_SUCCESS ||
        D.cuCtxSetCurrent(conf_ctx) != CUDA_SUCCESS) {
        printf("Bail out! cannot make device 0's primary context current\n");
        return 1;
    }
    printf("TAP version 13\n");
    conf_rows_thread_mode();
    conf_rows_other_thread();
    conf_rows_ending();
    conf_rows_more();
    conf_rows_stream_ids();
    conf_rows_bodies(argv[0]);
    conf_rows_measured();
    conf_rows_isolation();
    conf_rows_copies();
    conf_rows_join();
    conf_rows_devices();
    conf_rows_graph_memory();
    conf_rows_nodes();
    printf("1..%d\n", rows);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(conf_dev);
    return 0;   /* failed rows are "not ok" lines */
}
