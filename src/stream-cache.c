/* Streams and events reused by split, join and the conditional calls, per
 * context, instead of being created and destroyed for every call. */
#include "config.h"

#include <pthread.h>

#include "driver.h"
#include "internal.h"

#define CACHED_CONTEXTS 8
#define CACHED_PER_KIND 256

enum { STREAMS, EVENTS, KINDS };

static struct cache {
    CUcontext ctx;                   /* a device's primary context, retained by the cache */
    CUdevice dev;
    void *items[KINDS][CACHED_PER_KIND];   /* CUstream or CUevent */
    int count[KINDS];
} caches[CACHED_CONTEXTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cache of dev's primary context ctx, made on first use: it retains the
 * context, so cached streams never outlive it.  NULL when every slot is
 * taken or the retain failed. */
static struct cache *cache_of(CUcontext ctx, CUdevice dev)
{
    struct cucap_relaxed_scope scope;
    CUcontext retained = NULL;
    cucap_error *err = NULL;
    CUresult rc, left;
    int i, free_slot = -1;

    for (i = 0; i < CACHED_CONTEXTS; i++) {
        if (caches[i].ctx == ctx)
            return &caches[i];
        if (!caches[i].ctx && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0 || cucap_i_relaxed_enter(&scope, "cucap_builder_split", NULL) != CUDA_SUCCESS)
        return NULL;   /* nothing changed: no cache, fresh streams */
    rc = cucap_i_drv.cuDevicePrimaryCtxRetain(&retained, dev);
    if ((left = cucap_i_relaxed_leave(&scope, rc, "cucap_builder_split", &err)) != CUDA_SUCCESS)
        cucap_i_warn_error(err);   /* no caller to return it to: a failed restore must still be heard */
    if (left != CUDA_SUCCESS || retained != ctx) {
        if (rc == CUDA_SUCCESS)
            cucap_i_drv.cuDevicePrimaryCtxRelease(dev);
        return NULL;
    }
    caches[free_slot].ctx = ctx;
    caches[free_slot].dev = dev;
    return &caches[free_slot];
}

/* Create a stream or event with ctx current, giving the thread its own
 * context back. */
static CUresult create_in(CUcontext ctx, int kind, void **out)
{
    CUcontext saved = NULL;
    CUresult rc = cucap_i_ctx_enter(ctx, &saved), left;

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = kind == STREAMS ? cucap_i_drv.cuStreamCreate((CUstream *)out, CU_STREAM_NON_BLOCKING)
                         : cucap_i_drv.cuEventCreate((CUevent *)out, CU_EVENT_DISABLE_TIMING);
    left = cucap_i_ctx_leave(ctx, saved);
    if (rc == CUDA_SUCCESS && left != CUDA_SUCCESS) {
        if (kind == STREAMS)
            cucap_i_drv.cuStreamDestroy((CUstream)*out);
        else
            cucap_i_drv.cuEventDestroy((CUevent)*out);
        rc = left;
    }
    return rc;
}

static CUresult take(CUcontext ctx, CUdevice dev, int kind, void **out)
{
    struct cache *c;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->count[kind] > 0) {
        *out = c->items[kind][--c->count[kind]];
        pthread_mutex_unlock(&cache_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cache_lock);
    return create_in(ctx, kind, out);
}

static void give(CUcontext ctx, CUdevice dev, int kind, void *item)
{
    struct cache *c;
    CUresult rc;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->count[kind] < CACHED_PER_KIND) {
        c->items[kind][c->count[kind]++] = item;
        item = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!item)
        return;
    rc = kind == STREAMS ? cucap_i_drv.cuStreamDestroy((CUstream)item) : cucap_i_drv.cuEventDestroy((CUevent)item);
    if (rc != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_builder_destroy: %s failed while releasing a cached %s: %s: %s",
                     kind == STREAMS ? "cuStreamDestroy" : "cuEventDestroy", kind == STREAMS ? "stream" : "event",
                     cucap_i_result_label(rc), cucap_i_result_description(rc));
}

CUresult cucap_i_cache_take_stream(CUcontext ctx, CUdevice dev, CUstream *out)
{
    return take(ctx, dev, STREAMS, (void **)out);
}

void cucap_i_cache_give_stream(CUcontext ctx, CUdevice dev, CUstream s)
{
    give(ctx, dev, STREAMS, s);
}

CUresult cucap_i_cache_take_event(CUcontext ctx, CUdevice dev, CUevent *out)
{
    return take(ctx, dev, EVENTS, (void **)out);
}

void cucap_i_cache_give_event(CUcontext ctx, CUdevice dev, CUevent e)
{
    give(ctx, dev, EVENTS, e);
}

void cucap_i_cache_drain(void)
{
    int i;

    pthread_mutex_lock(&cache_lock);
    for (i = 0; i < CACHED_CONTEXTS; i++) {
        while (caches[i].count[STREAMS] > 0)
            cucap_i_drv.cuStreamDestroy((CUstream)caches[i].items[STREAMS][--caches[i].count[STREAMS]]);
        while (caches[i].count[EVENTS] > 0)
            cucap_i_drv.cuEventDestroy((CUevent)caches[i].items[EVENTS][--caches[i].count[EVENTS]]);
        if (caches[i].ctx)
            cucap_i_drv.cuDevicePrimaryCtxRelease(caches[i].dev);
        caches[i].ctx = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
}
