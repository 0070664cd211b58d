/* Streams and events of builders, forks, bodies and joins: reused per
 * primary context through a cache instead of being created and destroyed
 * for every call (a stream creation is a driver round trip), and held
 * back, while a capture they took part in runs, in that capture's
 * deferral. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "context-hold.h"
#include "device-table.h"
#include "free-list.h"
#include "stream-cache.h"

#define CACHED_PER_KIND 256

enum { STREAMS = CUCAP_I_STREAM, EVENTS = CUCAP_I_EVENT, KINDS };

/* The cache of a device's primary context, in the device's entry of the
 * device table.  A stream or event taken and given back one at a time (a
 * fork's, in a loop of captures) goes through a few slots taken and
 * filled without the lock first; the rest through the locked arrays. */
struct cache {
    struct ctx_hold *hold;           /* a reference on the shared hold of ctx */
    CUcontext ctx;                   /* the device's primary context */
    CUdevice dev;
    struct cucap_free_list quick[KINDS];
    void *items[KINDS][CACHED_PER_KIND];   /* CUstream or CUevent; under cache_lock */
    int count[KINDS];
};
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void give(CUcontext ctx, CUdevice dev, int kind, void *item, const char *caller);

/* The cache of dev's primary context ctx, or NULL; with or without
 * cache_lock (a cache goes only in cucap_release_cached, while no other
 * thread is inside the library). */
static struct cache *find_cache(CUcontext ctx, CUdevice dev)
{
    struct cucap_device_entry *entry = cucap_i_device_entry(dev);
    struct cache *c = entry ? atomic_load_explicit(&entry->stream_cache, memory_order_acquire) : NULL;

    return c && c->ctx == ctx ? c : NULL;
}

/* Make the cache of dev's primary context ctx: it holds a reference on
 * the library's shared hold of that context (context-hold.h), so cached
 * streams never outlive it.  NULL when ctx is not dev's primary context,
 * or the hold failed (its failure is heard): the caller then makes fresh
 * streams. */
static struct cache *install_cache(CUcontext ctx, CUdevice dev, const char *caller)
{
    struct cucap_device_entry *entry = cucap_i_device_entry(dev);
    struct cache *c;
    void *none = NULL;
    cucap_error *err = NULL;
    struct ctx_hold *hold;

