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

/* Whether the loaded driver h initialises and sees a device; if not, why.
 * The handle stays open: a driver that ran cuInit is not unloaded. */
static int usable_gpu(void *h, char *why, size_t size)
{
    CUresult (*init)(unsigned int) = NULL;
    CUresult (*count)(int *) = NULL;
    void *sym;
    int devices = 0;
    CUresult rc;

    if ((sym = dlsym(h, "cuInit")))
        memcpy(&init, &sym, sizeof sym);
    if ((sym = dlsym(h, "cuDeviceGetCount")))
        memcpy(&count, &sym, sizeof sym);
    if (!init || !count) {
        snprintf(why, size, "libcuda.so.1 has no cuInit or cuDeviceGetCount");
        return 0;
    }
    if ((rc = init(0)) != CUDA_SUCCESS) {
        snprintf(why, size, "libcuda.so.1 loads, but its cuInit says %s", cucap_result_name(rc));
        return 0;
    }
    if ((rc = count(&devices)) != CUDA_SUCCESS) {
        snprintf(why, size, "libcuda.so.1 loads, but its cuDeviceGetCount says %s", cucap_result_name(rc));
        return 0;
    }
    if (devices < 1) {
        snprintf(why, size, "libcuda.so.1 loads, but sees no device");
        return 0;
    }
    return 1;
}

int tool_fallback_to_simulator(const char *command, int require_gpu)
{
    const char *driver = getenv("CUCAPTURE_DRIVER"), *sim = simulated_driver(), *why;
    void *h;

    char why_text[512];

    if (driver && *driver)
        return 0;   /* the user chose */
    if ((h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) {
        if (usable_gpu(h, why_text, sizeof why_text))
            return 0;   /* a CUDA driver with a device */
        why = why_text;   /* a driver without a usable device, as on a build machine: no GPU either */
    } else {
        why = dlerror();
        snprintf(why_text, sizeof why_text, "libcuda.so.1 cannot be loaded: %s", why ? why : "dlopen failed");
        why = why_text;
    }
    if (require_gpu) {
        fprintf(stderr, "cucapture %s: no usable GPU (%s), and a GPU is required\n", command, why);
        return -1;
    }
    if (access(sim, R_OK) != 0) {
        fprintf(stderr, "cucapture %s: no usable GPU (%s), and no simulated driver at %s\n", command, why, sim);
        return -1;
    }
    printf("cucapture %s: no usable GPU here (%s): the scenarios run on the simulated driver (%s), not on a "
           "GPU\n", command, why, sim);
    fflush(stdout);
    return setenv("CUCAPTURE_DRIVER", sim, 1) == 0 ? 1 : -1;
}
