/* The live pointers of every pool: STRIPES pointer sets, an address always
 * in the same one. */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "live-pointers.h"
#include "ptr-set.h"

#define STRIPES 16
#define SPINS_BEFORE_YIELD 64

static struct stripe {
    atomic_int locked;
    struct cucap_ptr_set set;
    char pad[64];                    /* keeps neighbouring stripes' locks off one cache line */
} stripes[STRIPES];

static struct stripe *stripe_of(CUdeviceptr ptr)
{
    return &stripes[((uint64_t)ptr * 0x9e3779b97f4a7c15ull) >> 60];
}

static void lock(struct stripe *s)
{
    int spins = 0;

    while (atomic_exchange_explicit(&s->locked, 1, memory_order_acquire))
        while (atomic_load_explicit(&s->locked, memory_order_relaxed))
            if (++spins == SPINS_BEFORE_YIELD) {
                sched_yield();
                spins = 0;
            }
}

static void unlock(struct stripe *s)
{
    atomic_store_explicit(&s->locked, 0, memory_order_release);
}

int cucap_i_live_add(CUdeviceptr ptr, const void *owner)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    lock(s);
    rc = cucap_i_ptr_set_add(&s->set, ptr, owner);
    unlock(s);
    return rc;
}

int cucap_i_live_remove(CUdeviceptr ptr, const void *owner)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    lock(s);
    rc = cucap_i_ptr_set_remove(&s->set, ptr, owner);
    unlock(s);
    return rc;
}

void cucap_i_live_forget_owner(const void *owner)
{
    int i;

    for (i = 0; i < STRIPES; i++) {
        lock(&stripes[i]);
        cucap_i_ptr_set_remove_owner(&stripes[i].set, owner);
        unlock(&stripes[i]);
    }
}
