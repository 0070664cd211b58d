/* The owner lock of src/owner-lock.h: its owner takes it without the
 * sleep lock until another thread revokes that, one holder at a time
 * whichever way each took it, and a revoked lock stays revoked. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "owner-lock.h"

enum { OTHERS = 6, ROUNDS = 300, OWNER_ALONE = 200 };

static void need_owners(void)
{
    if (!cucap_i_owner_lock_possible())
        cr_skip_test("membarrier(2) with MEMBARRIER_CMD_PRIVATE_EXPEDITED is not available to this process: every "
                     "owner lock is a plain sleep lock here, which test-sleep-lock covers");
}

static uintptr_t self(void)
{
    return (uintptr_t)pthread_self();
}

struct shared {
    struct cucap_owner_lock lock;
    long counter;                    /* plain: only the holder touches it */
    atomic_int inside;               /* holders at once, which must stay 1 */
    atomic_int most_inside;
    atomic_long owner_fast;          /* the owner's holds taken its own way */
    atomic_int go;                   /* the others may start */
    int owner_way_after_revoke;
};

static void hold(struct shared *s, int slow)
{
    int inside = atomic_fetch_add(&s->inside, 1) + 1;

    if (inside > atomic_load(&s->most_inside))
        atomic_store(&s->most_inside, inside);
    s->counter++;
    if (slow) {
        struct timespec t = { 0, 20000 };   /* 20 us: as long as a driver call can be */
        nanosleep(&t, NULL);
    }
    atomic_fetch_sub(&s->inside, 1);
}

static void *owner_thread(void *p)
{
    struct shared *s = p;
    int i;

    cucap_i_owner_lock_give(&s->lock, self());
    for (i = 0; i < OWNER_ALONE + ROUNDS; i++) {
        if (i == OWNER_ALONE)
            atomic_store(&s->go, 1);
        cucap_i_owner_lock(&s->lock, self());
        if (s->lock.held_by_owner)
            atomic_fetch_add(&s->owner_fast, 1);
        hold(s, i % 8 == 0);
        cucap_i_owner_unlock(&s->lock);
    }
    while (!cucap_i_owner_lock_was_revoked(&s->lock))   /* the others' first take revokes */
        sched_yield();
    cucap_i_owner_lock(&s->lock, self());
    s->owner_way_after_revoke = s->lock.held_by_owner;
    hold(s, 0);
    cucap_i_owner_unlock(&s->lock);
    return NULL;
}

static void *other_thread(void *p)
{
    struct shared *s = p;
    int i;

    while (!atomic_load(&s->go))
        sched_yield();
    for (i = 0; i < ROUNDS; i++) {
        cucap_i_owner_lock(&s->lock, self());
        cr_assert_eq(s->lock.held_by_owner, 0, "a thread that is not the owner took the owner's way");
        hold(s, i % 16 == 0);
        cucap_i_owner_unlock(&s->lock);
    }
    return NULL;
}

Test(owner_lock, the_owner_takes_it_without_the_sleep_lock_until_revoked)
{
    struct cucap_owner_lock l;
    int i;

    need_owners();
    cucap_i_owner_lock_init(&l, 0);
    cucap_i_owner_lock_give(&l, self());
    for (i = 0; i < 100; i++) {
        cucap_i_owner_lock(&l, self());
        cr_assert_eq(l.held_by_owner, 1);
        cr_assert_eq(atomic_load(&l.owner_inside), 1);
        cr_assert_eq(atomic_load(&l.below.sleep.state), CUCAP_SLEEP_FREE, "the owner went through the sleep lock");
        cucap_i_owner_unlock(&l);
        cr_assert_eq(atomic_load(&l.owner_inside), 0);
    }
    cr_assert_not(cucap_i_owner_lock_was_revoked(&l));
}

static void others_revoke_it_once_and_one_holds_it_at_a_time(int spins)
{
    static struct shared s;
    pthread_t owner, others[OTHERS];
    int i;

    need_owners();
    memset(&s, 0, sizeof s);
    cucap_i_owner_lock_init(&s.lock, spins);
    cr_assert_eq(pthread_create(&owner, NULL, owner_thread, &s), 0);
    for (i = 0; i < OTHERS; i++)
        cr_assert_eq(pthread_create(&others[i], NULL, other_thread, &s), 0);
    pthread_join(owner, NULL);
    for (i = 0; i < OTHERS; i++)
        pthread_join(others[i], NULL);
    cr_assert_eq(s.counter, (long)(OTHERS + 1) * ROUNDS + OWNER_ALONE + 1, "every hold counted once: %ld", s.counter);
    cr_assert_eq(atomic_load(&s.most_inside), 1, "two holders at once");
    cr_assert_geq(atomic_load(&s.owner_fast), OWNER_ALONE, "the owner never took its own way alone");
    cr_assert_eq(s.owner_way_after_revoke, 0, "the owner kept its way after the revoke");
    cr_assert(cucap_i_owner_lock_was_revoked(&s.lock));
    if (spins)
        cr_assert_eq(atomic_load(&s.lock.below.spin.held), 0, "given back");
    else
        cr_assert_eq(atomic_load(&s.lock.below.sleep.state), CUCAP_SLEEP_FREE, "given back");
    cr_assert_eq(atomic_load(&s.lock.owner_inside), 0);
}

Test(owner_lock, others_revoke_it_once_and_one_holds_it_at_a_time, .timeout = 60)
{
    others_revoke_it_once_and_one_holds_it_at_a_time(0);
}

