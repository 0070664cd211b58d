/* A builder's memory: one by one, a split's forks in one slab, kept for
 * reuse (builder-memory.c).  Internal. */
#ifndef CUCAP_I_BUILDER_MEMORY_H
#define CUCAP_I_BUILDER_MEMORY_H

#include <stddef.h>

#include "builder-object.h"

cucap_builder *cucap_i_builder_new(cucap_builder_kind kind, cucap_builder_state state, CUstream s, int owns,
                                   struct ctx_hold *ctx);
/* The forks of one split allocated together: take builder i of the
 * slab (its reference to ctx is the caller's to add, for all at once);
 * done returns the ones not taken.  Every builder, of a slab or
 * not, is freed on its own by cucap_i_builder_free (a slab with its last
 * builder). */
struct builder_slab *cucap_i_builder_slab_new(size_t count);
cucap_builder *cucap_i_builder_slab_take(struct builder_slab *slab, size_t i, cucap_builder_kind kind,
                                         cucap_builder_state state, CUstream s, int owns, struct ctx_hold *ctx);
void cucap_i_builder_slab_done(struct builder_slab *slab, size_t taken);
void cucap_i_builder_free(cucap_builder *b);
/* Free the builders and slabs kept for reuse (cucap_release_cached). */
void cucap_i_builder_free_lists_drain(void);

#endif
