/* Conditional nodes: condition handles, IF, IF-ELSE, WHILE and SWITCH,
 * and the body builders that capture their bodies (body.c attaches an
 * ended body to its node). */
#include "config.h"

#include <string.h>

#include "builder-internal.h"
#include "driver.h"
#include "capture.h"
#include "graph-owner.h"
#include "error.h"
#include "builder-object.h"
#include "stream-cache.h"

#define IF_ELSE_SWITCH_FLOOR 12080    /* IF with two bodies and SWITCH: CUDA 12.8 drivers */

/* Conditional calls write into the capture graph: under the capture's
 * lock (see cucap_i_builder_lock), refused once a fork's primary ended. */
static CUresult conditional_lock(const cucap_builder *b, const char *caller, cucap_error **err)
{
    if (!b || cucap_i_builder_state(b) == CUCAP_BUILDER_CLOSED || !cucap_i_builder_capture(b))
        return CUDA_SUCCESS;   /* the prologue refuses these */
    if (!cucap_i_builder_lock(b) && cucap_i_builder_state(b) == CUCAP_BUILDER_CAPTURING) {
        cucap_i_builder_unlock(b);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the capture ended)",
                            caller);
    }
    return CUDA_SUCCESS;
}

static void conditional_unlock(const cucap_builder *b)
{
    if (b && cucap_i_builder_state(b) != CUCAP_BUILDER_CLOSED)
        cucap_i_builder_unlock(b);
}

/* The checks every conditional call shares; fills the capture point. */
static CUresult conditional_prologue(cucap_builder *b, int driver_floor, const char *caller, CUgraph *graph,
                                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n,
                                     cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_driver_version() < driver_floor)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                            "%s: driver version %d does not support this conditional node (it needs CUDA %d.%d)",
                            caller, cucap_driver_version(), driver_floor / 1000, driver_floor % 1000 / 10);
    if (cucap_i_capture_direct(cucap_i_builder_capture(b)))
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                            "%s: conditional nodes exist only in a graph, and this builder runs its work at once "
                            "without capturing", caller);
    if (cucap_i_capture_is_body(cucap_i_builder_capture(b)))
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                            "%s: conditional nodes cannot be nested inside a conditional body: a body is captured "
                            "standalone and attached as a child graph, and the driver refuses child graphs that "
                            "hold conditional nodes (CUDA_ERROR_NOT_SUPPORTED)", caller);
    if (cucap_i_builder_state(b) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the builder is %s)", caller,
                            cucap_i_state_names[cucap_i_builder_state(b)]);
    rc = cucap_i_drv.cuStreamGetCaptureInfo(cucap_builder_stream(b), &status, NULL, graph, deps, edges, n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: cannot add conditional work when not actively capturing (the driver reports the "
                            "capture %s; call cucap_builder_end)", caller,
                            status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "over");
    return CUDA_SUCCESS;
}

