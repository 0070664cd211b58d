/* Every driver entry point the library calls, and no other (the tests
 * resolve their own, test/harness/test-driver-entries.h):
 *     CUCAP_DRIVER_ENTRY(field, symbol, version, optional)
 * The table's field `field` holds `symbol` requested from cuGetProcAddress
 * at CUDA `version`, the version that introduced the ABI variant the
 * library calls, whose type is PFN_<symbol>_v<version> (cudaTypedefs.h).
 * So the headers a build used never raise the driver it needs: the floor
 * is CUDA 12.3 (conditional handles), and every entry newer than that is
 * optional (NULL on older drivers; the code that calls it checks, and
 * falls back or refuses the feature with CUDA_ERROR_NOT_SUPPORTED).
 * scripts/check-driver-entries checks that rule. */

/* a capture's calls, from its begin to its launch: first, so that they
 * share one cache line of the table (driver.c aligns it) */
CUCAP_DRIVER_ENTRY(cuStreamBeginCapture, cuStreamBeginCapture, 10010, 0)
CUCAP_DRIVER_ENTRY(cuEventRecord, cuEventRecord, 2000, 0)
CUCAP_DRIVER_ENTRY(cuStreamWaitEvent, cuStreamWaitEvent, 3020, 0)
CUCAP_DRIVER_ENTRY(cuStreamGetCaptureInfo, cuStreamGetCaptureInfo, 12030, 0)
CUCAP_DRIVER_ENTRY(cuStreamUpdateCaptureDependencies, cuStreamUpdateCaptureDependencies, 12030, 0)
CUCAP_DRIVER_ENTRY(cuStreamEndCapture, cuStreamEndCapture, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecUpdate, cuGraphExecUpdate, 12000, 0)
CUCAP_DRIVER_ENTRY(cuGraphLaunch, cuGraphLaunch, 10000, 0)
/* errors and initialisation */
CUCAP_DRIVER_ENTRY(cuGetErrorName, cuGetErrorName, 6000, 0)
CUCAP_DRIVER_ENTRY(cuGetErrorString, cuGetErrorString, 6000, 0)
CUCAP_DRIVER_ENTRY(cuInit, cuInit, 2000, 0)
/* devices and contexts */
CUCAP_DRIVER_ENTRY(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)
CUCAP_DRIVER_ENTRY(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0)
CUCAP_DRIVER_ENTRY(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)
CUCAP_DRIVER_ENTRY(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 11000, 0)
CUCAP_DRIVER_ENTRY(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0)
CUCAP_DRIVER_ENTRY(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0)
CUCAP_DRIVER_ENTRY(cuCtxGetDevice, cuCtxGetDevice, 2000, 0)
#if CUDA_VERSION >= 13000
CUCAP_DRIVER_ENTRY(cuCtxGetDevice_v2, cuCtxGetDevice, 13000, 1)   /* of any context */
#endif
#if CUDA_VERSION >= 12040
CUCAP_DRIVER_ENTRY(cuCtxFromGreenCtx, cuCtxFromGreenCtx, 12040, 1)
#endif
/* streams and events */
CUCAP_DRIVER_ENTRY(cuStreamCreate, cuStreamCreate, 2000, 0)
CUCAP_DRIVER_ENTRY(cuStreamDestroy, cuStreamDestroy, 4000, 0)
CUCAP_DRIVER_ENTRY(cuStreamGetCtx, cuStreamGetCtx, 9020, 0)
#if CUDA_VERSION >= 12050
CUCAP_DRIVER_ENTRY(cuStreamGetCtx_v2, cuStreamGetCtx, 12050, 1)   /* with the green context */
#endif
CUCAP_DRIVER_ENTRY(cuStreamGetId, cuStreamGetId, 12000, 0)   /* a stream's identity (handles are reused) */
CUCAP_DRIVER_ENTRY(cuLaunchHostFunc, cuLaunchHostFunc, 10000, 0)
CUCAP_DRIVER_ENTRY(cuUserObjectCreate, cuUserObjectCreate, 11030, 0)
CUCAP_DRIVER_ENTRY(cuUserObjectRelease, cuUserObjectRelease, 11030, 0)
CUCAP_DRIVER_ENTRY(cuGraphRetainUserObject, cuGraphRetainUserObject, 11030, 0)
CUCAP_DRIVER_ENTRY(cuStreamWriteValue64, cuStreamWriteValue64, 11070, 0)
CUCAP_DRIVER_ENTRY(cuStreamWaitValue64, cuStreamWaitValue64, 11070, 0)
CUCAP_DRIVER_ENTRY(cuStreamQuery, cuStreamQuery, 2000, 0)
CUCAP_DRIVER_ENTRY(cuStreamGetFlags, cuStreamGetFlags, 5050, 0)   /* a blocking stream, named in an invalidated capture's notes */
CUCAP_DRIVER_ENTRY(cuEventCreate, cuEventCreate, 2000, 0)
CUCAP_DRIVER_ENTRY(cuEventDestroy, cuEventDestroy, 4000, 0)
CUCAP_DRIVER_ENTRY(cuEventSynchronize, cuEventSynchronize, 2000, 0)
CUCAP_DRIVER_ENTRY(cuEventQuery, cuEventQuery, 2000, 0)
/* stream capture */
CUCAP_DRIVER_ENTRY(cuStreamIsCapturing, cuStreamIsCapturing, 10000, 0)
CUCAP_DRIVER_ENTRY(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, 10010, 0)
/* graphs */
CUCAP_DRIVER_ENTRY(cuGraphDestroy, cuGraphDestroy, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphAddNode, cuGraphAddNode, 12030, 0)
CUCAP_DRIVER_ENTRY(cuGraphAddChildGraphNode, cuGraphAddChildGraphNode, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphGetNodes, cuGraphGetNodes, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphNodeGetType, cuGraphNodeGetType, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphConditionalHandleCreate, cuGraphConditionalHandleCreate, 12030, 0)
CUCAP_DRIVER_ENTRY(cuGraphDebugDotPrint, cuGraphDebugDotPrint, 11030, 0)
CUCAP_DRIVER_ENTRY(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphUpload, cuGraphUpload, 11010, 0)
CUCAP_DRIVER_ENTRY(cuGraphClone, cuGraphClone, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams, 12000, 0)
/* a kernel node's function for an update's check: the CUDA 10.0 variant
 * reads it in 7-15 ns a node where the 12.0 one, which also finds the
 * CUkernel and context, takes 100-280 ns on nvcc- and cuBLAS-built kernels
 * (both give the same function; doc/driver-facts.md) */
