// The decode step of a small transformer (batch 1, fp32), the loop an
// inference engine runs once per generated token: per layer an RMS norm,
// the Q, K and V GEMVs (cuBLAS), a rotary kernel that also stores K and V
// at the token's position, an attention kernel over the positions so far,
// the output GEMV and a residual add, a second norm, the gate and up GEMVs,
// SiLU(gate) x up, the down GEMV and a residual add: 14 launches a layer.
// The kernels that depend on the token read its position from device
// memory (*pos), so one captured graph serves every token.
//
// Shared by examples/decode-step.cu, examples/batch-decode.cu and
// bench/decode-step.cu.
#ifndef CUCAPTURE_DECODE_MODEL_CUH
#define CUCAPTURE_DECODE_MODEL_CUH

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cucapture.hpp>
#include <cuda_runtime.h>

#define DECODE_CHECK(call)                                                                          \
    do {                                                                                            \
        cudaError_t decode_rc_ = (call);                                                            \
        if (decode_rc_ != cudaSuccess) {                                                            \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                         cudaGetErrorString(decode_rc_));                                           \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)
#define DECODE_BLAS(call)                                                                           \
    do {                                                                                            \
        cublasStatus_t decode_st_ = (call);                                                         \
        if (decode_st_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call,        \
                         (int)decode_st_);                                                          \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

namespace decode {

constexpr int head_dim = 64;
constexpr int max_positions = 256;   // the KV cache; positions wrap around

__global__ void fill_weights(float *w, size_t n, unsigned seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed * 2246822519u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        w[i] = scale * ((float)(h & 0xffff) / 32768.0f - 1.0f);
    }
}

// RMS norm of one row of n values, by one block of 256 threads
__device__ void rms_norm_row(const float *x, const float *weight, float *out, int n)
{
    __shared__ float partial[256];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        sum += x[i] * x[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    float inv = rsqrtf(partial[0] / n + 1e-5f);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = x[i] * inv * weight[i];
}

__global__ void rms_norm(const float *x, const float *weight, float *out, int n)
{
    rms_norm_row(x, weight, out, n);
}

// q and k rotated by the angles of position pos; k and v stored in the
// caches' rows kc and vc of that position
__device__ void rotate_and_store(float *q, const float *k, const float *v, float *kc, float *vc, int pos, int hidden)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden / 2; i += gridDim.x * blockDim.x) {
        int pair = i % (head_dim / 2);
        float angle = (float)pos * powf(10000.0f, -2.0f * pair / head_dim);
        float c = cosf(angle), s = sinf(angle);
        float q0 = q[2 * i], q1 = q[2 * i + 1], k0 = k[2 * i], k1 = k[2 * i + 1];
        q[2 * i] = q0 * c - q1 * s;
        q[2 * i + 1] = q0 * s + q1 * c;
        kc[2 * i] = k0 * c - k1 * s;
        kc[2 * i + 1] = k0 * s + k1 * c;
        vc[2 * i] = v[2 * i];
        vc[2 * i + 1] = v[2 * i + 1];
    }
}

// rotate q and k by the position's angles; store k and v at the position
__global__ void rotary_and_cache(float *q, const float *k, const float *v, float *k_cache, float *v_cache,
                                 const int *pos, int hidden)
{
    size_t p = (size_t)(*pos % max_positions);
    rotate_and_store(q, k, v, k_cache + p * hidden, v_cache + p * hidden, *pos, hidden);
}

// softmax(q . K / sqrt(d)) V of one head over the first n positions of
// its sequence's caches (kc, vc), by a block of head_dim threads; qhead
// and ohead are the head's slices of q and of the output
__device__ void attend(const float *qhead, const float *kc, const float *vc, int n, int hidden, int head,
                       float *ohead)
{
    __shared__ float score[max_positions];
    __shared__ float qh[head_dim];
    __shared__ float total;
    int d = threadIdx.x;
    qh[d] = qhead[d];
    __syncthreads();
    for (int t = d; t < n; t += blockDim.x) {
        const float *key = kc + (size_t)t * hidden + head * head_dim;
        float s = 0.0f;
        for (int j = 0; j < head_dim; j++)
            s += qh[j] * key[j];
        score[t] = s * rsqrtf((float)head_dim);
    }
    __syncthreads();
    if (d == 0) {
        float top = score[0], sum = 0.0f;
        for (int t = 1; t < n; t++)
            top = fmaxf(top, score[t]);
        for (int t = 0; t < n; t++) {
            score[t] = expf(score[t] - top);
            sum += score[t];
        }
        total = sum;
    }
    __syncthreads();
    float acc = 0.0f;
    for (int t = 0; t < n; t++)
        acc += score[t] * vc[(size_t)t * hidden + head * head_dim + d];
    ohead[d] = acc / total;
}

