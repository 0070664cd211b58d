/* Executable graphs: instantiate, launch (run on host memory), upload,
 * update, destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_EXEC_MAGIC 0x43455847u
#define SIM_WHILE_LIMIT 1000000

struct sim_exec {
    uint32_t magic;
    struct sim_graph *source;
    struct sim_graph *snapshot;      /* the graph as instantiated */
    unsigned int *values;            /* per handle, for handles without ASSIGN_DEFAULT */
    size_t value_count;
    int conditional;                 /* it has conditional nodes */
    int host_nodes, memory_nodes;    /* it has host nodes; allocation or free nodes */
    unsigned long long held;         /* the hold its last launch waits behind, 0: none */
};

/* Node types a conditional body may hold (CUDA programming guide; the
 * H200 refuses a host node there at instantiate). */
static int allowed_in_body(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET ||
           t == CU_GRAPH_NODE_TYPE_EMPTY || t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

/* Whether a conditional body below g (in_body: g is one, or inside one)
 * holds a node of a type bodies may not hold. */
static int has_body_with_forbidden_node(const struct sim_graph *g, int in_body)
{
    size_t i;
    unsigned int k;

    for (i = 0; i < g->node_count; i++) {
        const struct sim_node *n = g->nodes[i];
        if (in_body && !allowed_in_body(n->type))
            return 1;
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->u.child.graph &&
            has_body_with_forbidden_node(n->u.child.graph, in_body))
            return 1;
        if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            for (k = 0; k < n->u.cond.size; k++) {
                const struct sim_graph *body = (const struct sim_graph *)n->u.cond.bodies[k];
                if (body && body->state == SIM_GRAPH_LIVE && has_body_with_forbidden_node(body, 1))
                    return 1;
            }
    }
    return 0;
}

static int has_conditional_node(const struct sim_graph *g)
{
    size_t i;

    for (i = 0; i < g->node_count; i++)
        if (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_CONDITIONAL ||
            (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_GRAPH && g->nodes[i]->u.child.graph &&
             has_conditional_node(g->nodes[i]->u.child.graph)))
            return 1;
    return 0;
}

static int has_host_node(const struct sim_graph *g)
{
    size_t i;

    for (i = 0; i < g->node_count; i++)
        if (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_HOST ||
            (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_GRAPH && g->nodes[i]->u.child.graph &&
             has_host_node(g->nodes[i]->u.child.graph)))
            return 1;
    return 0;
}

static int handle_in(const struct sim_graph *g, const struct sim_graph *root)
{
    for (; g; g = g->owner ? g->owner->graph : NULL)
        if (g == root)
            return 1;
    return 0;
}

