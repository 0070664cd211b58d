/* The slow ways of an owner lock (owner-lock.h): the lock below, the
 * revoke, the owner's stepping out, and the process's membarrier
 * registration. */
#include "config.h"

#include <limits.h>

#include "compiler.h"
#include "owner-lock.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(SYS_membarrier)
#define CUCAP_HAVE_MEMBARRIER 1
#endif

/* 0 not asked yet, 1 registered, -1 not possible */
static atomic_int possible;

#ifdef CUCAP_HAVE_MEMBARRIER
static int register_process(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* A full memory barrier in every running thread of the process.  A forked
 * child is not registered until it registers itself: then once more. */
static void fence_every_thread(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    if (register_process() && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    /* refused twice: the slower command that needs no registration.  When
     * that fails too, the process is a forked child whose owners did not
     * come along (only an owner skips the fence, and fork copies only the
     * calling thread), or a sandbox began refusing membarrier after the
     * registration, which nothing here can make safe */
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

static void wait_while_inside(atomic_int *inside)
{
    while (atomic_load_explicit(inside, memory_order_acquire))
        syscall(SYS_futex, (int *)inside, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}
#endif

int cucap_i_owner_lock_possible(void)
{
    int state = atomic_load_explicit(&possible, memory_order_acquire);

    if (state == 0) {
#ifdef CUCAP_HAVE_MEMBARRIER
        state = register_process() ? 1 : -1;
#else
        state = -1;
#endif
        atomic_store_explicit(&possible, state, memory_order_release);
    }
    return state > 0;
}

void cucap_i_owner_lock_init(struct cucap_owner_lock *l, int spins)
{
    l->spins = spins;
    if (spins)
        cucap_i_spin_init(&l->below.spin);
    else
        cucap_i_sleep_init(&l->below.sleep);
    l->held_by_owner = 0;
    atomic_init(&l->owner, 0);
    atomic_init(&l->owner_inside, 0);
    atomic_init(&l->revoked, CUCAP_OWNER_KEPT);
}

static void lock_below(struct cucap_owner_lock *l)
{
    if (l->spins)
        cucap_i_spin_lock(&l->below.spin);
    else
        cucap_i_sleep_lock(&l->below.sleep);
}

/* Under the lock below, so that a taker that found no owner holds it until
 * the owner can have one. */
void cucap_i_owner_lock_give(struct cucap_owner_lock *l, uintptr_t self)
{
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == self ||
        atomic_load_explicit(&l->revoked, memory_order_relaxed) != CUCAP_OWNER_KEPT || !cucap_i_owner_lock_possible())
        return;
    lock_below(l);
    atomic_store_explicit(&l->owner, self, memory_order_relaxed);
    cucap_i_owner_unlock_below(l);
}

int cucap_i_owner_lock_was_revoked(const struct cucap_owner_lock *l)
{
    return atomic_load_explicit(&l->revoked, memory_order_acquire) != CUCAP_OWNER_KEPT;
}

void cucap_i_owner_lock_step_out(struct cucap_owner_lock *l)
{
    atomic_store_explicit(&l->owner_inside, 0, memory_order_release);
#ifdef CUCAP_HAVE_MEMBARRIER
    syscall(SYS_futex, (int *)&l->owner_inside, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
}

/* The owner's way revoked, unless that is done: after the fence, either
 * the owner's next look at revoked sees it, or its mark of being inside
 * (made before that look) is seen here, so the owner is never inside
 * unseen. */
static void revoke_owner(struct cucap_owner_lock *l)
{
#ifdef CUCAP_HAVE_MEMBARRIER
    int seen = CUCAP_OWNER_KEPT;

    atomic_compare_exchange_strong_explicit(&l->revoked, &seen, CUCAP_OWNER_REVOKING, memory_order_seq_cst,
                                            memory_order_seq_cst);
    fence_every_thread();
    wait_while_inside(&l->owner_inside);
    atomic_store_explicit(&l->revoked, CUCAP_OWNER_REVOKED, memory_order_release);
#else
    (void)l;
#endif
}

/* The lock below, with the owner's way revoked when another thread has
 * it.  The owner is looked at once the lock below is held: a give is made
 * under it, so a taker that finds no owner there holds the lock before
 * any owner can take its way. */
void cucap_i_owner_lock_take_below(struct cucap_owner_lock *l, uintptr_t self)
{
    uintptr_t owner;

    lock_below(l);
    owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (owner == 0)
        return;
    if (!self)
        self = (uintptr_t)pthread_self();
    if (owner == self ||
        atomic_load_explicit(&l->revoked, memory_order_acquire) == CUCAP_OWNER_REVOKED)
        return;
    cucap_i_owner_unlock_below(l);
    revoke_owner(l);
    lock_below(l);
}
