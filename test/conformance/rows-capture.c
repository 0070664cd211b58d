/* Rows of doc/driver-facts.md: the calling thread's capture mode, another
 * thread, ending a capture, and the further capture facts. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

#define FOR_EACH_MODE(m) for (const CUstreamCaptureMode *m = conf_modes; m < conf_modes + 3; m++)

static char observed[512];

static const char *result(CUresult rc, CUstream s)
{
    snprintf(observed, sizeof observed, "%s, capture %s", conf_code(rc), conf_status(s));
    return observed;
}

static CUmemoryPool default_pool(void)
{
    CUmemoryPool pool = NULL;
    D.cuDeviceGetDefaultMemPool(&pool, conf_dev);
    return pool;
}

static CUstreamCaptureMode exchange(CUstreamCaptureMode mode)
{
    D.cuThreadExchangeStreamCaptureMode(&mode);
    return mode;
}

/* ---------------------------------------------------------------- the calling thread's mode */

static CUresult pool_create(CUmemoryPool *pool)
{
    CUmemPoolProps props;

    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = conf_dev;
    return D.cuMemPoolCreate(pool, &props);
}

struct exchange_probe {
    CUstreamCaptureMode capture_mode;
    char text[128];
};

/* On a thread that never exchanged: the first exchange returns GLOBAL even
 * while the thread runs a capture of another mode. */
static void first_exchange(void *p)
{
    struct exchange_probe *probe = p;
    CUstream s = conf_stream();
    CUstreamCaptureMode first, back;

    D.cuStreamBeginCapture(s, probe->capture_mode);
    first = exchange(CU_STREAM_CAPTURE_MODE_RELAXED);
    back = exchange(first);
    snprintf(probe->text, sizeof probe->text, "first exchange gives %s, exchanging back gives %s",
             conf_mode_name(first), conf_mode_name(back));
    conf_drop(s);
}

