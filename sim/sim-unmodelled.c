/* What the simulated driver does not do: it runs no kernels, and entry
 * points it does not model answer CUDA_ERROR_NOT_SUPPORTED naming
 * themselves, once on stderr, rather than crash or pretend to work. */
#include <stdatomic.h>
#include <stdio.h>

#include "sim-internal.h"

/* The simulator runs no kernels: module loading and launches are refused
 * with CUDA_ERROR_NOT_SUPPORTED, saying so once on stderr. */
static CUresult no_kernels(const char *call)
{
    static atomic_int said;

    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "cudasim: %s: the simulated driver runs no kernels (CUDA_ERROR_NOT_SUPPORTED); run "
                "kernels on a GPU\n", call);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult sim_cuModuleLoadData(CUmodule *module, const void *image)
{
    (void)module, (void)image;
    return no_kernels("cuModuleLoadData");
}

static CUresult sim_cuModuleLoad(CUmodule *module, const char *path)
{
    (void)module, (void)path;
    return no_kernels("cuModuleLoad");
}

static CUresult sim_cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
    (void)f, (void)module, (void)name;
    return no_kernels("cuModuleGetFunction");
}

static CUresult sim_cuModuleUnload(CUmodule module)
{
    (void)module;
    return no_kernels("cuModuleUnload");
}

static CUresult sim_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
                                   void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s, (void)params,
        (void)extra;
    return no_kernels("cuLaunchKernel");
}

/* Entry points downstream code commonly calls that the simulator does not
 * model.  Callers pass their real arguments; a stub takes none, which the
 * C calling conventions of every Linux ABI allow the caller to do. */
static CUresult unmodelled(const char *call, atomic_int *said)
{
    if (!atomic_exchange(said, 1))
        fprintf(stderr, "cudasim: %s is not modelled by the simulated driver (CUDA_ERROR_NOT_SUPPORTED)\n", call);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define SIM_UNMODELLED(name)                                          \
    static CUresult sim_##name(void)                                  \
    {                                                                 \
        static atomic_int said;                                       \
        return unmodelled(#name, &said);                              \
    }
#define SIM_UNMODELLED_LIST(X)                                                                   \
    X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxPushCurrent) X(cuCtxPopCurrent)   \
    X(cuEventElapsedTime) X(cuStreamCreateWithPriority)                         \
    X(cuStreamGetPriority) X(cuStreamAddCallback) X(cuStreamWaitValue32) X(cuStreamWriteValue32) \
    X(cuMemcpy) X(cuMemcpyDtoD)                                                                 \
    X(cuMemcpyPeerAsync) X(cuMemcpy2DAsync) X(cuMemcpy3DAsync) X(cuMemsetD16) X(cuMemsetD32)    \
    X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async)               \
    X(cuMemHostAlloc) X(cuMemHostRegister) X(cuMemHostUnregister)              \
    X(cuMemAllocManaged) X(cuMemAllocPitch) X(cuMemPrefetchAsync)                \
    X(cuPointerGetAttribute) X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel)                   \
    X(cuModuleGetGlobal) X(cuLibraryLoadData) X(cuLibraryGetKernel) X(cuFuncGetAttribute)        \
    X(cuFuncSetAttribute) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuGraphInstantiate)   \
    X(cuFuncGetParamInfo) X(cuGraphAddKernelNode) X(cuGraphAddMemcpyNode) X(cuGraphAddMemsetNode)      \
    X(cuGraphAddHostNode) X(cuGraphAddEventRecordNode) X(cuGraphAddEventWaitNode)               \
    X(cuGraphExecKernelNodeSetParams)

SIM_UNMODELLED_LIST(SIM_UNMODELLED)

#define SIM_UNMODELLED_ENTRY(name) { #name, 2000, (void *)sim_##name },

const struct sim_entry sim_unmodelled_entries[] = {
    SIM_ENTRY(cuModuleLoadData, 2000),
    SIM_ENTRY(cuModuleLoad, 2000),
    SIM_ENTRY(cuModuleGetFunction, 2000),
    SIM_ENTRY(cuModuleUnload, 2000),
    SIM_ENTRY(cuLaunchKernel, 4000),
    SIM_UNMODELLED_LIST(SIM_UNMODELLED_ENTRY)
};
const size_t sim_unmodelled_entry_count = sizeof sim_unmodelled_entries / sizeof sim_unmodelled_entries[0];
