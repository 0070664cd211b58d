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
