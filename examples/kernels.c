/* kernels: libcucapture with real kernels.  It loads two kernels from PTX
 * (examples/kernels.cu), captures a 4-way fork/join of saxpy over the
 * quarters of a vector, then a WHILE loop whose body kernel counts down
 * and sets the loop's condition on the device, runs the graph twice and
 * checks every element.  Build it with
 *     cc kernels.c $(pkg-config --cflags --libs cucapture)
 * (kernels-ptx.h holds the PTX as a C string; scripts/ptx-to-c makes it.)
 * Exit status: 0 on success, 77 when no GPU can run kernels here (the
 * simulated driver runs none), 1 on any other failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#include "kernels-ptx.h"

#define N (1u << 20)
#define FORKS 4
#define ROUNDS 5u          /* times the WHILE body runs per launch */
#define A 2.0f

static struct {
    PFN_cuCtxSetCurrent_v4000 ctx_set_current;
    PFN_cuModuleLoadData_v2000 module_load_data;
    PFN_cuModuleGetFunction_v2000 module_get_function;
    PFN_cuModuleUnload_v2000 module_unload;
    PFN_cuLaunchKernel_v4000 launch_kernel;
    PFN_cuMemcpyHtoD_v3020 copy_to_device;
    PFN_cuMemcpyDtoH_v3020 copy_to_host;
    PFN_cuStreamSynchronize_v2000 stream_synchronize;
} drv;

static int report(const char *what, cucap_error *err)
{
    char *text = cucap_error_to_string(err);
    fprintf(stderr, "kernels: %s failed: %s: %s\n", what, cucap_error_name(err), text ? text : cucap_error_message(err));
    free(text);
    cucap_error_free(err);
    return 1;
}

static int driver_failed(const char *what, CUresult rc)
{
    fprintf(stderr, "kernels: %s failed: %s\n", what, cucap_result_name(rc));
    return 1;
}

static int resolve(void)
{
#define RESOLVE(field, symbol, type) (drv.field = (type)cucap_driver_entry_point(symbol)) != NULL
    return RESOLVE(ctx_set_current, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000) &&
           RESOLVE(module_get_function, "cuModuleGetFunction", PFN_cuModuleGetFunction_v2000) &&
           RESOLVE(module_unload, "cuModuleUnload", PFN_cuModuleUnload_v2000) &&
           RESOLVE(copy_to_device, "cuMemcpyHtoD", PFN_cuMemcpyHtoD_v3020) &&
           RESOLVE(copy_to_host, "cuMemcpyDtoH", PFN_cuMemcpyDtoH_v3020) &&
           RESOLVE(stream_synchronize, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000);
#undef RESOLVE
}

