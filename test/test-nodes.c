/* Named nodes (cucap_builder_name_node, cucap_exec_set_*): what
 * jacobiCudaGraphs does by walking the graph for its kernel nodes and
 * calling cudaGraphExecKernelNodeSetParams, for every kind of node an
 * executable graph can change, checked.  Copies, memsets, embedded graphs
 * and events on the simulated driver and the GPU, captured, named,
 * changed by name, launched and their results read; kernels on the GPU
 * (the simulator runs no kernels); host callbacks in test-host-callback.c. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend.h"
#include "held-work.h"

BACKEND_SUITES(nodes, 60);
TestSuite(kernels_run_gpu, .init = gpu_setup, .fini = gpu_teardown, .timeout = 60);

static cucap_builder *capturing(void)
{
    cucap_builder *b = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    return b;
}

static void check_refusal(CUresult rc, CUresult want, cucap_error *why, const char *says)
{
    cr_assert_eq(rc, want, "%s: %s", cucap_result_name(rc), cucap_error_message(why));
    cr_assert(strstr(cucap_error_message(why), says), "\"%s\" does not say \"%s\"", cucap_error_message(why), says);
    cucap_error_free(why);
}

/* call, which sets `why`, is refused with want, and the message says says. */
#define REFUSED(call, want, says)                                                                  \
    do {                                                                                           \
        cucap_error *why = NULL;                                                                   \
        CUresult rc_ = (call);                                                                     \
        check_refusal(rc_, want, why, says);                                                       \
    } while (0)

/* n bytes at d set to 0, done: cuMemsetD8 of device memory may return
 * before it is, and the tests' streams do not wait for the legacy one. */
