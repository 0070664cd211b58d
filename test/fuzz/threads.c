/* The thread harness of the API fuzzer, two parts:
 *   1. several threads run pseudo-random sequences on builders of their own
 *      (begin in any mode, split, memsets, join, end, complete, launch,
 *      teardown in any order) while all of them share the process-wide
 *      device pool, allocating and freeing through it;
 *   2. four threads work at once on the builders of ONE hierarchy - the
 *      parent, its forks, a conditional body and a graph reference of the
 *      previous round's graph - with barriers forcing the interleavings that
 *      matter: the parent's end (often UNJOINED or INVALIDATED) against a
 *      body's end and attach, a fork's split, destroy or invalidating
 *      synchronize, and an instantiate of a graph reference.  The raw
 *      driver work on the capture's streams goes through
 *      cucap_builder_enqueue, as the header tells applications to: the
 *      driver does not synchronize one graph's calls itself.
 *   3. several threads run ONE graph set (fuzz-threads' fourth test), each
 *      on a stream of its own, on keys of their own whose steps are plain, fork,
 *      allocate inside the step, read the parameter block or make a call
 *      the capture forbids (eager runs), under a budget of two graphs
 *      that retires at nearly every miss; every run's values checked.
 *   4. threads that run a graph set on their per-thread streams, every run
 *      held in flight behind a gate, and return at once (the driver hangs
 *      the exit of a thread whose per-thread stream waits by an event for
 *      allocations in flight: doc/driver-facts.md); each exit must return,
 *      and the simulated driver counts none that would hang.
 * Built as fuzz-threads (the simulated driver; CI runs it under
 * ThreadSanitizer: a plain TAP program, since Criterion's runner does not
 * start under TSan) and fuzz-threads-gpu (the real driver).
 *     fuzz-threads [THREADS [ROUNDS [SEED]]] */
#define _GNU_SOURCE 1   /* dladdr, for the crash report */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crash-report.h"
#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"


static CUcontext ctx;
static int rounds;
static atomic_long progress;         /* for the watchdog */
static unsigned seed;

struct worker {
    unsigned rng;
    int failures;          /* invariant breaks */
    int built;             /* graphs that ran */
};

/* cuStreamSynchronize in relaxed thread mode: it still invalidates a
 * capture its stream is part of, but never other threads' global captures
 * (a global-mode call racing other threads' captures crashes the real
 * driver itself: test/stress-threads.c). */

static unsigned rnd(struct worker *w)
{
    w->rng = w->rng * 1103515245u + 12345u;
    return w->rng >> 16;
}

