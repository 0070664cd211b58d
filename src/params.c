/* The parameter block of a capture: one allocation of device memory whose
 * address the captured kernels take, and the host-to-device copy of each
 * launch's values into it.  A copy goes on the launch's stream just before
 * the launch, from the caller's pageable memory up to 64 KiB (which the
 * driver stages at the call, so the caller's values may change at once),
 * through pinned memory of the library's above (staging.c), and after an event recorded
 * behind the block's last launch when that launch was on another stream:
 * so the values of a launch never change what an earlier one reads, with
 * any number of launches queued on any streams.  "Another stream" is told
 * by the driver's stream id, not by the handle: a handle names another
 * stream once its stream is destroyed and the handle given to a new one,
 * and CU_STREAM_PER_THREAD (NULL under per-thread default streams) is a
 * different stream in each thread.  Launches of graphs that read one
 * block take its lock, one at a time.
 *
 * The block comes from a memory pool of the library's and goes back to it
 * stream-ordered, behind the last launch that reads it: cuMemFree would
 * wait for all work on the device, other streams' too.  The pool lets the
 * driver add no dependency to reuse memory: a block still queued to go
 * back behind one stream's launches would make the next block's first
 * launch, on any stream, wait for them. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "context-hold.h"
#include "device-table.h"
#include "driver.h"
#include "error.h"
#include "params.h"
#include "staging.h"
#include "stream-cache.h"

struct cucap_params {
    atomic_int refs;
    struct ctx_hold *hold;
    CUdeviceptr block;
    size_t size;
    pthread_mutex_t lock;            /* one launch at a time; guards the fields below */
    CUevent last_launch;             /* recorded behind the last launch */
    unsigned long long last_stream;  /* the id of the last launch's stream, 0 before the first */
    struct cucap_staging_ring staged;   /* the pinned buffers of values above 64 KiB */
};

#define BLOCK_POOL_KEEP ((cuuint64_t)2 << 20)   /* kept between blocks: one granule of the driver's */

/* dev's pool of blocks, made on first use (two threads may both make one:
 * the first kept, the other destroyed) */
