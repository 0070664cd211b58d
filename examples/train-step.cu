// A training step captured whole and replayed, beside the same step run
// eagerly: a small MLP classifier trained with AdamW, its per-step scalars
// (learning rate, bias corrections) and the step's batch taken from the
// parameter block at each launch, the gradient norm clipped on the device,
// the loss read back after each step.  The host prepares step N+1's batch
// while step N runs: cucap_exec_launch_params takes the values at the call,
// so nothing needs fencing.  The two runs must agree bit for bit.
//
//     nvcc -std=c++17 train-step.cu $(pkg-config --cflags --libs cucapture) -o train-step
//     ./train-step [batch] [width] [layers] [steps]     one run of each, compared
//     ./train-step --bench [pairs]                      median step times, eager against captured
//
// Exits 0 when the runs agree, 1 when they do not, 77 without a usable GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <cucapture.hpp>

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        cudaError_t rc_ = (call);                                                                         \
        if (rc_ != cudaSuccess) {                                                                         \
            std::fprintf(stderr, "train-step: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(rc_),  \
                         __FILE__, __LINE__);                                                             \
            std::exit(1);                                                                                 \
        }                                                                                                 \
    } while (0)

namespace {

constexpr int classes = 10;
constexpr float beta1 = 0.9f, beta2 = 0.999f, adam_eps = 1e-8f, weight_decay = 0.01f, max_norm = 1.0f;

// The step's values, as the kernels read them in the block: the scalars,
// then the batch's inputs, then its labels.
struct header {
    float lr, bias1, bias2;          // AdamW's learning rate and bias corrections at this step
    uint32_t step;
};

struct shape {
    int batch, width, layers;        // `layers` hidden layers of `width`, then the classifier

    size_t inputs_offset() const { return sizeof(header); }
    size_t labels_offset() const { return inputs_offset() + sizeof(float) * batch * width; }
    size_t values_size() const { return labels_offset() + sizeof(int) * batch; }
    int in_of(int) const { return width; }
    int out_of(int l) const { return l == layers ? classes : width; }
};

// ---------------------------------------------------------------- kernels: every sum in a fixed order

__global__ void dense_forward(const float *in, const float *w, const float *b, float *out, int batch, int n_in,
                              int n_out, int relu)
{
    int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= batch || j >= n_out)
        return;
    float acc = b[j];
    for (int k = 0; k < n_in; k++)
        acc += in[row * n_in + k] * w[k * n_out + j];
    out[row * n_out + j] = relu ? fmaxf(acc, 0.f) : acc;
}

// Softmax cross-entropy of the batch: d_logits, and the mean loss written
// to the host's history at the step's index (mapped pinned memory).
__global__ void softmax_loss(const float *logits, const int *labels, const header *h, float *d_logits,
                             float *history, int batch)
{
    __shared__ float part[256];
    float mine = 0.f;

    for (int row = threadIdx.x; row < batch; row += blockDim.x) {
        const float *z = logits + row * classes;
        float top = z[0], sum = 0.f;
        for (int c = 1; c < classes; c++)
            top = fmaxf(top, z[c]);
        for (int c = 0; c < classes; c++)
            sum += expf(z[c] - top);
        for (int c = 0; c < classes; c++)
            d_logits[row * classes + c] = (expf(z[c] - top) / sum - (c == labels[row] ? 1.f : 0.f)) / batch;
        mine += logf(sum) + top - z[labels[row]];
    }
    part[threadIdx.x] = mine;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        history[h->step] = part[0] / batch;
}

// The gradients of one dense layer: of its weights and bias, and of its
// input (through the ReLU that made it, when relu_in).
__global__ void dense_backward_params(const float *in, const float *d_out, float *d_w, float *d_b, int batch,
                                      int n_in, int n_out)
{
    int k = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_out)
        return;
    float acc = 0.f;
    for (int row = 0; row < batch; row++)
        acc += in[row * n_in + k] * d_out[row * n_out + j];
    d_w[k * n_out + j] = acc;
    if (k == 0) {
        float bias = 0.f;
        for (int row = 0; row < batch; row++)
            bias += d_out[row * n_out + j];
        d_b[j] = bias;
    }
}

__global__ void dense_backward_input(const float *in, const float *w, const float *d_out, float *d_in, int batch,
                                     int n_in, int n_out, int relu_in)
{
    int row = blockIdx.y, k = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= batch || k >= n_in)
        return;
    float acc = 0.f;
    for (int j = 0; j < n_out; j++)
        acc += d_out[row * n_out + j] * w[k * n_out + j];
    d_in[row * n_in + k] = relu_in && in[row * n_in + k] <= 0.f ? 0.f : acc;
}

