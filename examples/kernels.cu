// The kernels of examples/kernels.c.  examples/kernels.ptx is generated
// from this file (make regenerates it when configure found nvcc):
//     nvcc -arch=sm_90 -ptx examples/kernels.cu -o examples/kernels.ptx
#include <cuda_runtime.h>

// y[i] = a * x[i] + y[i] over [first, first + count)
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int first, unsigned int count)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count)
        y[first + i] = a * x[first + i] + y[first + i];
}

// One round of the WHILE loop: y[i] += 1 for all i, and count down; the
// loop runs again while the counter is not zero.
extern "C" __global__ void countdown(float *y, unsigned int n, unsigned int *counter,
                                     cudaGraphConditionalHandle handle)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += 1.0f;
    if (i == 0) {
        unsigned int left = *counter - 1;
        *counter = left;
        cudaGraphSetConditional(handle, left > 0 ? 1 : 0);
    }
}