void conf_rows_thread_mode(void)
{
    FOR_EACH_MODE(m) {
        const char *mode = conf_mode_name(*m);
        int relaxed = *m == CU_STREAM_CAPTURE_MODE_RELAXED;
        CUstream s;
        CUmemoryPool pool = NULL, created = NULL;
        CUresult rc, rc2;
        cuuint64_t threshold = 0;
        CUdeviceptr ptr = 0;
        CUstreamCaptureMode saved;
        struct exchange_probe probe;

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuDeviceGetDefaultMemPool(&pool, conf_dev);
        rc2 = D.cuDeviceGetMemPool(&pool, conf_dev);
        snprintf(observed, sizeof observed, "%s and %s, capture %s", conf_code(rc), conf_code(rc2), conf_status(s));
        conf_row("cuDeviceGetDefaultMemPool, cuDeviceGetMemPool", mode, observed,
                 "CUDA_SUCCESS and CUDA_SUCCESS, capture ACTIVE");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuMemPoolGetAttribute(default_pool(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        conf_row("cuMemPoolGetAttribute(RELEASE_THRESHOLD), thread mode as it is", mode, result(rc, s),
                 relaxed ? "CUDA_SUCCESS, capture ACTIVE"
                         : "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        saved = exchange(CU_STREAM_CAPTURE_MODE_RELAXED);
        rc = D.cuMemPoolGetAttribute(default_pool(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        conf_row("cuMemPoolGetAttribute(RELEASE_THRESHOLD), thread mode RELAXED", mode, result(rc, s),
                 "CUDA_SUCCESS, capture ACTIVE");
        rc = D.cuMemPoolSetAttribute(default_pool(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        conf_row("cuMemPoolSetAttribute(RELEASE_THRESHOLD, unchanged value), thread mode RELAXED", mode,
                 result(rc, s), "CUDA_SUCCESS, capture ACTIVE");
        rc = pool_create(&created);
        conf_row("cuMemPoolCreate, thread mode RELAXED", mode, result(rc, s), "CUDA_SUCCESS, capture ACTIVE");
        exchange(saved);
        conf_drop(s);
        if (created)
            D.cuMemPoolDestroy(created);
        created = NULL;

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuMemAllocFromPoolAsync(&ptr, 4096, default_pool(), s);
        rc2 = rc == CUDA_SUCCESS ? D.cuMemFreeAsync(ptr, s) : rc;
        snprintf(observed, sizeof observed, "%s and %s, capture %s", conf_code(rc), conf_code(rc2), conf_status(s));
        {
            CUgraph g = NULL;
            CUgraphNode nodes[8];
            size_t n = 8, i;
            int alloc = 0, freed = 0;
            rc = D.cuStreamEndCapture(s, &g);
            if (rc == CUDA_SUCCESS && D.cuGraphGetNodes(g, nodes, &n) == CUDA_SUCCESS)
                for (i = 0; i < n && i < 8; i++) {
                    CUgraphNodeType t;
                    D.cuGraphNodeGetType(nodes[i], &t);
                    alloc += t == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
                    freed += t == CU_GRAPH_NODE_TYPE_MEM_FREE;
                }
            conf_append(observed, sizeof observed,
                     "; graph has %d allocation and %d free node(s)", alloc, freed);
            if (g)
                D.cuGraphDestroy(g);
        }
        conf_row("cuMemAllocFromPoolAsync and cuMemFreeAsync on the capturing stream", mode, observed,
                 "CUDA_SUCCESS and CUDA_SUCCESS, capture ACTIVE; graph has 1 allocation and 1 free node(s)");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = pool_create(&created);
        conf_row("cuMemPoolCreate, thread mode as it is", mode, result(rc, s),
                 relaxed ? "CUDA_SUCCESS, capture ACTIVE"
                         : "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        conf_drop(s);
        if (rc == CUDA_SUCCESS)
            D.cuMemPoolDestroy(created);
        created = NULL;

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuMemAlloc(&ptr, 4096);
        conf_row("cuMemAlloc", mode, result(rc, s),
                 relaxed ? "CUDA_SUCCESS, capture ACTIVE"
                         : "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        conf_drop(s);
        if (rc == CUDA_SUCCESS)
            D.cuMemFree(ptr);

        s = conf_stream();
        D.cuMemAlloc(&ptr, 4096);
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuStreamSynchronize(s);
        conf_row("cuStreamSynchronize on the capturing stream", mode, result(rc, s),
                 "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        rc = D.cuMemsetD8Async(ptr, 1, 4096, s);
        conf_row("cuMemsetD8Async on the invalidated stream", mode, result(rc, s),
                 "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, capture INVALIDATED");
        conf_drop(s);
        D.cuMemFree(ptr);

        probe.capture_mode = *m;
        conf_on_thread(first_exchange, &probe);
        conf_row("cuThreadExchangeStreamCaptureMode on a thread that never exchanged", mode, probe.text,
                 "first exchange gives global, exchanging back gives relaxed");
    }
}

/* ---------------------------------------------------------------- another thread */

struct other_call {
    int relaxed;
    int use_alloc;
    CUresult rc;
};

static void other_thread_call(void *p)
{
    struct other_call *call = p;
    CUstreamCaptureMode saved = CU_STREAM_CAPTURE_MODE_RELAXED;
    cuuint64_t threshold;
    CUdeviceptr ptr;

    if (call->relaxed)
        D.cuThreadExchangeStreamCaptureMode(&saved);
    if (call->use_alloc) {
        call->rc = D.cuMemAlloc(&ptr, 4096);
        if (call->rc == CUDA_SUCCESS) {
            CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
            D.cuThreadExchangeStreamCaptureMode(&relaxed);
            D.cuMemFree(ptr);
            D.cuThreadExchangeStreamCaptureMode(&relaxed);
        }
    } else {
        call->rc = D.cuMemPoolGetAttribute(default_pool(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
    }
    if (call->relaxed)
        D.cuThreadExchangeStreamCaptureMode(&saved);
}

void conf_rows_other_thread(void)
{
    static const char *const names[2] = { "cuMemPoolGetAttribute", "cuMemAlloc" };
    int relaxed, use_alloc;

    FOR_EACH_MODE(m) {
        for (relaxed = 0; relaxed < 2; relaxed++)
            for (use_alloc = 0; use_alloc < 2; use_alloc++) {
                struct other_call call = { relaxed, use_alloc, CUDA_SUCCESS };
                CUstream s = conf_stream();
                char what[160];
                int refused = !relaxed && *m == CU_STREAM_CAPTURE_MODE_GLOBAL;

                D.cuStreamBeginCapture(s, *m);
                conf_on_thread(other_thread_call, &call);
                snprintf(what, sizeof what, "%s from another thread in %s mode", names[use_alloc],
                         relaxed ? "RELAXED" : "its default");
                conf_row(what, conf_mode_name(*m), result(call.rc, s),
                         refused ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED"
                                 : "CUDA_SUCCESS, capture ACTIVE");
                conf_drop(s);
            }
    }
}

/* ---------------------------------------------------------------- ending a capture */

static const char *ended(CUresult rc, CUgraph g, CUstream s)
{
    snprintf(observed, sizeof observed, "%s, graph %s, stream %s", conf_code(rc), g ? "returned" : "NULL",
             conf_status(s));
    return observed;
}

void conf_rows_ending(void)
{
    CUdeviceptr ptr;

    D.cuMemAlloc(&ptr, 4096);
    FOR_EACH_MODE(m) {
        const char *mode = conf_mode_name(*m);
        CUstream s, f;
        CUgraph g;
        CUresult rc;
        char text[512];

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        D.cuMemsetD8Async(ptr, 1, 16, s);
        D.cuStreamSynchronize(s);
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        conf_row("cuStreamEndCapture of an invalidated capture", mode, ended(rc, g, s),
                 "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL, stream NONE");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        f = conf_fork(s);
        D.cuMemsetD8Async(ptr, 2, 16, f);
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        text[0] = '\0';
        conf_append(text, sizeof text, "%s; fork %s", ended(rc, g, s), conf_status(f));
        rc = D.cuStreamEndCapture(f, &g);
        conf_append(text, sizeof text, "; ending the fork: %s", conf_code(rc));
        conf_row("cuStreamEndCapture with a fork that has work and was never joined back", mode, text,
                 "CUDA_ERROR_STREAM_CAPTURE_UNJOINED, graph NULL, stream NONE; fork NONE; "
                 "ending the fork: CUDA_ERROR_ILLEGAL_STATE");
        conf_drop(f);
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        f = conf_fork(s);
        D.cuMemsetD8Async(ptr, 4, 16, f);
        conf_join(s, f);
        {
            CUstreamCaptureStatus fs = CU_STREAM_CAPTURE_STATUS_NONE, os = CU_STREAM_CAPTURE_STATUS_NONE;
            cuuint64_t fid = 0, oid = 0;
            D.cuStreamGetCaptureInfo(f, &fs, &fid, NULL, NULL, NULL, NULL);
            D.cuStreamGetCaptureInfo(s, &os, &oid, NULL, NULL, NULL, NULL);
            snprintf(text, sizeof text, "fork %s, %s the origin's capture", conf_status(f),
                     fs == os && fid == oid && fid ? "in" : "not in");
        }
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        conf_append(text, sizeof text, "; ending the origin: %s; fork %s", ended(rc, g, s), conf_status(f));
        conf_row("a fork joined back stays in the capture until the origin's end takes both out", mode, text,
                 "fork ACTIVE, in the origin's capture; ending the origin: CUDA_SUCCESS, graph returned, stream "
                 "NONE; fork NONE");
        if (g)
            D.cuGraphDestroy(g);
        conf_drop(f);
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        f = conf_fork(s);
        D.cuMemsetD8Async(ptr, 3, 16, f);
        g = NULL;
        rc = D.cuStreamEndCapture(f, &g);
        snprintf(text, sizeof text, "%s, graph %s; origin %s, fork %s", conf_code(rc), g ? "returned" : "NULL",
                 conf_status(s), conf_status(f));
        rc = D.cuStreamEndCapture(s, &g);
        conf_append(text, sizeof text, "; ending the origin: %s; fork %s",
                 ended(rc, g, s), conf_status(f));
        conf_row("cuStreamEndCapture on the fork instead of the origin", mode, text,
                 "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, graph NULL; origin INVALIDATED, fork INVALIDATED; "
                 "ending the origin: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL, stream NONE; fork NONE");
        conf_drop(f);
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        D.cuMemsetD8Async(ptr, 4, 16, s);
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        conf_row("cuStreamEndCapture of a normal capture", mode, ended(rc, g, s),
                 "CUDA_SUCCESS, graph returned, stream NONE");
        if (g)
            D.cuGraphDestroy(g);
        conf_drop(s);
    }
    D.cuMemFree(ptr);
}

/* ---------------------------------------------------------------- more capture facts */

struct cross_end {
    CUstream s;
    CUresult rc;
    CUgraph g;
};

static void end_on_other_thread(void *p)
{
    struct cross_end *x = p;
    x->g = NULL;
    x->rc = D.cuStreamEndCapture(x->s, &x->g);
}

void conf_rows_more(void)
{
    CUdeviceptr ptr;
    char text[512];
    CUresult rc;
    CUstream s, f;
    CUgraph g;

    D.cuMemAlloc(&ptr, 4096);
    FOR_EACH_MODE(m) {
        const char *mode = conf_mode_name(*m);
        CUresult r[6];
        CUevent e = NULL;
        CUstream t = NULL;

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        r[0] = D.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING);
        r[1] = D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        r[2] = D.cuEventRecord(e, s);
        r[3] = D.cuStreamWaitEvent(t, e, 0);
        r[4] = D.cuEventDestroy(e);
        D.cuMemsetD8Async(ptr, 5, 16, t);
        conf_join(s, t);
        r[5] = D.cuStreamDestroy(t);
        snprintf(text, sizeof text, "%s %s %s %s %s %s, capture %s", conf_code(r[0]), conf_code(r[1]),
                 conf_code(r[2]), conf_code(r[3]), conf_code(r[4]), conf_code(r[5]), conf_status(s));
        conf_row("cuStreamCreate, cuEventCreate, cuEventRecord, cuStreamWaitEvent, cuEventDestroy, "
                 "cuStreamDestroy of the joined fork", mode, text,
                 "CUDA_SUCCESS CUDA_SUCCESS CUDA_SUCCESS CUDA_SUCCESS CUDA_SUCCESS CUDA_SUCCESS, capture ACTIVE");
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        conf_row("cuStreamEndCapture after the joined fork was destroyed", mode, ended(rc, g, s),
                 "CUDA_SUCCESS, graph returned, stream NONE");
        if (g)
            D.cuGraphDestroy(g);
        conf_drop(s);

        {
            CUgraphConditionalHandle h;
            CUgraph body = NULL, body_out = NULL;
            CUstream b = conf_stream();
            CUresult rc2;
            s = conf_stream();
            D.cuStreamBeginCapture(s, *m);
            rc = conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 1, &h, &body);
            rc2 = D.cuStreamBeginCaptureToGraph(b, body, NULL, NULL, 0, *m);
            snprintf(text, sizeof text, "%s and %s, capture %s", conf_code(rc), conf_code(rc2), conf_status(s));
            conf_row("cuGraphConditionalHandleCreate + conditional cuGraphAddNode, cuStreamBeginCaptureToGraph",
                     mode, text, "CUDA_SUCCESS and CUDA_SUCCESS, capture ACTIVE");
            D.cuMemsetD8Async(ptr, 0x6b, 64, b);
            rc = D.cuStreamEndCapture(b, &body_out);
            snprintf(text, sizeof text, "%s, %s", conf_code(rc),
                     body_out == body ? "the body graph itself" : "another graph");
            g = NULL;
            rc = D.cuStreamEndCapture(s, &g);
            {
                CUDA_GRAPH_INSTANTIATE_PARAMS params;
                CUgraphExec exec = NULL;
                unsigned char host[64];
                memset(&params, 0, sizeof params);
                D.cuMemsetD8(ptr, 0, 64);
                D.cuStreamSynchronize(NULL);   /* the launch's stream does not wait for the legacy one */
                rc2 = D.cuGraphInstantiateWithParams(&exec, g, &params);
                conf_append(text, sizeof text, "; parent end %s; instantiate %s",
                         conf_code(rc), conf_code(rc2));
                rc = exec ? D.cuGraphLaunch(exec, s) : CUDA_ERROR_INVALID_VALUE;
                D.cuStreamSynchronize(s);
                memset(host, 0, sizeof host);
                D.cuMemcpyDtoH(host, ptr, sizeof host);
                conf_append(text, sizeof text, "; launch %s; body ran: %s",
                         conf_code(rc), host[0] == 0x6b && host[63] == 0x6b ? "yes" : "no");
                if (exec)
                    D.cuGraphExecDestroy(exec);
            }
            conf_row("IF node, body captured into the body graph, condition set", mode, text,
                     "CUDA_SUCCESS, the body graph itself; parent end CUDA_SUCCESS; instantiate CUDA_SUCCESS; "
                     "launch CUDA_SUCCESS; body ran: yes");
            if (g)
                D.cuGraphDestroy(g);
            conf_drop(b);
            conf_drop(s);
        }

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        D.cuStreamSynchronize(s);
        {
            CUstreamCaptureStatus st;
            /* a sentinel shows whether the driver writes graph_out at all */
            CUgraph info_graph = (CUgraph)&st;
            rc = D.cuStreamGetCaptureInfo(s, &st, NULL, &info_graph, NULL, NULL, NULL);
            snprintf(text, sizeof text, "%s, status %s, graph_out %s", conf_code(rc), conf_status_name(st),
                     info_graph == (CUgraph)&st ? "not written" : info_graph ? "written" : "written NULL");
        }
        conf_row("cuStreamGetCaptureInfo while invalidated", mode, text,
                 "CUDA_SUCCESS, status INVALIDATED, graph_out not written");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        f = conf_fork(s);
        D.cuMemsetD8Async(ptr, 7, 16, f);
        rc = D.cuStreamDestroy(f);
        snprintf(text, sizeof text, "%s, origin %s", conf_code(rc), conf_status(s));
        g = NULL;
        rc = D.cuStreamEndCapture(s, &g);
        conf_append(text, sizeof text, "; ending the origin: %s", ended(rc, g, s));
        conf_row("cuStreamDestroy of an unjoined fork, then end", mode, text,
                 "CUDA_SUCCESS, origin ACTIVE; ending the origin: CUDA_ERROR_STREAM_CAPTURE_UNJOINED, graph NULL, "
                 "stream NONE");
        conf_drop(s);

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        f = conf_fork(s);
        D.cuMemsetD8Async(ptr, 8, 16, f);
        rc = D.cuStreamSynchronize(f);
        snprintf(text, sizeof text, "%s; origin %s, fork %s", conf_code(rc), conf_status(s), conf_status(f));
        g = NULL;
        rc = D.cuStreamEndCapture(f, &g);
        conf_append(text, sizeof text, "; ending the fork: %s", conf_code(rc));
        rc = D.cuStreamEndCapture(s, &g);
        conf_append(text, sizeof text, "; ending the origin: %s; fork %s",
                 ended(rc, g, s), conf_status(f));
        conf_row("cuStreamSynchronize on a fork", mode, text,
                 "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; origin INVALIDATED, fork INVALIDATED; ending the fork: "
                 "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; ending the origin: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "
                 "graph NULL, stream NONE; fork NONE");
        conf_drop(f);
        conf_drop(s);

        {
            CUstream a = conf_stream(), b = conf_stream();
            CUevent ev;
            CUgraph ga = NULL, gb = NULL;
            CUresult ra, rb;
            D.cuStreamBeginCapture(a, *m);
            D.cuStreamBeginCapture(b, *m);
            D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
            D.cuEventRecord(ev, b);
            rc = D.cuStreamWaitEvent(a, ev, 0);
            snprintf(text, sizeof text, "%s; A %s, B %s", conf_code(rc), conf_status(a), conf_status(b));
            ra = D.cuStreamEndCapture(a, &ga);
            rb = D.cuStreamEndCapture(b, &gb);
            conf_append(text, sizeof text, "; ends: %s graph %s, %s graph %s",
                     conf_code(ra), ga ? "returned" : "NULL", conf_code(rb), gb ? "returned" : "NULL");
            conf_row("cuStreamWaitEvent across two captures", mode, text,
                     "CUDA_ERROR_STREAM_CAPTURE_MERGE; A INVALIDATED, B INVALIDATED; ends: "
                     "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED graph NULL, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED graph NULL");
            D.cuEventDestroy(ev);
            conf_drop(a);
            conf_drop(b);
        }

        {
            struct cross_end x;
            s = conf_stream();
            D.cuStreamBeginCapture(s, *m);
            D.cuMemsetD8Async(ptr, 9, 16, s);
            x.s = s;
            conf_on_thread(end_on_other_thread, &x);
            text[0] = '\0';
            conf_append(text, sizeof text, "%s", ended(x.rc, x.g, s));
            if (x.g)
                D.cuGraphDestroy(x.g);
            g = NULL;
            rc = D.cuStreamEndCapture(s, &g);
            conf_append(text, sizeof text, "; ending on the right thread: %s",
                     conf_code(rc));
            conf_row("cuStreamEndCapture from another thread", mode, text,
                     *m == CU_STREAM_CAPTURE_MODE_RELAXED
                         ? "CUDA_SUCCESS, graph returned, stream NONE; ending on the right thread: CUDA_ERROR_ILLEGAL_STATE"
                         : "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, graph NULL, stream NONE; ending on the right "
                           "thread: CUDA_ERROR_ILLEGAL_STATE");
            conf_drop(s);
        }

        s = conf_stream();
        D.cuStreamBeginCapture(s, *m);
        rc = D.cuStreamBeginCapture(s, *m);
        conf_row("cuStreamBeginCapture on a capturing stream", mode, result(rc, s),
                 "CUDA_ERROR_ILLEGAL_STATE, capture ACTIVE");
        conf_drop(s);
    }

    s = conf_stream();
    g = NULL;
    {
        CUresult r2;
        rc = D.cuStreamEndCapture(s, &g);
        r2 = D.cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, CU_STREAM_ADD_CAPTURE_DEPENDENCIES);
        snprintf(text, sizeof text, "%s and %s", conf_code(rc), conf_code(r2));
        conf_row("cuStreamEndCapture, cuStreamUpdateCaptureDependencies on a stream not capturing", "-", text,
                 "CUDA_ERROR_ILLEGAL_STATE and CUDA_ERROR_ILLEGAL_STATE");
        rc = D.cuStreamGetCaptureInfo(s, NULL, NULL, NULL, NULL, NULL, NULL);
        conf_row("cuStreamGetCaptureInfo with a NULL status pointer", "-", conf_code(rc), "CUDA_ERROR_INVALID_VALUE");
    }
    conf_drop(s);

    {
        CUgraph lone;
        CUgraphConditionalHandle h;
        CUDA_GRAPH_INSTANTIATE_PARAMS params;
        CUgraphExec exec = NULL;
        CUgraphNode empty;
        D.cuGraphCreate(&lone, 0);
        D.cuGraphAddEmptyNode(&empty, lone, NULL, 0);
        D.cuGraphConditionalHandleCreate(&h, lone, conf_ctx, 0, 0);
        memset(&params, 0, sizeof params);
        rc = D.cuGraphInstantiateWithParams(&exec, lone, &params);
        snprintf(text, sizeof text, "%s, result_out %d, exec %s", conf_code(rc), (int)params.result_out,
                 exec ? "created" : "none");
        conf_row("cuGraphInstantiateWithParams with a handle on no conditional node", "-", text,
                 "CUDA_ERROR_INVALID_VALUE, result_out 5, exec none");
        if (exec)
            D.cuGraphExecDestroy(exec);
        D.cuGraphDestroy(lone);
    }

    {
        CUstreamCaptureMode mode = (CUstreamCaptureMode)7, back;
        rc = D.cuThreadExchangeStreamCaptureMode(&mode);
        back = mode;
        D.cuThreadExchangeStreamCaptureMode(&back);
        snprintf(text, sizeof text, "%s, exchanging back gives %d", conf_code(rc), (int)back);
        conf_row("cuThreadExchangeStreamCaptureMode with mode 7", "-", text, "CUDA_SUCCESS, exchanging back gives 7");
    }
    D.cuMemFree(ptr);
}

/* Stream identity: the id, not the handle (doc/driver-facts.md, "Stream
 * handles are not identities"). */
struct per_thread_id {
    pthread_barrier_t *both;
    unsigned long long id;
    CUresult rc;
};

static void *query_per_thread(void *p)
{
    struct per_thread_id *q = p;

    D.cuCtxSetCurrent(conf_ctx);
    q->rc = D.cuStreamGetId(CU_STREAM_PER_THREAD, &q->id);
    pthread_barrier_wait(q->both);   /* both threads live while both ask */
    return NULL;
}

void conf_rows_stream_ids(void)
{
    pthread_barrier_t both;
    struct per_thread_id q[2] = { { &both, 0, CUDA_SUCCESS }, { &both, 0, CUDA_SUCCESS } };
    unsigned long long legacy = 0, null = 1, first = 0, second = 0;
    pthread_t t[2];
    CUstream s = NULL;
    CUresult r[2];
    char text[256];
    int i;

    r[0] = D.cuStreamGetId(CU_STREAM_LEGACY, &legacy);
    r[1] = D.cuStreamGetId(NULL, &null);
    snprintf(text, sizeof text, "%s %s, %s", conf_code(r[0]), conf_code(r[1]), legacy == null ? "one id" : "two ids");
    conf_row("cuStreamGetId of CU_STREAM_LEGACY and of NULL", "-", text, "CUDA_SUCCESS CUDA_SUCCESS, one id");
    pthread_barrier_init(&both, NULL, 2);
    for (i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, query_per_thread, &q[i]);
    for (i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&both);
    snprintf(text, sizeof text, "%s %s, %s", conf_code(q[0].rc), conf_code(q[1].rc),
             q[0].id != q[1].id ? "two ids" : "one id");
    conf_row("cuStreamGetId of CU_STREAM_PER_THREAD in two live threads", "-", text,
             "CUDA_SUCCESS CUDA_SUCCESS, two ids");
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    r[0] = D.cuStreamGetId(s, &first);
    D.cuStreamDestroy(s);
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    r[1] = D.cuStreamGetId(s, &second);
    D.cuStreamDestroy(s);
    snprintf(text, sizeof text, "%s %s, %s", conf_code(r[0]), conf_code(r[1]), first != second ? "a new id" : "the same id");
    conf_row("cuStreamGetId of a stream made right after one was destroyed", "-", text,
             "CUDA_SUCCESS CUDA_SUCCESS, a new id");
}