// The gradients' global norm, and the clipping scale that brings it to
// max_norm at most: decided on the device, so no host read, no host branch.
__global__ void clip_scale(const float *grads, size_t n, float *scale)
{
    __shared__ float part[1024];
    float mine = 0.f;

    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        mine += grads[i] * grads[i];
    part[threadIdx.x] = mine;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *scale = fminf(1.f, max_norm / (sqrtf(part[0]) + 1e-6f));
}

// AdamW over every parameter, its step's scalars from the block.
__global__ void adamw(float *p, const float *g, float *m, float *v, size_t n, const float *scale, const header *h)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float grad = g[i] * *scale;
    m[i] = beta1 * m[i] + (1.f - beta1) * grad;
    v[i] = beta2 * v[i] + (1.f - beta2) * grad * grad;
    p[i] -= h->lr * ((m[i] / h->bias1) / (sqrtf(v[i] / h->bias2) + adam_eps) + weight_decay * p[i]);
}

// ---------------------------------------------------------------- the model

struct model {
    shape sh;
    size_t n_params = 0;
    std::vector<size_t> w_at, b_at;  // each layer's weights and bias in the flat arrays
    float *params = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr, *scale = nullptr;
    std::vector<float *> acts;       // acts[0] the inputs' copy is not needed: layer 0 reads the block
    float *d_a = nullptr, *d_b = nullptr;   // the gradient flowing back, two buffers in turn
    float *history = nullptr, *history_dev = nullptr;   // losses by step, mapped pinned memory

    model(shape s, int steps) : sh(s)
    {
        for (int l = 0; l <= sh.layers; l++) {
            w_at.push_back(n_params);
            n_params += (size_t)sh.in_of(l) * sh.out_of(l);
            b_at.push_back(n_params);
            n_params += sh.out_of(l);
        }
        CHECK(cudaMalloc(&params, n_params * sizeof(float)));
        CHECK(cudaMalloc(&grads, n_params * sizeof(float)));
        CHECK(cudaMalloc(&m, n_params * sizeof(float)));
        CHECK(cudaMalloc(&v, n_params * sizeof(float)));
        CHECK(cudaMalloc(&scale, sizeof(float)));
        for (int l = 0; l <= sh.layers; l++) {
            float *a;
            CHECK(cudaMalloc(&a, sizeof(float) * sh.batch * sh.out_of(l)));
            acts.push_back(a);
        }
        CHECK(cudaMalloc(&d_a, sizeof(float) * sh.batch * std::max(sh.width, classes)));
        CHECK(cudaMalloc(&d_b, sizeof(float) * sh.batch * std::max(sh.width, classes)));
        CHECK(cudaHostAlloc(&history, sizeof(float) * steps, cudaHostAllocMapped));
        CHECK(cudaHostGetDevicePointer(&history_dev, history, 0));
    }
    ~model()
    {
        cudaFree(params), cudaFree(grads), cudaFree(m), cudaFree(v), cudaFree(scale), cudaFree(d_a), cudaFree(d_b);
        for (float *a : acts)
            cudaFree(a);
        cudaFreeHost(history);
    }

    // The same starting weights for both runs; AdamW's state zero.
    void init(cudaStream_t s)
    {
        std::vector<float> host(n_params);
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n_params; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            host[i] = ((float)(x >> 40) / (float)(1u << 24) - 0.5f) * 0.2f;
        }
        CHECK(cudaMemcpyAsync(params, host.data(), n_params * sizeof(float), cudaMemcpyHostToDevice, s));
        CHECK(cudaMemsetAsync(m, 0, n_params * sizeof(float), s));
        CHECK(cudaMemsetAsync(v, 0, n_params * sizeof(float), s));
        CHECK(cudaStreamSynchronize(s));
    }

    // One whole step on s, its values read from the block at `values`.
    void step(cudaStream_t s, const unsigned char *values)
    {
        const header *h = reinterpret_cast<const header *>(values);
        const float *inputs = reinterpret_cast<const float *>(values + sh.inputs_offset());
        const int *labels = reinterpret_cast<const int *>(values + sh.labels_offset());
        const float *in = inputs;

        for (int l = 0; l <= sh.layers; l++) {
            dim3 grid((sh.out_of(l) + 127) / 128, sh.batch);
            dense_forward<<<grid, 128, 0, s>>>(in, params + w_at[l], params + b_at[l], acts[l], sh.batch,
                                               sh.in_of(l), sh.out_of(l), l < sh.layers);
            in = acts[l];
        }
        softmax_loss<<<1, 256, 0, s>>>(acts[sh.layers], labels, h, d_a, history_dev, sh.batch);
        float *d_out = d_a, *d_in = d_b;
        for (int l = sh.layers; l >= 0; l--) {
            const float *layer_in = l ? acts[l - 1] : inputs;
            dim3 grid_p((sh.out_of(l) + 127) / 128, sh.in_of(l));
            dense_backward_params<<<grid_p, 128, 0, s>>>(layer_in, d_out, grads + w_at[l], grads + b_at[l], sh.batch,
                                                         sh.in_of(l), sh.out_of(l));
            if (l) {
                dim3 grid_i((sh.in_of(l) + 127) / 128, sh.batch);
                dense_backward_input<<<grid_i, 128, 0, s>>>(layer_in, params + w_at[l], d_out, d_in, sh.batch,
                                                             sh.in_of(l), sh.out_of(l), 1);
                std::swap(d_out, d_in);
            }
        }
        clip_scale<<<1, 1024, 0, s>>>(grads, n_params, scale);
        adamw<<<(unsigned)((n_params + 255) / 256), 256, 0, s>>>(params, grads, m, v, n_params, scale, h);
        CHECK(cudaGetLastError());
    }
};

