/* The simulator's loud crash paths: where the real driver crashes, the
 * simulator must stop the process with a message and SIGABRT.  Each
 * scenario runs in a forked child. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"
#include "sim-env.h"


static CUcontext ctx;

static void setup(void)
{
    use_simulated_driver();
    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

TestSuite(sim_fatal, .init = setup, .timeout = 30);

/* Run fn in a child; return its wait status and what it wrote to stderr. */
static int in_child(void (*fn)(void), char *text, size_t size)
{
    int fds[2], status = 0;
    ssize_t got;
    size_t used = 0;
    pid_t pid;

    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    while (used + 1 < size && (got = read(fds[0], text + used, size - used - 1)) > 0)
        used += (size_t)got;
    text[used] = '\0';
    close(fds[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* fn must stop the process with SIGABRT and a message holding both texts. */
static void expect_fatal(void (*fn)(void), const char *text1, const char *text2)
{
    char text[1024];
    int status = in_child(fn, text, sizeof text);

    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %#x, stderr: %s", status, text);
    cr_assert_not_null(strstr(text, text1), "%s", text);
    cr_assert_not_null(strstr(text, text2), "%s", text);
}

static void destroy_discarded_graph(void)
{
    CUstream s;
    CUstreamCaptureStatus st;
    CUgraph during = NULL, ended = NULL;
    CUdeviceptr d;

    D.cuMemAlloc(&d, 64);
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemsetD8Async(d, 1, 64, s);
    D.cuStreamGetCaptureInfo(s, &st, NULL, &during, NULL, NULL, NULL);
    D.cuStreamSynchronize(s);                 /* invalidates */
    D.cuStreamEndCapture(s, &ended);          /* NULL: the driver discarded the graph */
    D.cuGraphDestroy(during);                 /* the real driver segfaults here */
}

Test(sim_fatal, destroying_a_graph_the_driver_discarded)
{
    expect_fatal(destroy_discarded_graph, "cudasim: FATAL: cuGraphDestroy", "discarded");
}

static void end_parent_of_invalidated_body(void)
{
    CUstream s, b;
    CUstreamCaptureStatus st;
    CUgraph g, body_out = NULL, parent = NULL;
    const CUgraphNode *deps;
    size_t n;
    CUgraphConditionalHandle h;
    CUgraphNodeParams p;
    CUgraphNode node;
    CUdeviceptr d;

    D.cuMemAlloc(&d, 64);
    D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    D.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &n);
    D.cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_IF;
    p.conditional.size = 1;
    p.conditional.ctx = ctx;
    D.cuGraphAddNode(&node, g, deps, NULL, n, &p);
    D.cuStreamUpdateCaptureDependencies(s, &node, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    D.cuStreamBeginCaptureToGraph(b, p.conditional.phGraph_out[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemsetD8Async(d, 2, 64, b);
    D.cuStreamSynchronize(b);                 /* invalidates the body capture */
    D.cuStreamEndCapture(b, &body_out);       /* the driver frees the body graph */
    D.cuStreamEndCapture(s, &parent);         /* the real driver dies around here */
}

Test(sim_fatal, ending_the_parent_of_an_invalidated_direct_body)
{
    expect_fatal(end_parent_of_invalidated_body, "cudasim: FATAL: cuStreamEndCapture", "body");
}

static void destroy_graph_twice(void)
{
    CUgraph g;

    D.cuGraphCreate(&g, 0);
    D.cuGraphDestroy(g);
    D.cuGraphDestroy(g);
}

Test(sim_fatal, destroying_a_graph_twice)
{
    expect_fatal(destroy_graph_twice, "cudasim: FATAL: cuGraphDestroy", "already destroyed");
}
