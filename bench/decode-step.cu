// The decode step of a small transformer (examples/decode-model.cuh), per
// token, in one process: eager launches; re-capture + update + launch,
// hand-written and through libcucapture; capture once and replay with the
// position as a per-launch parameter, hand-written (a device buffer of the
// program's, copied into before each launch) and through libcucapture
// (builder::params<int>(), exec::launch(stream, position)); each with and
// without forks for the parallel GEMVs; and the floor, the same graph
// replayed for every token with no host work or wait between tokens.
// The host waits for each token before the next, as a decoder must.
//
// Rounds interleave the modes; each mode starts a round from the same
// state and must end it with the same result as eager launches, bit for
// bit.  Printed: the median time per token over the rounds with p10/p90,
// and ratios of paired rounds (median [p10, p90]).
//
//     decode-step [tokens per round] [rounds] [HIDDENxLAYERS ...]
//     (default: 20 15 512x32 1024x16 2048x16)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cucapture.hpp>

#include "../examples/decode-model.cuh"

namespace {

using clock_type = std::chrono::steady_clock;


// "N nodes (K kernel, ...), E edges"
std::string describe(cudaGraph_t g)
{
    size_t nodes = 0, edges = 0;
    DECODE_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    std::vector<cudaGraphNode_t> all(nodes);
    DECODE_CHECK(cudaGraphGetNodes(g, all.data(), &nodes));
    DECODE_CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
    int kernels = 0, copies = 0, other = 0;
    for (cudaGraphNode_t n : all) {
        cudaGraphNodeType t;
        DECODE_CHECK(cudaGraphNodeGetType(n, &t));
        kernels += t == cudaGraphNodeTypeKernel;
        copies += t == cudaGraphNodeTypeMemcpy;
        other += t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemcpy;
    }
    char text[128];
    std::snprintf(text, sizeof text, "%zu nodes (%d kernel, %d memcpy, %d other), %zu edges", nodes, kernels, copies,
                  other, edges);
    return text;
}

enum mode { EAGER, RECAPTURE_RAW, RECAPTURE_LIB, REPLAY_RAW, REPLAY_LIB, FLOOR, FLOOR_RAW, MODES };
const char *const mode_names[MODES] = {
    "eager launches",
    "re-capture + update, hand-written",
    "re-capture + update, libcucapture",
    "replay, position copied, hand-written",
    "replay, per-launch params, libcucapture",
    "floor: replay, no host work between tokens",
    "the same, the hand-written graph",
};

struct runner {
    decode::model &m;
    bool forked;
    int tokens;
    cudaStream_t s;
    int *pos;                                  // the hand-written modes' position buffer
    decode::event_forker events;               // eager and hand-written forks
    cudaGraphExec_t raw_update = nullptr, raw_replay = nullptr;
    cucap::builder b;                          // the library's re-capture builder, reset per token
    cucap::exec lib_update;
    cucap::builder replay_builder;             // captured once
    cucap::exec lib_replay;
    std::string graphs;                        // the two replays' graphs, described

    runner(decode::model &model, bool f, int t) : m(model), forked(f), tokens(t), s(make_stream()), events(s)
    {
        DECODE_CHECK(cudaMalloc(&pos, sizeof(int)));
        b = cucap::builder::on_stream(s);
        // the replays' graphs, captured once
        DECODE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        m.step(s, pos, forked ? &events : nullptr);
        cudaGraph_t g;
        DECODE_CHECK(cudaStreamEndCapture(s, &g));
        DECODE_CHECK(cudaGraphInstantiate(&raw_replay, g, 0));
        graphs = "hand-written " + describe(g);
        DECODE_CHECK(cudaGraphDestroy(g));
        replay_builder = cucap::builder::on_stream(s);
        decode::builder_forker forks(replay_builder);
        replay_builder.capture([&](cucap::builder &self) {
            m.step(self.stream(), self.params<int>(), forked ? &forks : nullptr);
        });
        graphs += "; libcucapture " + describe(replay_builder.graph_ref().handle());
        lib_replay = replay_builder.complete();
    }
    ~runner()
    {
        cudaGraphExecDestroy(raw_update);
        cudaGraphExecDestroy(raw_replay);
        cudaFree(pos);
    }
    static cudaStream_t make_stream()
    {
        cudaStream_t s;
        DECODE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        return s;
    }

