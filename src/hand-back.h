/* A run's stream handed the work of one of the library's streams back
 * (hand-back.c).  Internal. */
#ifndef CUCAP_I_HAND_BACK_H
#define CUCAP_I_HAND_BACK_H

#include "cucapture.h"
#include "context-hold.h"

/* s (the caller's stream, of hold's context) waits for the work queued on
 * from (the library's) so far, ev recorded on from first when given; the
 * host does not wait.  A non-blocking stream waits by an event (ev, or a
 * fresh one).  The per-thread, legacy and blocking streams wait for a
 * value that from writes behind its work instead: a thread whose
 * per-thread stream waits by an event, or behind the legacy stream, for
 * stream-ordered allocations still in flight hangs in the driver when it
 * exits (doc/driver-facts.md), and from's work may allocate.  0, or the
 * driver's error. */
CUresult cucap_i_hand_back(struct ctx_hold *hold, CUstream s, CUstream from, CUevent ev, const char *caller);
/* The words given back to the parameter blocks' pools (cucap_release_cached,
 * before those pools go). */
void cucap_i_hand_back_drain(void);

#endif
