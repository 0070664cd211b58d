/* The device's graph memory: what the driver reports of the memory that
 * graphs' allocation nodes use and keep reserved, and the trim that gives
 * the unused part back.  The public calls make the device's primary
 * context current (a thread needs none of its own) and run in relaxed
 * thread mode, so no capture of another thread refuses them. */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "context-hold.h"
#include "driver.h"
#include "error.h"
#include "graph-memory.h"

size_t cucap_i_graph_memory_reserved(CUdevice dev, size_t fallback)
{
    cuuint64_t reserved = 0;

    if (cucap_i_drv.cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
        CUDA_SUCCESS)
        return fallback;
    return (size_t)reserved;
}

CUresult cucap_i_graph_memory_trim(CUdevice dev)
{
    return cucap_i_drv.cuDeviceGraphMemTrim(dev);
}

/* The work of a public call on dev, in its primary context and relaxed
 * mode. */
static CUresult on_device(CUdevice dev, CUresult (*work)(CUdevice dev, void *arg, const char *caller,
                                                         cucap_error **err),
                          void *arg, const char *caller, cucap_error **err)
{
    struct cucap_work_scope w;
    struct ctx_hold *hold = NULL;
    CUresult rc;

    if ((rc = cucap_i_ctx_hold_primary(dev, &hold, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_work_enter(&w, hold->ctx, caller, err)) == CUDA_SUCCESS) {
        rc = work(dev, arg, caller, err);
        rc = cucap_i_work_leave(&w, rc, caller, err);
    }
    cucap_i_ctx_hold_release(hold);
    return rc;
}

static CUresult read_figures(CUdevice dev, void *arg, const char *caller, cucap_error **err)
{
    static const struct {
        CUgraphMem_attribute attr;
        size_t at;
    } figures[] = {
        { CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, offsetof(cucap_graph_memory, used) },
        { CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, offsetof(cucap_graph_memory, used_high) },
        { CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, offsetof(cucap_graph_memory, reserved) },
        { CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, offsetof(cucap_graph_memory, reserved_high) },
    };
    cucap_graph_memory *out = arg;
    cuuint64_t value;
    CUresult rc;
    size_t i;

    for (i = 0; i < sizeof figures / sizeof *figures; i++) {
        if ((rc = cucap_i_drv.cuDeviceGetGraphMemAttribute(dev, figures[i].attr, &value)) != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "cuDeviceGetGraphMemAttribute");
        *(uint64_t *)(void *)((char *)out + figures[i].at) = value;
    }
    return CUDA_SUCCESS;
}

static CUresult trim(CUdevice dev, void *arg, const char *caller, cucap_error **err)
{
    CUresult rc;

    (void)arg;
    if ((rc = cucap_i_graph_memory_trim(dev)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuDeviceGraphMemTrim");
    return CUDA_SUCCESS;
}

CUresult cucap_device_graph_memory(CUdevice dev, cucap_graph_memory *out, cucap_error **err)
{
    static const char caller[] = "cucap_device_graph_memory";
    cucap_graph_memory figures;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    memset(&figures, 0, sizeof figures);
    if ((rc = on_device(dev, read_figures, &figures, caller, err)) == CUDA_SUCCESS)
        *out = figures;
    return rc;
}

CUresult cucap_device_graph_memory_trim(CUdevice dev, cucap_error **err)
{
    return on_device(dev, trim, NULL, "cucap_device_graph_memory_trim", err);
}