static void *work(void *p)
{
    static const CUstreamCaptureMode modes[3] = { CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                  CU_STREAM_CAPTURE_MODE_RELAXED };
    struct worker *w = p;
    cucap_pool *pool;
    int r;

    D.cuCtxSetCurrent(ctx);
    for (r = 0; r < rounds; r++) {
        cucap_builder *b = NULL, *forks[3] = { NULL, NULL, NULL }, *all[4];
        atomic_fetch_add(&progress, 1);
        cucap_exec *exec = NULL;
        CUdeviceptr d = 0;
        size_t n = 1 + rnd(w) % 3, i;
        /* global captures of other threads are legal company: only this
         * thread's own work may fail, and only with a capture error */
        CUstreamCaptureMode mode = modes[rnd(w) % 3];

        if (cucap_device_pool(0, &pool, NULL) != CUDA_SUCCESS || cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS) {
            w->failures++;   /* nothing here is refused by anyone's capture */
            continue;
        }
        if (cucap_builder_begin(b, mode, NULL) != CUDA_SUCCESS) {
            /* another thread's synchronize may kill a global capture at
             * once: begin then undoes itself */
            if (cucap_builder_get_state(b) != CUCAP_BUILDER_NOT_STARTED)
                w->failures++;
            cucap_builder_destroy(b);
            continue;
        }
        if (cucap_pool_alloc(pool, 256, cucap_builder_stream(b), &d, NULL) == CUDA_SUCCESS &&
            cucap_builder_split(b, n + 1, forks, NULL) == CUDA_SUCCESS) {
            all[0] = b;
            for (i = 0; i < n; i++)
                all[i + 1] = forks[i];
            for (i = 0; i <= n; i++)
                D.cuMemsetD8Async(d + i * 64, (unsigned char)i, 64, cucap_builder_stream(all[i]));
            if (rnd(w) % 8 == 0)
                relaxed_synchronize(cucap_builder_stream(all[rnd(w) % (n + 1)]));   /* invalidate */
            cucap_builder_join(all, n + 1, NULL, NULL);
            cucap_pool_free(pool, d, cucap_builder_stream(b), NULL);
        }
        if (cucap_builder_end(b, NULL) == CUDA_SUCCESS &&
            cucap_builder_complete(b, NULL, &exec, NULL) == CUDA_SUCCESS &&
            cucap_exec_launch(exec, cucap_builder_stream(b), NULL) == CUDA_SUCCESS) {
            relaxed_synchronize(cucap_builder_stream(b));
            w->built++;
        } else if (cucap_builder_get_state(b) == CUCAP_BUILDER_CAPTURING) {
            w->failures++;   /* end always settles the state */
        }
        cucap_exec_destroy(exec);
        /* teardown in an order of the round's choosing */
        if (rnd(w) % 2) {
            cucap_builder_destroy(b);
            b = NULL;
        }
        for (i = 0; i < 3; i++)
            cucap_builder_destroy(forks[i]);
        cucap_builder_destroy(b);
    }
    return NULL;
}

static void quiet(const cucap_error *w, void *data)
{
    (void)w;
    (void)data;
}

/* ---------------------------------------------------------------- part 2: one hierarchy, four threads */

struct shared_round {
    pthread_barrier_t go, done;
    cucap_builder *parent, *forks[3], *body;
    cucap_graph *previous;           /* a reference to the previous round's graph */
    CUdeviceptr memory;
    unsigned rng[4];
    int breaks;                      /* the error convention or a state broken */
    int rounds;
};

static atomic_int hierarchy_breaks;

/* The error convention: a code and its error object agree.  CHECKED(call)
 * runs the call (which fills err) before reading err. */
#define CHECKED(call)                                                                                          \
    do {                                                                                                       \
        CUresult checked_rc_ = (call);                                                                         \
        convention(checked_rc_, err);                                                                          \
        err = NULL;                                                                                            \
    } while (0)

static void convention(CUresult rc, cucap_error *err)
{
    if ((rc == CUDA_SUCCESS) != (err == NULL) || (err && cucap_error_code(err) != rc))
        atomic_fetch_add(&hierarchy_breaks, 1);
    cucap_error_free(err);
}

static unsigned rnd_of(unsigned *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return *rng >> 16;
}

struct memset_work {
    CUdeviceptr at;
    unsigned char value;
};

static CUresult memset_64(CUstream s, void *data)
{
    const struct memset_work *w = data;
    return D.cuMemsetD8Async(w->at, w->value, 64, s);
}

static CUresult invalidate(CUstream s, void *data)
{
    (void)data;
    return relaxed_synchronize(s);
}

static void fork_work(struct shared_round *r, cucap_builder **f, unsigned *rng)
{
    struct memset_work fill = { r->memory + 64, 1 };
    cucap_builder *more = NULL;
    cucap_error *err = NULL;
    int building = 0;

    switch (rnd_of(rng) % 5) {
    case 0: CHECKED(cucap_builder_enqueue(*f, memset_64, &fill, &err)); break;
    case 1: cucap_builder_destroy(*f); *f = NULL; break;
    case 2: CHECKED(cucap_builder_is_building(*f, &building, &err)); break;
    case 3:
        CHECKED(cucap_builder_split(*f, 2, &more, &err));
        cucap_builder_destroy(more);
        break;
    default: CHECKED(cucap_builder_enqueue(*f, invalidate, NULL, &err)); break;   /* the whole capture */
    }
}

