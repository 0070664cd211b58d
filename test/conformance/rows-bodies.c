/* Rows of doc/driver-facts.md on conditional-node bodies, each scenario in a
 * process of its own (capturing straight into a body graph and
 * invalidating it kills the process), and rows measured beyond the facts
 * that the library depends on. */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"

/* ---------------------------------------------------------------- in the child */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static CUstreamCaptureMode mode_named(const char *name)
{
    if (!strcmp(name, "relaxed"))
        return CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!strcmp(name, "thread_local"))
        return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    return CU_STREAM_CAPTURE_MODE_GLOBAL;
}

/* Scenarios: "direct-body-first", "direct-parent-first": the body captured
 * with cuStreamBeginCaptureToGraph into the node's body graph, then
 * invalidated; "child-before", "child-after": the body captured standalone
 * and invalidated, the parent ended before or after the body; "child-ok":
 * the body captured standalone, attached as a child graph, and run. */
int conf_body_child(const char *scenario, const char *mode_name_arg)
{
    CUstreamCaptureMode mode = mode_named(mode_name_arg);
    int direct = !strncmp(scenario, "direct", 6);
    int parent_first = !strcmp(scenario, "direct-parent-first") || !strcmp(scenario, "child-after");
    int invalidate = strcmp(scenario, "child-ok") != 0;
    CUstream s, b;
    CUgraph body, body_graph = NULL, g = NULL;
    CUgraphConditionalHandle h;
    CUdeviceptr ptr;
    CUresult rc, body_rc;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec exec = NULL;
    unsigned char host[32];

    D.cuMemAlloc(&ptr, sizeof host);
    D.cuMemsetD8(ptr, 0, sizeof host);
    D.cuStreamSynchronize(NULL);   /* the launch's stream does not wait for the legacy one */
    s = conf_stream();
    b = conf_stream();
    D.cuStreamBeginCapture(s, mode);
    rc = conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 1, &h, &body);
    if (rc != CUDA_SUCCESS) {
        say("conditional node: %s; ", conf_code(rc));
        return 3;
    }
    if (direct)
        D.cuStreamBeginCaptureToGraph(b, body, NULL, NULL, 0, mode);
    else
        D.cuStreamBeginCapture(b, mode);
    D.cuMemsetD8Async(ptr, 0x5c, sizeof host, b);
    if (invalidate)
        D.cuStreamSynchronize(b);

    if (parent_first) {
        rc = D.cuStreamEndCapture(s, &g);
        say("parent end %s; ", conf_code(rc));
    }
    body_rc = D.cuStreamEndCapture(b, &body_graph);
    say("body end %s, graph %s; ", conf_code(body_rc), body_graph ? "returned" : "NULL");
    if (!direct && body_graph) {
        CUgraphNode child;
        rc = D.cuGraphAddChildGraphNode(&child, body, NULL, 0, body_graph);
        say("attach %s; ", conf_code(rc));
        D.cuGraphDestroy(body_graph);
    }
    if (!parent_first) {
        rc = D.cuStreamEndCapture(s, &g);
        if (!direct)
            say("parent end %s; ", conf_code(rc));
    }
    /* the next uses of the parent */
    memset(&params, 0, sizeof params);
    rc = g ? D.cuGraphInstantiateWithParams(&exec, g, &params) : CUDA_ERROR_INVALID_VALUE;
    if (exec) {
        rc = D.cuGraphLaunch(exec, s);
        D.cuStreamSynchronize(s);
    }
    if (!direct) {
        D.cuMemcpyDtoH(host, ptr, sizeof host);
        say("launch %s; body ran: %s; ", conf_code(rc), host[0] == 0x5c ? "yes" : "no");
    }
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (g)
        D.cuGraphDestroy(g);
    D.cuStreamDestroy(b);
    D.cuStreamDestroy(s);
    D.cuMemFree(ptr);
    return 0;
}

/* ---------------------------------------------------------------- in the parent */