int main(void)
{
    cucap_builder *b = NULL, *forks[FORKS - 1] = { NULL, NULL, NULL }, *all[FORKS], *body = NULL;
    cucap_pool *pool = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUmodule module = NULL;
    CUfunction saxpy = NULL, countdown = NULL;
    CUgraphConditionalHandle loop;
    CUdeviceptr x = 0, y = 0, counter = 0;
    CUstream s;
    float *host = NULL;
    unsigned int quarter = N / FORKS, rounds = ROUNDS, threads = 256, i, run;
    int status = 1;
    CUresult rc;

    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "kernels: needs a GPU: no usable CUDA driver: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 77;
    }
    drv.module_load_data = (PFN_cuModuleLoadData_v2000)cucap_driver_entry_point("cuModuleLoadData");
    drv.launch_kernel = (PFN_cuLaunchKernel_v4000)cucap_driver_entry_point("cuLaunchKernel");
    if (!drv.module_load_data || !drv.launch_kernel) {
        fprintf(stderr, "kernels: needs a GPU: the driver loads no modules (the simulated driver runs no "
                "kernels)\n");
        return 77;
    }
    if (!resolve()) {
        fprintf(stderr, "kernels: the driver lacks an entry point this program needs\n");
        return 1;
    }
    if (cucap_device_pool(0, &pool, &err) != CUDA_SUCCESS)
        return report("cucap_device_pool", err);
    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return report("cucap_builder_create", err);
    s = cucap_builder_stream(b);
    /* the module and the memory live in the context the builder works in */
    if ((rc = drv.ctx_set_current(cucap_builder_context(b))) != CUDA_SUCCESS) {
        driver_failed("cuCtxSetCurrent", rc);
        goto out;
    }
    if ((rc = drv.module_load_data(&module, kernels_ptx)) != CUDA_SUCCESS) {
        fprintf(stderr, "kernels: needs a GPU that runs sm_90 PTX: cuModuleLoadData failed: %s\n",
                cucap_result_name(rc));
        status = 77;
        goto out;
    }
    if ((rc = drv.module_get_function(&saxpy, module, "saxpy")) != CUDA_SUCCESS ||
        (rc = drv.module_get_function(&countdown, module, "countdown")) != CUDA_SUCCESS) {
        driver_failed("cuModuleGetFunction", rc);
        goto out;
    }
    if (!(host = malloc(N * sizeof *host)))
        goto out;
    /* x[i] = i, y[i] = 1, before the graph: ordinary pool allocations */
    if (cucap_pool_alloc(pool, N * sizeof(float), s, &x, &err) != CUDA_SUCCESS ||
        cucap_pool_alloc(pool, N * sizeof(float), s, &y, &err) != CUDA_SUCCESS ||
        cucap_pool_alloc(pool, sizeof(unsigned int), s, &counter, &err) != CUDA_SUCCESS) {
        report("cucap_pool_alloc", err);
        goto out;
    }
    drv.stream_synchronize(s);
    for (i = 0; i < N; i++)
        host[i] = (float)i;
    if ((rc = drv.copy_to_device(x, host, N * sizeof *host)) != CUDA_SUCCESS) {
        driver_failed("cuMemcpyHtoD", rc);
        goto out;
    }

    /* the graph: saxpy on four streams, joined, then the WHILE loop */
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS ||
        cucap_builder_split(b, FORKS, forks, &err) != CUDA_SUCCESS) {
        report("begin and split", err);
        goto out;
    }
    all[0] = b;
    for (i = 0; i < FORKS - 1; i++)
        all[i + 1] = forks[i];
    for (i = 0; i < FORKS; i++) {
        float a = A;
        unsigned int first = i * quarter;
        void *args[] = { &a, &x, &y, &first, &quarter };
        rc = drv.launch_kernel(saxpy, (quarter + threads - 1) / threads, 1, 1, threads, 1, 1, 0,
                               cucap_builder_stream(all[i]), args, NULL);
        if (rc != CUDA_SUCCESS) {
            driver_failed("cuLaunchKernel(saxpy)", rc);
            goto out;
        }
    }
    if (cucap_builder_join_forks(b, &err) != CUDA_SUCCESS ||
        cucap_builder_create_condition(b, 1, 1, &loop, &err) != CUDA_SUCCESS ||
        cucap_builder_while(b, loop, &body, &err) != CUDA_SUCCESS ||
        cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS) {
        report("join and the WHILE node", err);
        goto out;
    }
    {
        unsigned int n = N;
        void *args[] = { &y, &n, &counter, &loop };
        rc = drv.launch_kernel(countdown, (N + threads - 1) / threads, 1, 1, threads, 1, 1, 0,
                               cucap_builder_stream(body), args, NULL);
        if (rc != CUDA_SUCCESS) {
            driver_failed("cuLaunchKernel(countdown)", rc);
            goto out;
        }
    }
    if (cucap_builder_end(body, &err) != CUDA_SUCCESS || cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete(b, NULL, &exec, &err) != CUDA_SUCCESS) {
        report("end and complete", err);
        goto out;
    }

    /* run it twice: y = 1 -> A*x + 1 + ROUNDS -> A*x + (A*x + 1 + ROUNDS) + ROUNDS */
    for (i = 0; i < N; i++)
        host[i] = 1.0f;
    if ((rc = drv.copy_to_device(y, host, N * sizeof *host)) != CUDA_SUCCESS) {
        driver_failed("cuMemcpyHtoD", rc);
        goto out;
    }
    for (run = 0; run < 2; run++) {
        if ((rc = drv.copy_to_device(counter, &rounds, sizeof rounds)) != CUDA_SUCCESS) {
            driver_failed("cuMemcpyHtoD", rc);
            goto out;
        }
        if (cucap_exec_launch(exec, s, &err) != CUDA_SUCCESS) {
            report("cucap_exec_launch", err);
            goto out;
        }
        if ((rc = drv.stream_synchronize(s)) != CUDA_SUCCESS) {
            driver_failed("cuStreamSynchronize", rc);
            goto out;
        }
    }
    if ((rc = drv.copy_to_host(host, y, N * sizeof *host)) != CUDA_SUCCESS) {
        driver_failed("cuMemcpyDtoH", rc);
        goto out;
    }
    for (i = 0; i < N; i++) {
        float want = 2.0f * (A * (float)i) + 1.0f + 2.0f * (float)ROUNDS;
        if (host[i] != want) {
            fprintf(stderr, "kernels: y[%u] is %g, not %g\n", i, (double)host[i], (double)want);
            goto out;
        }
    }
    printf("kernels: %u elements right after a 4-way saxpy and %u device-driven WHILE rounds, twice\n", N,
           ROUNDS);
    status = 0;
out:
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    for (i = 0; i < FORKS - 1; i++)
        cucap_builder_destroy(forks[i]);
    if (x)
        cucap_pool_free(pool, x, s, NULL);
    if (y)
        cucap_pool_free(pool, y, s, NULL);
    if (counter)
        cucap_pool_free(pool, counter, s, NULL);
    if (module)
        drv.module_unload(module);
    if (b && drv.stream_synchronize)
        drv.stream_synchronize(s);
    cucap_builder_destroy(b);
    free(host);
    return status;
}
