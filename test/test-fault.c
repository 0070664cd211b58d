/* Fault injection through the forwarding driver (test/drivers/fault/), over the
 * simulated driver and over the real one. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "fault-env.h"
#include "gpu.h"
#include "sim-env.h"


/* A whole capture cycle through the driver table.  Returns the first
 * failing code (and stops there, cleaning up), CUDA_SUCCESS otherwise. */
static CUresult capture_cycle(void)
{
    CUstream s = NULL;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr d = 0;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    unsigned char host[64];
    CUresult rc;

    memset(&params, 0, sizeof params);
    if ((rc = D.cuMemAlloc(&d, sizeof host)) != CUDA_SUCCESS)
        return rc;
    if ((rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        goto out;
    if ((rc = D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL)) != CUDA_SUCCESS)
        goto out;
    rc = D.cuMemsetD8Async(d, 0x3e, sizeof host, s);
    {
        CUresult end = D.cuStreamEndCapture(s, &g);   /* always end what was begun */
        if (rc == CUDA_SUCCESS)
            rc = end;
    }
    if (rc != CUDA_SUCCESS)
        goto out;
    if ((rc = D.cuGraphInstantiateWithParams(&exec, g, &params)) != CUDA_SUCCESS)
        goto out;
    if ((rc = D.cuGraphLaunch(exec, s)) != CUDA_SUCCESS)
        goto out;
    if ((rc = D.cuStreamSynchronize(s)) != CUDA_SUCCESS)
        goto out;
    if ((rc = D.cuMemcpyDtoH(host, d, sizeof host)) != CUDA_SUCCESS)
        goto out;
    cr_assert_eq(host[0], 0x3e);
    cr_assert_eq(host[sizeof host - 1], 0x3e);
out:
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (g)
        D.cuGraphDestroy(g);
    if (s)
        D.cuStreamDestroy(s);
    D.cuMemFree(d);
    return rc;
}

/* Count the calls of the cycle, then fail each one in turn: each time
 * exactly that call fails and the cycle reports the injected code. */
static void fail_each_call_in_turn(void)
{
    long total, i;

    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(capture_cycle(), CUDA_SUCCESS);
    total = calls("*");
    cr_assert_geq(total, 10, "the cycle made only %ld driver calls", total);
    for (i = 1; i <= total; i++) {
        char rule[64];
        CUresult rc;
        snprintf(rule, sizeof rule, "*:%ld:CUDA_ERROR_LAUNCH_FAILED", i);
        cr_assert_eq(set_rules(rule), 0);
        rc = capture_cycle();
        cr_assert_eq(injected(), 1, "call %ld: %ld faults injected", i, injected());
        /* the cleanup calls at the end report nothing; the others surface */
        if (rc != CUDA_SUCCESS)
            cr_assert_eq(rc, CUDA_ERROR_LAUNCH_FAILED, "call %ld gave %d", i, rc);
    }
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(capture_cycle(), CUDA_SUCCESS, "the driver works again once the rules are gone");
}

/* ---------------------------------------------------------------- over the simulator */

static void over_sim(void)
{
    use_fault_driver_over(sim_path());
}

TestSuite(fault_sim, .init = over_sim, .timeout = 60);

Test(fault_sim, forwards_untouched_without_rules)
{
    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_driver_version(), CUDASIM_DEFAULT_DRIVER_VERSION);
    cr_assert_eq(calls("cuInit"), 1);
    cr_assert_eq(injected(), 0);
}

