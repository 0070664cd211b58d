/* Green contexts of the simulated driver: SM resources, their split, and
 * green contexts whose converted CUcontext makes streams of the green
 * context (CUDA 12.4/12.5 behaviour, checked by the conformance rows). */
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_SM_COUNT 132             /* an H200's */
#define SIM_SM_MIN_PARTITION 8
#define SIM_GREEN_MAGIC 0x4e455247u

struct sim_green {
    uint32_t magic;
    unsigned int sm_count;
    struct sim_ctx ctx;              /* what cuCtxFromGreenCtx returns */
};

struct sim_desc {                    /* a CUdevResourceDesc */
    unsigned int sm_count;
};

struct sim_green *sim_green_of(CUgreenCtx g)
{
    struct sim_green *x = (struct sim_green *)g;
    return x && x->magic == SIM_GREEN_MAGIC ? x : NULL;
}

int sim_green_ctx_valid(const struct sim_ctx *c)
{
    return c && c->green && sim_green_of((CUgreenCtx)c->green) && &c->green->ctx == c;
}

static CUresult sim_cuDeviceGetDevResource(CUdevice dev, CUdevResource *result, CUdevResourceType type)
{
    if (!result || type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    memset(result, 0, sizeof *result);
    result->type = CU_DEV_RESOURCE_TYPE_SM;
    result->sm.smCount = SIM_SM_COUNT;
    return CUDA_SUCCESS;
}

static CUresult sim_cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *groups, const CUdevResource *input,
                                                CUdevResource *remaining, unsigned int flags, unsigned int min_count)
{
    unsigned int size, n, i;

    (void)flags;
    if (!groups || !input || input->type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_VALUE;
    size = min_count < SIM_SM_MIN_PARTITION ? SIM_SM_MIN_PARTITION : (min_count + 7) / 8 * 8;
    n = input->sm.smCount / size;
    if (result && *groups < n)
        n = *groups;
    for (i = 0; result && i < n; i++) {
        memset(&result[i], 0, sizeof result[i]);
        result[i].type = CU_DEV_RESOURCE_TYPE_SM;
        result[i].sm.smCount = size;
    }
    if (remaining) {
        memset(remaining, 0, sizeof *remaining);
        remaining->type = CU_DEV_RESOURCE_TYPE_SM;
        remaining->sm.smCount = input->sm.smCount - n * size;
    }
    *groups = n;
    return CUDA_SUCCESS;
}

static CUresult sim_cuDevResourceGenerateDesc(CUdevResourceDesc *out, CUdevResource *resources, unsigned int n)
{
    struct sim_desc *d;
    unsigned int i;

    if (!out || !resources || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(d = calloc(1, sizeof *d)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (i = 0; i < n; i++)
        if (resources[i].type == CU_DEV_RESOURCE_TYPE_SM)
            d->sm_count += resources[i].sm.smCount;
    sim_track(d);   /* the real driver keeps descriptors until the process ends */
    *out = (CUdevResourceDesc)d;
    return CUDA_SUCCESS;
}

static CUresult sim_cuGreenCtxCreate(CUgreenCtx *out, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    struct sim_green *g;
    CUcontext primary;

    (void)flags;
    if (!out || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    if (!(g = calloc(1, sizeof *g)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = SIM_GREEN_MAGIC;
    g->sm_count = ((struct sim_desc *)desc)->sm_count;
    g->ctx = *sim_ctx_of_device(dev);   /* the device's context, marked as this green context's */
    g->ctx.retain_count = 0;
    g->ctx.green = g;
    sim_retain_primary(dev, &primary);   /* as the real driver: the primary context lives while it does */
    sim_track(g);
    *out = (CUgreenCtx)g;
    return CUDA_SUCCESS;
}

static CUresult sim_cuGreenCtxDestroy(CUgreenCtx h)
{
    struct sim_green *g = sim_green_of(h);

    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_current_ctx() == &g->ctx)
        sim_clear_current_ctx();
    sim_release_primary(g->ctx.device);
    g->magic = 0;
    sim_untrack(g);
    free(g);
    return CUDA_SUCCESS;
}

static CUresult sim_cuCtxFromGreenCtx(CUcontext *out, CUgreenCtx h)
{
    struct sim_green *g = sim_green_of(h);

    if (!out || !g)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUcontext)&g->ctx;
    return CUDA_SUCCESS;
}

static CUresult sim_cuGreenCtxStreamCreate(CUstream *out, CUgreenCtx h, unsigned int flags, int priority)
{
    struct sim_green *g = sim_green_of(h);

    (void)priority;
    if (!out || !g || !(flags & CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    return sim_stream_create_in(&g->ctx, out, flags);
}

const struct sim_entry sim_green_entries[] = {
    SIM_ENTRY(cuDeviceGetDevResource, 12040),
    SIM_ENTRY(cuDevSmResourceSplitByCount, 12040),
    SIM_ENTRY(cuDevResourceGenerateDesc, 12040),
    SIM_ENTRY(cuGreenCtxCreate, 12040),
    SIM_ENTRY(cuGreenCtxDestroy, 12040),
    SIM_ENTRY(cuCtxFromGreenCtx, 12040),
    SIM_ENTRY(cuGreenCtxStreamCreate, 12050),
};
const size_t sim_green_entry_count = sizeof sim_green_entries / sizeof sim_green_entries[0];
