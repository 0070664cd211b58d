/* Rows of doc/driver-facts.md, "Calls from another thread during a global
 * capture", and the calls that need a current context, refuse a capturing
 * stream, or refuse a node type in a conditional body. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"
#include "cucapture.h"

static char observed[256];

/* What thread B works on: made before thread A begins its capture. */
struct objects {
    CUstream stream;                 /* B's own stream, not capturing */
    CUgraph graph;                   /* one memset node */
    CUgraphExec exec;                /* of graph */
    CUevent event;
    CUdeviceptr memory;
    CUmemoryPool pool;
};

static CUgraph memset_graph(CUdeviceptr d)
{
    CUstream s = conf_stream();
    CUgraph g = NULL;

    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    D.cuMemsetD8Async(d, 1, 64, s);
    D.cuStreamEndCapture(s, &g);
    D.cuStreamDestroy(s);
    return g;
}

static CUresult instantiate(CUgraphExec *exec, CUgraph g, unsigned int *result)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUresult rc;

    memset(&params, 0, sizeof params);
    params.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    rc = D.cuGraphInstantiateWithParams(exec, g, &params);
    if (result)
        *result = (unsigned int)params.result_out;
    return rc;
}

static void make_objects(struct objects *o)
{
    memset(o, 0, sizeof *o);
    o->stream = conf_stream();
    D.cuMemAlloc(&o->memory, 4096);
    o->graph = memset_graph(o->memory);
    instantiate(&o->exec, o->graph, NULL);
    D.cuEventCreate(&o->event, CU_EVENT_DISABLE_TIMING);
    D.cuDeviceGetDefaultMemPool(&o->pool, conf_dev);
}

static void drop_objects(struct objects *o)
{
    D.cuStreamSynchronize(o->stream);
    if (o->exec)
        D.cuGraphExecDestroy(o->exec);
    if (o->graph)
        D.cuGraphDestroy(o->graph);
    if (o->event)
        D.cuEventDestroy(o->event);
    D.cuStreamDestroy(o->stream);
    D.cuMemFree(o->memory);
}

enum call {
    CALL_INSTANTIATE, CALL_EXEC_DESTROY, CALL_SYNCHRONIZE, CALL_ALLOC_FROM_POOL, CALL_FREE_ASYNC, CALL_LAUNCH,
    CALL_UPLOAD, CALL_EXEC_UPDATE, CALL_GRAPH_CREATE, CALL_GRAPH_DESTROY, CALL_STREAM_CREATE, CALL_STREAM_DESTROY,
    CALL_EVENT_CREATE, CALL_EVENT_DESTROY, CALL_EVENT_RECORD, CALL_COUNT
};

static const char *const call_names[CALL_COUNT] = {
    "cuGraphInstantiateWithParams", "cuGraphExecDestroy", "cuStreamSynchronize (own stream)",
    "cuMemAllocFromPoolAsync (own stream)", "cuMemFreeAsync (own stream)", "cuGraphLaunch (own stream)",
    "cuGraphUpload (own stream)", "cuGraphExecUpdate", "cuGraphCreate", "cuGraphDestroy", "cuStreamCreate",
    "cuStreamDestroy", "cuEventCreate", "cuEventDestroy", "cuEventRecord (own stream)",
};

struct other_call {
    struct objects *o;
    enum call call;
    CUstreamCaptureMode mode;        /* B's thread mode */
    CUresult rc;
};