static void run_child(const char *self, const char *scenario, const char *mode, char *out, size_t size)
{
    int fds[2], status = 0;
    pid_t pid;
    size_t used = 0;
    ssize_t got;

    out[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(out, size, "pipe failed");
        return;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(fds[1], STDOUT_FILENO);
        if (null >= 0)
            dup2(null, STDERR_FILENO);   /* not TAP; test-sim-fatal checks the simulator's message */
        close(fds[0]);
        close(fds[1]);
        execl(self, self, "--body-child", scenario, mode, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    while (pid > 0 && used + 1 < size && (got = read(fds[0], out + used, size - used - 1)) > 0)
        used += (size_t)got;
    out[used] = '\0';
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        snprintf(out + used, size - used, "could not run");
    else if (WIFSIGNALED(status))
        snprintf(out + used, size - used, "the process died by a signal");
    else
        snprintf(out + used, size - used, "the process exited with status %d", WEXITSTATUS(status));
}

void conf_rows_bodies(const char *self)
{
    static const char *const modes[2] = { "global", "relaxed" };
    char text[1024];
    int i;

    for (i = 0; i < 2; i++) {
        run_child(self, "direct-body-first", modes[i], text, sizeof text);
        conf_row("body captured into the body graph and invalidated, body ended first", modes[i], text,
                 "body end CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL; the process died by a signal");
        run_child(self, "direct-parent-first", modes[i], text, sizeof text);
        conf_row("body captured into the body graph and invalidated, parent ended first", modes[i], text,
                 "parent end CUDA_SUCCESS; body end CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL; "
                 "the process died by a signal");
        run_child(self, "child-before", modes[i], text, sizeof text);
        conf_row("body captured standalone and invalidated, parent ended after the body", modes[i], text,
                 "body end CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL; parent end CUDA_SUCCESS; "
                 "launch CUDA_SUCCESS; body ran: no; the process exited with status 0");
        run_child(self, "child-after", modes[i], text, sizeof text);
        conf_row("body captured standalone and invalidated, parent ended before the body", modes[i], text,
                 "parent end CUDA_SUCCESS; body end CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, graph NULL; "
                 "launch CUDA_SUCCESS; body ran: no; the process exited with status 0");
        run_child(self, "child-ok", modes[i], text, sizeof text);
        conf_row("body captured standalone, attached as a child graph, condition set", modes[i], text,
                 "body end CUDA_SUCCESS, graph returned; attach CUDA_SUCCESS; parent end CUDA_SUCCESS; "
                 "launch CUDA_SUCCESS; body ran: yes; the process exited with status 0");
    }
}

/* ---------------------------------------------------------------- measured beyond the facts */

struct legacy_work {
    CUdeviceptr d;
    CUresult rc;
};

static void memset_on_the_legacy_stream(void *p)
{
    struct legacy_work *w = p;

    w->rc = D.cuMemsetD8Async(w->d, 1, 64, NULL);
}

/* Work on the legacy stream, from another thread, while a blocking stream
 * captures in thread_local mode (CUDA documents the refusal as
 * cudaErrorStreamCaptureImplicit; not yet seen on the GPU when this row
 * was written). */
static void legacy_work_beside_a_blocking_capture(void)
{
    struct legacy_work w = { 0, CUDA_SUCCESS };
    CUstream s = NULL;
    char text[256];

    D.cuMemAlloc(&w.d, 64);
    D.cuStreamCreate(&s, 0);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    D.cuMemsetD8Async(w.d, 2, 64, s);
    conf_on_thread(memset_on_the_legacy_stream, &w);
    snprintf(text, sizeof text, "%s, capture %s", conf_code(w.rc), conf_status(s));
    conf_row("cuMemsetD8Async on the legacy stream from another thread while a blocking stream captures",
             "thread_local", text, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, capture INVALIDATED");
    conf_drop(s);
    D.cuMemFree(w.d);
}

void conf_rows_measured(void)
{
    char text[512];
    CUresult rc;
    CUstream s = conf_stream();
    CUgraph inner = NULL, outer;
    CUgraphConditionalHandle h;
    CUgraph body;
    CUgraphNode node;

    legacy_work_beside_a_blocking_capture();

    /* a captured graph that holds a conditional node, attached as a child graph */
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    conf_add_conditional(s, CU_GRAPH_COND_TYPE_IF, 1, 1, &h, &body);
    D.cuStreamEndCapture(s, &inner);
    D.cuGraphCreate(&outer, 0);
    rc = inner ? D.cuGraphAddChildGraphNode(&node, outer, NULL, 0, inner) : CUDA_ERROR_INVALID_VALUE;
    snprintf(text, sizeof text, "%s", conf_code(rc));
    conf_row("cuGraphAddChildGraphNode of a graph that holds a conditional node", "-", text,
             "CUDA_ERROR_NOT_SUPPORTED");
    D.cuGraphDestroy(outer);
    if (inner)
        D.cuGraphDestroy(inner);

    /* a graph in which a conditional handle was made that no node uses, attached as a child graph (seen
     * by the differential run on an H100: refused) */
    D.cuGraphCreate(&inner, 0);
    D.cuGraphAddEmptyNode(&node, inner, NULL, 0);
    rc = D.cuGraphConditionalHandleCreate(&h, inner, conf_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    D.cuGraphCreate(&outer, 0);
    if (rc == CUDA_SUCCESS)
        rc = D.cuGraphAddChildGraphNode(&node, outer, NULL, 0, inner);
    conf_row("cuGraphAddChildGraphNode of a graph that holds a conditional handle no node uses", "-", conf_code(rc),
             "CUDA_ERROR_NOT_SUPPORTED");
    D.cuGraphDestroy(outer);
    D.cuGraphDestroy(inner);

    /* a captured graph that holds allocation and free nodes, attached as a child graph */
    {
        CUmemoryPool pool;
        CUdeviceptr ptr;
        D.cuDeviceGetDefaultMemPool(&pool, conf_dev);
        inner = NULL;
        D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        D.cuMemAllocFromPoolAsync(&ptr, 256, pool, s);
        D.cuMemFreeAsync(ptr, s);
        D.cuStreamEndCapture(s, &inner);
        D.cuGraphCreate(&outer, 0);
        rc = inner ? D.cuGraphAddChildGraphNode(&node, outer, NULL, 0, inner) : CUDA_ERROR_INVALID_VALUE;
        conf_row("cuGraphAddChildGraphNode of a graph that holds allocation and free nodes", "-", conf_code(rc),
                 "CUDA_ERROR_NOT_SUPPORTED");
        D.cuGraphDestroy(outer);
        if (inner)
            D.cuGraphDestroy(inner);
    }

    /* pool destruction under a global capture, with and without relaxed mode */
    {
        CUmemPoolProps props;
        CUmemoryPool pool = NULL;
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        memset(&props, 0, sizeof props);
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = conf_dev;
        D.cuMemPoolCreate(&pool, &props);
        D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        rc = D.cuMemPoolDestroy(pool);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        snprintf(text, sizeof text, "%s, capture %s", conf_code(rc), conf_status(s));
        conf_row("cuMemPoolDestroy under a global capture, thread mode RELAXED", "global", text,
                 "CUDA_SUCCESS, capture ACTIVE");
        conf_drop(s);
        s = conf_stream();
        D.cuMemPoolCreate(&pool, &props);
        D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = D.cuMemPoolDestroy(pool);
        snprintf(text, sizeof text, "%s, capture %s", conf_code(rc), conf_status(s));
        conf_row("cuMemPoolDestroy under a global capture, thread mode as it is", "global", text,
                 "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture INVALIDATED");
        conf_drop(s);
        if (rc != CUDA_SUCCESS)
            D.cuMemPoolDestroy(pool);
        s = conf_stream();
    }

    /* a fork that joined the capture, did nothing, and was never joined back */
    {
        CUstream f;
        CUgraph g = NULL;
        CUdeviceptr ptr;
        D.cuMemAlloc(&ptr, 64);
        D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        D.cuMemsetD8Async(ptr, 1, 64, s);
        f = conf_fork(s);
        rc = D.cuStreamEndCapture(s, &g);
        snprintf(text, sizeof text, "%s, graph %s", conf_code(rc), g ? "returned" : "NULL");
        conf_row("cuStreamEndCapture with a fork that did no work and was never joined back", "global", text,
                 "CUDA_SUCCESS, graph returned");
        if (g)
            D.cuGraphDestroy(g);
        conf_drop(f);
        D.cuMemFree(ptr);
    }
    conf_drop(s);
}
