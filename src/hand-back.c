/* A run's stream handed the work of one of the library's streams back
 * (hand-back.h): by an event, or, for the per-thread stream, by a value
 * in a word of device memory of its own. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "driver.h"
#include "error.h"
#include "hand-back.h"
#include "params.h"
#include "stream-cache.h"

/* Each hand-back waits for a value no word held before: a word comes from
 * a pool whose memory earlier words (earlier tokens) or anything else
 * used. */
static _Atomic uint64_t next_token;

static uint64_t new_token(void)
{
    uint64_t none = 0, seed;
    struct timespec t;

    if (!atomic_load_explicit(&next_token, memory_order_relaxed)) {
        clock_gettime(CLOCK_REALTIME, &t);
        seed = ((uint64_t)t.tv_sec << 32) ^ (uint64_t)t.tv_nsec ^ 0x9e3779b97f4a7c15ull;
        atomic_compare_exchange_strong(&next_token, &none, seed | 1);
    }
    return atomic_fetch_add_explicit(&next_token, 1, memory_order_relaxed);
}

/* s waits until from wrote the token into a word allocated on from; the
 * word is freed on from once s's wait is over (an event behind it, which
 * from waits for: s's own work, no allocation). */
static CUresult hand_back_by_value(struct ctx_hold *hold, CUstream s, CUstream from, const char *caller)
{
    uint64_t token = new_token();
    CUmemoryPool pool;
    CUdeviceptr word;
    CUevent passed = NULL;
    CUresult rc;

    if (!cucap_i_drv.cuStreamWriteValue64 || !cucap_i_drv.cuStreamWaitValue64)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((rc = cucap_i_params_pool(hold->dev, &pool, caller, NULL)) != CUDA_SUCCESS ||
        (rc = cucap_i_drv.cuMemAllocFromPoolAsync(&word, sizeof token, pool, from)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuStreamWriteValue64(from, word, token, 0)) == CUDA_SUCCESS &&
        (rc = cucap_i_drv.cuStreamWaitValue64(s, word, token, CU_STREAM_WAIT_VALUE_EQ)) == CUDA_SUCCESS &&
        (rc = cucap_i_create_in(hold->ctx, CUCAP_I_EVENT, (void **)&passed)) == CUDA_SUCCESS &&
        (rc = cucap_i_drv.cuEventRecord(passed, s)) == CUDA_SUCCESS)
        rc = cucap_i_drv.cuStreamWaitEvent(from, passed, 0);
    if (passed)
        (void)cucap_i_drv.cuEventDestroy(passed);
    if (rc == CUDA_SUCCESS)
        return cucap_i_drv.cuMemFreeAsync(word, from);
    /* a wait queued behind the write passes; the word stays allocated
     * (s may still read it), and s waits by an event as well */
    return rc;
}

CUresult cucap_i_hand_back(struct ctx_hold *hold, CUstream s, CUstream from, CUevent ev, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    if (s != CU_STREAM_PER_THREAD)
        return cucap_i_stream_after(hold->ctx, s, from, ev);
    cucap_i_work_enter_quietly(&w, hold->ctx, caller);
    if (ev && (rc = cucap_i_drv.cuEventRecord(ev, from)) != CUDA_SUCCESS) {
        cucap_i_work_leave_quietly(&w, caller);
        return rc;
    }
    if ((rc = hand_back_by_value(hold, s, from, caller)) != CUDA_SUCCESS)
        rc = cucap_i_stream_after(hold->ctx, s, from, NULL);   /* ordered all the same */
    cucap_i_work_leave_quietly(&w, caller);
    return rc;
}