// The host's work for a step: its scalars and a batch drawn from ten
// classes (each a direction in input space, with noise).
void prepare(const shape &sh, int step, std::vector<unsigned char> &out)
{
    header h;
    h.step = (uint32_t)step;
    h.lr = 1e-3f * std::min(1.f, (step + 1) / 10.f);   // warm-up
    h.bias1 = 1.f - std::pow(beta1, (float)(step + 1));
    h.bias2 = 1.f - std::pow(beta2, (float)(step + 1));
    out.resize(sh.values_size());
    std::memcpy(out.data(), &h, sizeof h);
    float *x = reinterpret_cast<float *>(out.data() + sh.inputs_offset());
    int *y = reinterpret_cast<int *>(out.data() + sh.labels_offset());
    uint64_t r = 0x2545f4914f6cdd1dull * (uint64_t)(step + 1);
    for (int row = 0; row < sh.batch; row++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        y[row] = (int)((r >> 33) % classes);
        for (int k = 0; k < sh.width; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            float noise = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
            x[row * sh.width + k] = noise + (k % classes == y[row] ? 1.f : 0.f);
        }
    }
}

struct run_result {
    std::vector<float> params, losses;
    std::vector<double> step_ms;     // wall time from one step's launch to the next's
};

// `steps` steps on s: eager, or step 0 eager and the rest replayed from one
// capture.  Step N+1's values are prepared while step N runs; step N's
// loss is read once its event is reached.
run_result train(const shape &sh, int steps, bool captured)
{
    model m(sh, steps);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    m.init(s);
    std::vector<cudaEvent_t> done(steps);
    for (auto &e : done)
        CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    // the eager run's block: its own device memory, written from pinned
    // buffers taken in turn, each reused once its copy is done
    unsigned char *block = nullptr, *pinned[2] = { nullptr, nullptr };
    cudaEvent_t copied[2];
    CHECK(cudaMalloc(&block, sh.values_size()));
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMallocHost(&pinned[i], sh.values_size()));
        CHECK(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
    }
    cucap::builder b = cucap::builder::on_stream(s);
    cucap::exec graph;
    std::vector<unsigned char> values;
    run_result r;
    r.losses.resize(steps);
    auto t_prev = std::chrono::steady_clock::now();

    prepare(sh, 0, values);
    for (int n = 0; n < steps; n++) {
        if (!captured || n == 0) {
            // eager (and the first step of the captured run: lazy loading stays out of the graph)
            CHECK(cudaEventSynchronize(copied[n % 2]));
            std::memcpy(pinned[n % 2], values.data(), values.size());
            CHECK(cudaMemcpyAsync(block, pinned[n % 2], values.size(), cudaMemcpyHostToDevice, s));
            CHECK(cudaEventRecord(copied[n % 2], s));
            m.step(s, block);
        } else {
            if (n == 1) {
                b.capture([&](cucap::builder &self) {
                    m.step(self.stream(), reinterpret_cast<const unsigned char *>(self.params(values.size())));
                });
                graph = b.complete();
            }
            graph.launch(s, values.data(), values.size());   // the values are taken now
        }
        CHECK(cudaEventRecord(done[n], s));
        if (n + 1 < steps)
            prepare(sh, n + 1, values);   // the host's next-step work, while step n runs
        if (n > 0) {
            CHECK(cudaEventSynchronize(done[n - 1]));
            r.losses[n - 1] = m.history[n - 1];
            auto t = std::chrono::steady_clock::now();
            r.step_ms.push_back(std::chrono::duration<double, std::milli>(t - t_prev).count());
            t_prev = t;
        }
    }
    CHECK(cudaStreamSynchronize(s));
    r.losses[steps - 1] = m.history[steps - 1];
    r.params.resize(m.n_params);
    CHECK(cudaMemcpy(r.params.data(), m.params, m.n_params * sizeof(float), cudaMemcpyDeviceToHost));
    for (auto &e : done)
        CHECK(cudaEventDestroy(e));
    for (int i = 0; i < 2; i++) {
        CHECK(cudaFreeHost(pinned[i]));
        CHECK(cudaEventDestroy(copied[i]));
    }
    CHECK(cudaFree(block));
    graph = cucap::exec();
    b = cucap::builder();
    CHECK(cudaStreamDestroy(s));
    return r;
}

