// update-loop.cu: the hot loop of a CUDA C++ program with changing
// parameters, through libcucapture and written by hand with the runtime
// API, alternating in one process.  Each iteration captures a 2-way fork
// with 4 kernels (<<<>>> on the builder's streams) for a new scalar, brings
// the executable graph up to date and launches it:
//   library: cucap_builder_create + begin + split + join_forks + end +
//            cucap_builder_complete_into + cucap_exec_launch + destroy
//   library, one builder: the same with one builder kept across
//            iterations, cucap_builder_reset instead of create + destroy
//   raw:     cudaStreamBeginCapture on a kept stream, fork and join by two
//            kept events, cudaStreamEndCapture, cudaGraphExecUpdate,
//            cudaGraphLaunch, cudaGraphDestroy
// Prints the median time per iteration of each over the rounds and the
// ratios library / raw; nothing is asserted about the times.  Both sides'
// results are checked.  Usage: update-loop [iterations per round] [rounds]
// Exit status: 0, 77 without a usable GPU, 1 on a failure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <cucapture.h>

__global__ void scale(int n, float a, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = 0.5f * x[i] + a;
}

__global__ void shift(int n, float b, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] - b;   // b = 1: x stays below 2 * the largest a
}

namespace {

const int n = 4096, threads = 256, blocks = (n + threads - 1) / threads;

// the captured work: on each branch, scale then shift its own buffer
void work(float a, float *x, float *y, cudaStream_t s0, cudaStream_t s1)
{
    scale<<<blocks, threads, 0, s0>>>(n, a, x);
    shift<<<blocks, threads, 0, s0>>>(n, 1.0f, x);
    scale<<<blocks, threads, 0, s1>>>(n, a, y);
    shift<<<blocks, threads, 0, s1>>>(n, 1.0f, y);
}

bool failed(const char *what, cucap_error *err)
{
    std::fprintf(stderr, "update-loop: %s: %s\n", what, cucap_error_message(err));
    cucap_error_free(err);
    return false;
}

struct library_loop {
    cucap_exec *exec = nullptr;
    cudaStream_t launch = nullptr;
    bool keep = false;            // one builder, reset for each capture
    cucap_builder *kept = nullptr;

    bool iteration(float a, float *x, float *y)
    {
        cucap_builder *b = nullptr, *fork = nullptr;
        cucap_error *err = nullptr;
        bool ok = keep ? (kept || cucap_builder_create(0, &kept, &err) == CUDA_SUCCESS) &&
                             cucap_builder_reset(b = kept, &err) == CUDA_SUCCESS
                       : cucap_builder_create(0, &b, &err) == CUDA_SUCCESS;
        ok = ok && cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) == CUDA_SUCCESS &&
                  cucap_builder_split(b, 2, &fork, &err) == CUDA_SUCCESS;
        if (ok) {
            work(a, x, y, cucap_builder_stream(b), cucap_builder_stream(fork));
            ok = cucap_builder_join_forks(b, &err) == CUDA_SUCCESS && cucap_builder_end(b, &err) == CUDA_SUCCESS &&
                 cucap_builder_complete_into(b, nullptr, &exec, nullptr, &err) == CUDA_SUCCESS &&
                 cucap_exec_launch(exec, launch, &err) == CUDA_SUCCESS;
        }
        cucap_builder_destroy(fork);
        if (!keep)
            cucap_builder_destroy(b);
        return ok || failed("the library's iteration", err);
    }
};

struct raw_loop {
    cudaStream_t s0 = nullptr, s1 = nullptr, launch = nullptr;
    cudaEvent_t forked = nullptr, joined = nullptr;
    cudaGraphExec_t exec = nullptr;

    bool iteration(float a, float *x, float *y)
    {
        cudaGraph_t g = nullptr;
        cudaGraphExecUpdateResultInfo info;
        cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal);
        cudaEventRecord(forked, s0);
        cudaStreamWaitEvent(s1, forked, 0);
        work(a, x, y, s0, s1);
        cudaEventRecord(joined, s1);
        cudaStreamWaitEvent(s0, joined, 0);
        if (cudaStreamEndCapture(s0, &g) != cudaSuccess)
            return false;
        cudaError_t rc = exec ? cudaGraphExecUpdate(exec, g, &info) : cudaGraphInstantiate(&exec, g, 0);
        if (rc == cudaSuccess)
            rc = cudaGraphLaunch(exec, launch);
        cudaGraphDestroy(g);
        if (rc != cudaSuccess)
            std::fprintf(stderr, "update-loop: the raw iteration: %s\n", cudaGetErrorString(rc));
        return rc == cudaSuccess;
    }
};

