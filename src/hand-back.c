/* A run's stream handed the work of one of the library's streams back
 * (hand-back.h): by an event, or, for the per-thread, legacy and blocking
 * streams, by a value in a word of device memory of the library's. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "driver.h"
#include "error.h"
#include "hand-back.h"
#include "params.h"
#include "stream-cache.h"

/* Each hand-back waits for a value no word held before. */
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

/* Words for the value hand-backs, kept until cucap_release_cached.  A word is
 * written by a library stream and waited for by the run's; it is free
 * again once the event recorded behind that wait is reached.  Nothing
 * waits for that event: the run's stream is ordered after no allocation
 * by an event, which hangs its thread's exit in the driver when it is, or
 * later waits for, that thread's per-thread stream (doc/driver-facts.md). */
#define SLAB_WORDS 64

struct word_slab {
    struct word_slab *next;
    CUcontext ctx;
    CUdevice dev;
    CUdeviceptr base;
    unsigned int cursor;
    CUevent passed[SLAB_WORDS];    /* behind each word's last wait; NULL: never waited for */
    unsigned char taken[SLAB_WORDS];
};

static pthread_mutex_t slabs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct word_slab *slabs;

static int word_free(struct word_slab *sl, unsigned int i)
{
    return !sl->taken[i] && (!sl->passed[i] || cucap_i_drv.cuEventQuery(sl->passed[i]) == CUDA_SUCCESS);
}

static int take_in(struct word_slab *sl, unsigned int *out)
{
    unsigned int k, i;

    for (k = 0; k < SLAB_WORDS; k++) {
        i = (sl->cursor + k) % SLAB_WORDS;
        if (word_free(sl, i)) {
            sl->taken[i] = 1;
            sl->cursor = (i + 1) % SLAB_WORDS;
            *out = i;
            return 1;
        }
    }
    return 0;
}

/* The slab's memory by cuMemAlloc: the driver refuses stream memory
 * operations on memory of a stream-ordered pool (doc/driver-facts.md).
 * Called in relaxed thread mode, where cuMemAlloc breaks no other
 * thread's capture. */
static CUresult new_slab(struct ctx_hold *hold, struct word_slab **out)
{
    struct word_slab *sl = calloc(1, sizeof *sl);
    CUresult rc;

    if (!sl)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sl->ctx = hold->ctx;
    sl->dev = hold->dev;
    if ((rc = cucap_i_drv.cuMemAlloc(&sl->base, SLAB_WORDS * sizeof(uint64_t))) != CUDA_SUCCESS) {
        free(sl);
        return rc;
    }
    *out = sl;
    return CUDA_SUCCESS;
}

static CUresult take_word(struct ctx_hold *hold, struct word_slab **slab, unsigned int *i)
{
    struct word_slab *sl;
    CUresult rc;

    pthread_mutex_lock(&slabs_lock);
    for (sl = slabs; sl; sl = sl->next)
        if (sl->ctx == hold->ctx && take_in(sl, i)) {
            pthread_mutex_unlock(&slabs_lock);
            *slab = sl;
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&slabs_lock);
    if ((rc = new_slab(hold, &sl)) != CUDA_SUCCESS)
        return rc;
    sl->taken[0] = 1;
    sl->cursor = 1;
    *i = 0;
    pthread_mutex_lock(&slabs_lock);
    sl->next = slabs;
    slabs = sl;
    pthread_mutex_unlock(&slabs_lock);
    *slab = sl;
    return CUDA_SUCCESS;
}

static void give_word(struct word_slab *sl, unsigned int i)
{
    pthread_mutex_lock(&slabs_lock);
    sl->taken[i] = 0;
    pthread_mutex_unlock(&slabs_lock);
}