Test(owner_lock, others_revoke_it_once_and_one_holds_it_at_a_time_over_a_spin_lock, .timeout = 60)
{
    others_revoke_it_once_and_one_holds_it_at_a_time(1);
}

/* A taker that found no owner holds the lock below; a give made then
 * waits for it, and the new owner's way starts after it. */
struct give_race {
    struct cucap_owner_lock lock;
    atomic_int taken, given;
    int overlapped;
};

static void *give_while_held(void *p)
{
    struct give_race *g = p;

    while (!atomic_load(&g->taken))
        sched_yield();
    cucap_i_owner_lock_give(&g->lock, self());
    atomic_store(&g->given, 1);
    cucap_i_owner_lock(&g->lock, self());
    cucap_i_owner_unlock(&g->lock);
    return NULL;
}

Test(owner_lock, a_give_waits_for_the_holder_that_found_no_owner, .timeout = 30)
{
    static struct give_race g;
    struct timespec t = { 0, 2000000 };
    pthread_t giver;

    need_owners();
    cucap_i_owner_lock_init(&g.lock, 1);
    cucap_i_owner_lock(&g.lock, self());
    cr_assert_eq(g.lock.held_by_owner, 0);
    cr_assert_eq(pthread_create(&giver, NULL, give_while_held, &g), 0);
    atomic_store(&g.taken, 1);
    nanosleep(&t, NULL);
    cr_assert_eq(atomic_load(&g.given), 0, "the owner was given the lock while another thread held it");
    cucap_i_owner_unlock(&g.lock);
    pthread_join(giver, NULL);
    cr_assert_eq(atomic_load(&g.given), 1);
    cr_assert_not(cucap_i_owner_lock_was_revoked(&g.lock));
}

static void *take_once(void *p)
{
    struct cucap_owner_lock *l = p;

    cucap_i_owner_lock(l, self());
    cucap_i_owner_unlock(l);
    return NULL;
}

Test(owner_lock, a_revoked_lock_is_never_given_again)
{
    struct cucap_owner_lock l;
    pthread_t t;

    need_owners();
    cucap_i_owner_lock_init(&l, 0);
    cucap_i_owner_lock_give(&l, self());
    cr_assert_eq(pthread_create(&t, NULL, take_once, &l), 0);
    pthread_join(t, NULL);
    cr_assert(cucap_i_owner_lock_was_revoked(&l));
    cucap_i_owner_lock_give(&l, self());
    cucap_i_owner_lock(&l, self());
    cr_assert_eq(l.held_by_owner, 0, "the owner's way came back after a revoke");
    cr_assert_eq(atomic_load(&l.below.sleep.state), CUCAP_SLEEP_HELD);
    cucap_i_owner_unlock(&l);
    cr_assert_eq(atomic_load(&l.below.sleep.state), CUCAP_SLEEP_FREE);
}

/* Given to one thread, then to another while nobody holds it (a reset
 * builder begun on another thread): no revoke, the new owner's way. */
Test(owner_lock, an_unrevoked_lock_changes_owner_without_a_revoke)
{
    struct cucap_owner_lock l;
    pthread_t t;

    need_owners();
    cucap_i_owner_lock_init(&l, 0);
    cucap_i_owner_lock_give(&l, 1);   /* a thread that is gone */
    cucap_i_owner_lock_give(&l, self());
    cucap_i_owner_lock(&l, self());
    cr_assert_eq(l.held_by_owner, 1);
    cucap_i_owner_unlock(&l);
    cr_assert_eq(pthread_create(&t, NULL, take_once, &l), 0);
    pthread_join(t, NULL);
    cr_assert(cucap_i_owner_lock_was_revoked(&l));
}

Test(owner_lock, without_an_owner_it_is_a_sleep_lock)
{
    struct cucap_owner_lock l;

    cucap_i_owner_lock_init(&l, 0);
    cucap_i_owner_lock(&l, self());
    cr_assert_eq(l.held_by_owner, 0);
    cr_assert_eq(atomic_load(&l.below.sleep.state), CUCAP_SLEEP_HELD);
    cucap_i_owner_unlock(&l);
    cr_assert_eq(atomic_load(&l.below.sleep.state), CUCAP_SLEEP_FREE);
    cr_assert_not(cucap_i_owner_lock_was_revoked(&l), "a lock without an owner has nothing to revoke");
}

/* A forked child (whose process may not be registered for membarrier)
 * takes a lock its parent gave to a thread that fork did not copy. */
static struct cucap_owner_lock forked_lock;

static void *own_forked_lock(void *p)
{
    (void)p;
    cucap_i_owner_lock_give(&forked_lock, self());
    cucap_i_owner_lock(&forked_lock, self());
    cucap_i_owner_unlock(&forked_lock);
    return NULL;
}

Test(owner_lock, a_forked_child_takes_a_lock_owned_by_a_thread_left_behind, .timeout = 30)
{
    pthread_t t;
    pid_t child;
    int status = 0;

    need_owners();
    cucap_i_owner_lock_init(&forked_lock, 0);
    cr_assert_eq(pthread_create(&t, NULL, own_forked_lock, NULL), 0);
    pthread_join(t, NULL);
    cr_assert_eq(forked_lock.held_by_owner, 1, "the owner took its own way");
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        cucap_i_owner_lock(&forked_lock, self());
        cucap_i_owner_unlock(&forked_lock);
        _exit(cucap_i_owner_lock_was_revoked(&forked_lock) ? 0 : 3);
    }
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's take: status %d", status);
}
