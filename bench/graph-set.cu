// Graph sets against what engines write by hand, in one run: a step whose
// batch size changes every step (sizes 1 to 64 from a fixed-seed
// distribution, bucketed to powers of two), with its activations
// allocated inside the step (stream-ordered, so captured graphs hold graph
// memory), L layers of small kernels, the host waiting for each step as a
// decoder does.  Modes, interleaved round by round:
//   eager launches;
//   a hand-written cache: a map from bucket to executable graph,
//     instantiated on a miss, no budget, the step's values copied into a
//     buffer of the program's before each launch;
//   cucap::graph_set with no budget;
//   cucap::graph_set with a third of the bytes all buckets' graphs take;
//   cucap::graph_set holding 2 graphs and keeping 2 retired ones for
//     updates, its step's activations in a buffer of the program's (the
//     driver updates no executable graph with allocation nodes).
// Every mode's outputs are compared with eager launches' after each round.
// Then the warm-up of 64 batch sizes from 1 and from 16 threads (made
// before the clock starts), by hand (capture + instantiate on each
// thread's stream, the executables kept; from 16 threads also one
// thread's list at a time) and through one set.
// Then small graphs (a memset and a copy from the block, 8 keys): a hit
// and a miss served by an update against a hand-written cache and a
// hand-written LRU that updates; one key from 8 threads on 8 streams
// against 8 keys (a kernel of about 20 us a run); and the third-of-memory
// set from 4 threads, each on its own stream.
// Printed: time per step (median over rounds, p10/p90), paired ratios,
// misses, the most graph memory + footprint the budgeted set held, the
// device's free memory after the sets are destroyed against before, and
// after the sets' lives again against before them.
//
//     graph-set [steps per round] [rounds] [layers]   (default 200 9 16)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cucapture.hpp>
#include <cuda_runtime.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t rc_ = (call);                                                                  \
        if (rc_ != cudaSuccess) {                                                                  \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

namespace {

constexpr int hidden = 256;
constexpr int max_batch = 64;

struct values {
    unsigned index;                  // the output slot
    float seed;
};

__global__ void init(float *act, const values *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        act[i] = v->seed + (float)(i % 97) * 0.01f;
}

__global__ void mix(float *act, const float *w, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        act[i] = act[i] * 0.5f + w[i % hidden];
}

__global__ void reduce(const float *act, int n, const values *v, float *out)
{
    __shared__ float part[256];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        sum += act[i];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[v->index] = part[0];
}

struct model {
    int layers;
    float *weights;                  // layers x hidden
    float *out;                      // one slot per step of a round

    float *fixed_act;                // max_batch x hidden, for steps that allocate nothing

    // The step for bucket (its batch size): reads its values at v; its
    // activations allocated in the step (1 MiB a sequence), or fixed_act.
    void step(cudaStream_t s, const values *v, int bucket, bool allocate = true) const
    {
        int n = bucket * hidden;
        float *act = fixed_act;
        if (allocate)
            CHECK(cudaMallocAsync(&act, (size_t)bucket << 20, s));
        init<<<(n + 255) / 256, 256, 0, s>>>(act, v, n);
        for (int l = 0; l < layers; l++)
            mix<<<(n + 255) / 256, 256, 0, s>>>(act, weights + (size_t)l * hidden, n);
        reduce<<<1, 256, 0, s>>>(act, n, v, out);
        if (allocate)
            CHECK(cudaFreeAsync(act, s));
    }
};

int bucket_of(int batch)
{
    int b = 1;
    while (b < batch)
        b *= 2;
    return b;
}

using clock_type = std::chrono::steady_clock;

// Threads made and set up before the clock starts, then let go at once.
struct start_line {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    void wait()
    {
        ready++;
        while (!go.load())
            std::this_thread::yield();
    }
    clock_type::time_point release(int threads)
    {
        while (ready.load() < threads)
            std::this_thread::yield();
        auto t0 = clock_type::now();
        go = true;
        return t0;
    }
};

double seconds_since(clock_type::time_point t0)
{
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double quantile(std::vector<double> v, double q)
{
    std::sort(v.begin(), v.end());
    return v[(size_t)(q * (double)(v.size() - 1) + 0.5)];
}

struct hand_cache {
    std::unordered_map<int, cudaGraphExec_t> graphs;
    values *block = nullptr;
    unsigned long misses = 0;

    void run(const model &m, int bucket, const values &v, cudaStream_t s)
    {
        CHECK(cudaMemcpyAsync(block, &v, sizeof v, cudaMemcpyHostToDevice, s));
        auto it = graphs.find(bucket);
        if (it == graphs.end()) {
            cudaGraph_t g;
            CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            m.step(s, block, bucket);
            CHECK(cudaStreamEndCapture(s, &g));
            cudaGraphExec_t e;
            CHECK(cudaGraphInstantiate(&e, g, 0));
            CHECK(cudaGraphDestroy(g));
            it = graphs.emplace(bucket, e).first;
            misses++;
        }
        CHECK(cudaGraphLaunch(it->second, s));
    }
    void clear()
    {
        for (auto &kv : graphs)
            CHECK(cudaGraphExecDestroy(kv.second));
        graphs.clear();
        if (block)
            CHECK(cudaFree(block));
        block = nullptr;
    }
};

size_t graph_memory()
{
    cuuint64_t r = 0;
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &r);
    return (size_t)r;
}

size_t free_memory()
{
    size_t f = 0, t = 0;
    CHECK(cudaMemGetInfo(&f, &t));
    return f;
}

// ---------------------------------------------------------------- small graphs

__global__ void spin(long long cycles, const values *v, float *out)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
    if (threadIdx.x == 0)
        out[v->index] = v->seed;
}

// The small step: its values' seed set into out[index] by a copy from the block, after a memset of out.
void small_step(cudaStream_t s, const values *v, float *out, int key)
{
    CHECK(cudaMemsetAsync(out + 64 + key, 0, sizeof(float), s));
    CHECK(cudaMemcpyAsync(out + 64 + key, &v->seed, sizeof(float), cudaMemcpyDeviceToDevice, s));
}

struct small_hand {
    std::unordered_map<int, cudaGraphExec_t> graphs;
    cudaGraphExec_t lru = nullptr;   // the LRU of one that updates
    values *block = nullptr;

    void capture(int key, float *out, cudaStream_t s, cudaGraph_t *g)
    {
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        small_step(s, block, out, key);
        CHECK(cudaStreamEndCapture(s, g));
    }
    void hit(int key, const values &v, float *out, cudaStream_t s)
    {
        CHECK(cudaMemcpyAsync(block, &v, sizeof v, cudaMemcpyHostToDevice, s));
        auto it = graphs.find(key);
        if (it == graphs.end()) {
            cudaGraph_t g;
            capture(key, out, s, &g);
            cudaGraphExec_t e;
            CHECK(cudaGraphInstantiate(&e, g, 0));
            CHECK(cudaGraphDestroy(g));
            it = graphs.emplace(key, e).first;
        }
        CHECK(cudaGraphLaunch(it->second, s));
    }
    void miss_by_update(int key, const values &v, float *out, cudaStream_t s)
    {
        cudaGraph_t g;
        cudaGraphExecUpdateResultInfo info;
        CHECK(cudaMemcpyAsync(block, &v, sizeof v, cudaMemcpyHostToDevice, s));
        capture(key, out, s, &g);
        if (!lru)
            CHECK(cudaGraphInstantiate(&lru, g, 0));
        else
            CHECK(cudaGraphExecUpdate(lru, g, &info));
        CHECK(cudaGraphDestroy(g));
        CHECK(cudaGraphLaunch(lru, s));
    }
    ~small_hand()
    {
        for (auto &kv : graphs)
            CHECK(cudaGraphExecDestroy(kv.second));
        if (lru)
            CHECK(cudaGraphExecDestroy(lru));
    }
};

void small_rows(const model &m, cudaStream_t s)
{
    constexpr int keys = 8, batch = 8, runs = 4000, rounds = 9;
    cucap_graph_set_options all{}, one{};
    all.budget_bytes = (size_t)1 << 30;
    all.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    one = all;
    one.budget_graphs = 1;
    one.kept_for_update = 1;
    small_hand hand;
    CHECK(cudaMalloc(&hand.block, sizeof(values)));
    cucap::graph_set hits = cucap::graph_set::create(0, all), updates = cucap::graph_set::create(0, one);
    std::vector<double> hit_hand, hit_set, upd_hand, upd_set;
    int wrong = 0;
    auto timed = [&](auto &&run) {
        auto t0 = clock_type::now();
        for (int i = 0; i < runs; i++) {
            run(i % keys, values{0, (float)(i % 13 + 1)});
            if (i % batch == batch - 1)
                CHECK(cudaStreamSynchronize(s));
        }
        CHECK(cudaStreamSynchronize(s));
        float got[keys];
        CHECK(cudaMemcpy(got, m.out + 64, sizeof got, cudaMemcpyDeviceToHost));
        for (int k = 0; k < keys; k++)
            wrong += got[k] != (float)((runs - keys + k) % 13 + 1);
        return seconds_since(t0) / runs * 1e6;
    };
    for (int r = 0; r <= rounds; r++) {   // round 0 warms every cache up, and is not counted
        double a = timed([&](int k, const values &v) { hand.hit(k, v, m.out, s); });
        double b = timed([&](int k, const values &v) {
            hits.run(k, [&](cucap::builder &bb) { small_step(bb.stream(), bb.params<values>(), m.out, k); }, v, s);
        });
        double c = timed([&](int k, const values &v) { hand.miss_by_update(k, v, m.out, s); });
        double d = timed([&](int k, const values &v) {
            updates.run(k, [&](cucap::builder &bb) { small_step(bb.stream(), bb.params<values>(), m.out, k); }, v, s);
        });
        if (r) {
            hit_hand.push_back(a), hit_set.push_back(b), upd_hand.push_back(c), upd_set.push_back(d);
        }
    }
    auto paired = [&](const std::vector<double> &x, const std::vector<double> &y, bool diff) {
        std::vector<double> q;
        for (size_t i = 0; i < x.size(); i++)
            q.push_back(diff ? x[i] - y[i] : x[i] / y[i]);
        return q;
    };
    std::vector<double> hd = paired(hit_set, hit_hand, true), ur = paired(upd_set, upd_hand, false);
    std::printf("small graph (memset + copy from the block, %d keys, a sync every %d runs), us a run, medians of %d "
                "rounds:\n", keys, batch, rounds);
    std::printf("  hit: hand-written cache %.2f, graph set %.2f: set - hand %.2f us [%.2f, %.2f]\n",
                quantile(hit_hand, 0.5), quantile(hit_set, 0.5), quantile(hd, 0.5), quantile(hd, 0.1),
                quantile(hd, 0.9));
    std::printf("  every run a miss served by an update: hand-written LRU of 1 %.2f, graph set of 1 + 1 kept %.2f: "
                "ratio %.3f [%.3f, %.3f] (set updates %llu, instantiations %llu)\n",
                quantile(upd_hand, 0.5), quantile(upd_set, 0.5), quantile(ur, 0.5), quantile(ur, 0.1),
                quantile(ur, 0.9), updates.stats().updates, updates.stats().instantiations);

    // one key from 8 threads on 8 streams, against 8 keys
    constexpr int threads = 8, per_thread = 200;
    long long cycles = 40000;   // about 20 us at 1.98 GHz
    std::vector<double> same, different;
    size_t copies = 0;
    for (int r = 0; r <= rounds; r++)
        for (int same_key = 1; same_key >= 0; same_key--) {
            cucap::graph_set set = cucap::graph_set::create(0, all);
            std::vector<cudaStream_t> streams(threads);
            for (cudaStream_t &ts : streams)
                CHECK(cudaStreamCreateWithFlags(&ts, cudaStreamNonBlocking));
            start_line line;
            std::atomic<int> bad{0};
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; t++)
                pool.emplace_back([&, t] {
                    int key = same_key ? 0 : t;
                    auto step = [&](cucap::builder &bb) { spin<<<1, 32, 0, bb.stream()>>>(cycles, bb.params<values>(), m.out); };
                    for (int i = 0; i < 20; i++)   // the graphs (and copies) made before the clock
                        set.run(key, step, values{(unsigned)(128 + t), 0.0f}, streams[t]);
                    CHECK(cudaStreamSynchronize(streams[t]));
                    line.wait();
                    for (int i = 0; i < per_thread; i++) {
                        set.run(key, step, values{(unsigned)(128 + t), (float)(i + 1)}, streams[t]);
                        CHECK(cudaStreamSynchronize(streams[t]));
                    }
                    float got;
                    CHECK(cudaMemcpy(&got, m.out + 128 + t, sizeof got, cudaMemcpyDeviceToHost));
                    bad += got != (float)per_thread;
                });
            auto t0 = line.release(threads);
            for (auto &th : pool)
                th.join();
            double us = seconds_since(t0) / (threads * per_thread) * 1e6;
            wrong += bad.load();
            if (same_key) {
                copies = set.stats().copies;
                cucap_graph_set_key_stats ks = set.key_stats(0);
                if (r == rounds && ks.reason[0])
                    std::printf("  (the key's last failure: %s)\n", ks.reason);
            }
            if (r)
                (same_key ? same : different).push_back(us);
            for (cudaStream_t ts : streams)
                CHECK(cudaStreamDestroy(ts));
        }
    std::vector<double> kr = paired(same, different, false);
    std::printf("one key from %d threads on %d streams (a kernel of %lld cycles a run, the host waiting for each): "
                "%.2f us a run, %d keys %.2f: ratio %.3f [%.3f, %.3f] (%zu copies of the key)\n", threads, threads,
                cycles, quantile(same, 0.5), threads, quantile(different, 0.5), quantile(kr, 0.5), quantile(kr, 0.1),
                quantile(kr, 0.9), copies);
    std::printf("small-graph results identical to what each run asked for: %s\n", wrong ? "NO" : "yes");
    CHECK(cudaFree(hand.block));
}

