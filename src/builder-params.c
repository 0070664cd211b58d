/* What a capture's work reads and names, as builders ask for it: the capture's
 * parameter block (params.c holds the block itself; a direct run's owner
 * makes its own) and the names of its nodes (node-names.c). */
#include "config.h"

#include "builder-internal.h"
#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "hierarchy.h"
#include "node-names.h"
#include "params.h"

static CUresult make_params(cucap_builder *b, size_t size, const void *type, CUdeviceptr *block, const char *caller,
                            cucap_error **err)
{
    struct cucap_direct_run *run;
    struct cucap_params *p;
    CUresult rc = CUDA_SUCCESS;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!block)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: block is NULL", caller);
    *block = 0;
    if (size == 0)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a parameter block of 0 bytes", caller);
    if (b->kind == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a conditional body captures on its own, and its graph is launched with its "
                            "parent's: make the block in the parent's capture (the body's work may read it)", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[b->state]);
    if (!cucap_i_capture_lock(b)) {
        cucap_i_capture_unlock(b);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's capture ended (its primary's end came "
                            "first)", caller);
    }
    if ((run = cucap_i_hier_direct(b->h)) != NULL)
        rc = run->params(run, b->ctx->ctx, b->ctx->dev, b->stream, size, block, caller, err);
    else if ((p = cucap_i_hier_params(b->h)) != NULL)
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                          "%s: the capture has its parameter block already (%zu bytes at 0x%llx): one per capture, "
                          "so put every value its work reads in one struct", caller, cucap_i_params_size(p),
                          (unsigned long long)cucap_i_params_block(p));
    else {
        /* a primary builder's last block of this size again; one of another size stays with the
         * executable graphs that read it */
        cucap_builder *keeper = b->kind == CUCAP_BUILDER_PRIMARY ? b : NULL;
        if (keeper && keeper->params && cucap_i_params_size(keeper->params) == size) {
            p = keeper->params;
            cucap_i_params_ref(p);
        } else if ((rc = cucap_i_params_new(b->ctx, size, &p, caller, err)) == CUDA_SUCCESS && keeper) {
            cucap_i_params_unref(keeper->params, caller);
            keeper->params = p;
            cucap_i_params_ref(p);
        }
        if (rc == CUDA_SUCCESS) {
            cucap_i_params_set_type(p, type);
            cucap_i_hier_set_params(b->h, p, caller);
            *block = cucap_i_params_block(p);
        }
    }
    cucap_i_capture_unlock(b);
    return rc;
}

void cucap_i_builder_offer_params(cucap_builder *b, struct cucap_params *p)
{
    if (b->kind != CUCAP_BUILDER_PRIMARY || b->params == p)
        return;
    cucap_i_params_ref(p);
    cucap_i_params_unref(b->params, "cucap_graph_set_run");
    b->params = p;
}

CUresult cucap_builder_params(cucap_builder *b, size_t size, CUdeviceptr *block, cucap_error **err)
{
    return make_params(b, size, NULL, block, "cucap_builder_params", err);
}

CUresult cucap_builder_params_typed(cucap_builder *b, size_t size, const void *type, CUdeviceptr *block,
                                    cucap_error **err)
{
    return make_params(b, size, type, block, "cucap_builder_params_typed", err);
}

CUresult cucap_builder_name_node(cucap_builder *b, const char *name, cucap_error **err)
{
    static const char caller[] = "cucap_builder_name_node";
    cucap_builder_state state;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (b->kind == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: the nodes of a conditional body cannot be named "
                            "(an executable graph changes only its top-level nodes)", caller);
    if ((state = cucap_builder_get_state(b)) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[state]);
    if (!cucap_i_capture_lock(b))
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture ended while the call ran (its end came "
                          "from another thread)", caller);
    else if (!cucap_i_hier_direct(b->h))
        rc = cucap_i_names_add(cucap_i_hier_names(b->h), b->stream, name, caller, err);
    else
        rc = name && *name ? CUDA_SUCCESS : cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is %s", caller,
                                                         name ? "empty" : "NULL");   /* a direct run: no graph */
    cucap_i_capture_unlock(b);
    return rc;
}
