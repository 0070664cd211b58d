/* cucapture: the library's main job from a shell.
 *   cucapture info       library, driver, devices and their default pools
 *   cucapture selftest   the capture scenarios users hit, one line each
 *   cucapture bench      the library against hand-written driver code */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

static void usage(FILE *to)
{
    fprintf(to,
            "Usage: cucapture COMMAND\n"
            "\n"
            "Commands:\n"
            "  info       print the library and driver versions, and each device with its\n"
            "             default memory pool's release threshold and what it supports\n"
            "  selftest   run the stream-capture scenarios of the test suite on this\n"
            "             machine's driver, one PASS or FAIL line each\n"
            "  bench      time the library against hand-written driver code, side by side\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this help and exit\n"
            "  -V, --version  show the version and exit\n"
            "\n"
            "Environment:\n"
            "  CUCAPTURE_DRIVER  the driver library to load instead of libcuda.so.1\n");
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
    if ((rc = D.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS || (rc = D.cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS ||
        (rc = D.cuCtxSetCurrent(*ctx)) != CUDA_SUCCESS) {
        fprintf(stderr, "cucapture %s: cannot use device 0: %s\n", command, cucap_i_result_label(rc));
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

static int info(void)
{
    cucap_error *err = NULL;
    int count = 0, dev;

    printf("libcucapture %s\n", cucap_version_string());
    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "cucapture info: no usable CUDA driver: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 1;
    }
    printf("driver: CUDA %d.%d (%d)\n", cucap_driver_version() / 1000, cucap_driver_version() % 1000 / 10,
           cucap_driver_version());
    D.cuDeviceGetCount(&count);
    printf("devices: %d\n", count);
    for (dev = 0; dev < count; dev++) {
        char name[256] = "?";
        int pools = 0, major = 0, minor = 0;
        cucap_pool *pool = NULL;
        cuuint64_t threshold = 0;
        CUmemoryPool handle = NULL;

        D.cuDeviceGetName(name, sizeof name, dev);
        D.cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
        D.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        D.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        printf("device %d: %s (compute capability %d.%d)\n", dev, name, major, minor);
        if (pools && D.cuDeviceGetMemPool(&handle, dev) == CUDA_SUCCESS &&
            D.cuMemPoolGetAttribute(handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) == CUDA_SUCCESS) {
            if (threshold == UINT64_MAX)
                printf("  default pool: release threshold UINT64_MAX (kept)\n");
            else
                printf("  default pool: release threshold %llu bytes%s\n", (unsigned long long)threshold,
                       threshold == 0 ? " (the driver's default: cucap_pool_open_default raises it)" : "");
        } else {
            printf("  default pool: %s\n", pools ? "unreadable" : "none (no memory pool support)");
        }
        (void)pool;
        printf("  memory pools: %s\n", pools ? "supported" : "not supported");
        printf("  conditional nodes: %s\n",
               cucap_driver_version() >= 12080 ? "IF, IF-ELSE, WHILE, SWITCH"
               : cucap_driver_version() >= 12030 ? "IF, WHILE" : "not supported");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("cucapture (libcucapture) %s\n", cucap_version_string());
        return 0;
    }
    if (!strcmp(argv[1], "info") && argc == 2)
        return info();
    if (!strcmp(argv[1], "selftest") && argc == 2)
        return tool_selftest();
    if (!strcmp(argv[1], "bench"))
        return tool_bench(argc - 1, argv + 1);
    fprintf(stderr, "cucapture: unknown command or extra arguments: '%s'\nTry 'cucapture --help'.\n", argv[1]);
    return 2;
}
