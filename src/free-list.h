/* A free list: a few freed objects of one kind kept for the next
 * allocation of that kind, so that the objects every capture makes and
 * frees (hierarchies, builders, fork slabs, pools) do not go through the
 * heap each time.  A list keeps at most CUCAP_FREE_LIST_MAX objects and
 * never more than it was given; cucap_release_cached empties it.
 * Internal. */
#ifndef CUCAPTURE_FREE_LIST_H
#define CUCAPTURE_FREE_LIST_H

#include <pthread.h>
#include <stddef.h>

#define CUCAP_FREE_LIST_MAX 4

struct cucap_free_list {
    pthread_mutex_t lock;
    void *items[CUCAP_FREE_LIST_MAX];
    size_t count;
};

#define CUCAP_FREE_LIST_INIT { PTHREAD_MUTEX_INITIALIZER, { NULL }, 0 }

/* An object given back earlier, or NULL. */
void *cucap_i_free_list_take(struct cucap_free_list *l);
/* Keep p (not NULL): 1, or 0 when the list is full (the caller frees it). */
int cucap_i_free_list_give(struct cucap_free_list *l, void *p);
/* free() every object kept. */
void cucap_i_free_list_drain(struct cucap_free_list *l);

#endif
