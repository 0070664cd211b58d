/* The free lists of src/free-list.c: a few objects kept, each handed to
 * one taker only, from many threads at once. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "free-list.h"

Test(free_list, keeps_a_few_and_hands_each_out_once)
{
    struct cucap_free_list s = CUCAP_FREE_LIST_INIT;
    void *objects[CUCAP_FREE_LIST_MAX + 1], *taken[CUCAP_FREE_LIST_MAX];
    int i, j;

    cr_assert_null(cucap_i_free_list_take(&s), "nothing kept yet");
    for (i = 0; i <= CUCAP_FREE_LIST_MAX; i++)
        cr_assert_not_null(objects[i] = malloc(16));
    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        cr_assert_eq(cucap_i_free_list_give(&s, objects[i]), 1);
    cr_assert_eq(cucap_i_free_list_give(&s, objects[CUCAP_FREE_LIST_MAX]), 0, "the list is full");
    free(objects[CUCAP_FREE_LIST_MAX]);
    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++) {
        cr_assert_not_null(taken[i] = cucap_i_free_list_take(&s));
        for (j = 0; j < i; j++)
            cr_assert_neq(taken[i], taken[j], "an object handed out twice");
    }
    cr_assert_null(cucap_i_free_list_take(&s));
    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        cr_assert_eq(cucap_i_free_list_give(&s, taken[i]), 1);
    cucap_i_free_list_drain(&s);
    cr_assert_null(cucap_i_free_list_take(&s), "drained");
}

struct held {
    atomic_int holders;
};

static struct cucap_free_list shared = CUCAP_FREE_LIST_INIT;
static atomic_long overlaps, made;

static void *churn(void *arg)
{
    int i;

    (void)arg;
    for (i = 0; i < 200000; i++) {
        struct held *h = cucap_i_free_list_take(&shared);
        if (!h) {
            if (!(h = calloc(1, sizeof *h)))
                continue;
            atomic_fetch_add(&made, 1);
        }
        if (atomic_fetch_add(&h->holders, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        atomic_fetch_sub(&h->holders, 1);
        if (!cucap_i_free_list_give(&shared, h))
            free(h);
    }
    return NULL;
}

Test(free_list, many_threads_never_share_an_object)
{
    pthread_t t[8];
    int i;

    for (i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(atomic_load(&overlaps), 0, "%ld times two threads held one object", atomic_load(&overlaps));
    cr_assert_lt(atomic_load(&made), 8 * 200000, "the kept objects were reused (%ld made)", atomic_load(&made));
    cucap_i_free_list_drain(&shared);
}

/* ---------------------------------------------------------------- kept per thread */

static atomic_int freed_by_list;

static void count_free(void *p)
{
    atomic_fetch_add(&freed_by_list, 1);
    free(p);
}

Test(free_list, a_thread_takes_back_what_it_gave_before_the_shared_slots)
{
    struct cucap_free_list l = CUCAP_FREE_LIST_FREEING(count_free);
    void *a = malloc(16), *b = malloc(16), *c = malloc(16), *first, *second;
    int i;

    cr_assert(a && b && c);
    cr_assert_eq(cucap_i_free_list_give_own(&l, CUCAP_PER_THREAD_SLABS, a), 1);
    cr_assert_eq(cucap_i_free_list_give_own(&l, CUCAP_PER_THREAD_SLABS, b), 1);
    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        cr_assert_null(atomic_load(&l.slot[i]), "the thread's own two are not in the shared slots");
    cr_assert_eq(cucap_i_free_list_give_own(&l, CUCAP_PER_THREAD_SLABS, c), 1);
    cr_assert_eq(atomic_load(&l.slot[0]), c, "a third goes to the shared slots");
    first = cucap_i_free_list_take_own(&l, CUCAP_PER_THREAD_SLABS);
    second = cucap_i_free_list_take_own(&l, CUCAP_PER_THREAD_SLABS);
    cr_assert((first == a && second == b) || (first == b && second == a), "the thread's own first");
    cr_assert_eq(cucap_i_free_list_take_own(&l, CUCAP_PER_THREAD_SLABS), c);
    cr_assert_null(cucap_i_free_list_take_own(&l, CUCAP_PER_THREAD_SLABS));
    free(a);
    free(b);
    free(c);
}

struct exiting {
    struct cucap_free_list *l;
    void *objects[3];
};

static void *give_three_and_exit(void *arg)
{
    struct exiting *e = arg;
    int i;

    for (i = 0; i < 3; i++)
        if (!cucap_i_free_list_give_own(e->l, CUCAP_PER_THREAD_BUILDERS, e->objects[i]))
            free(e->objects[i]);
    return NULL;
}

Test(free_list, a_thread_that_exits_leaves_its_objects_in_the_shared_slots)
{
    struct cucap_free_list l = CUCAP_FREE_LIST_FREEING(count_free);
    struct exiting e = { &l, { malloc(16), malloc(16), malloc(16) } };
    pthread_t t;
    int i, in = 0;

    cr_assert(e.objects[0] && e.objects[1] && e.objects[2]);
    cr_assert_eq(pthread_create(&t, NULL, give_three_and_exit, &e), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        in += atomic_load(&l.slot[i]) != NULL;
    cr_assert_eq(in, 3, "the exited thread's two and the shared one are all in the shared slots (%d)", in);
    cucap_i_free_list_drain(&l);
    cr_assert_null(cucap_i_free_list_take_own(&l, CUCAP_PER_THREAD_BUILDERS), "drained");
}

struct waiting {
    struct cucap_free_list *l;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int step;
    void *after;
};

static void *give_wait_take(void *arg)
{
    struct waiting *w = arg;
    void *p = malloc(16);

    if (p && !cucap_i_free_list_give_own(w->l, CUCAP_PER_THREAD_CAPTURES, p))
        free(p);
    pthread_mutex_lock(&w->lock);
    w->step = 1;
    pthread_cond_broadcast(&w->changed);
    while (w->step < 2)
        pthread_cond_wait(&w->changed, &w->lock);
    pthread_mutex_unlock(&w->lock);
    w->after = cucap_i_free_list_take_own(w->l, CUCAP_PER_THREAD_CAPTURES);
    return NULL;
}

Test(free_list, a_drain_frees_what_a_live_thread_keeps)
{
    struct cucap_free_list l = CUCAP_FREE_LIST_FREEING(count_free);
    struct waiting w = { &l, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL };
    pthread_t t;
    int before;

    cr_assert_eq(pthread_create(&t, NULL, give_wait_take, &w), 0);
    pthread_mutex_lock(&w.lock);
    while (w.step < 1)
        pthread_cond_wait(&w.changed, &w.lock);
    pthread_mutex_unlock(&w.lock);
    before = atomic_load(&freed_by_list);
    cucap_i_free_list_drain(&l);
    cr_assert_eq(atomic_load(&freed_by_list), before + 1, "the live thread's object freed by its list's function");
    pthread_mutex_lock(&w.lock);
    w.step = 2;
    pthread_cond_broadcast(&w.changed);
    pthread_mutex_unlock(&w.lock);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_null(w.after, "the thread is handed nothing it kept before the drain");
}
