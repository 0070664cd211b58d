/* The checks of a builder's state that every builder call makes. */
#include "config.h"

#include "builder-object.h"
#include "error.h"

const char *const cucap_i_state_names[] = { "NOT_STARTED", "CAPTURING", "ENDED", "INVALIDATED", "CLOSED" };

CUresult cucap_i_builder_check_open(const cucap_builder *b, const char *caller, cucap_error **err)
{
    if (!b)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the builder is NULL", caller);
    if (b->state == CUCAP_BUILDER_CLOSED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder has been closed", caller);
    return CUDA_SUCCESS;
}

CUresult cucap_i_builder_no_graph(const char *caller, cucap_error **err)
{
    return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                        "%s: the capture was invalidated and the driver discarded its graph; this builder has no "
                        "graph", caller);
}

CUresult cucap_i_builder_check_ended(const cucap_builder *b, const char *caller, cucap_error **err)
{
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->state == CUCAP_BUILDER_INVALIDATED)
        return cucap_i_builder_no_graph(caller, err);
    if (b->state != CUCAP_BUILDER_ENDED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the graph has not finished building (the builder "
                            "is %s; end it first)", caller, cucap_i_state_names[b->state]);
    return CUDA_SUCCESS;
}
