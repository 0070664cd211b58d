/* The slow ways of an owner lock (owner-lock.h): the revoke, the
 * owner's stepping out, and the process's membarrier registration. */
#include "config.h"

#include <limits.h>

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
    /* refused twice: the slower command that needs no registration; when
     * that fails too the process is a forked child whose owners did not
     * come along (the owner's thread is the only one that skips the
     * fence, and fork copies only the calling thread) */
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

static void wait_while_inside(atomic_int *inside)
{
    while (atomic_load_explicit(inside, memory_order_acquire))
        syscall(SYS_futex, (int *)inside, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

static void wake_waiters(atomic_int *inside)
{
    syscall(SYS_futex, (int *)inside, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
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

void cucap_i_owner_lock_init(struct cucap_owner_lock *l)
{
    cucap_i_sleep_init(&l->lock);
    atomic_init(&l->owner, 0);
    atomic_init(&l->owner_inside, 0);
    atomic_init(&l->revoked, CUCAP_OWNER_KEPT);
    l->held_by_owner = 0;
}

void cucap_i_owner_lock_give(struct cucap_owner_lock *l, uintptr_t self)
{
    if (atomic_load_explicit(&l->revoked, memory_order_relaxed) == CUCAP_OWNER_KEPT && cucap_i_owner_lock_possible())
        atomic_store_explicit(&l->owner, self, memory_order_release);
}

int cucap_i_owner_lock_was_revoked(const struct cucap_owner_lock *l)
{
    return atomic_load_explicit(&l->revoked, memory_order_acquire) != CUCAP_OWNER_KEPT;
}

void cucap_i_owner_lock_step_out(struct cucap_owner_lock *l)
{
    atomic_store_explicit(&l->owner_inside, 0, memory_order_release);
#ifdef CUCAP_HAVE_MEMBARRIER
    wake_waiters(&l->owner_inside);
#endif
}

/* Another thread's way in: the owner's way revoked first, unless that is
 * done or the lock never had an owner.  After the fence, either the
 * owner's next look at revoked sees it, or its mark of being inside (made
 * before that look) is seen here: the owner is never inside unseen. */
void cucap_i_owner_lock_take_revoking(struct cucap_owner_lock *l)
{
#ifdef CUCAP_HAVE_MEMBARRIER
    int seen = CUCAP_OWNER_KEPT;

    if (atomic_load_explicit(&l->owner, memory_order_acquire) != 0 &&
        atomic_load_explicit(&l->revoked, memory_order_acquire) != CUCAP_OWNER_REVOKED) {
        atomic_compare_exchange_strong_explicit(&l->revoked, &seen, CUCAP_OWNER_REVOKING, memory_order_seq_cst,
                                                memory_order_seq_cst);
        fence_every_thread();
        wait_while_inside(&l->owner_inside);
        atomic_store_explicit(&l->revoked, CUCAP_OWNER_REVOKED, memory_order_release);
    }
#endif
    cucap_i_sleep_lock(&l->lock);
}
