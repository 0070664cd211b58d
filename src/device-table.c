/* The per-device table (device-table.h). */
#include "config.h"

#include <stdlib.h>

#include "device-table.h"
#include "driver.h"

static _Atomic(struct cucap_device_entry *) table;
static atomic_int entries;

static struct cucap_device_entry *make_table(void)
{
    struct cucap_device_entry *made, *none = NULL;
    int count = cucap_i_device_count();

    if (count <= 0 || !(made = calloc((size_t)count, sizeof *made)))
        return NULL;
    atomic_store_explicit(&entries, count, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&table, &none, made, memory_order_acq_rel, memory_order_acquire)) {
        free(made);
        return none;
    }
    return made;
}

struct cucap_device_entry *cucap_i_device_entry(CUdevice dev)
{
    struct cucap_device_entry *t = atomic_load_explicit(&table, memory_order_acquire);

    if (!t && !(t = make_table()))
        return NULL;
    return dev >= 0 && dev < atomic_load_explicit(&entries, memory_order_relaxed) ? &t[dev] : NULL;
}

int cucap_i_device_entries(void)
{
    return atomic_load_explicit(&table, memory_order_acquire) ? atomic_load_explicit(&entries, memory_order_relaxed)
                                                              : 0;
}

void cucap_i_device_table_free(void)
{
    free(atomic_exchange_explicit(&table, NULL, memory_order_acq_rel));
    atomic_store_explicit(&entries, 0, memory_order_relaxed);
}
