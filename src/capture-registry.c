/* The registry of running captures: the entries of every stream that
 * takes part in a capture of the library, in one list under one lock. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "capture-registry.h"

static struct cucap_registration *entries;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_size_t registered;     /* entries listed: none, no lookup */

static void link_locked(struct cucap_registration *r, struct cucap_capture *h)
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
    if (r->prev)
        r->prev->next = r->next;
    else
        entries = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->linked = 0;
    atomic_fetch_sub_explicit(&registered, 1, memory_order_relaxed);
}

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_capture *h)
{
    r->stream = s;
    r->next = NULL;
    cucap_i_registry_add_chain(r, 1, h);
}

void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_capture *h)
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
    size_t i;

    if (atomic_load_explicit(&registered, memory_order_relaxed) == 0)
        return;   /* nothing is in: none of these either */
    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < n; i++)
        if (remove[i]->linked)
            unlink_locked(remove[i]);
    pthread_mutex_unlock(&registry_lock);
}

struct cucap_capture *cucap_i_registry_find(CUstream s, int (*take)(struct cucap_capture *h))
{
    struct cucap_registration *r;
    struct cucap_capture *found = NULL;

    if (!s || atomic_load_explicit(&registered, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&registry_lock);
    for (r = entries; r && !found; r = r->next)
        if (r->stream == s && take(r->h))
            found = r->h;
    pthread_mutex_unlock(&registry_lock);
    return found;
}

void cucap_i_registry_describe(const struct cucap_capture *h, CUstream origin, char *buf, size_t size)
{
    const struct cucap_registration *r;
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
