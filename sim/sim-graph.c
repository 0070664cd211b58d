/* Graphs, nodes and conditional handles, built by capture or by hand;
 * executable graphs are sim-exec.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_GRAPH_MAGIC 0x48505247u
#define SIM_NODE_MAGIC 0x45444f4eu

/* Every graph ever handed out stays known, so that a use after the driver
 * discarded it can be told from a stray pointer. */
struct graph_record {
    struct sim_graph *graph;
    struct graph_record *next;
};
static struct graph_record *all_graphs;

static struct sim_handle *handles;   /* CUgraphConditionalHandle h is handles[h - 1] */
static size_t handle_count;

/* ---------------------------------------------------------------- graphs */

/* CUDASIM_RECYCLE=1 (long fuzzing campaigns): graphs destroyed by their
 * owner are freed instead of kept, so memory stays flat; a second destroy
 * is then a use after free, which AddressSanitizer reports.  Graphs the
 * driver discarded are always kept, to catch a destroy of them. */
static int recycling(void)
{
    static int recycle = -1;

    if (recycle < 0)
        recycle = getenv("CUDASIM_RECYCLE") != NULL;
    return recycle;
}

struct sim_graph *sim_graph_new(void)
{
    struct sim_graph *g = calloc(1, sizeof *g);
    struct graph_record *r = malloc(sizeof *r);

    if (!g || !r) {
        free(g);
        free(r);
        return NULL;
    }
    g->magic = SIM_GRAPH_MAGIC;
    g->state = SIM_GRAPH_LIVE;
    if (recycling()) {
        free(r);
        sim_track(g);
        return g;
    }
    r->graph = g;
    r->next = all_graphs;
    all_graphs = r;
    return g;
}

/* After a release: free the structure when recycling and nothing refers to it. */
void sim_graph_recycle(struct sim_graph *g)
{
    if (recycling() && g->state == SIM_GRAPH_DESTROYED && g->exec_count == 0) {
        sim_untrack(g);
        g->magic = 0;
        free(g);
    }
}

/* Graph structures are never freed (only their nodes), so a handle the
 * simulator handed out can always be read, whatever happened to it. */
static struct sim_graph *graph_of(CUgraph h)
{
    struct sim_graph *g = (struct sim_graph *)h;
    return g && g->magic == SIM_GRAPH_MAGIC ? g : NULL;
}

int sim_graph_valid(CUgraph h)
{
    struct sim_graph *g = graph_of(h);

    if (g && g->state == SIM_GRAPH_DISCARDED)
        sim_fatal("use of graph %p, which the driver discarded when its capture failed", (void *)h);
    return g && g->state == SIM_GRAPH_LIVE;
}

struct sim_node *sim_node_of(CUgraphNode h)
{
    struct sim_node *n = (struct sim_node *)h;
    return n && n->magic == SIM_NODE_MAGIC && n->graph && n->graph->state == SIM_GRAPH_LIVE ? n : NULL;
}

struct sim_node *sim_graph_add(struct sim_graph *g, CUgraphNodeType type,
                               struct sim_node *const *deps, size_t dep_count)
{
    struct sim_node *n = calloc(1, sizeof *n);

    if (!n)
        return NULL;
    if (dep_count) {
        n->deps = malloc(dep_count * sizeof *n->deps);
        if (!n->deps) {
            free(n);
            return NULL;
        }
        memcpy(n->deps, deps, dep_count * sizeof *n->deps);
    }
    if (g->node_count == g->node_cap) {
        size_t cap = g->node_cap ? g->node_cap * 2 : 16;
        struct sim_node **grown = realloc(g->nodes, cap * sizeof *grown);
        if (!grown) {
            free(n->deps);
            free(n);
            return NULL;
        }
        g->nodes = grown;
        g->node_cap = cap;
    }
    n->magic = SIM_NODE_MAGIC;
    n->type = type;
    n->graph = g;
    n->dep_count = dep_count;
    n->index = g->node_count;
    g->nodes[g->node_count++] = n;
    return n;
}