CUCAP_DRIVER_ENTRY(cuGraphKernelNodeGetParams_v1, cuGraphKernelNodeGetParams, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphKernelNodeGetAttribute, cuGraphKernelNodeGetAttribute, 11000, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams, 12000, 0)
/* named nodes */
CUCAP_DRIVER_ENTRY(cuGraphMemcpyNodeGetParams, cuGraphMemcpyNodeGetParams, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphMemsetNodeGetParams, cuGraphMemsetNodeGetParams, 10000, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecMemcpyNodeSetParams, cuGraphExecMemcpyNodeSetParams, 10020, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecMemsetNodeSetParams, cuGraphExecMemsetNodeSetParams, 10020, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecHostNodeSetParams, cuGraphExecHostNodeSetParams, 10020, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecChildGraphNodeSetParams, cuGraphExecChildGraphNodeSetParams, 11010, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecEventRecordNodeSetEvent, cuGraphExecEventRecordNodeSetEvent, 11010, 0)
CUCAP_DRIVER_ENTRY(cuGraphExecEventWaitNodeSetEvent, cuGraphExecEventWaitNodeSetEvent, 11010, 0)
CUCAP_DRIVER_ENTRY(cuGraphNodeSetEnabled, cuGraphNodeSetEnabled, 11060, 0)
CUCAP_DRIVER_ENTRY(cuGraphMemAllocNodeGetParams, cuGraphMemAllocNodeGetParams, 11040, 0)
#if CUDA_VERSION >= 12040
CUCAP_DRIVER_ENTRY(cuFuncGetParamInfo, cuFuncGetParamInfo, 12040, 1)   /* named kernels */
#endif
/* memory */
CUCAP_DRIVER_ENTRY(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0)
CUCAP_DRIVER_ENTRY(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute, 11040, 0)
CUCAP_DRIVER_ENTRY(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0)
CUCAP_DRIVER_ENTRY(cuMemPoolCreate, cuMemPoolCreate, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)
CUCAP_DRIVER_ENTRY(cuMemAlloc, cuMemAlloc, 3020, 0)
CUCAP_DRIVER_ENTRY(cuMemFree, cuMemFree, 3020, 0)
CUCAP_DRIVER_ENTRY(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync, 3020, 0)
CUCAP_DRIVER_ENTRY(cuMemAllocHost, cuMemAllocHost, 3020, 0)
CUCAP_DRIVER_ENTRY(cuMemFreeHost, cuMemFreeHost, 2000, 0)
