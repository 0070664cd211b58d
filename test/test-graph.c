/* Graph hierarchies (src/graph.c) on the simulated driver: a reference
 * outlives its builder, the last one destroys the graph once, and a
 * retired hierarchy hands out no graph.  On the simulator and the GPU:
 * graphs built by hand and adopted, clones, updates from either. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>

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

/* ---------------------------------------------------------------- graphs the library did not capture */

BACKEND_SUITES(graphs, 60);

#define SPAN 256

static void memset_nodes(CUgraph g, CUdeviceptr d, unsigned char value, int count)
{
    CUgraphNode node = NULL, previous = NULL;
    CUgraphNodeParams np;
    int i;

    for (i = 0; i < count; i++) {
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMSET;
        np.memset.dst = d + (CUdeviceptr)i * SPAN;
        np.memset.value = (unsigned int)(value + i);
        np.memset.elementSize = 1;
        np.memset.width = SPAN;
        np.memset.height = 1;
        np.memset.pitch = SPAN;
        np.memset.ctx = gpu_context;
        cr_assert_eq(D.cuGraphAddNode(&node, g, previous ? &previous : NULL, NULL, previous ? 1 : 0, &np), CUDA_SUCCESS);
        previous = node;
    }
}

/* A graph built node by node, as NVIDIA's simpleCudaGraphs does: count
 * memset nodes in a chain, value, value + 1, ... */
static CUgraph built(CUdeviceptr d, unsigned char value, int count)
{
    CUgraph g = NULL;

    cr_assert_eq(D.cuGraphCreate(&g, 0), CUDA_SUCCESS);
    memset_nodes(g, d, value, count);
    return g;
}

static void check_spans(CUdeviceptr d, unsigned char value, int count)
{
    unsigned char host[4 * SPAN];
    int i;

    cr_assert_leq(count, 4);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, (size_t)count * SPAN), CUDA_SUCCESS);
    for (i = 0; i < count; i++)
        cr_assert_eq(host[i * SPAN + SPAN - 1], (unsigned char)(value + i), "span %d is %#x", i, host[i * SPAN + SPAN - 1]);
}

static void launch_and_wait(cucap_exec *e)
{
    cucap_error *err = NULL;

    cr_assert_eq(cucap_exec_launch(e, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
}

struct adopt_call {
    CUgraph g;
    CUresult rc;
    char message[256];
};

static void *adopt_on_fresh_thread(void *p)
{
    struct adopt_call *call = p;
    cucap_graph *out = (cucap_graph *)call;
    cucap_error *err = NULL;

    call->rc = cucap_graph_adopt(call->g, &out, &err);
    snprintf(call->message, sizeof call->message, "%s%s", cucap_error_message(err), out ? "" : " (out cleared)");
    cucap_error_free(err);
    return NULL;
}

/* The library owns what it adopts: it instantiates, launches and updates
 * it, and the last reference destroys it once; a thread with no current
 * context is refused and keeps its graph. */
BACKEND_TEST(graphs, an_adopted_graph_runs_updates_and_is_destroyed_once)
{
    CUdeviceptr d = 0;
    cucap_graph *g = NULL, *same = NULL, *other = NULL;
    cucap_exec *e = NULL;
    cucap_error *err = NULL;
    struct adopt_call call;
    pthread_t t;
    CUgraph raw;
    long graphs = on_simulator() ? sim_live("graph") : 0;

    cr_assert_eq(D.cuMemAlloc(&d, 4 * SPAN), CUDA_SUCCESS);
    raw = built(d, 10, 2);
    memset(&call, 0, sizeof call);
    call.g = raw;
    cr_assert_eq(pthread_create(&t, NULL, adopt_on_fresh_thread, &call), 0);
    pthread_join(t, NULL);
    cr_assert_eq(call.rc, CUDA_ERROR_INVALID_CONTEXT, "%s", call.message);
    cr_assert(strstr(call.message, "no context is current") && strstr(call.message, "(out cleared)"), "%s",
              call.message);
    cr_assert_eq(cucap_graph_adopt(raw, &g, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_graph_handle(g), raw);
    cr_assert_eq(cucap_graph_instantiate(g, NULL, &e, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    launch_and_wait(e);
    check_spans(d, 10, 2);
    /* the same topology, other values: an update */
    cr_assert_eq(cucap_graph_adopt(built(d, 40, 2), &same, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_update_graph(e, same, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    launch_and_wait(e);
    check_spans(d, 40, 2);
    /* another topology: refused, with the reason */
    cr_assert_eq(cucap_graph_adopt(built(d, 70, 3), &other, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_update_graph(e, other, &err), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert(strstr(cucap_error_message(err), "cucap_exec_update_graph: the executable graph cannot be updated") &&
              strstr(cucap_error_message(err), "CU_GRAPH_EXEC_UPDATE_ERROR"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    launch_and_wait(e);
    check_spans(d, 40, 2);
    cucap_exec_destroy(e);
    cucap_graph_unref(g);
    cucap_graph_unref(same);
    cucap_graph_unref(other);
    if (on_simulator())
        cr_assert_eq(sim_live("graph"), graphs, "each adopted graph destroyed with its last reference");
    cr_assert_eq(cucap_graph_adopt(NULL, &g, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    cr_assert_null(g);
    cr_assert_eq(cucap_exec_update_graph(NULL, g, NULL), CUDA_ERROR_INVALID_VALUE);
    D.cuMemFree(d);
}

/* A clone outlives the capture it was made from, reads its parameter
 * block, and updates an executable graph of the original; the driver
 * clones no graph with memory nodes, and the message says so. */
BACKEND_TEST(graphs, a_clone_lives_on_its_own)
{
    CUdeviceptr d = 0, block = 0, a = 0;
    cucap_builder *b = NULL;
    cucap_graph *g = NULL, *copy = NULL;
    cucap_exec *e = NULL, *ce = NULL;
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    unsigned char values[SPAN], host[SPAN];

    cr_assert_eq(D.cuMemAlloc(&d, 4 * SPAN), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(b, SPAN, &block, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemcpyDtoDAsync(d, block, SPAN, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &e, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_graph_clone(g, &copy, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_neq(cucap_graph_handle(copy), cucap_graph_handle(g));
    cucap_graph_unref(g);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_graph_instantiate(copy, NULL, &ce, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_params_size(ce), SPAN, "the copy reads the same block");
    memset(values, 0x3c, sizeof values);
    cr_assert_eq(cucap_exec_launch_params(ce, values, sizeof values, NULL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, SPAN), CUDA_SUCCESS);
    cr_assert_eq(host[SPAN - 1], 0x3c);
    cr_assert_eq(cucap_exec_update_graph(e, copy, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_exec_destroy(ce);
    cucap_exec_destroy(e);
    cucap_graph_unref(copy);

    cr_assert_eq(cucap_device_pool(0, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(pool, SPAN, cucap_builder_stream(b), &a, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(pool, a, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    copy = (cucap_graph *)&b;
    cr_assert_eq(cucap_graph_clone(g, &copy, &err), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert(strstr(cucap_error_message(err), "memory allocation or free nodes"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_null(copy);
    cr_assert_eq(cucap_graph_clone(NULL, &copy, NULL), CUDA_ERROR_INVALID_VALUE);
    cucap_graph_unref(g);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
}
