/* Copies of a launch's values through pinned memory of the library's.
 *
 * Above 64 KiB the driver does not promise to take pageable values at the
 * call: it may stage them only once the stream reaches the copy, and the
 * call waits for that (on the H100, behind held work, one copy above 2 MiB
 * waited, and the third above 64 KiB); from pinned memory it queues the
 * copy and returns.  So the values go first
 * into a pinned buffer of the library's (host memcpy), then to the device
 * on the stream, and the buffer is not written again until an event
 * behind that copy has been reached.  An object's copies run in the order
 * they were queued (the parameter block orders each launch after the one
 * before), so its ring of buffers is reused oldest first: the oldest
 * buffer is free or none is.
 *
 * A ring given back puts its buffers with the library's idle ones, still
 * busy or not; the next ring that needs a buffer takes an idle one whose
 * copy is done and that is large enough (and not more than twice too
 * large), else allocates one.  cucap_release_cached frees the idle ones
 * whose copies are done. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "staging.h"

struct cucap_staging {
    struct cucap_staging *next;
    struct ctx_hold *hold;   /* the context of its event; a reference */
    void *host;              /* pinned, size bytes */
    size_t size;
    CUevent copied;          /* recorded behind its last copy */
};

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cucap_staging *idle;

static int copy_done(struct cucap_staging *b)
{
    return cucap_i_drv.cuEventQuery(b->copied) == CUDA_SUCCESS;
}

/* In b's context, which the caller makes current. */
static void free_buffer(struct cucap_staging *b, const char *caller)
{
    CUresult rc;

    if ((rc = cucap_i_drv.cuEventDestroy(b->copied)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuEventDestroy failed on a staging buffer's event: " CUCAP_I_RESULT_FMT, caller,
                     CUCAP_I_RESULT_ARGS(rc));
    if ((rc = cucap_i_drv.cuMemFreeHost(b->host)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuMemFreeHost failed on a staging buffer of %zu bytes: " CUCAP_I_RESULT_FMT, caller,
                     b->size, CUCAP_I_RESULT_ARGS(rc));
    cucap_i_ctx_hold_release(b->hold);
    free(b);
}

/* An idle buffer of hold's context for size bytes whose last copy is done,
 * or NULL. */
static struct cucap_staging *take_idle(struct ctx_hold *hold, size_t size)
{
    struct cucap_staging **at, *b = NULL;

    pthread_mutex_lock(&idle_lock);
    for (at = &idle; *at; at = &(*at)->next)
        if ((*at)->hold->ctx == hold->ctx && (*at)->size >= size && (*at)->size / 2 <= size && copy_done(*at)) {
            b = *at;
            *at = b->next;
            b->next = NULL;
            break;
        }
    pthread_mutex_unlock(&idle_lock);
    return b;
}

/* A new buffer, allocated in relaxed mode (a capture in global mode on
 * another thread refuses pinned allocations otherwise). */
static CUresult allocate(struct ctx_hold *hold, size_t size, struct cucap_staging **out, const char *caller,
                         cucap_error **err)
{
    struct cucap_work_scope w;
    struct cucap_staging *b;
    CUresult rc;

    if (!(b = calloc(1, sizeof *b)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    if ((rc = cucap_i_work_enter(&w, hold->ctx, caller, err)) == CUDA_SUCCESS) {
        if ((rc = cucap_i_drv.cuMemAllocHost(&b->host, size)) != CUDA_SUCCESS)
            cucap_i_fail(err, rc, "%s: cuMemAllocHost of %zu bytes for the values' staging buffer failed: "
                         CUCAP_I_RESULT_FMT, caller, size, CUCAP_I_RESULT_ARGS(rc));
        else if ((rc = cucap_i_drv.cuEventCreate(&b->copied, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            cucap_i_fail_driver(err, rc, caller, "cuEventCreate");
            (void)cucap_i_drv.cuMemFreeHost(b->host);
        }
        rc = cucap_i_work_leave(&w, rc, caller, err);
    }
    if (rc != CUDA_SUCCESS) {
        free(b);
        return rc;
    }
    b->size = size;
    b->hold = hold;
    cucap_i_ctx_hold_ref_by(hold, 1);
    *out = b;
    return CUDA_SUCCESS;
}

CUresult cucap_i_staging_copy(struct cucap_staging_ring *ring, struct ctx_hold *hold, CUdeviceptr dst,
                              const void *values, size_t size, CUstream s, const char *caller, cucap_error **err)
{
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    struct cucap_staging *b = ring->oldest;
    CUresult rc;

    if (size <= CUCAP_I_PAGEABLE_COPY_MAX) {
        if ((rc = cucap_i_drv.cuMemcpyHtoDAsync(dst, values, size, s)) != CUDA_SUCCESS)
            cucap_i_fail_driver(err, rc, caller, "cuMemcpyHtoDAsync");
        return rc;
    }
    /* a capture would read the buffer at each of its launches, long after it holds other values */
    if ((rc = cucap_i_drv.cuStreamIsCapturing(s, &capturing)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamIsCapturing");
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE)
        return cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                            "%s: the stream is capturing, and values of %zu bytes (above %zu) cannot be captured: "
                            "the capture would read them at each of its own launches from memory the library "
                            "reuses; nothing was copied", caller, size, CUCAP_I_PAGEABLE_COPY_MAX);
    if (b && b->size >= size && copy_done(b)) {
        if (!(ring->oldest = b->next))
            ring->newest = NULL;
        b->next = NULL;
    } else if (!(b = take_idle(hold, size)) && (rc = allocate(hold, size, &b, caller, err)) != CUDA_SUCCESS) {
        return rc;
    }
    memcpy(b->host, values, size);
    if ((rc = cucap_i_drv.cuMemcpyHtoDAsync(dst, b->host, size, s)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuMemcpyHtoDAsync");
    else if ((rc = cucap_i_drv.cuEventRecord(b->copied, s)) != CUDA_SUCCESS) {
        /* the copy is queued and nothing would tell when it is done: its
         * source is never written again, nor freed */
        cucap_i_fail(err, rc, "%s: cuEventRecord failed behind the copy of the values, which was queued: "
                     CUCAP_I_RESULT_FMT "; its staging buffer's %zu bytes of pinned memory are not reused or "
                     "freed", caller, CUCAP_I_RESULT_ARGS(rc), b->size);
        (void)cucap_i_drv.cuEventDestroy(b->copied);
        cucap_i_ctx_hold_release(b->hold);
        free(b);
        return rc;
    }
    if (ring->newest)
        ring->newest->next = b;
    else
        ring->oldest = b;
    ring->newest = b;
    return rc;
}

void cucap_i_staging_ring_give_back(struct cucap_staging_ring *ring)
{
    if (!ring->oldest)
        return;
    pthread_mutex_lock(&idle_lock);
    ring->newest->next = idle;
    idle = ring->oldest;
    pthread_mutex_unlock(&idle_lock);
    ring->oldest = ring->newest = NULL;
}

void cucap_i_staging_drain(void)
{
    struct cucap_staging **at, *b;
    struct cucap_work_scope w;

    pthread_mutex_lock(&idle_lock);
    for (at = &idle; (b = *at);) {
        cucap_i_work_enter_quietly(&w, b->hold->ctx, "cucap_release_cached");
        if (copy_done(b)) {
            *at = b->next;
            free_buffer(b, "cucap_release_cached");
        } else {
            at = &b->next;
        }
        cucap_i_work_leave_quietly(&w, "cucap_release_cached");
    }
    pthread_mutex_unlock(&idle_lock);
}