    if (!entry || !(c = calloc(1, sizeof *c)))
        return NULL;
    if (cucap_i_ctx_hold_primary(dev, &hold, caller, &err) != CUDA_SUCCESS) {
        cucap_i_warn_error(err);
        free(c);
        return NULL;
    }
    if (hold->ctx != ctx) {
        cucap_i_ctx_hold_release(hold);
        free(c);
        return NULL;
    }
    c->hold = hold;
    c->ctx = ctx;
    c->dev = dev;
    if (!atomic_compare_exchange_strong_explicit(&entry->stream_cache, &none, c, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        cucap_i_ctx_hold_release(hold);   /* another thread made it first */
        free(c);
        c = ((struct cache *)none)->ctx == ctx ? none : NULL;
    }
    return c;
}

/* Create a stream or event with ctx current, giving the thread its own
 * context back.  On failure *out is NULL: a handle destroyed on the way
 * out must never reach a cache or a capture. */
CUresult cucap_i_create_in(CUcontext ctx, int kind, void **out)
{
    CUcontext saved = NULL;
    void *made = NULL;
    CUresult rc = cucap_i_ctx_enter(ctx, &saved), left;

    *out = NULL;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = kind == STREAMS ? cucap_i_drv.cuStreamCreate((CUstream *)&made, CU_STREAM_NON_BLOCKING)
                         : cucap_i_drv.cuEventCreate((CUevent *)&made, CU_EVENT_DISABLE_TIMING);
    left = cucap_i_ctx_leave(ctx, saved);
    if (rc == CUDA_SUCCESS && left != CUDA_SUCCESS) {
        if (kind == STREAMS)
            cucap_i_drv.cuStreamDestroy((CUstream)made);
        else
            cucap_i_drv.cuEventDestroy((CUevent)made);
        rc = left;
    }
    if (rc == CUDA_SUCCESS)
        *out = made;
    return rc;
}

static int a_contexts_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

CUresult cucap_i_stream_after(CUcontext ctx, CUstream later, CUstream earlier, CUevent ev)
{
    CUcontext saved = NULL;
    CUevent fresh = NULL;
    CUresult rc = CUDA_SUCCESS, left;
    int current = a_contexts_stream(later) || a_contexts_stream(earlier);

    if (!ev && (rc = cucap_i_create_in(ctx, EVENTS, (void **)&fresh)) != CUDA_SUCCESS)
        return rc;
    if (current && (rc = cucap_i_ctx_enter(ctx, &saved)) != CUDA_SUCCESS)
        current = 0;
    if (rc == CUDA_SUCCESS && (rc = cucap_i_drv.cuEventRecord(ev ? ev : fresh, earlier)) == CUDA_SUCCESS)
        rc = cucap_i_drv.cuStreamWaitEvent(later, ev ? ev : fresh, 0);
    if (current && (left = cucap_i_ctx_leave(ctx, saved)) != CUDA_SUCCESS && rc == CUDA_SUCCESS)
        rc = left;
    if (fresh)
        (void)cucap_i_drv.cuEventDestroy(fresh);
    return rc;
}

CUresult cucap_i_event_record_in(CUcontext ctx, CUevent ev, CUstream s)
{
    CUcontext saved = NULL;
    CUresult rc, left;

    if (!a_contexts_stream(s))
        return cucap_i_drv.cuEventRecord(ev, s);
    if ((rc = cucap_i_ctx_enter(ctx, &saved)) != CUDA_SUCCESS)
        return rc;
    rc = cucap_i_drv.cuEventRecord(ev, s);
    left = cucap_i_ctx_leave(ctx, saved);
    return rc != CUDA_SUCCESS ? rc : left;
}

int cucap_i_stream_idle(CUcontext ctx, CUstream s, const char *caller)
{
    struct cucap_work_scope w;
    CUresult rc;

    cucap_i_work_enter_quietly(&w, ctx, caller);
    rc = cucap_i_drv.cuStreamQuery(s);
    cucap_i_work_leave_quietly(&w, caller);
    return rc == CUDA_SUCCESS;
}

static CUresult take(CUcontext ctx, CUdevice dev, int kind, void **out, const char *caller)
{
    struct cache *c = find_cache(ctx, dev);

    if (c && (*out = cucap_i_free_list_take(&c->quick[kind])) != NULL)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&cache_lock);
    c = find_cache(ctx, dev);
    if (c && c->count[kind] > 0) {
        *out = c->items[kind][--c->count[kind]];
        pthread_mutex_unlock(&cache_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!c)
        (void)install_cache(ctx, dev, caller);
    return cucap_i_create_in(ctx, kind, out);
}

/* n streams of ctx, and an event too when event is not NULL: as many as
 * the cache holds (the quick slots first, then the arrays in one locked
 * step), the rest made.  On failure none is
 * handed out, and *failed names the call that failed. */
static CUresult take_streams(CUcontext ctx, CUdevice dev, size_t n, CUstream *out, CUevent *event,
                             const char **failed, const char *caller)
{
    struct cache *c;
    size_t got = 0, i;
    CUresult rc = CUDA_SUCCESS;
    void *ev = NULL;

    if ((c = find_cache(ctx, dev)) != NULL) {
        while (got < n && (out[got] = cucap_i_free_list_take(&c->quick[STREAMS])) != NULL)
            got++;
        if (event)
            ev = cucap_i_free_list_take(&c->quick[EVENTS]);
    }
    if (!c || got < n || (event && !ev)) {
        pthread_mutex_lock(&cache_lock);
        c = find_cache(ctx, dev);
        while (c && got < n && c->count[STREAMS] > 0)
            out[got++] = (CUstream)c->items[STREAMS][--c->count[STREAMS]];
        if (c && event && !ev && c->count[EVENTS] > 0)
            ev = c->items[EVENTS][--c->count[EVENTS]];
        pthread_mutex_unlock(&cache_lock);
    }
    if (!c && (got < n || event))
        (void)install_cache(ctx, dev, caller);
    if (event && !ev && (rc = cucap_i_create_in(ctx, EVENTS, &ev)) != CUDA_SUCCESS)
        *failed = "cuEventCreate";
    while (got < n && rc == CUDA_SUCCESS)
        if ((rc = cucap_i_create_in(ctx, STREAMS, (void **)&out[got])) == CUDA_SUCCESS)
            got++;
        else
            *failed = "cuStreamCreate";
    if (rc != CUDA_SUCCESS) {   /* out[0 .. got - 1] are streams */
        for (i = 0; i < got; i++)
            give(ctx, dev, STREAMS, out[i], caller);
        if (ev)
            give(ctx, dev, EVENTS, ev, caller);
        return rc;
    }
    if (event)
        *event = (CUevent)ev;
    return rc;
}

void cucap_i_cache_give_items(const struct cucap_cache_item *items, size_t n, const char *caller)
{
    size_t i, left = 0;
    struct cache *c;
    unsigned char kept_local[256], *kept;

    if (n == 0)
        return;
    if (!(kept = n <= 256 ? kept_local : malloc(n))) {
        for (i = 0; i < n; i++)
            give(items[i].ctx, items[i].dev, items[i].is_event ? EVENTS : STREAMS, items[i].handle, caller);
        return;
    }
    /* the quick slots first, as give does: a capture's one fork stream
     * goes back without the lock, and the next split takes it so */
    for (i = 0; i < n; i++) {
        c = find_cache(items[i].ctx, items[i].dev);
        kept[i] = c && cucap_i_free_list_give(&c->quick[items[i].is_event ? EVENTS : STREAMS], items[i].handle);
        left += !kept[i];
    }
    if (left) {
        pthread_mutex_lock(&cache_lock);
        for (i = 0; i < n; i++) {
            int kind = items[i].is_event ? EVENTS : STREAMS;
            if (kept[i])
                continue;
            kept[i] = (c = find_cache(items[i].ctx, items[i].dev)) != NULL && c->count[kind] < CACHED_PER_KIND;
            if (kept[i]) {
                c->items[kind][c->count[kind]++] = items[i].handle;
                left--;
            }
        }
        pthread_mutex_unlock(&cache_lock);
    }
    for (i = 0; i < n && left; i++)
        if (!kept[i])
            give(items[i].ctx, items[i].dev, items[i].is_event ? EVENTS : STREAMS, items[i].handle, caller);
    if (kept != kept_local)
        free(kept);
}

static void give(CUcontext ctx, CUdevice dev, int kind, void *item, const char *caller)
{
    struct cache *c = find_cache(ctx, dev);
    CUresult rc;

    if (c && cucap_i_free_list_give(&c->quick[kind], item))
        return;
    pthread_mutex_lock(&cache_lock);
    c = find_cache(ctx, dev);
    if (c && c->count[kind] < CACHED_PER_KIND) {
        c->items[kind][c->count[kind]++] = item;
        item = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!item)
        return;
    if (!c && install_cache(ctx, dev, caller)) {
        give(ctx, dev, kind, item, caller);
        return;
    }
    rc = kind == STREAMS ? cucap_i_drv.cuStreamDestroy((CUstream)item) : cucap_i_drv.cuEventDestroy((CUevent)item);
    if (rc != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: %s failed while releasing a cached %s: " CUCAP_I_RESULT_FMT, caller,
                     kind == STREAMS ? "cuStreamDestroy" : "cuEventDestroy", kind == STREAMS ? "stream" : "event",
                     CUCAP_I_RESULT_ARGS(rc));
}

CUresult cucap_i_cache_take_stream(CUcontext ctx, CUdevice dev, CUstream *out, const char *caller)
{
    return take(ctx, dev, STREAMS, (void **)out, caller);
}

void cucap_i_cache_give_stream(CUcontext ctx, CUdevice dev, CUstream s, const char *caller)
{
    give(ctx, dev, STREAMS, s, caller);
}

CUresult cucap_i_cache_take_event(CUcontext ctx, CUdevice dev, CUevent *out, const char *caller)
{
    return take(ctx, dev, EVENTS, (void **)out, caller);
}

void cucap_i_cache_give_event(CUcontext ctx, CUdevice dev, CUevent e, const char *caller)
{
    give(ctx, dev, EVENTS, e, caller);
}

static void destroy_cached(int kind, void *item)
{
    if (kind == STREAMS)
        (void)cucap_i_drv.cuStreamDestroy((CUstream)item);
    else
        (void)cucap_i_drv.cuEventDestroy((CUevent)item);
}

void cucap_i_stream_cache_drain(void)
{
    struct cucap_device_entry *entry;
    struct cache *c;
    void *quick;
    int dev, kind;

    for (dev = 0; dev < cucap_i_device_entries(); dev++) {
        if (!(entry = cucap_i_device_entry(dev)))
            continue;
        pthread_mutex_lock(&cache_lock);
        c = atomic_exchange_explicit(&entry->stream_cache, NULL, memory_order_acq_rel);
        pthread_mutex_unlock(&cache_lock);
        if (!c)
            continue;
        for (kind = 0; kind < KINDS; kind++) {
            while ((quick = cucap_i_free_list_take(&c->quick[kind])) != NULL)
                destroy_cached(kind, quick);
            while (c->count[kind] > 0)
                destroy_cached(kind, c->items[kind][--c->count[kind]]);
        }
        cucap_i_ctx_hold_release(c->hold);
        free(c);
    }
}

/* ---------------------------------------------------------------- a builder's streams and events */

/* Make a new non-blocking stream in ctx. */
CUresult cucap_i_stream_in(CUcontext ctx, CUstream *s, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_create_in(ctx, CUCAP_I_STREAM, (void **)s);

    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamCreate (with the stream's context made current)");
    return CUDA_SUCCESS;
}

/* Streams and events of forks, bodies and joins: reused through the cache
 * in a primary context the builders retain, made and destroyed otherwise. */
CUresult cucap_i_take_stream(struct ctx_hold *c, CUstream *s, const char *caller)
{
    return c->retained ? cucap_i_cache_take_stream(c->ctx, c->dev, s, caller) : cucap_i_stream_in(c->ctx, s, "", NULL);
}

CUresult cucap_i_take_streams(struct ctx_hold *c, size_t n, CUstream *out, const char *caller)
{
    CUresult rc = CUDA_SUCCESS;
    size_t i;

    if (c->retained)
    {
        const char *failed = NULL;
        return take_streams(c->ctx, c->dev, n, out, NULL, &failed, caller);
    }
    for (i = 0; i < n && rc == CUDA_SUCCESS; i++)
        if ((rc = cucap_i_stream_in(c->ctx, &out[i], "", NULL)) != CUDA_SUCCESS)
            while (i-- > 0)
                cucap_i_drv.cuStreamDestroy(out[i]);
    return rc;
}

void cucap_i_give_stream(struct ctx_hold *c, CUstream s, const char *caller)
{
    if (c->retained)
        cucap_i_cache_give_stream(c->ctx, c->dev, s, caller);
    else
        cucap_i_drv.cuStreamDestroy(s);
}

CUresult cucap_i_take_streams_and_event(struct ctx_hold *c, size_t n, CUstream *out, CUevent *e,
                                        const char **failed, const char *caller)
{
    CUresult rc;

    if (c->retained)
        return take_streams(c->ctx, c->dev, n, out, e, failed, caller);
    if ((rc = cucap_i_take_event(c, e, caller)) != CUDA_SUCCESS) {
        *failed = "cuEventCreate";
        return rc;
    }
    if ((rc = cucap_i_take_streams(c, n, out, caller)) != CUDA_SUCCESS) {
        *failed = "cuStreamCreate";
        cucap_i_drv.cuEventDestroy(*e);
        *e = NULL;
    }
    return rc;
}

CUresult cucap_i_take_event(struct ctx_hold *c, CUevent *e, const char *caller)
{
    if (c->retained)
        return cucap_i_cache_take_event(c->ctx, c->dev, e, caller);
    return cucap_i_create_in(c->ctx, CUCAP_I_EVENT, (void **)e);
}

/* ---------------------------------------------------------------- deferral to a capture's end */

static void destroy_item(const struct cucap_cache_item *d)
{
    if (d->is_event)
        cucap_i_drv.cuEventDestroy((CUevent)d->handle);
    else
        cucap_i_drv.cuStreamDestroy((CUstream)d->handle);
}

void cucap_i_deferral_init(struct cucap_deferral *d)
{
    d->over = 0;
    d->items = d->few;
    d->count = 0;
    d->cap = sizeof d->few / sizeof d->few[0];
}

/* Room for want items.  -1 when out of memory. */
static int reserve(struct cucap_deferral *d, size_t want)
{
    struct cucap_cache_item *grown;
    size_t cap = d->cap;

    if (want <= cap)
        return 0;
    while (cap < want)
        cap *= 2;
    if (d->items == d->few) {
        if (!(grown = malloc(cap * sizeof *grown)))
            return -1;
        memcpy(grown, d->few, d->count * sizeof *grown);
    } else if (!(grown = realloc(d->items, cap * sizeof *grown))) {
        return -1;
    }
    d->items = grown;
    d->cap = cap;
    return 0;
}

int cucap_i_defer(struct cucap_deferral *d, const struct cucap_cache_item *items, size_t n, size_t more,
                  const char *caller)
{
    if (d->over) {
        cucap_i_cache_give_items(items, n, caller);
        return 0;
    }
    if (reserve(d, d->count + n + more) != 0 && reserve(d, d->count + n) != 0)
        return -1;
    while (n--)   /* mostly one: no call */
        d->items[d->count++] = *items++;
    return 0;
}

size_t cucap_i_deferral_take_joined(struct cucap_deferral *d, CUcontext ctx, size_t n, CUstream *streams)
{
    size_t i, got = 0;

    for (i = d->count; i-- > 0 && got < n;) {
        struct cucap_cache_item *item = &d->items[i];
        if (item->is_event || !item->joined || item->ctx != ctx)
            continue;
        streams[got++] = (CUstream)item->handle;
        *item = d->items[--d->count];   /* one visited already, or itself */
    }
    return got;
}

void cucap_i_deferral_end(struct cucap_deferral *d, const char *caller)
{
    struct cucap_cache_item *items;
    size_t n;

    items = d->items;
    n = d->count;
    d->count = 0;
    d->over = 1;   /* nothing is deferred from now on */
    cucap_i_cache_give_items(items, n, caller);
    if (items != d->few)
        free(items);
    d->items = d->few;
    d->cap = sizeof d->few / sizeof d->few[0];
}

void cucap_i_deferral_destroy(struct cucap_deferral *d)
{
    while (d->count)
        destroy_item(&d->items[--d->count]);
    if (d->items != d->few)
        free(d->items);
    d->items = d->few;
}

/* An event recorded in a capture is reused only once that capture is
 * over, so that no event is ever recorded in two captures that may both
 * still run (the driver crashes when a capture's end races a re-record of
 * its event). */
void cucap_i_give_event(struct ctx_hold *c, struct cucap_deferral *d, CUevent e, const char *caller)
{
    struct cucap_cache_item item = { c->ctx, c->dev, e, 1, 0 };

    if (!c->retained)
        cucap_i_drv.cuEventDestroy(e);   /* legal during capture */
    else if (!d)
        cucap_i_cache_give_event(c->ctx, c->dev, e, caller);
    else if (cucap_i_defer(d, &item, 1, 0, caller) != 0)
        cucap_i_drv.cuEventDestroy(e);
}
