/* The live pointers of every pool: STRIPES pointer sets, an address always
 * in the same one. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>

#include "compiler.h"
#include "live-pointers.h"
#include "ptr-set.h"
#include "spin-lock.h"

#define STRIPES 16

static struct stripe {
    struct cucap_spin_lock lock;
    struct cucap_ptr_set set;
    char pad[64];                    /* keeps neighbouring stripes' locks off one cache line */
} stripes[STRIPES];

static struct stripe *stripe_of(CUdeviceptr ptr)
{
    return &stripes[((uint64_t)ptr * 0x9e3779b97f4a7c15ull) >> 60];
}

int cucap_i_live_add(CUdeviceptr ptr, const void *owner)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    cucap_i_spin_lock(&s->lock);
    rc = cucap_i_ptr_set_add(&s->set, ptr, owner);
    cucap_i_spin_unlock(&s->lock);
    return rc;
}

int cucap_i_live_remove(CUdeviceptr ptr, const void *owner)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    cucap_i_spin_lock(&s->lock);
    rc = cucap_i_ptr_set_remove(&s->set, ptr, owner);
    cucap_i_spin_unlock(&s->lock);
    return rc;
}

void cucap_i_live_forget_owner(const void *owner)
{
    int i;

    for (i = 0; i < STRIPES; i++) {
        cucap_i_spin_lock(&stripes[i].lock);
        cucap_i_ptr_set_remove_owner(&stripes[i].set, owner);
        cucap_i_spin_unlock(&stripes[i].lock);
    }
}
