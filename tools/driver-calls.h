/* The driver entry points the cucapture program calls itself (the raw
 * code it compares against, and what `info` reads), resolved through the
 * library's public cucap_driver_entry_point: the program uses nothing
 * but the installed library's public API. */
#ifndef CUCAPTURE_TOOL_DRIVER_CALLS_H
#define CUCAPTURE_TOOL_DRIVER_CALLS_H

#include <cuda.h>
#include <cudaTypedefs.h>

/* The variants cucap_driver_entry_point returns for this build's headers. */
#if CUDA_VERSION >= 12030
#  define TOOL_PFN_cuStreamGetCaptureInfo PFN_cuStreamGetCaptureInfo_v12030
#  define TOOL_PFN_cuGraphGetEdges PFN_cuGraphGetEdges_v12030
#endif

#define TOOL_DRIVER_CALLS(X)                                                                 \
    X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                                            \
    X(cuDeviceGet, PFN_cuDeviceGet_v2000)                                                    \
    X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)                                  \
    X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)                                          \
    X(cuDeviceGetMemPool, PFN_cuDeviceGetMemPool_v11020)                                     \
    X(cuDeviceGetGraphMemAttribute, PFN_cuDeviceGetGraphMemAttribute_v11040)                 \
    X(cuDeviceGetName, PFN_cuDeviceGetName_v2000)                                            \
    X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)                       \
    X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)                          \
    X(cuEventCreate, PFN_cuEventCreate_v2000)                                                \
    X(cuEventDestroy, PFN_cuEventDestroy_v4000)                                              \
    X(cuEventRecord, PFN_cuEventRecord_v2000)                                                \
    X(cuEventSynchronize, PFN_cuEventSynchronize_v2000)                                      \
    X(cuGraphDestroy, PFN_cuGraphDestroy_v10000)                                             \
    X(cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000)                                     \
    X(cuGraphExecUpdate, PFN_cuGraphExecUpdate_v12000)                                       \
    X(cuGraphGetEdges, TOOL_PFN_cuGraphGetEdges)                                             \
    X(cuGraphGetNodes, PFN_cuGraphGetNodes_v10000)                                           \
    X(cuGraphInstantiateWithParams, PFN_cuGraphInstantiateWithParams_v12000)                 \
    X(cuGraphLaunch, PFN_cuGraphLaunch_v10000)                                               \
    X(cuMemAlloc, PFN_cuMemAlloc_v3020)                                                      \
    X(cuMemAllocHost, PFN_cuMemAllocHost_v3020)                                              \
    X(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020)                           \
    X(cuMemFree, PFN_cuMemFree_v3020)                                                        \
    X(cuMemFreeHost, PFN_cuMemFreeHost_v2000)                                                \
    X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)                                             \
    X(cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020)                               \
    X(cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute_v11020)                               \
    X(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020)                                        \
    X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)                                                  \
    X(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020)                                        \
    X(cuMemsetD8, PFN_cuMemsetD8_v3020)                                                      \
    X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)                                            \
    X(cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010)                                 \
    X(cuStreamCreate, PFN_cuStreamCreate_v2000)                                              \
    X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)                                            \
    X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                                     \
    X(cuStreamGetCaptureInfo, TOOL_PFN_cuStreamGetCaptureInfo)                               \
    X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                                    \
    X(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)                                        \
    X(cuThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010)

struct tool_driver {
#define TOOL_DRIVER_FIELD(name, type) type name;
    TOOL_DRIVER_CALLS(TOOL_DRIVER_FIELD)
#undef TOOL_DRIVER_FIELD
};

extern struct tool_driver tool_drv;

/* After cucap_init succeeded: resolve every entry above; on failure print
 * which one is missing (prefixed "cucapture COMMAND: ") and return
 * non-zero. */
int tool_driver_load(const char *command);

#endif