// The set with a third of the memory all buckets' graphs take, from 4 threads on their own streams: the
// device's reserved graph memory plus the set's footprint read after every run.
void third_from_threads(const model &m, const std::vector<int> &batches, size_t budget)
{
    constexpr int threads = 4;
    cucap_graph_set_options o{};
    o.budget_bytes = budget;
    o.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CHECK(cudaDeviceGraphMemTrim(0));
    cucap::graph_set set = cucap::graph_set::create(0, o);
    std::atomic<size_t> most{0};
    std::atomic<unsigned long> over{0}, checked{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++)
        pool.emplace_back([&, t] {
            cudaStream_t ts;
            CHECK(cudaStreamCreateWithFlags(&ts, cudaStreamNonBlocking));
            for (size_t i = t; i < batches.size(); i++) {
                int bucket = bucket_of(batches[(i * 7 + t) % batches.size()]);
                set.run(bucket, [&](cucap::builder &b) { m.step(b.stream(), b.params<values>(), bucket); },
                        values{(unsigned)i, 1.0f}, ts);
                size_t taken = graph_memory() + set.stats().footprint;
                size_t seen = most.load();
                while (taken > seen && !most.compare_exchange_weak(seen, taken))
                    ;
                over += taken > budget;
                checked++;
                CHECK(cudaStreamSynchronize(ts));
            }
            CHECK(cudaStreamDestroy(ts));
        });
    for (auto &th : pool)
        th.join();
    cucap_graph_set_stats st = set.stats();
    std::printf("a third of the memory from %d threads: most taken %zu MiB of %zu; over the budget at %lu of %lu "
                "runs checked (set-stream launches %llu, eager %llu)\n", threads, most.load() >> 20, budget >> 20,
                over.load(), checked.load(), st.set_stream_launches, st.eager_runs);
}

} // namespace