// one block of head_dim threads per head, over the cached positions up to
// this one
__global__ void attention(const float *q, const float *k_cache, const float *v_cache, float *out, const int *pos,
                          int hidden)
{
    int head = blockIdx.x;
    attend(q + head * head_dim, k_cache, v_cache, (*pos < max_positions ? *pos : max_positions - 1) + 1, hidden, head,
           out + head * head_dim);
}

__global__ void add_into(float *x, const float *y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += y[i];
}

__global__ void silu_times(const float *gate, const float *up, float *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void fill_ones(float *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = 1.0f;
}

struct layer {
    float *norm1, *wq, *wk, *wv, *wo, *norm2, *wgate, *wup, *wdown;
    float *k_cache, *v_cache;
};

// n floats of device memory: zero (scale < 0), ones (a norm's weights,
// scale 0) or weights from seed, scaled
inline float *make(size_t n, unsigned seed, float scale)
{
    float *p = nullptr;
    DECODE_CHECK(cudaMalloc(&p, n * sizeof(float)));
    if (scale < 0.0f)
        DECODE_CHECK(cudaMemset(p, 0, n * sizeof(float)));
    else if (scale == 0.0f)
        fill_ones<<<64, 256>>>(p, n);
    else
        fill_weights<<<256, 256>>>(p, n, seed, scale);
    return p;
}

// a layer's weights from seed on (nine seeds), and caches of cache_rows
// positions, zero
inline layer make_layer(int hidden, int ffn, size_t cache_rows, unsigned &seed)
{
    size_t h = (size_t)hidden, f = (size_t)ffn;
    layer l;
    l.norm1 = make(h, seed++, 0.0f);
    l.norm2 = make(h, seed++, 0.0f);
    l.wq = make(h * h, seed++, 1.0f / (float)hidden);
    l.wk = make(h * h, seed++, 1.0f / (float)hidden);
    l.wv = make(h * h, seed++, 1.0f / (float)hidden);
    l.wo = make(h * h, seed++, 1.0f / (float)hidden);
    l.wgate = make(f * h, seed++, 1.0f / (float)hidden);
    l.wup = make(f * h, seed++, 1.0f / (float)hidden);
    l.wdown = make(h * f, seed++, 1.0f / (float)ffn);
    l.k_cache = make(cache_rows * h, 0, -1.0f);
    l.v_cache = make(cache_rows * h, 0, -1.0f);
    return l;
}

// Where a step forks its parallel GEMVs (Q/K/V, then gate/up) and joins
// them back: eager launches use events, captures the builder's forks or
// the hand-written events.  fork(n, streams) fills streams[0..n-1], the
// first being the step's own stream.
struct forker {
    virtual void fork(int n, cudaStream_t *streams) = 0;
    virtual void join() = 0;
    virtual ~forker() = default;
};

// The step's forks during a capture (or a graph set's eager run): forks
// of the builder it is handed, joined back.
struct builder_forker : forker {
    cucap::builder &b;
    std::vector<cucap::builder> forks;

    explicit builder_forker(cucap::builder &builder) : b(builder) {}
    void fork(int n, cudaStream_t *streams) override
    {
        forks = b.split(n);
        streams[0] = b.stream();
        for (int i = 1; i < n; i++)
            streams[i] = forks[i - 1].stream();
    }
    void join() override
    {
        b.join_forks();
        forks.clear();
    }
};

struct model {
    int hidden, layers, ffn;
    std::vector<layer> weights;
    float *x, *xn, *q, *k, *v, *att, *proj, *gate, *up, *act;
    cublasHandle_t blas;
    void *blas_workspace;

    model(int hidden_, int layers_) : hidden(hidden_), layers(layers_), ffn(4 * hidden_)
    {
        size_t h = (size_t)hidden, f = (size_t)ffn;
        weights.resize((size_t)layers);
        unsigned seed = 1;
        for (layer &l : weights)
            l = make_layer(hidden, ffn, max_positions, seed);
        x = make(h, 7777, 1.0f);
        xn = make(h, 0, -1.0f);
        q = make(h, 0, -1.0f);
        k = make(h, 0, -1.0f);
        v = make(h, 0, -1.0f);
        att = make(h, 0, -1.0f);
        proj = make(h, 0, -1.0f);
        gate = make(f, 0, -1.0f);
        up = make(f, 0, -1.0f);
        act = make(f, 0, -1.0f);
        DECODE_BLAS(cublasCreate(&blas));
        // a workspace set before any capture: cuBLAS allocates nothing while capturing
        DECODE_CHECK(cudaMalloc(&blas_workspace, 4 << 20));
        DECODE_BLAS(cublasSetWorkspace(blas, blas_workspace, 4 << 20));
        DECODE_CHECK(cudaDeviceSynchronize());
    }
    ~model()
    {
        cublasDestroy(blas);
        cudaFree(blas_workspace);
        for (layer &l : weights)
            for (float *p : {l.norm1, l.norm2, l.wq, l.wk, l.wv, l.wo, l.wgate, l.wup, l.wdown, l.k_cache, l.v_cache})
                cudaFree(p);
        for (float *p : {x, xn, q, k, v, att, proj, gate, up, act})
            cudaFree(p);
    }
    model(const model &) = delete;
    model &operator=(const model &) = delete;

    // the state a run starts from: the same input, an empty cache
    void reset(cudaStream_t s)
    {
        fill_weights<<<64, 256, 0, s>>>(x, (size_t)hidden, 7777, 1.0f);
        for (layer &l : weights) {
            DECODE_CHECK(cudaMemsetAsync(l.k_cache, 0, sizeof(float) * hidden * max_positions, s));
            DECODE_CHECK(cudaMemsetAsync(l.v_cache, 0, sizeof(float) * hidden * max_positions, s));
        }
        DECODE_CHECK(cudaStreamSynchronize(s));
    }

    // y = W x, W of rows x cols, row-major
    void gemv(cudaStream_t s, const float *w, const float *in, float *out, int rows, int cols)
    {
        const float one = 1.0f, zero = 0.0f;
        DECODE_BLAS(cublasSetStream(blas, s));
        DECODE_BLAS(cublasSgemv(blas, CUBLAS_OP_T, cols, rows, &one, w, cols, in, 1, &zero, out, 1));
    }

    // one token: every layer's 14 launches on s, the parallel GEMVs on the
    // forker's streams when there is one
    void step(cudaStream_t s, const int *pos, forker *forks)
    {
        int blocks = (hidden + 255) / 256, fblocks = (ffn + 255) / 256;
        cudaStream_t on[3] = {s, s, s};
        for (layer &l : weights) {
            rms_norm<<<1, 256, 0, s>>>(x, l.norm1, xn, hidden);
            if (forks)
                forks->fork(3, on);
            gemv(on[0], l.wq, xn, q, hidden, hidden);
            gemv(on[1], l.wk, xn, k, hidden, hidden);
            gemv(on[2], l.wv, xn, v, hidden, hidden);
            if (forks)
                forks->join();
            rotary_and_cache<<<blocks, 256, 0, s>>>(q, k, v, l.k_cache, l.v_cache, pos, hidden);
            attention<<<hidden / head_dim, head_dim, 0, s>>>(q, l.k_cache, l.v_cache, att, pos, hidden);
            gemv(s, l.wo, att, proj, hidden, hidden);
            add_into<<<blocks, 256, 0, s>>>(x, proj, hidden);
            rms_norm<<<1, 256, 0, s>>>(x, l.norm2, xn, hidden);
            if (forks)
                forks->fork(2, on);
            gemv(on[0], l.wgate, xn, gate, ffn, hidden);
            gemv(on[1], l.wup, xn, up, ffn, hidden);
            if (forks)
                forks->join();
            silu_times<<<fblocks, 256, 0, s>>>(gate, up, act, ffn);
            gemv(s, l.wdown, act, proj, hidden, ffn);
            add_into<<<blocks, 256, 0, s>>>(x, proj, hidden);
        }
    }

private:
};

// Eager launches' forks: an event recorded on the step's stream, waited
// for by the others, and back.
struct event_forker : forker {
    cudaStream_t origin, extra[2];
    cudaEvent_t split, joined[2];
    int n = 0;

    explicit event_forker(cudaStream_t s) : origin(s)
    {
        DECODE_CHECK(cudaEventCreateWithFlags(&split, cudaEventDisableTiming));
        for (int i = 0; i < 2; i++) {
            DECODE_CHECK(cudaStreamCreateWithFlags(&extra[i], cudaStreamNonBlocking));
            DECODE_CHECK(cudaEventCreateWithFlags(&joined[i], cudaEventDisableTiming));
        }
    }
    ~event_forker() override
    {
        cudaEventDestroy(split);
        for (int i = 0; i < 2; i++) {
            cudaStreamDestroy(extra[i]);
            cudaEventDestroy(joined[i]);
        }
    }
    void fork(int count, cudaStream_t *streams) override
    {
        n = count - 1;
        DECODE_CHECK(cudaEventRecord(split, origin));
        streams[0] = origin;
        for (int i = 0; i < n; i++) {
            DECODE_CHECK(cudaStreamWaitEvent(extra[i], split, 0));
            streams[i + 1] = extra[i];
        }
    }
    void join() override
    {
        for (int i = 0; i < n; i++) {
            DECODE_CHECK(cudaEventRecord(joined[i], extra[i]));
            DECODE_CHECK(cudaStreamWaitEvent(origin, joined[i], 0));
        }
    }
};

} // namespace decode

#endif
