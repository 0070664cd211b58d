/* Rows of "Joining by capture dependencies": the join the library takes
 * when every fork is active in the root's capture. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

#define FORKS 3

/* Add fork's current capture dependencies to origin's, with the edge data. */
static CUresult join_by_dependencies(CUstream origin, CUstream fork)
{
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUresult rc;

    rc = D.cuStreamGetCaptureInfo(fork, &st, NULL, NULL, &deps, &edges, &n);
    if (rc != CUDA_SUCCESS || n == 0)
        return rc;
    return D.cuStreamUpdateCaptureDependencies(origin, (CUgraphNode *)deps, edges, n,
                                               CU_STREAM_ADD_CAPTURE_DEPENDENCIES);
}

/* Every fork's dependencies gathered (copied before the next query) and
 * added to origin's with one call, as the library's join does; the idle
 * fork's dependency is one the origin already has. */
static CUresult join_all_at_once(CUstream origin, const CUstream *forks)
{
    CUgraphNode nodes[16];
    CUgraphEdgeData edges[16];
    size_t total = 0, n, j;
    int i;

    for (i = 0; i < FORKS; i++) {
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        const CUgraphEdgeData *data = NULL;
        CUresult rc = D.cuStreamGetCaptureInfo(forks[i], &st, NULL, NULL, &deps, &data, &n);
        if (rc != CUDA_SUCCESS)
            return rc;
        for (j = 0; j < n && total < 16; j++, total++) {
            nodes[total] = deps[j];
            if (data)
                edges[total] = data[j];
            else
                memset(&edges[total], 0, sizeof edges[total]);
        }
    }
    return D.cuStreamUpdateCaptureDependencies(origin, nodes, edges, total, CU_STREAM_ADD_CAPTURE_DEPENDENCIES);
}

enum join_kind { BY_EVENTS, BY_DEPENDENCIES, ALL_AT_ONCE };

/* One capture: a memset on the origin, FORKS forks of which all but the
 * last do a memset, the join, a memset after it; the text says how many
 * dependencies the origin had after the join, the nodes and the launch. */
static void capture_with_join(CUdeviceptr d, enum join_kind how, char *text, size_t size)
{
    CUstream s = conf_stream(), forks[FORKS];
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    size_t n = 0, nodes = 0;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUresult join_rc = CUDA_SUCCESS, rc;
    int i;

    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    D.cuMemsetD8Async(d, 1, 16, s);
    for (i = 0; i < FORKS; i++) {
        forks[i] = conf_fork(s);
        if (i < FORKS - 1)
            D.cuMemsetD8Async(d + 16 * (i + 1), 2, 16, forks[i]);
    }
    if (how == ALL_AT_ONCE)
        join_rc = join_all_at_once(s, forks);
    for (i = 0; i < FORKS && how != ALL_AT_ONCE; i++) {
        if (how == BY_DEPENDENCIES)
            rc = join_by_dependencies(s, forks[i]);
        else
            conf_join(s, forks[i]), rc = CUDA_SUCCESS;
        if (join_rc == CUDA_SUCCESS)
            join_rc = rc;
    }
    D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n);
    D.cuMemsetD8Async(d, 3, 16, s);
    rc = D.cuStreamEndCapture(s, &g);
    if (g)
        D.cuGraphGetNodes(g, NULL, &nodes);
    memset(&params, 0, sizeof params);
    if (g && D.cuGraphInstantiateWithParams(&exec, g, &params) == CUDA_SUCCESS) {
        conf_append(text, size, "join %s, %zu dependencies after it, end %s, %zu nodes, launch %s",
                    conf_code(join_rc), n, conf_code(rc), nodes, conf_code(D.cuGraphLaunch(exec, s)));
        D.cuStreamSynchronize(s);
        D.cuGraphExecDestroy(exec);
    } else {
        conf_append(text, size, "join %s, %zu dependencies after it, end %s, %zu nodes, instantiate failed",
                    conf_code(join_rc), n, conf_code(rc), nodes);
    }
    if (g)
        D.cuGraphDestroy(g);
    for (i = 0; i < FORKS; i++)
        conf_drop(forks[i]);
    conf_drop(s);
}

enum fork_work { MEMSET_CAPTURED, EMPTY_NODE_SET, CONDITIONAL_SET, WHILE_BY_LIBRARY_SHAPE };

/* A fork whose only work is a node added to the capture's graph by hand
 * (cuGraphAddNode at the fork's capture point, then the fork's
 * dependencies SET to it), never joined: what the origin's end says. */