Test(fault_sim, rule_from_the_environment_fails_cuInit)
{
    cucap_error *err = NULL;

    cr_assert_eq(setenv("CUDAFAULT_RULES", "cuInit:1:CUDA_ERROR_UNKNOWN", 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_ERROR_UNKNOWN);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuInit"), "%s", cucap_error_message(err));
    cr_assert_eq(injected(), 1);
    cucap_error_free(err);
}

Test(fault_sim, nth_call_of_a_named_entry_point)
{
    CUcontext ctx;
    CUstream s[3] = { NULL, NULL, NULL };

    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuStreamCreate:2:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(D.cuStreamCreate(&s[0], 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamCreate(&s[1], 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_null(s[1], "a failed call must not have reached the driver");
    cr_assert_eq(D.cuStreamCreate(&s[2], 0), CUDA_SUCCESS);
    cr_assert_eq(calls("cuStreamCreate"), 3);
    cr_assert_eq(sim_live("stream"), 2);
    D.cuStreamDestroy(s[0]);
    D.cuStreamDestroy(s[2]);
}

Test(fault_sim, malformed_rules_are_refused)
{
    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules("bogus"), -1);
    cr_assert_eq(set_rules("cuNoSuchCall:1:1"), -1);
    cr_assert_eq(set_rules("cuInit:0:1"), -1);
    cr_assert_eq(set_rules("cuInit:1:CUDA_ERROR_NO_SUCH_NAME"), -1);
    cr_assert_eq(set_rules("cuInit:1:999,*:4:CUDA_ERROR_UNKNOWN"), 0);
}

Test(fault_sim, every_call_of_a_capture_cycle_fails_in_turn)
{
    CUcontext ctx;

    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    fail_each_call_in_turn();
    /* what remains is exactly what the failed destroy and free calls left */
    cr_assert_eq(sim_live("stream"), 1);
    cr_assert_eq(sim_live("graph"), 1);
    cr_assert_eq(sim_live("exec"), 1);
    cr_assert_eq(sim_live("allocation"), 1);
}

/* ---------------------------------------------------------------- over the real driver */

static void over_gpu(void)
{
    use_fault_driver_over(NULL);   /* libcuda.so.1 */
    gpu_require_driver_library();
    gpu_require_loaded();
    gpu_make_current();
}

TestSuite(fault_gpu, .init = over_gpu, .fini = gpu_teardown, .timeout = 120);

Test(fault_gpu, nth_cuMemAlloc_fails_and_the_next_reaches_the_gpu)
{
    CUdeviceptr d = 0;
    unsigned char host[16];

    cr_assert_eq(set_rules("cuMemAlloc:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(D.cuMemAlloc(&d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0x11, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[5], 0x11);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}

Test(fault_gpu, every_call_of_a_capture_cycle_fails_in_turn)
{
    fail_each_call_in_turn();
}

/* A join of forks active in the root's capture adds their capture
 * dependencies to the root: no event recorded or waited on; a failure of
 * that call is reported under its name. */
Test(fault_sim, join_of_active_forks_uses_capture_dependencies)
{
    cucap_builder *p = NULL, *forks[4], *all[5];
    cucap_error *err = NULL;
    CUdeviceptr d = 0;
    long records, waits, adds;
    size_t i;

    cr_assert_eq(cucap_builder_create(0, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(D.cuCtxSetCurrent(cucap_builder_context(p)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&d, 64), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 5, forks, NULL), CUDA_SUCCESS);
    all[0] = p;
    for (i = 0; i < 4; i++) {
        all[i + 1] = forks[i];
        /* every other fork does work: an idle one has nothing the root lacks */
        if (i % 2 == 0)
            cr_assert_eq(D.cuMemsetD8Async(d + i, 1, 1, cucap_builder_stream(forks[i])), CUDA_SUCCESS);
    }
    records = calls("cuEventRecord");
    waits = calls("cuStreamWaitEvent");
    adds = calls("cuStreamUpdateCaptureDependencies");
    cr_assert_eq(cucap_builder_join(all, 5, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(calls("cuEventRecord"), records, "join recorded events");
    cr_assert_eq(calls("cuStreamWaitEvent"), waits, "join waited on events");
    cr_assert_eq(calls("cuStreamUpdateCaptureDependencies"), adds + 1, "one call adds every fork's dependencies");
    cr_assert_eq(cucap_builder_end(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_close(p, NULL), CUDA_SUCCESS);

    cr_assert_eq(cucap_builder_create(0, &p, NULL), CUDA_SUCCESS);
    all[0] = p;
    cr_assert_eq(cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(p, 3, forks, NULL), CUDA_SUCCESS);
    all[1] = forks[0];
    all[2] = forks[1];
    cr_assert_eq(D.cuMemsetD8Async(d, 1, 1, cucap_builder_stream(forks[0])), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuStreamUpdateCaptureDependencies:1:CUDA_ERROR_ILLEGAL_STATE"), 0);
    cr_assert_eq(cucap_builder_join(all, 3, NULL, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuStreamUpdateCaptureDependencies"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(set_rules(""), 0);
    cucap_builder_end(p, NULL);
    cr_assert_eq(cucap_builder_close(p, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(d), CUDA_SUCCESS);
}
