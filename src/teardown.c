/* cucap_release_cached: everything the library keeps for reuse, given
 * back at once.  Above every object that keeps something. */
#include "config.h"

#include "builder-internal.h"
#include "builder-memory.h"
#include "context-hold.h"
#include "deferred-destroy.h"
#include "device-table.h"
#include "driver.h"
#include "eager-run.h"
#include "hand-back.h"
#include "hierarchy.h"
#include "params.h"
#include "error.h"
#include "pool-internal.h"
#include "reaper.h"
#include "stream-cache.h"
#include "staging.h"

void cucap_release_cached(void)
{
    if (!cucap_i_driver_loaded())
        return;   /* nothing was ever kept */
    cucap_i_deferred_destroys_sweep("cucap_release_cached");   /* those whose launches are done */
    cucap_i_builder_kept_drain();   /* first: they hold streams and contexts */
    cucap_i_eager_streams_drain();
    cucap_i_pool_device_pools_drain();   /* they hold contexts, and their pools memory */
    cucap_i_staging_drain();   /* they hold contexts */
    cucap_i_ctx_holds_drain();
    cucap_i_builder_free_lists_drain();
    cucap_i_hier_free_list_drain();
    cucap_i_pool_free_list_drain();
    cucap_i_stream_cache_drain();
    cucap_i_hand_back_drain();   /* words from the blocks' pools */
    cucap_i_params_pools_drain();
    cucap_i_reaper_drain();   /* the frees due; the thread stops */
    cucap_i_device_table_free();   /* emptied by the drains above */
}
