/* cucap_builder_host_callback: a host callback whose data the driver's
 * user objects give back once nothing can run it (builder.h). */
#include "config.h"

#include <stdlib.h>

#include "builder-internal.h"
#include "driver.h"
#include "error.h"
#include "reaper.h"

struct callback {
    CUhostFn fn;
    void *data;
    CUhostFn free_data;
    struct cucap_reaped *reaped;     /* allocated up front: no allocation in a driver callback */
    int taken;                       /* a graph or a stream took the data: the reaper frees it */
    CUresult failed_at;              /* set with `failed_call` when a driver call failed */
    const char *failed_call;
};

/* A user object's destructor, or the host function behind an eager
 * call: on a thread of the driver's (or the caller's, inside a driver
 * call), where no CUDA call may be made. */
static void CUDA_CB hand_to_reaper(void *p)
{
    cucap_i_reap(p);
}

/* An eager call: the callback, then its data handed to the reaper, in
 * one host function (one queued call, which either takes both or
 * neither). */
struct eager_call {
    CUhostFn fn;
    void *data;
    struct cucap_reaped *reaped;     /* NULL: nothing to give back */
};

static void CUDA_CB call_then_give_back(void *p)
{
    struct eager_call *call = p;

    call->fn(call->data);
    if (call->reaped)
        cucap_i_reap(call->reaped);
    free(call);
}

static CUresult fail(struct callback *c, const char *call, CUresult rc)
{
    c->failed_call = call;
    c->failed_at = rc;
    return rc;
}

/* On b's stream, under its capture's lock: a host node whose graph owns
 * the data (a user object moved into the capture's graph), or, where the
 * stream does not capture (an eager run), a host function that calls it
 * and then hands the data to the reaper. */
static CUresult queue(CUstream s, void *p)
{
    struct callback *c = p;
    CUstreamCaptureStatus status;
    CUuserObject object;
    CUgraph graph = NULL;
    CUresult rc;

    if ((rc = cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, &graph, NULL, NULL, NULL)) != CUDA_SUCCESS)
        return fail(c, "cuStreamGetCaptureInfo", rc);
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return fail(c, "the capture", CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) {
        struct eager_call *call = malloc(sizeof *call);
        if (!call)
            return fail(c, "malloc", CUDA_ERROR_OUT_OF_MEMORY);
        *call = (struct eager_call){ c->fn, c->data, c->reaped };
        if ((rc = cucap_i_drv.cuLaunchHostFunc(s, call_then_give_back, call)) != CUDA_SUCCESS) {
            free(call);
            return fail(c, "cuLaunchHostFunc", rc);
        }
        c->taken = 1;
        return CUDA_SUCCESS;
    }
    if (c->free_data) {
        if ((rc = cucap_i_drv.cuUserObjectCreate(&object, c->reaped, hand_to_reaper, 1,
                                                 CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)) != CUDA_SUCCESS)
            return fail(c, "cuUserObjectCreate", rc);
        c->taken = 1;   /* the object gives it back from here on */
        if ((rc = cucap_i_drv.cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE)) != CUDA_SUCCESS) {
            (void)cucap_i_drv.cuUserObjectRelease(object, 1);   /* its destructor hands the data to the reaper */
            return fail(c, "cuGraphRetainUserObject", rc);
        }
    }
    if ((rc = cucap_i_drv.cuLaunchHostFunc(s, c->fn, c->data)) != CUDA_SUCCESS)
        return fail(c, "cuLaunchHostFunc", rc);   /* the graph, which goes with the failed capture, frees it */
    return CUDA_SUCCESS;
}

CUresult cucap_builder_host_callback(cucap_builder *b, CUhostFn fn, void *data, CUhostFn free_data,
                                     cucap_error **err)
{
    static const char caller[] = "cucap_builder_host_callback";
    struct callback c = { fn, data, free_data, NULL, 0, CUDA_SUCCESS, NULL };
    CUresult rc;

    if (!b || !fn)
        rc = cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: %s is NULL", caller, !b ? "the builder" : "fn");
    else if (cucap_builder_get_kind(b) == CUCAP_BUILDER_BODY)
        rc = cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: a conditional body holds no host node (the driver "
                          "refuses one there)", caller);
    else if (free_data && !(c.reaped = malloc(sizeof *c.reaped)))
        rc = cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    else {
        if (c.reaped)
            *c.reaped = (struct cucap_reaped){ NULL, free_data, data };
        rc = cucap_i_builder_enqueue_as(b, queue, &c, caller, "cucap_builder_host_callback", err);
        if (rc != CUDA_SUCCESS && c.failed_call)
            cucap_i_note_failure(err, c.failed_call,
                                 c.taken ? "queuing the callback (the capture's graph took its data and gives it "
                                           "back when it goes)"
                                         : "queuing the callback", c.failed_at);
    }
    if (!c.taken) {
        free(c.reaped);
        if (free_data)
            free_data(data);
    }
    return rc;
}
