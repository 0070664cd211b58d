/* Copies of a launch's values through pinned memory of the library's
 * (staging.c), for values too large for the driver to take from the
 * caller's pageable memory at the call.  Internal. */
#ifndef CUCAP_I_STAGING_H
#define CUCAP_I_STAGING_H

#include <stddef.h>

#include "cucapture.h"
#include "context-hold.h"

/* Up to this size the driver takes a pageable host-to-device copy's
 * values at the call without waiting for the stream (CUDA's documents);
 * above it, it may wait for the work queued before the copy (measured:
 * the third such copy behind held work waited, whatever its size). */
#define CUCAP_I_PAGEABLE_COPY_MAX ((size_t)65536)

struct cucap_staging;

/* The pinned buffers one object's copies go through, oldest copy first. */
struct cucap_staging_ring {
    struct cucap_staging *oldest, *newest;
};

/* size bytes from values into dst on s: up to CUCAP_I_PAGEABLE_COPY_MAX
 * straight from values; above, into a pinned buffer of the ring whose
 * last copy is done (or one more, from the library's idle buffers or a
 * new allocation in relaxed mode), then from it on s, which must not be
 * capturing (STREAM_CAPTURE_UNSUPPORTED).  The caller may change values as
 * soon as this returns; nothing waits for the GPU.  The caller makes
 * hold's context current and serializes the ring's copies in an order the
 * GPU keeps (each after the one before). */
CUresult cucap_i_staging_copy(struct cucap_staging_ring *ring, struct ctx_hold *hold, CUdeviceptr dst,
                              const void *values, size_t size, CUstream s, const char *caller, cucap_error **err);
/* The ring's buffers to the library's idle ones, each reused once its last
 * copy is done; the ring is empty after. */
void cucap_i_staging_ring_give_back(struct cucap_staging_ring *ring);
/* The idle buffers whose last copy is done freed (cucap_release_cached);
 * failures go to the warning handler. */
void cucap_i_staging_drain(void);

#endif
