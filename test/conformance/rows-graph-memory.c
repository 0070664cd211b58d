/* Rows of graph allocations freed outside their graph (NVIDIA's
 * graphMemoryNodes sample), and of what the driver clones. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

#define BYTES 4096

/* A capture on s that allocates from the device's pool, fills the memory
 * and, when free_inside, frees it. */
static CUgraph capture_allocation(CUstream s, CUdeviceptr *p, int free_inside)
{
    CUmemoryPool pool = NULL;
    CUgraph g = NULL;

    D.cuDeviceGetMemPool(&pool, conf_dev);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemAllocFromPoolAsync(p, BYTES, pool, s);
    D.cuMemsetD8Async(*p, 0x6b, BYTES, s);
    if (free_inside)
        D.cuMemFreeAsync(*p, s);
    D.cuStreamEndCapture(s, &g);
    return g;
}

static CUgraphExec instantiate(CUgraph g)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec e = NULL;

    memset(&params, 0, sizeof params);
    if (!g || D.cuGraphInstantiateWithParams(&e, g, &params) != CUDA_SUCCESS)
        return NULL;
    return e;
}

static const char *launched(CUgraphExec e, CUstream s)
{
    CUresult rc = e ? D.cuGraphLaunch(e, s) : CUDA_ERROR_INVALID_VALUE;

    D.cuStreamSynchronize(s);
    return conf_code(rc);
}

static const char *filled(CUdeviceptr p)
{
    unsigned char host[BYTES];
    size_t i;

    if (D.cuMemcpyDtoH(host, p, BYTES) != CUDA_SUCCESS)
        return "unreadable";
    for (i = 0; i < BYTES; i++)
        if (host[i] != 0x6b)
            return "no";
    return "yes";
}

static void freed_outside(void)
{
    CUstream s = conf_stream();
    CUdeviceptr p = 0, at;
    CUgraph g = capture_allocation(s, &p, 0);
    CUgraphExec e = instantiate(g);
    char text[768] = "";
    const char *r;

    at = p;
    conf_append(text, sizeof text, "free before the first launch %s", conf_code(D.cuMemFree(p)));
    conf_append(text, sizeof text, "; launch %s", launched(e, s));
    conf_append(text, sizeof text, ", filled %s", filled(p));
    conf_append(text, sizeof text, "; launch again %s", launched(e, s));
    conf_append(text, sizeof text, "; cuMemFree %s", conf_code(D.cuMemFree(p)));
    conf_append(text, sizeof text, ", again %s", conf_code(D.cuMemFree(p)));
    conf_append(text, sizeof text, "; launch %s", launched(e, s));
    conf_append(text, sizeof text, ", filled %s", filled(p));
    conf_append(text, sizeof text, "; cuMemFreeAsync %s", conf_code(D.cuMemFreeAsync(p, s)));
    conf_append(text, sizeof text, ", again %s", conf_code(D.cuMemFreeAsync(p, s)));
    D.cuStreamSynchronize(s);
    r = launched(e, s);
    conf_append(text, sizeof text, "; launch %s, same address %s", r, p == at ? "yes" : "no");
    if (e)
        D.cuGraphExecDestroy(e);
    if (g)
        D.cuGraphDestroy(g);
    conf_append(text, sizeof text, "; graph destroyed: cuMemFree %s", conf_code(D.cuMemFree(p)));
    conf_append(text, sizeof text, ", again %s", conf_code(D.cuMemFree(p)));
    conf_row("a graph allocation not freed in its graph, freed outside it after each launch", "global", text,
             "free before the first launch CUDA_ERROR_INVALID_VALUE; launch CUDA_SUCCESS, filled yes; "
             "launch again CUDA_ERROR_INVALID_VALUE; cuMemFree CUDA_SUCCESS, again CUDA_ERROR_INVALID_VALUE; "
             "launch CUDA_SUCCESS, filled yes; cuMemFreeAsync CUDA_SUCCESS, again CUDA_ERROR_INVALID_VALUE; "
             "launch CUDA_SUCCESS, same address yes; graph destroyed: cuMemFree CUDA_SUCCESS, "
             "again CUDA_ERROR_INVALID_VALUE");
    conf_drop(s);
}

