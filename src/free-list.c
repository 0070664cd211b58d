/* Free lists of objects kept for reuse: shared slots, and a few objects
 * kept by each thread. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "free-list.h"

#define PER_LIST 2                  /* objects of one list a thread keeps (the take and the give read both) */

/* The objects one thread gave back; only that thread reads or writes
 * them, but for cucap_release_cached, which runs alone, and the thread's
 * exit. */
struct thread_cache {
    _Alignas(64) int listed;             /* in the list of caches, and its exit hook set; a line's start */
    struct {                             /* read together: the first lines */
        void *object[PER_LIST];
        struct cucap_free_list *list;
    } kept[CUCAP_PER_THREAD_LISTS];
    struct thread_cache *prev, *next;   /* every thread's, under caches_lock */
};

/* Read on every capture: in the static TLS block, reached without a
 * call (a library loaded with dlopen() takes it from the room glibc keeps
 * for that). */
#if defined(__GNUC__)
#  define HOT_THREAD_LOCAL _Thread_local __attribute__((tls_model("initial-exec")))
#  define COLD __attribute__((noinline, cold))
#else
#  define HOT_THREAD_LOCAL _Thread_local
#  define COLD
#endif

static HOT_THREAD_LOCAL struct thread_cache mine;
static struct thread_cache *caches;
static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int exit_key_made;

#define CACHE_LINE 64

void *cucap_i_aligned_calloc(size_t size)
{
    size_t rounded = (size + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    void *p;

    if (rounded < size || !(p = aligned_alloc(CACHE_LINE, rounded)))
        return NULL;
    return memset(p, 0, rounded);
}

/* ---------------------------------------------------------------- shared slots */

static void *take_shared(struct cucap_free_list *l)
{
    void *p;
    int i;

    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        if (atomic_load_explicit(&l->slot[i], memory_order_relaxed) &&
            (p = atomic_exchange_explicit(&l->slot[i], NULL, memory_order_acquire)) != NULL)
            return p;
    return NULL;
}

static int give_shared(struct cucap_free_list *l, void *p)
{
    int i;

    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++) {
        void *empty = NULL;
        if (!atomic_load_explicit(&l->slot[i], memory_order_relaxed) &&
            atomic_compare_exchange_strong_explicit(&l->slot[i], &empty, p, memory_order_release,
                                                    memory_order_relaxed))
            return 1;
    }
    return 0;
}

static void free_object(struct cucap_free_list *l, void *p)
{
    if (l->free_object)
        l->free_object(p);
    else
        free(p);
}

/* ---------------------------------------------------------------- a thread's own */

/* A thread's exit: its objects to the shared slots, or freed. */
static void thread_exit(void *data)
{
    struct thread_cache *c = data;
    int k, i;

    pthread_mutex_lock(&caches_lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        caches = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->listed = 0;
    pthread_mutex_unlock(&caches_lock);
    for (k = 0; k < CUCAP_PER_THREAD_LISTS; k++)
        for (i = 0; i < PER_LIST; i++) {
            if (c->kept[k].object[i] && !give_shared(c->kept[k].list, c->kept[k].object[i]))
                free_object(c->kept[k].list, c->kept[k].object[i]);
            c->kept[k].object[i] = NULL;
        }
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* This thread's cache, listed and hooked to its exit once: 0 when that
 * cannot be done (then the shared slots serve). */
static COLD int list_own_cache(struct thread_cache *c)
{
    (void)pthread_once(&exit_key_once, make_exit_key);
    if (!exit_key_made || pthread_setspecific(exit_key, c) != 0)
        return 0;
    pthread_mutex_lock(&caches_lock);
    c->prev = NULL;
    c->next = caches;
    if (caches)
        caches->prev = c;
    caches = c;
    c->listed = 1;
    pthread_mutex_unlock(&caches_lock);
    return 1;
}

void *cucap_i_free_list_take(struct cucap_free_list *l)
{
    return take_shared(l);
}

int cucap_i_free_list_give(struct cucap_free_list *l, void *p)
{
    return give_shared(l, p);
}

void *cucap_i_free_list_take_own(struct cucap_free_list *l, enum cucap_per_thread_list which)
{
    void **kept = mine.kept[which].object, *p;

    if (mine.listed) {
        if ((p = kept[0]) != NULL) {
            kept[0] = NULL;
            return p;
        }
        if ((p = kept[1]) != NULL) {
            kept[1] = NULL;
            return p;
        }
    }
    return take_shared(l);
}

int cucap_i_free_list_give_own(struct cucap_free_list *l, enum cucap_per_thread_list which, void *p)
{
    void **kept = mine.kept[which].object;

    if (mine.listed || list_own_cache(&mine)) {
        mine.kept[which].list = l;
        if (!kept[0]) {
            kept[0] = p;
            return 1;
        }
        if (!kept[1]) {
            kept[1] = p;
            return 1;
        }
    }
    return give_shared(l, p);
}

void cucap_i_free_list_drain(struct cucap_free_list *l)
{
    struct thread_cache *c;
    void *p;
    int k, i;

    pthread_mutex_lock(&caches_lock);
    for (c = caches; c; c = c->next)
        for (k = 0; k < CUCAP_PER_THREAD_LISTS; k++)
            for (i = 0; i < PER_LIST && c->kept[k].list == l; i++)
                if ((p = c->kept[k].object[i]) != NULL) {
                    c->kept[k].object[i] = NULL;
                    free_object(l, p);
                }
    pthread_mutex_unlock(&caches_lock);
    while ((p = take_shared(l)) != NULL)
        free_object(l, p);
}