template <class Loop> double round_us(Loop &loop, int iterations, float *x, float *y, cudaStream_t launch, bool *ok)
{
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations && *ok; i++)
        *ok = loop.iteration(1.0f + (float)(i % 7), x, y);
    *ok = *ok && cudaStreamSynchronize(launch) == cudaSuccess;
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iterations;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// one step on the host: what every element of a buffer becomes (the
// product by 0.5 is exact, so a fused multiply-add rounds alike)
float step(float v, float a)
{
    return (0.5f * v + a) - 1.0f;
}

} // namespace

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? std::atoi(argv[1]) : 1000, rounds = argc > 2 ? std::atoi(argv[2]) : 3, devices = 0;
    cucap_error *err = nullptr;

#ifndef __OPTIMIZE__
    // nvcc compiles host code at -O0 unless told: the C++ layer's inline
    // code would be timed unoptimized against hand-written calls
    std::fprintf(stderr, "update-loop: built without optimization (nvcc -O2; configure passes NVCCFLAGS, -O2 by default): "
                 "its times would mean nothing\n");
    return 2;
#endif
    if (iterations < 1 || rounds < 1) {
        std::fprintf(stderr, "usage: update-loop [iterations per round] [rounds]\n");
        return 2;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("update-loop: needs a GPU (no CUDA device)\n");
        return 77;
    }
    if (cucap_init(&err) != CUDA_SUCCESS) {
        std::printf("update-loop: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 77;
    }
    float *buffers = nullptr;
    cudaMalloc(&buffers, 6 * n * sizeof(float));
    cudaMemset(buffers, 0, 6 * n * sizeof(float));
    float *lx = buffers, *ly = buffers + n, *rx = buffers + 2 * n, *ry = buffers + 3 * n;
    float *kx = buffers + 4 * n, *ky = buffers + 5 * n;

    library_loop lib, kept;
    raw_loop raw;
    kept.keep = true;
    cudaStreamCreateWithFlags(&lib.launch, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&kept.launch, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&raw.s0, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&raw.s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&raw.launch, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&raw.forked, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&raw.joined, cudaEventDisableTiming);

    bool ok = true;
    std::vector<double> lib_us, kept_us, raw_us;
    round_us(lib, 10, lx, ly, lib.launch, &ok);   // warm all three, not timed
    round_us(kept, 10, kx, ky, kept.launch, &ok);
    round_us(raw, 10, rx, ry, raw.launch, &ok);
    for (int r = 0; r < rounds && ok; r++) {
        // the order turns each round, so that no side always follows another
        for (int side = 0; side < 3; side++)
            switch ((r + side) % 3) {
            case 0: lib_us.push_back(round_us(lib, iterations, lx, ly, lib.launch, &ok)); break;
            case 1: kept_us.push_back(round_us(kept, iterations, kx, ky, kept.launch, &ok)); break;
            default: raw_us.push_back(round_us(raw, iterations, rx, ry, raw.launch, &ok)); break;
            }
    }

    // every side ran the same steps: their buffers must be equal to the host's
    float want = 0.0f;
    for (int i = 0; i < 10 + rounds * iterations; i++)
        want = step(want, 1.0f + (float)((i < 10 ? i : (i - 10) % iterations) % 7));
    std::vector<float> host(4 * n);
    if (ok && cudaMemcpy(host.data(), buffers, host.size() * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        ok = false;
    for (size_t i = 0; ok && i < host.size(); i++)
        if (host[i] != want) {
            std::fprintf(stderr, "update-loop: element %zu is %g, not %g\n", i, host[i], want);
            ok = false;
        }

    if (ok) {
        double l = median(lib_us), k = median(kept_us), w = median(raw_us);
        std::printf("update loop, CUDA runtime API, K=2, 4 kernels, %d iterations x %d rounds:\n"
                    "  libcucapture %.3f us, hand-written %.3f us per iteration, ratio %.3f\n"
                    "  libcucapture with one builder reset %.3f us, ratio %.3f\n",
                    iterations, rounds, l, w, l / w, k, k / w);
    }
    cucap_exec_destroy(lib.exec);
    cucap_exec_destroy(kept.exec);
    cucap_builder_destroy(kept.kept);
    if (raw.exec)
        cudaGraphExecDestroy(raw.exec);
    cudaStreamDestroy(lib.launch);
    cudaStreamDestroy(kept.launch);
    cudaStreamDestroy(raw.s0);
    cudaStreamDestroy(raw.s1);
    cudaStreamDestroy(raw.launch);
    cudaEventDestroy(raw.forked);
    cudaEventDestroy(raw.joined);
    cudaFree(buffers);
    return ok ? 0 : 1;
}
