/* What the library keeps per device, in one table sized by the devices the
 * driver reports (device-table.c).  Internal. */
#ifndef CUCAP_I_DEVICE_TABLE_H
#define CUCAP_I_DEVICE_TABLE_H

#include <stdatomic.h>

#include "cucapture.h"
#include "free-list.h"

struct cucap_device_entry {
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

/* dev's entry, or NULL when dev is not a device of the driver's (or the
 * table could not be made: the callers then keep nothing for dev).  The
 * table has an entry for each device the driver saw when it was loaded
 * (the count does not change while it is). */
struct cucap_device_entry *cucap_i_device_entry(CUdevice dev);
/* The devices of the table (0 before its first use), for the drains. */
int cucap_i_device_entries(void);
/* The table freed, its entries emptied by their owners' drains first
 * (cucap_release_cached, last). */
void cucap_i_device_table_free(void);

#endif
