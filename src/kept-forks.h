/* A primary builder's kept forks (kept-forks.c): the forks of
 * cucap_builder_split_kept, which stay the builder's from one capture to
 * the next with their streams and context, as well as the caller's
 * until it destroys them.  The builder's user calls these.  Internal. */
#ifndef CUCAPTURE_KEPT_FORKS_H
#define CUCAPTURE_KEPT_FORKS_H

#include <stddef.h>

#include "cucapture.h"

/* Up to n of b's kept forks that may be split into b's capture: CLOSED,
 * not split in this capture already, still the caller's (those the caller
 * destroyed leave the set).  Written to out; how many.  Under the graph
 * lock of b's capture. */
size_t cucap_i_kept_take(cucap_builder *b, size_t n, cucap_builder **out);
/* A new kept fork of b: CLOSED, b's context, no stream yet; NULL when out
 * of memory. */
cucap_builder *cucap_i_kept_new(cucap_builder *b);
/* A split hands kept fork f out: the caller holds it from now on, until
 * it destroys it. */
void cucap_i_kept_handed_out(cucap_builder *f);
/* b lets go of its kept forks (b is closed, or kept for another create):
 * each is freed once the caller destroyed it too (one never handed out
 * at once, with its stream and context). */
void cucap_i_kept_let_go_all(cucap_builder *b, const char *caller);
/* The caller destroys kept fork f, which is closed: its stream goes back
 * (to the cache when in no capture, destroyed otherwise, which is legal
 * in a capture), its context reference goes, and f is freed once its
 * builder let go too. */
void cucap_i_kept_fork_destroy(cucap_builder *f, const char *caller);

#endif
