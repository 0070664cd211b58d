/* Streams and events reused by split, join and the conditional calls, per
 * context, instead of being created and destroyed for every call. */
#include "config.h"

#include <pthread.h>

#include "driver.h"
#include "internal.h"

#define CACHED_CONTEXTS 8
#define CACHED_PER_KIND 256

static struct cache {
    CUcontext ctx;                   /* a device's primary context, retained by the cache */
    CUdevice dev;
    CUstream streams[CACHED_PER_KIND];
    int stream_count;
    CUevent events[CACHED_PER_KIND];
    int event_count;
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
static CUresult create_in(CUcontext ctx, CUstream *s, CUevent *e)
{
    CUcontext saved = NULL;
    CUresult rc = cucap_i_ctx_enter(ctx, &saved), left;

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = s ? cucap_i_drv.cuStreamCreate(s, CU_STREAM_NON_BLOCKING) : cucap_i_drv.cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
    left = cucap_i_ctx_leave(ctx, saved);
    if (rc == CUDA_SUCCESS && left != CUDA_SUCCESS) {
        if (s)
            cucap_i_drv.cuStreamDestroy(*s);
        else
            cucap_i_drv.cuEventDestroy(*e);
        rc = left;
    }
    return rc;
}

CUresult cucap_i_cache_take_stream(CUcontext ctx, CUdevice dev, CUstream *out)
{
    struct cache *c;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->stream_count > 0) {
        *out = c->streams[--c->stream_count];
        pthread_mutex_unlock(&cache_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cache_lock);
    return create_in(ctx, out, NULL);
}

void cucap_i_cache_give_stream(CUcontext ctx, CUdevice dev, CUstream s)
{
    struct cache *c;
    CUresult rc;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->stream_count < CACHED_PER_KIND) {
        c->streams[c->stream_count++] = s;
        s = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (s && (rc = cucap_i_drv.cuStreamDestroy(s)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_builder_destroy: cuStreamDestroy failed while releasing a stream: %s: %s",
                     cucap_i_result_label(rc), cucap_i_result_description(rc));
}

CUresult cucap_i_cache_take_event(CUcontext ctx, CUdevice dev, CUevent *out)
{
    struct cache *c;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->event_count > 0) {
        *out = c->events[--c->event_count];
        pthread_mutex_unlock(&cache_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cache_lock);
    return create_in(ctx, NULL, out);
}

void cucap_i_cache_give_event(CUcontext ctx, CUdevice dev, CUevent e)
{
    struct cache *c;
    CUresult rc;

    pthread_mutex_lock(&cache_lock);
    c = cache_of(ctx, dev);
    if (c && c->event_count < CACHED_PER_KIND) {
        c->events[c->event_count++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (e && (rc = cucap_i_drv.cuEventDestroy(e)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "cucap_builder_join: cuEventDestroy failed while releasing an event: %s: %s",
                     cucap_i_result_label(rc), cucap_i_result_description(rc));
}

void cucap_i_cache_drain(void)
{
    int i;

    pthread_mutex_lock(&cache_lock);
    for (i = 0; i < CACHED_CONTEXTS; i++) {
        while (caches[i].stream_count > 0)
            cucap_i_drv.cuStreamDestroy(caches[i].streams[--caches[i].stream_count]);
        while (caches[i].event_count > 0)
            cucap_i_drv.cuEventDestroy(caches[i].events[--caches[i].event_count]);
        if (caches[i].ctx)
            cucap_i_drv.cuDevicePrimaryCtxRelease(caches[i].dev);
        caches[i].ctx = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
}