static void *hierarchy_worker(void *p)
{
    struct shared_round *r = ((struct shared_round **)p)[0];
    int me = (int)(long)((void **)p)[1], round;

    D.cuCtxSetCurrent(ctx);
    for (round = 0; round < r->rounds; round++) {
        cucap_error *err = NULL;
        unsigned *rng = &r->rng[me];
        atomic_fetch_add(&progress, 1);
        pthread_barrier_wait(&r->go);
        if (me == 0) {   /* the parent and its first fork */
            unsigned what = rnd_of(rng) % 3;
            struct memset_work fill = { r->memory, 2 };
            CHECKED(cucap_builder_enqueue(r->parent, memset_64, &fill, &err));
            if (what == 0) {
                cucap_builder *pair[2];
                pair[0] = r->parent;
                pair[1] = r->forks[0];
                CHECKED(cucap_builder_join(pair, 2, NULL, &err));
            }
            if (what < 2)
                CHECKED(cucap_builder_end(r->parent, &err));
            else
                CHECKED(cucap_builder_close(r->parent, &err));
        } else if (me == 1 || me == 2) {
            if (r->forks[me])
                fork_work(r, &r->forks[me], rng);
        } else {   /* the body and the previous round's graph */
            cucap_exec *exec = NULL;
            CUresult begun;
            if (rnd_of(rng) % 2 && r->previous) {
                CHECKED(cucap_graph_instantiate(r->previous, NULL, &exec, &err));
                cucap_exec_destroy(exec);
            }
            err = NULL;
            begun = cucap_builder_begin(r->body, CU_STREAM_CAPTURE_MODE_RELAXED, &err);
            convention(begun, err);
            err = NULL;
            if (begun == CUDA_SUCCESS) {
                struct memset_work fill = { r->memory + 128, 3 };
                CHECKED(cucap_builder_enqueue(r->body, memset_64, &fill, &err));
                CHECKED(cucap_builder_end(r->body, &err));
            }
        }
        pthread_barrier_wait(&r->done);
    }
    return NULL;
}

/* Each round: a relaxed capture with an IF body and three forks, handed
 * to four threads at once; then the checks and the teardown here. */
