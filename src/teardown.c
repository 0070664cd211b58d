/* cucap_release_cached: everything the library keeps for reuse, given
 * back at once.  Above every object that keeps something. */
#include "config.h"

#include "builder-internal.h"
#include "builder-object.h"
#include "context-hold.h"
#include "deferred-destroy.h"
#include "device-table.h"
#include "driver.h"
#include "eager-run.h"
#include "hand-back.h"
#include "capture.h"
#include "params.h"
#include "error.h"
#include "pool-internal.h"
#include "reaper.h"
#include "stream-cache.h"
#include "staging.h"

static void drain_all(void)
{
    cucap_i_builder_kept_drain();   /* first: they hold streams and contexts */
    cucap_i_eager_streams_drain();
    cucap_i_pool_device_pools_drain();   /* they hold contexts, and their pools memory */
    cucap_i_staging_drain();   /* they hold contexts */
    cucap_i_ctx_holds_drain();
    cucap_i_builder_free_lists_drain();
    cucap_i_capture_free_list_drain();
    cucap_i_pool_free_list_drain();
    cucap_i_stream_cache_drain();
    cucap_i_hand_back_drain();   /* words from the blocks' pools */
    cucap_i_params_pools_drain();
}

void cucap_release_cached(void)
{
    int stopped, pass = 0;

    if (!cucap_i_driver_loaded())
        return;   /* nothing was ever kept */
    /* the frees due run here, none beside the drains: a program's free
     * may call the library, which then keeps things again, so the drains
     * follow it, and run again after frees that the drains let go of */
    stopped = cucap_i_reaper_stop();
    do {
        cucap_i_deferred_destroys_sweep("cucap_release_cached");   /* those whose launches are done */
        (void)cucap_i_reaper_run_queued();
        drain_all();
    } while (cucap_i_reaper_run_queued() && ++pass < 4);
    cucap_i_device_table_free();   /* emptied by the drains above */
    if (stopped)
        cucap_i_reaper_resume();
}