static const char *end_with_unjoined_fork(CUdeviceptr d, enum fork_work work, char *text, size_t size)
{
    CUstream s = conf_stream(), fork;
    CUgraph g = NULL;
    CUresult rc = CUDA_SUCCESS;

    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemsetD8Async(d, 1, 16, s);
    fork = conf_fork(s);
    if (work == MEMSET_CAPTURED) {
        rc = D.cuMemsetD8Async(d + 16, 2, 16, fork);
    } else if (work == EMPTY_NODE_SET) {
        CUstreamCaptureStatus st;
        CUgraph cg = NULL;
        const CUgraphNode *deps = NULL;
        size_t n = 0;
        CUgraphNode node = NULL;
        if ((rc = D.cuStreamGetCaptureInfo(fork, &st, NULL, &cg, &deps, NULL, &n)) == CUDA_SUCCESS &&
            (rc = D.cuGraphAddEmptyNode(&node, cg, deps, n)) == CUDA_SUCCESS)
            rc = D.cuStreamUpdateCaptureDependencies(fork, &node, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    } else {
        CUgraphConditionalHandle h;
        CUgraph bodies[1];
        rc = conf_add_conditional(fork, work == CONDITIONAL_SET ? CU_GRAPH_COND_TYPE_IF : CU_GRAPH_COND_TYPE_WHILE, 1,
                                  0, &h, bodies);
    }
    conf_append(text, size, "work %s, end %s", conf_code(rc), conf_code(D.cuStreamEndCapture(s, &g)));
    if (g)
        D.cuGraphDestroy(g);
    conf_drop(fork);
    conf_drop(s);
    return text;
}

void conf_rows_join(void)
{
    CUdeviceptr d = 0;
    char events[256] = "", dependencies[256] = "", at_once[256] = "";

    if (D.cuMemAlloc(&d, 16 * (FORKS + 1)) != CUDA_SUCCESS) {
        conf_row("cuMemAlloc for the join rows", "-", "failed", "CUDA_SUCCESS");
        return;
    }
    capture_with_join(d, BY_EVENTS, events, sizeof events);
    capture_with_join(d, BY_DEPENDENCIES, dependencies, sizeof dependencies);
    capture_with_join(d, ALL_AT_ONCE, at_once, sizeof at_once);
    conf_row("join of 3 forks (2 with a memset) by event record and wait", "relaxed", events,
             "join CUDA_SUCCESS, 3 dependencies after it, end CUDA_SUCCESS, 4 nodes, launch CUDA_SUCCESS");
    conf_row("the same join by cuStreamGetCaptureInfo (with edge data) and cuStreamUpdateCaptureDependencies(ADD)",
             "relaxed", dependencies,
             "join CUDA_SUCCESS, 3 dependencies after it, end CUDA_SUCCESS, 4 nodes, launch CUDA_SUCCESS");
    conf_row("the same join with every fork's dependencies added by one cuStreamUpdateCaptureDependencies(ADD), "
             "one of them a node the origin already depends on", "relaxed", at_once,
             "join CUDA_SUCCESS, 3 dependencies after it, end CUDA_SUCCESS, 4 nodes, launch CUDA_SUCCESS");
    {
        char t[4][128] = { "", "", "", "" };
        conf_row("a fork with a captured memset, never joined", "global",
                 end_with_unjoined_fork(d, MEMSET_CAPTURED, t[0], sizeof t[0]),
                 "work CUDA_SUCCESS, end CUDA_ERROR_STREAM_CAPTURE_UNJOINED");
        conf_row("a fork whose only work is an empty node added by hand (cuGraphAddNode, dependencies SET), never "
                 "joined", "global", end_with_unjoined_fork(d, EMPTY_NODE_SET, t[1], sizeof t[1]),
                 "work CUDA_SUCCESS, end CUDA_SUCCESS");
        conf_row("a fork whose only work is an IF node added by hand, never joined", "global",
                 end_with_unjoined_fork(d, CONDITIONAL_SET, t[2], sizeof t[2]), "work CUDA_SUCCESS, end CUDA_SUCCESS");
        conf_row("a fork whose only work is a WHILE node added by hand, never joined", "global",
                 end_with_unjoined_fork(d, WHILE_BY_LIBRARY_SHAPE, t[3], sizeof t[3]),
                 "work CUDA_SUCCESS, end CUDA_SUCCESS");
    }
    D.cuMemFree(d);
}
