/* The registry of running captures (capture-registry.c): for each stream
 * taking part in a capture the library runs, that capture's hierarchy, so
 * that a call that only knows a stream (cucap_pool_alloc, cucap_pool_free,
 * a failed driver call) finds its capture.  Internal. */
#ifndef CUCAPTURE_CAPTURE_REGISTRY_H
#define CUCAPTURE_CAPTURE_REGISTRY_H

#include <stddef.h>

#include "cucapture.h"

struct cucap_hier;

/* One stream's entry, kept in the builder whose stream it is; only the
 * thread using that builder adds or removes it. */
struct cucap_registration {
    CUstream stream;
    struct cucap_hier *h;            /* the builder holds a reference to it while the entry is in */
    struct cucap_registration *prev, *next;
    int linked;
};

void cucap_i_registry_add(struct cucap_registration *r, CUstream s, struct cucap_hier *h);
/* n entries at once (a split's forks), chained through next, each with
 * its stream set */
void cucap_i_registry_add_chain(struct cucap_registration *first, size_t n, struct cucap_hier *h);
/* Out of the registry; one that is not in is fine. */
void cucap_i_registry_remove(struct cucap_registration *r);
void cucap_i_registry_remove_all(struct cucap_registration *const *entries, size_t n);

/* A driver call on stream s of h's capture failed with rc: report it in
 * *err, as STREAM_CAPTURE_INVALIDATED (the driver's code in the message)
 * when the capture is found invalidated, and record it on h.  consequence,
 * if not NULL, ends the message.  Returns the code reported. */
CUresult cucap_i_fail_in_capture(struct cucap_hier *h, CUstream s, CUresult rc, const char *caller, const char *call,
                                 const char *consequence, cucap_error **err);
/* Record a capture error of call on h's capture (the first one is kept
 * for the note of its end, with the capture's streams when the call found
 * it invalidated); other codes and h NULL are ignored. */
void cucap_i_capture_failed(struct cucap_hier *h, const char *call, CUresult code);
/* The same for a call that knows only the stream: the first failure of
 * the capture it takes part in, if any, recorded. */
void cucap_i_capture_stream_failed(CUstream s, const char *call, CUresult code);
/* For a call that only knows a stream: the graph lock of the capture the
 * stream takes part in, referenced (NULL, locking nothing, for a stream
 * the library did not register). */
struct cucap_hier *cucap_i_capture_lock_stream(CUstream s);
void cucap_i_capture_unlock_stream(struct cucap_hier *h, const char *caller);

#endif