int sim_graph_mark_ancestors(struct sim_node *const *from, size_t n, unsigned int epoch)
{
    struct sim_node **stack = NULL;
    size_t top = 0, cap = 0, i;

    for (i = 0; i < n; i++) {
        if (top == cap) {
            struct sim_node **grown = realloc(stack, (cap = cap ? cap * 2 : 64) * sizeof *grown);
            if (!grown)
                goto oom;
            stack = grown;
        }
        stack[top++] = from[i];
    }
    while (top) {
        struct sim_node *x = stack[--top];
        if (x->mark == epoch)
            continue;
        x->mark = epoch;
        for (i = 0; i < x->dep_count; i++) {
            if (top == cap) {
                struct sim_node **grown = realloc(stack, (cap = cap ? cap * 2 : 64) * sizeof *grown);
                if (!grown)
                    goto oom;
                stack = grown;
            }
            stack[top++] = x->deps[i];
        }
    }
    free(stack);
    return 0;
oom:
    free(stack);
    return -1;
}

static unsigned long long releasing_behind;   /* the hold an executable graph's copy is released behind */

void sim_graph_release_behind(struct sim_graph *g, enum sim_graph_state state, unsigned long long hold)
{
    unsigned long long was = releasing_behind;

    releasing_behind = hold;
    sim_graph_release(g, state);
    releasing_behind = was;
}

/* Free a graph's nodes and the graphs they own; state becomes `state`. */
void sim_graph_release(struct sim_graph *g, enum sim_graph_state state)
{
    size_t i;
    unsigned int k;

    sim_user_refs_drop(g, releasing_behind);
    for (i = 0; i < g->node_count; i++) {
        struct sim_node *n = g->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->u.child.graph) {
            sim_graph_release(n->u.child.graph, state);
            sim_graph_recycle(n->u.child.graph);
        }
        if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            for (k = 0; k < n->u.cond.size; k++) {
                struct sim_graph *body = (struct sim_graph *)n->u.cond.bodies[k];
                if (body->state == SIM_GRAPH_LIVE) {
                    sim_graph_release(body, state);
                    sim_graph_recycle(body);
                }
            }
            free(n->u.cond.bodies);
            if (n->u.cond.handle && n->u.cond.handle <= handle_count &&
                handles[n->u.cond.handle - 1].node == n)
                handles[n->u.cond.handle - 1].node = NULL;
        }
        n->magic = 0;
        free(n->deps);
        free(n);
    }
    for (i = 0; i < handle_count; i++)
        if (handles[i].graph == g)
            handles[i].graph = NULL;
    free(g->nodes);
    g->nodes = NULL;
    g->node_count = g->node_cap = 0;
    if (g->exec_count == 0)
        sim_memory_release_owned_by(g);   /* else the last exec of it releases them */
    g->state = state;
    if (g->counted)
        sim_live_add(SIM_GRAPH, -1);
    g->counted = 0;
}

void sim_graph_count(struct sim_graph *g)
{
    if (!g->counted)
        sim_live_add(SIM_GRAPH, 1);
    g->counted = 1;
}

void sim_graph_discard(struct sim_graph *g)
{
    if (g->state == SIM_GRAPH_LIVE)
        sim_graph_release(g, SIM_GRAPH_DISCARDED);
}

int sim_graph_has_dead_body(const struct sim_graph *g)
{
    size_t i;
    unsigned int k;

    for (i = 0; i < g->node_count; i++) {
        const struct sim_node *n = g->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && sim_graph_has_dead_body(n->u.child.graph))
            return 1;
        if (n->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
            continue;
        for (k = 0; k < n->u.cond.size; k++) {
            const struct sim_graph *body = (const struct sim_graph *)n->u.cond.bodies[k];
            if (body->state != SIM_GRAPH_LIVE || sim_graph_has_dead_body(body))
                return 1;
        }
    }
    return 0;
}

void sim_graph_check_no_dead_body(const struct sim_graph *g, const char *call)
{
    if (sim_graph_has_dead_body(g))
        sim_fatal("%s: graph %p holds a conditional node whose body graph the driver freed when "
                  "the body's capture was invalidated", call, (const void *)g);
}