/* s waits until from wrote a new token into a word of the library's. */
static CUresult hand_back_by_value(struct ctx_hold *hold, CUstream s, CUstream from)
{
    uint64_t token = new_token();
    struct word_slab *sl;
    CUdeviceptr word;
    unsigned int i;
    CUresult rc;

    if (!cucap_i_drv.cuStreamWriteValue64 || !cucap_i_drv.cuStreamWaitValue64)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((rc = take_word(hold, &sl, &i)) != CUDA_SUCCESS)
        return rc;
    word = sl->base + i * sizeof(uint64_t);
    if (!sl->passed[i] && (rc = cucap_i_create_in(hold->ctx, CUCAP_I_EVENT, (void **)&sl->passed[i])) != CUDA_SUCCESS) {
        give_word(sl, i);
        return rc;
    }
    if ((rc = cucap_i_drv.cuStreamWriteValue64(from, word, token, 0)) != CUDA_SUCCESS) {
        give_word(sl, i);
        return rc;
    }
    /* from here the write may land at any time: the word is not reused
     * unless the wait behind it is seen passed */
    if ((rc = cucap_i_drv.cuStreamWaitValue64(s, word, token, CU_STREAM_WAIT_VALUE_EQ)) == CUDA_SUCCESS &&
        (rc = cucap_i_drv.cuEventRecord(sl->passed[i], s)) == CUDA_SUCCESS)
        give_word(sl, i);
    return rc;   /* a failure keeps the word taken for good, and s then waits by an event */
}

/* The per-thread stream, and the streams whose work it may wait for
 * without saying so: the legacy stream, and every blocking stream
 * through it. */
static int waits_by_value(CUstream s)
{
    unsigned int flags;

    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return 1;
    return cucap_i_drv.cuStreamGetFlags(s, &flags) != CUDA_SUCCESS || !(flags & CU_STREAM_NON_BLOCKING);
}

static atomic_int warned;

CUresult cucap_i_hand_back(struct ctx_hold *hold, CUstream s, CUstream from, CUevent ev, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    if (!waits_by_value(s))
        return cucap_i_stream_after(hold->ctx, s, from, ev);
    cucap_i_work_enter_quietly(&w, hold->ctx, caller);
    if (ev && (rc = cucap_i_drv.cuEventRecord(ev, from)) != CUDA_SUCCESS) {
        cucap_i_work_leave_quietly(&w, caller);
        return rc;
    }
    if ((rc = hand_back_by_value(hold, s, from)) != CUDA_SUCCESS) {
        if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
            cucap_i_warn(rc, "%s: the run's work could not be handed back to its stream by a value "
                         "(cuMemAlloc, cuStreamWriteValue64, cuStreamWaitValue64): " CUCAP_I_RESULT_FMT
                         "; it is handed back by an event instead, and a thread whose per-thread stream then "
                         "follows allocations still in flight hangs in the driver when it returns (said once)",
                         caller, CUCAP_I_RESULT_ARGS(rc));
        rc = cucap_i_stream_after(hold->ctx, s, from, NULL);   /* ordered all the same */
    }
    cucap_i_work_leave_quietly(&w, caller);
    return rc;
}

/* Whether no wait on sl's words is still to pass (an event the driver
 * no longer knows, its context gone, has none to pass). */
static int slab_idle(struct word_slab *sl)
{
    unsigned int i;

    for (i = 0; i < SLAB_WORDS; i++)
        if (sl->taken[i] || (sl->passed[i] && cucap_i_drv.cuEventQuery(sl->passed[i]) == CUDA_ERROR_NOT_READY))
            return 0;
    return 1;
}

static void free_slab(struct word_slab *sl)
{
    struct cucap_work_scope w;
    unsigned int i;
    CUresult rc;

    cucap_i_work_enter_quietly(&w, sl->ctx, "cucap_release_cached");
    if ((rc = cucap_i_drv.cuMemFree(sl->base)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_release_cached: cuMemFree failed on the words the per-thread streams wait on, of "
                     "device %d: " CUCAP_I_RESULT_FMT, (int)sl->dev, CUCAP_I_RESULT_ARGS(rc));
    for (i = 0; i < SLAB_WORDS; i++)
        if (sl->passed[i])
            (void)cucap_i_drv.cuEventDestroy(sl->passed[i]);
    cucap_i_work_leave_quietly(&w, "cucap_release_cached");
    free(sl);
}

/* Slabs a wait still reads when cucap_release_cached ran: out of use, and
 * freed by a later call once idle.  (cuMemFree waits for all the device's
 * work in flight: cucap_release_cached says so.) */
static struct word_slab *retired;

void cucap_i_hand_back_drain(void)
{
    struct word_slab *sl, *next, *busy = NULL;

    pthread_mutex_lock(&slabs_lock);
    sl = slabs;
    slabs = NULL;
    pthread_mutex_unlock(&slabs_lock);
    while (sl || retired) {
        if (!sl) {
            sl = retired;
            retired = NULL;
        }
        next = sl->next;
        if (slab_idle(sl))
            free_slab(sl);
        else {
            sl->next = busy;
            busy = sl;
        }
        sl = next;
    }
    retired = busy;
}