    void token_raw_recapture(int t)
    {
        cudaGraph_t g;
        DECODE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        m.step(s, pos, forked ? &events : nullptr);
        DECODE_CHECK(cudaStreamEndCapture(s, &g));
        if (!raw_update) {
            DECODE_CHECK(cudaGraphInstantiate(&raw_update, g, 0));
        } else {
            cudaGraphExecUpdateResultInfo info;
            DECODE_CHECK(cudaGraphExecUpdate(raw_update, g, &info));
        }
        DECODE_CHECK(cudaGraphDestroy(g));
        DECODE_CHECK(cudaMemcpyAsync(pos, &t, sizeof t, cudaMemcpyHostToDevice, s));
        DECODE_CHECK(cudaGraphLaunch(raw_update, s));
    }
    void token_lib_recapture(int t)
    {
        decode::builder_forker forks(b);
        b.reset();
        b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
        m.step(b.stream(), pos, forked ? &forks : nullptr);
        b.end();
        b.complete_into(lib_update);
        DECODE_CHECK(cudaMemcpyAsync(pos, &t, sizeof t, cudaMemcpyHostToDevice, s));
        lib_update.launch(s);
    }

    // one round of a mode: microseconds per token
    double run(mode md)
    {
        m.reset(s);
        clock_type::time_point start = clock_type::now();
        for (int t = 0; t < tokens; t++) {
            switch (md) {
            case EAGER:
                DECODE_CHECK(cudaMemcpyAsync(pos, &t, sizeof t, cudaMemcpyHostToDevice, s));
                m.step(s, pos, forked ? &events : nullptr);
                break;
            case RECAPTURE_RAW: token_raw_recapture(t); break;
            case RECAPTURE_LIB: token_lib_recapture(t); break;
            case REPLAY_RAW:
            case FLOOR_RAW:
                DECODE_CHECK(cudaMemcpyAsync(pos, &t, sizeof t, cudaMemcpyHostToDevice, s));
                DECODE_CHECK(cudaGraphLaunch(raw_replay, s));
                break;
            case REPLAY_LIB:
            case FLOOR: lib_replay.launch(s, t); break;
            default: break;
            }
            if (md != FLOOR && md != FLOOR_RAW)
                DECODE_CHECK(cudaStreamSynchronize(s));   // the next token depends on this one
        }
        DECODE_CHECK(cudaStreamSynchronize(s));
        return std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / tokens;
    }
};

struct spread {
    double median, p10, p90;
};

spread of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[(size_t)(q * (double)(v.size() - 1) + 0.5)]; };
    return {at(0.5), at(0.1), at(0.9)};
}

std::vector<float> state(const decode::model &m)
{
    std::vector<float> x(m.hidden);
    DECODE_CHECK(cudaMemcpy(x.data(), m.x, sizeof(float) * m.hidden, cudaMemcpyDeviceToHost));
    return x;
}

} // namespace