CUresult cucap_builder_create_condition(cucap_builder *b, unsigned int default_value, int assign_default,
                                        CUgraphConditionalHandle *out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_create_condition";
    CUgraph graph = NULL;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = 0;
    if ((rc = conditional_lock(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = conditional_prologue(b, CUCAP_DRIVER_FLOOR, caller, &graph, NULL, NULL, NULL, err)) == CUDA_SUCCESS &&
        (rc = cucap_i_drv.cuGraphConditionalHandleCreate(out, graph, cucap_builder_context(b),
                                                         assign_default ? default_value : 0,
                                                         assign_default ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0)) !=
            CUDA_SUCCESS)
        rc = cucap_i_fail_in_capture(cucap_i_builder_capture(b), cucap_builder_stream(b), rc, caller,
                                     "cuGraphConditionalHandleCreate", NULL, err);
    conditional_unlock(b);
    return rc;
}

static CUresult add_conditional_locked(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                       unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                       cucap_builder **bodies, cucap_error **err);

static CUresult add_conditional(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                cucap_builder **bodies, cucap_error **err)
{
    unsigned int i;
    CUresult rc;

    for (i = 0; i < size; i++)
        bodies[i] = NULL;
    if ((rc = conditional_lock(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = add_conditional_locked(b, c, type, size, driver_floor, caller, node_name, bodies, err);
    conditional_unlock(b);
    return rc;
}

static CUresult add_conditional_locked(cucap_builder *b, CUgraphConditionalHandle c, CUgraphConditionalNodeType type,
                                       unsigned int size, int driver_floor, const char *caller, const char *node_name,
                                       cucap_builder **bodies, cucap_error **err)
{
    struct cucap_capture *h;
    struct cucap_graph_owner *o;
    struct ctx_hold *hold;
    CUstream stream;
    CUgraph graph = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUgraphNodeParams params;
    CUgraphNode node = NULL;
    struct cucap_body_record *record;
    unsigned int i, made;
    CUresult rc;

    if ((rc = conditional_prologue(b, driver_floor, caller, &graph, &deps, &edges, &n, err)) != CUDA_SUCCESS)
        return rc;
    h = cucap_i_builder_capture(b);
    hold = cucap_i_builder_ctx(b);
    stream = cucap_builder_stream(b);
    /* everything that can fail comes before the node, which cannot be removed */
    for (made = 0; made < size; made++) {
        CUstream s = NULL;
        if ((rc = cucap_i_take_stream(hold, &s, caller)) != CUDA_SUCCESS) {
            cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
            break;
        }
        if (!(record = cucap_i_owner_add_body(cucap_i_capture_owner(h), node_name, made)) ||
            !(bodies[made] = cucap_i_builder_new_body(hold, s, record))) {
            if (record)
                cucap_i_owner_set_body(cucap_i_capture_owner(h), record, CUCAP_BODY_EMPTY);
            cucap_i_give_stream(hold, s, caller);
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
            break;
        }
    }
    if (rc == CUDA_SUCCESS) {
        memset(&params, 0, sizeof params);
        params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        params.conditional.handle = c;
        params.conditional.type = type;
        params.conditional.size = size;
        params.conditional.ctx = hold->ctx;
        rc = cucap_i_drv.cuGraphAddNode(&node, graph, deps, edges, n, &params);
        if (rc != CUDA_SUCCESS)
            rc = cucap_i_fail_in_capture(h, stream, rc, caller, "cuGraphAddNode", NULL, err);
        else if ((rc = cucap_i_drv.cuStreamUpdateCaptureDependencies(stream, &node, NULL, 1,
                                                                      CU_STREAM_SET_CAPTURE_DEPENDENCIES)) !=
                 CUDA_SUCCESS)
            rc = cucap_i_fail_in_capture(h, stream, rc, caller, "cuStreamUpdateCaptureDependencies",
                                         "; the conditional node stays in the graph, with nothing captured after "
                                         "it depending on it", err);
    }
    o = cucap_i_capture_owner(h);
    for (i = 0; rc == CUDA_SUCCESS && i < size; i++) {
        struct cucap_box *box = cucap_i_owner_add_child(o, cucap_i_owner_root_box(o), params.conditional.phGraph_out[i]);
        if (!box)
            rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        cucap_i_capture_ref(h);
        cucap_i_builder_place_body(bodies[i], h, box);
    }
    if (rc != CUDA_SUCCESS) {
        for (i = 0; i < size; i++) {
            if (cucap_i_builder_body_record(bodies[i]))
                cucap_i_owner_set_body(o, cucap_i_builder_body_record(bodies[i]), CUCAP_BODY_EMPTY);
            cucap_builder_destroy(bodies[i]);
            bodies[i] = NULL;
        }
        return rc;
    }
    return CUDA_SUCCESS;
}

CUresult cucap_builder_if(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_if";

    if (!then_body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: then_body is NULL", caller);
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_IF, 1, CUCAP_DRIVER_FLOOR, caller, "the IF node added by cucap_builder_if",
                           then_body, err);
}

CUresult cucap_builder_if_else(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body,
                               cucap_builder **else_body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_if_else";
    cucap_builder *bodies[2];
    CUresult rc;

    if (!then_body || !else_body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: then_body or else_body is NULL", caller);
    *then_body = *else_body = NULL;
    rc = add_conditional(b, c, CU_GRAPH_COND_TYPE_IF, 2, IF_ELSE_SWITCH_FLOOR, caller,
                         "the IF-ELSE node added by cucap_builder_if_else", bodies, err);
    if (rc == CUDA_SUCCESS) {
        *then_body = bodies[0];
        *else_body = bodies[1];
    }
    return rc;
}

CUresult cucap_builder_while(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **body, cucap_error **err)
{
    static const char caller[] = "cucap_builder_while";

    if (!body)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: body is NULL", caller);
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_WHILE, 1, CUCAP_DRIVER_FLOOR, caller,
                           "the WHILE node added by cucap_builder_while", body, err);
}

CUresult cucap_builder_switch(cucap_builder *b, CUgraphConditionalHandle c, size_t count, cucap_builder **bodies,
                              cucap_error **err)
{
    static const char caller[] = "cucap_builder_switch";

    if (!bodies)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: bodies is NULL", caller);
    if (count == 0 || count > (unsigned int)CUCAP_SWITCH_MAX)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a switch has 1 to %u bodies, got %zu", caller,
                            (unsigned int)CUCAP_SWITCH_MAX, count);
#if CUDA_VERSION >= 12080
    return add_conditional(b, c, CU_GRAPH_COND_TYPE_SWITCH, (unsigned int)count, IF_ELSE_SWITCH_FLOOR, caller,
                           "the SWITCH node added by cucap_builder_switch", bodies, err);
#else
    (void)b;
    (void)c;
    return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED,
                        "%s: SWITCH nodes need a library built with CUDA 12.8 or newer headers (this one was built "
                        "with CUDA %d.%d's) and a CUDA 12.8 or newer driver", caller, CUDA_VERSION / 1000,
                        CUDA_VERSION % 1000 / 10);
#endif
}
