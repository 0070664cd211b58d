/* The registry of running captures (capture-registry.c): for each stream
 * taking part in a capture the library runs, that capture, so that a call
 * that only knows a stream (cucap_pool_alloc, cucap_pool_free, a launch
 * into a capturing stream) finds it.  An index only: it reads nothing of
 * the captures it lists.  Internal. */
#ifndef CUCAPTURE_CAPTURE_REGISTRY_H
#define CUCAPTURE_CAPTURE_REGISTRY_H

#include <stddef.h>

#include "cucapture.h"

struct cucap_capture;

/* One stream's entry, kept in the builder whose stream it is; only the
 * thread using that builder adds or removes it. */
struct cucap_registration {
    CUstream stream;
    struct cucap_capture *h;            /* the builder holds a reference to it while the entry is in */
    struct cucap_registration *prev, *next;
    int linked;
    int slot;                           /* its quick slot, or -1 in the list */
};

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_capture *h);
/* n entries at once (a split's forks), chained through next, each with
 * its stream set */
void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_capture *h);
/* Out of the registry; one that is not in is fine. */
void cucap_i_registry_remove(struct cucap_registration *r);
void cucap_i_registry_remove_all(struct cucap_registration *const *entries, size_t n);
/* The capture that stream s takes part in, or NULL: the first entry of s
 * for whose capture take(h), called under the registry's lock (where h
 * is sure to live: the entry's builder holds a reference), returns 1
 * (taking a reference); take returns 0 for a capture that is over, whose
 * entries stay until their builders let go. */
struct cucap_capture *cucap_i_registry_find(CUstream s, int (*take)(struct cucap_capture *h));
/* "the origin 0x... and forks 0x..., 0x..." for the registered streams of
 * h's capture, begun on origin. */
void cucap_i_registry_describe(const struct cucap_capture *h, CUstream origin, char *buf, size_t size);

#endif
