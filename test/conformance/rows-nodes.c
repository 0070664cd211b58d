/* Rows of the nodes an executable graph changes one by one (named nodes):
 * event record and wait nodes made by a capture, the nodes that can be
 * disabled, an embedded graph replaced by one of another shape. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* A capture of one memset of 16 bytes at d, or of two with `two`. */
static CUgraph memsets(CUdeviceptr d, int two)
{
    CUstream s = conf_stream();
    CUgraph g = NULL;

    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    D.cuMemsetD8Async(d, 1, 16, s);
    if (two)
        D.cuMemsetD8Async(d + 16, 1, 16, s);
    D.cuStreamEndCapture(s, &g);
    conf_drop(s);
    return g;
}

static void event_nodes_captured(void)
{
    CUstream s = conf_stream();
    CUevent recorded, waited;
    CUgraphNode nodes[4];
    CUgraphNodeType types[4] = { 0 };
    CUgraph g = NULL;
    size_t n = 4, i;
    CUresult rc1, rc2;
    char text[256];

    D.cuEventCreate(&recorded, CU_EVENT_DISABLE_TIMING);
    D.cuEventCreate(&waited, CU_EVENT_DISABLE_TIMING);
    D.cuEventRecord(waited, s);
    D.cuStreamSynchronize(s);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    rc1 = D.cuStreamWaitEvent(s, waited, CU_EVENT_WAIT_EXTERNAL);
    rc2 = D.cuEventRecordWithFlags(recorded, s, CU_EVENT_RECORD_EXTERNAL);
    D.cuStreamEndCapture(s, &g);
    if (!g || D.cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS)
        n = 0;
    for (i = 0; i < n && i < 4; i++)
        D.cuGraphNodeGetType(nodes[i], &types[i]);
    snprintf(text, sizeof text, "%s, %s; %zu nodes: %s, %s", conf_code(rc1), conf_code(rc2), n,
             n > 0 && types[0] == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? "wait" : "other",
             n > 1 && types[1] == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? "record" : "other");
    conf_row("cuStreamWaitEvent(WAIT_EXTERNAL) and cuEventRecordWithFlags(RECORD_EXTERNAL) in a capture", "THREAD_LOCAL",
             text, "CUDA_SUCCESS, CUDA_SUCCESS; 2 nodes: wait, record");
    if (g)
        D.cuGraphDestroy(g);
    D.cuEventDestroy(recorded);
    D.cuEventDestroy(waited);
    conf_drop(s);
}

static void host_fn(void *p)
{
    (void)p;
}

/* cuGraphNodeSetEnabled on a host node (the documentation: kernel, memset
 * and memcpy nodes only), and cuGraphExecChildGraphNodeSetParams with a
 * graph of another shape. */
static void refusals(CUdeviceptr d)
{
    CUstream s = conf_stream();
    CUgraph g = NULL, one = memsets(d, 0), two = memsets(d, 1);
    CUgraphExec exec = NULL;
    CUgraphNode nodes[4];
    CUgraphNodeType type;
    CUgraphNode host = NULL, child = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    size_t n = 4, i;
    CUresult rc_host = CUDA_ERROR_UNKNOWN, rc_child = CUDA_ERROR_UNKNOWN, rc_same = CUDA_ERROR_UNKNOWN;
    int made = 0;
    char text[256];

    D.cuGraphCreate(&g, 0);
    D.cuGraphAddChildGraphNode(&child, g, NULL, 0, one);
    D.cuStreamBeginCaptureToGraph(s, g, &child, NULL, 1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    D.cuLaunchHostFunc(s, host_fn, NULL);
    D.cuStreamEndCapture(s, &g);
    memset(&params, 0, sizeof params);
    if (D.cuGraphGetNodes(g, nodes, &n) == CUDA_SUCCESS && D.cuGraphInstantiateWithParams(&exec, g, &params) == CUDA_SUCCESS) {
        for (i = 0; i < n; i++)
            if (D.cuGraphNodeGetType(nodes[i], &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_HOST)
                host = nodes[i];
        rc_host = D.cuGraphNodeSetEnabled(exec, host, 0);
        rc_child = D.cuGraphExecChildGraphNodeSetParams(exec, child, two);
        rc_same = D.cuGraphExecChildGraphNodeSetParams(exec, child, one);
        made = 1;
    }
    snprintf(text, sizeof text, "host node disabled: %s; another shape: %s; the same shape: %s", conf_code(rc_host),
             conf_code(rc_child), conf_code(rc_same));
    conf_row("cuGraphNodeSetEnabled on a host node, cuGraphExecChildGraphNodeSetParams", "-", text,
             made ? "host node disabled: CUDA_ERROR_INVALID_VALUE; another shape: "
             "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE; the same shape: CUDA_SUCCESS" : "an executable graph");
    if (exec)
        D.cuGraphExecDestroy(exec);
    D.cuGraphDestroy(g);
    D.cuGraphDestroy(one);
    D.cuGraphDestroy(two);
    conf_drop(s);
}

void conf_rows_nodes(void)
{
    CUdeviceptr d = 0;

    event_nodes_captured();
    if (D.cuMemAlloc(&d, 32) != CUDA_SUCCESS) {
        conf_row("cuMemAlloc for the node rows", "-", "failed", "CUDA_SUCCESS");
        return;
    }
    refusals(d);
    D.cuMemFree(d);
}