static CUresult sim_cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph hg,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    struct sim_exec *e;
    struct sim_graph *g;
    CUresult rc = CUDA_SUCCESS;
    struct sim_handle *handles;
    size_t i, handle_count;

    if (!out || !params)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    *out = NULL;
    if (!sim_graph_valid(hg)) {
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    g = (struct sim_graph *)hg;
    sim_graph_check_no_dead_body(g, "cuGraphInstantiateWithParams");
    if (g->exec_count > 0 && has_conditional_node(g)) {
        /* measured by the differential run: a graph with conditional nodes
         * has one executable graph at a time */
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto done;
    }
    if (g->owner && g->owner->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {   /* a body, on its own: the H200 refuses */
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto done;
    }
    if (has_body_with_forbidden_node(g, 0)) {
        params->result_out = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    if ((params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) &&
        (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)) {
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    handles = sim_handle_table(&handle_count);
    for (i = 0; i < handle_count; i++)
        if (handles[i].graph && handle_in(handles[i].graph, g) && !handles[i].node) {
            params->result_out = (CUgraphInstantiateResult)SIM_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED;
            rc = CUDA_ERROR_INVALID_VALUE;
            goto done;
        }
    e = calloc(1, sizeof *e);
    if (!e || !(e->values = calloc(handle_count + 1, sizeof *e->values)) || !(e->snapshot = sim_graph_clone(g, NULL))) {
        if (e)
            free(e->values);
        free(e);
        params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    e->magic = SIM_EXEC_MAGIC;
    e->source = g;
    g->exec_count++;
    e->value_count = handle_count + 1;
    e->conditional = has_conditional_node(g);
    e->host_nodes = has_host_node(g);
    e->memory_nodes = sim_graph_has_node_types(g, 1, 0);
    for (i = 0; i < handle_count; i++)
        e->values[i + 1] = handles[i].default_value;
    sim_live_add(SIM_EXEC, 1);
    sim_track(e);
    params->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    *out = (CUgraphExec)e;
done:
    sim_unlock();
    return rc;
}

static struct sim_exec *exec_of(CUgraphExec h)
{
    struct sim_exec *e = (struct sim_exec *)h;
    return e && e->magic == SIM_EXEC_MAGIC ? e : NULL;
}

/* Measured on the H100 (doc/driver-facts.md): destroying an executable
 * graph with conditional nodes waits until its launches are done. */
static CUresult sim_cuGraphExecDestroy(CUgraphExec h)
{
    unsigned long long held = 0;
    struct sim_exec *e;
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    e = exec_of(h);
    if (e) {
        held = e->conditional ? e->held : 0;
        sim_graph_release_behind(e->snapshot, SIM_GRAPH_DESTROYED, e->held);
        sim_graph_recycle(e->snapshot);
        /* the allocations captured into the source live until its last exec goes */
        if (--e->source->exec_count == 0 && e->source->state != SIM_GRAPH_LIVE) {
            sim_memory_release_owned_by(e->source);
            sim_graph_recycle(e->source);
        }
        e->magic = 0;
        sim_untrack(e);
        free(e->values);
        free(e);
        sim_live_add(SIM_EXEC, -1);
    }
    sim_unlock();
    sim_wait_for_hold(held, "cuGraphExecDestroy");
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static void run_graph(struct sim_exec *e, const struct sim_graph *g);

static void run_node(struct sim_exec *e, const struct sim_node *n)
{
    unsigned int value, k;
    size_t row, col;

    if (n->disabled)
        return;
    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_MEMSET:
        for (row = 0; row < n->u.memset.height; row++) {
            CUdeviceptr base = n->u.memset.dst + row * n->u.memset.pitch;
            unsigned char *p = sim_memory(base, n->u.memset.width * n->u.memset.element_size);
            if (!p)
                sim_fatal("graph launch: memset node writes outside any live allocation (%#llx)",
                          (unsigned long long)base);
            for (col = 0; col < n->u.memset.width; col++)
                memcpy(p + col * n->u.memset.element_size, &n->u.memset.value, n->u.memset.element_size);
        }
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        memmove(n->u.memcpy.dst, n->u.memcpy.src, n->u.memcpy.bytes);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        n->u.host.fn(n->u.host.data);
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        run_graph(e, n->u.child.graph);
        break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        sim_memory_alloc_node(n->u.alloc.ptr);
        break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        sim_memory_free_node(n->u.free.ptr);
        break;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        sim_event_record_at_launch(n->u.event.event);
        break;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        sim_event_wait_at_launch(n->u.event.event);
        break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        value = n->u.cond.handle < e->value_count ? e->values[n->u.cond.handle] : 0;
        switch ((int)n->u.cond.type) {
        case CU_GRAPH_COND_TYPE_IF:
            if (value)
                run_graph(e, (struct sim_graph *)n->u.cond.bodies[0]);
            else if (n->u.cond.size == 2)
                run_graph(e, (struct sim_graph *)n->u.cond.bodies[1]);
            break;
        case CU_GRAPH_COND_TYPE_WHILE:
            for (k = 0; value; k++) {
                if (k == SIM_WHILE_LIMIT)
                    sim_fatal("graph launch: a WHILE body ran %d times; nothing can change its condition "
                              "on a simulated device", SIM_WHILE_LIMIT);
                run_graph(e, (struct sim_graph *)n->u.cond.bodies[0]);
                value = e->values[n->u.cond.handle];
            }
            break;
        case SIM_COND_TYPE_SWITCH:
            if (value < n->u.cond.size)
                run_graph(e, (struct sim_graph *)n->u.cond.bodies[value]);
            break;
        default:
            break;
        }
        break;
    default:
        break;                        /* empty nodes */
    }
}

static void run_graph(struct sim_exec *e, const struct sim_graph *g)
{
    size_t i;

    /* nodes only depend on earlier nodes, so insertion order is a topological order */
    for (i = 0; i < g->node_count; i++)
        run_node(e, g->nodes[i]);
}

static CUresult sim_cuGraphLaunch(CUgraphExec h, CUstream s)
{
    struct sim_exec *e;
    int captured;
    CUresult rc;
    size_t i;

    sim_lock();
    e = exec_of(h);
    if (e && sim_stream_in_capture(s)) {   /* measured: refused even when the capture is invalidated already */
        sim_stream_invalidate_capture(s);
        sim_unlock();
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    rc = e ? sim_stream_enqueue(s, &captured) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !captured && !sim_memory_launch_possible(e->snapshot)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (rc == CUDA_SUCCESS && captured) {
        /* measured on the H200: refused, and the capture is invalidated */
        sim_stream_invalidate_capture(s);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (rc == CUDA_SUCCESS) {
        size_t handle_count;
        struct sim_handle *handles = sim_handle_table(&handle_count);
        /* handles made after its instantiation are no graph's of it */
        for (i = 0; i < handle_count && i + 1 < e->value_count; i++)
            if (handles[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
                e->values[i + 1] = handles[i].default_value;
        sim_stream_queue_launch(s, e->host_nodes, e->memory_nodes);
        sim_launch_stream(s);
        sim_memory_graph_launch(e->snapshot, s, 0);
        run_graph(e, e->snapshot);
        sim_memory_graph_launch(e->snapshot, s, 1);
        sim_launch_stream(NULL);
        e->held = sim_stream_hold(s);
        if (e->memory_nodes)
            sim_stream_queue_allocation(s);
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphUpload(CUgraphExec h, CUstream s)
{
    int captured;
    CUresult rc;

    sim_lock();
    rc = exec_of(h) ? sim_stream_enqueue(s, &captured) : CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphExecUpdate(CUgraphExec h, CUgraph hg, CUgraphExecUpdateResultInfo *info)
{
    struct sim_exec *e;
    struct sim_graph *g, *snap, *fresh;
    CUresult rc = CUDA_SUCCESS;
    size_t i, j;

    if (!info)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    memset(info, 0, sizeof *info);
    e = exec_of(h);
    if (!e || !sim_graph_valid(hg)) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    g = (struct sim_graph *)hg;
    snap = e->snapshot;
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    if (g->node_count != snap->node_count) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        info->errorNode = g->node_count ? (CUgraphNode)g->nodes[0] : NULL;
    }
    for (i = 0; info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS && i < g->node_count; i++) {
        const struct sim_node *a = g->nodes[i], *b = snap->nodes[i];
        if (a->dep_count != b->dep_count)
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (j = 0; info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS && j < a->dep_count; j++)
            if (a->deps[j]->index != b->deps[j]->index)
                info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        if (info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS && a->type != b->type)
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            info->errorNode = (CUgraphNode)a;
    }
    /* measured on the H200: the same topology with memory nodes is refused,
     * CU_GRAPH_EXEC_UPDATE_ERROR, the executable graph left as it was (a
     * changed topology is reported as such first) */
    if (info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS &&
        (sim_graph_has_node_types(g, 1, 0) || sim_graph_has_node_types(snap, 1, 0)))
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        goto done;
    }
    fresh = sim_graph_clone(g, NULL);
    if (!fresh) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    {   /* the conditional handles of the new graph, made since the instantiation */
        size_t handle_count;
        unsigned int *values;
        (void)sim_handle_table(&handle_count);
        if (handle_count + 1 > e->value_count) {
            if (!(values = realloc(e->values, (handle_count + 1) * sizeof *values))) {
                sim_graph_release(fresh, SIM_GRAPH_DESTROYED);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
                goto done;
            }
            memset(values + e->value_count, 0, (handle_count + 1 - e->value_count) * sizeof *values);
            e->values = values;
            e->value_count = handle_count + 1;
        }
    }
    sim_graph_release_behind(snap, SIM_GRAPH_DESTROYED, e->held);
    sim_graph_recycle(snap);
    e->snapshot = fresh;
done:
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------- changing one node */

/* The executable graph's copy of node h of the graph it was instantiated
 * from, of type `type`; NULL when h is not one (the driver's
 * INVALID_VALUE).  The caller holds the lock. */
static struct sim_node *exec_node(CUgraphExec he, CUgraphNode h, CUgraphNodeType type, struct sim_exec **exec)
{
    struct sim_exec *e = exec_of(he);
    struct sim_node *n = sim_node_of(h);

    if (!e || !n || n->graph != e->source || n->index >= e->snapshot->node_count ||
        e->snapshot->nodes[n->index]->type != type)
        return NULL;
    if (exec)
        *exec = e;
    return e->snapshot->nodes[n->index];
}

/* The host address of a copy's operand. */
static void *operand(CUmemorytype type, const void *host, CUdeviceptr device, size_t bytes)
{
    if (type == CU_MEMORYTYPE_HOST)
        return (void *)host;
    if (type == CU_MEMORYTYPE_DEVICE)
        return sim_memory(device, bytes);
    if (type == CU_MEMORYTYPE_UNIFIED)
        return (void *)(uintptr_t)device;
    return NULL;
}

/* The driver's rules: one dimension, not empty, from the same context. */
static CUresult sim_cuGraphExecMemcpyNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    struct sim_node *n;
    void *dst, *src;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!p || !ctx || p->WidthInBytes == 0 || p->Height > 1 || p->Depth > 1)
        return rc;
    sim_lock();
    dst = operand(p->dstMemoryType, p->dstHost, p->dstDevice, p->WidthInBytes);
    src = operand(p->srcMemoryType, p->srcHost, p->srcDevice, p->WidthInBytes);
    if ((n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMCPY, NULL)) != NULL && dst && src) {
        n->u.memcpy.dst = (char *)dst + p->dstXInBytes;
        n->u.memcpy.src = (const char *)src + p->srcXInBytes;
        n->u.memcpy.bytes = p->WidthInBytes;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphExecMemsetNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p,
                                                   CUcontext ctx)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!p || !ctx || p->height > 1 || p->width == 0 ||
        (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
        return rc;
    sim_lock();
    if ((n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMSET, NULL)) != NULL && n->u.memset.height <= 1 &&
        sim_memory(p->dst, p->width * p->elementSize)) {
        n->u.memset.dst = p->dst;
        n->u.memset.value = p->value;
        n->u.memset.element_size = p->elementSize;
        n->u.memset.width = p->width;
        n->u.memset.pitch = p->width * p->elementSize;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphExecHostNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!p || !p->fn)
        return rc;
    sim_lock();
    if ((n = exec_node(he, h, CU_GRAPH_NODE_TYPE_HOST, NULL)) != NULL) {
        n->u.host.fn = p->fn;
        n->u.host.data = p->userData;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

/* Whether a and b have the same nodes, types and edges, in one order. */
static int same_topology(const struct sim_graph *a, const struct sim_graph *b)
{
    size_t i, j;

    if (a->node_count != b->node_count)
        return 0;
    for (i = 0; i < a->node_count; i++) {
        const struct sim_node *x = a->nodes[i], *y = b->nodes[i];
        if (x->type != y->type || x->dep_count != y->dep_count)
            return 0;
        for (j = 0; j < x->dep_count; j++)
            if (x->deps[j]->index != y->deps[j]->index)
                return 0;
        if (x->type == CU_GRAPH_NODE_TYPE_GRAPH && !same_topology(x->u.child.graph, y->u.child.graph))
            return 0;
    }
    return 1;
}

/* The driver copies the new graph's values into the executable graph
 * (the graph may go after); its topology must be the embedded one's,
 * else CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE (H100). */
static CUresult sim_cuGraphExecChildGraphNodeSetParams(CUgraphExec he, CUgraphNode h, CUgraph child)
{
    struct sim_graph *fresh, *old;
    struct sim_exec *e;
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    sim_lock();
    if (sim_graph_valid(child) && (n = exec_node(he, h, CU_GRAPH_NODE_TYPE_GRAPH, &e)) != NULL) {
        if (!same_topology(n->u.child.graph, (struct sim_graph *)child)) {
            rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;   /* measured on the H100 */
        } else if (!(fresh = sim_graph_clone((struct sim_graph *)child, n))) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            old = n->u.child.graph;
            n->u.child.graph = fresh;
            sim_graph_release_behind(old, SIM_GRAPH_DESTROYED, e->held);
            sim_graph_recycle(old);
            rc = CUDA_SUCCESS;
        }
    }
    sim_unlock();
    return rc;
}

static CUresult set_event(CUgraphExec he, CUgraphNode h, CUevent ev, CUgraphNodeType type)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!ev)
        return rc;
    sim_lock();
    if ((n = exec_node(he, h, type, NULL)) != NULL) {
        n->u.event.event = ev;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphExecEventRecordNodeSetEvent(CUgraphExec he, CUgraphNode h, CUevent ev)
{
    return set_event(he, h, ev, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

static CUresult sim_cuGraphExecEventWaitNodeSetEvent(CUgraphExec he, CUgraphNode h, CUevent ev)
{
    return set_event(he, h, ev, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* Only kernel, memset and memcpy nodes (the driver's documentation). */
static CUresult sim_cuGraphNodeSetEnabled(CUgraphExec he, CUgraphNode h, unsigned int enabled)
{
    struct sim_node *n = NULL;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    sim_lock();
    if ((n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMCPY, NULL)) != NULL ||
        (n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMSET, NULL)) != NULL) {
        n->disabled = !enabled;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

const struct sim_entry sim_exec_entries[] = {
    SIM_ENTRY(cuGraphInstantiateWithParams, 12000),
    SIM_ENTRY(cuGraphExecDestroy, 10000),
    SIM_ENTRY(cuGraphLaunch, 10000),
    SIM_ENTRY(cuGraphUpload, 11010),
    SIM_ENTRY(cuGraphExecUpdate, 12000),
    SIM_ENTRY(cuGraphExecMemcpyNodeSetParams, 10020),
    SIM_ENTRY(cuGraphExecMemsetNodeSetParams, 10020),
    SIM_ENTRY(cuGraphExecHostNodeSetParams, 10020),
    SIM_ENTRY(cuGraphExecChildGraphNodeSetParams, 11010),
    SIM_ENTRY(cuGraphExecEventRecordNodeSetEvent, 11010),
    SIM_ENTRY(cuGraphExecEventWaitNodeSetEvent, 11010),
    SIM_ENTRY(cuGraphNodeSetEnabled, 11060),
};
const size_t sim_exec_entry_count = sizeof sim_exec_entries / sizeof sim_exec_entries[0];
