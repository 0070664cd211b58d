/* A capture's lock, as builders take it (see builder-internal.h), and
 * cucap_builder_enqueue, the application's own work under it. */
#include "config.h"

#include <stdint.h>

#include "builder-internal.h"
#include "hierarchy.h"
#include "internal.h"

/* See builder-internal.h.  Returns whether the capture is still running;
 * the caller unlocks with cucap_i_capture_unlock whatever it returned. */
int cucap_i_capture_lock(const cucap_builder *b)
{
    if (!b->h)
        return 0;
    cucap_i_hier_lock(b->h);
    return !cucap_i_hier_is_capture_over(b->h);
}

void cucap_i_capture_unlock(const cucap_builder *b)
{
    if (b->h)
        cucap_i_hier_unlock(b->h);
}

/* The same for two builders (join's root and another), in a fixed order. */
int cucap_i_capture_lock_pair(const cucap_builder *a, const cucap_builder *b)
{
    int running;

    if (!a->h || !b->h || a->h == b->h)
        return cucap_i_capture_lock(a) & (a->h == b->h ? 1 : cucap_i_capture_lock(b));
    if ((uintptr_t)a->h < (uintptr_t)b->h) {
        running = cucap_i_capture_lock(a);
        return cucap_i_capture_lock(b) & running;
    }
    running = cucap_i_capture_lock(b);
    return cucap_i_capture_lock(a) & running;
}

void cucap_i_capture_unlock_pair(const cucap_builder *a, const cucap_builder *b)
{
    cucap_i_capture_unlock(a);
    if (b->h != a->h)
        cucap_i_capture_unlock(b);
}

CUresult cucap_builder_enqueue(cucap_builder *b, cucap_enqueue_fn fn, void *user_data, cucap_error **err)
{
    static const char caller[] = "cucap_builder_enqueue";
    struct cucap_hier *h;
    CUcontext ctx, saved = NULL;
    CUstream s;
    CUresult rc;

    if ((rc = cucap_i_builder_check_open(b, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: fn is NULL", caller);
    if (b->state != CUCAP_BUILDER_CAPTURING || !b->h)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder is not capturing (it is %s)", caller,
                            cucap_i_state_names[b->state]);
    /* fn may close b: nothing of b is read after it runs */
    h = b->h;
    ctx = b->ctx->ctx;
    s = b->stream;
    cucap_i_hier_ref(h);
    if (!cucap_i_capture_lock(b)) {
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the builder's capture ended (its primary's end came "
                          "first); the work was not enqueued", caller);
    } else if ((rc = cucap_i_ctx_enter_for(ctx, &saved, caller, err)) == CUDA_SUCCESS) {
        if ((rc = fn(s, user_data)) != CUDA_SUCCESS) {
            cucap_i_hier_capture_failed(h, "the work of cucap_builder_enqueue", rc);
            cucap_i_fail(err, rc, "%s: the work failed: %s: %s", caller, cucap_i_result_label(rc),
                         cucap_i_result_description(rc));
        }
        rc = cucap_i_ctx_leave_for(ctx, saved, rc, caller, err);
    }
    cucap_i_hier_unlock(h);
    cucap_i_hier_unref(h);
    return rc;
}
