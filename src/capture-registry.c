/* The registry of running captures: the entries of every stream that
 * takes part in a capture of the library.  An entry goes into one of 64
 * quick slots, or else into a list under the registry's lock.  A word
 * says which slots are taken: an entry claims free slots in it with one
 * compare-and-swap (all of a split's forks at once), is stored in them,
 * and a removal empties its slots, then frees them in the word with one
 * atomic AND.  A lookup first reads the word and the list's head: when
 * both are empty, nothing is registered and it is done.  Otherwise (a
 * pool call on a stream while a capture runs, a capture error) it takes
 * the lock and counts itself in `finders`; an entry emptied from its slot
 * while a lookup runs waits for the lock before its builder may free it,
 * so that no lookup reads an entry that is gone. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "capture-registry.h"

#define QUICK_SLOTS 64

/* What every capture reads, in as few cache lines as it can: the word,
 * the count of lookups, the list's head and the first slots share one. */
static _Alignas(64) struct {
    _Atomic(uint64_t) taken;         /* bit i: slot i is taken */
    atomic_uint finders;             /* lookups that may be reading the slots */
    _Atomic(struct cucap_registration *) listed;   /* written under the lock */
    _Atomic(struct cucap_registration *) quick[QUICK_SLOTS];
} registry;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static int lowest_bit(uint64_t word)
{
#if defined(__GNUC__)
    return __builtin_ctzll(word);
#else
    int i = 0;

    while (!(word & 1)) {
        word >>= 1;
        i++;
    }
    return i;
#endif
}

/* Up to n free slots claimed in one step, their bits in the return. */
static uint64_t claim_slots(size_t n)
{
    uint64_t seen = atomic_load_explicit(&registry.taken, memory_order_relaxed), claim;

    if (n == 0)
        return 0;
    do {
        uint64_t free_slots = ~seen;
        size_t got;
        claim = free_slots & -free_slots;   /* the lowest */
        for (got = 1, free_slots &= free_slots - 1; free_slots && got < n; got++, free_slots &= free_slots - 1)
            claim |= free_slots & -free_slots;
    } while (claim && !atomic_compare_exchange_weak_explicit(&registry.taken, &seen, seen | claim, memory_order_seq_cst,
                                                             memory_order_relaxed));
    return claim;
}

static void link_locked(struct cucap_registration *r)
{
    struct cucap_registration *head = atomic_load_explicit(&registry.listed, memory_order_relaxed);

    r->slot = -1;
    r->prev = NULL;
    r->next = head;
    if (head)
        head->prev = r;
    atomic_store_explicit(&registry.listed, r, memory_order_seq_cst);
}

static void unlink_locked(struct cucap_registration *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        atomic_store_explicit(&registry.listed, r->next, memory_order_relaxed);
    if (r->next)
        r->next->prev = r->prev;
}

/* One entry, its stream set: the lowest free slot, or the list. */
static void add_one(struct cucap_registration *r, struct cucap_capture *h)
{
    uint64_t seen = atomic_load_explicit(&registry.taken, memory_order_relaxed), bit;

    r->h = h;
    r->linked = 1;
    while ((bit = ~seen & (seen + 1)) != 0)   /* the lowest free slot */
        if (atomic_compare_exchange_weak_explicit(&registry.taken, &seen, seen | bit, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            r->slot = lowest_bit(bit);
            atomic_store_explicit(&registry.quick[r->slot], r, memory_order_release);
            return;
        }
    pthread_mutex_lock(&registry_lock);
    link_locked(r);
    pthread_mutex_unlock(&registry_lock);
}

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_capture *h)
{
    r->stream = s;
    add_one(r, h);
}

void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_capture *h)
{
    struct cucap_registration *r, *next, *rest = NULL;
    uint64_t claim;
    size_t i;

    if (n == 1) {   /* a split of one fork */
        add_one(first, h);
        return;
    }
    claim = claim_slots(n);

    for (r = first, i = 0; i < n && r; r = next, i++) {
        next = r->next;   /* linking rewrites it */
        r->h = h;
        r->linked = 1;
        if (claim) {
            r->slot = lowest_bit(claim);
            claim &= claim - 1;
            atomic_store_explicit(&registry.quick[r->slot], r, memory_order_release);
        } else {
            r->next = rest;
            rest = r;
        }
    }
    if (claim)   /* a chain shorter than n */
        atomic_fetch_and_explicit(&registry.taken, ~claim, memory_order_seq_cst);
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
    if (!r->linked)
        return;
    if (r->slot >= 0) {
        atomic_store_explicit(&registry.quick[r->slot], NULL, memory_order_relaxed);
        atomic_fetch_and_explicit(&registry.taken, ~((uint64_t)1 << r->slot), memory_order_seq_cst);
        /* the lock, taken after the slot is emptied, waits for the lookups
         * that may have read it */
        if (atomic_load_explicit(&registry.finders, memory_order_seq_cst)) {
            pthread_mutex_lock(&registry_lock);
            pthread_mutex_unlock(&registry_lock);
        }
    } else {
        pthread_mutex_lock(&registry_lock);
        unlink_locked(r);
        pthread_mutex_unlock(&registry_lock);
    }
    r->linked = 0;
}

void cucap_i_registry_remove_all(struct cucap_registration *const *remove, size_t n)
{
    uint64_t freed = 0;
    size_t i, out = 0;
    int in_list = 0;

    if (n == 1) {
        cucap_i_registry_remove(remove[0]);
        return;
    }

    for (i = 0; i < n; i++) {
        if (!remove[i]->linked)
            continue;
        out++;
        if (remove[i]->slot >= 0) {
            atomic_store_explicit(&registry.quick[remove[i]->slot], NULL, memory_order_relaxed);
            freed |= (uint64_t)1 << remove[i]->slot;
        } else {
            in_list = 1;
        }
    }
    if (!out)
        return;
    if (freed)
        atomic_fetch_and_explicit(&registry.taken, ~freed, memory_order_seq_cst);
    /* the lock, taken after the slots are emptied, waits for the lookups
     * that may have read them */
    if (in_list || atomic_load_explicit(&registry.finders, memory_order_seq_cst)) {
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
    uint64_t slots;
    int done = 0;

    atomic_fetch_add_explicit(&registry.finders, 1, memory_order_seq_cst);
    pthread_mutex_lock(&registry_lock);
    /* read after counting itself: a slot freed before then is empty */
    for (slots = atomic_load_explicit(&registry.taken, memory_order_seq_cst); slots && !done; slots &= slots - 1)
        if ((r = atomic_load_explicit(&registry.quick[lowest_bit(slots)], memory_order_acquire)) != NULL)
            done = visit(r, data);
    for (r = atomic_load_explicit(&registry.listed, memory_order_relaxed); r && !done; r = r->next)
        done = visit(r, data);
    pthread_mutex_unlock(&registry_lock);
    atomic_fetch_sub_explicit(&registry.finders, 1, memory_order_seq_cst);
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
    return atomic_load_explicit(&registry.taken, memory_order_acquire) != 0 ||
           atomic_load_explicit(&registry.listed, memory_order_relaxed) != NULL;
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