static void freed_inside(void)
{
    CUstream s = conf_stream();
    CUdeviceptr p = 0;
    CUgraph g = capture_allocation(s, &p, 1);
    CUgraphExec e = instantiate(g);
    char text[256] = "";

    conf_append(text, sizeof text, "launch %s", launched(e, s));
    conf_append(text, sizeof text, "; cuMemFree %s", conf_code(D.cuMemFree(p)));
    conf_append(text, sizeof text, "; launch %s", launched(e, s));
    conf_row("a graph allocation freed in its own graph, freed again outside it", "global", text,
             "launch CUDA_SUCCESS; cuMemFree CUDA_ERROR_INVALID_VALUE; launch CUDA_SUCCESS");
    if (e)
        D.cuGraphExecDestroy(e);
    if (g)
        D.cuGraphDestroy(g);
    conf_drop(s);
}

/* Graph B frees graph A's allocation. */
static void freed_by_another_graph(void)
{
    CUstream s = conf_stream();
    CUdeviceptr p = 0;
    CUgraph a = capture_allocation(s, &p, 0), b = NULL;
    CUgraphExec ea = instantiate(a), eb = NULL;
    CUresult freed, ended;
    char text[256] = "";

    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    freed = D.cuMemFreeAsync(p, s);
    ended = D.cuStreamEndCapture(s, &b);
    eb = instantiate(b);
    conf_append(text, sizeof text, "captured free %s, end %s", conf_code(freed), conf_code(ended));
    conf_append(text, sizeof text, "; launch B %s", launched(eb, s));
    conf_append(text, sizeof text, "; A %s", launched(ea, s));
    conf_append(text, sizeof text, "; B %s", launched(eb, s));
    conf_append(text, sizeof text, "; A %s", launched(ea, s));
    conf_append(text, sizeof text, "; cuMemFree %s", conf_code(D.cuMemFree(p)));
    conf_row("graph B frees graph A's allocation", "global", text,
             "captured free CUDA_SUCCESS, end CUDA_SUCCESS; launch B CUDA_ERROR_INVALID_VALUE; A CUDA_SUCCESS; "
             "B CUDA_SUCCESS; A CUDA_SUCCESS; cuMemFree CUDA_SUCCESS");
    if (eb)
        D.cuGraphExecDestroy(eb);
    if (ea)
        D.cuGraphExecDestroy(ea);
    if (b)
        D.cuGraphDestroy(b);
    if (a)
        D.cuGraphDestroy(a);
    conf_drop(s);
}

