/* Smoke test of the real driver through the library's driver table:
 * skipped without a GPU, required with CUCAPTURE_REQUIRE_GPU=1. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu.h"
#include "test-driver.h"

TestSuite(gpu_smoke, .init = gpu_setup, .fini = gpu_teardown, .timeout = 60);

/* The same check as the fixture, in a test body, so that a required GPU
 * that is missing fails with its reason in the TAP log. */
Test(gpu_presence, real_driver_and_device_usable, .timeout = 60)
{
    int count = 0;

    gpu_require();
    cr_assert_eq(D.cuDeviceGetCount(&count), CUDA_SUCCESS);
    cr_assert_geq(count, 1);
}

Test(gpu_smoke, driver_and_device)
{
    char name[256] = "";
    int count = 0;

    cr_assert_geq(cucap_driver_version(), CUDA_VERSION);
    cr_assert_eq(D.cuDeviceGetCount(&count), CUDA_SUCCESS);
    cr_assert_geq(count, 1);
    cr_assert_eq(D.cuDeviceGetName(name, sizeof name, gpu_device), CUDA_SUCCESS);
    cr_assert_neq(name[0], '\0');
    cr_log_info("device 0: %s, driver %d", name, cucap_driver_version());
}

/* Every entry of the library's table resolves on this driver at its
 * declared version, to what the table holds; and one version earlier the
 * driver gives another variant or none, so the declared version is the
 * one that introduced the variant (a version typed too high cannot hide;
 * one matching no cudaTypedefs.h type does not compile). */
static void check_entry(const char *symbol, int version, int optional, const void *field, size_t size)
{
    void *in_table = NULL, *at = cucap_i_driver_entry_point_at(symbol, version);
    void *before = cucap_i_driver_entry_point_at(symbol, version - 10);

    memcpy(&in_table, field, size);
    if (optional && cucap_driver_version() < version) {
        cr_expect_null(in_table, "%s@%d is set on a CUDA %d driver", symbol, version, cucap_driver_version());
        return;
    }
    cr_expect_not_null(at, "%s does not resolve at %d", symbol, version);
    cr_expect_eq(at, in_table, "%s@%d: the table holds another function", symbol, version);
    cr_expect_neq(before, at, "%s is the same function at %d and %d: the variant is older than declared", symbol,
                  version - 10, version);
}

Test(gpu_smoke, every_entry_point_resolved_at_its_declared_version)
{
#define CUCAP_DRIVER_ENTRY(field, symbol, version, optional)                                     \
    check_entry(#symbol, version, optional, &cucap_i_drv.field, sizeof cucap_i_drv.field);
#include "driver-entries.h"
#undef CUCAP_DRIVER_ENTRY
#define CUCAP_DRIVER_ENTRY(field, symbol, version, optional)                                     \
    check_entry(#symbol, version, optional, &D.field, sizeof D.field);
#include "test-driver-entries.h"
#undef CUCAP_DRIVER_ENTRY
}

Test(gpu_smoke, memset_round_trip)
{
    CUdeviceptr d = 0;
    unsigned char host[4096];
    size_t i;

    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0x5a, sizeof host), CUDA_SUCCESS);
    memset(host, 0, sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu is %#x", i, host[i]);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}

Test(gpu_smoke, captured_graph_runs)
{
    CUstream s = NULL;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUstreamCaptureStatus status;
    CUdeviceptr d = 0;
    unsigned char host[256];
    size_t i;

    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* the non-blocking stream does not wait for it */
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(D.cuMemsetD8Async(d, 0xc3, sizeof host, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_not_null(g);
    memset(&params, 0, sizeof params);
    params.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    cr_assert_eq(D.cuGraphInstantiateWithParams(&exec, g, &params), CUDA_SUCCESS);
    cr_assert_eq(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    cr_assert_eq(D.cuGraphLaunch(exec, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0xc3, "byte %zu is %#x", i, host[i]);
    cr_assert_eq(D.cuGraphExecDestroy(exec), CUDA_SUCCESS);
    cr_assert_eq(D.cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}
