/* Library suites run the same tests on the simulated driver and on the
 * real one:
 *     BACKEND_TEST(pool, name) { ...body using ctx, dev and D... }
 * defines pool_sim::name (always runs) and pool_gpu::name (skips without a
 * GPU, fails without one under CUCAPTURE_REQUIRE_GPU=1). */
#ifndef CUCAPTURE_TEST_BACKEND_H
#define CUCAPTURE_TEST_BACKEND_H

#include <criterion/criterion.h>
#include <string.h>

#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"
#include "error-names.h"
#include "error.h"
#include "cucapture.h"
#include "fault-env.h"
#include "gpu.h"
#include "sim-env.h"


static inline void sim_setup(void)
{
    cucap_error *err = NULL;

    use_simulated_driver();
    cr_assert_eq(cucap_init(&err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    gpu_make_current();
}

/* Live simulator objects once the library's stream and event cache is
 * emptied (cached streams are the library's, not leaks). */
static inline long sim_live_settled(const char *kind)
{
    cucap_release_cached();
    return sim_live(kind);
}

/* The simulated driver, directly or under the fault layer. */
static inline int on_simulator(void)
{
    const char *d = getenv("CUCAPTURE_DRIVER"), *fault = getenv("CUCAPTURE_TEST_FAULT");

    if (d && fault && !strcmp(d, fault))
        d = getenv("CUDAFAULT_DRIVER");
    return d && strstr(d, "libcudasim") != NULL;
}

#define BACKEND_SUITES(suite, timeout_s)                                                        \
    TestSuite(suite##_sim, .init = sim_setup, .fini = gpu_teardown, .timeout = timeout_s);      \
    TestSuite(suite##_gpu, .init = gpu_setup, .fini = gpu_teardown, .timeout = timeout_s)

#define BACKEND_TEST(suite, name)                                                               \
    static void suite##_##name##_body(void);                                                    \
    Test(suite##_sim, name) { suite##_##name##_body(); }                                        \
    Test(suite##_gpu, name) { suite##_##name##_body(); }                                        \
    static void suite##_##name##_body(void)

/* The same over the fault-injecting driver, forwarding to each backend:
 * suite_fault_sim::name and suite_fault_gpu::name. */
static inline void fault_sim_setup(void)
{
    cucap_error *err = NULL;

    use_fault_driver_over(sim_path());
    cr_assert_eq(cucap_init(&err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    gpu_make_current();
}

static inline void fault_gpu_setup(void)
{
    use_fault_driver_over(NULL);
    gpu_require_driver_library();
    gpu_require_loaded();
    gpu_make_current();
}

#define FAULT_BACKEND_SUITES(suite, timeout_s)                                                  \
    TestSuite(suite##_fault_sim, .init = fault_sim_setup, .fini = gpu_teardown, .timeout = timeout_s); \
    TestSuite(suite##_fault_gpu, .init = fault_gpu_setup, .fini = gpu_teardown, .timeout = timeout_s)

#define FAULT_BACKEND_TEST(suite, name)                                                         \
    static void suite##_##name##_fault_body(void);                                              \
    Test(suite##_fault_sim, name) { suite##_##name##_fault_body(); }                            \
    Test(suite##_fault_gpu, name) { suite##_##name##_fault_body(); }                            \
    static void suite##_##name##_fault_body(void)

/* ---------------------------------------------------------------- driver helpers */

static inline CUstream new_stream(void)
{
    CUstream s = NULL;
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

static inline CUstreamCaptureStatus capture_status(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(D.cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    return st;
}

/* The calling thread's capture mode, read by exchanging it twice. */
static inline CUstreamCaptureMode thread_mode(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED, back;
    cr_assert_eq(D.cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    back = mode;
    cr_assert_eq(D.cuThreadExchangeStreamCaptureMode(&back), CUDA_SUCCESS);
    return mode;
}

static inline void set_thread_mode(CUstreamCaptureMode mode)
{
    cr_assert_eq(D.cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
}

/* Instantiate, launch on s, synchronize, destroy the exec. */
static inline void run_graph(CUgraph g, CUstream s)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec exec = NULL;

    memset(&params, 0, sizeof params);
    cr_assert_eq(D.cuGraphInstantiateWithParams(&exec, g, &params), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphLaunch(exec, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphExecDestroy(exec), CUDA_SUCCESS);
}

static inline int count_nodes(CUgraph g, CUgraphNodeType type)
{
    CUgraphNode nodes[256];
    size_t n = 256, i;
    int found = 0;

    cr_assert_eq(D.cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    for (i = 0; i < n && i < 256; i++) {
        CUgraphNodeType t;
        cr_assert_eq(D.cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        found += t == type;
    }
    return found;
}

static const CUstreamCaptureMode all_modes[3] = {
    CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED,
};

#endif
