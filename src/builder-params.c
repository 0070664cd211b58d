/* What a capture's work reads and names, as builders ask for it: the capture's
 * parameter block (params.c holds the block itself; a direct run's owner
 * makes its own) and the names of its nodes (node-names.c). */
#include "config.h"

#include "builder-internal.h"
#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "capture.h"
#include "graph-owner.h"
#include "node-names.h"
#include "params.h"

CUresult cucap_builder_params(cucap_builder *b, size_t size, CUdeviceptr *block, cucap_error **err)
{
    static const char caller[] = "cucap_builder_params";
    struct cucap_direct_run *run;
    struct cucap_params *p;
    struct ctx_hold *hold;
    struct cucap_capture *h;
    CUresult rc = CUDA_SUCCESS;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!block)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: block is NULL", caller);
    *block = 0;
    if (size == 0)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a parameter block of 0 bytes", caller);
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a conditional body captures on its own, and its graph is launched with its "
                            "parent's: make the block in the parent's capture (the body's work may read it)", caller);
    if (cucap_i_builder_state(b) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[cucap_i_builder_state(b)]);
    if (!cucap_i_builder_lock(b)) {
        cucap_i_builder_unlock(b);
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's capture ended (its primary's end came "
                            "first)", caller);
    }
    h = cucap_i_builder_capture(b);
    hold = cucap_i_builder_ctx(b);
    if ((run = cucap_i_capture_direct(h)) != NULL)
        rc = run->params(run, hold->ctx, hold->dev, cucap_builder_stream(b), size, block, caller, err);
    else if ((p = cucap_i_capture_params(h)) != NULL)
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                          "%s: the capture has its parameter block already (%zu bytes at 0x%llx): one per capture, "
                          "so put every value its work reads in one struct", caller, cucap_i_params_size(p),
                          (unsigned long long)cucap_i_params_block(p));
    else {
        /* a primary builder's last block of this size again; one of another size stays with the
         * executable graphs that read it */
        if (!(p = cucap_i_builder_kept_params(b, size)) &&
            (rc = cucap_i_params_new(hold, size, &p, caller, err)) == CUDA_SUCCESS)
            cucap_i_builder_offer_params(b, p);
        if (rc == CUDA_SUCCESS) {
            cucap_i_capture_set_params(h, p, caller);
            *block = cucap_i_params_block(p);
        }
    }
    cucap_i_builder_unlock(b);
    return rc;
}


CUresult cucap_builder_name_node(cucap_builder *b, const char *name, cucap_error **err)
{
    static const char caller[] = "cucap_builder_name_node";
    cucap_builder_state state;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: the nodes of a conditional body cannot be named "
                            "(an executable graph changes only its top-level nodes)", caller);
    if ((state = cucap_builder_get_state(b)) != CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[state]);
    if (!cucap_i_builder_lock(b))
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the capture ended while the call ran (its end came "
                          "from another thread)", caller);
    else if (!cucap_i_capture_direct(cucap_i_builder_capture(b)))
        rc = cucap_i_names_add(cucap_i_owner_names(cucap_i_capture_owner(cucap_i_builder_capture(b))),
                               cucap_builder_stream(b), name, caller, err);
    else
        rc = name && *name ? CUDA_SUCCESS : cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is %s", caller,
                                                         name ? "empty" : "NULL");   /* a direct run: no graph */
    cucap_i_builder_unlock(b);
    return rc;
}
