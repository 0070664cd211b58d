/* The signature of a graph's nodes (see node-signature.h). */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucapture.h"
#include "driver.h"
#include "error.h"
#include "node-signature.h"

/* The launch attributes of a kernel node an update must not change, as
 * the driver reads them back.  Measured on an H100 (driver 580.159.04,
 * CUDA 13.0; doc/driver-facts.md): that driver refuses an update across a
 * change of cooperative launch itself, and one across a change of
 * priority where the executable graph runs its nodes' priorities
 * (instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
 * elsewhere every node runs at its stream's priority); it accepts one
 * across a change of any of the others.  A read costs about 33 ns, one
 * the driver refuses about 840 ns (it refuses every read of a preferred
 * cluster size).  An attribute is not read where the driver checks it
 * itself (drivers of cucap_driver_version() driver_checks and later; 0:
 * none measured), nor where it means something only beside cluster
 * dimensions (the first) and those are not set. */
static const struct {
    CUlaunchAttributeID id;
    const char *name;
    int with_clusters;
    int driver_checks;
} attributes[] = {
    { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster dimensions", 0, 0 },
    { CU_LAUNCH_ATTRIBUTE_PRIORITY, "priority", 0, 13000 },
    { CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "memory synchronization domain", 0, 0 },
    { CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative launch", 0, 13000 },
    { CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "cluster scheduling policy", 1, 0 },
#if CUDA_VERSION >= 12080
    { CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, "preferred cluster dimensions", 1, 0 },
#endif
};
#define ATTRIBUTES (sizeof attributes / sizeof attributes[0])

/* The attributes the driver refused to read back, one bit each: asked no
 * more in this process (the driver is the same for its whole life). */
static _Atomic unsigned unreadable;

/* An attribute as compared: dimensions x, y, z, or one value and zeros
 * (a CUlaunchAttributeValue is 64 bytes, most of them unused here). */
typedef unsigned attribute_words[3];

struct node_mark {
    CUgraphNode node;
    CUfunction func;
    CUgraphNodeType type;
    attribute_words values[ATTRIBUTES];
};

struct cucap_signature {
    size_t count, cap, kernels, conditionals;
    struct node_mark *marks;
};

static int is_dimensions(CUlaunchAttributeID id)
{
#if CUDA_VERSION >= 12080
    if (id == CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
        return 1;
#endif
    return id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
}

static void keep_value(CUlaunchAttributeID id, const CUlaunchAttributeValue *v, attribute_words out)
{
    if (is_dimensions(id)) {
        out[0] = v->clusterDim.x;
        out[1] = v->clusterDim.y;
        out[2] = v->clusterDim.z;
    } else if (id == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
        out[0] = (unsigned)v->priority;
    } else if (id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
        out[0] = (unsigned)v->cooperative;
    } else if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
        out[0] = (unsigned)v->clusterSchedulingPolicyPreference;
    } else {
        out[0] = (unsigned)v->memSyncDomain;
    }
}

/* An attribute the driver does not read back is left zero on both sides. */
static void read_attributes(struct node_mark *m)
{
    unsigned skip = atomic_load_explicit(&unreadable, memory_order_relaxed);
    int version = cucap_driver_version();
    CUlaunchAttributeValue v;
    CUresult rc;
    size_t i;

    for (i = 0; i < ATTRIBUTES; i++) {
        if ((skip & (1u << i)) || (attributes[i].driver_checks && version >= attributes[i].driver_checks) ||
            (attributes[i].with_clusters && !(m->values[0][0] | m->values[0][1] | m->values[0][2])))
            continue;
        memset(&v, 0, sizeof v);
        rc = cucap_i_drv.cuGraphKernelNodeGetAttribute(m->node, attributes[i].id, &v);
        if (rc == CUDA_SUCCESS)
            keep_value(attributes[i].id, &v, m->values[i]);
        else if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_NOT_SUPPORTED)
            atomic_fetch_or_explicit(&unreadable, 1u << i, memory_order_relaxed);
    }
}

/* Room for n more marks: asked once for a graph's nodes, which makes one
 * realloc where there are no child graphs, and again for each node, since
 * a child graph's nodes take room its parent's later nodes were given. */
static CUresult reserve(struct cucap_signature *s, size_t n)
{
    struct node_mark *grown;
    size_t cap;

    if (s->cap - s->count >= n)
        return CUDA_SUCCESS;
    cap = s->count + n > 2 * s->cap ? s->count + n : 2 * s->cap;
    if (!(grown = realloc(s->marks, cap * sizeof *grown)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->marks = grown;
    s->cap = cap;
    return CUDA_SUCCESS;
}

static CUresult add_node(struct cucap_signature *s, CUgraphNode node)
{
    struct node_mark *m;
    CUDA_KERNEL_NODE_PARAMS_v1 params;
    CUresult rc;

    if ((rc = reserve(s, 1)) != CUDA_SUCCESS)
        return rc;
    m = &s->marks[s->count++];
    memset(m, 0, sizeof *m);
    m->node = node;
    if ((rc = cucap_i_drv.cuGraphNodeGetType(node, &m->type)) == CUDA_SUCCESS && m->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
        s->conditionals++;
    if (rc != CUDA_SUCCESS || m->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return rc;
    memset(&params, 0, sizeof params);
    if ((rc = cucap_i_drv.cuGraphKernelNodeGetParams_v1(node, &params)) != CUDA_SUCCESS)
        return rc;
    m->func = params.func;
    s->kernels++;
    read_attributes(m);
    return CUDA_SUCCESS;
}

static CUresult add_graph(struct cucap_signature *s, CUgraph g, int depth)
{
    CUgraphNode local[32], *nodes = local;
    size_t n = 0, i;
    CUresult rc;

    if ((rc = cucap_i_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS || n == 0)
        return rc;   /* an array for no node is refused (measured) */
    if (n > 32 && !(nodes = malloc(n * sizeof *nodes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = cucap_i_drv.cuGraphGetNodes(g, nodes, &n)) == CUDA_SUCCESS)
        rc = reserve(s, n);
    for (i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        CUgraph child;
        if ((rc = add_node(s, nodes[i])) == CUDA_SUCCESS && s->marks[s->count - 1].type == CU_GRAPH_NODE_TYPE_GRAPH &&
            depth < 8 && (rc = cucap_i_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &child)) == CUDA_SUCCESS)
            rc = add_graph(s, child, depth + 1);
    }
    if (nodes != local)
        free(nodes);
    return rc;
}

CUresult cucap_i_signature_of(CUgraph g, struct cucap_signature **out)
{
    struct cucap_signature *s = calloc(1, sizeof *s);
    CUresult rc;

    *out = NULL;
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = add_graph(s, g, 0)) != CUDA_SUCCESS) {
        cucap_i_signature_free(s);
        return rc;
    }
    *out = s;
    return CUDA_SUCCESS;
}

int cucap_i_signature_has_kernels(const struct cucap_signature *s)
{
    return s && s->kernels > 0;
}

int cucap_i_signature_has_conditionals(const struct cucap_signature *s)
{
    return s && s->conditionals > 0;
}

void cucap_i_signature_free(struct cucap_signature *s)
{
    if (!s)
        return;
    free(s->marks);
    free(s);
}

static void describe(const attribute_words v, size_t attribute, char *out, size_t size)
{
    if (is_dimensions(attributes[attribute].id))
        snprintf(out, size, "%ux%ux%u", v[0], v[1], v[2]);
    else
        snprintf(out, size, "%d", (int)v[0]);
}

int cucap_i_signature_differs(const struct cucap_signature *was, const struct cucap_signature *now,
                              CUgraphExecUpdateResult *result, CUgraphNode *node, char *why, size_t why_size)
{
    char before[48], after[48];
    size_t i, a;

    *node = NULL;
    if (was->count != now->count) {
        *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        snprintf(why, why_size, "the graph has %zu nodes, the executable graph's %zu", now->count, was->count);
        return 1;
    }
    for (i = 0; i < now->count; i++) {
        const struct node_mark *w = &was->marks[i], *n = &now->marks[i];
        *node = n->node;
        if (w->type != n->type) {
            *result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            snprintf(why, why_size, "node %zu is a %s node, the executable graph's a %s node", i,
                     cucap_i_node_type_text(n->type), cucap_i_node_type_text(w->type));
            return 1;
        }
        if (w->func != n->func) {
            *result = CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED;
            snprintf(why, why_size, "kernel node %zu launches another function", i);
            return 1;
        }
        for (a = 0; a < ATTRIBUTES; a++)
            if (memcmp(w->values[a], n->values[a], sizeof w->values[a])) {
                *result = CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED;
                describe(w->values[a], a, before, sizeof before);
                describe(n->values[a], a, after, sizeof after);
                snprintf(why, why_size, "kernel node %zu's %s: %s, the executable graph's %s (the library "
                         "updates only between kernels of the same launch attributes)", i, attributes[a].name, after,
                         before);
                return 1;
            }
    }
    *node = NULL;
    return 0;
}
