/* Every builder's list of the forks split from it and still open, and
 * each fork's link back to its parent, for cucap_builder_join_forks.
 * A fork captures in its parent's hierarchy, and a parent lets go of its
 * forks before it leaves that hierarchy (reset, a body's new capture,
 * close): so the graph lock of that hierarchy, which the callers hold,
 * guards both ends of every link. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "builder-object.h"
#include "fork-links.h"

int cucap_i_fork_links_add(cucap_builder *b, cucap_builder *const *forks, size_t count)
{
    cucap_builder **grown;
    size_t cap, i;

    if (!b->forks) {
        b->forks = b->few_forks;
        b->fork_cap = sizeof b->few_forks / sizeof b->few_forks[0];
    }
    if (b->fork_count + count > b->fork_cap) {
        cap = b->fork_cap;
        while (cap < b->fork_count + count)
            cap *= 2;
        if (!(grown = b->forks == b->few_forks ? malloc(cap * sizeof *grown) : realloc(b->forks, cap * sizeof *grown)))
            return -1;
        if (b->forks == b->few_forks)
            memcpy(grown, b->few_forks, b->fork_count * sizeof *grown);
        b->forks = grown;
        b->fork_cap = cap;
    }
    for (i = 0; i < count; i++) {
        forks[i]->split_parent = b;
        forks[i]->split_index = b->fork_count;
        b->forks[b->fork_count++] = forks[i];
    }
    return 0;
}

/* b's list gone (its memory, when on the heap). */
static void drop_list(cucap_builder *b)
{
    if (b->forks && b->forks != b->few_forks)
        free(b->forks);
    b->forks = NULL;
    b->fork_count = b->fork_cap = 0;
}

/* b out of its parent's list (in O(1): the last one takes its place) and
 * its own forks orphaned. */
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
    if (b->split_parent || b->forks)
        unlink_fork(b);
}

void cucap_i_fork_links_release_all(cucap_builder *const *builders, size_t count, cucap_builder *skip)
{
    size_t i;

    for (i = 0; i < count; i++)
        if (builders[i] != skip)
            unlink_fork(builders[i]);
    if (skip && skip->fork_count == 0)   /* a root whose forks are all joined: no list left */
        drop_list(skip);
}

cucap_builder **cucap_i_fork_links_snapshot(cucap_builder *b, cucap_builder **room, size_t room_size, size_t *n)
{
    cucap_builder **all;
    size_t i;

    *n = b->fork_count;
    if ((all = *n + 1 <= room_size ? room : malloc((*n + 1) * sizeof *all)) != NULL) {
        all[0] = b;
        for (i = 0; i < *n; i++)
            all[i + 1] = b->forks[i];
    }
    return all;
}
