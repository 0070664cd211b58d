// The decode step of examples/decode-step.cu over a batch of sequences
// whose size changes every step, as a server with continuous batching
// runs it: 64 sequence slots, each step a batch of 1 to 64 of them (sizes
// from a fixed-seed distribution), padded to a bucket (a power of two).
// One graph per bucket, kept in a cucap::graph_set under a byte budget:
// the first step of a bucket captures it, later ones launch it with the
// step's values (its batch size, and each sequence's slot and position)
// through the graph's parameter block.  The step allocates its
// activations inside the capture (stream-ordered, so each bucket's graph
// holds graph memory); the Q/K/V and gate/up GEMMs (cuBLAS) run on forks.
// Every sequence's state is checked against eager launches of the same
// steps, bit for bit.  Needs a GPU, nvcc and cuBLAS:
//     nvcc -std=c++17 batch-decode.cu $(pkg-config --cflags --libs cucapture) -lcublas -o batch-decode
//
//     batch-decode [hidden (a multiple of 64)] [layers] [steps] [budget MiB]
#include <cstdio>
#include <cstring>
#include <vector>

#include <cucapture.hpp>

#include "decode-model.cuh"

namespace {

constexpr int slots = 64;            // sequences being decoded, the largest batch

struct step_values {
    int n;                           // sequences in this step; the bucket's rows past n are padding
    int slot[slots];                 // row r decodes the sequence of slot[r]
    int pos[slots];                  // at position pos[r]
};

// one block per row: the row's RMS norm
__global__ void rms_norm_rows(const float *x, const float *weight, float *out, int hidden)
{
    __shared__ float partial[256];
    const float *in = x + (size_t)blockIdx.x * hidden;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        sum += in[i] * in[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    float inv = rsqrtf(partial[0] / hidden + 1e-5f);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        out[(size_t)blockIdx.x * hidden + i] = in[i] * inv * weight[i];
}

// the rows' states gathered from their slots (padding rows zero), and back
__global__ void gather(const float *state, float *x, const step_values *v, int hidden)
{
    int row = blockIdx.x;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        x[(size_t)row * hidden + i] = row < v->n ? state[(size_t)v->slot[row] * hidden + i] : 0.0f;
}

__global__ void scatter(float *state, const float *x, const step_values *v, int hidden)
{
    int row = blockIdx.x;
    if (row < v->n)
        for (int i = threadIdx.x; i < hidden; i += blockDim.x)
            state[(size_t)v->slot[row] * hidden + i] = x[(size_t)row * hidden + i];
}

// per row (blockIdx.y): q and k rotated by the row's position, k and v
// stored in its slot's cache at that position
__global__ void rotary_and_cache_rows(float *q, const float *k, const float *v, float *k_cache, float *v_cache,
                                      const step_values *sv, int hidden)
{
    int row = blockIdx.y;
    if (row >= sv->n)
        return;
    int pos = sv->pos[row], p = pos % decode::max_positions;
    float *qr = q + (size_t)row * hidden;
    const float *kr = k + (size_t)row * hidden, *vr = v + (size_t)row * hidden;
    float *kc = k_cache + ((size_t)sv->slot[row] * decode::max_positions + p) * hidden;
    float *vc = v_cache + ((size_t)sv->slot[row] * decode::max_positions + p) * hidden;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden / 2; i += gridDim.x * blockDim.x) {
        int pair = i % (decode::head_dim / 2);
        float angle = (float)pos * powf(10000.0f, -2.0f * pair / decode::head_dim);
        float c = cosf(angle), s = sinf(angle);
        float q0 = qr[2 * i], q1 = qr[2 * i + 1], k0 = kr[2 * i], k1 = kr[2 * i + 1];
        qr[2 * i] = q0 * c - q1 * s;
        qr[2 * i + 1] = q0 * s + q1 * c;
        kc[2 * i] = k0 * c - k1 * s;
        kc[2 * i + 1] = k0 * s + k1 * c;
        vc[2 * i] = vr[2 * i];
        vc[2 * i + 1] = vr[2 * i + 1];
    }
}

// one block of head_dim threads per head (x) and row (y): attention over
// the row's sequence's cached positions up to its own
__global__ void attention_rows(const float *q, const float *k_cache, const float *v_cache, float *out,
                               const step_values *sv, int hidden)
{
    __shared__ float score[decode::max_positions];
    __shared__ float qh[decode::head_dim];
    __shared__ float total;
    int head = blockIdx.x, row = blockIdx.y, d = threadIdx.x;
    if (row >= sv->n) {
        out[(size_t)row * hidden + head * decode::head_dim + d] = 0.0f;
        return;
    }
    int pos = sv->pos[row], n = (pos < decode::max_positions ? pos : decode::max_positions - 1) + 1;
    const float *kc = k_cache + (size_t)sv->slot[row] * decode::max_positions * hidden;
    const float *vc = v_cache + (size_t)sv->slot[row] * decode::max_positions * hidden;
    qh[d] = q[(size_t)row * hidden + head * decode::head_dim + d];
    __syncthreads();
    for (int t = d; t < n; t += blockDim.x) {
        const float *key = kc + (size_t)t * hidden + head * decode::head_dim;
        float s = 0.0f;
        for (int j = 0; j < decode::head_dim; j++)
            s += qh[j] * key[j];
        score[t] = s * rsqrtf((float)decode::head_dim);
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
        acc += score[t] * vc[(size_t)t * hidden + head * decode::head_dim + d];
    out[(size_t)row * hidden + head * decode::head_dim + d] = acc / total;
}

struct batch_model {
    int hidden, layers, ffn;
    std::vector<decode::layer> weights;   // k_cache and v_cache: slots x max_positions x hidden
    float *state;                    // slots x hidden: each sequence's hidden state
    // a cuBLAS handle and workspace for each of the step's three streams:
    // GEMMs running at once on the forks must not share a workspace
    cublasHandle_t blas[3];
    void *blas_workspace[3];

    batch_model(int hidden_, int layers_) : hidden(hidden_), layers(layers_), ffn(4 * hidden_)
    {
        size_t h = (size_t)hidden, f = (size_t)ffn, cache = (size_t)slots * decode::max_positions * h;
        weights.resize((size_t)layers);
        unsigned seed = 1;
        for (decode::layer &l : weights) {
            l.norm1 = make(h, seed++, 0.0f);
            l.norm2 = make(h, seed++, 0.0f);
            l.wq = make(h * h, seed++, 1.0f / (float)hidden);
            l.wk = make(h * h, seed++, 1.0f / (float)hidden);
            l.wv = make(h * h, seed++, 1.0f / (float)hidden);
            l.wo = make(h * h, seed++, 1.0f / (float)hidden);
            l.wgate = make(f * h, seed++, 1.0f / (float)hidden);
            l.wup = make(f * h, seed++, 1.0f / (float)hidden);
            l.wdown = make(h * f, seed++, 1.0f / (float)ffn);
            l.k_cache = make(cache, 0, -1.0f);
            l.v_cache = make(cache, 0, -1.0f);
        }
        state = make(slots * h, 0, -1.0f);
        // workspaces set before any capture: cuBLAS allocates nothing while capturing
        for (int i = 0; i < 3; i++) {
            DECODE_BLAS(cublasCreate(&blas[i]));
            DECODE_CHECK(cudaMalloc(&blas_workspace[i], 4 << 20));
            DECODE_BLAS(cublasSetWorkspace(blas[i], blas_workspace[i], 4 << 20));
        }
        DECODE_CHECK(cudaDeviceSynchronize());
    }
    ~batch_model()
    {
        for (int i = 0; i < 3; i++) {
            cublasDestroy(blas[i]);
            cudaFree(blas_workspace[i]);
        }
        for (decode::layer &l : weights)
            for (float *p : {l.norm1, l.norm2, l.wq, l.wk, l.wv, l.wo, l.wgate, l.wup, l.wdown, l.k_cache, l.v_cache})
                cudaFree(p);
        cudaFree(state);
    }
    batch_model(const batch_model &) = delete;
    batch_model &operator=(const batch_model &) = delete;

    // every sequence from the same start, its cache empty
    void reset(cudaStream_t s)
    {
        decode::fill_weights<<<64, 256, 0, s>>>(state, (size_t)slots * hidden, 7777, 1.0f);
        for (decode::layer &l : weights) {
            DECODE_CHECK(cudaMemsetAsync(l.k_cache, 0, sizeof(float) * slots * decode::max_positions * hidden, s));
            DECODE_CHECK(cudaMemsetAsync(l.v_cache, 0, sizeof(float) * slots * decode::max_positions * hidden, s));
        }
        DECODE_CHECK(cudaStreamSynchronize(s));
    }

    // Y (rows x out) = X (rows x in) W^T, W of out x in, all row-major,
    // with the step's stream `which`'s handle on s
    void gemm(int which, cudaStream_t s, const float *w, const float *in, float *out, int rows, int out_dim,
              int in_dim)
    {
        const float one = 1.0f, zero = 0.0f;
        DECODE_BLAS(cublasSetStream(blas[which], s));
        // cublasSetStream puts the handle back on cuBLAS's own workspace, which it would allocate inside the
        // capture: the handle's own, again
        DECODE_BLAS(cublasSetWorkspace(blas[which], blas_workspace[which], 4 << 20));
        DECODE_BLAS(cublasSgemm(blas[which], CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in_dim, &one, w, in_dim, in, in_dim,
                                &zero, out, out_dim));
    }

    // One step of a batch padded to `rows`, its values at v; its
    // activations allocated and freed on s, stream-ordered.
    void step(cudaStream_t s, const step_values *v, int rows, decode::forker *forks)
    {
        size_t h = (size_t)rows * hidden, f = (size_t)rows * ffn;
        float *x, *xn, *q, *k, *vv, *att, *proj, *gate, *up, *act;
        for (float **p : {&x, &xn, &q, &k, &vv, &att, &proj})
            DECODE_CHECK(cudaMallocAsync(p, h * sizeof(float), s));
        for (float **p : {&gate, &up, &act})
            DECODE_CHECK(cudaMallocAsync(p, f * sizeof(float), s));
        int blocks = (int)((h + 255) / 256), fblocks = (int)((f + 255) / 256), rot = (hidden / 2 + 127) / 128;
        cudaStream_t on[3] = {s, s, s};
        gather<<<rows, 256, 0, s>>>(state, x, v, hidden);
        for (decode::layer &l : weights) {
            rms_norm_rows<<<rows, 256, 0, s>>>(x, l.norm1, xn, hidden);
            forks->fork(3, on);
            gemm(0, on[0], l.wq, xn, q, rows, hidden, hidden);
            gemm(1, on[1], l.wk, xn, k, rows, hidden, hidden);
            gemm(2, on[2], l.wv, xn, vv, rows, hidden, hidden);
            forks->join();
            rotary_and_cache_rows<<<dim3(rot, rows), 128, 0, s>>>(q, k, vv, l.k_cache, l.v_cache, v, hidden);
            attention_rows<<<dim3(hidden / decode::head_dim, rows), decode::head_dim, 0, s>>>(q, l.k_cache,
                                                                                            l.v_cache, att, v, hidden);
            gemm(0, s, l.wo, att, proj, rows, hidden, hidden);
            decode::add_into<<<blocks, 256, 0, s>>>(x, proj, (int)h);
            rms_norm_rows<<<rows, 256, 0, s>>>(x, l.norm2, xn, hidden);
            forks->fork(2, on);
            gemm(0, on[0], l.wgate, xn, gate, rows, ffn, hidden);
            gemm(1, on[1], l.wup, xn, up, rows, ffn, hidden);
            forks->join();
            decode::silu_times<<<fblocks, 256, 0, s>>>(gate, up, act, (int)f);
            gemm(0, s, l.wdown, act, proj, rows, hidden, ffn);
            decode::add_into<<<blocks, 256, 0, s>>>(x, proj, (int)h);
        }
        scatter<<<rows, 256, 0, s>>>(state, x, v, hidden);
        for (float *p : {x, xn, q, k, vv, att, proj, gate, up, act})
            DECODE_CHECK(cudaFreeAsync(p, s));
    }

    std::vector<float> states() const
    {
        std::vector<float> out((size_t)slots * hidden);
        DECODE_CHECK(cudaMemcpy(out.data(), state, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
        return out;
    }

private:
    static float *make(size_t n, unsigned seed, float scale)
    {
        float *p = nullptr;
        DECODE_CHECK(cudaMalloc(&p, n * sizeof(float)));
        if (scale < 0.0f)
            DECODE_CHECK(cudaMemset(p, 0, n * sizeof(float)));
        else if (scale == 0.0f)
            decode::fill_ones<<<64, 256>>>(p, n);
        else
            decode::fill_weights<<<256, 256>>>(p, n, seed, scale);
        return p;
    }
};

// The step's forks during a capture (or the set's eager run): forks of
// the builder it is handed, joined back.
struct builder_forker : decode::forker {
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

int bucket_of(int batch)
{
    int b = 1;
    while (b < batch)
        b *= 2;
    return b;
}

// The batches of every step, from one seed: sizes 1 to 64, the slots a
// window that moves on, each sequence at its own next position.
std::vector<step_values> schedule(int steps)
{
    std::vector<step_values> out((size_t)steps);
    std::vector<int> next_pos(slots, 0);
    unsigned long long seed = 2026;
    int start = 0;
    for (step_values &v : out) {
        std::memset(&v, 0, sizeof v);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v.n = 1 + (int)((seed >> 33) % slots);
        for (int r = 0; r < v.n; r++) {
            v.slot[r] = (start + r) % slots;
            v.pos[r] = next_pos[v.slot[r]]++;
        }
        start = (start + 7) % slots;
    }
    return out;
}

} // namespace

int main(int argc, char **argv)
{
    int hidden = argc > 1 ? std::atoi(argv[1]) : 512, layers = argc > 2 ? std::atoi(argv[2]) : 4;
    int steps = argc > 3 ? std::atoi(argv[3]) : 64;
    long budget_mib = argc > 4 ? std::atol(argv[4]) : 256;
    int devices = 0;

    if (hidden <= 0 || hidden % decode::head_dim || hidden > 16384 || layers <= 0 || steps <= 0 || budget_mib <= 0) {
        std::fprintf(stderr, "usage: batch-decode [hidden (a multiple of %d)] [layers] [steps] [budget MiB]\n",
                     decode::head_dim);
        return 2;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("batch-decode: no usable CUDA GPU\n");
        return 77;
    }
    try {
        batch_model m(hidden, layers);
        std::vector<step_values> batches = schedule(steps);
        cudaStream_t s;
        step_values *eager_values = nullptr;
        DECODE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        DECODE_CHECK(cudaMalloc(&eager_values, sizeof(step_values)));

        // eager launches: the step's values copied in before each step
        decode::event_forker eager_forks(s);
        m.reset(s);
        for (const step_values &v : batches) {
            DECODE_CHECK(cudaMemcpyAsync(eager_values, &v, sizeof v, cudaMemcpyHostToDevice, s));
            m.step(s, eager_values, bucket_of(v.n), &eager_forks);
            DECODE_CHECK(cudaStreamSynchronize(s));   // the host waits for each step, as a decoder does
        }
        std::vector<float> eager = m.states();

        // through a graph set: one graph per bucket, the step's values per launch
        cucap_graph_set_options opts{};
        opts.budget_bytes = (size_t)budget_mib << 20;
        cucap::graph_set set = cucap::graph_set::create(0, opts);
        m.reset(s);
        for (const step_values &v : batches) {
            int bucket = bucket_of(v.n);
            set.run(bucket,
                                          [&](cucap::builder &b) {
                                              builder_forker forks(b);
                                              m.step(b.stream(), b.params<step_values>(), bucket, &forks);
                                          },
                                          v, s);
            DECODE_CHECK(cudaStreamSynchronize(s));
        }
        std::vector<float> replayed = m.states();
        cucap_graph_set_stats st = set.stats();

        DECODE_CHECK(cudaFree(eager_values));
        if (std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)) != 0) {
            for (size_t i = 0; i < eager.size(); i++)
                if (eager[i] != replayed[i]) {
                    std::printf("batch-decode: FAILED: slot %zu x[%zu] is %.9g through the set, %.9g eager\n",
                                i / hidden, i % hidden, replayed[i], eager[i]);
                    break;
                }
            return 1;
        }
        std::printf("batch-decode: %d steps of 1-%d sequences (%d x %d layers) in %zu bucket graphs: %llu hits, "
                    "%llu misses, %llu eager; graph memory %zu MiB + footprint %zu KiB of a %ld MiB budget; "
                    "identical to eager launches\n",
                    steps, slots, hidden, layers, st.graphs, st.hits, st.misses, st.eager_runs, st.graph_memory >> 20,
                    st.footprint >> 10, budget_mib);
        if (st.eager_runs)
            std::printf("batch-decode: the last step run eagerly was so because %s\n", st.last_reason);
        DECODE_CHECK(cudaStreamDestroy(s));
    } catch (const cucap::error &e) {
        std::printf("batch-decode: %s\n", e.text().c_str());
        return e.code() == CUDA_ERROR_NO_DEVICE || e.code() == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED ? 77 : 1;
    }
    return 0;
}
