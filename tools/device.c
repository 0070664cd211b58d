/* What the subcommands share: the driver entry points the program calls
 * itself, and device 0's primary context made current. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tool.h"

struct tool_driver tool_drv;

int tool_driver_load(const char *command)
{
    cucap_driver_fn fn;

#define TOOL_DRIVER_RESOLVE(name, type)                                                                   \
    if (!(fn = cucap_driver_entry_point(#name))) {                                                        \
        fprintf(stderr, "cucapture %s: the CUDA driver has no %s\n", command, #name);                     \
        return 1;                                                                                          \
    }                                                                                                      \
    tool_drv.name = (type)fn;
    TOOL_DRIVER_CALLS(TOOL_DRIVER_RESOLVE)
#undef TOOL_DRIVER_RESOLVE
    return 0;
}

int tool_open_device(const char *command, CUcontext *ctx)
{
    cucap_error *err = NULL;
    CUdevice dev;
    CUresult rc;

    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "cucapture %s: no usable CUDA driver: %s\n", command, cucap_error_message(err));
        cucap_error_free(err);
        return 1;
    }
    if (tool_driver_load(command) != 0)
        return 1;
    if ((rc = D.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS || (rc = D.cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS ||
        (rc = D.cuCtxSetCurrent(*ctx)) != CUDA_SUCCESS) {
        fprintf(stderr, "cucapture %s: cannot use device 0: %s\n", command, cucap_result_name(rc));
        return 1;
    }
    return 0;
}

void tool_close_device(CUcontext ctx)
{
    (void)ctx;
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
}

/* The installed simulated driver, or CUCAPTURE_SIMULATED_DRIVER (an
 * uninstalled build's: make selftest sets it). */
static const char *simulated_driver(void)
{
    const char *path = getenv("CUCAPTURE_SIMULATED_DRIVER");

    return path && *path ? path : CUCAP_SIMULATED_DRIVER;
}

int tool_on_simulator(void)
{
    const char *driver = getenv("CUCAPTURE_DRIVER");
    void *h;
    int simulated;

    if (!driver || !*driver)
        return 0;
    if (!strcmp(driver, "simulated"))
        return 1;
    if (!(h = dlopen(driver, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) && !(h = dlopen(driver, RTLD_LAZY | RTLD_LOCAL)))
        return 0;
    simulated = dlsym(h, "cudasim_live") != NULL;
    dlclose(h);
    return simulated;
}

int tool_fallback_to_simulator(const char *command, int require_gpu)
{
    const char *driver = getenv("CUCAPTURE_DRIVER"), *sim = simulated_driver(), *why;
    void *h;

    if (driver && *driver)
        return 0;   /* the user chose */
    if ((h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) {
        dlclose(h);
        return 0;   /* a CUDA driver is there */
    }
    why = dlerror();
    if (require_gpu) {
        fprintf(stderr, "cucapture %s: no CUDA driver (%s), and a GPU is required\n", command,
                why ? why : "libcuda.so.1 cannot be loaded");
        return -1;
    }
    if (access(sim, R_OK) != 0) {
        fprintf(stderr, "cucapture %s: no CUDA driver (%s), and no simulated driver at %s\n", command,
                why ? why : "libcuda.so.1 cannot be loaded", sim);
        return -1;
    }
    printf("cucapture %s: no CUDA driver here (libcuda.so.1 cannot be loaded): the scenarios run on the "
           "simulated driver (%s), not on a GPU\n", command, sim);
    fflush(stdout);
    return setenv("CUCAPTURE_DRIVER", sim, 1) == 0 ? 1 : -1;
}