int main(int argc, char **argv)
{
    int steps = argc > 1 ? std::atoi(argv[1]) : 200, rounds = argc > 2 ? std::atoi(argv[2]) : 9;
    model m{argc > 3 ? std::atoi(argv[3]) : 16, nullptr, nullptr, nullptr};
    cudaStream_t s;

    CHECK(cudaFree(0));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&m.weights, (size_t)m.layers * hidden * sizeof(float)));
    CHECK(cudaMemset(m.weights, 0, (size_t)m.layers * hidden * sizeof(float)));
    CHECK(cudaMalloc(&m.out, (size_t)std::max(steps, 256) * sizeof(float)));   // small_rows writes 64 to 135
    CHECK(cudaMalloc(&m.fixed_act, (size_t)max_batch * hidden * sizeof(float)));
    values *eager_block;
    CHECK(cudaMalloc(&eager_block, sizeof(values)));
    // eager steps allocate from the default pool, which keeps what they free (as engines set it)
    cudaMemPool_t pool;
    cuuint64_t keep_all = ~0ull;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));

    // the batch sizes of every round, from one seed
    std::vector<int> batches(steps);
    unsigned long long seed = 2026;
    for (int &b : batches) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        b = 1 + (int)((seed >> 33) % max_batch);
    }
    // what every bucket's graph takes, for the budget: its activations in 32 MiB granules
    size_t all = 0;
    for (int b = 1; b <= max_batch; b *= 2) {
        size_t bytes = (size_t)b << 20;
        all += (bytes + (32u << 20) - 1) / (32u << 20) * (32u << 20);
    }
    // warm-up of 64 batch sizes, 1 and 16 threads, by hand (and through a set, below)
    double hand_capture_ms = 0, hand_instantiate_ms = 0, set_capture_ms = 0, set_instantiate_ms = 0;
    // (one_list_at_a_time: each thread's list under one lock, the work of one thread done at a time)
    auto warm_by_hand = [&](int threads, bool one_list_at_a_time = false) {
        std::vector<cudaGraphExec_t> made(max_batch);
        start_line line;
        std::mutex one_list;
        std::vector<cudaStream_t> streams(threads);
        values *block;
        CHECK(cudaMalloc(&block, sizeof(values)));
        for (cudaStream_t &ts : streams)
            CHECK(cudaStreamCreateWithFlags(&ts, cudaStreamNonBlocking));
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; t++)
            pool.emplace_back([&, t] {
                cudaStream_t ts = streams[t];
                line.wait();
                std::unique_lock<std::mutex> hold(one_list, std::defer_lock);
                if (one_list_at_a_time)
                    hold.lock();
                for (int b = 1 + t; b <= max_batch; b += threads) {
                    cudaGraph_t g;
                    cudaGraphExec_t e;
                    auto c0 = clock_type::now();
                    CHECK(cudaStreamBeginCapture(ts, cudaStreamCaptureModeThreadLocal));
                    m.step(ts, block, b);
                    CHECK(cudaStreamEndCapture(ts, &g));
                    auto c1 = clock_type::now();
                    CHECK(cudaGraphInstantiate(&e, g, 0));
                    if (threads == 1) {
                        hand_capture_ms += std::chrono::duration<double>(c1 - c0).count() * 1e3;
                        hand_instantiate_ms += seconds_since(c1) * 1e3;
                    }
                    CHECK(cudaGraphDestroy(g));
                    made[b - 1] = e;   // kept, as an engine keeps what it warms
                }
                if (hold.owns_lock())
                    hold.unlock();
            });
        auto t0 = line.release(threads);
        for (auto &th : pool)
            th.join();
        double ms = seconds_since(t0) * 1e3;
        CHECK(cudaFree(block));
        for (cudaStream_t ts : streams)
            CHECK(cudaStreamDestroy(ts));
        for (cudaGraphExec_t e : made)
            CHECK(cudaGraphExecDestroy(e));
        return ms;
    };
    // the kernels loaded (lazily, at their first launch) before the device's free memory is read, and
    // what the driver keeps after a program's first graphs (by hand, before any set, from 1 thread and
    // from 16 at once) measured apart
    for (int b = 1; b <= max_batch; b *= 2)
        m.step(s, eager_block, b, false);
    CHECK(cudaStreamSynchronize(s));
    size_t free_at_start = free_memory();
    {
        hand_cache first;
        CHECK(cudaMalloc(&first.block, sizeof(values)));
        for (int b = 1; b <= max_batch; b *= 2)
            first.run(m, b, values{0, 0.0f}, s);
        CHECK(cudaStreamSynchronize(s));
        first.clear();
        (void)warm_by_hand(16);
        CHECK(cudaDeviceGraphMemTrim(0));
        CHECK(cudaMemPoolTrimTo(pool, 0));
        CHECK(cudaMemset(m.out, 0, (size_t)steps * sizeof(float)));
    }
    size_t free_before = free_memory();

    cucap_graph_set_options unlimited{}, third{}, two{};
    unlimited.budget_bytes = (size_t)1 << 40;
    unlimited.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    third = unlimited;
    third.budget_bytes = all / 3;
    two = unlimited;
    two.budget_graphs = 2;
    two.kept_for_update = 2;
    cucap::graph_set set_all = cucap::graph_set::create(0, unlimited);
    cucap::graph_set set_third = cucap::graph_set::create(0, third);
    cucap::graph_set set_two = cucap::graph_set::create(0, two);
    hand_cache hand;
    CHECK(cudaMalloc(&hand.block, sizeof(values)));

    enum { EAGER, HAND, SET, SET_THIRD, SET_UPDATE, MODES };
    const char *names[MODES] = {"eager launches", "hand-written cache (no budget)", "graph set, no budget",
                                "graph set, a third of the memory", "graph set, 2 graphs + 2 kept (updates)"};
    std::vector<double> per_step[MODES], miss_updated, miss_instantiated;
    std::vector<float> expected(steps), got(steps);
    size_t peak_third = 0, peak_third_set = 0;
    unsigned long over_budget = 0, checked = 0;
    int mismatches = 0;

    for (int r = 0; r < rounds; r++) {
        for (int mode = 0; mode < MODES; mode++) {
            CHECK(cudaMemsetAsync(m.out, 0, (size_t)steps * sizeof(float), s));
            CHECK(cudaStreamSynchronize(s));
            if (mode == SET_THIRD)   // the other modes' idle graphs' memory given back: the budget's check sees this set's
                CHECK(cudaDeviceGraphMemTrim(0));
            auto t0 = clock_type::now();
            for (int i = 0; i < steps; i++) {
                values v{(unsigned)i, (float)(i % 13)};
                int bucket = bucket_of(batches[i]);
                auto step = [&](cucap::builder &b) { m.step(b.stream(), b.params<values>(), bucket); };
                auto fixed_step = [&](cucap::builder &b) { m.step(b.stream(), b.params<values>(), bucket, false); };
                cucap_run_kind kind;
                switch (mode) {
                case EAGER:
                    CHECK(cudaMemcpyAsync(eager_block, &v, sizeof v, cudaMemcpyHostToDevice, s));
                    m.step(s, eager_block, bucket);
                    break;
                case HAND: hand.run(m, bucket, v, s); break;
                case SET: set_all.run(bucket, step, v, s); break;
                case SET_THIRD: set_third.run(bucket, step, v, s); break;
                default:
                    kind = set_two.run(bucket, fixed_step, v, s);
                    if (kind == CUCAP_RUN_UPDATED || kind == CUCAP_RUN_INSTANTIATED) {
                        cucap_graph_set_key_stats ks = set_two.key_stats(bucket);
                        (kind == CUCAP_RUN_UPDATED ? miss_updated : miss_instantiated)
                            .push_back(ks.capture_us + ks.instantiate_us);
                    }
                    break;
                }
                CHECK(cudaStreamSynchronize(s));
                if (mode == SET_THIRD) {
                    cucap_graph_set_stats st = set_third.stats();
                    size_t taken = graph_memory() + st.footprint;
                    peak_third = std::max(peak_third, taken);
                    peak_third_set = std::max(peak_third_set, st.graph_memory + st.footprint);
                    over_budget += taken > third.budget_bytes;
                    checked++;
                }
            }
            per_step[mode].push_back(seconds_since(t0) / steps * 1e6);
            CHECK(cudaMemcpy(mode == EAGER ? expected.data() : got.data(), m.out, (size_t)steps * sizeof(float),
                             cudaMemcpyDeviceToHost));
            if (mode != EAGER && std::memcmp(expected.data(), got.data(), (size_t)steps * sizeof(float)) != 0)
                mismatches++;
        }
    }
    std::printf("graph-set: %d steps a round, %d rounds, %d layers (%d kernels a step), batch 1-64 in %d buckets\n",
                steps, rounds, m.layers, m.layers + 2, 7);
    std::printf("%-36s %10s %10s %10s\n", "mode", "us/step", "p10", "p90");
    for (int mode = 0; mode < MODES; mode++)
        std::printf("%-36s %10.2f %10.2f %10.2f\n", names[mode], quantile(per_step[mode], 0.5),
                    quantile(per_step[mode], 0.1), quantile(per_step[mode], 0.9));
    auto ratio = [&](int a, int b, const char *what) {
        std::vector<double> q;
        for (size_t i = 0; i < per_step[a].size(); i++)
            q.push_back(per_step[a][i] / per_step[b][i]);
        std::printf("ratio %-52s %.3f [%.3f, %.3f]\n", what, quantile(q, 0.5), quantile(q, 0.1), quantile(q, 0.9));
    };
    ratio(SET, HAND, "graph set, no budget / hand-written cache");
    ratio(EAGER, SET, "eager / graph set, no budget");
    ratio(SET_THIRD, HAND, "graph set, a third / hand-written cache");
    ratio(SET_UPDATE, HAND, "graph set, 2 graphs + 2 kept / hand-written cache");
    cucap_graph_set_stats a = set_all.stats(), t = set_third.stats(), u = set_two.stats();
    std::printf("misses: hand-written %lu, set %llu, set with a third %llu (retirements %llu, trims %llu, eager %llu), "
                "set of 2 %llu (updates %llu, instantiations %llu, eager %llu)\n",
                hand.misses, a.misses, t.misses, t.retirements, t.trims, t.eager_runs, u.misses, u.updates,
                u.instantiations, u.eager_runs);
    std::printf("budget of the third: %zu MiB of %zu; most taken, device graph memory + footprint: %zu MiB (the set's "
                "own figure %zu MiB); over the budget at %lu of %lu steps checked; results identical to eager "
                "launches: %s\n",
                third.budget_bytes >> 20, all >> 20, peak_third >> 20, peak_third_set >> 20, over_budget, checked,
                mismatches ? "NO" : "yes");
    if (!miss_updated.empty() && !miss_instantiated.empty())
        std::printf("a miss, capture included (medians): updating a kept executable %.1f us, instantiating %.1f us: "
                    "%.3f (%zu and %zu misses)\n",
                    quantile(miss_updated, 0.5), quantile(miss_instantiated, 0.5),
                    quantile(miss_updated, 0.5) / quantile(miss_instantiated, 0.5), miss_updated.size(),
                    miss_instantiated.size());

    auto warm_set = [&](int threads) {
        cucap::graph_set ws = cucap::graph_set::create(0, unlimited);
        struct arg { const model *m; int b; };
        start_line line;
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; t++)
            pool.emplace_back([&, t] {
                std::vector<int> keys;
                std::vector<const void *> ptrs;
                std::vector<size_t> sizes;
                std::vector<arg> args;
                std::vector<void *> users;
                for (int b = 1 + t; b <= max_batch; b += threads)
                    keys.push_back(b);
                args.reserve(keys.size());
                for (int &k : keys) {
                    ptrs.push_back(&k);
                    sizes.push_back(sizeof k);
                    args.push_back({&m, k});
                }
                for (arg &x : args)
                    users.push_back(&x);
                cucap_capture_fn fn = [](cucap_builder *b, void *user, cucap_error **err) -> CUresult {
                    arg *x = static_cast<arg *>(user);
                    CUdeviceptr block = 0;
                    CUresult rc = cucap_builder_params(b, sizeof(values), &block, err);
                    if (rc == CUDA_SUCCESS)
                        x->m->step(cucap_builder_stream(b), reinterpret_cast<const values *>(block), x->b);
                    return rc;
                };
                line.wait();
                cucap_graph_set_warm(ws.get(), ptrs.data(), sizes.data(), keys.size(), fn, users.data(), nullptr);
            });
        auto t0 = line.release(threads);
        for (auto &th : pool)
            th.join();
        double ms = seconds_since(t0) * 1e3;
        if (ws.stats().graphs != (size_t)max_batch)
            std::printf("warm-up through the set made %zu graphs, not %d\n", ws.stats().graphs, max_batch);
        for (int b = 1; threads == 1 && b <= max_batch; b++) {
            cucap_graph_set_key_stats ks = ws.key_stats(b);
            set_capture_ms += ks.capture_us / 1e3;
            set_instantiate_ms += ks.instantiate_us / 1e3;
        }
        return ms;
    };
    // interleaved rounds: medians, and the median of each round's 16-thread / 1-thread ratio
    constexpr int warm_rounds = 7;
    std::vector<double> h1, h16, h16_one, s1, s16, hand_ratio, hand_one_ratio, set_ratio;
    for (int r = 0; r < warm_rounds; r++) {
        h1.push_back(warm_by_hand(1));
        h16.push_back(warm_by_hand(16));
        h16_one.push_back(warm_by_hand(16, true));
        hand_one_ratio.push_back(h16_one.back() / h1.back());
        s1.push_back(warm_set(1));
        s16.push_back(warm_set(16));
        hand_ratio.push_back(h16.back() / h1.back());
        set_ratio.push_back(s16.back() / s1.back());
    }
    std::printf("warm-up of %d batch sizes, ms (medians of %d rounds): by hand 1 thread %.1f, 16 threads %.1f "
                "(%.2fx [%.2f, %.2f]); through a set 1 thread %.1f, 16 threads %.1f (%.2fx [%.2f, %.2f])\n",
                max_batch, warm_rounds, quantile(h1, 0.5), quantile(h16, 0.5), quantile(hand_ratio, 0.5),
                quantile(hand_ratio, 0.1), quantile(hand_ratio, 0.9), quantile(s1, 0.5), quantile(s16, 0.5),
                quantile(set_ratio, 0.5), quantile(set_ratio, 0.1), quantile(set_ratio, 0.9));
    std::printf("warm-up by hand from 16 threads, one thread's list at a time: %.1f ms (%.2fx [%.2f, %.2f] of one "
                "thread's; the threads are made and set up before the clock in every row)\n", quantile(h16_one, 0.5),
                quantile(hand_one_ratio, 0.5), quantile(hand_one_ratio, 0.1), quantile(hand_one_ratio, 0.9));
    std::printf("warm-up from 1 thread, ms a round: by hand capture %.1f + instantiate %.1f; through a set capture "
                "%.1f + instantiate %.1f\n", hand_capture_ms / warm_rounds, hand_instantiate_ms / warm_rounds,
                set_capture_ms / warm_rounds, set_instantiate_ms / warm_rounds);

    auto kib_taken = [&] { return ((long long)free_before - (long long)free_memory()) / 1024; };
    long long with_all = kib_taken();
    set_all = cucap::graph_set();
    set_third = cucap::graph_set();
    set_two = cucap::graph_set();
    hand.clear();
    CHECK(cudaDeviceSynchronize());
    long long destroyed = kib_taken();
    cucap_release_cached();   /* the library's cached streams, events and builders */
    long long released = kib_taken();
    CHECK(cudaDeviceGraphMemTrim(0));
    long long trimmed = kib_taken();
    CHECK(cudaMemPoolTrimTo(pool, 0));
    std::printf("device memory taken against before, KiB: with every set %lld, the sets and cache destroyed %lld, "
                "cucap_release_cached %lld, graph memory trimmed %lld (graph memory reserved %zu KiB), pool trimmed "
                "%lld\n", with_all, destroyed, released, trimmed, graph_memory() >> 10, kib_taken());
    long long diff = (long long)free_before - (long long)free_memory();
    std::printf("device memory after the sets are destroyed: %lld KiB %s than before (the driver kept %lld KiB "
                "after the first graphs by hand, before any set: not counted)\n", (diff < 0 ? -diff : diff) >> 10,
                diff > 0 ? "less" : "more", ((long long)free_at_start - (long long)free_before) >> 10);
    // the sets' whole lives again (each set of the rounds run over a round's steps, a warm-up from 16
    // threads), measured from where the first left the device: what sets leave behind, apart from the
    // driver's growth at its first use of as many graphs and threads
    size_t free_second = free_memory();
    for (const cucap_graph_set_options *o : {&unlimited, &third, &two}) {
        cucap::graph_set again = cucap::graph_set::create(0, *o);
        for (int i = 0; i < steps; i++) {
            int bucket = bucket_of(batches[i]);
            bool allocate = o != &two;
            again.run(bucket, [&](cucap::builder &b) { m.step(b.stream(), b.params<values>(), bucket, allocate); },
                      values{(unsigned)i, 1.0f}, s);
        }
        CHECK(cudaStreamSynchronize(s));
    }
    (void)warm_set(16);
    cucap_release_cached();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaDeviceGraphMemTrim(0));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    long long second = ((long long)free_second - (long long)free_memory()) >> 10;
    std::printf("device memory after the sets' second lives, against before them: %lld KiB %s\n", second < 0 ? -second : second,
                second > 0 ? "less" : "more");
    third_from_threads(m, batches, all / 3);
    small_rows(m, s);
    return mismatches ? 1 : 0;
}
