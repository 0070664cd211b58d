/* Graph hierarchies (src/graph.c) on the simulated driver: a reference
 * outlives its builder, the last one destroys the graph once, and a
 * retired hierarchy hands out no graph. */
#include <criterion/criterion.h>

#include "backend.h"

TestSuite(graph, .init = sim_setup, .fini = gpu_teardown, .timeout = 60);

static cucap_builder *ended(CUstreamCaptureMode mode)
{
    cucap_builder *b = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, mode, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

Test(graph, the_last_reference_destroys_the_graph_once)
{
    cucap_builder *b = ended(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cucap_graph *g = NULL, *again;
    long graphs = sim_live("graph");

    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    again = cucap_graph_ref(g);
    cr_assert_eq(again, g);
    cucap_builder_destroy(b);
    cr_assert_not_null(cucap_graph_handle(g), "the reference keeps the graph");
    cr_assert_eq(sim_live("graph"), graphs);
    cucap_graph_unref(again);
    cr_assert_eq(sim_live("graph"), graphs);
    cucap_graph_unref(g);
    cr_assert_eq(sim_live("graph"), graphs - 1, "destroyed with the last reference");
    cucap_graph_unref(NULL);
    cr_assert_null(cucap_graph_ref(NULL));
    cr_assert_null(cucap_graph_handle(NULL));
}

Test(graph, an_invalidated_capture_hands_out_no_graph)
{
    cucap_builder *b = NULL;
    cucap_graph *g = (cucap_graph *)&b;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_graph(b, &g, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_null(g);
    cr_assert_not_null(strstr(cucap_error_message(err), "discarded"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_ERROR_ILLEGAL_STATE);
    cucap_builder_destroy(b);
    cr_assert_eq(sim_live_settled("graph"), 0, "nothing destroyed twice, nothing left");
}

Test(graph, instantiate_from_a_reference_after_the_builder_went)
{
    cucap_builder *b = ended(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cucap_graph *g = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_graph_instantiate(g, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_graph_instantiate(NULL, NULL, &exec, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(exec, "a refused call writes NULL");
    cucap_graph_unref(g);
}
