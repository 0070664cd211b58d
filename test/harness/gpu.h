/* Fixtures for suites that need the real driver and a GPU.
 *
 * Without a driver or a usable device the suite skips with the reason;
 * with CUCAPTURE_REQUIRE_GPU=1 it fails instead, so a GPU host can never
 * pass by skipping.  Use as:
 *     TestSuite(name, .init = gpu_setup, .fini = gpu_teardown, .timeout = 60);
 */
#ifndef CUCAPTURE_TEST_GPU_H
#define CUCAPTURE_TEST_GPU_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"

static CUcontext gpu_context;
static CUdevice gpu_device;

static inline int gpu_required(void)
{
    const char *s = getenv("CUCAPTURE_REQUIRE_GPU");
    return s && strcmp(s, "1") == 0;
}

/* The codes that mean "this host has no usable GPU", not "the library is broken". */
static inline int gpu_absent(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:   /* no libcuda.so.1 */
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_NOT_SUPPORTED:               /* a driver older than the headers */
        return 1;
    default:
        return 0;
    }
}

/* Skip, or fail under CUCAPTURE_REQUIRE_GPU=1, when the driver that
 * CUCAPTURE_DRIVER names (a layer over the real one) and a device cannot be
 * used; otherwise the driver is initialised. */
static inline void gpu_require_loaded(void)
{
    cucap_error *err = NULL;
    CUresult rc;

    rc = cucap_init(&err);
    if (rc != CUDA_SUCCESS) {
        char reason[1024];
        strncpy(reason, cucap_error_message(err), sizeof reason - 1);
        reason[sizeof reason - 1] = '\0';
        cucap_error_free(err);
        if (gpu_absent(rc) && !gpu_required())
            cr_skip_test("no usable CUDA GPU: %s", reason);
        /* in .init this shows only as "unexpected signal"; gpu_presence
         * in test-gpu-smoke.c fails the same way in a test body, with the reason */
        cr_assert_fail("CUCAPTURE_REQUIRE_GPU=1 but the GPU is unusable: %s", reason);
    }
}

/* For the fault layer over the real driver: it forwards to libcuda.so.1,
 * so where that cannot be loaded the test skips saying so (rather than
 * naming the fault layer's own load failure). */
static inline void gpu_require_driver_library(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    char reason[1024];

    if (h) {
        dlclose(h);
        return;
    }
    snprintf(reason, sizeof reason, "%s", dlerror());
    if (!gpu_required())
        cr_skip_test("no usable CUDA GPU: no CUDA driver here (the fault layer forwards to libcuda.so.1, which "
                     "cannot be loaded: %s)", reason);
    cr_assert_fail("CUCAPTURE_REQUIRE_GPU=1 but libcuda.so.1 cannot be loaded: %s", reason);
}

/* The same for the real driver itself, never the simulator. */
static inline void gpu_require(void)
{
    unsetenv("CUCAPTURE_DRIVER");
    gpu_require_loaded();
}

/* Retain device 0's primary context and make it current. */
static inline void gpu_make_current(void)
{
    cr_assert_eq(D.cuDeviceGet(&gpu_device, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&gpu_context, gpu_device), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(gpu_context), CUDA_SUCCESS);
}

static inline void gpu_setup(void)
{
    gpu_require();
    gpu_make_current();
}

static inline void gpu_teardown(void)
{
    if (gpu_context) {
        D.cuCtxSetCurrent(NULL);
        D.cuDevicePrimaryCtxRelease(gpu_device);
        gpu_context = NULL;
    }
}

#endif
