/* Free lists of objects kept for reuse. */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "free-list.h"

void *cucap_i_free_list_take(struct cucap_free_list *l)
{
    void *p;
    int i;

    for (i = 0; i < CUCAP_FREE_LIST_MAX; i++)
        if (atomic_load_explicit(&l->slot[i], memory_order_relaxed) &&
            (p = atomic_exchange_explicit(&l->slot[i], NULL, memory_order_acquire)) != NULL)
            return p;
    return NULL;
}

int cucap_i_free_list_give(struct cucap_free_list *l, void *p)
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

void cucap_i_free_list_drain(struct cucap_free_list *l)
{
    void *p;

    while ((p = cucap_i_free_list_take(l)) != NULL)
        free(p);
}
