/* Everything the library keeps for reuse, destroyed at once (the tests'
 * leak checks): above every object that keeps something. */
#include "config.h"

#include "builder-internal.h"
#include "context-hold.h"
#include "hierarchy.h"
#include "internal.h"
#include "builder-memory.h"
#include "pool-internal.h"
#include "streams.h"
#include "teardown.h"

void cucap_i_drain_kept(void)
{
    cucap_i_builder_kept_drain();   /* first: they hold hierarchies, streams and contexts */
    cucap_i_ctx_holds_drain();
    cucap_i_builder_spares_drain();
    cucap_i_hier_spares_drain();
    cucap_i_pool_spares_drain();
    cucap_i_stream_cache_drain();
}
