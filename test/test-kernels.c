/* Named kernels (cucap_builder_name_kernel, cucap_exec_set_kernel_arg):
 * what jacobiCudaGraphs does by walking the graph for its kernel nodes
 * and calling cudaGraphExecKernelNodeSetParams, with the sizes checked.
 * The refusals on the simulated driver and the GPU; the kernels on the
 * GPU (the simulator runs no kernels). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend.h"

BACKEND_SUITES(kernels, 60);
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

BACKEND_TEST(kernels, naming_refuses_what_is_not_a_kernel_just_launched)
{
    cucap_builder *b = NULL, *body = NULL;
    CUgraphConditionalHandle c;
    CUdeviceptr d = 0;
    char long_name[80];

    memset(long_name, 'k', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_kernel(b, "k", &why), CUDA_ERROR_ILLEGAL_STATE, "not capturing");
    REFUSED(cucap_builder_name_kernel(NULL, "k", &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    cucap_builder_destroy(b);
    b = capturing();
    REFUSED(cucap_builder_name_kernel(b, "k", &why), CUDA_ERROR_INVALID_VALUE, "captured nothing");
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_kernel(b, "k", &why), CUDA_ERROR_INVALID_VALUE, "a memset node, not a kernel");
    REFUSED(cucap_builder_name_kernel(b, NULL, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_builder_name_kernel(b, "", &why), CUDA_ERROR_INVALID_VALUE, "empty");
    REFUSED(cucap_builder_name_kernel(b, long_name, &why), CUDA_ERROR_INVALID_VALUE, "longer than 63");
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    REFUSED(cucap_builder_name_kernel(body, "k", &why), CUDA_ERROR_NOT_SUPPORTED, "conditional body");
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CAPTURING, "a refusal leaves the capture alone");
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(body);
    cucap_builder_destroy(b);
    D.cuMemFree(d);
}

BACKEND_TEST(kernels, an_executable_graph_without_names_refuses_every_argument)
{
    cucap_builder *b = capturing();
    cucap_exec *exec = NULL;
    int v = 1;

    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_SUCCESS);
    REFUSED(cucap_exec_set_kernel_arg(exec, "k", 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "named no kernel \"k\"");
    REFUSED(cucap_exec_set_kernel_arg(NULL, "k", 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    REFUSED(cucap_exec_set_kernel_arg(exec, NULL, 0, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "NULL");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
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
        cr_assert_eq(cucap_builder_name_kernel(b, name, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
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
    REFUSED(cucap_builder_name_kernel(fork, "first", &why), CUDA_ERROR_INVALID_VALUE, "already has a kernel");
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
    cr_assert_eq(D.cuMemsetD8(k.out[1], 0, sizeof s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    run(exec);
    s = read_out(&k, 1);
    cr_assert(s.v == 0 && s.w == 0, "the second kernel writes elsewhere now");
    s = read_out(&k, 2);
    cr_assert(s.v == 3 && s.w == w, "the second kernel, its pointer and w changed: %u %llx", s.v,
              (unsigned long long)s.w);

    REFUSED(cucap_exec_set_kernel_arg(exec, "first", 1, &w, sizeof w, &why), CUDA_ERROR_INVALID_VALUE, "parameter 1 of kernel \"first\" is 4 bytes, not 8");
    REFUSED(cucap_exec_set_kernel_arg(exec, "first", 3, &v, sizeof v, &why), CUDA_ERROR_INVALID_VALUE, "has 3 parameters");

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
            "named no kernel \"only\"");
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

/* store(out[which], v, w) on b's stream in a grid of 2 blocks with
 * clusters of cluster blocks (a launch attribute). */
static void launch_store_clustered(struct store_kernel *k, cucap_builder *b, int which, uint32_t v, uint64_t w,
                                   unsigned int cluster)
{
    PFN_cuLaunchKernelEx_v11060 launch = (PFN_cuLaunchKernelEx_v11060)cucap_driver_entry_point("cuLaunchKernelEx");
    void *args[3] = { &k->out[which], &v, &w };
    CUlaunchAttribute attr;
    CUlaunchConfig cfg;

    cr_assert_not_null(launch);
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 2;
    cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = cucap_builder_stream(b);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    cr_assert_eq(launch(&cfg, k->f, args, NULL), CUDA_SUCCESS);
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
