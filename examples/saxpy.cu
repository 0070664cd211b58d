// saxpy.cu: libcucapture from CUDA C++.  Kernels launched with <<<>>> on
// a builder's stream (a CUstream is a cudaStream_t) are captured into one
// graph: y = a*x + y on one half of the vector, y = 2*y on the other, each
// on its own fork, then a reduction after the join.  The graph is updated
// with a new scalar and launched again, as a loop with changing parameters
// does.  Build it with
//     nvcc -std=c++17 saxpy.cu $(pkg-config --cflags --libs cucapture)
// Exit status: 0 on success, 77 without a usable GPU, 1 on a failure.
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>
#include <cucapture.hpp>

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

__global__ void twice(int n, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 2.0f * y[i];
}

__global__ void sum(int n, const float *y, float *out)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += y[i];
    *out = s;
}

// capture the step for scalar a into b
static void capture_step(cucap::builder &b, float a, int n, const float *x, float *y, float *out)
{
    int half = n / 2, threads = 256, blocks = (half + threads - 1) / threads;

    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    std::vector<cucap::builder> forks = b.split(2);
    saxpy<<<blocks, threads, 0, b.stream()>>>(half, a, x, y);
    twice<<<blocks, threads, 0, forks[0].stream()>>>(n - half, y + half);
    b.join_forks();
    sum<<<1, 1, 0, b.stream()>>>(n, y, out);
    b.end();
}

int main()
{
    const int n = 1 << 16;
    int devices = 0;

    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("saxpy: needs a GPU (no CUDA device)\n");
        return 77;
    }
    try {
        float *x = nullptr, *y = nullptr, *out = nullptr;
        cudaMalloc(&x, n * sizeof(float));
        cudaMalloc(&y, n * sizeof(float));
        cudaMalloc(&out, sizeof(float));
        std::vector<float> ones(n, 1.0f);
        cucap::builder first = cucap::builder::create(0);
        // the builder's stream does not wait for the legacy stream: the copies go on it
        cudaMemcpyAsync(x, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice, first.stream());
        cudaStreamSynchronize(first.stream());

        capture_step(first, 3.0f, n, x, y, out);
        cucap::exec step = first.complete();
        float results[2];
        for (int round = 0; round < 2; round++) {
            cudaMemcpyAsync(y, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice, first.stream());
            cudaStreamSynchronize(first.stream());
            if (round == 1) {   // the same topology, a new scalar: update, no instantiation
                cucap::builder again = cucap::builder::create(0);
                capture_step(again, 5.0f, n, x, y, out);
                step.update(again);
            }
            step.launch(first.stream());
            cudaStreamSynchronize(first.stream());
            cudaMemcpy(&results[round], out, sizeof(float), cudaMemcpyDeviceToHost);
        }
        cudaFree(x);
        cudaFree(y);
        cudaFree(out);
        // half of (a + 1), half of 2: (a + 1) * n / 2 + 2 * n / 2
        float want[2] = { 4.0f * n / 2 + 2.0f * n / 2, 6.0f * n / 2 + 2.0f * n / 2 };
        if (results[0] != want[0] || results[1] != want[1]) {
            std::printf("saxpy: sums %g and %g, expected %g and %g\n", results[0], results[1], want[0], want[1]);
            return 1;
        }
        std::printf("saxpy: %d elements on two forks, updated and launched again: sums %g and %g\n", n,
                    results[0], results[1]);
        return 0;
    } catch (const cucap::error &e) {
        std::printf("saxpy: %s\n", e.text().c_str());
        return 1;
    }
}
