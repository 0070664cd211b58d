/* A lock for sections of a few dozen instructions that never call the
 * driver, wait or take another lock: taking it is one atomic exchange and
 * giving it back one store, where an uncontended mutex costs two atomic
 * operations (doc/driver-facts.md, "The cost floor").  A waiter spins,
 * then yields its processor.
 *
 * What it buys, with the sleep lock (bench/RESULTS.md, "What each
 * mechanism buys"): both made pthread mutexes, owner locks off in both
 * builds, the update loop with kept forks ran 1.044 times the
 * hand-written loop against 1.027, and with a builder per capture 1.065
 * against 1.058 (K = 2, H200, three runs each, ranges disjoint).
 * Internal. */
#ifndef CUCAPTURE_SPIN_LOCK_H
#define CUCAPTURE_SPIN_LOCK_H

#include <sched.h>
#include <stdatomic.h>

struct cucap_spin_lock {
    atomic_int held;
};

#define CUCAP_SPINS_BEFORE_YIELD 64

static inline void cucap_i_spin_init(struct cucap_spin_lock *l)
{
    atomic_init(&l->held, 0);
}

static inline void cucap_i_spin_lock(struct cucap_spin_lock *l)
{
    int spins = 0;

    while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        while (atomic_load_explicit(&l->held, memory_order_relaxed))
            if (++spins == CUCAP_SPINS_BEFORE_YIELD) {
                sched_yield();
                spins = 0;
            }
}

static inline void cucap_i_spin_unlock(struct cucap_spin_lock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif
