/* Memory pools: the device's current pool, the process-wide device pools,
 * created pools, and stream-ordered allocation through them. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "context-hold.h"
#include "driver.h"
#include "capture.h"
#include "error.h"
#include "live-pointers.h"
#include "device-table.h"
#include "free-list.h"
#include "pool-internal.h"

enum pool_kind { POOL_DEFAULT, POOL_DEVICE, POOL_OWNED };

struct cucap_pool {
    CUmemoryPool handle;
    CUdevice device;
    enum pool_kind kind;
    struct ctx_hold *hold;           /* on the device's primary context, shared with the library's other holders */
    CUcontext ctx;                   /* that context, current for the calls that need one */
    atomic_size_t recorded;          /* live pointers recorded for it, or more (none: nothing to forget) */
};

/* cucap_device_pool()'s pools, one a device in the device table, made
 * under this lock. */
static pthread_mutex_t device_pools_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device must exist and have memory pools. */
static CUresult check_device(CUdevice dev, const char *caller, cucap_error **err)
{
    struct cucap_device_entry *entry;
    int supported = 0;
    CUresult rc;

    /* a device found to exist with memory pools: neither changes while the
     * driver is loaded, so the driver is asked once per device */
    if ((entry = cucap_i_device_entry(dev)) && atomic_load_explicit(&entry->checked, memory_order_acquire))
        return CUDA_SUCCESS;
    if ((rc = cucap_i_check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)");
    if (!supported)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: device %d does not support memory pools",
                            caller, (int)dev);
    if (entry)
        atomic_store_explicit(&entry->checked, 1, memory_order_release);
    return CUDA_SUCCESS;
}

/* Pool objects closed, kept for the next opens. */
static struct cucap_free_list free_pools = CUCAP_FREE_LIST_INIT;

void cucap_i_pool_free_list_drain(void)
{
    cucap_i_free_list_drain(&free_pools);
}

static cucap_pool *pool_new(CUmemoryPool handle, CUdevice dev, enum pool_kind kind)
{
    cucap_pool *p = cucap_i_free_list_take(&free_pools);

    if (p)
        memset(p, 0, sizeof *p);
    else if (!(p = calloc(1, sizeof *p)))
        return NULL;
    p->handle = handle;
    p->device = dev;
    p->kind = kind;
    return p;
}

static void pool_free_object(cucap_pool *p)
{
    /* none recorded: the live table holds nothing of p, and may see p again */
    if (atomic_load_explicit(&p->recorded, memory_order_acquire))
        cucap_i_live_forget_owner(p);
    if (!cucap_i_free_list_give(&free_pools, p))
        free(p);
}

/* In the relaxed scope: hold the device's primary context (a retain the
 * first time, shared afterwards), read the release threshold and raise it
 * from 0 to UINT64_MAX. */
