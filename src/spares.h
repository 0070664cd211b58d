/* A few freed objects of one kind kept for reuse, without a lock: taking
 * or giving one is an atomic exchange on a slot.  For the objects every
 * capture makes and frees (hierarchies, builders, fork slabs), so that a
 * capture does not go through the heap each time.
 *
 * What it buys (bench/RESULTS.md, "What each mechanism buys"): with the
 * heap every time, the update loop with a builder per capture ran 1.194
 * times the hand-written loop where it runs 1.048 (K = 2), and
 * cucap_pool_open_default + close 2.22 times the raw calls where it runs
 * 1.73 (H200, three runs each).  Internal. */
#ifndef CUCAPTURE_SPARES_H
#define CUCAPTURE_SPARES_H

#define CUCAP_SPARE_SLOTS 4

struct cucap_spares {
    _Atomic(void *) slot[CUCAP_SPARE_SLOTS];
};

/* A kept object, or NULL. */
void *cucap_i_spare_take(struct cucap_spares *s);
/* Keep p (not NULL): 1, or 0 when every slot is taken (the caller frees it). */
int cucap_i_spare_give(struct cucap_spares *s, void *p);
/* Free what is kept (with cucap_i_drain_kept). */
void cucap_i_spares_drain(struct cucap_spares *s);

#endif
