/* What an ended builder hands out: an executable graph (complete, and
 * complete_into, which updates one when it can), a reference to its graph,
 * its graph printed as dot. */
#include "config.h"

#include <string.h>

#include "builder-internal.h"
#include "driver.h"
#include "error.h"
#include "graph.h"
#include "capture.h"
#include "graph-owner.h"

/* The graph of capture h (over), instantiated with the block it reads. */
static CUresult instantiate(struct cucap_capture *h, const cucap_complete_options *opts, cucap_exec **out,
                            const char *caller, cucap_error **err)
{
    return cucap_i_instantiate(cucap_i_capture_owner(h), NULL, cucap_i_capture_params(h), opts, out, caller, err);
}

/* A reference to the graph at box (NULL: the root) of h's graph owner,
 * reading h's block (read under the graph lock: a body's parent may still
 * be capturing). */
static cucap_graph *graph_of(struct cucap_capture *h, struct cucap_box *box)
{
    cucap_graph *g;

    cucap_i_capture_lock(h);
    g = cucap_i_graph_new(cucap_i_capture_owner(h), box, cucap_i_capture_params(h));
    cucap_i_capture_unlock(h);
    return g;
}

CUresult cucap_builder_complete(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **out,
                                cucap_error **err)
{
    static const char caller[] = "cucap_builder_complete";
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = cucap_i_builder_check_ended(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a conditional body is completed with its parent, not alone", caller);
    return instantiate(cucap_i_builder_capture(b), opts, out, caller, err);
}

/* The error e of a call made for caller, as caller's own; e is freed. */
static CUresult fail_as(cucap_error **err, cucap_error *e, const char *caller)
{
    CUresult code = cucap_error_code(e);
    int fresh = err && !*err;
    size_t i;

    cucap_i_fail(err, code, "%s: %s", caller, cucap_error_message(e));
    if (fresh)
        for (i = 0; cucap_error_note(e, i); i++)
            cucap_i_error_add_note(*err, "%s", cucap_error_note(e, i));
    cucap_error_free(e);
    return code;
}

static CUresult complete_into(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **exec,
                              cucap_completion *how, cucap_update_refusal *refusal, const char *caller,
                              cucap_error **err)
{
    struct cucap_capture *h;
    cucap_update_refusal why;
    cucap_error *refused = NULL;
    cucap_exec *made = NULL;
    CUresult rc;

    if (!exec)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: exec is NULL", caller);
    if ((rc = cucap_i_builder_check_ended(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: a conditional body is completed with its parent, not alone", caller);
    memset(&why, 0, sizeof why);
    why.result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    h = cucap_i_builder_capture(b);
    if (*exec) {
        rc = cucap_i_exec_update(*exec, cucap_i_capture_owner(h), cucap_i_capture_params(h), h, &why,
                                 "cucap_exec_update", &refused);
        if (rc != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
            if (rc == CUDA_SUCCESS && how)
                *how = CUCAP_COMPLETED_UPDATED;
            if (rc == CUDA_SUCCESS && refusal)
                *refusal = why;
            else if (rc != CUDA_SUCCESS)
                rc = fail_as(err, refused, caller);
            return rc;
        }
        cucap_error_free(refused);
    }
    if ((rc = instantiate(h, opts, &made, caller, err)) != CUDA_SUCCESS)
        return rc;
    cucap_exec_destroy(*exec);
    *exec = made;
    if (how)
        *how = CUCAP_COMPLETED_INSTANTIATED;
    if (refusal)
        *refusal = why;
    return CUDA_SUCCESS;
}

CUresult cucap_builder_complete_into(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **exec,
                                     cucap_completion *how, cucap_error **err)
{
    return complete_into(b, opts, exec, how, NULL, "cucap_builder_complete_into", err);
}

CUresult cucap_builder_complete_into_why(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **exec,
                                         cucap_completion *how, cucap_update_refusal *refusal, cucap_error **err)
{
    return complete_into(b, opts, exec, how, refusal, "cucap_builder_complete_into_why", err);
}

CUresult cucap_builder_graph(cucap_builder *b, cucap_graph **out, cucap_error **err)
{
    static const char caller[] = "cucap_builder_graph";
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_FORKED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the graph is unavailable on forked builders; use the primary", caller);
    if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY &&
        (cucap_i_builder_state(b) == CUCAP_BUILDER_NOT_STARTED || cucap_i_builder_state(b) == CUCAP_BUILDER_ENDED)) {
        /* the node's body graph, which the parent's graph owner holds */
        if (!(*out = graph_of(cucap_i_builder_body_capture(b), cucap_i_builder_body_box(b))))
            return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        return CUDA_SUCCESS;
    }
    if (cucap_i_builder_state(b) == CUCAP_BUILDER_CAPTURING)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE,
                            "%s: the graph is unavailable while the capture is in progress; end it first", caller);
    if (cucap_i_builder_state(b) == CUCAP_BUILDER_INVALIDATED)
        return cucap_i_builder_no_graph(caller, err);
    if (cucap_i_builder_state(b) == CUCAP_BUILDER_NOT_STARTED)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: there is no graph before begin", caller);
    if (!(*out = graph_of(cucap_i_builder_capture(b), NULL)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    return CUDA_SUCCESS;
}

CUresult cucap_builder_dot_print(cucap_builder *b, const char *path, unsigned int flags, cucap_error **err)
{
    static const char caller[] = "cucap_builder_dot_print";
    struct cucap_capture *h;
    CUresult rc;

    if (!path)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: path is NULL", caller);
    if ((rc = cucap_i_builder_check_ended(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    h = cucap_i_builder_capture(b);
    cucap_i_capture_lock(h);
    rc = cucap_i_drv.cuGraphDebugDotPrint(cucap_i_owner_root(cucap_i_capture_owner(h)), path, flags);
    cucap_i_capture_unlock(h);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail(err, rc, "%s: cuGraphDebugDotPrint could not write '%s': " CUCAP_I_RESULT_FMT, caller,
                            path, CUCAP_I_RESULT_ARGS(rc));
    return CUDA_SUCCESS;
}
