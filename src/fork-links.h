/* Each builder's list of its open forks, for cucap_builder_join_forks
 * (fork-links.c).  Every call is made under the graph lock of the
 * hierarchy the builders capture in (cucap_i_hier_lock).  Internal. */
#ifndef CUCAP_I_FORK_LINKS_H
#define CUCAP_I_FORK_LINKS_H

#include <stddef.h>

#include "cucapture.h"

/* Count new forks into b's list; -1, adding none, when out of memory. */
int cucap_i_fork_links_add(cucap_builder *b, cucap_builder *const *forks, size_t count);
/* b and its open forks (*n of them) in room when room_size is enough,
 * else in a new array (free it when it is not room); NULL when out of
 * memory. */
cucap_builder **cucap_i_fork_links_snapshot(cucap_builder *b, cucap_builder **room, size_t room_size, size_t *n);
/* Forget b in its split parent's list and its own forks' links (b is
 * being closed). */
void cucap_i_fork_links_release(cucap_builder *b);
/* cucap_i_fork_links_release for every builder but skip; skip (the
 * join's root, in its user's hands) lets go of its list once no fork is
 * on it. */
void cucap_i_fork_links_release_all(cucap_builder *const *builders, size_t count, cucap_builder *skip);

#endif
