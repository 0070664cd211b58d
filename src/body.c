/* A conditional body's standalone capture, ended, attached to its node in
 * the parent's graph (checked first for node types a body may not hold). */
#include "config.h"

#include <stdlib.h>

#include "driver.h"
#include "graph-owner.h"
#include "error.h"
#include "body.h"

/* Node types the driver allows in a conditional body (CUDA 12.3 to 13.0);
 * a body holding another type makes the parent's instantiate fail. */
static int allowed_in_body(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET ||
           t == CU_GRAPH_NODE_TYPE_EMPTY || t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

/* The first node of g (or of a child graph in it) that a body may not
 * hold: CUDA_SUCCESS and *bad set to its type, or -1 in *bad for none. */
static CUresult find_disallowed_node(CUgraph g, int depth, int *bad)
{
    CUgraphNode stack_nodes[64], *nodes = stack_nodes;
    size_t n = 0, i;
    CUresult rc;

    *bad = -1;
    if ((rc = cucap_i_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS || n == 0)
        return rc;
    if (n > 64 && !(nodes = malloc(n * sizeof *nodes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = cucap_i_drv.cuGraphGetNodes(g, nodes, &n);
    for (i = 0; rc == CUDA_SUCCESS && i < n && *bad < 0; i++) {
        CUgraphNodeType t;
        CUgraph child;
        if ((rc = cucap_i_drv.cuGraphNodeGetType(nodes[i], &t)) != CUDA_SUCCESS)
            break;
        if (!allowed_in_body(t))
            *bad = (int)t;
        else if (t == CU_GRAPH_NODE_TYPE_GRAPH && depth < 8 &&
                 (rc = cucap_i_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &child)) == CUDA_SUCCESS)
            rc = find_disallowed_node(child, depth + 1, bad);
    }
    if (nodes != stack_nodes)
        free(nodes);
    return rc;
}

/* A body's capture ended with graph g: add it to the node's body graph as a
 * child-graph node (the driver clones it).  Capturing straight into the
 * body graph instead crashes the driver when that capture is invalidated.
 * Under the parent's graph lock: the parent's end may be discarding
 * the body graph at this moment. */
CUresult cucap_i_attach_body(struct cucap_graph_owner *parent, struct cucap_box *body_box,
                             struct cucap_body_record *record, CUgraph g, const char *caller, cucap_error **err)
{
    CUgraphNode node;
    CUgraph body;
    CUresult rc;
    int bad = -1;

    if ((rc = find_disallowed_node(g, 0, &bad)) == CUDA_SUCCESS && bad >= 0) {
        rc = cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                          "%s: body %u of %s holds a %s node, which the driver does not allow in a conditional "
                          "body (allowed: kernel, memset, memcpy, empty, child graph and conditional nodes); the "
                          "body is marked failed: capture it again without that work", caller,
                          cucap_i_body_index(record), cucap_i_body_node(record),
                          cucap_i_node_type_text((CUgraphNodeType)bad));
    } else if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuGraphGetNodes (reading the captured body)");
    } else {
        cucap_i_owner_lock(parent);
        body = cucap_i_box_graph(body_box);
        if (!body)
            rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                              "%s: the parent's capture was invalidated and the driver discarded its graph, this "
                              "body's graph with it; the body cannot be attached", caller);
        else if ((rc = cucap_i_drv.cuGraphAddChildGraphNode(&node, body, NULL, 0, g)) != CUDA_SUCCESS)
            cucap_i_fail(err, rc, "%s: cuGraphAddChildGraphNode failed while attaching the captured body to its "
                         "conditional node: " CUCAP_I_RESULT_FMT "; the body is marked failed", caller,
                         CUCAP_I_RESULT_ARGS(rc));
        cucap_i_owner_unlock(parent);
    }
    cucap_i_owner_set_body(parent, record, rc == CUDA_SUCCESS ? CUCAP_BODY_ATTACHED : CUCAP_BODY_FAILED);
    return rc;
}
