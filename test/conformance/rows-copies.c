/* Rows of the copies a downstream test makes: host to device, device to
 * device and unified-address copies, outside a capture and captured. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

#define COPY_BYTES 64

static int filled_with(const unsigned char *p, unsigned char value)
{
    size_t i;

    for (i = 0; i < COPY_BYTES; i++)
        if (p[i] != value)
            return 0;
    return 1;
}

static void copies_outside_capture(CUdeviceptr a, CUdeviceptr b)
{
    unsigned char in[COPY_BYTES], out[COPY_BYTES];
    CUstream s = conf_stream();
    CUresult rc1, rc2, rc3;
    char text[256];

    memset(in, 0x5a, sizeof in);
    memset(out, 0, sizeof out);
    rc1 = D.cuMemcpyHtoDAsync(a, in, COPY_BYTES, s);
    rc2 = D.cuMemcpyDtoDAsync(b, a, COPY_BYTES, s);
    rc3 = D.cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, b, COPY_BYTES, s);
    D.cuStreamSynchronize(s);
    snprintf(text, sizeof text, "%s, %s, %s; copied: %s", conf_code(rc1), conf_code(rc2), conf_code(rc3),
             filled_with(out, 0x5a) ? "yes" : "no");
    conf_row("cuMemcpyHtoDAsync, cuMemcpyDtoDAsync, cuMemcpyAsync (device to host), no capture", "-", text,
             "CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS; copied: yes");
    conf_drop(s);
}

/* Device-to-device copies captured: cuMemcpyDtoDAsync and cuMemcpyAsync
 * between two allocations become memcpy nodes that copy when launched. */
static void copies_captured(CUstreamCaptureMode mode, CUdeviceptr a, CUdeviceptr b)
{
    unsigned char out[COPY_BYTES];
    CUstream s = conf_stream();
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUgraphNode nodes[4];
    CUgraphNodeType type;
    size_t i, n = 4, memcpys = 0;
    CUresult rc1, rc2, rc;
    char text[512];
    const char *status;
    CUDA_GRAPH_INSTANTIATE_PARAMS params;

    D.cuMemsetD8(a, 0x33, COPY_BYTES);
    D.cuMemsetD8(b, 0, COPY_BYTES);
    D.cuStreamSynchronize(NULL);   /* the capture's stream does not wait for the legacy one */
    D.cuStreamBeginCapture(s, mode);
    rc1 = D.cuMemcpyDtoDAsync(b, a, COPY_BYTES, s);
    rc2 = D.cuMemcpyAsync(a, b, COPY_BYTES, s);
    status = conf_status(s);
    snprintf(text, sizeof text, "%s, %s, capture %s", conf_code(rc1), conf_code(rc2), status);
    rc = D.cuStreamEndCapture(s, &g);
    conf_append(text, sizeof text, "; end %s", conf_code(rc));
    memset(out, 0, sizeof out);
    if (g && D.cuGraphGetNodes(g, nodes, &n) == CUDA_SUCCESS)
        for (i = 0; i < n; i++)
            if (D.cuGraphNodeGetType(nodes[i], &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_MEMCPY)
                memcpys++;
    conf_append(text, sizeof text, "; %zu nodes, %zu memcpy; ran before launch: %s", g ? n : 0, memcpys,
                (D.cuMemcpyDtoH(out, b, COPY_BYTES), filled_with(out, 0x33)) ? "yes" : "no");
    memset(&params, 0, sizeof params);
    rc = g ? D.cuGraphInstantiateWithParams(&exec, g, &params) : CUDA_ERROR_INVALID_VALUE;
    conf_append(text, sizeof text, "; instantiate %s", conf_code(rc));
    rc = exec ? D.cuGraphLaunch(exec, s) : CUDA_ERROR_INVALID_VALUE;
    D.cuStreamSynchronize(s);
    D.cuMemcpyDtoH(out, b, COPY_BYTES);
    conf_append(text, sizeof text, "; launch %s; copied: %s", conf_code(rc), filled_with(out, 0x33) ? "yes" : "no");
    conf_row("cuMemcpyDtoDAsync and cuMemcpyAsync between allocations on the capturing stream",
             conf_mode_name(mode), text,
             "CUDA_SUCCESS, CUDA_SUCCESS, capture ACTIVE; end CUDA_SUCCESS; 2 nodes, 2 memcpy; "
             "ran before launch: no; instantiate CUDA_SUCCESS; launch CUDA_SUCCESS; copied: yes");
    if (exec)
        D.cuGraphExecDestroy(exec);
    if (g)
        D.cuGraphDestroy(g);
    conf_drop(s);
}

void conf_rows_copies(void)
{
    CUdeviceptr a = 0, b = 0;
    int m;

    if (D.cuMemAlloc(&a, COPY_BYTES) != CUDA_SUCCESS || D.cuMemAlloc(&b, COPY_BYTES) != CUDA_SUCCESS) {
        conf_row("cuMemAlloc for the copy rows", "-", "failed", "CUDA_SUCCESS");
        goto done;
    }
    copies_outside_capture(a, b);
    for (m = 0; m < 3; m++)
        copies_captured(conf_modes[m], a, b);
done:
    if (a)
        D.cuMemFree(a);
    if (b)
        D.cuMemFree(b);
}
