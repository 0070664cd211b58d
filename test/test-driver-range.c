/* One build, every driver from CUDA 12.3 up: the library built against
 * these headers, on the simulated driver reporting 12.3, 12.4, 12.8 and
 * 13.0 (each test is a process of its own, so each loads the driver
 * anew).  Below 12.8, IF-ELSE and SWITCH are refused naming 12.8; all
 * else works on every version. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucapture.h"
#include "sim-env.h"
#include "test-driver.h"

static CUcontext ctx;

static void at_version(const char *version)
{
    cucap_error *err = NULL;

    use_simulated_driver();
    cr_assert_eq(setenv("CUDASIM_DRIVER_VERSION", version, 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_driver_version(), atoi(version));
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

/* A fork/join capture with a pool allocation, an IF and a WHILE node, run. */
static void everything_of_the_floor(void)
{
    cucap_builder *b = NULL, *f = NULL, *then_body = NULL, *loop = NULL, *other = NULL;
    CUgraphConditionalHandle c, w;
    cucap_pool *pool = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr d = 0, scratch = 0;
    CUstream s = NULL;
    unsigned char host[64];

    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_pool(0, &pool, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(b, 2, &f, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(f), &scratch, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_pool_free(pool, scratch, cucap_builder_stream(f), NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 32, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ b, f }, 2, NULL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &then_body, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_create_condition(b, 0, 1, &w, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_while(b, w, &loop, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(then_body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 32, 2, 32, cucap_builder_stream(then_body)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(then_body, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[0], 1);
    cr_assert_eq(host[63], 2, "the IF body ran");
    /* a builder on a borrowed stream (cuStreamGetCtx_v2 before 12.5 falls back) */
    cr_assert_eq(cucap_builder_create_on_stream(s, &other, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_builder_destroy(other);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(loop);
    cucap_builder_destroy(then_body);
    cucap_builder_destroy(f);
    cucap_builder_destroy(b);
    D.cuStreamDestroy(s);
    D.cuMemFree(d);
}

/* IF-ELSE and SWITCH: refused before 12.8, naming it; working from it. */
static void two_body_nodes(int supported)
{
    cucap_builder *b = NULL, *bodies[2] = { NULL, NULL };
    CUgraphConditionalHandle c;
    cucap_error *err = NULL;
    CUresult rc;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(b, 0, 1, &c, NULL), CUDA_SUCCESS);
    rc = cucap_builder_if_else(b, c, &bodies[0], &bodies[1], &err);
    if (!supported) {
        cr_assert_eq(rc, CUDA_ERROR_NOT_SUPPORTED);
        cr_assert_not_null(strstr(cucap_error_message(err), "CUDA 12.8"), "%s", cucap_error_message(err));
        cucap_error_free(err);
        err = NULL;
        cr_assert_eq(cucap_builder_switch(b, c, 2, bodies, &err), CUDA_ERROR_NOT_SUPPORTED);
        cr_assert_not_null(strstr(cucap_error_message(err), "CUDA 12.8"), "%s", cucap_error_message(err));
        cucap_error_free(err);
        cr_assert_null(bodies[0]);
    } else {
        cr_assert_eq(rc, CUDA_SUCCESS, "%s", cucap_error_message(err));
        cucap_builder_destroy(bodies[0]);
        cucap_builder_destroy(bodies[1]);
    }
    cucap_builder_destroy(b);
}

Test(driver_range, cuda_12_3)
{
    at_version("12030");
    everything_of_the_floor();
    two_body_nodes(0);
}

Test(driver_range, cuda_12_4)
{
    at_version("12040");
    everything_of_the_floor();
    two_body_nodes(0);
}

Test(driver_range, cuda_12_8)
{
    at_version("12080");
    everything_of_the_floor();
    two_body_nodes(1);
}

Test(driver_range, cuda_13_0)
{
    at_version("13000");
    everything_of_the_floor();
    two_body_nodes(1);
}

Test(driver_range, entry_points_by_version)
{
    at_version("12040");
    cr_assert_not_null(cucap_driver_entry_point("cuStreamGetCtx"), "at 12.3's ABI on a 12.4 driver");
    cr_assert_not_null(cucap_driver_entry_point_version("cuStreamGetCtx", 9020));
    cr_assert_null(cucap_driver_entry_point_version("cuStreamGetCtx", 12050), "newer than the driver: NULL");
    cr_assert_null(cucap_driver_entry_point_version("cuStreamGetCtx", 0));
    cr_assert_null(cucap_driver_entry_point_version(NULL, 12030));
    cr_assert_null(cucap_driver_entry_point_version("cuNoSuchThing", 12030));
}
