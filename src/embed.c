/* cucap_builder_embed: an ended builder's graph as a child-graph node of
 * a capturing one. */
#include "config.h"

#include "builder-internal.h"
#include "driver.h"
#include "capture.h"
#include "graph-owner.h"
#include "error.h"
#include "params.h"

static CUresult embed_locked(cucap_builder *parent, cucap_builder *child, const char *caller, cucap_error **err);

CUresult cucap_builder_embed(cucap_builder *parent, cucap_builder *child, cucap_error **err)
{
    static const char caller[] = "cucap_builder_embed";
    CUresult rc;

    if ((rc = cucap_i_builder_check_ended(child, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_builder_check_open(parent, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_i_builder_state(parent) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the parent graph is not being built (it is %s)",
                            caller, cucap_i_state_names[cucap_i_builder_state(parent)]);
    if (cucap_i_capture_direct(cucap_i_builder_capture(parent)))
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: the parent runs its work at once without capturing: "
                            "launch the child's executable graph on its stream instead", caller);
    (void)cucap_i_builders_lock_pair(parent, child);
    if (cucap_i_capture_params(cucap_i_builder_capture(child)))
        rc = cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the child's capture made a parameter block, which "
                          "only launches of the child's own executable graphs fill; make the block in the "
                          "parent's capture and let the child's work read it", caller);
    else if (cucap_i_capture_is_over(cucap_i_builder_capture(parent)))
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the parent graph is not being built (its capture "
                          "ended)", caller);
    else
        rc = embed_locked(parent, child, caller, err);
    cucap_i_builders_unlock_pair(parent, child);
    return rc;
}

/* embed, under the locks of both captures */
static CUresult embed_locked(cucap_builder *parent, cucap_builder *child, const char *caller, cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    struct cucap_capture *h = cucap_i_builder_capture(parent);
    CUstream s = cucap_builder_stream(parent);
    CUgraph capture_graph = NULL;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUgraphNode node = NULL;
    CUresult rc;

    rc = cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, &capture_graph, &deps, NULL, &n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the parent graph is not being built (the driver reports its capture %s)", caller,
                            status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "over");
    rc = cucap_i_drv.cuGraphAddChildGraphNode(&node, capture_graph, deps, n,
                                              cucap_i_owner_root(cucap_i_capture_owner(cucap_i_builder_capture(child))));
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail(err, rc, "%s: cuGraphAddChildGraphNode failed: " CUCAP_I_RESULT_FMT "%s", caller,
                            CUCAP_I_RESULT_ARGS(rc),
                            rc == CUDA_ERROR_NOT_SUPPORTED
                                ? " (a graph with allocation, free or conditional nodes cannot be embedded)" : "");
    rc = cucap_i_drv.cuStreamUpdateCaptureDependencies(s, &node, NULL, 1,
                                                        CU_STREAM_SET_CAPTURE_DEPENDENCIES);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_in_capture(h, s, rc, caller, "cuStreamUpdateCaptureDependencies",
                                       "; the child-graph node stays in the graph, with nothing captured after it "
                                       "depending on it", err);
    return CUDA_SUCCESS;
}
