/* A free list: a few freed objects of one kind kept for the next
 * allocation of that kind, so that the objects every capture makes and
 * frees (captures, graph owners, builders, fork slabs, pools) do not go through the
 * heap each time.  It has CUCAP_FREE_LIST_MAX slots, each empty or
 * holding one object; taking or giving is one atomic exchange on a slot,
 * so no lock is needed and no object is handed to two takers.
 * cucap_release_cached empties it.  Internal. */
#ifndef CUCAPTURE_FREE_LIST_H
#define CUCAPTURE_FREE_LIST_H

#include <stdatomic.h>

#define CUCAP_FREE_LIST_MAX 4

struct cucap_free_list {
    _Atomic(void *) slot[CUCAP_FREE_LIST_MAX];
};

#define CUCAP_FREE_LIST_INIT { { NULL } }

/* An object given back earlier, or NULL. */
void *cucap_i_free_list_take(struct cucap_free_list *l);
/* Keep p (not NULL): 1, or 0 when the list is full (the caller frees it). */
int cucap_i_free_list_give(struct cucap_free_list *l, void *p);
/* free() every object kept. */
void cucap_i_free_list_drain(struct cucap_free_list *l);

#endif
