/* Rows of "One capture across two devices", where there are two devices
 * (the simulator's CUDASIM_DEVICES=2, or a host with two GPUs); with one
 * device there are no rows, on either side. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

void conf_rows_devices(void)
{
    CUdevice dev1;
    CUcontext ctx1;
    CUstream s0 = NULL, s1 = NULL;
    CUevent fork_event = NULL, join_event = NULL;
    CUdeviceptr d0 = 0, d1 = 0;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    unsigned char h0[64], h1[64];
    size_t nodes = 0;
    char text[256];
    int n = 0;
    CUresult rc;

    if (D.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 2)
        return;
    D.cuDeviceGet(&dev1, 1);
    D.cuDevicePrimaryCtxRetain(&ctx1, dev1);
    D.cuMemAlloc(&d0, 64);
    D.cuMemsetD8(d0, 0, 64);
    D.cuStreamSynchronize(NULL);   /* on the legacy stream, which the capture's streams do not wait for */
    D.cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING);
    D.cuEventCreate(&fork_event, CU_EVENT_DISABLE_TIMING);
    D.cuCtxSetCurrent(ctx1);
    D.cuMemAlloc(&d1, 64);
    D.cuMemsetD8(d1, 0, 64);
    D.cuStreamSynchronize(NULL);
    D.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
    D.cuEventCreate(&join_event, CU_EVENT_DISABLE_TIMING);
    D.cuCtxSetCurrent(conf_ctx);

    D.cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL);
    D.cuEventRecord(fork_event, s0);
    D.cuCtxSetCurrent(ctx1);
    rc = D.cuStreamWaitEvent(s1, fork_event, 0);
    snprintf(text, sizeof text, "%s; the device-1 stream is %s", conf_code(rc), conf_status(s1));
    conf_row("a device-1 stream (its context current) waits on an event of a device-0 capture", "global", text,
             "CUDA_SUCCESS; the device-1 stream is ACTIVE");
    D.cuMemsetD8Async(d1, 0x41, 64, s1);
    D.cuEventRecord(join_event, s1);
    D.cuCtxSetCurrent(conf_ctx);
    D.cuMemsetD8Async(d0, 0x40, 64, s0);
    D.cuStreamWaitEvent(s0, join_event, 0);
    rc = D.cuStreamEndCapture(s0, &g);
    if (g)
        D.cuGraphGetNodes(g, NULL, &nodes);
    snprintf(text, sizeof text, "%s, %zu nodes", conf_code(rc), nodes);
    conf_row("work on both devices, join by event, end on device 0", "global", text, "CUDA_SUCCESS, 2 nodes");
    memset(&params, 0, sizeof params);
    rc = g ? D.cuGraphInstantiateWithParams(&exec, g, &params) : CUDA_ERROR_INVALID_VALUE;
    snprintf(text, sizeof text, "instantiate %s", conf_code(rc));
    rc = exec ? D.cuGraphLaunch(exec, s0) : CUDA_ERROR_INVALID_VALUE;
    D.cuStreamSynchronize(s0);
    D.cuMemcpyDtoH(h0, d0, sizeof h0);
    D.cuMemcpyDtoH(h1, d1, sizeof h1);
    conf_append(text, sizeof text, ", launch %s, device 0 written %s, device 1 written %s", conf_code(rc),
                h0[0] == 0x40 && h0[63] == 0x40 ? "yes" : "no", h1[0] == 0x41 && h1[63] == 0x41 ? "yes" : "no");
    conf_row("instantiate and launch that graph on device 0", "-", text,
             "instantiate CUDA_SUCCESS, launch CUDA_SUCCESS, device 0 written yes, device 1 written yes");
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (g)
        D.cuGraphDestroy(g);
    D.cuEventDestroy(fork_event);
    D.cuEventDestroy(join_event);
    D.cuStreamDestroy(s0);
    D.cuStreamDestroy(s1);
    D.cuMemFree(d0);
    D.cuMemFree(d1);
    D.cuDevicePrimaryCtxRelease(dev1);
}
