/* A lock that one thread, its owner, may take and give back without an
 * atomic read-modify-write: a plain store and a load each way.  Anybody
 * else takes the lock it stands on, a sleep lock (sleep-lock.h: held
 * across driver calls) or a spin lock (spin-lock.h: short sections), and
 * revokes the owner's way first, once: it marks the lock revoked, makes
 * every running thread of the process pass a full memory barrier
 * (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED, which stands for the
 * fence the owner does not make), waits until the owner is out, and from
 * then on everybody, the owner too, takes the lock below.
 *
 * A revoke costs a system call that interrupts the process's running
 * threads (1.4 us alone, 26 us beside one busy thread on a virtual
 * machine), so a lock is given an owner only where one thread is
 * expected to take it alone, and a revoked lock is never given an owner
 * again.  Without membarrier (not Linux, a kernel before 4.14, a sandbox
 * that refuses it) no lock has an owner.
 *
 * What it buys (bench/RESULTS.md, "What each mechanism buys"): without
 * owners, the update loop (a builder per capture, K = 2) ran 1.058 times
 * the hand-written loop where it runs 1.048, and the capture phase
 * (K = 2) 1.400 times where it runs 1.333 (H200, three runs each, ranges
 * disjoint): about 0.06 us a capture.
 *
 * Not recursive.  Internal. */
#ifndef CUCAPTURE_OWNER_LOCK_H
#define CUCAPTURE_OWNER_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sleep-lock.h"
#include "spin-lock.h"

enum { CUCAP_OWNER_KEPT, CUCAP_OWNER_REVOKING, CUCAP_OWNER_REVOKED };

struct cucap_owner_lock {
    union {
        struct cucap_sleep_lock sleep;
        struct cucap_spin_lock spin;
    } below;                         /* everybody's but the owner's while it keeps its way */
    unsigned char spins;             /* below is the spin lock */
    unsigned char held_by_owner;     /* the holder's: how it took it */
    atomic_int owner_inside;         /* the owner holds it its own way (a futex word) */
    atomic_int revoked;              /* CUCAP_OWNER_KEPT, _REVOKING or _REVOKED */
    atomic_uintptr_t owner;          /* the owning thread (pthread_self), 0 for none */
};

/* spins: stand on a spin lock rather than a sleep lock. */
void cucap_i_owner_lock_init(struct cucap_owner_lock *l, int spins);

/* Whether locks can have owners in this process (membarrier registered). */
int cucap_i_owner_lock_possible(void);

/* Give l to self, unless it is self's already, was ever revoked, or owners
 * are not possible.  The caller does not hold l; whoever else takes l
 * from then on revokes. */
void cucap_i_owner_lock_give(struct cucap_owner_lock *l, uintptr_t self);

/* Whether l ever was revoked. */
int cucap_i_owner_lock_was_revoked(const struct cucap_owner_lock *l);

/* The slow ways, out of line. */
void cucap_i_owner_lock_take_below(struct cucap_owner_lock *l, uintptr_t self);
void cucap_i_owner_lock_step_out(struct cucap_owner_lock *l);

static inline void cucap_i_owner_unlock_below(struct cucap_owner_lock *l)
{
    if (l->spins)
        cucap_i_spin_unlock(&l->below.spin);
    else
        cucap_i_sleep_unlock(&l->below.sleep);
}

/* self: the calling thread (pthread_self), or 0 to have it asked only
 * when l has an owner. */
static inline void cucap_i_owner_lock(struct cucap_owner_lock *l, uintptr_t self)
{
    uintptr_t owner = atomic_load_explicit(&l->owner, memory_order_relaxed);

    if (owner != 0) {
        if (!self)
            self = (uintptr_t)pthread_self();
        if (owner == self) {
            atomic_store_explicit(&l->owner_inside, 1, memory_order_relaxed);
            /* a revoker's membarrier orders this store before the load below */
            atomic_signal_fence(memory_order_seq_cst);
            if (atomic_load_explicit(&l->revoked, memory_order_acquire) == CUCAP_OWNER_KEPT) {
                l->held_by_owner = 1;
                return;
            }
            cucap_i_owner_lock_step_out(l);
        }
    }
    cucap_i_owner_lock_take_below(l, self);
    l->held_by_owner = 0;
}

static inline void cucap_i_owner_unlock(struct cucap_owner_lock *l)
{
    if (!l->held_by_owner) {
        cucap_i_owner_unlock_below(l);
        return;
    }
    atomic_store_explicit(&l->owner_inside, 0, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&l->revoked, memory_order_relaxed) != CUCAP_OWNER_KEPT)
        cucap_i_owner_lock_step_out(l);   /* a revoker may sleep on owner_inside */
}

#endif