static void zero(CUdeviceptr d, size_t n)
{
    cr_assert_eq(D.cuMemsetD8(d, 0, n), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
}

static CUstream stream(void)
{
    CUstream s = NULL;

    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

static void named(cucap_builder *b, const char *name)
{
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_name_node(b, name, &err), CUDA_SUCCESS, "naming \"%s\": %s", name,
                 cucap_error_message(err));
}

static cucap_exec *completed(cucap_builder *b)
{
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return exec;
}

static void launched(cucap_exec *exec, CUstream s)
{
    cucap_error *err = NULL;

    cr_assert_eq(cucap_exec_launch(exec, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
}

/* Every byte of the n at d is `value`. */
static void expect_bytes(CUdeviceptr d, size_t n, unsigned char value, const char *what)
{
    unsigned char host[256];
    size_t i;

    cr_assert(n <= sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, n), CUDA_SUCCESS);
    for (i = 0; i < n; i++)
        cr_assert_eq(host[i], value, "%s: byte %zu is %u, not %u", what, i, host[i], value);
}

#define CHANGED(call)                                                                              \
    do {                                                                                           \
        cucap_error *err_ = NULL;                                                                  \
        CUresult rc_ = (call);                                                                     \
        cr_assert_eq(rc_, CUDA_SUCCESS, "%s: %s", #call, cucap_error_message(err_));              \
    } while (0)

BACKEND_TEST(nodes, naming_refuses_what_no_executable_graph_can_change)
{
    cucap_builder *b = NULL, *body = NULL;
    CUgraphConditionalHandle c;
    CUdeviceptr d = 0, p = 0;
    cucap_pool *pool = NULL;
    char long_name[80];

    memset(long_name, 'k', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_node(b, "k", &why), CUDA_ERROR_ILLEGAL_STATE, "not capturing");
    REFUSED(cucap_builder_name_node(NULL, "k", &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    cucap_builder_destroy(b);
    b = capturing();
    REFUSED(cucap_builder_name_node(b, "k", &why), CUDA_ERROR_INVALID_VALUE, "captured nothing");
    cr_assert_eq(cucap_pool_open_default(0, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(pool, 256, cucap_builder_stream(b), &p, NULL), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_node(b, "k", &why), CUDA_ERROR_INVALID_VALUE, "an allocation node, which an executable graph cannot change");
    cr_assert_eq(cucap_pool_free(pool, p, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_node(b, NULL, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_builder_name_node(b, "", &why), CUDA_ERROR_INVALID_VALUE, "empty");
    REFUSED(cucap_builder_name_node(b, long_name, &why), CUDA_ERROR_INVALID_VALUE, "longer than 63");
    named(b, "fill");
    REFUSED(cucap_builder_name_node(b, "fill", &why), CUDA_ERROR_INVALID_VALUE, "already has a node named \"fill\"");
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    named(b, "if");   /* a conditional node: named, then only enabled or not */
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_node(body, "k", &why), CUDA_ERROR_NOT_SUPPORTED, "conditional body");
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CAPTURING, "a refusal leaves the capture alone");
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    {
        cucap_exec *exec = NULL;
        cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_SUCCESS);
        REFUSED(cucap_exec_set_enabled(exec, "if", 0, &why), CUDA_ERROR_NOT_SUPPORTED,
                "conditional node; the driver enables and disables only kernel, memcpy and memset nodes");
        cucap_exec_destroy(exec);
    }
    cucap_builder_destroy(body);
    cucap_builder_destroy(b);
    cucap_pool_close(pool, NULL);
    D.cuMemFree(d);
}

BACKEND_TEST(nodes, an_executable_graph_without_names_refuses_every_change)
{
    cucap_exec *exec = NULL;
    CUdeviceptr d = 0;
    CUevent ev = NULL;
    cucap_builder *b;
    int v = 1;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    b = capturing();
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_SUCCESS);
    REFUSED(cucap_exec_set_kernel_arg(exec, "k", 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "named no node \"k\"");
    REFUSED(cucap_exec_set_kernel_arg(NULL, "k", 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_exec_set_kernel_arg(exec, NULL, 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_exec_set_memcpy(exec, "c", d, d, 8, &why), CUDA_ERROR_INVALID_VALUE, "named no node \"c\"");
    REFUSED(cucap_exec_set_memset(exec, "m", d, 0, &why), CUDA_ERROR_INVALID_VALUE, "named no node \"m\"");
    REFUSED(cucap_exec_set_host_callback(exec, "h", (CUhostFn)free, NULL, NULL, &why), CUDA_ERROR_INVALID_VALUE,
            "named no node \"h\"");
    REFUSED(cucap_exec_set_child_graph(exec, "g", NULL, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_exec_set_event(exec, "e", ev, &why), CUDA_ERROR_INVALID_VALUE, "named no node \"e\"");
    REFUSED(cucap_exec_set_enabled(exec, "n", 0, &why), CUDA_ERROR_INVALID_VALUE, "named no node \"n\"");
    REFUSED(cucap_exec_set_enabled(NULL, "n", 0, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuEventDestroy(ev);
    D.cuMemFree(d);
}

BACKEND_TEST(nodes, copies_and_memsets_change_by_name_and_are_enabled_and_disabled)
{
    CUdeviceptr a, b2, c, d;
    CUstream s = stream();
    cucap_builder *b;
    cucap_exec *exec;

    cr_assert_eq(D.cuMemAlloc(&a, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&b2, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&c, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    zero(c, 64);
    zero(d, 64);
    b = capturing();
    cr_assert_eq(D.cuMemsetD8Async(a, 1, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    named(b, "fill");
    cr_assert_eq(D.cuMemcpyAsync(b2, a, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    named(b, "copy");
    exec = completed(b);
    launched(exec, s);
    expect_bytes(b2, 64, 1, "as captured");
    /* the memset now fills c with 7, the copy takes c to d */
    CHANGED(cucap_exec_set_memset(exec, "fill", c, 7, &err_));
    CHANGED(cucap_exec_set_memcpy(exec, "copy", d, c, 64, &err_));
    zero(b2, 64);
    launched(exec, s);
    expect_bytes(d, 64, 7, "changed by name");
    expect_bytes(c, 64, 7, "the memset's new destination");
    expect_bytes(b2, 64, 0, "the copy's old destination");
    /* disabled: the copy does nothing, its values kept; enabled again */
    CHANGED(cucap_exec_set_enabled(exec, "copy", 0, &err_));
    CHANGED(cucap_exec_set_memset(exec, "fill", c, 9, &err_));
    launched(exec, s);
    expect_bytes(c, 64, 9, "the memset still runs");
    expect_bytes(d, 64, 7, "a disabled copy");
    CHANGED(cucap_exec_set_enabled(exec, "copy", 1, &err_));
    launched(exec, s);
    expect_bytes(d, 64, 9, "the copy enabled again");
    REFUSED(cucap_exec_set_memset(exec, "copy", c, 1, &why), CUDA_ERROR_INVALID_VALUE, "is a memcpy node, not a memset node");
    REFUSED(cucap_exec_set_memcpy(exec, "fill", d, c, 64, &why), CUDA_ERROR_INVALID_VALUE, "is a memset node, not a memcpy node");
    REFUSED(cucap_exec_set_event(exec, "fill", (CUevent)1, &why), CUDA_ERROR_INVALID_VALUE, "not an event record or wait node");
    REFUSED(cucap_exec_set_memset(exec, "fill", c, 0x100, &why), CUDA_ERROR_INVALID_VALUE, "does not fit");
    REFUSED(cucap_exec_set_memcpy(exec, "copy", d, c, 0, &why), CUDA_ERROR_INVALID_VALUE, "0 bytes");
    launched(exec, s);
    expect_bytes(d, 64, 9, "refusals change nothing");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFree(a);
    D.cuMemFree(b2);
    D.cuMemFree(c);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
}

BACKEND_TEST(nodes, names_follow_an_update_and_a_name_it_lacks_is_refused)
{
    CUdeviceptr a, c;
    CUstream s = stream();
    cucap_builder *b1, *b2;
    cucap_exec *exec;

    cr_assert_eq(D.cuMemAlloc(&a, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&c, 64), CUDA_SUCCESS);
    b1 = capturing();
    cr_assert_eq(D.cuMemsetD8Async(a, 1, 64, cucap_builder_stream(b1)), CUDA_SUCCESS);
    named(b1, "fill");
    exec = completed(b1);
    b2 = capturing();
    cr_assert_eq(D.cuMemsetD8Async(a, 2, 32, cucap_builder_stream(b2)), CUDA_SUCCESS);
    named(b2, "fill");
    cr_assert_eq(cucap_builder_end(b2, NULL), CUDA_SUCCESS);
    CHANGED(cucap_exec_update(exec, b2, &err_));
    zero(c, 64);
    CHANGED(cucap_exec_set_memset(exec, "fill", c, 5, &err_));
    launched(exec, s);
    expect_bytes(c, 32, 5, "the updating capture's memset, changed");
    expect_bytes(c + 32, 32, 0, "past the updating capture's 32 bytes");
    cucap_builder_destroy(b2);
    b2 = capturing();
    cr_assert_eq(D.cuMemsetD8Async(a, 3, 64, cucap_builder_stream(b2)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b2, NULL), CUDA_SUCCESS);
    CHANGED(cucap_exec_update(exec, b2, &err_));
    REFUSED(cucap_exec_set_memset(exec, "fill", c, 6, &why), CUDA_ERROR_ILLEGAL_STATE, "did not name the memset node \"fill\"");
    launched(exec, s);
    expect_bytes(a, 64, 3, "the unnamed update's values");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b1);
    cucap_builder_destroy(b2);
    D.cuMemFree(a);
    D.cuMemFree(c);
    D.cuStreamDestroy(s);
}

/* A builder whose capture is one memset of n bytes of value at d per
 * entry (two entries: two memsets in a row), ended. */
static cucap_builder *memsets(CUdeviceptr d, unsigned char value, int count)
{
    cucap_builder *b = capturing();
    int i;

    for (i = 0; i < count; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + 16 * i, value, 16, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

BACKEND_TEST(nodes, an_embedded_graph_is_replaced_by_name)
{
    cucap_builder *b, *one, *other, *longer;
    cucap_graph *g_other = NULL, *g_longer = NULL;
    CUdeviceptr d;
    CUstream s = stream();
    cucap_exec *exec;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    zero(d, 64);
    one = memsets(d, 1, 1);
    other = memsets(d, 2, 1);
    longer = memsets(d, 3, 2);
    b = capturing();
    CHANGED(cucap_builder_embed(b, one, &err_));
    named(b, "step");
    exec = completed(b);
    launched(exec, s);
    expect_bytes(d, 16, 1, "as embedded");
    cr_assert_eq(cucap_builder_graph(other, &g_other, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_graph(longer, &g_longer, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(other);
    CHANGED(cucap_exec_set_child_graph(exec, "step", g_other, &err_));
    cucap_graph_unref(g_other);   /* the executable graph copied it */
    launched(exec, s);
    expect_bytes(d, 16, 2, "replaced by name");
    REFUSED(cucap_exec_set_child_graph(exec, "step", g_longer, &why), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
            "cuGraphExecChildGraphNodeSetParams");
    zero(d, 64);
    launched(exec, s);
    expect_bytes(d, 16, 2, "a refused graph changes nothing");
    expect_bytes(d + 16, 16, 0, "a refused graph changes nothing");
    cucap_graph_unref(g_longer);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    cucap_builder_destroy(one);
    cucap_builder_destroy(longer);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
}

/* The first node an embedded graph with as many nodes as follow it: its
 * nodes and the later ones are all read, at instantiation and update. */
BACKEND_TEST(nodes, a_graph_embedded_before_other_nodes_is_read_whole)
{
    cucap_builder *b, *child;
    CUdeviceptr d;
    CUstream s = stream();
    cucap_exec *exec;
    int i;

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    zero(d, 64);
    child = memsets(d, 1, 2);
    b = capturing();
    CHANGED(cucap_builder_embed(b, child, &err_));
    for (i = 2; i < 4; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + 16 * (CUdeviceptr)i, 2, 16, cucap_builder_stream(b)), CUDA_SUCCESS);
    exec = completed(b);
    launched(exec, s);
    expect_bytes(d, 32, 1, "the embedded graph's nodes");
    expect_bytes(d + 32, 32, 2, "the nodes after it");
    CHANGED(cucap_builder_reset(b, &err_));
    CHANGED(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err_));
    CHANGED(cucap_builder_embed(b, child, &err_));
    for (i = 2; i < 4; i++)
        cr_assert_eq(D.cuMemsetD8Async(d + 16 * (CUdeviceptr)i, 3, 16, cucap_builder_stream(b)), CUDA_SUCCESS);
    CHANGED(cucap_builder_end(b, &err_));
    CHANGED(cucap_exec_update(exec, b, &err_));
    launched(exec, s);
    expect_bytes(d + 32, 32, 3, "the nodes after it, updated");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    cucap_builder_destroy(child);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
}

/* A builder reset when its last capture is its alone begins its next
 * capture on the same capture object made new: the names, failure and
 * graph of the last one do not carry over. */
BACKEND_TEST(nodes, a_reset_builder_names_its_nodes_anew_each_capture)
{
    CUstream s = stream();
    cucap_builder *b;
    cucap_exec *exec;
    CUdeviceptr d;
    int n;

    cr_assert_eq(D.cuMemAlloc(&d, 32), CUDA_SUCCESS);
    CHANGED(cucap_builder_create(0, &b, &err_));
    for (n = 0; n < 3; n++) {
        zero(d, 32);
        CHANGED(cucap_builder_reset(b, &err_));
        CHANGED(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err_));
        cr_assert_eq(D.cuMemsetD8Async(d, (unsigned char)(1 + n), 16, cucap_builder_stream(b)), CUDA_SUCCESS);
        if (n < 2)
            named(b, "m");   /* refused as repeated if the last capture's name stayed */
        exec = completed(b);
        if (n < 2)
            CHANGED(cucap_exec_set_memset(exec, "m", d + 16, 7, &err_));
        else
            REFUSED(cucap_exec_set_memset(exec, "m", d + 16, 7, &why), CUDA_ERROR_INVALID_VALUE,
                    "named no node \"m\"");
        launched(exec, s);
        expect_bytes(d, 16, n < 2 ? 0 : 3, n < 2 ? "the named memset moved" : "the unnamed memset");
        expect_bytes(d + 16, 16, n < 2 ? 7 : 0, "where the name sent it");
        cucap_exec_destroy(exec);   /* the graph is the capture's alone again */
    }
    cucap_builder_destroy(b);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("graph"), 0);
}

BACKEND_TEST(nodes, event_record_and_wait_nodes_take_another_event_by_name)
{
    CUevent captured_record, captured_wait, other, held_event;
    CUstream s = stream(), side = stream();
    struct held gate, gate2;
    cucap_builder *b;
    cucap_exec *exec;
    CUdeviceptr d;

    held_init(&gate);
    held_init(&gate2);
    cr_assert_eq(D.cuMemAlloc(&d, 16), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&captured_record, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&captured_wait, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&other, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&held_event, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(captured_wait, side), CUDA_SUCCESS);
    b = capturing();
    cr_assert_eq(D.cuStreamWaitEvent(cucap_builder_stream(b), captured_wait, CU_EVENT_WAIT_EXTERNAL), CUDA_SUCCESS);
    named(b, "wait");
    cr_assert_eq(D.cuMemsetD8Async(d, 4, 16, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecordWithFlags(captured_record, cucap_builder_stream(b), CU_EVENT_RECORD_EXTERNAL),
                 CUDA_SUCCESS);
    named(b, "record");
    exec = completed(b);
    REFUSED(cucap_exec_set_memset(exec, "record", d, 1, &why), CUDA_ERROR_INVALID_VALUE,
            "is an event record node, not a memset node");
    REFUSED(cucap_exec_set_event(exec, "record", NULL, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    /* other is held behind the gate until the graph records it instead */
    cr_assert_eq(D.cuLaunchHostFunc(side, gate.fn, gate.data), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(other, side), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(other), CUDA_ERROR_NOT_READY);
    CHANGED(cucap_exec_set_event(exec, "record", other, &err_));
    launched(exec, s);
    cr_assert_eq(D.cuEventQuery(other), CUDA_SUCCESS, "the graph recorded the event it was given by name");
    expect_bytes(d, 16, 4, "the launch's memset");
    held_release(&gate);
    cr_assert_eq(D.cuStreamSynchronize(side), CUDA_SUCCESS);
    /* the wait node now waits for held work: the launch is held with it */
    cr_assert_eq(D.cuLaunchHostFunc(side, gate2.fn, gate2.data), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(held_event, side), CUDA_SUCCESS);
    CHANGED(cucap_exec_set_event(exec, "wait", held_event, &err_));
    CHANGED(cucap_exec_launch(exec, s, &err_));
    cr_assert_eq(D.cuStreamQuery(s), CUDA_ERROR_NOT_READY, "the launch waits for the event it was given by name");
    held_release(&gate2);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_not(gate.gpu.timed_out || gate2.gpu.timed_out, "a call waited for the held work");
    expect_bytes(d, 16, 4, "after the wait");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuEventDestroy(captured_record);
    D.cuEventDestroy(captured_wait);
    D.cuEventDestroy(other);
    D.cuEventDestroy(held_event);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
    D.cuStreamDestroy(side);
}

/* ---------------------------------------------------------------- kernels, on the GPU */

/* store(out, v, w): out[0] = v (4 bytes), out[2..3] = w (8 bytes). */
static const char store_ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry store(.param .u64 out, .param .u32 v, .param .u64 w)\n"
    "{\n"
    "  .reg .b32 %r<2>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  ld.param.u32 %r1, [v];\n"
    "  ld.param.u64 %rd2, [w];\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n"
    "  st.global.u32 [%rd3], %r1;\n"
    "  st.global.u64 [%rd3+8], %rd2;\n"
    "  ret;\n"
    "}\n";

struct stored {
    uint32_t v, pad;
    uint64_t w;
};

struct store_kernel {
    CUmodule module;
    CUfunction f;
    CUdeviceptr out[3];
};

static struct store_kernel load_store(void)
{
    PFN_cuModuleLoadData_v2000 load = (PFN_cuModuleLoadData_v2000)cucap_driver_entry_point("cuModuleLoadData");
    PFN_cuModuleGetFunction_v2000 get = (PFN_cuModuleGetFunction_v2000)cucap_driver_entry_point("cuModuleGetFunction");
    struct store_kernel k;

    memset(&k, 0, sizeof k);
    cr_assert(load && get);
    cr_assert_eq(load(&k.module, store_ptx), CUDA_SUCCESS);
    cr_assert_eq(get(&k.f, k.module, "store"), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&k.out[0], sizeof(struct stored)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&k.out[1], sizeof(struct stored)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&k.out[2], sizeof(struct stored)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(k.out[2], 0, sizeof(struct stored)), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    return k;
}

static void unload_store(struct store_kernel *k)
{
    PFN_cuModuleUnload_v2000 unload = (PFN_cuModuleUnload_v2000)cucap_driver_entry_point("cuModuleUnload");

    D.cuMemFree(k->out[0]);
    D.cuMemFree(k->out[1]);
    D.cuMemFree(k->out[2]);
    unload(k->module);
}

/* A capture of store(out[which], v, w) on b's stream, named name (NULL: not named). */
static void launch_store(struct store_kernel *k, cucap_builder *b, int which, uint32_t v, uint64_t w, const char *name)
{
    PFN_cuLaunchKernel_v4000 launch = (PFN_cuLaunchKernel_v4000)cucap_driver_entry_point("cuLaunchKernel");
    cucap_error *err = NULL;
    void *args[3] = { &k->out[which], &v, &w };

    cr_assert_eq(launch(k->f, 1, 1, 1, 1, 1, 1, 0, cucap_builder_stream(b), args, NULL), CUDA_SUCCESS);
    if (name)
        cr_assert_eq(cucap_builder_name_node(b, name, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
}

static struct stored read_out(struct store_kernel *k, int which)
{
    struct stored s;

    memset(&s, 0, sizeof s);
    cr_assert_eq(D.cuMemcpyDtoH(&s, k->out[which], sizeof s), CUDA_SUCCESS);
    return s;
}

static void run(cucap_exec *exec)
{
    cr_assert_eq(cucap_exec_launch(exec, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
}

/* Two kernels in a primary and a fork, each named; one argument changed
 * at a time, the others kept, sizes checked; an update brings the new
 * capture's values, and a kernel the new capture did not name is refused. */
Test(kernels_run_gpu, one_argument_changes_and_the_others_stay)
{
    struct store_kernel k = load_store();
    cucap_builder *b = capturing(), *fork = NULL, *again;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    uint32_t v = 42;
    uint64_t w = 0x1122334455667788ull;
    CUdeviceptr other;
    struct stored s;

    cr_assert_eq(cucap_builder_split(b, 2, &fork, NULL), CUDA_SUCCESS);
    launch_store(&k, b, 0, 1, 2, "first");
    launch_store(&k, fork, 1, 3, 4, "second");
    REFUSED(cucap_builder_name_node(fork, "first", &why), CUDA_ERROR_INVALID_VALUE, "already has a node named");
    cr_assert_eq(cucap_builder_join_forks(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_SUCCESS);
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 1 && s.w == 2, "captured values: %u %llu", s.v, (unsigned long long)s.w);
    s = read_out(&k, 1);
    cr_assert(s.v == 3 && s.w == 4);

    cr_assert_eq(cucap_exec_set_kernel_arg(exec, "first", 1, &v, sizeof v, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 42 && s.w == 2, "one argument changed, the other kept: %u %llu", s.v, (unsigned long long)s.w);
    cr_assert_eq(cucap_exec_set_kernel_arg(exec, "second", 2, &w, sizeof w, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    other = k.out[2];   /* jacobi's swap: the pointer argument too */
    cr_assert_eq(cucap_exec_set_kernel_arg(exec, "second", 0, &other, sizeof other, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    zero(k.out[1], sizeof s);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    run(exec);
    s = read_out(&k, 1);
    cr_assert(s.v == 0 && s.w == 0, "the second kernel writes elsewhere now");
    s = read_out(&k, 2);
    cr_assert(s.v == 3 && s.w == w, "the second kernel, its pointer and w changed: %u %llx", s.v,
              (unsigned long long)s.w);

    REFUSED(cucap_exec_set_kernel_arg(exec, "first", 1, &w, sizeof w, &why), CUDA_ERROR_INVALID_VALUE, "parameter 1 of kernel \"first\" is 4 bytes, not 8");
    REFUSED(cucap_exec_set_kernel_arg(exec, "first", 3, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "has 3 parameters");
    REFUSED(cucap_exec_set_memset(exec, "first", k.out[0], 0, &why), CUDA_ERROR_INVALID_VALUE, "is a kernel node, not a memset node");

    /* disabled: the first kernel writes nothing, its values kept; enabled again */
    zero(k.out[0], sizeof s);
    cr_assert_eq(cucap_exec_set_enabled(exec, "first", 0, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 0 && s.w == 0, "a disabled kernel ran: %u %llu", s.v, (unsigned long long)s.w);
    cr_assert_eq(cucap_exec_set_enabled(exec, "first", 1, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 42 && s.w == 2, "enabled again, with its values: %u %llu", s.v, (unsigned long long)s.w);

    /* an update from a capture that names the first kernel only */
    cr_assert_eq(cucap_builder_create(0, &again, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(again, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(fork);
    fork = NULL;
    cr_assert_eq(cucap_builder_split(again, 2, &fork, NULL), CUDA_SUCCESS);
    launch_store(&k, again, 0, 5, 6, "first");
    launch_store(&k, fork, 1, 7, 8, NULL);
    cr_assert_eq(cucap_builder_join_forks(again, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(again, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_update(exec, again, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 5 && s.w == 6, "the update's values: %u %llu", s.v, (unsigned long long)s.w);
    v = 9;
    cr_assert_eq(cucap_exec_set_kernel_arg(exec, "first", 1, &v, sizeof v, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 9 && s.w == 6, "after the update, from the update's values: %u %llu", s.v,
              (unsigned long long)s.w);
    REFUSED(cucap_exec_set_kernel_arg(exec, "second", 1, &v, sizeof v, &why), CUDA_ERROR_ILLEGAL_STATE, "did not name");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(fork);
    cucap_builder_destroy(again);
    cucap_builder_destroy(b);
    unload_store(&k);
}

/* The executable graph keeps what it needs: the builder, and the graph
 * reference it was instantiated from, gone before the arguments change.
 * A clone does not carry the names. */
Test(kernels_run_gpu, arguments_change_after_the_builder_is_gone)
{
    struct store_kernel k = load_store();
    cucap_builder *b = capturing();
    cucap_graph *g = NULL, *copy = NULL;
    cucap_exec *exec = NULL, *copied = NULL;
    cucap_error *err = NULL;
    uint32_t v = 7;
    struct stored s;

    launch_store(&k, b, 0, 1, 2, "only");
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_graph_clone(g, &copy, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_graph_instantiate(copy, NULL, &copied, NULL), CUDA_SUCCESS);
    REFUSED(cucap_exec_set_kernel_arg(copied, "only", 1, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE,
            "named no node \"only\"");
    cucap_exec_destroy(copied);
    cucap_graph_unref(copy);
    cr_assert_eq(cucap_graph_instantiate(g, NULL, &exec, NULL), CUDA_SUCCESS);
    cucap_graph_unref(g);
    for (v = 10; v < 20; v++) {
        cr_assert_eq(cucap_exec_set_kernel_arg(exec, "only", 1, &v, sizeof v, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        run(exec);
        s = read_out(&k, 0);
        cr_assert(s.v == v && s.w == 2, "launch %u: %u %llu", v, s.v, (unsigned long long)s.w);
    }
    cucap_exec_destroy(exec);
    unload_store(&k);
}

/* store(out[which], v, w) on b's stream in a grid of 2 blocks, launched
 * with attrs (count of them). */
static void launch_store_with(struct store_kernel *k, cucap_builder *b, int which, uint32_t v, uint64_t w,
                              CUlaunchAttribute *attrs, unsigned int count)
{
    PFN_cuLaunchKernelEx_v11060 launch = (PFN_cuLaunchKernelEx_v11060)cucap_driver_entry_point("cuLaunchKernelEx");
    void *args[3] = { &k->out[which], &v, &w };
    CUlaunchConfig cfg;

    cr_assert_not_null(launch);
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 2;
    cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = cucap_builder_stream(b);
    cfg.attrs = attrs;
    cfg.numAttrs = count;
    cr_assert_eq(launch(&cfg, k->f, args, NULL), CUDA_SUCCESS);
}

/* The same in clusters of cluster blocks. */
static void launch_store_clustered(struct store_kernel *k, cucap_builder *b, int which, uint32_t v, uint64_t w,
                                   unsigned int cluster)
{
    CUlaunchAttribute attr;

    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    launch_store_with(k, b, which, v, w, &attr, 1);
}

static cucap_builder *clustered_capture(struct store_kernel *k, uint32_t v, unsigned int cluster)
{
    cucap_builder *b = capturing();

    launch_store_clustered(k, b, 0, v, v, cluster);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

/* Two graphs that differ only in a kernel's cluster dimensions: the
 * update is refused, naming them, and the executable graph runs as it
 * was (the driver accepts some such updates and then runs them wrong). */
Test(kernels_run_gpu, an_update_to_other_cluster_dimensions_is_refused)
{
    struct store_kernel k = load_store();
    cucap_builder *a = clustered_capture(&k, 1, 1), *b = clustered_capture(&k, 3, 2), *c = clustered_capture(&k, 5, 1);
    cucap_update_refusal refusal;
    cucap_completion how;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    struct stored s;

    cr_assert_eq(cucap_builder_complete(a, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    REFUSED(cucap_exec_update(exec, b, &why), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "cluster dimensions: 2x1x1");
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 1, "the executable graph runs as it was: %u", s.v);
    cr_assert_eq(cucap_builder_complete_into_why(b, NULL, &exec, &how, &refusal, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(how, CUCAP_COMPLETED_INSTANTIATED);
    cr_assert_eq(refusal.result, CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED, "%s", refusal.message);
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 3, "the new executable graph: %u", s.v);
    cr_assert_eq(cucap_exec_update(exec, c, &err), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "back to clusters of 1");
    cucap_error_free(err);
    err = NULL;
    cucap_exec_destroy(exec);
    exec = NULL;
    cr_assert_eq(cucap_builder_complete(a, NULL, &exec, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_update(exec, c, &err), CUDA_SUCCESS, "the same attributes: %s", cucap_error_message(err));
    run(exec);
    s = read_out(&k, 0);
    cr_assert(s.v == 5, "updated: %u", s.v);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(a);
    cucap_builder_destroy(b);
    cucap_builder_destroy(c);
    unload_store(&k);
}

/* A kernel node of b's graph (the first the driver lists). */
static CUgraphNode first_node(cucap_builder *b)
{
    PFN_cuGraphGetNodes_v10000 nodes = (PFN_cuGraphGetNodes_v10000)cucap_driver_entry_point("cuGraphGetNodes");
    cucap_graph *g = NULL;
    CUgraphNode node = NULL;
    size_t n = 1;

    cr_assert_not_null(nodes);
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(nodes(cucap_graph_handle(g), &node, &n), CUDA_SUCCESS);
    cucap_graph_unref(g);
    return node;
}

/* A capture of count kernels, each launched with attrs. */
static cucap_builder *capture_with(struct store_kernel *k, int count, CUlaunchAttribute *attrs, unsigned int n)
{
    cucap_builder *b = capturing();
    int i;

    for (i = 0; i < count; i++)
        launch_store_with(k, b, 0, 7, (uint64_t)i, attrs, n);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    return b;
}

/* Graphs that differ only in a kernel's priority, memory synchronization
 * domain or cooperative launch: each update is refused (the domain by the
 * library, naming it; the cooperative launch by a driver of CUDA 13.0 or
 * later itself, measured, and by the library before), the priority where
 * the executable graph runs its nodes' priorities (by such a driver
 * itself, measured, and by the library before); elsewhere every node runs
 * at its stream's priority, and such a driver's update goes through. */
Test(kernels_run_gpu, an_update_to_another_priority_sync_domain_or_cooperative_launch_is_refused)
{
    PFN_cuCtxGetStreamPriorityRange_v5050 range =
        (PFN_cuCtxGetStreamPriorityRange_v5050)cucap_driver_entry_point("cuCtxGetStreamPriorityRange");
    struct store_kernel k = load_store();
    int older = cucap_driver_version() < 13000;
    const char *const says[3] = { older ? "priority" : "ATTRIBUTES_CHANGED", "memory synchronization domain",
                                  "ATTRIBUTES_CHANGED" };
    cucap_complete_options node_priority;
    CUlaunchAttribute attr[3];
    int least, greatest, i;

    cr_assert_not_null(range);
    cr_assert_eq(range(&least, &greatest), CUDA_SUCCESS);
    cr_assert_neq(least, greatest, "the device has one stream priority");
    memset(&node_priority, 0, sizeof node_priority);
    node_priority.use_node_priority = 1;
    memset(attr, 0, sizeof attr);
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr[0].value.priority = greatest;
    attr[1].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
    attr[1].value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    attr[2].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr[2].value.cooperative = 1;
    for (i = 0; i < 3; i++) {
        cucap_builder *plain = capture_with(&k, 1, NULL, 0), *other = capture_with(&k, 1, &attr[i], 1);
        const cucap_complete_options *opts = i == 0 ? &node_priority : NULL;
        cucap_exec *exec = NULL;
        cucap_error *why = NULL;
        CUresult rc;

        cr_assert_eq(cucap_builder_complete(plain, opts, &exec, NULL), CUDA_SUCCESS);
        rc = cucap_exec_update(exec, other, &why);
        cr_assert_eq(rc, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "%s: %s", says[i], cucap_error_message(why));
        cr_assert(strstr(cucap_error_message(why), says[i]), "\"%s\" does not say \"%s\"", cucap_error_message(why),
                  says[i]);
        cucap_error_free(why);
        why = NULL;
        cucap_exec_destroy(exec);
        exec = NULL;
        cr_assert_eq(cucap_builder_complete(other, opts, &exec, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_exec_update(exec, plain, &why), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "%s, back: %s", says[i],
                     cucap_error_message(why));
        cucap_error_free(why);
        why = NULL;
        cucap_exec_destroy(exec);
        exec = NULL;
        if (i == 0 && !older) {   /* priorities not run: both ways go through, and the graph runs the new values */
            cr_assert_eq(cucap_builder_complete(plain, NULL, &exec, NULL), CUDA_SUCCESS);
            cr_assert_eq(cucap_exec_update(exec, other, &why), CUDA_SUCCESS, "priorities not run: %s",
                         cucap_error_message(why));
            run(exec);
            cr_assert_eq(read_out(&k, 0).v, 7);
            cr_assert_eq(cucap_exec_update(exec, plain, &why), CUDA_SUCCESS, "priorities not run, back: %s",
                         cucap_error_message(why));
            cucap_exec_destroy(exec);
        }
        cucap_builder_destroy(plain);
        cucap_builder_destroy(other);
    }
    unload_store(&k);
}

/* Graphs whose kernel node launches another function, the same code
 * loaded twice (two modules; two libraries, their kernels launched as
 * functions): each update is refused, naming the change, and one to the
 * same function re-captured goes through.  The check reads the CUDA 10.0
 * variant of cuGraphKernelNodeGetParams, 20-40 times cheaper on nvcc- and
 * cuBLAS-built kernels: it must name the function the 12.0 one names. */
Test(kernels_run_gpu, an_update_to_another_function_is_refused)
{
    PFN_cuModuleLoadData_v2000 load = (PFN_cuModuleLoadData_v2000)cucap_driver_entry_point("cuModuleLoadData");
    PFN_cuModuleGetFunction_v2000 get = (PFN_cuModuleGetFunction_v2000)cucap_driver_entry_point("cuModuleGetFunction");
    PFN_cuModuleUnload_v2000 unload = (PFN_cuModuleUnload_v2000)cucap_driver_entry_point("cuModuleUnload");
    PFN_cuLibraryLoadData_v12000 library_load =
        (PFN_cuLibraryLoadData_v12000)cucap_driver_entry_point("cuLibraryLoadData");
    PFN_cuLibraryGetKernel_v12000 library_kernel =
        (PFN_cuLibraryGetKernel_v12000)cucap_driver_entry_point("cuLibraryGetKernel");
    PFN_cuLibraryUnload_v12000 library_unload =
        (PFN_cuLibraryUnload_v12000)cucap_driver_entry_point("cuLibraryUnload");
    PFN_cuGraphKernelNodeGetParams_v10000 params_v1 =
        (PFN_cuGraphKernelNodeGetParams_v10000)cucap_driver_entry_point_version("cuGraphKernelNodeGetParams", 10000);
    PFN_cuGraphKernelNodeGetParams_v12000 params_v2 =
        (PFN_cuGraphKernelNodeGetParams_v12000)cucap_driver_entry_point_version("cuGraphKernelNodeGetParams", 12000);
    static const char *const way[4] = { "module", "second module", "library kernel", "second library's kernel" };
    struct store_kernel k = load_store(), ways[4];
    CUmodule second;
    CUlibrary library[2];
    CUkernel kernel[2];
    int i;

    cr_assert(load && get && unload && library_load && library_kernel && library_unload && params_v1 && params_v2);
    cr_assert_eq(load(&second, store_ptx), CUDA_SUCCESS);
    for (i = 0; i < 2; i++) {
        cr_assert_eq(library_load(&library[i], store_ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
        cr_assert_eq(library_kernel(&kernel[i], library[i], "store"), CUDA_SUCCESS);
    }
    for (i = 0; i < 4; i++)
        ways[i] = k;
    cr_assert_eq(get(&ways[1].f, second, "store"), CUDA_SUCCESS);
    ways[2].f = (CUfunction)kernel[0];
    ways[3].f = (CUfunction)kernel[1];
    for (i = 0; i < 4; i++) {
        cucap_builder *a = capture_with(&ways[i], 1, NULL, 0), *same = capture_with(&ways[i], 1, NULL, 0),
                      *other = capture_with(&ways[i ^ 1], 1, NULL, 0);
        CUDA_KERNEL_NODE_PARAMS_v1 v1;
        CUDA_KERNEL_NODE_PARAMS_v2 v2;
        cucap_exec *exec = NULL;
        cucap_error *why = NULL;

        memset(&v1, 0, sizeof v1);
        memset(&v2, 0, sizeof v2);
        cr_assert_eq(params_v1(first_node(a), &v1), CUDA_SUCCESS, "%s", way[i]);
        cr_assert_eq(params_v2(first_node(a), &v2), CUDA_SUCCESS, "%s", way[i]);
        cr_assert_not_null(v1.func, "%s: the CUDA 10.0 read names no function", way[i]);
        cr_assert_eq(v1.func, v2.func, "%s: the reads name functions %p and %p", way[i], (void *)v1.func, (void *)v2.func);
        cr_assert_eq(cucap_builder_complete(a, NULL, &exec, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_exec_update(exec, same, &why), CUDA_SUCCESS, "%s: %s", way[i], cucap_error_message(why));
        run(exec);
        cr_assert_eq(read_out(&k, 0).v, 7, "%s", way[i]);
        cr_assert_eq(cucap_exec_update(exec, other, &why), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "%s to %s: %s", way[i],
                     way[i ^ 1], cucap_error_message(why));
        cr_assert(strstr(cucap_error_message(why), "another function"), "%s", cucap_error_message(why));
        cucap_error_free(why);
        cucap_exec_destroy(exec);
        cucap_builder_destroy(a);
        cucap_builder_destroy(same);
        cucap_builder_destroy(other);
    }
    for (i = 0; i < 2; i++)
        library_unload(library[i]);
    unload(second);
    unload_store(&k);
}

TestSuite(kernels_fault_gpu, .init = fault_gpu_setup, .fini = gpu_teardown, .timeout = 60);

/* What an update reads of each kernel node's launch attributes: cluster
 * dimensions and memory synchronization domain (the priority and the
 * cooperative launch too below drivers measured to check them); the scheduling
 * policy and preferred cluster size only where cluster dimensions are
 * set, and the latter only while the driver reads it back (the driver of
 * 2026 refuses every read of it, at about 840 ns each: read for every
 * node, a decode step of 224-448 kernels re-captured and updated a token
 * ran 1.11 times hand-written code). */
Test(kernels_fault_gpu, an_update_reads_only_the_launch_attributes_that_matter)
{
    PFN_cuGraphKernelNodeGetAttribute_v11000 get =
        (PFN_cuGraphKernelNodeGetAttribute_v11000)cucap_driver_entry_point("cuGraphKernelNodeGetAttribute");
    struct store_kernel k = load_store();
    enum { KERNELS = 16 };
    CUlaunchAttribute cluster;
    CUlaunchAttributeValue value;
    cucap_builder *a, *b;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    long before, per_node;
    int preferred_readable, older;

    cr_assert_not_null(get);
    a = capture_with(&k, KERNELS, NULL, 0);
    b = capture_with(&k, KERNELS, NULL, 0);
    cr_assert_eq(cucap_builder_complete(a, NULL, &exec, NULL), CUDA_SUCCESS);
    before = calls("cuGraphKernelNodeGetAttribute");
    cr_assert_eq(cucap_exec_update(exec, b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    /* 2 a node (4 below the driver measured to refuse a change of priority
     * and of cooperative launch itself), one more where the driver reads a
     * plain node's cluster dimensions back as 1x1x1, and at most one refused
     * read before the library stops asking; reading every attribute was 6 */
    older = cucap_driver_version() < 13000;
    cr_assert_leq(calls("cuGraphKernelNodeGetAttribute") - before, (3 + 2 * older) * KERNELS + 1,
                  "plain kernels: %ld attribute reads for %d nodes", calls("cuGraphKernelNodeGetAttribute") - before,
                  KERNELS);
    cucap_exec_destroy(exec);
    exec = NULL;
    cucap_builder_destroy(a);
    cucap_builder_destroy(b);

    memset(&cluster, 0, sizeof cluster);
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = 2;
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
    a = capture_with(&k, KERNELS, &cluster, 1);
    b = capture_with(&k, KERNELS, &cluster, 1);
#if CUDA_VERSION >= 12080
    preferred_readable = get(first_node(a), CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, &value) == CUDA_SUCCESS;
#else
    preferred_readable = 0;
    (void)value;
    (void)first_node;
#endif
    cr_assert_eq(cucap_builder_complete(a, NULL, &exec, NULL), CUDA_SUCCESS);
    before = calls("cuGraphKernelNodeGetAttribute");
    cr_assert_eq(cucap_exec_update(exec, b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    per_node = 3 + preferred_readable + 2 * older;
    cr_assert_eq(calls("cuGraphKernelNodeGetAttribute") - before, per_node * KERNELS,
                 "clustered kernels: %ld attribute reads for %d nodes, %ld each expected",
                 calls("cuGraphKernelNodeGetAttribute") - before, KERNELS, per_node);
    run(exec);
    cr_assert_eq(read_out(&k, 0).v, 7);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(a);
    cucap_builder_destroy(b);
    unload_store(&k);
}