static CUresult setup_current(cucap_pool *p, const char *caller, cucap_error **err)
{
    struct cucap_relaxed_scope scope;
    cuuint64_t threshold = 0;
    CUresult rc;

    if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_ctx_hold_primary_relaxed(p->device, &p->hold, caller, err)) != CUDA_SUCCESS)
        goto leave;
    p->ctx = p->hold->ctx;
    rc = cucap_i_drv.cuMemPoolGetAttribute(p->handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
    if (rc != CUDA_SUCCESS) {
        cucap_i_fail_driver(err, rc, caller, "cuMemPoolGetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)");
    } else if (threshold == 0) {
        threshold = UINT64_MAX;
        rc = cucap_i_drv.cuMemPoolSetAttribute(p->handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
        if (rc != CUDA_SUCCESS)
            cucap_i_fail_driver(err, rc, caller, "cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)");
    }
leave:
    return cucap_i_relaxed_leave(&scope, rc, caller, err);
}

/* Let go of a current pool's hold; should it be the context's last (the
 * library's table of shared holds was full or drained), the release runs
 * in relaxed mode. */
static void release_hold(struct ctx_hold *hold, const char *caller)
{
    struct cucap_relaxed_scope scope;

    if (!hold)
        return;
    if (atomic_load_explicit(&hold->refs, memory_order_acquire) > 1 ||
        cucap_i_relaxed_enter(&scope, caller, NULL) != CUDA_SUCCESS) {
        cucap_i_ctx_hold_release(hold);
        return;
    }
    cucap_i_ctx_hold_release(hold);
    cucap_i_relaxed_leave(&scope, CUDA_SUCCESS, caller, NULL);
}

/* What a device pool keeps under the release threshold the library
 * raised (memory freed back to it, graph sets' direct runs' included)
 * given back to the device, in relaxed mode. */
static void give_back_kept_memory(cucap_pool *p)
{
    struct cucap_relaxed_scope scope;
    cucap_error *err = NULL;
    CUresult rc;

    if (cucap_i_relaxed_enter(&scope, "cucap_release_cached", &err) != CUDA_SUCCESS) {
        cucap_i_warn_error(err);
        return;
    }
    if ((rc = cucap_i_drv.cuMemPoolTrimTo(p->handle, 0)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_release_cached: cuMemPoolTrimTo failed on device %d's pool: " CUCAP_I_RESULT_FMT,
                     (int)p->device, CUCAP_I_RESULT_ARGS(rc));
    if (cucap_i_relaxed_leave(&scope, CUDA_SUCCESS, "cucap_release_cached", &err) != CUDA_SUCCESS)
        cucap_i_warn_error(err);
    else
        cucap_error_free(err);
}

void cucap_i_pool_device_pools_drain(void)
{
    struct cucap_device_entry *entry;
    cucap_pool *p;
    int dev;

    for (dev = 0; dev < cucap_i_device_entries(); dev++) {
        if (!(entry = cucap_i_device_entry(dev)))
            continue;
        pthread_mutex_lock(&device_pools_lock);
        p = atomic_exchange_explicit(&entry->device_pool, NULL, memory_order_acq_rel);
        atomic_store_explicit(&entry->checked, 0, memory_order_relaxed);
        pthread_mutex_unlock(&device_pools_lock);
        if (p) {
            give_back_kept_memory(p);
            release_hold(p->hold, "cucap_release_cached");
            pool_free_object(p);
        }
    }
}

static CUresult open_current(CUdevice dev, enum pool_kind kind, const char *caller, cucap_pool **out,
                             cucap_error **err)
{
    CUmemoryPool handle = NULL;
    cucap_pool *p;
    CUresult rc;

    if ((rc = check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    /* the lookup is safe under every capture mode; the rest needs the scope */
    if ((rc = cucap_i_drv.cuDeviceGetMemPool(&handle, dev)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuDeviceGetMemPool");
    if (!(p = pool_new(handle, dev, kind)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    if ((rc = setup_current(p, caller, err)) != CUDA_SUCCESS) {
        release_hold(p->hold, caller);
        pool_free_object(p);
        return rc;
    }
    *out = p;
    return CUDA_SUCCESS;
}

CUresult cucap_pool_open_default(CUdevice dev, cucap_pool **out, cucap_error **err)
{
    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "cucap_pool_open_default: out is NULL");
    *out = NULL;
    return open_current(dev, POOL_DEFAULT, "cucap_pool_open_default", out, err);
}

CUresult cucap_device_pool(CUdevice dev, cucap_pool **out, cucap_error **err)
{
    static const char caller[] = "cucap_device_pool";
    struct cucap_device_entry *entry;
    cucap_pool *p;
    CUresult rc = CUDA_SUCCESS;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if ((rc = cucap_i_driver(caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(entry = cucap_i_device_entry(dev))) {
        if ((rc = check_device(dev, caller, err)) != CUDA_SUCCESS)
            return rc;
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    if ((p = atomic_load_explicit(&entry->device_pool, memory_order_acquire))) {
        *out = p;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&device_pools_lock);
    p = atomic_load_explicit(&entry->device_pool, memory_order_relaxed);
    if (!p) {
        rc = open_current(dev, POOL_DEVICE, caller, &p, err);
        if (rc == CUDA_SUCCESS)
            atomic_store_explicit(&entry->device_pool, p, memory_order_release);
    }
    pthread_mutex_unlock(&device_pools_lock);
    if (rc == CUDA_SUCCESS)
        *out = p;
    return rc;
}

CUresult cucap_pool_create(CUdevice dev, const cucap_pool_options *opts, cucap_pool **out, cucap_error **err)
{
    static const char caller[] = "cucap_pool_create";
    struct cucap_relaxed_scope scope;
    CUmemPoolProps props;
    CUmemoryPool handle = NULL;
    cucap_pool *p;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (opts && !cucap_i_reserved_zero(opts->reserved_int, sizeof opts->reserved_int, opts->reserved_ptr,
                                       sizeof opts->reserved_ptr / sizeof opts->reserved_ptr[0]))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the options' reserved members must be zero", caller);
    if (opts && opts->ipc_enabled != 0 && opts->ipc_enabled != 1)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: ipc_enabled is %d; it must be 0 or 1", caller,
                            opts->ipc_enabled);
    if ((rc = check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(p = pool_new(NULL, dev, POOL_OWNED)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    props.handleTypes = opts && opts->ipc_enabled ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    props.maxSize = opts ? opts->max_size : 0;

    if ((rc = cucap_i_relaxed_enter(&scope, caller, err)) != CUDA_SUCCESS) {
        pool_free_object(p);
        return rc;
    }
    if ((rc = cucap_i_ctx_hold_primary_relaxed(dev, &p->hold, caller, err)) == CUDA_SUCCESS) {
        p->ctx = p->hold->ctx;
        rc = cucap_i_drv.cuMemPoolCreate(&handle, &props);
        if (rc != CUDA_SUCCESS)
            cucap_i_fail_driver(err, rc, caller, "cuMemPoolCreate");
    }
    rc = cucap_i_relaxed_leave(&scope, rc, caller, err);
    if (rc != CUDA_SUCCESS) {
        /* what was made before the failure must not leak (the thread may
         * be left in relaxed mode by a failed restore: these are then legal) */
        CUresult undo = handle ? cucap_i_drv.cuMemPoolDestroy(handle) : CUDA_SUCCESS;
        if (undo != CUDA_SUCCESS)
            cucap_i_note_failure(err, "cuMemPoolDestroy", "destroying the pool just created", undo);
        cucap_i_ctx_hold_release(p->hold);
        pool_free_object(p);
        return rc;
    }
    p->handle = handle;
    *out = p;
    return CUDA_SUCCESS;
}

/* cuMemAllocFromPoolAsync (ptr receives) or cuMemFreeAsync (ptr given) in
 * the pool's context and in relaxed thread mode: an allocation or a free
 * outside a capture, made in global mode, invalidates every other thread's
 * global capture (measured), and on the NULL stream both need a current
 * context.  On a stream of a library capture, under that capture's graph
 * lock, like every other call that adds to it. */
static CUresult stream_ordered(cucap_pool *p, int allocate, size_t size, CUstream s, CUdeviceptr *ptr,
                               int *captured, const char *caller, cucap_error **err)
{
    const char *call = allocate ? "cuMemAllocFromPoolAsync" : "cuMemFreeAsync";
    struct cucap_work_scope w;
    struct cucap_capture *capture = cucap_i_capture_lock_stream(s);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc;

    if ((rc = cucap_i_work_enter(&w, p->ctx, caller, err)) == CUDA_SUCCESS) {
        rc = allocate ? cucap_i_drv.cuMemAllocFromPoolAsync(ptr, size, p->handle, s)
                      : cucap_i_drv.cuMemFreeAsync(*ptr, s);
        /* a capture the library did not begin is asked for */
        if (rc == CUDA_SUCCESS && captured && !capture &&
            cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS)
            *captured = status != CU_STREAM_CAPTURE_STATUS_NONE;
        else if (captured)
            *captured = capture && !cucap_i_capture_direct(capture);
        if (rc != CUDA_SUCCESS) {
            cucap_i_capture_failed(capture, allocate ? "cucap_pool_alloc (cuMemAllocFromPoolAsync)"
                                                     : "cucap_pool_free (cuMemFreeAsync)", rc);
            cucap_i_fail_driver(err, rc, caller, call);
        }
        rc = cucap_i_work_leave(&w, rc, caller, err);
    }
    cucap_i_capture_unlock_stream(capture, caller);
    return rc;
}

CUresult cucap_pool_alloc(cucap_pool *p, size_t size, CUstream s, CUdeviceptr *out, cucap_error **err)
{
    static const char caller[] = "cucap_pool_alloc";
    CUdeviceptr ptr = 0;
    CUresult rc;
    int added, captured = 0;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = 0;
    if (!p)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the pool is NULL", caller);
    if (size == 0)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a size of 0 bytes was requested", caller);
    if ((rc = stream_ordered(p, 1, size, s, &ptr, &captured, caller, err)) != CUDA_SUCCESS)
        return rc;
    added = cucap_i_live_add(ptr, p, captured);
    if (added == 0)
        atomic_fetch_add_explicit(&p->recorded, 1, memory_order_release);
    if (added != 0) {
        rc = stream_ordered(p, 0, 0, s, &ptr, NULL, caller, NULL);
        cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory while recording the allocation", caller);
        if (rc != CUDA_SUCCESS)
            cucap_i_note_failure(err, "cuMemFreeAsync", "giving the allocation back", rc);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = ptr;
    return CUDA_SUCCESS;
}

CUresult cucap_pool_free(cucap_pool *p, CUdeviceptr ptr, CUstream s, cucap_error **err)
{
    static const char caller[] = "cucap_pool_free";
    int known;

    if (!p)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the pool is NULL", caller);
    known = cucap_i_live_remove(ptr, p);
    if (known == 1)
        atomic_fetch_sub_explicit(&p->recorded, 1, memory_order_relaxed);
    if (known < 0)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: %#llx belongs to another pool now (the driver handed the address to it after "
                            "this pool's allocation there was released)", caller, (unsigned long long)ptr);
    if (!known)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: %#llx was not allocated by this pool, or was already freed", caller,
                            (unsigned long long)ptr);
    /* When the driver refuses, the pool forgets the pointer all the same,
     * so that it can never free an address the driver hands out again.
     * A capture's allocation stays known (known 2): each launch of its
     * graph makes it again at the same address, and the driver refuses
     * a free of one that does not exist now. */
    return stream_ordered(p, 0, 0, s, &ptr, NULL, caller, err);
}

CUmemoryPool cucap_pool_handle(const cucap_pool *p)
{
    return p ? p->handle : NULL;
}

CUresult cucap_pool_close(cucap_pool *p, cucap_error **err)
{
    static const char caller[] = "cucap_pool_close";
    struct cucap_relaxed_scope scope;
    CUresult rc, entered;

    if (!p || p->kind == POOL_DEVICE)
        return CUDA_SUCCESS;
    if (p->kind == POOL_DEFAULT) {   /* nothing to destroy; the hold is shared */
        release_hold(p->hold, caller);
        pool_free_object(p);
        return CUDA_SUCCESS;
    }
    /* the object goes whatever happens: when the thread cannot be switched
     * to relaxed mode, the pool is destroyed in the thread's own mode,
     * which a running capture may refuse */
    entered = rc = cucap_i_relaxed_enter(&scope, caller, err);
    if (p->kind == POOL_OWNED) {
        CUresult destroyed = cucap_i_drv.cuMemPoolDestroy(p->handle);
        if (destroyed != CUDA_SUCCESS && rc == CUDA_SUCCESS)
            rc = cucap_i_fail_driver(err, destroyed, caller, "cuMemPoolDestroy");
        else if (destroyed != CUDA_SUCCESS)
            cucap_i_note_failure(err, "cuMemPoolDestroy", "destroying the pool in the thread's own capture mode; "
                                 "the pool is lost", destroyed);
    }
    cucap_i_ctx_hold_release(p->hold);   /* the library's one retain of the context, shared */
    if (entered == CUDA_SUCCESS)
        rc = cucap_i_relaxed_leave(&scope, rc, caller, err);
    pool_free_object(p);
    return rc;
}

void cucap_pool_destroy(cucap_pool *p)
{
    cucap_error *err = NULL;

    if (cucap_pool_close(p, &err) != CUDA_SUCCESS)
        cucap_i_warn_error(err);
    else
        cucap_error_free(err);
}