CUresult cucap_i_params_pool(CUdevice dev, CUmemoryPool *out, const char *caller, cucap_error **err)
{
    struct cucap_device_entry *entry;
    CUmemoryPool pool = NULL, none = NULL;
    CUmemPoolProps props;
    cuuint64_t keep = BLOCK_POOL_KEEP;
    int no = 0;
    CUresult rc;

    if (!(entry = cucap_i_device_entry(dev)))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: parameter blocks on device %d: the driver has no "
                            "such device", caller, (int)dev);
    if ((*out = atomic_load_explicit(&entry->block_pool, memory_order_acquire)))
        return CUDA_SUCCESS;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    if ((rc = cucap_i_drv.cuMemPoolCreate(&pool, &props)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuMemPoolCreate");
    if ((rc = cucap_i_drv.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &no)) !=
            CUDA_SUCCESS ||
        (rc = cucap_i_drv.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) != CUDA_SUCCESS) {
        (void)cucap_i_drv.cuMemPoolDestroy(pool);
        return cucap_i_fail_driver(err, rc, caller, "cuMemPoolSetAttribute");
    }
    if (!atomic_compare_exchange_strong_explicit(&entry->block_pool, &none, pool, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        (void)cucap_i_drv.cuMemPoolDestroy(pool);
        pool = none;
    }
    *out = pool;
    return CUDA_SUCCESS;
}

void cucap_i_params_pools_drain(void)
{
    struct cucap_device_entry *entry;
    CUmemoryPool pool;
    CUresult rc;
    int dev;

    for (dev = 0; dev < cucap_i_device_entries(); dev++)
        if ((entry = cucap_i_device_entry(dev)) &&
            (pool = atomic_exchange_explicit(&entry->block_pool, NULL, memory_order_acq_rel)) &&
            (rc = cucap_i_drv.cuMemPoolDestroy(pool)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "cucap_release_cached: cuMemPoolDestroy failed on the parameter blocks' pool of "
                         "device %d: " CUCAP_I_RESULT_FMT, dev, CUCAP_I_RESULT_ARGS(rc));
}

/* The block from dev's pool of blocks on a stream of the cache; the first
 * launch waits for the allocation as for a launch on another stream. */
static CUresult allocate(struct cucap_params *p, const char *caller, cucap_error **err)
{
    CUmemoryPool pool;
    CUstream s;
    CUresult rc;

    if ((rc = cucap_i_params_pool(p->hold->dev, &pool, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_take_stream(p->hold, &s, caller)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamCreate");
    if ((rc = cucap_i_drv.cuMemAllocFromPoolAsync(&p->block, p->size, pool, s)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuMemAllocFromPoolAsync");
    else if ((rc = cucap_i_drv.cuEventRecord(p->last_launch, s)) != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuEventRecord");
        (void)cucap_i_drv.cuMemFreeAsync(p->block, s);
    } else
        p->last_stream = ~0ull;
    cucap_i_give_stream(p->hold, s, caller);
    return rc;
}

CUresult cucap_i_params_new(struct ctx_hold *hold, size_t size, struct cucap_params **out, const char *caller,
                            cucap_error **err)
{
    struct cucap_work_scope w;
    struct cucap_params *p;
    CUresult rc;

    *out = NULL;
    if (!(p = calloc(1, sizeof *p)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    p->hold = hold;
    p->size = size;
    if ((rc = cucap_i_work_enter(&w, hold->ctx, caller, err)) == CUDA_SUCCESS) {
        if ((rc = cucap_i_drv.cuEventCreate(&p->last_launch, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            cucap_i_fail_driver(err, rc, caller, "cuEventCreate");
        else if ((rc = allocate(p, caller, err)) != CUDA_SUCCESS)
            (void)cucap_i_drv.cuEventDestroy(p->last_launch);
        rc = cucap_i_work_leave(&w, rc, caller, err);
    }
    if (rc != CUDA_SUCCESS) {
        free(p);
        return rc;
    }
    cucap_i_ctx_hold_ref_by(hold, 1);
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return CUDA_SUCCESS;
}

void cucap_i_params_ref(struct cucap_params *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

/* The block back to its pool behind the last launch that reads it.  Once
 * that launch is done, on a stream of the cache; before, on a stream of
 * its own, destroyed at once (the driver lets its work finish first): a
 * stream of the cache would be left behind that launch, and hand the wait
 * on to the next fork that takes it. */
static CUresult free_block(struct cucap_params *p, const char *caller)
{
    CUstream s;
    CUresult rc;

    if (cucap_i_drv.cuEventQuery(p->last_launch) == CUDA_SUCCESS) {
        if ((rc = cucap_i_take_stream(p->hold, &s, caller)) != CUDA_SUCCESS)
            return rc;
        rc = cucap_i_drv.cuMemFreeAsync(p->block, s);
        cucap_i_give_stream(p->hold, s, caller);
        return rc;
    }
    if ((rc = cucap_i_stream_in(p->hold->ctx, &s, caller, NULL)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuStreamWaitEvent(s, p->last_launch, 0)) == CUDA_SUCCESS)
        rc = cucap_i_drv.cuMemFreeAsync(p->block, s);
    (void)cucap_i_drv.cuStreamDestroy(s);
    return rc;
}

void cucap_i_params_unref(struct cucap_params *p, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    cucap_i_work_enter_quietly(&w, p->hold->ctx, caller);
    if ((rc = free_block(p, caller)) != CUDA_SUCCESS) {
        /* then on the host: the block stays until the last launch that reads it is done */
        cucap_i_warn(rc, "%s: a parameter block could not be given back behind its last launch: "
                     CUCAP_I_RESULT_FMT "; waiting on the host for that launch, then freeing it", caller,
                     CUCAP_I_RESULT_ARGS(rc));
        if ((rc = cucap_i_drv.cuEventSynchronize(p->last_launch)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "%s: cuEventSynchronize failed while waiting for the last launch that reads a "
                         "parameter block; the block is not freed: " CUCAP_I_RESULT_FMT, caller,
                         CUCAP_I_RESULT_ARGS(rc));
        else if ((rc = cucap_i_drv.cuMemFree(p->block)) != CUDA_SUCCESS)
            cucap_i_warn(rc, "%s: cuMemFree failed while freeing a parameter block: " CUCAP_I_RESULT_FMT, caller,
                         CUCAP_I_RESULT_ARGS(rc));
    }
    if ((rc = cucap_i_drv.cuEventDestroy(p->last_launch)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuEventDestroy failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    cucap_i_staging_ring_give_back(&p->staged);
    cucap_i_work_leave_quietly(&w, caller);
    cucap_i_ctx_hold_release(p->hold);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

CUdeviceptr cucap_i_params_block(const struct cucap_params *p)
{
    return p->block;
}

int cucap_i_params_idle(const struct cucap_params *p)
{
    return cucap_i_drv.cuEventQuery(p->last_launch) == CUDA_SUCCESS;
}

int cucap_i_params_free_for(struct cucap_params *p, CUstream s)
{
    unsigned long long id = 0;
    int same;

    if (cucap_i_drv.cuStreamGetId(s, &id) != CUDA_SUCCESS)
        id = 0;
    pthread_mutex_lock(&p->lock);
    same = id && p->last_stream == id;
    pthread_mutex_unlock(&p->lock);
    return same || cucap_i_params_idle(p);
}

size_t cucap_i_params_size(const struct cucap_params *p)
{
    return p->size;
}

CUresult cucap_i_params_launch(struct cucap_params *p, CUgraphExec exec, const void *values, CUstream s,
                               const char *caller, cucap_error **err)
{
    unsigned long long id = 0;
    CUresult rc = CUDA_SUCCESS;

    /* a stream whose id cannot be read waits as any other stream would */
    if (cucap_i_drv.cuStreamGetId(s, &id) != CUDA_SUCCESS)
        id = 0;
    pthread_mutex_lock(&p->lock);
    if (p->last_stream && (!id || p->last_stream != id) &&
        (rc = cucap_i_drv.cuStreamWaitEvent(s, p->last_launch, 0)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuStreamWaitEvent");
    else if (values && (rc = cucap_i_staging_copy(&p->staged, p->hold, p->block, values, p->size, s, caller, err)) !=
                           CUDA_SUCCESS)
        ;
    else if ((rc = cucap_i_drv.cuGraphLaunch(exec, s)) != CUDA_SUCCESS)
        cucap_i_fail_driver(err, rc, caller, "cuGraphLaunch");
    else if ((rc = cucap_i_drv.cuEventRecord(p->last_launch, s)) != CUDA_SUCCESS)
        cucap_i_fail(err, rc, "%s: cuEventRecord failed behind the launch, which was queued: " CUCAP_I_RESULT_FMT
                     "; the next launch on another stream may overwrite the values it reads, and the block is "
                     "freed without waiting for it", caller, CUCAP_I_RESULT_ARGS(rc));
    else
        p->last_stream = id ? id : ~0ull;   /* unknown: the next launch waits, wherever it is */
    pthread_mutex_unlock(&p->lock);
    return rc;
}
