/* The registry of running captures: the entries of every stream that
 * takes part in a capture of the library, in one list under one lock, and
 * what a call that knows only a stream does with them (find its capture,
 * lock it, record a failure in it). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "capture-registry.h"
#include "driver.h"
#include "hierarchy.h"
#include "internal.h"

static struct cucap_registration *entries;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_size_t registered;     /* entries listed: none, no lookup */

static void link_locked(struct cucap_registration *r, struct cucap_hier *h)
{
    r->h = h;
    r->prev = NULL;
    r->next = entries;
    if (entries)
        entries->prev = r;
    entries = r;
    r->linked = 1;
}

static void unlink_locked(struct cucap_registration *r)
{
    if (!r->linked)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        entries = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->linked = 0;
}

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_hier *h)
{
    r->stream = s;
    r->next = NULL;
    cucap_i_registry_add_chain(r, 1, h);
}

void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_hier *h)
{
    struct cucap_registration *r, *next;
    size_t i;

    if (n == 0)
        return;
    pthread_mutex_lock(&registry_lock);
    for (r = first, i = 0; i < n && r; r = next, i++) {
        next = r->next;   /* linking rewrites it */
        link_locked(r, h);
    }
    atomic_fetch_add_explicit(&registered, n, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_registry_remove(struct cucap_registration *r)
{
    cucap_i_registry_remove_all(&r, 1);
}

void cucap_i_registry_remove_all(struct cucap_registration *const *remove, size_t n)
{
    size_t i, removed = 0;

    for (i = 0; i < n && !removed; i++)
        removed = remove[i]->linked;
    if (!removed)
        return;
    removed = 0;
    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < n; i++) {
        removed += remove[i]->linked;
        unlink_locked(remove[i]);
    }
    atomic_fetch_sub_explicit(&registered, removed, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
}

/* The hierarchy of the running capture that s takes part in, referenced,
 * or NULL. */
static struct cucap_hier *capture_of_stream(CUstream s)
{
    struct cucap_registration *r;
    struct cucap_hier *found = NULL;

    if (!s || atomic_load_explicit(&registered, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    for (r = entries; r; r = r->next)
        if (r->stream == s && !cucap_i_hier_is_capture_over(r->h)) {
            found = r->h;
            cucap_i_hier_ref(found);   /* alive: the entry's builder holds a reference */
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* "the origin 0x... and forks 0x..., 0x..." for the streams of h's
 * capture that are still registered. */
static void describe_streams(struct cucap_hier *h, char *buf, size_t size)
{
    const struct cucap_registration *r;
    CUstream origin = cucap_i_hier_origin(h);
    size_t used;
    int forks = 0;

    used = (size_t)snprintf(buf, size, "the origin %p", (void *)origin);
    pthread_mutex_lock(&registry_lock);
    for (r = entries; r && used < size; r = r->next)
        if (r->h == h && r->stream != origin)
            used += (size_t)snprintf(buf + used, size - used, "%s%p", forks++ ? ", " : " and forks ",
                                     (void *)r->stream);
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_capture_failed(struct cucap_hier *h, const char *call, CUresult code)
{
    char streams[256];

    if (!h || !cucap_i_is_capture_error(code))
        return;
    streams[0] = '\0';
    if (code == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        describe_streams(h, streams, sizeof streams);
    cucap_i_hier_capture_failed(h, call, code, streams);
}

CUresult cucap_i_fail_in_capture(struct cucap_hier *h, CUstream s, CUresult rc, const char *caller, const char *call,
                                 const char *consequence, cucap_error **err)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;

    /* the driver does not always say (an event wait in a capture that
     * another thread's global-mode call invalidated gives INVALID_VALUE) */
    if (!cucap_i_is_capture_error(rc) &&
        cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
        status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                     "%s: %s failed: " CUCAP_I_RESULT_FMT
                     ", because the capture had been invalidated before this call by a call "
                     "made outside the library on one of its streams (synchronizing one of them, a synchronous "
                     "allocation or free, or another thread's global-mode call such as a legacy-stream "
                     "operation)%s", caller, call, CUCAP_I_RESULT_ARGS(rc),
                     consequence ? consequence : "");
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        cucap_i_fail(err, rc, "%s: %s failed: " CUCAP_I_RESULT_FMT "%s", caller, call, CUCAP_I_RESULT_ARGS(rc),
                     consequence ? consequence : "");
    }
    cucap_i_capture_failed(h, caller, rc);
    return rc;
}

void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code)
{
    struct cucap_hier *h;

    if (!cucap_i_is_capture_error(code) || !(h = capture_of_stream(s)))
        return;
    cucap_i_capture_failed(h, call, code);
    cucap_i_hier_unref(h, call);
}

struct cucap_hier *cucap_i_capture_lock_stream(CUstream s)
{
    struct cucap_hier *h = capture_of_stream(s);

    if (h)
        cucap_i_hier_lock(h);
    return h;
}

void cucap_i_capture_unlock_stream(struct cucap_hier *h, const char *caller)
{
    if (!h)
        return;
    cucap_i_hier_unlock(h);
    cucap_i_hier_unref(h, caller);
}
