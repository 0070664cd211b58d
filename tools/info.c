/* cucapture info: the library, the driver, each device and its default
 * memory pool. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/tool.h"

int tool_info(void)
{
    cucap_error *err = NULL;
    int count = 0, dev;

    printf("libcucapture %s\n", cucap_version_string());
    if (cucap_init(&err) != CUDA_SUCCESS) {
        fprintf(stderr, "cucapture info: no usable CUDA driver: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return TOOL_CANNOT_RUN;
    }
    if (tool_driver_load("info") != 0)
        return TOOL_CANNOT_RUN;
    if (tool_on_simulator())
        printf("driver: the simulated driver of libcucapture (CUCAPTURE_DRIVER=%s): a model of the CUDA "
               "driver's capture behaviour on host memory, runs no kernels; not a GPU\n", getenv("CUCAPTURE_DRIVER"));
    printf("driver: CUDA %d.%d (%d)\n", cucap_driver_version() / 1000, cucap_driver_version() % 1000 / 10,
           cucap_driver_version());
    D.cuDeviceGetCount(&count);
    printf("devices: %d\n", count);
    for (dev = 0; dev < count; dev++) {
        char name[256] = "?";
        int pools = 0, major = 0, minor = 0;
        cucap_graph_memory graph_memory;
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
        if (cucap_device_graph_memory(dev, &graph_memory, NULL) == CUDA_SUCCESS)
            printf("  graph memory: %llu bytes used (at most %llu), %llu reserved (at most %llu)\n",
                   (unsigned long long)graph_memory.used, (unsigned long long)graph_memory.used_high,
                   (unsigned long long)graph_memory.reserved, (unsigned long long)graph_memory.reserved_high);
        else
            printf("  graph memory: unreadable\n");
        printf("  conditional nodes: %s\n",
               cucap_driver_version() >= 12080
                   ? (CUDA_VERSION >= 12080 ? "IF, IF-ELSE, WHILE, SWITCH"
                                            : "IF, IF-ELSE, WHILE (SWITCH: not in this build, made with CUDA headers "
                                              "older than 12.8)")
                   : "IF, WHILE");
    }
    return 0;
}