static CUresult sim_cuGraphCreate(CUgraph *out, unsigned int flags)
{
    struct sim_graph *g;

    if (!out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    g = sim_graph_new();
    if (g)
        sim_graph_count(g);
    sim_unlock();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}

static CUresult sim_cuGraphDestroy(CUgraph h)
{
    struct sim_graph *g;

    sim_lock();
    g = graph_of(h);
    if (!g) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (g->state == SIM_GRAPH_DISCARDED)
        sim_fatal("cuGraphDestroy(%p): the driver already discarded this graph when its capture ended "
                  "without a graph", (void *)h);
    if (g->state == SIM_GRAPH_DESTROYED)
        sim_fatal("cuGraphDestroy(%p): the graph was already destroyed", (void *)h);
    if (g->capturing)
        sim_fatal("cuGraphDestroy(%p): a stream capture is still writing into this graph", (void *)h);
    if (g->owner) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;   /* owned by a node of another graph */
    }
    sim_graph_check_no_dead_body(g, "cuGraphDestroy");
    sim_graph_release(g, SIM_GRAPH_DESTROYED);
    sim_graph_recycle(g);
    sim_unlock();
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- cloning */

struct sim_graph *sim_graph_clone(const struct sim_graph *src, struct sim_node *owner);

static int clone_into(struct sim_graph *dst, const struct sim_graph *src)
{
    size_t i, j;
    unsigned int k;

    for (i = 0; i < src->node_count; i++) {
        const struct sim_node *s = src->nodes[i];
        struct sim_node **deps = NULL;
        struct sim_node *n;

        if (s->dep_count) {
            deps = malloc(s->dep_count * sizeof *deps);
            if (!deps)
                return -1;
            for (j = 0; j < s->dep_count; j++)
                deps[j] = dst->nodes[s->deps[j]->index];
        }
        n = sim_graph_add(dst, s->type, deps, s->dep_count);
        free(deps);
        if (!n)
            return -1;
        n->u = s->u;
        if (s->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            n->u.child.graph = sim_graph_clone(s->u.child.graph, n);
            if (!n->u.child.graph)
                return -1;
        } else if (s->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            n->u.cond.bodies = calloc(s->u.cond.size, sizeof *n->u.cond.bodies);
            if (!n->u.cond.bodies)
                return -1;
            for (k = 0; k < s->u.cond.size; k++) {
                struct sim_graph *body = sim_graph_clone((struct sim_graph *)s->u.cond.bodies[k], n);
                if (!body)
                    return -1;
                n->u.cond.bodies[k] = (CUgraph)body;
            }
        }
    }
    return 0;
}

struct sim_graph *sim_graph_clone(const struct sim_graph *src, struct sim_node *owner)
{
    struct sim_graph *g = sim_graph_new();

    if (!g)
        return NULL;
    g->owner = owner;
    if (clone_into(g, src) != 0 || sim_user_refs_copy(g, src) != 0) {
        sim_graph_release(g, SIM_GRAPH_DESTROYED);
        return NULL;
    }
    return g;
}

int sim_graph_has_node_types(const struct sim_graph *g, int alloc_free, int conditional)
{
    size_t i;

    for (i = 0; i < g->node_count; i++) {
        const struct sim_node *n = g->nodes[i];
        if (alloc_free && (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE))
            return 1;
        if (conditional && n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            return 1;
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && sim_graph_has_node_types(n->u.child.graph, alloc_free, conditional))
            return 1;
    }
    return 0;
}

/* Measured on the H200: the driver clones no graph with memory
 * allocation or free nodes, nor one with conditional nodes
 * (NOT_SUPPORTED). */
static CUresult sim_cuGraphClone(CUgraph *out, CUgraph original)
{
    struct sim_graph *g, *clone;
    CUresult rc = CUDA_SUCCESS;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (!(g = graph_of(original)) || !sim_graph_valid(original))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (sim_graph_has_node_types(g, 1, 1))
        rc = CUDA_ERROR_NOT_SUPPORTED;
    else if (!(clone = sim_graph_clone(g, NULL)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        sim_graph_count(clone);
        *out = (CUgraph)clone;
    }
    sim_unlock();
    return rc;
}

/* The simulator makes no kernel nodes (it refuses kernel launches): every
 * node is one of another type, which the driver refuses. */
static CUresult sim_cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *params)
{
    (void)h;
    (void)params;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuGraphKernelNodeGetParams_v1(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v1 *params)
{
    (void)h;
    (void)params;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuGraphKernelNodeGetAttribute(CUgraphNode h, CUkernelNodeAttrID attr, CUkernelNodeAttrValue *out)
{
    (void)h;
    (void)attr;
    (void)out;
    return CUDA_ERROR_INVALID_VALUE;
}

/* A captured copy as the driver describes it: one dimension, each side
 * device memory when it lies in an allocation, host memory otherwise. */
static CUresult sim_cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *out)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!out)
        return rc;
    sim_lock();
    if ((n = sim_node_of(h)) != NULL && n->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
        memset(out, 0, sizeof *out);
        if (sim_memory((CUdeviceptr)(uintptr_t)n->u.memcpy.src, 1)) {
            out->srcMemoryType = CU_MEMORYTYPE_DEVICE;
            out->srcDevice = (CUdeviceptr)(uintptr_t)n->u.memcpy.src;
        } else {
            out->srcMemoryType = CU_MEMORYTYPE_HOST;
            out->srcHost = n->u.memcpy.src;
        }
        if (sim_memory((CUdeviceptr)(uintptr_t)n->u.memcpy.dst, 1)) {
            out->dstMemoryType = CU_MEMORYTYPE_DEVICE;
            out->dstDevice = (CUdeviceptr)(uintptr_t)n->u.memcpy.dst;
        } else {
            out->dstMemoryType = CU_MEMORYTYPE_HOST;
            out->dstHost = n->u.memcpy.dst;
        }
        out->WidthInBytes = n->u.memcpy.bytes;
        out->Height = out->Depth = 1;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *out)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!out)
        return rc;
    sim_lock();
    if ((n = sim_node_of(h)) != NULL && n->type == CU_GRAPH_NODE_TYPE_MEMSET) {
        out->dst = n->u.memset.dst;
        out->value = n->u.memset.value;
        out->elementSize = n->u.memset.element_size;
        out->width = n->u.memset.width;
        out->height = n->u.memset.height;
        out->pitch = n->u.memset.pitch;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphMemAllocNodeGetParams(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *out)
{
    struct sim_node *n;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!out)
        return rc;
    sim_lock();
    if ((n = sim_node_of(h)) && n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        memset(out, 0, sizeof *out);
        out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        out->bytesize = n->u.alloc.size;
        out->dptr = n->u.alloc.ptr;
        rc = CUDA_SUCCESS;
    }
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------- adding nodes */

static CUresult check_deps(struct sim_graph *g, const CUgraphNode *deps, size_t n)
{
    size_t i;

    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < n; i++) {
        struct sim_node *d = sim_node_of(deps[i]);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult add_conditional(struct sim_node **out, struct sim_graph *g, const CUgraphNode *deps,
                                size_t n, CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    struct sim_node *node;
    struct sim_handle *h;
    const struct sim_graph *up;
    unsigned int k;

    if (!p->handle || p->handle > handle_count || !sim_ctx_valid(p->ctx))
        return CUDA_ERROR_INVALID_VALUE;
    h = &handles[p->handle - 1];
    for (up = g; up && up != h->graph; up = up->owner ? up->owner->graph : NULL)
        ;
    if (!up || h->node)
        return CUDA_ERROR_INVALID_VALUE;   /* created on another graph, or already used */
    switch ((int)p->type) {
    case CU_GRAPH_COND_TYPE_IF: if (p->size < 1 || p->size > 2) return CUDA_ERROR_INVALID_VALUE; break;
    case CU_GRAPH_COND_TYPE_WHILE: if (p->size != 1) return CUDA_ERROR_INVALID_VALUE; break;
    case SIM_COND_TYPE_SWITCH: if (p->size < 1) return CUDA_ERROR_INVALID_VALUE; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    /* IF with two bodies and SWITCH came with CUDA 12.8 drivers */
    if (((int)p->type == SIM_COND_TYPE_SWITCH || p->size > 1) && sim_driver_version() < 12080)
        return CUDA_ERROR_INVALID_VALUE;
    node = sim_graph_add(g, CU_GRAPH_NODE_TYPE_CONDITIONAL, (struct sim_node *const *)deps, n);
    if (!node)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->u.cond.handle = p->handle;
    node->u.cond.type = p->type;
    node->u.cond.size = p->size;
    node->u.cond.bodies = calloc(p->size, sizeof *node->u.cond.bodies);
    if (!node->u.cond.bodies)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (k = 0; k < p->size; k++) {
        struct sim_graph *body = sim_graph_new();
        if (!body)
            return CUDA_ERROR_OUT_OF_MEMORY;
        body->owner = node;
        node->u.cond.bodies[k] = (CUgraph)body;
    }
    h->node = node;
    p->phGraph_out = node->u.cond.bodies;   /* CUDA-owned, valid while the node lives */
    *out = node;
    return CUDA_SUCCESS;
}

static CUresult sim_cuGraphAddNode(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps,
                                   const CUgraphEdgeData *edge_data, size_t n, CUgraphNodeParams *params)
{
    struct sim_graph *g;
    struct sim_node *node = NULL;
    CUresult rc;

    (void)edge_data;
    if (!out || !params)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (!sim_graph_valid(hg)) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    g = (struct sim_graph *)hg;
    rc = check_deps(g, deps, n);
    if (rc != CUDA_SUCCESS)
        goto done;
    switch (params->type) {
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        rc = add_conditional(&node, g, deps, n, &params->conditional);
        break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        node = sim_graph_add(g, CU_GRAPH_NODE_TYPE_EMPTY, (struct sim_node *const *)deps, n);
        rc = node ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if (params->memset.elementSize != 1 && params->memset.elementSize != 2 &&
            params->memset.elementSize != 4) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        node = sim_graph_add(g, CU_GRAPH_NODE_TYPE_MEMSET, (struct sim_node *const *)deps, n);
        if (!node) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        node->u.memset.dst = params->memset.dst;
        node->u.memset.value = params->memset.value;
        node->u.memset.element_size = params->memset.elementSize;
        node->u.memset.width = params->memset.width;
        node->u.memset.height = params->memset.height ? params->memset.height : 1;
        node->u.memset.pitch = params->memset.pitch;
        rc = CUDA_SUCCESS;
        break;
    default:
        rc = CUDA_ERROR_NOT_SUPPORTED;
        break;
    }
    if (rc == CUDA_SUCCESS)
        *out = (CUgraphNode)node;
done:
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphAddEmptyNode(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n)
{
    CUgraphNodeParams params;

    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_EMPTY;
    return sim_cuGraphAddNode(out, hg, deps, NULL, n, &params);
}

/* Whether a conditional handle was made in g (the GPU refuses such a
 * child graph, NOT_SUPPORTED, also when no node uses the handle: seen by
 * the differential run on an H100). */
static int has_handle(const struct sim_graph *g)
{
    size_t count, i;
    struct sim_handle *table = sim_handle_table(&count);

    for (i = 0; i < count; i++)
        if (table[i].graph == g)
            return 1;
    return 0;
}

static CUresult sim_cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps,
                                             size_t n, CUgraph child)
{
    struct sim_graph *g, *c;
    struct sim_node *node;
    CUresult rc;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (!sim_graph_valid(hg) || !sim_graph_valid(child) || hg == child) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto done;
    }
    g = (struct sim_graph *)hg;
    c = (struct sim_graph *)child;
    sim_graph_check_no_dead_body(c, "cuGraphAddChildGraphNode");
    rc = check_deps(g, deps, n);
    if (rc != CUDA_SUCCESS)
        goto done;
    if (sim_graph_has_node_types(c, 1, 1) || has_handle(c)) {
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto done;
    }
    node = sim_graph_add(g, CU_GRAPH_NODE_TYPE_GRAPH, (struct sim_node *const *)deps, n);
    if (!node) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    node->u.child.graph = sim_graph_clone(c, node);
    if (!node->u.child.graph) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    *out = (CUgraphNode)node;
done:
    sim_unlock();
    return rc;
}

/* The simulator locked with hg live, or NULL and unlocked. */
static struct sim_graph *lock_live_graph(CUgraph hg)
{
    sim_lock();
    if (sim_graph_valid(hg))
        return (struct sim_graph *)hg;
    sim_unlock();
    return NULL;
}

static CUresult sim_cuGraphGetNodes(CUgraph hg, CUgraphNode *nodes, size_t *count)
{
    struct sim_graph *g;
    size_t i;

    if (!count || (nodes && *count == 0))   /* measured on the H200: an array of no room is refused */
        return CUDA_ERROR_INVALID_VALUE;
    if (!(g = lock_live_graph(hg)))
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes)
        for (i = 0; i < *count && i < g->node_count; i++)
            nodes[i] = (CUgraphNode)g->nodes[i];
    *count = g->node_count;
    sim_unlock();
    return CUDA_SUCCESS;
}

/* Edges are each node's dependencies: (dependency, node), no edge data. */
static CUresult sim_cuGraphGetEdges(CUgraph hg, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edge_data,
                                    size_t *count)
{
    struct sim_graph *g;
    size_t i, j, total = 0;

    if (!count || (!from != !to) || (edge_data && !from))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(g = lock_live_graph(hg)))
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < g->node_count; i++)
        for (j = 0; j < g->nodes[i]->dep_count; j++, total++)
            if (from && total < *count) {
                from[total] = (CUgraphNode)g->nodes[i]->deps[j];
                to[total] = (CUgraphNode)g->nodes[i];
                if (edge_data)
                    memset(&edge_data[total], 0, sizeof *edge_data);
            }
    if (from)
        for (i = total; i < *count; i++) {
            from[i] = to[i] = NULL;
            if (edge_data)
                memset(&edge_data[i], 0, sizeof *edge_data);
        }
    *count = from && *count < total ? *count : total;
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult sim_cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *type)
{
    struct sim_node *n;

    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    n = sim_node_of(h);
    if (n)
        *type = n->type;
    sim_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out)
{
    struct sim_node *n;
    CUresult rc = CUDA_SUCCESS;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    n = sim_node_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_GRAPH)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *out = (CUgraph)n->u.child.graph;
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph hg, CUcontext ctx,
                                                   unsigned int default_value, unsigned int flags)
{
    struct sim_handle *grown;
    CUresult rc = CUDA_SUCCESS;

    if (!out || (flags & ~(unsigned int)CU_GRAPH_COND_ASSIGN_DEFAULT) || !sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (!sim_graph_valid(hg)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (!(grown = realloc(handles, (handle_count + 1) * sizeof *grown))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        handles = grown;
        handles[handle_count].graph = (struct sim_graph *)hg;
        handles[handle_count].default_value = default_value;
        handles[handle_count].flags = flags;
        handles[handle_count].node = NULL;
        *out = (CUgraphConditionalHandle)++handle_count;
    }
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------- DOT */

static const char *type_name(CUgraphNodeType t)
{
    switch (t) {
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "MEMSET";
    case CU_GRAPH_NODE_TYPE_HOST: return "HOST";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "GRAPH";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "EMPTY";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "MEM_ALLOC";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "MEM_FREE";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "CONDITIONAL";
    default: return "OTHER";
    }
}

static void dot_graph(FILE *f, const struct sim_graph *g, const char *prefix)
{
    size_t i, j;

    for (i = 0; i < g->node_count; i++)
        fprintf(f, "  \"%s%zu\" [label=\"%s\"];\n", prefix, i, type_name(g->nodes[i]->type));
    for (i = 0; i < g->node_count; i++)
        for (j = 0; j < g->nodes[i]->dep_count; j++)
            fprintf(f, "  \"%s%zu\" -> \"%s%zu\";\n", prefix, g->nodes[i]->deps[j]->index, prefix, i);
}

static CUresult sim_cuGraphDebugDotPrint(CUgraph hg, const char *path, unsigned int flags)
{
    FILE *f;
    CUresult rc = CUDA_SUCCESS;

    (void)flags;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (!sim_graph_valid(hg)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (!(f = fopen(path, "w"))) {
        rc = CUDA_ERROR_OPERATING_SYSTEM;
    } else {
        fprintf(f, "digraph cudasim {\n");
        dot_graph(f, (struct sim_graph *)hg, "n");
        fprintf(f, "}\n");
        if (fclose(f) != 0)
            rc = CUDA_ERROR_OPERATING_SYSTEM;
    }
    sim_unlock();
    return rc;
}

struct sim_handle *sim_handle_table(size_t *count)
{
    *count = handle_count;
    return handles;
}

const struct sim_entry sim_graph_entries[] = {
    SIM_ENTRY(cuGraphCreate, 10000),
    SIM_ENTRY(cuGraphClone, 10000),
    SIM_ENTRY(cuGraphKernelNodeGetParams, 12000),
    { "cuGraphKernelNodeGetParams", 10000, (void *)sim_cuGraphKernelNodeGetParams_v1 },
    SIM_ENTRY(cuGraphKernelNodeGetAttribute, 11000),
    SIM_ENTRY(cuGraphMemAllocNodeGetParams, 11040),
    SIM_ENTRY(cuGraphMemcpyNodeGetParams, 10000),
    SIM_ENTRY(cuGraphMemsetNodeGetParams, 10000),
    SIM_ENTRY(cuGraphDestroy, 10000),
    SIM_ENTRY(cuGraphAddNode, 12030),
    SIM_ENTRY(cuGraphAddEmptyNode, 10000),
    SIM_ENTRY(cuGraphAddChildGraphNode, 10000),
    SIM_ENTRY(cuGraphGetNodes, 10000),
    SIM_ENTRY(cuGraphGetEdges, 12030),
    SIM_ENTRY(cuGraphNodeGetType, 10000),
    SIM_ENTRY(cuGraphChildGraphNodeGetGraph, 10000),
    SIM_ENTRY(cuGraphConditionalHandleCreate, 12030),
    SIM_ENTRY(cuGraphDebugDotPrint, 11030),
};
const size_t sim_graph_entry_count = sizeof sim_graph_entries / sizeof sim_graph_entries[0];
