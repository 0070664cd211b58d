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
    size_t row = (size_t)blockIdx.x * hidden;
    decode::rms_norm_row(x + row, weight, out + row, hidden);
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
    size_t at = (size_t)row * hidden;
    float *kc = k_cache + ((size_t)sv->slot[row] * decode::max_positions + p) * hidden;
    float *vc = v_cache + ((size_t)sv->slot[row] * decode::max_positions + p) * hidden;
    decode::rotate_and_store(q + at, k + at, v + at, kc, vc, pos, hidden);
}

// one block of head_dim threads per head (x) and row (y): attention over
// the row's sequence's cached positions up to its own
__global__ void attention_rows(const float *q, const float *k_cache, const float *v_cache, float *out,
                               const step_values *sv, int hidden)
{
    int head = blockIdx.x, row = blockIdx.y;
    float *ohead = out + (size_t)row * hidden + head * decode::head_dim;
    if (row >= sv->n) {
        ohead[threadIdx.x] = 0.0f;
        return;
    }
    int pos = sv->pos[row];
    size_t cache = (size_t)sv->slot[row] * decode::max_positions * hidden;
    decode::attend(q + (size_t)row * hidden + head * decode::head_dim, k_cache + cache, v_cache + cache,
                   (pos < decode::max_positions ? pos : decode::max_positions - 1) + 1, hidden, head, ohead);
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
        size_t h = (size_t)hidden;
        weights.resize((size_t)layers);
        unsigned seed = 1;
        for (decode::layer &l : weights)
            l = decode::make_layer(hidden, ffn, (size_t)slots * decode::max_positions, seed);
        state = decode::make(slots * h, 0, -1.0f);
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
                                              decode::builder_forker forks(b);
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
