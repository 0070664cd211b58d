/* A free list: a few freed objects of one kind kept for the next
 * allocation of that kind, so that the objects every capture makes and
 * frees (captures, graph owners, builders, fork slabs, pools) do not go through the
 * heap each time.  It has CUCAP_FREE_LIST_MAX shared slots, each empty or
 * holding one object; taking or giving is one atomic exchange on a slot,
 * so no lock is needed and no object is handed to two takers.  A list of
 * plain memory (one of enum cucap_per_thread_list's) is taken from and
 * given to with the _own calls, which keep a few objects in each thread
 * that gave them and take them back without an atomic instruction; a
 * thread's objects go to the shared slots, or are freed, when it exits.
 * cucap_release_cached empties both.  Internal. */
#ifndef CUCAPTURE_FREE_LIST_H
#define CUCAPTURE_FREE_LIST_H

#include <stdatomic.h>
#include <stddef.h>

#define CUCAP_FREE_LIST_MAX 4

/* The lists that also keep objects in each thread: one static list each. */
enum cucap_per_thread_list {
    CUCAP_PER_THREAD_CAPTURES,
    CUCAP_PER_THREAD_OWNERS,
    CUCAP_PER_THREAD_SLABS,
    CUCAP_PER_THREAD_BUILDERS,
    CUCAP_PER_THREAD_LISTS
};

struct cucap_free_list {
    void (*free_object)(void *);     /* frees one object; NULL: free() */
    _Atomic(void *) slot[CUCAP_FREE_LIST_MAX];
};

#define CUCAP_FREE_LIST_INIT { NULL, { NULL } }
/* A list whose objects free_object frees. */
#define CUCAP_FREE_LIST_FREEING(free_object) { (free_object), { NULL } }

/* Zeroed memory for an object of a free list, starting a cache line, so
 * that its first fields share the fewest lines; free() frees it.  NULL
 * when out of memory. */
void *cucap_i_aligned_calloc(size_t size);
/* An object given back earlier, or NULL. */
void *cucap_i_free_list_take(struct cucap_free_list *l);
/* Keep p (not NULL): 1, or 0 when the list is full (the caller frees it). */
int cucap_i_free_list_give(struct cucap_free_list *l, void *p);
/* The same for l, the list of kind `which`, first from or to the calling
 * thread's own objects of that kind; `which` is a constant where it is
 * called, so a thread's own objects are reached without reading *l. */
void *cucap_i_free_list_take_own(struct cucap_free_list *l, enum cucap_per_thread_list which);
int cucap_i_free_list_give_own(struct cucap_free_list *l, enum cucap_per_thread_list which, void *p);
/* Free every object kept, in every thread (cucap_release_cached: no other
 * thread is in the library). */
void cucap_i_free_list_drain(struct cucap_free_list *l);

#endif