static void clones(void)
{
    CUstream s = conf_stream();
    CUdeviceptr d = 0, p = 0;
    CUgraph g = NULL, c = NULL, cond = NULL;
    CUgraphExec e;
    CUgraphConditionalHandle h = 0;
    CUgraphNodeParams np;
    CUgraphNode node;
    char text[512] = "";

    D.cuMemAlloc(&d, BYTES);
    D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuMemsetD8Async(d, 0x6b, BYTES, s);
    D.cuStreamEndCapture(s, &g);
    conf_append(text, sizeof text, "memset graph %s", conf_code(D.cuGraphClone(&c, g)));
    D.cuGraphDestroy(g);
    D.cuMemsetD8(d, 0, BYTES);
    D.cuStreamSynchronize(NULL);   /* done before s's launch: s does not wait for the legacy stream */
    e = c ? instantiate(c) : NULL;
    conf_append(text, sizeof text, ", its copy launched after the original's destroy %s", launched(e, s));
    conf_append(text, sizeof text, ", filled %s", filled(d));
    if (e)
        D.cuGraphExecDestroy(e);
    if (c)
        D.cuGraphDestroy(c);
    g = capture_allocation(s, &p, 1);
    c = NULL;
    conf_append(text, sizeof text, "; with allocation and free nodes %s", conf_code(D.cuGraphClone(&c, g)));
    if (c)
        D.cuGraphDestroy(c);
    D.cuGraphDestroy(g);
    D.cuGraphCreate(&cond, 0);
    D.cuGraphConditionalHandleCreate(&h, cond, conf_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_IF;
    np.conditional.size = 1;
    np.conditional.ctx = conf_ctx;
    D.cuGraphAddNode(&node, cond, NULL, NULL, 0, &np);
    c = NULL;
    conf_append(text, sizeof text, "; with a conditional node %s", conf_code(D.cuGraphClone(&c, cond)));
    if (c)
        D.cuGraphDestroy(c);
    D.cuGraphDestroy(cond);
    conf_row("cuGraphClone", "-", text,
             "memset graph CUDA_SUCCESS, its copy launched after the original's destroy CUDA_SUCCESS, filled yes; "
             "with allocation and free nodes CUDA_ERROR_NOT_SUPPORTED; with a conditional node "
             "CUDA_ERROR_NOT_SUPPORTED");
    D.cuMemFree(d);
    conf_drop(s);
}

/* cuGraphExecUpdate from a graph of the same shape whose allocation is
 * another (each capture allocates anew). */
static void updated(void)
{
    CUstream s = conf_stream();
    CUdeviceptr p = 0, q = 0;
    CUgraph a = capture_allocation(s, &p, 1), b = capture_allocation(s, &q, 1);
    CUgraphExec e = instantiate(a);
    CUgraphExecUpdateResultInfo info;
    CUresult rc;
    char text[256] = "";

    memset(&info, 0, sizeof info);
    rc = e && b ? D.cuGraphExecUpdate(e, b, &info) : CUDA_ERROR_INVALID_VALUE;
    conf_append(text, sizeof text, "update %s, result %d", conf_code(rc), (int)info.result);
    conf_append(text, sizeof text, "; launch %s", launched(e, s));
    conf_row("cuGraphExecUpdate of an executable graph with allocation and free nodes", "global", text,
             "update CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result 1; launch CUDA_SUCCESS");
    if (e)
        D.cuGraphExecDestroy(e);
    if (a)
        D.cuGraphDestroy(a);
    if (b)
        D.cuGraphDestroy(b);
    conf_drop(s);
}

/* What the device reserves for graph memory: a 4 KiB allocation, then
 * after a trim; and the node list of an empty graph. */
static void reserved(void)
{
    CUstream s = conf_stream();
    CUdeviceptr p = 0;
    CUgraph g, empty = NULL;
    CUgraphExec e;
    CUgraphNode node;
    cuuint64_t before = 1, after = 0, trimmed = 1;
    size_t n = 7;
    CUresult counted, listed;
    char text[256] = "";

    D.cuDeviceGraphMemTrim(conf_dev);
    D.cuDeviceGetGraphMemAttribute(conf_dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &before);
    g = capture_allocation(s, &p, 1);
    e = instantiate(g);
    conf_append(text, sizeof text, "launch %s", launched(e, s));
    D.cuDeviceGetGraphMemAttribute(conf_dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &after);
    if (e)
        D.cuGraphExecDestroy(e);
    if (g)
        D.cuGraphDestroy(g);
    D.cuDeviceGraphMemTrim(conf_dev);
    D.cuDeviceGetGraphMemAttribute(conf_dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &trimmed);
    conf_append(text, sizeof text, ", reserved %llu MiB more; destroyed and trimmed: as before %s",
                (unsigned long long)((after - before) >> 20), trimmed == before ? "yes" : "no");
    conf_row("graph memory reserved for a 4 KiB graph allocation", "global", text,
             "launch CUDA_SUCCESS, reserved 32 MiB more; destroyed and trimmed: as before yes");
    D.cuGraphCreate(&empty, 0);
    counted = D.cuGraphGetNodes(empty, NULL, &n);
    listed = D.cuGraphGetNodes(empty, &node, &n);
    text[0] = '\0';
    conf_append(text, sizeof text, "count %s, %zu nodes; with an array and a count of 0 %s", conf_code(counted), n,
                conf_code(listed));
    conf_row("cuGraphGetNodes of an empty graph", "-", text,
             "count CUDA_SUCCESS, 0 nodes; with an array and a count of 0 CUDA_ERROR_INVALID_VALUE");
    D.cuGraphDestroy(empty);
    conf_drop(s);
}

void conf_rows_graph_memory(void)
{
    reserved();
    updated();
    freed_outside();
    freed_inside();
    freed_by_another_graph();
    clones();
}
