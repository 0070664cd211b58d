/* What the subcommands share: the driver entry points the program calls
 * itself, and device 0's primary context made current. */
#include "config.h"

#include <stdio.h>
#include <string.h>

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