double median(std::vector<double> x)
{
    std::sort(x.begin(), x.end());
    return x.empty() ? 0 : x[x.size() / 2];
}

int compare(const shape &sh, int steps)
{
    run_result eager = train(sh, steps, false), replayed = train(sh, steps, true);
    if (std::memcmp(eager.losses.data(), replayed.losses.data(), sizeof(float) * steps) ||
        std::memcmp(eager.params.data(), replayed.params.data(), sizeof(float) * eager.params.size())) {
        for (int n = 0; n < steps; n++)
            if (eager.losses[n] != replayed.losses[n]) {
                std::printf("train-step: FAILED: the loss of step %d is %.9g captured, %.9g eager\n", n,
                            replayed.losses[n], eager.losses[n]);
                return 1;
            }
        std::printf("train-step: FAILED: the weights differ after %d steps\n", steps);
        return 1;
    }
    std::printf("train-step: %d steps of batch %d, width %d, %d hidden layers (%zu bytes of values a step): "
                "captured identical to eager, loss %.4f -> %.4f\n",
                steps, sh.batch, sh.width, sh.layers, sh.values_size(), eager.losses[0], eager.losses[steps - 1]);
    return 0;
}

// Median step times (steps 3 on) of paired runs, eager and captured in turn.
int bench(int pairs)
{
    const shape sizes[2] = { { 16, 64, 8 }, { 1024, 1024, 4 } };
    const char *names[2] = { "launch-bound", "compute-bound" };
    const int steps = 40;
    std::printf("| size | values | eager ms | captured ms | eager / captured [min, max] |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < 2; i++) {
        std::vector<double> e, c, ratio;
        int wrong = 0;
        for (int p = 0; p < pairs; p++) {
            run_result a = train(sizes[i], steps, false), b = train(sizes[i], steps, true);
            wrong += std::memcmp(a.params.data(), b.params.data(), sizeof(float) * a.params.size()) != 0;
            std::vector<double> ae(a.step_ms.begin() + 3, a.step_ms.end()), be(b.step_ms.begin() + 3, b.step_ms.end());
            e.push_back(median(ae));
            c.push_back(median(be));
            ratio.push_back(e.back() / c.back());
        }
        std::printf("| %s (batch %d, width %d, %d layers) | %zu B | %.3f | %.3f | %.3f [%.3f, %.3f] |%s\n", names[i],
                    sizes[i].batch, sizes[i].width, sizes[i].layers, sizes[i].values_size(), median(e), median(c),
                    median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                    *std::max_element(ratio.begin(), ratio.end()), wrong ? " RESULTS DIFFER" : "");
        if (wrong)
            return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    int devices = 0;

    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("train-step: no usable CUDA GPU\n");
        return 77;
    }
    try {
        if (argc > 1 && !std::strcmp(argv[1], "--bench"))
            return bench(argc > 2 ? std::atoi(argv[2]) : 5);
        shape sh = { argc > 1 ? std::atoi(argv[1]) : 256, argc > 2 ? std::atoi(argv[2]) : 256,
                     argc > 3 ? std::atoi(argv[3]) : 3 };
        int steps = argc > 4 ? std::atoi(argv[4]) : 30;
        if (sh.batch <= 0 || sh.width <= 0 || sh.layers < 0 || steps < 2) {
            std::fprintf(stderr, "usage: train-step [batch] [width] [layers] [steps (2 or more)] | --bench [pairs]\n");
            return 2;
        }
        return compare(sh, steps);
    } catch (const cucap::error &e) {
        std::printf("train-step: %s\n", e.text().c_str());
        return e.code() == CUDA_ERROR_NO_DEVICE || e.code() == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED ? 77 : 1;
    }
}