static int one_hierarchy(int round_count, unsigned seed_value)
{
    struct shared_round r;
    pthread_t t[4];
    void *args[4][2];
    int i, round, settled_breaks = 0;

    memset(&r, 0, sizeof r);
    r.rounds = round_count;
    pthread_barrier_init(&r.go, NULL, 5);
    pthread_barrier_init(&r.done, NULL, 5);
    D.cuCtxSetCurrent(ctx);
    D.cuMemAlloc(&r.memory, 256);
    for (i = 0; i < 4; i++) {
        r.rng[i] = seed_value * 31u + (unsigned)i;
        args[i][0] = &r;
        args[i][1] = (void *)(long)i;
        pthread_create(&t[i], NULL, hierarchy_worker, args[i]);
    }
    for (round = 0; round < round_count; round++) {
        CUgraphConditionalHandle c;
        cucap_builder_state state;
        if (cucap_builder_create(0, &r.parent, NULL) != CUDA_SUCCESS ||
            cucap_builder_begin(r.parent, CU_STREAM_CAPTURE_MODE_RELAXED, NULL) != CUDA_SUCCESS ||
            cucap_builder_create_condition(r.parent, 0, 1, &c, NULL) != CUDA_SUCCESS ||
            cucap_builder_if(r.parent, c, &r.body, NULL) != CUDA_SUCCESS ||
            cucap_builder_split(r.parent, 4, r.forks, NULL) != CUDA_SUCCESS)
            settled_breaks++;
        pthread_barrier_wait(&r.go);
        pthread_barrier_wait(&r.done);
        state = cucap_builder_get_state(r.parent);
        if (state == CUCAP_BUILDER_CAPTURING || state == CUCAP_BUILDER_NOT_STARTED)
            settled_breaks++;   /* end and close always settle the parent */
        cucap_graph_unref(r.previous);
        r.previous = NULL;
        if (state == CUCAP_BUILDER_ENDED)
            cucap_builder_graph(r.parent, &r.previous, NULL);
        /* teardown in an order of the round's choosing */
        if (round % 2)
            cucap_builder_destroy(r.parent);
        for (i = 0; i < 3; i++)
            cucap_builder_destroy(r.forks[(i + round) % 3]);
        cucap_builder_destroy(r.body);
        if (round % 2 == 0)
            cucap_builder_destroy(r.parent);
        r.parent = r.body = NULL;
        memset(r.forks, 0, sizeof r.forks);
    }
    for (i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cucap_graph_unref(r.previous);
    pthread_barrier_destroy(&r.go);
    pthread_barrier_destroy(&r.done);
    D.cuMemFree(r.memory);
    return settled_breaks + atomic_load(&hierarchy_breaks);
}

/* ---------------------------------------------------------------- one graph set, several threads */

struct set_worker {
    cucap_graph_set *set;
    unsigned rng;
    CUdeviceptr out;                 /* this thread's 8 bytes */
    int index, failures, runs;
};

struct set_call {
    unsigned key;
    CUdeviceptr out;
    CUhostFn gate;                   /* queued at the end of the step when set */
    void *gate_data;
};

/* The step of a key: the run's values, through the parameter block, to
 * out; key % 4 says how (directly, through a fork, through 1 MiB
 * allocated inside the step, or after a forbidden call, eagerly). */
static CUresult set_step_without_gate(cucap_builder *b, struct set_call *c, CUdeviceptr block, cucap_error **err);

static CUresult set_step(cucap_builder *b, void *user_data, cucap_error **err)
{
    struct set_call *c = user_data;
    CUdeviceptr block;
    CUresult rc;

    if ((rc = cucap_builder_params(b, 8, &block, err)) != CUDA_SUCCESS)
        return rc;
    if (c->gate && (rc = set_step_without_gate(b, c, block, err)) == CUDA_SUCCESS)
        rc = D.cuLaunchHostFunc(cucap_builder_stream(b), c->gate, c->gate_data);
    if (c->gate)
        return rc;
    return set_step_without_gate(b, c, block, err);
}

static CUresult set_step_without_gate(cucap_builder *b, struct set_call *c, CUdeviceptr block, cucap_error **err)
{
    CUstream s = cucap_builder_stream(b);
    cucap_builder *fork = NULL;
    CUdeviceptr tmp;
    cucap_pool *pool;
    CUresult rc;

    switch (c->key % 4) {
    case 1:
        if ((rc = cucap_builder_split(b, 2, &fork, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemcpyDtoDAsync(c->out, block, 8, cucap_builder_stream(fork))) == CUDA_SUCCESS)
            rc = cucap_builder_join_forks(b, err);
        cucap_builder_destroy(fork);
        return rc;
    case 2:
        if ((rc = cucap_device_pool(0, &pool, err)) != CUDA_SUCCESS ||
            (rc = cucap_pool_alloc(pool, 1u << 20, s, &tmp, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemcpyDtoDAsync(tmp, block, 8, s)) == CUDA_SUCCESS &&
            (rc = D.cuMemcpyDtoDAsync(c->out, tmp, 8, s)) == CUDA_SUCCESS)
            rc = cucap_pool_free(pool, tmp, s, err);
        return rc;
    case 3:
        (void)D.cuStreamSynchronize(s);   /* refused in a capture, and invalidates it: an eager run */
        return D.cuMemcpyDtoDAsync(c->out, block, 8, s);
    default:
        return D.cuMemcpyDtoDAsync(c->out, block, 8, s);
    }
}

static void *set_work(void *p)
{
    struct set_worker *w = p;
    struct set_call call;
    cucap_error *err = NULL;
    CUstream s = NULL;
    uint64_t values, got;
    int round;

    if (D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        w->failures++;
        return NULL;
    }
    for (round = 0; round < rounds; round++) {
        unsigned key = (unsigned)w->index << 8 | rnd_of(&w->rng) % 8;   /* a graph writes where its capture said */
        memset(&call, 0, sizeof call);
        call.key = key;
        call.out = w->out;
        values = ((uint64_t)w->rng << 8) | round;
        got = 0;
        if (cucap_graph_set_run(w->set, &key, sizeof key, set_step, &call, &values, sizeof values, s, NULL, &err) !=
                CUDA_SUCCESS ||
            D.cuStreamSynchronize(s) != CUDA_SUCCESS || D.cuMemcpyDtoH(&got, w->out, sizeof got) != CUDA_SUCCESS ||
            got != values) {
            if (w->failures++ < 3)
                printf("# set thread: key %u round %d: %s (wrote %llx, not %llx)\n", key, round,
                       err ? cucap_error_message(err) : "no error", (unsigned long long)got,
                       (unsigned long long)values);
        }
        cucap_error_free(err);
        err = NULL;
        w->runs++;
        atomic_fetch_add(&progress, 1);
    }
    D.cuStreamDestroy(s);
    return NULL;
}

static int one_set(int threads, unsigned seed_value)
{
    cucap_graph_set_options opts;
    struct set_worker w[16];
    pthread_t t[16];
    cucap_error *err = NULL;
    CUdeviceptr out;
    int i, failures = 0;

    memset(&opts, 0, sizeof opts);
    opts.budget_bytes = (size_t)96 << 20;
    opts.budget_graphs = 2;
    opts.kept_for_update = 1;
    opts.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    if (D.cuMemAlloc(&out, (size_t)threads * 8) != CUDA_SUCCESS ||
        cucap_graph_set_create(0, &opts, &w[0].set, &err) != CUDA_SUCCESS) {
        printf("# the set could not be made: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 1;
    }
    for (i = 0; i < threads; i++) {
        w[i].set = w[0].set;
        w[i].rng = seed_value * 31u + (unsigned)i;
        w[i].out = out + (size_t)i * 8;
        w[i].index = i;
        w[i].failures = w[i].runs = 0;
        pthread_create(&t[i], NULL, set_work, &w[i]);
    }
    for (i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
    }
    cucap_graph_set_destroy(w[0].set);
    D.cuMemFree(out);
    return failures;
}

/* ---------------------------------------------------------------- threads that return with runs in flight */

/* The gate: on the GPU a host function that waits until the harness opens
 * it (or 10 s pass); on the simulator its held-work model's. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void CUDA_CB gpu_gate(void *unused)
{
    struct timespec until;

    (void)unused;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
        ;
    pthread_mutex_unlock(&gate_lock);
}

static void *sim_symbol(const char *name)
{
    const char *path = getenv("CUCAPTURE_TEST_SIM");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL, *fn = h ? dlsym(h, name) : NULL;

    if (h)
        dlclose(h);   /* the library keeps it loaded */
    return fn;
}

struct leaving {
    cucap_graph_set *set;
    CUdeviceptr out;                 /* 8 bytes a key */
    unsigned index, rng;
    CUhostFn gate;
    uint64_t values[4];              /* the last values each key's runs asked for */
    int failures;
};

/* Runs of three keys (plain, a fork, allocating; not the eager one, whose
 * step synchronizes its stream), each held, on one stream a thread: its
 * per-thread stream, the NULL or the legacy stream (which a per-thread
 * stream follows unasked), or a blocking stream of its own, destroyed
 * before it returns; then the thread returns, its runs in flight. */
static void *run_and_leave(void *p)
{
    struct leaving *l = p;
    struct set_call call;
    cucap_error *err = NULL;
    CUstream s = NULL, own = NULL;
    unsigned i, key;
    uint64_t values;

    switch (l->index % 4) {
    case 0: s = CU_STREAM_PER_THREAD; break;
    case 1: s = NULL; break;
    case 2: s = CU_STREAM_LEGACY; break;
    default:
        if (D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || D.cuStreamCreate(&own, 0) != CUDA_SUCCESS) {
            printf("# leaving thread %u: no blocking stream\n", l->index);
            l->failures++;
            return NULL;
        }
        (void)D.cuCtxSetCurrent(NULL);
        s = own;
    }
    for (i = 0; i < 6; i++) {
        key = l->index << 8 | (i + rnd_of(&l->rng)) % 3;
        memset(&call, 0, sizeof call);
        call.key = key;
        call.out = l->out + (key % 4) * 8;
        call.gate = l->gate;
        values = (uint64_t)l->index << 32 | (uint64_t)i << 8 | (key % 4);
        if (cucap_graph_set_run(l->set, &key, sizeof key, set_step, &call, &values, sizeof values, s, NULL, &err) !=
            CUDA_SUCCESS) {
            if (l->failures++ < 3)
                printf("# leaving thread %u: key %u: %s\n", l->index, key, cucap_error_message(err));
        } else {
            l->values[key % 4] = values;
        }
        cucap_error_free(err);
        err = NULL;
    }
    if (own && (D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || D.cuStreamDestroy(own) != CUDA_SUCCESS ||
                D.cuCtxSetCurrent(NULL) != CUDA_SUCCESS))
        l->failures++;
    atomic_fetch_add(&progress, 1);
    return NULL;
}

/* 0, or how many threads' exits hung (or ran wrong). */
static int threads_leave_with_runs_in_flight(int threads, unsigned seed_value)
{
    typedef void (*release_fn)(void);
    typedef long (*held_waits_fn)(const char **);
    held_waits_fn held_waits = (held_waits_fn)sim_symbol("cudasim_held_waits");
    release_fn release = (release_fn)sim_symbol("cudasim_release");
    CUhostFn sim_gate = (CUhostFn)sim_symbol("cudasim_gate");
    cucap_graph_set_options opts;
    cucap_graph_set *set = NULL;
    struct leaving l[16];
    pthread_t t[16];
    struct timespec until;
    cucap_error *err = NULL;
    const char *call = NULL;
    CUdeviceptr out;
    long waits_before = held_waits ? held_waits(&call) : 0, waits;
    uint64_t got;
    int i, k, bad = 0, joined[16];

    memset(&opts, 0, sizeof opts);
    opts.budget_bytes = (size_t)96 << 20;
    opts.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    gate_open = 0;
    if (D.cuMemAlloc(&out, (size_t)threads * 32) != CUDA_SUCCESS ||
        cucap_graph_set_create(0, &opts, &set, &err) != CUDA_SUCCESS) {
        printf("# the set could not be made: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return threads;
    }
    for (i = 0; i < threads; i++) {
        memset(&l[i], 0, sizeof l[i]);
        l[i].set = set;
        l[i].out = out + (size_t)i * 32;
        l[i].index = (unsigned)i;
        l[i].rng = seed_value * 131u + (unsigned)i;
        l[i].gate = sim_gate ? sim_gate : gpu_gate;
        pthread_create(&t[i], NULL, run_and_leave, &l[i]);
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 8;
    for (i = 0; i < threads; i++)
        joined[i] = pthread_timedjoin_np(t[i], NULL, &until) == 0;
    waits = held_waits ? held_waits(&call) - waits_before : 0;
    if (release)
        release();
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    if (waits)
        printf("# %ld calls waited for the held runs, the last %s\n", waits, call);
    bad += (int)waits;
    (void)D.cuCtxSetCurrent(ctx);
    for (i = 0; i < threads; i++) {
        if (!joined[i]) {
            printf("# thread %d: its exit hung while its runs were in flight\n", i);
            bad++;
            continue;
        }
        bad += l[i].failures;
    }
    cucap_graph_set_destroy(set);   /* the runs finish first; no call waits for them */
    if (!bad && D.cuCtxSynchronize() != CUDA_SUCCESS)
        bad++;
    for (i = 0; i < threads && !bad; i++)
        for (k = 0; k < 4; k++)
            if (l[i].values[k] && (D.cuMemcpyDtoH(&got, out + (size_t)i * 32 + (size_t)k * 8, 8) != CUDA_SUCCESS ||
                                   got != l[i].values[k])) {
                printf("# thread %d key %d wrote %llx, not %llx\n", i, k, (unsigned long long)got,
                       (unsigned long long)l[i].values[k]);
                bad++;
            }
    D.cuMemFree(out);
    return bad;
}

static int load(void)
{
#ifdef FUZZ_THREADS_GPU
    const char *required = getenv("CUCAPTURE_REQUIRE_GPU");
    cucap_error *err = NULL;

    unsetenv("CUCAPTURE_DRIVER");
    if (cucap_init(&err) != CUDA_SUCCESS) {
        if (required && !strcmp(required, "1"))
            printf("Bail out! CUCAPTURE_REQUIRE_GPU=1 but the GPU is unusable: %s\n", cucap_error_message(err));
        else
            printf("1..0 # SKIP no usable CUDA GPU: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return required && !strcmp(required, "1") ? -1 : 0;
    }
#else
    const char *sim = getenv("CUCAPTURE_TEST_SIM");

    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0 || cucap_init(NULL) != CUDA_SUCCESS) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) cannot be used\n");
        return -1;
    }
#endif
    if (D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) {
        printf("Bail out! cannot retain device 0's primary context\n");
        return -1;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4, i, failures = 0, built = 0, loaded, breaks;
    pthread_t t[16];
    struct worker w[16];

    rounds = argc > 2 ? atoi(argv[2]) : 200;
    seed = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    if (threads < 1 || threads > 16)
        threads = 4;
    setvbuf(stdout, NULL, _IOLBF, 0);
    crash_report_install();
    progress_watch_start(&progress, 60);
    printf("TAP version 13\n");
    if ((loaded = load()) <= 0)
        return loaded < 0;
    printf("1..5\n");
    cucap_set_warning_handler(quiet, NULL);
    for (i = 0; i < threads; i++) {
        w[i].rng = seed * 7919u + (unsigned)i;
        w[i].failures = w[i].built = 0;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
        built += w[i].built;
    }
    printf("%s 1 - %d threads x %d rounds: every end settled its builder (%d invariant breaks)\n",
           failures ? "not ok" : "ok", threads, rounds, failures);
    printf("%s 2 - graphs were built and ran (%d)\n", built > 0 ? "ok" : "not ok", built);
    breaks = one_hierarchy(rounds, seed);
    printf("%s 3 - four threads on one hierarchy x %d rounds (parent end against body end, fork split, destroy and "
           "invalidation, graph-reference instantiate): %d breaks of the error convention or of settled states\n",
           breaks ? "not ok" : "ok", rounds, breaks);
    breaks = one_set(threads, seed);
    printf("%s 4 - %d threads on one graph set x %d runs, each on its own stream, every run's values right "
           "(%d wrong)\n", breaks ? "not ok" : "ok", threads, rounds, breaks);
    breaks = threads_leave_with_runs_in_flight(threads, seed);
    printf("%s 5 - %d threads run one graph set on their per-thread, NULL, legacy and own blocking streams, every run held, and return at once: "
           "every exit returned, no call waited, every key's last values written (%d wrong)\n",
           breaks ? "not ok" : "ok", threads, breaks);
    return 0;
}
