/* Graph sets (cucap_graph_set_*), on the simulated driver and the GPU:
 * a step captured once per key and launched with new values, under a
 * budget that forces retirements, every result checked against what the
 * step must write; eager runs when a capture is invalidated by another
 * thread or an instantiation runs out of memory; threads sharing keys;
 * bad input refused and nothing changed. */
#define _GNU_SOURCE                  /* pthread_timedjoin_np */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "held-work.h"

BACKEND_SUITES(graph_set, 300);
FAULT_BACKEND_SUITES(graph_set, 120);

struct values {
    uint64_t step, key;
};

/* The step: two streams; the fork copies the run's values into memory it
 * allocates inside the step (key x 64 KiB, the step's graph memory) and
 * from there to out[1]; the primary copies them to out[0]. */
struct step {
    CUdeviceptr out;                 /* 2 x struct values */
    int leave_fork_open;
    int fail;                        /* the function fails, with a note */
    void (*during)(void *);          /* called while capturing, the first time only */
    void *during_arg;
    int per_key;                     /* out holds a slot per key (threads share the keys' graphs) */
    int calls;                       /* (atomic) */
    cucap_builder *open_forks[4];    /* forks it left open, the test's to destroy */
};

/* Odd keys allocate inside the step, key x 4 MiB; even ones do not (the
 * driver updates no executable graph with memory nodes, so only those can
 * take a kept one's place).  The driver reserves graph memory in 32 MiB
 * granules. */
static size_t step_bytes(uint64_t key)
{
    return key % 2 ? (size_t)key * (4u << 20) : 0;
}

struct step_call {
    struct step *step;
    uint64_t key;
};

static CUresult record_step(cucap_builder *b, void *user_data, cucap_error **err)
{
    struct step_call *call = user_data;
    struct step *st = call->step;
    cucap_builder *fork = NULL;
    cucap_pool *pool = NULL;
    CUdeviceptr block = 0, tmp = 0, out = st->out + (st->per_key ? call->key * 2 * sizeof(struct values) : 0);
    CUresult rc;
    int calls = __atomic_add_fetch(&st->calls, 1, __ATOMIC_RELAXED);

    if (st->fail) {
        cucap_i_fail(err, CUDA_ERROR_LAUNCH_FAILED, "record_step: the step's own failure");
        if (err && *err)
            cucap_i_error_add_note(*err, "a note of the step's");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    if ((rc = cucap_builder_params(b, sizeof(struct values), &block, err)) != CUDA_SUCCESS ||
        (rc = cucap_device_pool(0, &pool, err)) != CUDA_SUCCESS ||
        (rc = cucap_builder_split(b, 2, &fork, err)) != CUDA_SUCCESS)
        return rc;
    if (!step_bytes(call->key))
        rc = D.cuMemcpyDtoDAsync(out + sizeof(struct values), block, sizeof(struct values),
                                 cucap_builder_stream(fork));
    else if ((rc = cucap_pool_alloc(pool, step_bytes(call->key), cucap_builder_stream(fork), &tmp, err)) ==
                 CUDA_SUCCESS &&
             (rc = D.cuMemcpyDtoDAsync(tmp, block, sizeof(struct values), cucap_builder_stream(fork))) ==
                 CUDA_SUCCESS &&
             (rc = D.cuMemcpyDtoDAsync(out + sizeof(struct values), tmp, sizeof(struct values),
                                       cucap_builder_stream(fork))) == CUDA_SUCCESS)
        rc = cucap_pool_free(pool, tmp, cucap_builder_stream(fork), err);
    if (rc == CUDA_SUCCESS)
        rc = D.cuMemcpyDtoDAsync(out, block, sizeof(struct values), cucap_builder_stream(b));
    if (st->during && calls == 1)
        st->during(st->during_arg);
    if (rc == CUDA_SUCCESS && !st->leave_fork_open)
        rc = cucap_builder_join_forks(b, err);
    if (st->leave_fork_open && calls <= 4) {
        st->open_forks[calls - 1] = fork;   /* the function's own, destroyed by the test */
        return rc;
    }
    cucap_builder_destroy(fork);
    return rc;
}

static void check_out(CUdeviceptr out, uint64_t step, uint64_t key)
{
    struct values host[2];

    memset(host, 0, sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, out, sizeof host), CUDA_SUCCESS);
    cr_assert(host[0].step == step && host[0].key == key && host[1].step == step && host[1].key == key,
              "step %llu key %llu: the step wrote %llu/%llu and %llu/%llu", (unsigned long long)step,
              (unsigned long long)key, (unsigned long long)host[0].step, (unsigned long long)host[0].key,
              (unsigned long long)host[1].step, (unsigned long long)host[1].key);
}

