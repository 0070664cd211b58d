/* Free lists of objects kept for reuse. */
#include "config.h"

#include <stdlib.h>

#include "free-list.h"

void *cucap_i_free_list_take(struct cucap_free_list *l)
{
    void *p = NULL;

    pthread_mutex_lock(&l->lock);
    if (l->count > 0)
        p = l->items[--l->count];
    pthread_mutex_unlock(&l->lock);
    return p;
}

int cucap_i_free_list_give(struct cucap_free_list *l, void *p)
{
    int kept = 0;

    pthread_mutex_lock(&l->lock);
    if (l->count < CUCAP_FREE_LIST_MAX) {
        l->items[l->count++] = p;
        kept = 1;
    }
    pthread_mutex_unlock(&l->lock);
    return kept;
}

void cucap_i_free_list_drain(struct cucap_free_list *l)
{
    void *p;

    while ((p = cucap_i_free_list_take(l)) != NULL)
        free(p);
}
