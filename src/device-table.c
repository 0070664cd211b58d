/* The per-device table (device-table.h). */
#include "config.h"

#include <stdlib.h>

#include "device-table.h"

/* read together on every create: one cache line */
static _Alignas(16) struct {
    _Atomic(struct cucap_device_entry *) table;
    atomic_int entries;              /* the devices the driver reported */
} devices;

void cucap_i_device_table_size(int count)
{
    atomic_store_explicit(&devices.entries, count > 0 ? count : 0, memory_order_release);
}

static struct cucap_device_entry *make_table(void)
{
    struct cucap_device_entry *made, *none = NULL;
    int count = atomic_load_explicit(&devices.entries, memory_order_acquire);

    if (count <= 0 || !(made = calloc((size_t)count, sizeof *made)))
        return NULL;
    if (!atomic_compare_exchange_strong_explicit(&devices.table, &none, made, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(made);
        return none;
    }
    return made;
}

struct cucap_device_entry *cucap_i_device_entry(CUdevice dev)
{
    struct cucap_device_entry *t = atomic_load_explicit(&devices.table, memory_order_acquire);

    if (dev < 0 || dev >= atomic_load_explicit(&devices.entries, memory_order_acquire))
        return NULL;
    return t || (t = make_table()) ? &t[dev] : NULL;
}

int cucap_i_device_entries(void)
{
    return atomic_load_explicit(&devices.table, memory_order_acquire)
               ? atomic_load_explicit(&devices.entries, memory_order_acquire)
               : 0;
}

void cucap_i_device_table_free(void)
{
    free(atomic_exchange_explicit(&devices.table, NULL, memory_order_acq_rel));
}
