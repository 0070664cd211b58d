/* A lock that may be held across driver calls: taken with one atomic
 * compare-exchange and given back with one atomic exchange when nobody
 * waits, where an uncontended pthread mutex costs the same two atomic
 * operations and about forty instructions more (doc/driver-facts.md, "The
 * cost floor").  A waiter spins briefly, then sleeps in the kernel until
 * the holder gives the lock back.  Not recursive.
 *
 * What it buys: see spin-lock.h (the two were measured together against
 * pthread mutexes).  Internal. */
#ifndef CUCAPTURE_SLEEP_LOCK_H
#define CUCAPTURE_SLEEP_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { CUCAP_SLEEP_FREE, CUCAP_SLEEP_HELD, CUCAP_SLEEP_WAITED_ON };

struct cucap_sleep_lock {
    atomic_int state;
};

#define CUCAP_SLEEP_SPINS 100

static inline void cucap_i_sleep_init(struct cucap_sleep_lock *l)
{
    atomic_init(&l->state, CUCAP_SLEEP_FREE);
}

/* Wait while the state is CUCAP_SLEEP_WAITED_ON (or return at once when it
 * changed already). */
static inline void cucap_i_sleep_wait(struct cucap_sleep_lock *l)
{
#ifdef __linux__
    syscall(SYS_futex, (int *)&l->state, FUTEX_WAIT_PRIVATE, CUCAP_SLEEP_WAITED_ON, NULL, NULL, 0);
#else
    (void)l;
    sched_yield();
#endif
}

static inline void cucap_i_sleep_wake_one(struct cucap_sleep_lock *l)
{
#ifdef __linux__
    syscall(SYS_futex, (int *)&l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)l;
#endif
}

static inline void cucap_i_sleep_lock(struct cucap_sleep_lock *l)
{
    int seen = CUCAP_SLEEP_FREE, spins;

    if (atomic_compare_exchange_strong_explicit(&l->state, &seen, CUCAP_SLEEP_HELD, memory_order_acquire,
                                                memory_order_relaxed))
        return;
    for (spins = 0; spins < CUCAP_SLEEP_SPINS; spins++) {
        seen = CUCAP_SLEEP_FREE;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) == CUCAP_SLEEP_FREE &&
            atomic_compare_exchange_weak_explicit(&l->state, &seen, CUCAP_SLEEP_HELD, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
    }
    /* from here on the lock is marked waited on, so that its holder wakes a sleeper */
    while (atomic_exchange_explicit(&l->state, CUCAP_SLEEP_WAITED_ON, memory_order_acquire) != CUCAP_SLEEP_FREE)
        cucap_i_sleep_wait(l);
}

static inline void cucap_i_sleep_unlock(struct cucap_sleep_lock *l)
{
    if (atomic_exchange_explicit(&l->state, CUCAP_SLEEP_FREE, memory_order_release) == CUCAP_SLEEP_WAITED_ON)
        cucap_i_sleep_wake_one(l);
}

#endif
