/* The graph lock of src/sleep-lock.h: one holder at a time, waiters that
 * sleep in the kernel while the holder keeps it across a slow call, and
 * wake when it is given back. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "sleep-lock.h"

enum { THREADS = 8, ROUNDS = 400 };

struct shared {
    struct cucap_sleep_lock lock;
    long counter;                    /* plain: only the holder touches it */
    atomic_int inside;               /* holders at once, which must stay 1 */
    atomic_int most_inside;
    atomic_long waited;              /* times a taker found the lock marked waited on */
};

static void hold_a_while(void)
{
    struct timespec t = { 0, 20000 };   /* 20 us: longer than the spinning, as a driver call can be */
    nanosleep(&t, NULL);
}

static void *worker(void *p)
{
    struct shared *s = p;
    int i, inside;

    for (i = 0; i < ROUNDS; i++) {
        cucap_i_sleep_lock(&s->lock);
        inside = atomic_fetch_add(&s->inside, 1) + 1;
        if (inside > atomic_load(&s->most_inside))
            atomic_store(&s->most_inside, inside);
        s->counter++;
        if (i % 16 == 0)
            hold_a_while();
        if (atomic_load_explicit(&s->lock.state, memory_order_relaxed) == CUCAP_SLEEP_WAITED_ON)
            atomic_fetch_add(&s->waited, 1);
        atomic_fetch_sub(&s->inside, 1);
        cucap_i_sleep_unlock(&s->lock);
    }
    return NULL;
}

Test(sleep_lock, one_holder_at_a_time_and_sleepers_wake, .timeout = 60)
{
    static struct shared s;
    pthread_t t[THREADS];
    int i;

    cucap_i_sleep_init(&s.lock);
    for (i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, worker, &s), 0);
    for (i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(s.counter, (long)THREADS * ROUNDS, "every round counted once: %ld", s.counter);
    cr_assert_eq(atomic_load(&s.most_inside), 1, "two holders at once");
    cr_assert_gt(atomic_load(&s.waited), 0, "no taker ever waited: the sleeping path did not run");
    cr_assert_eq(atomic_load(&s.lock.state), CUCAP_SLEEP_FREE, "given back");
}

Test(sleep_lock, an_uncontended_lock_is_never_marked_waited_on)
{
    struct cucap_sleep_lock l;
    int i;

    cucap_i_sleep_init(&l);
    for (i = 0; i < 1000; i++) {
        cucap_i_sleep_lock(&l);
        cr_assert_eq(atomic_load(&l.state), CUCAP_SLEEP_HELD);
        cucap_i_sleep_unlock(&l);
        cr_assert_eq(atomic_load(&l.state), CUCAP_SLEEP_FREE);
    }
}
