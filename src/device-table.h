/* What the library keeps per device, in one table with an entry for each
 * device the driver reports (device-table.c).  Internal. */
#ifndef CUCAP_I_DEVICE_TABLE_H
#define CUCAP_I_DEVICE_TABLE_H

#include <stdatomic.h>

#include "cucapture.h"
#include "free-list.h"

struct ctx_hold;

struct cucap_device_entry {
    /* the hold on the device's primary context shared by the library's
     * objects: the one retain the library makes of it (context-hold.c) */
    _Atomic(struct ctx_hold *) primary_hold;
    /* builders of cucap_builder_create destroyed between captures (builder.c) */
    struct cucap_free_list kept_builders;
    /* the parameter blocks' pool (params.c) */
    _Atomic(CUmemoryPool) block_pool;
    /* cucap_device_pool()'s pool, and whether the device has memory pools (pool.c) */
    _Atomic(cucap_pool *) device_pool;
    atomic_bool checked;
    /* the stream and event cache of the device's primary context (stream-cache.c) */
    _Atomic(void *) stream_cache;
};

/* The count of devices the driver reported when it was loaded (driver.c;
 * it does not change while the driver is). */
void cucap_i_device_table_size(int count);
/* dev's entry, made on first use, or NULL when dev is not a device the
 * driver reported (or out of memory: the callers then keep nothing for
 * dev). */
struct cucap_device_entry *cucap_i_device_entry(CUdevice dev);
/* The entries made so far (0 before the table's first use), for the
 * drains. */
int cucap_i_device_entries(void);
/* The table freed, its entries emptied by their owners' drains first
 * (cucap_release_cached, last); the next use makes it again. */
void cucap_i_device_table_free(void);

#endif
