/* Every builder's list of the forks split from it and still open, and
 * each fork's link back to its parent, for cucap_builder_join_forks. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "builder-internal.h"
#include "fork-links.h"

/* Guards every builder's list of open forks and their links back. */
static pthread_mutex_t fork_links_lock = PTHREAD_MUTEX_INITIALIZER;

int cucap_i_fork_links_add(cucap_builder *b, cucap_builder *const *forks, size_t count)
{
    cucap_builder **grown;
    size_t cap, i;
    int rc = 0;

    pthread_mutex_lock(&fork_links_lock);
    if (!b->forks) {
        b->forks = b->few_forks;
        b->fork_cap = sizeof b->few_forks / sizeof b->few_forks[0];
    }
    if (b->fork_count + count > b->fork_cap) {
        cap = b->fork_cap;
        while (cap < b->fork_count + count)
            cap *= 2;
        if ((grown = b->forks == b->few_forks ? malloc(cap * sizeof *grown)
                                              : realloc(b->forks, cap * sizeof *grown))) {
            if (b->forks == b->few_forks)
                memcpy(grown, b->few_forks, b->fork_count * sizeof *grown);
            b->forks = grown;
            b->fork_cap = cap;
        } else {
            rc = -1;
        }
    }
    for (i = 0; rc == 0 && i < count; i++) {
        forks[i]->split_parent = b;
        forks[i]->split_index = b->fork_count;
        b->forks[b->fork_count++] = forks[i];
    }
    pthread_mutex_unlock(&fork_links_lock);
    return rc;
}

/* Under fork_links_lock: b's list gone (its memory, when on the heap). */
static void drop_list(cucap_builder *b)
{
    if (b->forks != b->few_forks)
        free(b->forks);
    b->forks = NULL;
    b->fork_count = b->fork_cap = 0;
}

/* Under fork_links_lock: b out of its parent's list (in O(1): the last
 * one takes its place) and its own forks orphaned. */
static void unlink_fork(cucap_builder *b)
{
    size_t i;

    if (b->split_parent) {
        cucap_builder *p = b->split_parent, *last = p->forks[--p->fork_count];
        p->forks[b->split_index] = last;
        last->split_index = b->split_index;
        b->split_parent = NULL;
    }
    for (i = 0; i < b->fork_count; i++)
        b->forks[i]->split_parent = NULL;
    drop_list(b);
}

void cucap_i_fork_links_release(cucap_builder *b)
{
    /* only b's own user makes or frees b's list, and only forks have a
     * parent: a builder that is not a fork and has no list has no link */
    if (b->kind != CUCAP_BUILDER_FORKED && !b->forks)
        return;
    pthread_mutex_lock(&fork_links_lock);
    unlink_fork(b);
    pthread_mutex_unlock(&fork_links_lock);
}

void cucap_i_fork_links_release_all(cucap_builder *const *builders, size_t count, cucap_builder *skip)
{
    size_t i;

    pthread_mutex_lock(&fork_links_lock);
    for (i = 0; i < count; i++)
        if (builders[i] != skip)
            unlink_fork(builders[i]);
    if (skip && skip->fork_count == 0)   /* a root whose forks are all joined: no list left */
        drop_list(skip);
    pthread_mutex_unlock(&fork_links_lock);
}

cucap_builder **cucap_i_fork_links_snapshot(cucap_builder *b, cucap_builder **room, size_t room_size, size_t *n)
{
    cucap_builder **all;
    size_t i;

    pthread_mutex_lock(&fork_links_lock);
    *n = b->fork_count;
    if ((all = *n + 1 <= room_size ? room : malloc((*n + 1) * sizeof *all)) != NULL) {
        all[0] = b;
        for (i = 0; i < *n; i++)
            all[i + 1] = b->forks[i];
    }
    pthread_mutex_unlock(&fork_links_lock);
    return all;
}
