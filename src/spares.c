/* Kept objects: a slot holds one or NULL. */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "compiler.h"
#include "spares.h"

void *cucap_i_spare_take(struct cucap_spares *s)
{
    void *p;
    int i;

    for (i = 0; i < CUCAP_SPARE_SLOTS; i++)
        if (atomic_load_explicit(&s->slot[i], memory_order_relaxed) &&
            (p = atomic_exchange_explicit(&s->slot[i], NULL, memory_order_acquire)) != NULL)
            return p;
    return NULL;
}

int cucap_i_spare_give(struct cucap_spares *s, void *p)
{
    int i;

    for (i = 0; i < CUCAP_SPARE_SLOTS; i++) {
        void *empty = NULL;
        if (!atomic_load_explicit(&s->slot[i], memory_order_relaxed) &&
            atomic_compare_exchange_strong_explicit(&s->slot[i], &empty, p, memory_order_release,
                                                    memory_order_relaxed))
            return 1;
    }
    return 0;
}

void cucap_i_spares_drain(struct cucap_spares *s)
{
    int i;

    for (i = 0; i < CUCAP_SPARE_SLOTS; i++)
        free(atomic_exchange_explicit(&s->slot[i], NULL, memory_order_acquire));
}
