/* Every driver entry point the library calls, and no other (the tests
 * resolve their own, test/harness/test-driver-entries.h), with the cudaTypedefs.h
 * type of the variant that cuGetProcAddress returns when asked at the
 * headers' CUDA_VERSION (the newest variant not newer than it).  Included
 * with CUCAP_DRIVER_ENTRY(name, type) defined. */

#if CUDA_VERSION >= 12050
#  define CUCAP_PFN_cuStreamGetCtx PFN_cuStreamGetCtx_v12050
#else
#  define CUCAP_PFN_cuStreamGetCtx PFN_cuStreamGetCtx_v9020
#endif

#if CUDA_VERSION >= 13000
#  define CUCAP_PFN_cuCtxGetDevice PFN_cuCtxGetDevice_v13000
#else
#  define CUCAP_PFN_cuCtxGetDevice PFN_cuCtxGetDevice_v2000
#endif

/* errors and initialisation */
CUCAP_DRIVER_ENTRY(cuGetErrorName, PFN_cuGetErrorName_v6000)
CUCAP_DRIVER_ENTRY(cuGetErrorString, PFN_cuGetErrorString_v6000)
CUCAP_DRIVER_ENTRY(cuInit, PFN_cuInit_v2000)
/* devices and contexts */
CUCAP_DRIVER_ENTRY(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)
CUCAP_DRIVER_ENTRY(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)
CUCAP_DRIVER_ENTRY(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)
CUCAP_DRIVER_ENTRY(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)
CUCAP_DRIVER_ENTRY(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)
CUCAP_DRIVER_ENTRY(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)
CUCAP_DRIVER_ENTRY(cuCtxGetDevice, CUCAP_PFN_cuCtxGetDevice)
#if CUDA_VERSION >= 12050
CUCAP_DRIVER_ENTRY(cuCtxFromGreenCtx, PFN_cuCtxFromGreenCtx_v12040)
#endif
/* streams and events */
CUCAP_DRIVER_ENTRY(cuStreamCreate, PFN_cuStreamCreate_v2000)
CUCAP_DRIVER_ENTRY(cuStreamDestroy, PFN_cuStreamDestroy_v4000)
CUCAP_DRIVER_ENTRY(cuStreamGetCtx, CUCAP_PFN_cuStreamGetCtx)
CUCAP_DRIVER_ENTRY(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)
CUCAP_DRIVER_ENTRY(cuEventCreate, PFN_cuEventCreate_v2000)
CUCAP_DRIVER_ENTRY(cuEventRecord, PFN_cuEventRecord_v2000)
CUCAP_DRIVER_ENTRY(cuEventDestroy, PFN_cuEventDestroy_v4000)
/* stream capture */
CUCAP_DRIVER_ENTRY(cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010)
CUCAP_DRIVER_ENTRY(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)
CUCAP_DRIVER_ENTRY(cuStreamGetCaptureInfo, PFN_cuStreamGetCaptureInfo_v12030)
CUCAP_DRIVER_ENTRY(cuStreamUpdateCaptureDependencies, PFN_cuStreamUpdateCaptureDependencies_v12030)
CUCAP_DRIVER_ENTRY(cuThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010)
/* graphs */
CUCAP_DRIVER_ENTRY(cuGraphDestroy, PFN_cuGraphDestroy_v10000)
CUCAP_DRIVER_ENTRY(cuGraphAddNode, PFN_cuGraphAddNode_v12030)
CUCAP_DRIVER_ENTRY(cuGraphAddChildGraphNode, PFN_cuGraphAddChildGraphNode_v10000)
CUCAP_DRIVER_ENTRY(cuGraphGetNodes, PFN_cuGraphGetNodes_v10000)
CUCAP_DRIVER_ENTRY(cuGraphNodeGetType, PFN_cuGraphNodeGetType_v10000)
CUCAP_DRIVER_ENTRY(cuGraphChildGraphNodeGetGraph, PFN_cuGraphChildGraphNodeGetGraph_v10000)
CUCAP_DRIVER_ENTRY(cuGraphConditionalHandleCreate, PFN_cuGraphConditionalHandleCreate_v12030)
CUCAP_DRIVER_ENTRY(cuGraphDebugDotPrint, PFN_cuGraphDebugDotPrint_v11030)
CUCAP_DRIVER_ENTRY(cuGraphInstantiateWithParams, PFN_cuGraphInstantiateWithParams_v12000)
CUCAP_DRIVER_ENTRY(cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000)
CUCAP_DRIVER_ENTRY(cuGraphExecUpdate, PFN_cuGraphExecUpdate_v12000)
CUCAP_DRIVER_ENTRY(cuGraphLaunch, PFN_cuGraphLaunch_v10000)
CUCAP_DRIVER_ENTRY(cuGraphUpload, PFN_cuGraphUpload_v11010)
/* memory */
CUCAP_DRIVER_ENTRY(cuDeviceGetMemPool, PFN_cuDeviceGetMemPool_v11020)
CUCAP_DRIVER_ENTRY(cuMemPoolCreate, PFN_cuMemPoolCreate_v11020)
CUCAP_DRIVER_ENTRY(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020)
CUCAP_DRIVER_ENTRY(cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020)
CUCAP_DRIVER_ENTRY(cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute_v11020)
CUCAP_DRIVER_ENTRY(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020)
CUCAP_DRIVER_ENTRY(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)
