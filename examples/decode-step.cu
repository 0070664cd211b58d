// The decode step of a small transformer, captured once through
// libcucapture and replayed for every token with the token's position as a
// per-launch parameter (builder::params<T>() and exec::launch(stream,
// values)); the parallel GEMVs (Q/K/V, gate/up) run on forks of the
// capture.  The result is checked against eager launches of the same
// kernels, bit for bit.  Needs a GPU, nvcc and cuBLAS:
//     nvcc -std=c++17 decode-step.cu $(pkg-config --cflags --libs cucapture) -lcublas -o decode-step
#include <cstdio>
#include <cstring>
#include <vector>

#include <cucapture.hpp>

#include "decode-model.cuh"

namespace {


std::vector<float> result(const decode::model &m)
{
    std::vector<float> x(m.hidden);
    DECODE_CHECK(cudaMemcpy(x.data(), m.x, sizeof(float) * m.hidden, cudaMemcpyDeviceToHost));
    return x;
}

} // namespace

int main(int argc, char **argv)
{
    int hidden = argc > 1 ? std::atoi(argv[1]) : 512, layers = argc > 2 ? std::atoi(argv[2]) : 8;
    int tokens = argc > 3 ? std::atoi(argv[3]) : 32;
    int devices = 0;

    if (hidden <= 0 || hidden % decode::head_dim || layers <= 0 || tokens <= 0) {
        std::fprintf(stderr, "usage: decode-step [hidden (a multiple of %d)] [layers] [tokens]\n", decode::head_dim);
        return 2;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("decode-step: no usable CUDA GPU\n");
        return 77;
    }
    try {
        decode::model m(hidden, layers);
        cudaStream_t s;
        int *pos = nullptr;
        DECODE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        DECODE_CHECK(cudaMalloc(&pos, sizeof(int)));

        // eager launches: the position copied in before each token
        decode::event_forker eager_forks(s);
        m.reset(s);
        for (int t = 0; t < tokens; t++) {
            DECODE_CHECK(cudaMemcpyAsync(pos, &t, sizeof t, cudaMemcpyHostToDevice, s));
            m.step(s, pos, &eager_forks);
            DECODE_CHECK(cudaStreamSynchronize(s));   // the next token depends on this one
        }
        std::vector<float> eager = result(m);

        // captured once, the position a per-launch parameter
        cucap::builder b = cucap::builder::create(0);
        decode::builder_forker forks(b);
        b.capture([&](cucap::builder &self) {
            int *position = self.params<int>();
            m.step(self.stream(), position, &forks);
        });
        cucap::exec step = b.complete();
        m.reset(s);
        for (int t = 0; t < tokens; t++) {
            step.launch(b.stream(), t);
            DECODE_CHECK(cudaStreamSynchronize(b.stream()));
        }
        std::vector<float> replayed = result(m);

        DECODE_CHECK(cudaFree(pos));
        DECODE_CHECK(cudaStreamDestroy(s));
        if (std::memcmp(eager.data(), replayed.data(), sizeof(float) * hidden) != 0) {
            for (int i = 0; i < hidden; i++)
                if (eager[i] != replayed[i]) {
                    std::printf("decode-step: FAILED: x[%d] is %.9g replayed, %.9g eager\n", i, replayed[i], eager[i]);
                    break;
                }
            return 1;
        }
        std::printf("decode-step: %d tokens of %d x %d layers (%d launches a token), replayed with per-launch "
                    "positions: identical to eager launches (x[0] = %.6g)\n",
                    tokens, hidden, layers, 14 * layers, replayed[0]);
    } catch (const cucap::error &e) {
        std::printf("decode-step: %s\n", e.text().c_str());
        return e.code() == CUDA_ERROR_NO_DEVICE || e.code() == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED ? 77 : 1;
    }
    return 0;
}
