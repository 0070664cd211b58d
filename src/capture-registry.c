/* The registry of running captures: the entries of every stream that
 * takes part in a capture of the library.  An entry goes into one of a
 * few quick slots, the lowest free one, taken and emptied without a lock,
 * or else into a list under the registry's lock.  A lookup first reads
 * the slots up to the highest ever taken and the list's head: when all
 * are empty, nothing is registered and it is done.  Otherwise (a pool
 * call on a stream while a capture runs, a capture error) it takes the
 * lock and counts itself in `finders`; an entry emptied from its slot
 * while a lookup runs waits for the lock before its builder may free it,
 * so that no lookup reads an entry that is gone. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "capture-registry.h"

#define QUICK_SLOTS 64

static _Atomic(struct cucap_registration *) quick[QUICK_SLOTS];
static atomic_int slots_used;        /* slots [0, slots_used) may hold an entry: never lowered */
static _Atomic(struct cucap_registration *) listed;   /* written under the lock */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint finders;          /* lookups that may be reading the slots */

/* Raised before slot i is taken, so that a lookup that comes after the
 * entry (in any thread that learned of its stream) reads that slot. */
static void use_slots_up_to(int i)
{
    int used = atomic_load_explicit(&slots_used, memory_order_relaxed);

    while (used <= i && !atomic_compare_exchange_weak_explicit(&slots_used, &used, i + 1, memory_order_seq_cst,
                                                                memory_order_relaxed))
        ;
}

static int take_slot(struct cucap_registration *r)
{
    int i;

    for (i = 0; i < QUICK_SLOTS; i++) {
        struct cucap_registration *none = NULL;

        if (atomic_load_explicit(&quick[i], memory_order_relaxed) != NULL)
            continue;
        use_slots_up_to(i);
        if (atomic_compare_exchange_strong_explicit(&quick[i], &none, r, memory_order_seq_cst,
                                                    memory_order_relaxed)) {
            r->slot = i;
            return 1;
        }
    }
    return 0;
}

static void link_locked(struct cucap_registration *r)
{
    struct cucap_registration *head = atomic_load_explicit(&listed, memory_order_relaxed);

    r->slot = -1;
    r->prev = NULL;
    r->next = head;
    if (head)
        head->prev = r;
    atomic_store_explicit(&listed, r, memory_order_seq_cst);
}

static void unlink_locked(struct cucap_registration *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        atomic_store_explicit(&listed, r->next, memory_order_relaxed);
    if (r->next)
        r->next->prev = r->prev;
}

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_capture *h)
{
    r->stream = s;
    r->next = NULL;
    cucap_i_registry_add_chain(r, 1, h);
}

void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_capture *h)
{
    struct cucap_registration *r, *next, *rest = NULL;
    size_t i;

    for (r = first, i = 0; i < n && r; r = next, i++) {
        next = r->next;   /* linking rewrites it */
        r->h = h;
        r->linked = 1;
        if (!take_slot(r)) {
            r->next = rest;
            rest = r;
        }
    }
    if (!rest)
        return;
    pthread_mutex_lock(&registry_lock);
    for (r = rest; r; r = next) {
        next = r->next;
        link_locked(r);
    }
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_registry_remove(struct cucap_registration *r)
{
    cucap_i_registry_remove_all(&r, 1);
}

void cucap_i_registry_remove_all(struct cucap_registration *const *remove, size_t n)
{
    size_t i, out = 0;
    int in_list = 0;

    for (i = 0; i < n; i++) {
        if (!remove[i]->linked)
            continue;
        out++;
        if (remove[i]->slot >= 0)
            atomic_store_explicit(&quick[remove[i]->slot], NULL, memory_order_seq_cst);
        else
            in_list = 1;
    }
    if (!out)
        return;
    /* the lock, taken after the slots are emptied, waits for the lookups
     * that may have read them */
    if (in_list || atomic_load_explicit(&finders, memory_order_seq_cst)) {
        pthread_mutex_lock(&registry_lock);
        for (i = 0; i < n; i++)
            if (remove[i]->linked && remove[i]->slot < 0)
                unlink_locked(remove[i]);
        pthread_mutex_unlock(&registry_lock);
    }
    for (i = 0; i < n; i++)
        remove[i]->linked = 0;
}

/* Calls visit(r, data) for every entry in, under the registry's lock,
 * until it returns nonzero. */
static void each_entry(int (*visit)(const struct cucap_registration *r, void *data), void *data)
{
    const struct cucap_registration *r;
    size_t i;
    int done = 0;

    atomic_fetch_add_explicit(&finders, 1, memory_order_seq_cst);
    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < QUICK_SLOTS && !done; i++)
        if ((r = atomic_load_explicit(&quick[i], memory_order_seq_cst)) != NULL)
            done = visit(r, data);
    for (r = atomic_load_explicit(&listed, memory_order_relaxed); r && !done; r = r->next)
        done = visit(r, data);
    pthread_mutex_unlock(&registry_lock);
    atomic_fetch_sub_explicit(&finders, 1, memory_order_seq_cst);
}

struct lookup {
    CUstream s;
    int (*take)(struct cucap_capture *h);
    struct cucap_capture *found;
};

static int find_one(const struct cucap_registration *r, void *data)
{
    struct lookup *l = data;

    if (r->stream == l->s && l->take(r->h))
        l->found = r->h;
    return l->found != NULL;
}

/* Whether an entry may be in: a slot taken or the list not empty. */
static int any_registered(void)
{
    int used = atomic_load_explicit(&slots_used, memory_order_acquire), i;

    for (i = 0; i < used; i++)
        if (atomic_load_explicit(&quick[i], memory_order_relaxed))
            return 1;
    return atomic_load_explicit(&listed, memory_order_relaxed) != NULL;
}

struct cucap_capture *cucap_i_registry_find(CUstream s, int (*take)(struct cucap_capture *h))
{
    struct lookup l = { s, take, NULL };

    if (!s || !any_registered())
        return NULL;
    each_entry(find_one, &l);
    return l.found;
}

struct description {
    const struct cucap_capture *h;
    CUstream origin;
    char *buf;
    size_t size, used;
    int forks;
};

static int describe_one(const struct cucap_registration *r, void *data)
{
    struct description *d = data;

    if (r->h == d->h && r->stream != d->origin)
        d->used += (size_t)snprintf(d->buf + d->used, d->size - d->used, "%s%p", d->forks++ ? ", " : " and forks ",
                                    (void *)r->stream);
    return d->used >= d->size;
}

void cucap_i_registry_describe(const struct cucap_capture *h, CUstream origin, char *buf, size_t size)
{
    struct description d = { h, origin, buf, size, 0, 0 };

    d.used = (size_t)snprintf(buf, size, "the origin %p", (void *)origin);
    if (d.used < size)
        each_entry(describe_one, &d);
}
