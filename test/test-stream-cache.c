/* The stream and event cache (src/streams.c) on the simulated driver: what
 * goes back is handed out again, what took part in a capture comes back
 * only once that capture is over, and draining empties it. */
#include <criterion/criterion.h>

#include "backend.h"
#include "builder-internal.h"
#include "capture.h"
#include "stream-cache.h"

TestSuite(streams, .init = sim_setup, .fini = gpu_teardown, .timeout = 60);

Test(streams, a_stream_given_back_is_handed_out_again)
{
    CUstream a = NULL, b = NULL;
    long before;

    cucap_release_cached();
    before = sim_live("stream");
    cr_assert_eq(cucap_i_cache_take_stream(gpu_context, gpu_device, &a, "test"), CUDA_SUCCESS);
    cucap_i_cache_give_stream(gpu_context, gpu_device, a, "test");
    cr_assert_eq(cucap_i_cache_take_stream(gpu_context, gpu_device, &b, "test"), CUDA_SUCCESS);
    cr_assert_eq(a, b, "the cache reuses the stream");
    cucap_i_cache_give_stream(gpu_context, gpu_device, b, "test");
    cucap_release_cached();
    cr_assert_eq(sim_live("stream"), before, "draining destroys what the cache held");
}

Test(streams, an_event_of_a_capture_is_reused_only_after_its_end)
{
    cucap_builder *p = NULL, *f = NULL;
    CUevent spare = NULL;
    long events_during, events_after;

    cucap_release_cached();
    cr_assert_eq(cucap_builder_create(0, &p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ p, f }, 2, NULL, NULL), CUDA_SUCCESS);
    /* the split's and the join's events wait for the end: a new take makes a new one */
    events_during = sim_live("event");
    cr_assert_eq(cucap_i_cache_take_event(gpu_context, gpu_device, &spare, "test"), CUDA_SUCCESS);
    cr_assert_eq(sim_live("event"), events_during + 1, "no event of the running capture was handed out");
    cucap_i_cache_give_event(gpu_context, gpu_device, spare, "test");
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    events_after = sim_live("event");
    cr_assert_eq(cucap_i_cache_take_event(gpu_context, gpu_device, &spare, "test"), CUDA_SUCCESS);
    cr_assert_eq(sim_live("event"), events_after, "after the end they are reused");
    cucap_i_cache_give_event(gpu_context, gpu_device, spare, "test");
    cucap_builder_destroy(f);
    cucap_builder_destroy(p);
    cucap_release_cached();
    cr_assert_eq(sim_live("event"), 0);
    cr_assert_eq(sim_live("stream"), 0);
}

Test(streams, create_in_gives_the_thread_its_context_back)
{
    CUstream s = NULL;
    CUcontext now = NULL;

    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_i_create_in(gpu_context, CUCAP_I_STREAM, (void **)&s), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxGetCurrent(&now), CUDA_SUCCESS);
    cr_assert_null(now, "no context was current before: none after");
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}