static cucap_graph_set *new_set_in_mode(size_t bytes, size_t graphs, size_t kept, CUstreamCaptureMode mode)
{
    cucap_graph_set_options opts;
    cucap_graph_set *set = NULL;
    cucap_error *err = NULL;

    memset(&opts, 0, sizeof opts);
    opts.capture_mode = mode;
    opts.budget_bytes = bytes;
    opts.budget_graphs = graphs;
    opts.kept_for_update = kept;
    cr_assert_eq(cucap_graph_set_create(0, &opts, &set, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return set;
}

static cucap_graph_set *new_set(size_t bytes, size_t graphs, size_t kept)
{
    return new_set_in_mode(bytes, graphs, kept, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

static CUresult run_step(cucap_graph_set *set, struct step *st, uint64_t step, uint64_t key, CUstream s,
                         cucap_run_kind *kind, cucap_error **err)
{
    struct values v = { step, key };
    struct step_call call = { st, key };

    return cucap_graph_set_run(set, &key, sizeof key, record_step, &call, &v, sizeof v, s, kind, err);
}

static size_t device_taken(void)
{
    cuuint64_t reserved = 0;

    cr_assert_eq(D.cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved), CUDA_SUCCESS);
    return (size_t)reserved;
}

static void destroy_open_forks(struct step *st)
{
    int i;

    for (i = 0; i < 4; i++)
        cucap_builder_destroy(st->open_forks[i]);
}

/* ---------------------------------------------------------------- keys, values, budget */

/* A key's first run captures and instantiates, later ones launch the same
 * graph with their own values; warm-up makes graphs ahead; the figures
 * say so. */
BACKEND_TEST(graph_set, a_key_is_captured_once_and_launched_with_its_values)
{
    cucap_graph_set *set = new_set((size_t)256 << 20, 0, 0);
    struct step st;
    cucap_graph_set_stats stats;
    cucap_graph_set_key_stats ks;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t step, key = 3, warm_keys[2] = { 5, 6 };
    const void *keys[2] = { &warm_keys[0], &warm_keys[1] };
    size_t sizes[2] = { sizeof(uint64_t), sizeof(uint64_t) };
    struct step_call calls[2];
    void *users[2] = { &calls[0], &calls[1] };

    memset(&st, 0, sizeof st);
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    for (step = 1; step <= 20; step++) {
        cr_assert_eq(run_step(set, &st, step, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(kind, step == 1 ? CUCAP_RUN_INSTANTIATED : CUCAP_RUN_LAUNCHED, "step %llu: %d",
                     (unsigned long long)step, (int)kind);
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        check_out(st.out, step, key);
    }
    cr_assert_eq(st.calls, 1, "captured once");
    calls[0].step = calls[1].step = &st;
    calls[0].key = 5;
    calls[1].key = 6;
    cr_assert_eq(cucap_graph_set_warm(set, keys, sizes, 2, record_step, users, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(st.calls, 3);
    cr_assert_eq(run_step(set, &st, 21, 6, s, &kind, NULL), CUDA_SUCCESS);
    cr_assert_eq(kind, CUCAP_RUN_LAUNCHED, "warmed");
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_out(st.out, 21, 6);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert(stats.runs == 21 && stats.hits == 20 && stats.misses == 1 && stats.instantiations == 3 &&
                  stats.graphs == 3 && stats.eager_runs == 0, "runs %llu hits %llu misses %llu inst %llu graphs %zu",
              stats.runs, stats.hits, stats.misses, stats.instantiations, stats.graphs);
    cr_assert_eq(stats.budget_bytes, (size_t)256 << 20);
    cr_assert_eq(cucap_graph_set_get_key_stats(set, &key, sizeof key, &ks, &err), CUDA_SUCCESS);
    cr_assert(ks.has_graph && ks.runs == 20 && ks.allocation_bytes == step_bytes(3) && step_bytes(3) && ks.nodes >= 4,
              "graph %d runs %llu bytes %zu nodes %zu", ks.has_graph, ks.runs, ks.allocation_bytes, ks.nodes);
    key = 99;
    cr_assert_eq(cucap_graph_set_get_key_stats(set, &key, sizeof key, &ks, &err), CUDA_ERROR_NOT_FOUND);
    cucap_error_free(err);
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

/* 10,000 steps of random keys under a budget of 4 graphs and 80 MiB (two
 * steps of 64 MiB of graph memory never fit at once; all keys' graphs
 * apart would take 352 MiB): every result right, the budget never
 * passed, and the graph memory given back after the set.  (The device's
 * free memory is not read: other test programs share the device.) */
BACKEND_TEST(graph_set, ten_thousand_random_steps_under_a_budget)
{
    enum { KEYS = 12, STEPS = 10000 };
    size_t budget = (size_t)80 << 20;
    cucap_graph_set *set;
    cucap_graph_set_stats stats;
    struct step st;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t step, key, seed = 12345;
    cucap_run_kind kind;
    unsigned long long kinds[5] = { 0 };

    memset(&st, 0, sizeof st);
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(D.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    cr_assert_eq(device_taken(), 0);
    set = new_set(budget, 4, 1);
    for (step = 1; step <= STEPS; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        key = 1 + (seed >> 33) % KEYS;
        cr_assert_eq(run_step(set, &st, step, key, s, &kind, &err), CUDA_SUCCESS, "step %llu: %s",
                     (unsigned long long)step, cucap_error_message(err));
        kinds[kind]++;
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        check_out(st.out, step, key);
        cucap_graph_set_get_stats(set, &stats);
        cr_assert_leq(stats.graphs, 4);
        cr_assert_leq(device_taken() + stats.footprint, budget,
                      "step %llu (key %llu, %d): %zu + %zu taken, budget %zu; %zu graphs, %zu kept, %llu updates, "
                      "%llu retirements, %llu trims", (unsigned long long)step, (unsigned long long)key, (int)kind,
                      device_taken(), stats.footprint, budget, stats.graphs, stats.kept, stats.updates,
                      stats.retirements, stats.trims);
    }
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_gt(stats.retirements, 0);
    cr_assert_eq(kinds[CUCAP_RUN_EAGER], 0, "%s", stats.last_reason);
    cr_assert_gt(kinds[CUCAP_RUN_UPDATED], 0, "a kept executable graph was updated");
    cr_assert_eq(stats.hits + stats.misses, (unsigned long long)STEPS);
    cucap_graph_set_destroy(set);
    cr_assert_eq(device_taken(), 0, "the set's graph memory given back");
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

static double ms_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* the slowest call of a test, and which it was */
struct slowest {
    double ms;
    char what[64];
};

static void timed(struct slowest *w, double t0, const char *what, uint64_t n)
{
    double ms = ms_now() - t0;

    if (ms > w->ms) {
        w->ms = ms;
        snprintf(w->what, sizeof w->what, "%s %llu", what, (unsigned long long)n);
    }
}

/* Whether s's work is done within ms milliseconds (polled). */
static int done_within(CUstream s, double ms)
{
    double until = ms_now() + ms;
    CUresult rc;

    while ((rc = D.cuStreamQuery(s)) == CUDA_ERROR_NOT_READY && ms_now() < until)
        ;
    return rc == CUDA_SUCCESS;
}

/* Graphs retired with launches in flight (200 of the first), held behind
 * a gate (held-work.h): they all
 * finish, with their values; neither the retirements nor the set's
 * destroy waited for them (had they, the gate would have timed out), and
 * a new key's work on another stream did not wait for them either. */
BACKEND_TEST(graph_set, a_retirement_with_launches_in_flight)
{
    /* one graph at a time; a retired graph's memory stays taken until its launches are done */
    cucap_graph_set *set = new_set((size_t)128 << 20, 1, 0);
    cucap_graph_set_stats stats;
    struct slowest worst = { 0, "" };
    struct held gate;
    struct step st;
    const char *call;
    long waits;
    CUstream s = new_stream(), other = new_stream();
    CUdeviceptr outs;
    uint64_t step, key;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    int other_done = 1;
    double t0;

    memset(&st, 0, sizeof st);
    st.per_key = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, 5 * 2 * sizeof(struct values)), CUDA_SUCCESS);
    outs = st.out;
    held_init(&gate);
    cr_assert_eq(D.cuLaunchHostFunc(s, gate.fn, gate.data), CUDA_SUCCESS);
    for (step = 1; step <= 200; step++) {
        t0 = ms_now();
        cr_assert_eq(run_step(set, &st, step, 1, s, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        timed(&worst, t0, "run of key 1, step", step);
    }
    /* key 1 (with graph memory) retired for key 2 with its 200 launches held, key 2 for key 4 (neither has
     * graph memory) with its one: key 4's work on another stream waits for none of them */
    for (key = 2; key <= 4; key += 2) {
        t0 = ms_now();
        cr_assert_eq(run_step(set, &st, 1, key, key == 2 ? s : other, &kind, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        timed(&worst, t0, "first run of key", key);
        cucap_graph_set_get_stats(set, &stats);
        cr_assert_eq(kind, CUCAP_RUN_INSTANTIATED, "key %llu ran as %d: %s", (unsigned long long)key, (int)kind,
                     stats.last_reason);
    }
    other_done = done_within(other, on_simulator() ? 0 : 2000);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.retirements, 2);
    t0 = ms_now();
    cucap_graph_set_destroy(set);
    timed(&worst, t0, "the set's destroy", 0);
    waits = held_waits(&call);
    held_release(&gate);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(other), CUDA_SUCCESS);
    cr_assert_eq(waits, 0, "%ld calls waited for the held launches, the last %s", waits, call);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the launches in flight: the slowest was the %s, %.1f ms",
                  worst.what, worst.ms);
    cr_assert(other_done, "key 4's run on another stream waited for the retired graphs' launches");
    check_out(outs + 1 * 2 * sizeof(struct values), 200, 1);
    check_out(outs + 2 * 2 * sizeof(struct values), 1, 2);
    check_out(outs + 4 * 2 * sizeof(struct values), 1, 4);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
    D.cuStreamDestroy(other);
}

/* ---------------------------------------------------------------- launches held in flight */

enum held_step { HELD_PLAIN, HELD_FORK, HELD_HOST, HELD_ALLOC, HELD_PARAMS, HELD_COND };

struct held_call {
    enum held_step kind;
    struct held *gate;
    CUdeviceptr out;                 /* 8 bytes for this key */
    unsigned char value;
    int host_calls;                  /* (atomic) HELD_HOST's own host node ran */
};

static void CUDA_CB count_call(void *p)
{
    __atomic_add_fetch((int *)p, 1, __ATOMIC_RELAXED);
}

/* The step of a kind: it writes value to the key's 8 bytes (the block's
 * values for HELD_PARAMS), then reaches the gate. */
static CUresult held_step(cucap_builder *b, void *user_data, cucap_error **err)
{
    struct held_call *c = user_data;
    CUstream s = cucap_builder_stream(b);
    cucap_builder *other = NULL;
    CUgraphConditionalHandle cond;
    CUdeviceptr block, tmp;
    cucap_pool *pool;
    CUresult rc;

    switch (c->kind) {
    case HELD_FORK:
        if ((rc = cucap_builder_split(b, 2, &other, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemsetD8Async(c->out, c->value, 8, cucap_builder_stream(other))) == CUDA_SUCCESS)
            rc = cucap_builder_join_forks(b, err);
        cucap_builder_destroy(other);
        break;
    case HELD_HOST:   /* a host node of its own before the gate */
        if ((rc = D.cuLaunchHostFunc(s, count_call, &c->host_calls)) == CUDA_SUCCESS)
            rc = D.cuMemsetD8Async(c->out, c->value, 8, s);
        break;
    case HELD_ALLOC:
        if ((rc = cucap_device_pool(0, &pool, err)) != CUDA_SUCCESS ||
            (rc = cucap_pool_alloc(pool, 8u << 20, s, &tmp, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemsetD8Async(tmp, c->value, 8, s)) == CUDA_SUCCESS &&
            (rc = D.cuMemcpyDtoDAsync(c->out, tmp, 8, s)) == CUDA_SUCCESS)
            rc = cucap_pool_free(pool, tmp, s, err);
        break;
    case HELD_PARAMS:
        if ((rc = cucap_builder_params(b, 8, &block, err)) == CUDA_SUCCESS)
            rc = D.cuMemcpyDtoDAsync(c->out, block, 8, s);
        break;
    case HELD_COND:
        if ((rc = cucap_builder_create_condition(b, 1, 1, &cond, err)) != CUDA_SUCCESS ||
            (rc = cucap_builder_if(b, cond, &other, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, err)) == CUDA_SUCCESS &&
            (rc = D.cuMemsetD8Async(c->out, c->value, 8, cucap_builder_stream(other))) == CUDA_SUCCESS)
            rc = cucap_builder_end(other, err);
        cucap_builder_destroy(other);
        break;
    default:
        rc = D.cuMemsetD8Async(c->out, c->value, 8, s);
        break;
    }
    if (rc == CUDA_SUCCESS)
        rc = D.cuLaunchHostFunc(s, c->gate->fn, c->gate->data);
    return rc;
}

#define HELD_KEYS 24

/* 24 keys through a set of 4 graphs (2 kept for updates), on 4 streams:
 * round 1 runs keys 0-11 twice each, every launch held at its gate;
 * round 2 runs keys 12-23 on 4 other streams (retirements, trims,
 * updates, instantiations), and the set is destroyed: every call returns
 * while round 1's launches are held.  Then the gate opens and every key's
 * result is checked. */
static void held_rounds(enum held_step kind)
{
    cucap_graph_set *set = new_set((size_t)512 << 20, 4, 2);
    struct held_call calls[HELD_KEYS];
    struct slowest worst = { 0, "" };
    unsigned char host[HELD_KEYS * 8];
    CUstream streams[8];
    cucap_error *err = NULL;
    struct held gate;
    const char *call;
    CUdeviceptr out;
    uint64_t key;
    long waits;
    double t0;
    int i, round;

    held_init(&gate);
    for (i = 0; i < 8; i++)
        streams[i] = new_stream();
    cr_assert_eq(D.cuMemAlloc(&out, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(out, 0, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* the runs' streams do not wait for it */
    for (key = 0; key < HELD_KEYS; key++)
        calls[key] = (struct held_call){ kind, &gate, out + key * 8, (unsigned char)(key + 1), 0 };
    for (round = 0; round < 2; round++)
        for (key = round * 12; key < (uint64_t)round * 12 + 12; key++)
            for (i = 0; i < 2 - round; i++) {
                uint64_t values = 0x0101010101010101ull * (key + 1);
                t0 = ms_now();
                cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, held_step, &calls[key],
                                                 kind == HELD_PARAMS ? &values : NULL, kind == HELD_PARAMS ? 8 : 0,
                                                 streams[round * 4 + key % 4], NULL, &err),
                             CUDA_SUCCESS, "key %llu: %s", (unsigned long long)key, cucap_error_message(err));
                timed(&worst, t0, round ? "round-2 run of key" : "round-1 run of key", key);
            }
    cr_assert_eq(D.cuStreamQuery(streams[0]), CUDA_ERROR_NOT_READY, "round 1's launches are not held");
    t0 = ms_now();
    cucap_graph_set_destroy(set);
    timed(&worst, t0, "the set's destroy", 0);
    t0 = ms_now();
    cucap_release_cached();
    timed(&worst, t0, "cucap_release_cached", 0);
    waits = held_waits(&call);
    held_release(&gate);
    for (i = 0; i < 8; i++) {
        cr_assert_eq(D.cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
        D.cuStreamDestroy(streams[i]);
    }
    cr_assert_eq(waits, 0, "%ld calls waited for the held launches, the last %s", waits, call);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held launches: the slowest was the %s, %.1f ms",
                  worst.what, worst.ms);
    cr_assert(worst.ms < 5000, "the %s took %.1f ms", worst.what, worst.ms);
    cr_assert_eq(D.cuMemcpyDtoH(host, out, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < (int)sizeof host; i++)
        cr_assert_eq(host[i], i / 8 + 1, "key %d's byte %d is %u", i / 8, i % 8, host[i]);
    for (key = 0; kind == HELD_HOST && key < HELD_KEYS; key++)
        cr_assert_eq(calls[key].host_calls, key < 12 ? 2 : 1, "key %llu's host node ran %d times",
                     (unsigned long long)key, calls[key].host_calls);
    D.cuMemFree(out);
}

BACKEND_TEST(graph_set, held_launches_of_plain_steps)
{
    held_rounds(HELD_PLAIN);
}

BACKEND_TEST(graph_set, held_launches_of_steps_that_fork)
{
    held_rounds(HELD_FORK);
}

BACKEND_TEST(graph_set, held_launches_of_steps_with_host_nodes)
{
    held_rounds(HELD_HOST);
}

BACKEND_TEST(graph_set, held_launches_of_steps_that_allocate)
{
    held_rounds(HELD_ALLOC);
}

BACKEND_TEST(graph_set, held_launches_of_steps_that_read_a_block)
{
    held_rounds(HELD_PARAMS);
}

BACKEND_TEST(graph_set, held_launches_of_steps_with_a_conditional_node)
{
    held_rounds(HELD_COND);
}

/* ---------------------------------------------------------------- one key on several streams */

/* One executable graph launched on several streams runs one launch at a
 * time (measured: 8 streams, 8.1 ms a round of 1 ms graphs).  A run that
 * finds every graph of its key in flight on other streams gets a copy,
 * within the budget; a run on a stream a graph of the key was last
 * launched on, or once one is done, takes that one. */
static void one_key_on_streams(enum held_step kind, size_t budget_graphs, size_t expect_copies)
{
    cucap_graph_set *set = new_set((size_t)512 << 20, budget_graphs, 0);
    struct held_call calls[2];
    cucap_graph_set_stats stats;
    cucap_graph_set_key_stats ks;
    cucap_error *err = NULL;
    cucap_run_kind how;
    unsigned char host[16];
    CUstream streams[10];
    struct held gate;
    const char *call;
    CUdeviceptr out;
    uint64_t key = 1, other = 2;
    long waits;
    int i, round;

    held_init(&gate);
    for (i = 0; i < 10; i++)
        streams[i] = new_stream();
    cr_assert_eq(D.cuMemAlloc(&out, 16), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(out, 0, 16), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* the runs' streams do not wait for it */
    calls[0] = (struct held_call){ kind, &gate, out, 0x5a, 0 };
    calls[1] = (struct held_call){ kind, &gate, out + 8, 0x6b, 0 };
    for (i = 0; i < 9; i++) {   /* held: every graph of the key stays in flight */
        uint64_t values = 0x5a5a5a5a5a5a5a5aull;
        cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, held_step, &calls[0], kind == HELD_PARAMS ? &values : NULL,
                                         kind == HELD_PARAMS ? 8 : 0, streams[i], &how, &err),
                     CUDA_SUCCESS, "run %d: %s", i, cucap_error_message(err));
        cucap_graph_set_get_stats(set, &stats);
        cr_assert_leq(stats.copies, expect_copies, "run %d made copy %zu", i, stats.copies);
        cr_assert(!budget_graphs || stats.graphs <= budget_graphs, "%zu graphs against %zu", stats.graphs,
                  budget_graphs);
        cr_assert_eq(how, i == 0 || (size_t)i <= expect_copies ? CUCAP_RUN_INSTANTIATED : CUCAP_RUN_LAUNCHED,
                     "run %d on its own stream ran as %d", i, (int)how);
    }
    cr_assert_eq(stats.copies, expect_copies);
    cr_assert_eq(stats.graphs, expect_copies + 1);
    cr_assert_eq(cucap_graph_set_get_key_stats(set, &key, sizeof key, &ks, NULL), CUDA_SUCCESS);
    cr_assert_eq(ks.copies, expect_copies);
    /* the same streams again: each takes the graph it launched there, no new copy */
    for (round = 0; round < 2; round++)
        for (i = 0; i < 8; i++) {
            uint64_t values = 0x5a5a5a5a5a5a5a5aull;
            cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, held_step, &calls[0],
                                             kind == HELD_PARAMS ? &values : NULL, kind == HELD_PARAMS ? 8 : 0,
                                             streams[i], &how, &err),
                         CUDA_SUCCESS, "%s", cucap_error_message(err));
            cr_assert_eq(how, CUCAP_RUN_LAUNCHED);
        }
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.copies, expect_copies, "runs on streams the key ran on made copies");
    /* another key needs room: the copies count against budget_graphs */
    cr_assert_eq(cucap_graph_set_run(set, &other, sizeof other, held_step, &calls[1], kind == HELD_PARAMS ?
                                     &(uint64_t){ 0x6b6b6b6b6b6b6b6bull } : NULL, kind == HELD_PARAMS ? 8 : 0,
                                     streams[9], &how, &err),
                 CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(how, CUCAP_RUN_INSTANTIATED);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert(!budget_graphs || stats.graphs <= budget_graphs, "%zu graphs against %zu", stats.graphs, budget_graphs);
    waits = held_waits(&call);
    held_release(&gate);
    for (i = 0; i < 10; i++)
        cr_assert_eq(D.cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
    cr_assert_eq(waits, 0, "%ld calls waited for the held launches, the last %s", waits, call);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held launches");
    /* done now: a run on a stream the key never ran on takes a graph that is done */
    if (budget_graphs == 0) {
        cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, held_step, &calls[0], kind == HELD_PARAMS ?
                                         &(uint64_t){ 0x5a5a5a5a5a5a5a5aull } : NULL, kind == HELD_PARAMS ? 8 : 0,
                                         streams[9], &how, &err),
                     CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(how, CUCAP_RUN_LAUNCHED);
        cucap_graph_set_get_stats(set, &stats);
        cr_assert_eq(stats.copies, expect_copies, "a run found a graph done and still made a copy");
        cr_assert_eq(D.cuStreamSynchronize(streams[9]), CUDA_SUCCESS);
    }
    cr_assert_eq(D.cuMemcpyDtoH(host, out, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < 16; i++)
        cr_assert_eq(host[i], i < 8 ? 0x5a : 0x6b, "byte %d is %#x", i, host[i]);
    cucap_graph_set_destroy(set);
    for (i = 0; i < 10; i++)
        D.cuStreamDestroy(streams[i]);
    D.cuMemFree(out);
}

BACKEND_TEST(graph_set, one_key_on_nine_streams_gets_seven_copies_while_it_runs)
{
    one_key_on_streams(HELD_PLAIN, 0, 7);
}

BACKEND_TEST(graph_set, copies_of_a_key_reading_a_block_carry_their_own_values)
{
    one_key_on_streams(HELD_PARAMS, 0, 7);
}

BACKEND_TEST(graph_set, copies_of_a_key_with_a_conditional_node)
{
    one_key_on_streams(HELD_COND, 0, 7);
}

BACKEND_TEST(graph_set, copies_count_against_budget_graphs)
{
    one_key_on_streams(HELD_PLAIN, 3, 2);
}

/* A stream keeps a graph of its own: a run on a stream the key's graphs
 * were not last launched on gets a copy even when they are done, so that
 * two streams never take turns at one graph (each turn would wait for the
 * other's launch); at the budget, it takes one that is done. */
BACKEND_TEST(graph_set, each_stream_keeps_a_graph_of_its_own)
{
    cucap_graph_set *set = new_set((size_t)512 << 20, 2, 0);
    struct held gate;
    struct held_call call;
    cucap_graph_set_stats stats;
    cucap_error *err = NULL;
    cucap_run_kind how;
    CUstream streams[3];
    CUdeviceptr out;
    unsigned char host[8];
    uint64_t key = 7;
    int i, round;

    held_init(&gate);
    held_release(&gate);   /* open: nothing is held */
    for (i = 0; i < 3; i++)
        streams[i] = new_stream();
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    call = (struct held_call){ HELD_PLAIN, &gate, out, 0x3c, 0 };
    for (round = 0; round < 2; round++)
        for (i = 0; i < 3; i++) {
            cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, held_step, &call, NULL, 0, streams[i], &how, &err),
                         CUDA_SUCCESS, "%s", cucap_error_message(err));
            cr_assert_eq(D.cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
            cr_assert_eq(how, round == 0 && i < 2 ? CUCAP_RUN_INSTANTIATED : CUCAP_RUN_LAUNCHED,
                         "round %d, stream %d: %d", round, i, (int)how);
        }
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.copies, 1, "%zu copies", stats.copies);
    cr_assert_eq(stats.graphs, 2);
    cr_assert_eq(D.cuMemcpyDtoH(host, out, 8), CUDA_SUCCESS);
    cr_assert_eq(host[0], 0x3c);
    cucap_graph_set_destroy(set);
    for (i = 0; i < 3; i++)
        D.cuStreamDestroy(streams[i]);
    D.cuMemFree(out);
}

/* ---------------------------------------------------------------- the budget with launches running at once */

/* The budget: three granules of graph memory and 256 KiB of
 * footprint. */
#define CONCURRENT_BUDGET ((size_t)100925440)

struct alloc_call {
    struct held *gate;               /* NULL: no gate */
    CUdeviceptr out;                 /* 8 bytes for this key */
    unsigned char value;             /* 0: the run's 8 bytes of values instead */
};

/* 8 MiB allocated inside the step, value (or the run's values) through
 * it to out.  (A parameter block orders a key's launches on different
 * streams one after another: the held test writes values of its own.) */
static CUresult alloc_step(cucap_builder *b, void *user_data, cucap_error **err)
{
    struct alloc_call *c = user_data;
    CUstream s = cucap_builder_stream(b);
    CUdeviceptr tmp, block;
    cucap_pool *pool;
    CUresult rc;

    if ((!c->value && (rc = cucap_builder_params(b, 8, &block, err)) != CUDA_SUCCESS) ||
        (rc = cucap_device_pool(0, &pool, err)) != CUDA_SUCCESS ||
        (rc = cucap_pool_alloc(pool, 8u << 20, s, &tmp, err)) != CUDA_SUCCESS)
        return rc;
    rc = c->value ? D.cuMemsetD8Async(tmp, c->value, 8, s) : D.cuMemcpyDtoDAsync(tmp, block, 8, s);
    if (rc == CUDA_SUCCESS && (rc = D.cuMemcpyDtoDAsync(c->out, tmp, 8, s)) == CUDA_SUCCESS && c->gate)
        rc = D.cuLaunchHostFunc(s, c->gate->fn, c->gate->data);   /* held with its memory */
    if (rc == CUDA_SUCCESS)
        rc = cucap_pool_free(pool, tmp, s, err);
    return rc;
}

static void check_within_budget(cucap_graph_set *set, const char *what, unsigned long long n)
{
    cucap_graph_set_stats stats;

    cucap_graph_set_get_stats(set, &stats);
    cr_assert_leq(device_taken() + stats.footprint, CONCURRENT_BUDGET,
                  "after %s %llu: %zu reserved + %zu footprint, budget %zu (%zu graphs, %llu launches on the set's "
                  "stream)", what, n, device_taken(), stats.footprint, CONCURRENT_BUDGET, stats.graphs,
                  stats.set_stream_launches);
}

/* Three keys that allocate 8 MiB (a granule each), run in turn on four
 * streams with every launch held in flight, its memory with it: graphs
 * running at once on different streams do not share graph memory, even
 * ordered by events, so the set launches them on its own stream; reserved
 * graph memory plus the footprint never passes the budget. */
BACKEND_TEST(graph_set, allocating_launches_held_on_four_streams_stay_within_the_budget)
{
    cucap_graph_set *set;
    struct alloc_call calls[3];
    unsigned char host[3 * 8];
    cucap_graph_set_stats stats;
    cucap_error *err = NULL;
    CUstream streams[4];
    struct held gate;
    CUdeviceptr out;
    uint64_t run, key;
    int i;

    held_init(&gate);
    cr_assert_eq(D.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    for (i = 0; i < 4; i++)
        streams[i] = new_stream();
    cr_assert_eq(D.cuMemAlloc(&out, sizeof host), CUDA_SUCCESS);
    for (key = 0; key < 3; key++)
        calls[key] = (struct alloc_call){ &gate, out + key * 8, (unsigned char)(key + 1) };
    set = new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    for (run = 0; run < 24; run++) {
        key = run % 3;
        cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, alloc_step, &calls[key], NULL, 0, streams[run % 4],
                                         NULL, &err),
                     CUDA_SUCCESS, "run %llu: %s", (unsigned long long)run, cucap_error_message(err));
        check_within_budget(set, "run", run);
    }
    /* 16 launches held on the set's stream at most: the other runs eager
     * (a launch behind a longer queue waits on the host) */
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.set_stream_launches, 16, "%llu launches on the set's stream", stats.set_stream_launches);
    cr_assert_eq(stats.eager_runs, 8, "%llu eager runs: %s", stats.eager_runs, stats.last_reason);
    cr_assert(strstr(stats.last_reason, "set's stream held 16 launches") != NULL, "%s", stats.last_reason);
    held_release(&gate);
    for (i = 0; i < 4; i++) {
        cr_assert_eq(D.cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
        D.cuStreamDestroy(streams[i]);
    }
    cr_assert_eq(D.cuMemcpyDtoH(host, out, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < (int)sizeof host; i++)
        cr_assert_eq(host[i], i / 8 + 1, "key %d wrote %u", i / 8, host[i]);
    cucap_graph_set_destroy(set);
    D.cuMemFree(out);
}

struct budget_thread {
    pthread_t thread;
    cucap_graph_set *set;
    int index, runs;
    CUdeviceptr out;                 /* 8 bytes a key of this thread's */
    char failure[256];
};

/* A fresh thread on a stream of its own: 40 runs of its three keys (8 MiB
 * each), each run's value checked, the budget read after each. */
static void *budget_runs(void *p)
{
    struct budget_thread *t = p;
    struct alloc_call calls[3];
    cucap_graph_set_stats stats;
    cucap_error *err = NULL;
    unsigned char host[8];
    CUstream s = NULL;
    uint64_t key, values;
    int run;

    D.cuCtxSetCurrent(gpu_context);   /* for the test's own stream and copies */
    if (D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        snprintf(t->failure, sizeof t->failure, "thread %d: no stream", t->index);
        return NULL;
    }
    for (run = 0; run < 40 && !t->failure[0]; run++) {
        key = (uint64_t)t->index * 3 + run % 3;
        calls[run % 3] = (struct alloc_call){ NULL, t->out + (run % 3) * 8, 0 };
        values = (uint64_t)run + 1;
        if (cucap_graph_set_run(t->set, &key, sizeof key, alloc_step, &calls[run % 3], &values, 8, s, NULL, &err) !=
                CUDA_SUCCESS ||
            D.cuStreamSynchronize(s) != CUDA_SUCCESS || D.cuMemcpyDtoH(host, t->out + (run % 3) * 8, 8)) {
            snprintf(t->failure, sizeof t->failure, "thread %d run %d: %s", t->index, run, cucap_error_message(err));
            break;
        }
        cucap_graph_set_get_stats(t->set, &stats);
        if (host[0] != (unsigned char)(run + 1))
            snprintf(t->failure, sizeof t->failure, "thread %d run %d wrote %u", t->index, run, host[0]);
        else if (device_taken() + stats.footprint > CONCURRENT_BUDGET)
            snprintf(t->failure, sizeof t->failure, "thread %d run %d: %zu reserved + %zu footprint, budget %zu",
                     t->index, run, device_taken(), stats.footprint, CONCURRENT_BUDGET);
        t->runs++;
    }
    cucap_error_free(err);
    D.cuStreamDestroy(s);
    return NULL;
}

static void budget_from_threads(int count)
{
    cucap_graph_set *set = new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    struct budget_thread threads[16];
    CUdeviceptr out;
    int i;

    cr_assert_eq(D.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&out, (size_t)count * 3 * 8), CUDA_SUCCESS);
    for (i = 0; i < count; i++) {
        memset(&threads[i], 0, sizeof threads[i]);
        threads[i].set = set;
        threads[i].index = i;
        threads[i].out = out + (size_t)i * 3 * 8;
        cr_assert_eq(pthread_create(&threads[i].thread, NULL, budget_runs, &threads[i]), 0);
    }
    for (i = 0; i < count; i++)
        pthread_join(threads[i].thread, NULL);
    for (i = 0; i < count; i++) {
        cr_assert_not(threads[i].failure[0], "%s", threads[i].failure);
        cr_assert_eq(threads[i].runs, 40);
    }
    cucap_graph_set_destroy(set);
    cr_assert_eq(device_taken(), 0, "the set's graph memory given back");
    D.cuMemFree(out);
}

struct null_stream_run {
    cucap_graph_set *set;
    CUdeviceptr out;
    CUstream s;
    uint64_t key;
    CUresult rc[2];
    char why[256];
};

/* From a fresh thread with no context current: an allocating key run on
 * the NULL stream (the set's context's legacy stream), twice. */
static void *run_on_a_context_stream(void *p)
{
    struct null_stream_run *r = p;
    struct alloc_call call = { NULL, r->out, 0 };
    cucap_error *err = NULL;
    uint64_t values;
    int i;

    for (i = 0; i < 2; i++) {
        values = 40 + (uint64_t)i;
        if ((r->rc[i] = cucap_graph_set_run(r->set, &r->key, sizeof r->key, alloc_step, &call, &values, 8, r->s, NULL,
                                            &err)) != CUDA_SUCCESS)
            snprintf(r->why, sizeof r->why, "%s", cucap_error_message(err));
        cucap_error_free(err);
        err = NULL;
    }
    return NULL;
}

/* A graph that allocates goes through the set's stream and back, also
 * when the run's stream is the NULL or the per-thread stream of a thread
 * with no context current. */
BACKEND_TEST(graph_set, allocating_keys_on_the_null_and_per_thread_streams_from_a_fresh_thread)
{
    static const CUstream streams[2] = { NULL, CU_STREAM_PER_THREAD };
    cucap_graph_set *set = new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    struct null_stream_run r;
    pthread_t t;
    uint64_t got;
    int i;

    for (i = 0; i < 2; i++) {
        memset(&r, 0, sizeof r);
        r.set = set;
        r.s = streams[i];
        r.key = 7 + (uint64_t)i;   /* its graph writes to this round's memory */
        cr_assert_eq(D.cuMemAlloc(&r.out, 8), CUDA_SUCCESS);
        cr_assert_eq(pthread_create(&t, NULL, run_on_a_context_stream, &r), 0);
        pthread_join(t, NULL);
        cr_assert(r.rc[0] == CUDA_SUCCESS && r.rc[1] == CUDA_SUCCESS, "stream %d: %s", i, r.why);
        cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemcpyDtoH(&got, r.out, 8), CUDA_SUCCESS);
        cr_assert_eq(got, 41, "stream %d: the second run wrote %llu", i, (unsigned long long)got);
        D.cuMemFree(r.out);
    }
    cucap_graph_set_destroy(set);
}

struct exiting_thread {
    cucap_graph_set *graphs, *eager;
    struct alloc_call call;
    cucap_run_kind kinds[3];
    char why[256];
};

/* On its per-thread stream, from a fresh thread: an allocating key run
 * twice through the set's stream, and once eagerly (its allocations pass
 * the other set's budget), every run held in flight; then the thread
 * returns at once. */
static void *run_and_exit(void *p)
{
    struct exiting_thread *t = p;
    cucap_error *err = NULL;
    uint64_t key = 1, values;
    int i;

    for (i = 0; i < 3 && !t->why[0]; i++) {
        values = 50 + (uint64_t)i;
        if (cucap_graph_set_run(i < 2 ? t->graphs : t->eager, &key, sizeof key, alloc_step, &t->call, &values, 8,
                                CU_STREAM_PER_THREAD, &t->kinds[i], &err) != CUDA_SUCCESS)
            snprintf(t->why, sizeof t->why, "run %d: %s", i, cucap_error_message(err));
    }
    cucap_error_free(err);
    return NULL;
}

/* A thread whose per-thread stream waits, by an event, for stream-ordered
 * allocations still in flight hangs in the driver when it exits (measured
 * on the H100: doc/driver-facts.md).  The set hands a run's work back to
 * the per-thread stream without such a wait: the thread's exit returns
 * while its runs are held (the simulator counts an exit that would hang). */
BACKEND_TEST(graph_set, a_thread_exits_while_its_per_thread_stream_waits_for_held_allocating_runs)
{
    struct exiting_thread t;
    struct timespec until;
    struct held gate;
    pthread_t thread;
    const char *call;
    uint64_t got[2];
    CUdeviceptr out;
    long waits;
    int joined;

    held_init(&gate);
    cr_assert_eq(D.cuMemAlloc(&out, sizeof got), CUDA_SUCCESS);
    memset(&t, 0, sizeof t);
    t.graphs = new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    t.eager = new_set_in_mode(1u << 20, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    t.call = (struct alloc_call){ &gate, out, 0 };
    cr_assert_eq(pthread_create(&thread, NULL, run_and_exit, &t), 0);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    joined = pthread_timedjoin_np(thread, NULL, &until) == 0;
    waits = held_waits(&call);
    held_release(&gate);
    if (!joined) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        if (pthread_timedjoin_np(thread, NULL, &until) != 0)
            pthread_detach(thread);
    }
    cr_assert(joined, "the thread's exit hung while its runs were held");
    cr_assert_eq(waits, 0, "%ld calls waited for the held runs, the last %s", waits, call);
    cr_assert_not(t.why[0], "%s", t.why);
    cr_assert(t.kinds[0] == CUCAP_RUN_INSTANTIATED && t.kinds[1] == CUCAP_RUN_LAUNCHED && t.kinds[2] == CUCAP_RUN_EAGER,
              "the runs went %d, %d, %d", (int)t.kinds[0], (int)t.kinds[1], (int)t.kinds[2]);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(got, out, 8), CUDA_SUCCESS);
    cr_assert_eq(got[0], 52, "the last run wrote %llu", (unsigned long long)got[0]);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held runs");
    cucap_graph_set_destroy(t.graphs);
    cucap_graph_set_destroy(t.eager);
    D.cuMemFree(out);
}

struct legacy_then_per_thread {
    cucap_graph_set *set;
    struct alloc_call call;
    CUstream s;
    uint64_t key;
    char why[256];
};

static void *run_twice_and_exit(void *p)
{
    struct legacy_then_per_thread *r = p;
    cucap_error *err = NULL;
    uint64_t values;
    int i;

    for (i = 0; i < 2 && !r->why[0]; i++) {
        values = 40 + (uint64_t)i;
        if (cucap_graph_set_run(r->set, &r->key, sizeof r->key, alloc_step, &r->call, &values, 8, r->s, NULL, &err) !=
            CUDA_SUCCESS)
            snprintf(r->why, sizeof r->why, "run %d: %s", i, cucap_error_message(err));
    }
    cucap_error_free(err);
    return NULL;
}

/* The per-thread stream waits for the legacy stream's work without being
 * asked to, and a thread whose per-thread stream is thus behind an event
 * wait for allocations in flight hangs in the driver when it exits
 * (doc/driver-facts.md).  Allocating runs on the NULL stream, held in
 * flight; then a fresh thread's runs on its per-thread stream, and that
 * thread returns at once. */
BACKEND_TEST(graph_set, a_thread_exits_while_the_legacy_stream_waits_for_held_allocating_runs)
{
    static const CUstream streams[2] = { NULL, CU_STREAM_PER_THREAD };
    struct legacy_then_per_thread r[2];
    struct timespec until;
    struct held gate;
    pthread_t thread[2];
    const char *call;
    uint64_t got[2];
    CUdeviceptr out;
    int joined[2], i;
    long waits;

    held_init(&gate);
    cr_assert_eq(D.cuMemAlloc(&out, sizeof got), CUDA_SUCCESS);
    for (i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].set = i ? r[0].set : new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        r[i].call = (struct alloc_call){ &gate, out + (CUdeviceptr)i * 8, 0 };
        r[i].s = streams[i];
        r[i].key = 7 + (uint64_t)i;
        cr_assert_eq(pthread_create(&thread[i], NULL, run_twice_and_exit, &r[i]), 0);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        joined[i] = pthread_timedjoin_np(thread[i], NULL, &until) == 0;
    }
    waits = held_waits(&call);
    held_release(&gate);
    for (i = 0; i < 2; i++)
        if (!joined[i]) {
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 10;
            if (pthread_timedjoin_np(thread[i], NULL, &until) != 0)
                pthread_detach(thread[i]);
        }
    cr_assert(joined[0] && joined[1], "a thread's exit hung while the runs were held (NULL stream %d, per-thread %d)",
              joined[0], joined[1]);
    cr_assert_eq(waits, 0, "%ld calls waited for the held runs, the last %s", waits, call);
    cr_assert_not(r[0].why[0], "NULL stream: %s", r[0].why);
    cr_assert_not(r[1].why[0], "per-thread stream: %s", r[1].why);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(got, out, sizeof got), CUDA_SUCCESS);
    cr_assert(got[0] == 41 && got[1] == 41, "the last runs wrote %llu and %llu", (unsigned long long)got[0],
              (unsigned long long)got[1]);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held runs");
    cucap_graph_set_destroy(r[0].set);
    D.cuMemFree(out);
}

BACKEND_TEST(graph_set, allocating_keys_from_one_thread_stay_within_the_budget)
{
    budget_from_threads(1);
}

BACKEND_TEST(graph_set, allocating_keys_from_four_threads_stay_within_the_budget)
{
    budget_from_threads(4);
}

BACKEND_TEST(graph_set, allocating_keys_from_sixteen_threads_stay_within_the_budget)
{
    budget_from_threads(16);
}

/* What the process holds of device 0's memory beside its own
 * allocations: graph memory and what the default pool keeps. */
static size_t memory_held(void)
{
    CUmemoryPool pool;
    cuuint64_t kept = 0;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

    cr_assert_eq(D.cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    cr_assert_eq(D.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &kept), CUDA_SUCCESS);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    return device_taken() + (size_t)kept;
}

/* Eager runs take their memory from the device's pool, outside the
 * budget: after the set's destroy and cucap_release_cached, the graph
 * memory and what the pool keeps are back where they were before the
 * set (the pool's own figure: other test programs share the device's
 * free memory). */
BACKEND_TEST(graph_set, memory_comes_back_after_destroy_and_release_cached_eager_runs_included)
{
    cucap_graph_set *set;
    struct alloc_call call;
    cucap_graph_set_stats stats;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    CUdeviceptr out;
    size_t before;
    uint64_t key, values;
    int run;

    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    call = (struct alloc_call){ NULL, out, 0 };
    cucap_release_cached();
    cr_assert_eq(D.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    before = memory_held();
    /* a budget below one granule: every step runs eagerly, 8 MiB from the device's pool each */
    set = new_set_in_mode((size_t)16 << 20, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    for (run = 0; run < 6; run++) {
        key = (uint64_t)run % 2;
        values = (uint64_t)run + 1;
        cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, alloc_step, &call, &values, 8, s, NULL, &err),
                     CUDA_SUCCESS, "%s", cucap_error_message(err));
    }
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.eager_runs, 6, "%llu eager runs", stats.eager_runs);
    cr_assert_gt(memory_held(), before, "the eager runs' memory is kept by the pool until given back");
    cucap_graph_set_destroy(set);
    cucap_release_cached();
    cr_assert_leq(memory_held(), before + ((size_t)1 << 20), "%zu bytes held after, %zu before", memory_held(),
                  before);
    D.cuMemFree(out);
    D.cuStreamDestroy(s);
}

/* ---------------------------------------------------------------- eager runs */

struct intruder {
    pthread_t thread;
    int done;
    CUresult rc;
};

static void *global_mode_call(void *p)
{
    struct intruder *in = p;
    CUdeviceptr d = 0;

    D.cuCtxSetCurrent(gpu_context);
    in->rc = D.cuMemAlloc(&d, 4096);   /* in global mode: invalidates every global capture */
    if (in->rc == CUDA_SUCCESS)
        D.cuMemFree(d);
    return NULL;
}

static void invalidate_from_another_thread(void *p)
{
    struct intruder *in = p;

    cr_assert_eq(pthread_create(&in->thread, NULL, global_mode_call, in), 0);
    pthread_join(in->thread, NULL);
    in->done = 1;
}

struct fresh_run {
    cucap_graph_set *set;
    struct step *st;
    CUstream s;
    cucap_run_kind kinds[3];
    CUresult rc[3];
    char reason[256];
};

static void *three_runs(void *p)
{
    struct fresh_run *r = p;
    cucap_graph_set_key_stats ks;
    uint64_t key = 7;
    int i;

    for (i = 0; i < 3; i++) {
        r->rc[i] = run_step(r->set, r->st, 100 + (uint64_t)i, key, r->s, &r->kinds[i], NULL);
        if (i == 0 && cucap_graph_set_get_key_stats(r->set, &key, sizeof key, &ks, NULL) == CUDA_SUCCESS)
            snprintf(r->reason, sizeof r->reason, "%s", ks.reason);
        D.cuStreamSynchronize(r->s);
    }
    return NULL;
}

/* From a fresh thread: another thread's global-mode call invalidates the
 * capture; the step runs eagerly with the right result, the key says
 * why, and the next run captures. */
BACKEND_TEST(graph_set, an_invalidated_capture_runs_eagerly_and_is_captured_later)
{
    cucap_graph_set *set = new_set((size_t)64 << 20, 0, 0);
    struct intruder in;
    struct step st;
    struct fresh_run r;
    pthread_t t;
    cucap_graph_set_stats stats;

    memset(&in, 0, sizeof in);
    memset(&st, 0, sizeof st);
    memset(&r, 0, sizeof r);
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    st.during = invalidate_from_another_thread;
    st.during_arg = &in;
    r.set = set;
    r.st = &st;
    r.s = new_stream();
    cr_assert_eq(pthread_create(&t, NULL, three_runs, &r), 0);
    pthread_join(t, NULL);
    cr_assert(in.done);
    cr_assert_eq(r.rc[0], CUDA_SUCCESS);
    cr_assert_eq(r.kinds[0], CUCAP_RUN_EAGER);
    cr_assert(strstr(r.reason, "INVALIDATED") || strstr(r.reason, "invalidated"), "%s", r.reason);
    cr_assert_eq(r.rc[1], CUDA_SUCCESS);
    cr_assert_eq(r.kinds[1], CUCAP_RUN_INSTANTIATED, "the next run captures: %d", (int)r.kinds[1]);
    cr_assert_eq(r.kinds[2], CUCAP_RUN_LAUNCHED);
    check_out(st.out, 102, 7);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.eager_runs, 1);
    cr_assert_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_NONE);
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(r.s);
}

/* A step that leaves a fork unjoined cannot be captured (UNJOINED): it
 * runs eagerly, its fork's work joined, and the reason says so. */
BACKEND_TEST(graph_set, a_step_that_leaves_a_fork_open_runs_eagerly)
{
    cucap_graph_set *set = new_set((size_t)64 << 20, 0, 0);
    struct step st;
    cucap_run_kind kind;
    cucap_graph_set_key_stats ks;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t key = 2;

    memset(&st, 0, sizeof st);
    st.leave_fork_open = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(run_step(set, &st, 1, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(kind, CUCAP_RUN_EAGER);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_out(st.out, 1, key);
    cr_assert_eq(cucap_graph_set_get_key_stats(set, &key, sizeof key, &ks, NULL), CUDA_SUCCESS);
    cr_assert(strstr(ks.reason, "UNJOINED") || strstr(ks.reason, "unjoined"), "%s", ks.reason);
    cr_assert(!ks.has_graph && ks.failures == 1);
    cucap_graph_set_destroy(set);
    destroy_open_forks(&st);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

/* A key whose allocations alone pass the budget runs eagerly on any
 * stream: one a builder can borrow, the legacy stream and the per-thread
 * stream, its work after what the stream had queued. */
BACKEND_TEST(graph_set, eager_runs_on_every_kind_of_stream)
{
    cucap_graph_set *set = new_set((size_t)8 << 20, 0, 0);
    CUstream streams[3] = { new_stream(), NULL, CU_STREAM_PER_THREAD };
    struct step st;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    uint64_t key = 3;   /* 12 MiB of allocations */
    int i;

    memset(&st, 0, sizeof st);
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    for (i = 0; i < 3; i++) {
        cr_assert_eq(D.cuMemsetD8Async(st.out, 0xff, 2 * sizeof(struct values), streams[i]), CUDA_SUCCESS);
        cr_assert_eq(run_step(set, &st, (uint64_t)i + 1, key, streams[i], &kind, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(kind, CUCAP_RUN_EAGER, "stream %d", i);
        cr_assert_eq(D.cuStreamSynchronize(streams[i]), CUDA_SUCCESS);
        check_out(st.out, (uint64_t)i + 1, key);
    }
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(streams[0]);
}

/* An instantiation that runs out of memory: eager, nothing leaked. */
FAULT_BACKEND_TEST(graph_set, an_instantiation_out_of_memory_runs_eagerly)
{
    cucap_graph_set *set = new_set((size_t)64 << 20, 0, 0);
    struct step st;
    cucap_run_kind kind;
    cucap_graph_set_key_stats ks;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t key = 4;
    long graphs = on_simulator() ? sim_live_settled("graph") : 0, execs = on_simulator() ? sim_live("exec") : 0;

    memset(&st, 0, sizeof st);
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuGraphInstantiateWithParams:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(run_step(set, &st, 1, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(kind, CUCAP_RUN_EAGER);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_out(st.out, 1, key);
    cr_assert_eq(cucap_graph_set_get_key_stats(set, &key, sizeof key, &ks, NULL), CUDA_SUCCESS);
    cr_assert(strstr(ks.reason, "OUT_OF_MEMORY"), "%s", ks.reason);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), graphs, "nothing leaked");
        cr_assert_eq(sim_live("exec"), execs);
    }
    cr_assert_eq(run_step(set, &st, 2, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(kind, CUCAP_RUN_INSTANTIATED);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_out(st.out, 2, key);
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

/* Every run a miss served by an update (one graph, one kept): the
 * capture takes the block the updated executable graph reads, so no miss
 * allocates a parameter block, and the builder the set keeps, so no miss
 * makes or destroys one; each run still reads its own values. */
FAULT_BACKEND_TEST(graph_set, a_miss_served_by_an_update_makes_no_new_block)
{
    cucap_graph_set *set = new_set((size_t)64 << 20, 1, 1);
    cucap_graph_set_stats stats;
    struct step st;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t step, key;
    long allocations = -1, infos = -1;

    memset(&st, 0, sizeof st);
    st.per_key = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, 9 * 2 * sizeof(struct values)), CUDA_SUCCESS);
    for (step = 1; step <= 24; step++) {
        key = 2 * (step % 4 + 1);   /* keys without allocations: one topology */
        if (step == 5) {
            allocations = calls("cuMemAllocFromPoolAsync");
            infos = calls("cuStreamGetCaptureInfo");
        }
        cr_assert_eq(run_step(set, &st, step, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);   /* the block idle at the next miss */
        check_out(st.out + key * 2 * sizeof(struct values), step, key);
        if (step > 2)
            cr_assert_eq(kind, CUCAP_RUN_UPDATED, "step %llu ran as %d", (unsigned long long)step, (int)kind);
    }
    cr_assert_eq(calls("cuMemAllocFromPoolAsync") - allocations, 0, "20 misses allocated %ld blocks",
                 calls("cuMemAllocFromPoolAsync") - allocations);
    /* the capture's own question, once a miss; a builder made and destroyed per capture asked again */
    cr_assert_leq(calls("cuStreamGetCaptureInfo") - infos, 20, "20 misses asked %ld times whether a stream was "
                  "capturing", calls("cuStreamGetCaptureInfo") - infos);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_geq(stats.updates, 22);
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

/* The same with every launch held in flight on the one stream the runs
 * use: a run on the stream of the block's last launch follows it, so the
 * capture takes the block all the same, and nothing waits on the host. */
FAULT_BACKEND_TEST(graph_set, a_miss_served_by_an_update_behind_held_launches_makes_no_new_block)
{
    cucap_graph_set *set = new_set((size_t)64 << 20, 1, 1);
    struct step st;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    struct held gate;
    const char *call;
    uint64_t step, key;
    long allocations = -1, waits;

    held_init(&gate);
    memset(&st, 0, sizeof st);
    st.per_key = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, 9 * 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(D.cuLaunchHostFunc(s, gate.fn, gate.data), CUDA_SUCCESS);
    for (step = 1; step <= 24; step++) {
        key = 2 * (step % 4 + 1);
        if (step == 5)
            allocations = calls("cuMemAllocFromPoolAsync");
        cr_assert_eq(run_step(set, &st, step, key, s, &kind, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        if (step > 2)
            cr_assert_eq(kind, CUCAP_RUN_UPDATED, "step %llu ran as %d", (unsigned long long)step, (int)kind);
    }
    waits = held_waits(&call);
    held_release(&gate);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(waits, 0, "%ld calls waited for the held launches, the last %s", waits, call);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the launches in flight");
    cr_assert_eq(calls("cuMemAllocFromPoolAsync") - allocations, 0, "20 misses allocated %ld blocks",
                 calls("cuMemAllocFromPoolAsync") - allocations);
    for (step = 21; step <= 24; step++)
        check_out(st.out + 2 * (step % 4 + 1) * 2 * sizeof(struct values), step, 2 * (step % 4 + 1));
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

/* ---------------------------------------------------------------- threads */

struct worker {
    cucap_graph_set *set;
    struct step *st;                 /* shared: a slot per key */
    int index;
    int bad;
    char failure[256];
};

static void *work_shared_keys(void *p)
{
    struct worker *w = p;
    CUstream s = NULL;
    cucap_error *err = NULL;
    uint64_t step, key;
    int i;

    if (D.cuCtxSetCurrent(gpu_context) != CUDA_SUCCESS || D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        snprintf(w->failure, sizeof w->failure, "no stream");
        w->bad = 1;
        return NULL;
    }
    for (i = 0; i < 200 && !w->bad; i++) {
        step = (uint64_t)w->index * 1000 + (uint64_t)i;
        key = 1 + (uint64_t)(i % 3);   /* shared by every thread */
        CUresult rc = run_step(w->set, w->st, step, key, s, NULL, &err), synced = D.cuStreamSynchronize(s);
        cucap_graph_set_stats stats;
        if (rc != CUDA_SUCCESS || synced != CUDA_SUCCESS) {
            snprintf(w->failure, sizeof w->failure, "step %llu: %s, %s: %s", (unsigned long long)step,
                     cucap_result_name(rc), cucap_result_name(synced), cucap_error_message(err));
            w->bad = 1;
        }
        cucap_graph_set_get_stats(w->set, &stats);
        if (stats.graphs > stats.budget_graphs) {
            snprintf(w->failure, sizeof w->failure, "step %llu: %zu graphs, over the budget of %zu",
                     (unsigned long long)step, stats.graphs, stats.budget_graphs);
            w->bad = 1;
        }
    }
    cucap_error_free(err);
    D.cuStreamDestroy(s);
    return NULL;
}

/* What a thread under the eager-fallback test saw: a step's slot read
 * in relaxed mode (a global capture elsewhere refuses a synchronous copy
 * made in global mode, and such a call would invalidate it). */
static int slot_holds(CUstream s, CUdeviceptr out, uint64_t step, uint64_t key)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    struct values host[2];
    int ok;

    memset(host, 0, sizeof host);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    ok = D.cuStreamSynchronize(s) == CUDA_SUCCESS &&
         D.cuMemcpyDtoH(host, out + key * 2 * sizeof(struct values), sizeof host) == CUDA_SUCCESS &&
         host[0].step == step && host[0].key == key && host[1].step == step && host[1].key == key;
    D.cuThreadExchangeStreamCaptureMode(&mode);
    return ok;
}

/* The step's own call that its capture forbids, made in thread-local
 * mode: it invalidates the step's capture and no other thread's.  A call
 * in global mode from another thread, as in the test above, would
 * invalidate the 8 global captures too, and such calls under that load
 * crash the driver (doc/driver-facts.md, "A defect of the driver"). */
static void a_forbidden_call_of_its_own(void *p)
{
    struct intruder *in = p;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CUcontext was = NULL;
    CUdeviceptr d = 0;

    D.cuCtxGetCurrent(&was);   /* none: the thread is fresh */
    D.cuCtxSetCurrent(gpu_context);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    if ((in->rc = D.cuMemAlloc(&d, 4096)) == CUDA_SUCCESS)
        D.cuMemFree(d);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    D.cuCtxSetCurrent(was);
    in->done = 1;
}

struct background_capture {
    pthread_t thread;
    CUdeviceptr scratch;
    int stop;                        /* (atomic) */
    unsigned long ended, invalidated, failed;
};

static void *capture_until_stopped(void *p)
{
    struct background_capture *bg = p;
    cucap_builder *b;
    CUresult rc;

    D.cuCtxSetCurrent(gpu_context);
    while (!__atomic_load_n(&bg->stop, __ATOMIC_ACQUIRE)) {
        b = NULL;
        if (cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS ||
            cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) != CUDA_SUCCESS) {
            bg->failed++;
        } else {
            (void)D.cuMemsetD8Async(bg->scratch, 1, 256, cucap_builder_stream(b));
            rc = cucap_builder_end(b, NULL);
            if (rc == CUDA_SUCCESS)
                bg->ended++;
            else if (rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
                bg->invalidated++;
            else
                bg->failed++;
        }
        cucap_builder_destroy(b);
    }
    return NULL;
}

struct fallback_run {
    cucap_graph_set *set;
    struct step st;                  /* its own: its first capture is invalidated */
    struct intruder in;
    uint64_t key;
    CUstream s;
    cucap_run_kind first;
    int made_at, bad;
    char reason[256], failure[256];
};

static void *runs_from_a_fresh_thread(void *p)
{
    struct fallback_run *r = p;
    cucap_graph_set_key_stats ks;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    CUstreamCaptureStatus status;
    int i;

    for (i = 0; i < 12 && !r->bad; i++) {
        if (run_step(r->set, &r->st, 100 + (uint64_t)i, r->key, r->s, &kind, &err) != CUDA_SUCCESS) {
            snprintf(r->failure, sizeof r->failure, "run %d: %s", i, cucap_error_message(err));
            r->bad = 1;
        }
        if (i == 0) {
            r->first = kind;
            if (cucap_graph_set_get_key_stats(r->set, &r->key, sizeof r->key, &ks, NULL) == CUDA_SUCCESS)
                snprintf(r->reason, sizeof r->reason, "%s", ks.reason);
            D.cuCtxSetCurrent(gpu_context);   /* for the checks */
        }
        if (kind == CUCAP_RUN_INSTANTIATED && !r->made_at)
            r->made_at = i;
        if (!r->bad && (!slot_holds(r->s, r->st.out, 100 + (uint64_t)i, r->key) ||
                        D.cuStreamGetCaptureInfo(r->s, &status, NULL, NULL, NULL, NULL, NULL) != CUDA_SUCCESS ||
                        status != CU_STREAM_CAPTURE_STATUS_NONE)) {
            snprintf(r->failure, sizeof r->failure, "run %d (%d): a wrong result, or the stream left capturing", i,
                     (int)kind);
            r->bad = 1;
        }
    }
    cucap_error_free(err);
    return NULL;
}

/* The eager fallback from 4 fresh threads while 8 other threads capture
 * in global mode: each fresh thread's first capture is invalidated by its
 * step's own forbidden call (refused, as the driver refuses it); its step
 * runs eagerly with the right result, the key names the invalidation, a
 * later run captures, no stream is left capturing, and no background
 * capture was invalidated (the library's own calls run in relaxed mode). */
BACKEND_TEST(graph_set, eager_fallback_from_fresh_threads_beside_eight_global_captures)
{
    cucap_graph_set *set = new_set((size_t)256 << 20, 0, 0);
    struct background_capture bg[8];
    struct fallback_run r[4];
    pthread_t t[4];
    CUdeviceptr out, scratch;
    unsigned long ended = 0;
    unsigned long invalidated = 0;
    int i;

    cr_assert_eq(D.cuMemAlloc(&out, 16 * 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&scratch, 8 * 256), CUDA_SUCCESS);
    for (i = 0; i < 8; i++) {
        memset(&bg[i], 0, sizeof bg[i]);
        bg[i].scratch = scratch + (CUdeviceptr)i * 256;
        cr_assert_eq(pthread_create(&bg[i].thread, NULL, capture_until_stopped, &bg[i]), 0);
    }
    for (i = 0; i < 4; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].set = set;
        r[i].st.out = out;
        r[i].st.per_key = 1;
        r[i].st.during = a_forbidden_call_of_its_own;
        r[i].st.during_arg = &r[i].in;
        r[i].key = 11 + (uint64_t)i;
        r[i].s = new_stream();
    }
    for (i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, runs_from_a_fresh_thread, &r[i]), 0);
    for (i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (i = 0; i < 8; i++) {
        __atomic_store_n(&bg[i].stop, 1, __ATOMIC_RELEASE);
        pthread_join(bg[i].thread, NULL);
        ended += bg[i].ended;
        invalidated += bg[i].invalidated;
        cr_assert_eq(bg[i].failed, 0, "background thread %d: %lu captures failed otherwise", i, bg[i].failed);
    }
    cr_assert_gt(ended, 0, "the background threads captured");
    cr_assert_eq(invalidated, 0, "%lu background captures were invalidated", invalidated);
    for (i = 0; i < 4; i++) {
        cr_assert(!r[i].bad, "fresh thread %d: %s", i, r[i].failure);
        cr_assert(r[i].in.done, "fresh thread %d: its step's first capture made no forbidden call", i);
        cr_assert_eq(r[i].in.rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "fresh thread %d: the forbidden call "
                     "returned %d", i, (int)r[i].in.rc);
        cr_assert_eq(r[i].first, CUCAP_RUN_EAGER, "fresh thread %d: %d", i, (int)r[i].first);
        cr_assert(strstr(r[i].reason, "INVALIDATED") || strstr(r[i].reason, "invalidated"), "%s", r[i].reason);
        cr_assert_gt(r[i].made_at, 0, "fresh thread %d: a later run captured", i);
        D.cuStreamDestroy(r[i].s);
    }
    cucap_graph_set_destroy(set);
    D.cuMemFree(out);
    D.cuMemFree(scratch);
}

/* 8 fresh threads on shared keys, each on its own stream, under a budget
 * of 2 graphs for 3 keys: every run succeeds, the set never holds more
 * than 2 graphs, each key's graph is made once at a time, and what the keys'
 * slots hold at the end is a whole value of one of the threads' runs of
 * that key.  Thread-local captures: in global mode a capture makes every
 * other thread's stream synchronization fail (the driver's rule). */
BACKEND_TEST(graph_set, eight_fresh_threads_share_keys)
{
    cucap_graph_set *set = new_set_in_mode((size_t)64 << 20, 2, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    struct worker w[8];
    pthread_t t[8];
    cucap_graph_set_stats stats;
    struct step st;
    struct values host[8];
    uint64_t k;
    int i;

    memset(&st, 0, sizeof st);
    st.per_key = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(st.out, 0, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    for (i = 0; i < 8; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].set = set;
        w[i].st = &st;
        w[i].index = i;
        cr_assert_eq(pthread_create(&t[i], NULL, work_shared_keys, &w[i]), 0);
    }
    for (i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    for (i = 0; i < 8; i++)
        cr_assert(!w[i].bad, "thread %d: %s", i, w[i].failure);
    cr_assert_eq(D.cuMemcpyDtoH(host, st.out, sizeof host), CUDA_SUCCESS);
    for (k = 1; k <= 3; k++)
        for (i = 0; i < 2; i++) {
            const struct values *v = &host[k * 2 + (uint64_t)i];
            cr_assert(v->key == k && v->step % 1000 < 200 && v->step / 1000 < 8 && (v->step % 1000) % 3 == k - 1,
                      "key %llu slot %d: %llu/%llu", (unsigned long long)k, i, (unsigned long long)v->step,
                      (unsigned long long)v->key);
        }
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.runs, 1600);
    cr_assert_leq(stats.graphs, 2);
    cucap_graph_set_destroy(set);
    D.cuMemFree(st.out);
}

/* ---------------------------------------------------------------- bad input */

BACKEND_TEST(graph_set, bad_input_is_refused_and_changes_nothing)
{
    cucap_graph_set_options opts;
    cucap_graph_set *set = NULL;
    cucap_graph_set_stats stats;
    struct step st;
    struct step_call call;
    struct values v = { 1, 1 };
    unsigned char long_key[CUCAP_GRAPH_SET_KEY_MAX + 1];
    cucap_error *err = NULL;
    CUstream s = new_stream();
    uint64_t key = 1;
    CUresult rc;

    memset(&opts, 0, sizeof opts);
    cr_assert_eq(cucap_graph_set_create(0, &opts, &set, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(cucap_error_message(err), "budget of 0 bytes"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_null(set);
    opts.budget_bytes = 1 << 20;
    opts.reserved_int[1] = 1;
    cr_assert_eq(cucap_graph_set_create(0, &opts, &set, NULL), CUDA_ERROR_INVALID_VALUE);
    opts.reserved_int[1] = 0;
    opts.capture_mode = (CUstreamCaptureMode)9;
    cr_assert_eq(cucap_graph_set_create(0, &opts, &set, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_graph_set_create(0, NULL, &set, NULL), CUDA_ERROR_INVALID_VALUE);
    set = new_set((size_t)64 << 20, 0, 0);
    memset(&st, 0, sizeof st);
    memset(long_key, 1, sizeof long_key);
    call.step = &st;
    call.key = 1;
    cr_assert_eq(D.cuMemAlloc(&st.out, 2 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(cucap_graph_set_run(NULL, &key, sizeof key, record_step, &call, &v, sizeof v, s, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_graph_set_run(set, NULL, sizeof key, record_step, &call, &v, sizeof v, s, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_graph_set_run(set, &key, 0, record_step, &call, &v, sizeof v, s, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    rc = cucap_graph_set_run(set, long_key, sizeof long_key, record_step, &call, &v, sizeof v, s, NULL, &err);
    cr_assert_eq(rc, CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(cucap_error_message(err), "1 to 256 bytes"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, NULL, &call, &v, sizeof v, s, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, record_step, &call, &v, 0, s, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.runs, 0, "nothing ran");
    /* the function's own failure: its error, with its note; the set holds no graph for it */
    st.fail = 1;
    rc = cucap_graph_set_run(set, &key, sizeof key, record_step, &call, &v, sizeof v, s, NULL, &err);
    cr_assert_eq(rc, CUDA_ERROR_LAUNCH_FAILED);
    cr_assert(strstr(cucap_error_message(err), "the step's own failure"), "%s", cucap_error_message(err));
    cr_assert_eq(cucap_error_note_count(err), 1);
    cucap_error_free(err);
    err = NULL;
    cucap_graph_set_get_stats(set, &stats);
    cr_assert_eq(stats.graphs, 0);
    st.fail = 0;
    cr_assert_eq(run_step(set, &st, 5, 1, s, NULL, NULL), CUDA_SUCCESS, "the key runs once the function works");
    /* values of another size than the key's block */
    rc = cucap_graph_set_run(set, &key, sizeof key, record_step, &call, &v, sizeof v - 1, s, NULL, &err);
    cr_assert_eq(rc, CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(cucap_error_message(err), "holds 16 bytes, not 15"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cucap_graph_set_destroy(set);
    cucap_graph_set_destroy(NULL);
    D.cuMemFree(st.out);
    D.cuStreamDestroy(s);
}

struct warnings {
    int count;
    char last[512];
};

static void count_warning(const cucap_error *w, void *user_data)
{
    struct warnings *ws = user_data;

    ws->count++;
    snprintf(ws->last, sizeof ws->last, "%s", cucap_error_message(w));
}

/* A value hand-back the driver refuses (as it refuses one in a stream-
 * ordered pool's memory): the run's stream waits by an event instead, and
 * the library says so once, not at every run. */
FAULT_BACKEND_TEST(graph_set, a_refused_value_hand_back_is_said_once_and_still_orders_the_run)
{
    cucap_graph_set *set = new_set_in_mode(CONCURRENT_BUDGET, 0, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    struct alloc_call call = { NULL, 0, 0 };
    struct warnings ws = { 0, "" };
    cucap_error *err = NULL;
    uint64_t key = 3, values, got;
    int i;

    cr_assert_eq(D.cuMemAlloc(&call.out, 8), CUDA_SUCCESS);
    cucap_set_warning_handler(count_warning, &ws);
    cr_assert_eq(set_rules("cuStreamWriteValue64:1:CUDA_ERROR_NOT_SUPPORTED,cuStreamWriteValue64:2:"
                           "CUDA_ERROR_NOT_SUPPORTED"), 0);
    for (i = 0; i < 3; i++) {
        values = 60 + (uint64_t)i;
        cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, alloc_step, &call, &values, 8, NULL, NULL, &err),
                     CUDA_SUCCESS, "run %d: %s", i, cucap_error_message(err));
    }
    cr_assert_eq(injected(), 2, "the first two hand-backs were refused");
    cr_assert_eq(set_rules(""), 0);
    cucap_set_warning_handler(NULL, NULL);
    cr_assert_eq(ws.count, 1, "%d warnings, the last: %s", ws.count, ws.last);
    cr_assert(strstr(ws.last, "handed back by an event") && strstr(ws.last, "CUDA_ERROR_NOT_SUPPORTED"), "%s",
              ws.last);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(&got, call.out, 8), CUDA_SUCCESS);
    cr_assert_eq(got, 62, "the last run wrote %llu", (unsigned long long)got);
    cucap_graph_set_destroy(set);
    D.cuMemFree(call.out);
}
