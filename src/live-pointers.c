/* The live pointers of every pool: STRIPES pointer sets, an address always
 * in the same one. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include "compiler.h"
#include "live-pointers.h"
#include "ptr-set.h"

#define STRIPES 16

#define STRIPE { PTHREAD_MUTEX_INITIALIZER, { NULL, 0, 0, 0, { { 0, NULL, 0 } } } }

static struct stripe {
    pthread_mutex_t lock;
    struct cucap_ptr_set set;
} stripes[STRIPES] = { STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE,
                       STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE, STRIPE };

static struct stripe *stripe_of(CUdeviceptr ptr)
{
    return &stripes[((uint64_t)ptr * 0x9e3779b97f4a7c15ull) >> 60];
}

int cucap_i_live_add(CUdeviceptr ptr, const void *owner, int graph)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = cucap_i_ptr_set_add(&s->set, ptr, owner, graph);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int cucap_i_live_remove(CUdeviceptr ptr, const void *owner)
{
    struct stripe *s = stripe_of(ptr);
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = cucap_i_ptr_set_remove(&s->set, ptr, owner);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void cucap_i_live_forget_owner(const void *owner)
{
    int i;

    for (i = 0; i < STRIPES; i++) {
        pthread_mutex_lock(&stripes[i].lock);
        cucap_i_ptr_set_remove_owner(&stripes[i].set, owner);
        pthread_mutex_unlock(&stripes[i].lock);
    }
}