static CUresult make_call(struct objects *o, enum call call)
{
    CUgraphExecUpdateResultInfo info;
    CUgraphExec exec = NULL;
    CUdeviceptr p = 0;
    CUstream s = NULL;
    CUevent e = NULL;
    CUgraph g = NULL;
    CUresult rc = CUDA_ERROR_UNKNOWN;

    switch (call) {
    case CALL_INSTANTIATE:
        if ((rc = instantiate(&exec, o->graph, NULL)) == CUDA_SUCCESS)
            D.cuGraphExecDestroy(exec);
        break;
    case CALL_EXEC_DESTROY:
        if ((rc = D.cuGraphExecDestroy(o->exec)) == CUDA_SUCCESS)
            o->exec = NULL;
        break;
    case CALL_SYNCHRONIZE: rc = D.cuStreamSynchronize(o->stream); break;
    case CALL_ALLOC_FROM_POOL:
        if ((rc = D.cuMemAllocFromPoolAsync(&p, 256, o->pool, o->stream)) == CUDA_SUCCESS)
            D.cuMemFreeAsync(p, o->stream);
        break;
    case CALL_FREE_ASYNC: rc = D.cuMemFreeAsync(o->memory, o->stream); o->memory = 0; break;
    case CALL_LAUNCH: rc = D.cuGraphLaunch(o->exec, o->stream); break;
    case CALL_UPLOAD: rc = D.cuGraphUpload(o->exec, o->stream); break;
    case CALL_EXEC_UPDATE: memset(&info, 0, sizeof info); rc = D.cuGraphExecUpdate(o->exec, o->graph, &info); break;
    case CALL_GRAPH_CREATE:
        if ((rc = D.cuGraphCreate(&g, 0)) == CUDA_SUCCESS)
            D.cuGraphDestroy(g);
        break;
    case CALL_GRAPH_DESTROY:
        if ((rc = D.cuGraphDestroy(o->graph)) == CUDA_SUCCESS)
            o->graph = NULL;
        break;
    case CALL_STREAM_CREATE:
        if ((rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS)
            D.cuStreamDestroy(s);
        break;
    case CALL_STREAM_DESTROY:
        if ((rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS)
            rc = D.cuStreamDestroy(s);
        break;
    case CALL_EVENT_CREATE:
        if ((rc = D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS)
            D.cuEventDestroy(e);
        break;
    case CALL_EVENT_DESTROY:
        if ((rc = D.cuEventDestroy(o->event)) == CUDA_SUCCESS)
            o->event = NULL;
        break;
    case CALL_EVENT_RECORD: rc = D.cuEventRecord(o->event, o->stream); break;
    case CALL_COUNT: break;
    }
    return rc;
}

static void other_thread_call(void *p)
{
    struct other_call *c = p;
    CUstreamCaptureMode mode = c->mode;

    D.cuThreadExchangeStreamCaptureMode(&mode);
    c->rc = make_call(c->o, c->call);
    D.cuThreadExchangeStreamCaptureMode(&mode);
}

static void rows_calls_from_another_thread(void)
{
    static const CUstreamCaptureMode b_modes[2] = { CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED };
    int call, m;

    for (call = 0; call < CALL_COUNT; call++)
        for (m = 0; m < 2; m++) {
            struct objects o;
            struct other_call c;
            CUstream s = conf_stream();
            CUdeviceptr d = 0;
            char what[160];

            make_objects(&o);
            D.cuMemAlloc(&d, 64);
            D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
            D.cuMemsetD8Async(d, 2, 64, s);
            c.o = &o;
            c.call = (enum call)call;
            c.mode = b_modes[m];
            c.rc = CUDA_ERROR_UNKNOWN;
            conf_on_thread(other_thread_call, &c);
            snprintf(observed, sizeof observed, "B %s; A's capture %s", conf_code(c.rc), conf_status(s));
            snprintf(what, sizeof what, "during A's global capture, thread B (%s mode) calls %s",
                     conf_mode_name(b_modes[m]), call_names[call]);
            conf_row(what, "global", observed,
                     m == 0 && call <= CALL_FREE_ASYNC
                         ? "B CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; A's capture INVALIDATED"
                         : "B CUDA_SUCCESS; A's capture ACTIVE");
            conf_drop(s);
            D.cuMemFree(d);
            drop_objects(&o);
        }
}

/* ---------------------------------------------------------------- no current context */

struct no_context {
    struct objects *o;
    char text[256];
};

static void *no_context_thread(void *p)
{
    struct no_context *nc = p;
    struct objects *o = nc->o;
    CUgraphExec exec = NULL;
    CUdeviceptr a = 0, b = 0;
    CUcontext current = (CUcontext)1;
    CUgraphExecUpdateResultInfo info;
    CUresult inst, alloc_null, alloc_stream, launch, update;

    D.cuCtxGetCurrent(&current);
    inst = instantiate(&exec, o->graph, NULL);
    alloc_null = D.cuMemAllocFromPoolAsync(&a, 256, o->pool, NULL);
    alloc_stream = D.cuMemAllocFromPoolAsync(&b, 256, o->pool, o->stream);
    launch = D.cuGraphLaunch(o->exec, o->stream);
    memset(&info, 0, sizeof info);
    update = D.cuGraphExecUpdate(o->exec, o->graph, &info);
    snprintf(nc->text, sizeof nc->text,
             "current %s; instantiate %s; pool alloc on NULL %s; pool alloc on a stream %s; launch on a stream %s; "
             "exec update %s", current ? "set" : "NULL", conf_code(inst), conf_code(alloc_null),
             conf_code(alloc_stream), conf_code(launch), conf_code(update));
    D.cuCtxSetCurrent(conf_ctx);
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (a)
        D.cuMemFreeAsync(a, NULL);
    if (b)
        D.cuMemFreeAsync(b, o->stream);
    return NULL;
}

static void rows_no_current_context(void)
{
    struct objects o;
    struct no_context nc;
    pthread_t t;

    make_objects(&o);
    nc.o = &o;
    nc.text[0] = '\0';
    if (pthread_create(&t, NULL, no_context_thread, &nc) == 0)
        pthread_join(t, NULL);
    conf_row("a fresh thread that never made a context current", "none", nc.text,
             "current NULL; instantiate CUDA_ERROR_INVALID_CONTEXT; pool alloc on NULL CUDA_ERROR_INVALID_CONTEXT; "
             "pool alloc on a stream CUDA_SUCCESS; launch on a stream CUDA_SUCCESS; exec update CUDA_SUCCESS");
    drop_objects(&o);
}

/* ---------------------------------------------------------------- refused under capture */

static void rows_launch_into_capture(void)
{
    const CUstreamCaptureMode *m;

    for (m = conf_modes; m < conf_modes + 3; m++) {
        struct objects o;
        CUstream s = conf_stream();
        CUresult rc;

        make_objects(&o);
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuGraphLaunch(o.exec, s);
        snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
        conf_row("cuGraphLaunch into a capturing stream", conf_mode_name(*m), observed,
                 "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        conf_drop(s);
        drop_objects(&o);
    }
}

/* Asked on one device only: on a host with two H200s (driver 580.159.04,
 * 2026-11-30) this cuMemPoolCreate had not returned after 60 s. */
static void rows_pool_create_too_large(void)
{
    CUmemPoolProps props;
    CUmemoryPool pool = NULL;
    CUresult rc;
    int devices = 0;

    if (D.cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices > 1)
        return;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = conf_dev;
    props.maxSize = SIZE_MAX;
    rc = D.cuMemPoolCreate(&pool, &props);
    conf_row("cuMemPoolCreate with maxSize = SIZE_MAX", "none", conf_code(rc), "CUDA_ERROR_OUT_OF_MEMORY");
    if (rc == CUDA_SUCCESS)
        D.cuMemPoolDestroy(pool);
}

static void noop_host(void *p)
{
    (void)p;
}

/* An IF node whose body holds, through a child graph captured standalone
 * (the library's way), one node of the given kind: host function or memset. */
static void body_node_row(int host)
{
    CUstream s = conf_stream(), body = conf_stream();
    CUgraphConditionalHandle h;
    CUgraph bodies[1] = { NULL }, parent = NULL, captured = NULL;
    CUgraphExec exec = NULL;
    CUgraphNode child;
    CUdeviceptr d = 0;
    unsigned int result = 0;
    CUresult rc;

    D.cuMemAlloc(&d, 64);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 1, &h, bodies);
    D.cuStreamBeginCapture(body, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (host)
        D.cuLaunchHostFunc(body, noop_host, NULL);
    else
        D.cuMemsetD8Async(d, 3, 64, body);
    D.cuStreamEndCapture(body, &captured);
    D.cuGraphAddChildGraphNode(&child, bodies[0], NULL, 0, captured);
    D.cuStreamEndCapture(s, &parent);
    rc = instantiate(&exec, parent, &result);
    snprintf(observed, sizeof observed, "instantiate %s, result %u", conf_code(rc), result);
    conf_row(host ? "instantiate a graph whose IF body holds a host-function node"
                  : "instantiate a graph whose IF body holds a memset node",
             "relaxed", observed,
             host ? "instantiate CUDA_ERROR_INVALID_VALUE, result 3" : "instantiate CUDA_SUCCESS, result 0");
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (parent)
        D.cuGraphDestroy(parent);
    if (captured)
        D.cuGraphDestroy(captured);
    D.cuStreamDestroy(body);
    D.cuStreamDestroy(s);
    D.cuMemFree(d);
}

static void rows_legacy_stream_query(void)
{
    conf_row("cuStreamQuery(CU_STREAM_LEGACY) with nothing pending", "none", conf_code(D.cuStreamQuery(CU_STREAM_LEGACY)),
             "CUDA_SUCCESS");
}

#if CUDA_VERSION >= 12050   /* green contexts and cuStreamGetCtx_v2 */
/* ---------------------------------------------------------------- green contexts */

#define ENTRY(symbol, version) ((PFN_##symbol##_v##version)cucap_i_driver_entry_point_at(#symbol, version))

static void rows_green_context(void)
{
    CUdevResource all, part[1], rest;
    CUdevResourceDesc desc;
    CUgreenCtx g = NULL, got = NULL, got2 = NULL;
    CUcontext converted = NULL, ctx = NULL, ctx2 = NULL, v1 = NULL;
    CUstream gs = NULL, made = NULL;
    unsigned int groups = 1;
    PFN_cuStreamGetCtx_v9020 get_ctx_v1 = (PFN_cuStreamGetCtx_v9020)cucap_i_driver_entry_point_at("cuStreamGetCtx", 9020);

    if (!cucap_i_driver_entry_point_at("cuGreenCtxStreamCreate", 12050)) {
        conf_row("green contexts", "none", "not available", "available");
        return;
    }
    ENTRY(cuDeviceGetDevResource, 12040)(conf_dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    ENTRY(cuDevSmResourceSplitByCount, 12040)(part, &groups, &all, &rest, 0, 8);
    ENTRY(cuDevResourceGenerateDesc, 12040)(&desc, part, 1);
    ENTRY(cuGreenCtxCreate, 12040)(&g, desc, conf_dev, CU_GREEN_CTX_DEFAULT_STREAM);
    ENTRY(cuGreenCtxStreamCreate, 12050)(&gs, g, CU_STREAM_NON_BLOCKING, 0);
    ENTRY(cuCtxFromGreenCtx, 12040)(&converted, g);
    snprintf(observed, sizeof observed, "split into %u group of %s SMs (of %s)", groups,
             part[0].sm.smCount >= 8 ? ">= 8" : "< 8", part[0].sm.smCount < all.sm.smCount ? "fewer" : "all");
    conf_row("cuDevSmResourceSplitByCount(minCount 8) of device 0's SMs", "none", observed,
             "split into 1 group of >= 8 SMs (of fewer)");
    D.cuStreamGetCtx_v2(gs, &ctx, &got);
    snprintf(observed, sizeof observed, "green %s; context %s", got == g ? "the green context" : "other",
             ctx == conf_ctx ? "the primary context" : ctx == converted ? "the converted context" : "other");
    conf_row("cuStreamGetCtx_v2 on a stream of cuGreenCtxStreamCreate", "none", observed,
             "green the green context; context the primary context");
    if (get_ctx_v1)
        get_ctx_v1(gs, &v1);
    conf_row("cuStreamGetCtx (9.2 variant) on a stream of cuGreenCtxStreamCreate", "none",
             v1 == converted ? "the converted context" : v1 == conf_ctx ? "the primary context" : "other",
             "the converted context");
    D.cuCtxSetCurrent(converted);
    D.cuStreamCreate(&made, CU_STREAM_NON_BLOCKING);
    D.cuCtxSetCurrent(conf_ctx);
    D.cuStreamGetCtx_v2(made, &ctx2, &got2);
    conf_row("cuStreamCreate with cuCtxFromGreenCtx's context current", "none",
             got2 == g ? "a stream of the green context" : "a stream of another context",
             "a stream of the green context");
    D.cuStreamDestroy(made);
    D.cuStreamDestroy(gs);
    ENTRY(cuGreenCtxDestroy, 12040)(g);
}

#endif

/* ---------------------------------------------------------------- found by the differential run */

static void rows_differential_findings(void)
{
    CUstream s = conf_stream(), other = conf_stream();
    CUgraph g = NULL, bodies[1] = { NULL };
    CUgraphExec exec = NULL;
    CUgraphConditionalHandle h;
    CUmemoryPool pool = NULL;
    CUdeviceptr p = 0;
    CUevent ev = NULL;
    struct objects o;
    CUresult before, after, rc;
    unsigned int result = 0;

    /* a graph allocation freed outside the graph, before and after the graph ran */
    D.cuDeviceGetDefaultMemPool(&pool, conf_dev);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemAllocFromPoolAsync(&p, 256, pool, s);
    D.cuStreamEndCapture(s, &g);
    before = D.cuMemFreeAsync(p, other);
    instantiate(&exec, g, NULL);
    D.cuGraphLaunch(exec, s);
    D.cuStreamSynchronize(s);
    after = D.cuMemFreeAsync(p, other);
    D.cuStreamSynchronize(other);
    snprintf(observed, sizeof observed, "before the graph ran %s; after %s", conf_code(before), conf_code(after));
    conf_row("cuMemFreeAsync outside the graph of a captured allocation", "global", observed,
             "before the graph ran CUDA_ERROR_INVALID_VALUE; after CUDA_SUCCESS");
    D.cuGraphExecDestroy(exec);
    D.cuGraphDestroy(g);

    /* a launch into a capture that is invalidated already */
    make_objects(&o);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    D.cuStreamSynchronize(s);
    rc = D.cuGraphLaunch(o.exec, s);
    snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
    conf_row("cuGraphLaunch into an invalidated capture", "relaxed", observed,
             "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
    conf_drop(s);
    drop_objects(&o);
    s = conf_stream();

    /* a capture waiting on an event recorded outside any capture */
    D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    D.cuEventRecord(ev, other);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    rc = D.cuStreamWaitEvent(s, ev, 0);
    snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
    conf_row("cuStreamWaitEvent in a capture on an event recorded outside captures", "relaxed", observed,
             "CUDA_ERROR_STREAM_CAPTURE_ISOLATION, capture INVALIDATED");
    conf_drop(s);
    D.cuEventDestroy(ev);
    s = conf_stream();

    /* a conditional node's body graph instantiated on its own */
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 1, &h, bodies);
    exec = NULL;
    rc = instantiate(&exec, bodies[0], &result);
    snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
    conf_row("instantiate a conditional body graph on its own, during the capture", "relaxed", observed,
             "CUDA_ERROR_NOT_SUPPORTED, capture ACTIVE");
    if (exec)
        D.cuGraphExecDestroy(exec);
    conf_drop(s);
    s = conf_stream();

    /* a free node of memory that is not a graph allocation */
    D.cuMemAlloc(&p, 256);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    rc = D.cuMemFreeAsync(p, s);
    snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
    conf_row("cuMemFreeAsync in a capture of memory allocated outside it", "relaxed", observed,
             "CUDA_ERROR_INVALID_VALUE, capture ACTIVE");
    conf_drop(s);
    D.cuMemFree(p);
    s = conf_stream();

    /* a graph with a conditional node instantiated a second time */
    {
        CUgraphExec first = NULL, second = NULL;
        CUresult again;
        g = NULL;
        D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
        conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 0, &h, bodies);
        D.cuStreamEndCapture(s, &g);
        rc = instantiate(&first, g, NULL);
        again = instantiate(&second, g, NULL);
        snprintf(observed, sizeof observed, "first %s, second while the first lives %s", conf_code(rc),
                 conf_code(again));
        conf_row("instantiate a graph with a conditional node twice", "relaxed", observed,
                 "first CUDA_SUCCESS, second while the first lives CUDA_ERROR_NOT_SUPPORTED");
        if (second)
            D.cuGraphExecDestroy(second);
        if (first)
            D.cuGraphExecDestroy(first);
        if (g)
            D.cuGraphDestroy(g);
    }
    D.cuStreamDestroy(s);
    D.cuStreamDestroy(other);
}

void conf_rows_isolation(void)
{
    rows_calls_from_another_thread();
    rows_no_current_context();
    rows_launch_into_capture();
    rows_pool_create_too_large();
    body_node_row(0);
    body_node_row(1);
    rows_legacy_stream_query();
#if CUDA_VERSION >= 12050
    rows_green_context();
#endif
    rows_differential_findings();
}