int main(int argc, char **argv)
{
    int tokens = argc > 1 ? std::atoi(argv[1]) : 20, rounds = argc > 2 ? std::atoi(argv[2]) : 15;
    std::vector<std::pair<int, int>> sizes;
    int devices = 0;

#ifndef __OPTIMIZE__
    // nvcc compiles host code at -O0 unless told: the C++ layer's inline
    // code would be timed unoptimized against hand-written calls
    std::fprintf(stderr, "decode-step: built without optimization (nvcc -O2; configure passes NVCCFLAGS, -O2 by default): "
                 "its times would mean nothing\n");
    return 2;
#endif
    for (int i = 3; i < argc; i++) {
        int h = 0, l = 0;
        if (std::sscanf(argv[i], "%dx%d", &h, &l) != 2 || h <= 0 || h % decode::head_dim || l <= 0) {
            std::fprintf(stderr, "decode-step: '%s' is not HIDDENxLAYERS (hidden a multiple of %d)\n", argv[i],
                         decode::head_dim);
            return 2;
        }
        sizes.emplace_back(h, l);
    }
    if (sizes.empty())
        sizes = {{512, 32}, {1024, 16}, {2048, 16}};
    if (tokens <= 0 || rounds <= 0) {
        std::fprintf(stderr, "usage: decode-step [tokens per round] [rounds] [HIDDENxLAYERS ...]\n");
        return 2;
    }
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("decode-step: no usable CUDA GPU\n");
        return 77;
    }
    cudaDeviceProp prop;
    DECODE_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    DECODE_CHECK(cudaDriverGetVersion(&driver));
    std::printf("decode step, batch 1, fp32, on %s (driver API %d), libcucapture %s: %d tokens a round, %d rounds "
                "after one warm-up round; microseconds per token, median [p10, p90] over the rounds\n",
                prop.name, driver, cucap::version_string(), tokens, rounds);
    int mismatches = 0;
    try {
        for (auto [hidden, layers] : sizes) {
            decode::model m(hidden, layers);
            for (int forked = 0; forked <= 1; forked++) {
                runner r(m, forked != 0, tokens);
                std::vector<double> times[MODES];
                std::vector<double> lib_vs_raw_update, lib_vs_raw_replay, eager_vs_replay, replay_vs_floor;
                for (int round = 0; round <= rounds; round++) {
                    double t[MODES];
                    std::vector<float> eager;
                    for (int md = 0; md < MODES; md++) {
                        t[md] = r.run((mode)md);
                        std::vector<float> x = state(m);
                        if (md == EAGER)
                            eager = x;
                        else if (std::memcmp(x.data(), eager.data(), sizeof(float) * x.size()) != 0) {
                            std::printf("  MISMATCH: %s differs from eager launches (round %d)\n", mode_names[md],
                                        round);
                            mismatches++;
                        }
                    }
                    if (round == 0)
                        continue;   // warm-up: instantiation, first-use costs
                    for (int md = 0; md < MODES; md++)
                        times[md].push_back(t[md]);
                    lib_vs_raw_update.push_back(t[RECAPTURE_LIB] / t[RECAPTURE_RAW]);
                    lib_vs_raw_replay.push_back(t[REPLAY_LIB] / t[REPLAY_RAW]);
                    eager_vs_replay.push_back(t[EAGER] / t[REPLAY_LIB]);
                    replay_vs_floor.push_back(t[REPLAY_LIB] / t[FLOOR]);
                }
                std::printf("\n%d x %d layers (%d launches a token), %s\n", hidden, layers, 14 * layers,
                            forked ? "with forks (Q/K/V and gate/up in parallel)" : "one stream");
                std::printf("graphs: %s\n", r.graphs.c_str());
                std::printf("| %-44s | %9s | %21s |\n", "mode", "us/token", "[p10, p90]");
                std::printf("|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(11, '-').c_str(),
                            std::string(23, '-').c_str());
                for (int md = 0; md < MODES; md++) {
                    spread sp = of(times[md]);
                    std::printf("| %-44s | %9.1f | [%9.1f, %9.1f] |\n", mode_names[md], sp.median, sp.p10, sp.p90);
                }
                spread a = of(lib_vs_raw_update), b = of(lib_vs_raw_replay), c = of(eager_vs_replay),
                       d = of(replay_vs_floor);
                std::printf("  re-capture + update, library / hand-written: %.3f [%.3f, %.3f]\n", a.median, a.p10, a.p90);
                std::printf("  replay, library / hand-written:              %.3f [%.3f, %.3f]\n", b.median, b.p10, b.p90);
                std::printf("  eager / library replay (speed-up):           %.3f [%.3f, %.3f]\n", c.median, c.p10, c.p90);
                std::printf("  library replay / floor:                      %.3f [%.3f, %.3f]\n", d.median, d.p10, d.p90);
            }
        }
    } catch (const cucap::error &e) {
        std::printf("decode-step: %s\n", e.text().c_str());
        return 1;
    }
    if (mismatches) {
        std::printf("decode-step: %d runs did not match eager launches\n", mismatches);
        return 1;
    }
    std::printf("\nevery mode's result matched eager launches bit for bit in every round\n");
    return 0;
}
