/* The library from many threads at once, each started fresh (no current
 * context, nothing initialised), as a user's worker threads are:
 *   1. 16 threads capture, split, join, end, complete, launch and destroy
 *      in global mode (half of them split in four and join with
 *      cucap_builder_join, half split in two and join with
 *      cucap_builder_join_forks); no thread's library calls may invalidate
 *      another's capture, and every graph runs;
 *   2. the same beside threads that open, create, allocate from and close
 *      pools;
 *   3. the same beside a thread that invalidates every global capture with
 *      a raw cuMemAlloc: no crash, only capture errors, nothing leaks;
 *   4. a conditional body ended by one thread while another ends the
 *      parent's capture, which the driver discards (UNJOINED).
 * Built twice: stress-threads-sim on the simulated driver, and
 * stress-threads-gpu on the real one (skipped without a GPU, failed
 * without one under CUCAPTURE_REQUIRE_GPU=1).  A plain TAP program, so
 * that it also runs under ThreadSanitizer. */
#define _GNU_SOURCE 1   /* dladdr, for the crash report */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "crash-report.h"
#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"

#define THREADS 16
#define FORKS 4

#ifdef STRESS_GPU
#  define ROUNDS 300
#  define BODY_ROUNDS 3000
#else
#  define ROUNDS 25
#  define BODY_ROUNDS 300
#endif

static int tests;
static atomic_long progress;         /* for the watchdog */
static atomic_int in_child;          /* a child runs, with a watchdog of its own */
static const char *_Atomic scenario = "starting";
static atomic_long host_calls;
static atomic_int stop_others;

static void report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s %d - ", ok ? "ok" : "not ok", ++tests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static void count_call(void *p)
{
    (void)p;
    atomic_fetch_add(&host_calls, 1);
}

static void quiet(const cucap_error *w, void *data)
{
    (void)w;
    (void)data;
}

/* ---------------------------------------------------------------- 1-3: capturing threads */

struct worker {
    const char *_Atomic where;       /* the call in progress, for the watchdog */
    int index;
    int rounds;
    int tolerate_invalidation;       /* scenario 3: capture errors are expected */
    int keep;                        /* one builder for every cycle, reset between (2: with kept forks) */
    int pair;                        /* split in two and join with join_forks, instead of in FORKS */
    cucap_builder *kept, *kept_forks[FORKS - 1];
    int completed, capture_failures, other_failures;
    char first_failure[512];
};

static struct worker workers[THREADS];

static int is_capture_error(CUresult rc)
{
    return rc >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && rc <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

static void note_failure(struct worker *w, const char *call, CUresult rc, cucap_error *err)
{
    if (is_capture_error(rc) || (rc == CUDA_ERROR_ILLEGAL_STATE && w->tolerate_invalidation))
        w->capture_failures++;
    else
        w->other_failures++;
    if (!w->first_failure[0])
        snprintf(w->first_failure, sizeof w->first_failure, "thread %d: %s: %s", w->index, call,
                 err ? cucap_error_message(err) : "(no error object)");
}

/* One cycle; returns 1 when it ran to a launched graph. */
static int cycle(struct worker *w, CUstream launch_stream)
{
    cucap_builder *b = NULL, *f[FORKS - 1] = { NULL, NULL, NULL }, *root = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUresult rc;
    int i, ok = 0, n = w->pair ? 2 : FORKS;

#define STEP(call, expr)                                                                                       \
    do {                                                                                                       \
        atomic_store(&w->where, call);                                                                         \
        atomic_fetch_add(&progress, 1);                                                                        \
        if ((rc = (expr)) != CUDA_SUCCESS) {                                                                   \
            note_failure(w, call, rc, err);                                                                    \
            goto out;                                                                                          \
        }                                                                                                      \
    } while (0)
    if (w->keep) {
        if (!w->kept)
            STEP("cucap_builder_create", cucap_builder_create(0, &w->kept, &err));
        STEP("cucap_builder_reset", cucap_builder_reset(w->kept, &err));
        b = w->kept;
    } else
        STEP("cucap_builder_create", cucap_builder_create(0, &b, &err));
    STEP("cucap_builder_begin", cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err));
    STEP("cuLaunchHostFunc", D.cuLaunchHostFunc(cucap_builder_stream(b), count_call, NULL));
    if (w->keep == 2) {
        STEP("cucap_builder_split_kept", cucap_builder_split_kept(b, (size_t)n, f, &err));
        for (i = 0; i < n - 1; i++)
            w->kept_forks[i] = f[i];   /* the same ones every cycle: destroyed at the thread's end */
    } else
        STEP("cucap_builder_split", cucap_builder_split(b, (size_t)n, f, &err));
    for (i = 0; i < n - 1; i++)
        STEP("cuLaunchHostFunc (fork)", D.cuLaunchHostFunc(cucap_builder_stream(f[i]), count_call, NULL));
    if (w->keep) {   /* the registry finds the fork's capture among the other threads' */
        cucap_pool *pool = NULL;
        CUdeviceptr a = 0;
        STEP("cucap_device_pool", cucap_device_pool(0, &pool, &err));
        STEP("cucap_pool_alloc (fork)", cucap_pool_alloc(pool, 256, cucap_builder_stream(f[0]), &a, &err));
        STEP("cucap_pool_free (fork)", cucap_pool_free(pool, a, cucap_builder_stream(f[0]), &err));
    }
    if (w->pair)
        STEP("cucap_builder_join_forks", cucap_builder_join_forks(b, &err));
    else
        STEP("cucap_builder_join", cucap_builder_join((cucap_builder *const[]){ f[2], b, f[0], f[1] }, FORKS,
                                                      &root, &err));
    STEP("cucap_builder_end", cucap_builder_end(b, &err));
    STEP("cucap_builder_complete", cucap_builder_complete(b, NULL, &exec, &err));
    STEP("cucap_exec_launch", cucap_exec_launch(exec, launch_stream, &err));
    ok = 1;
out:
#undef STEP
    atomic_store(&w->where, "destroying");
    cucap_error_free(err);
    cucap_exec_destroy(exec);
    /* destroy in a thread-dependent order; a kept builder at the thread's end */
    if (w->index % 3 == 0 && !w->keep)
        cucap_builder_destroy(b);
    for (i = 0; i < n - 1 && w->keep != 2; i++)
        cucap_builder_destroy(f[(i + w->index) % (n - 1)]);
    if (w->index % 3 != 0 && !w->keep)
        cucap_builder_destroy(b);
    return ok;
}


static void *capturing_thread(void *p)
{
    struct worker *w = p;
    CUcontext ctx = NULL;
    CUstream s = NULL;
    int r;

    /* the launch stream is the test's own: made with the primary context,
     * which the thread then leaves current only for that call */
    if (D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || D.cuCtxSetCurrent(NULL) != CUDA_SUCCESS) {
        w->other_failures++;
        snprintf(w->first_failure, sizeof w->first_failure, "thread %d: setting up its launch stream failed",
                 w->index);
        return NULL;
    }
    for (r = 0; r < w->rounds; r++)
        w->completed += cycle(w, s);
    if (w->index % 2)   /* kept forks and their builder in either order */
        cucap_builder_destroy(w->kept);
    for (r = 0; r < FORKS - 1; r++)
        cucap_builder_destroy(w->kept_forks[r]);
    if (!(w->index % 2))
        cucap_builder_destroy(w->kept);
    w->kept = NULL;
    atomic_store(&w->where, "synchronizing its launch stream");
    D.cuCtxSetCurrent(ctx);
    if (relaxed_synchronize(s) != CUDA_SUCCESS)
        w->other_failures++;
    D.cuStreamDestroy(s);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
    atomic_store(&w->where, "done");
    return NULL;
}

/* ---------------------------------------------------------------- the watchdog */


/* A scenario that makes no progress for 30 s is a hang: say where every
 * thread is and end the program (a hung test would hide every later one). */
static void *watchdog(void *p)
{
    long last = -1;
    int still = 0, i;

    (void)p;
    for (;;) {
        long now = atomic_load(&progress);
        sleep(1);
        still = now == last && !atomic_load(&in_child) ? still + 1 : 0;
        last = now;
        if (still < 30)
            continue;
        printf("not ok %d - %s: no progress for 30 s (a hang)\n", ++tests, atomic_load(&scenario));
        for (i = 0; i < THREADS; i++)
            printf("# thread %d: in %s\n", i, atomic_load(&workers[i].where) ? atomic_load(&workers[i].where) : "?");
        printf("1..%d\n", tests);
        fflush(stdout);
        _exit(1);
    }
    return NULL;
}

static void start_watchdog(void)
{
    pthread_t dog;

    if (pthread_create(&dog, NULL, watchdog, NULL) == 0)
        pthread_detach(dog);
}

static void *pool_thread(void *p)
{
    cucap_pool_options opts = { .max_size = 64u << 20, .ipc_enabled = 0 };
    int *failures = p;

    while (!atomic_load(&stop_others)) {
        cucap_pool *def = NULL, *dev = NULL, *own = NULL;
        CUdeviceptr a = 0;
        if (cucap_pool_open_default(0, &def, NULL) != CUDA_SUCCESS || cucap_pool_close(def, NULL) != CUDA_SUCCESS)
            (*failures)++;
        if (cucap_pool_create(0, &opts, &own, NULL) != CUDA_SUCCESS || cucap_pool_close(own, NULL) != CUDA_SUCCESS)
            (*failures)++;
        if (cucap_device_pool(0, &dev, NULL) != CUDA_SUCCESS ||
            cucap_pool_alloc(dev, 256, NULL, &a, NULL) != CUDA_SUCCESS ||
            cucap_pool_free(dev, a, NULL, NULL) != CUDA_SUCCESS)
            (*failures)++;
    }
    return NULL;
}

static void *invalidating_thread(void *p)
{
    CUcontext ctx = NULL;
    long *made = p;

    D.cuDevicePrimaryCtxRetain(&ctx, 0);
    D.cuCtxSetCurrent(ctx);
    while (!atomic_load(&stop_others)) {
        CUdeviceptr d = 0;
        /* global mode: refused while any global capture runs, which it invalidates */
        if (D.cuMemAlloc(&d, 256) == CUDA_SUCCESS) {
            CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
            D.cuThreadExchangeStreamCaptureMode(&mode);
            D.cuMemFree(d);
            D.cuThreadExchangeStreamCaptureMode(&mode);
        }
        (*made)++;
        atomic_fetch_add(&progress, 1);
    }
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
    return NULL;
}

enum beside { BESIDE_NOTHING, BESIDE_POOLS, BESIDE_INVALIDATOR };

static void capturing_threads(enum beside beside, int keep, const char *what)
{
    pthread_t threads[THREADS], other[2];
    int pool_failures[2] = { 0, 0 }, completed = 0, capture_failures = 0, other_failures = 0, i, others = 0;
    long invalidations = 0, host_functions = 0;   /* what the completed graphs ran */
    const char *first = NULL;

    atomic_store(&host_calls, 0);
    atomic_store(&stop_others, 0);
    atomic_store(&scenario, what);
    if (beside == BESIDE_POOLS)
        for (others = 0; others < 2; others++)
            pthread_create(&other[others], NULL, pool_thread, &pool_failures[others]);
    if (beside == BESIDE_INVALIDATOR)
        pthread_create(&other[others++], NULL, invalidating_thread, &invalidations);
    for (i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        atomic_store(&workers[i].where, "starting");
        workers[i].index = i;
        workers[i].rounds = ROUNDS;
        workers[i].tolerate_invalidation = beside == BESIDE_INVALIDATOR;
        workers[i].keep = keep;
        workers[i].pair = i % 2;
        pthread_create(&threads[i], NULL, capturing_thread, &workers[i]);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    atomic_store(&stop_others, 1);
    for (i = 0; i < others; i++)
        pthread_join(other[i], NULL);
    for (i = 0; i < THREADS; i++) {
        completed += workers[i].completed;
        host_functions += (long)workers[i].completed * (workers[i].pair ? 2 : FORKS);
        capture_failures += workers[i].capture_failures;
        other_failures += workers[i].other_failures;
        if (!first && workers[i].first_failure[0])
            first = workers[i].first_failure;
    }
    if (beside == BESIDE_INVALIDATOR) {
        report(other_failures == 0 && completed + capture_failures == THREADS * ROUNDS,
               "%s: %d of %d cycles completed, %d failed with capture errors only, %d with others (%ld raw "
               "allocations beside them)%s%s", what, completed, THREADS * ROUNDS, capture_failures, other_failures,
               invalidations, first ? "; first: " : "", first ? first : "");
        report(atomic_load(&host_calls) == host_functions,
               "%s: the completed graphs ran every host function (%ld of %ld)", what, atomic_load(&host_calls),
               host_functions);
        return;
    }
    report(completed == THREADS * ROUNDS && capture_failures + other_failures == 0,
           "%s: %d of %d cycles completed, none invalidated by another thread's library calls%s%s", what, completed,
           THREADS * ROUNDS, first ? "; first failure: " : "", first ? first : "");
    report(atomic_load(&host_calls) == host_functions && host_functions == (long)THREADS * ROUNDS * (FORKS + 2) / 2,
           "%s: every host function ran (%ld of %ld)", what, atomic_load(&host_calls), host_functions);
    if (beside == BESIDE_POOLS)
        report(pool_failures[0] + pool_failures[1] == 0, "%s: the pool threads' calls all succeeded (%d failed)",
               what, pool_failures[0] + pool_failures[1]);
}

/* ---------------------------------------------------------------- 3, raw: the same without the library */

/* The fork/join cycle as a careful programmer writes it with the raw
 * driver (streams and events made once, instantiate and exec destroy in
 * relaxed mode), beside the same invalidating thread: whether the driver
 * itself survives that load. */
static void *raw_capturing_thread(void *p)
{
    struct worker *w = p;
    CUstream origin = NULL, forks[FORKS - 1], launch = NULL;
    CUevent events[FORKS];
    CUcontext ctx = NULL;
    int r, i;

    D.cuDevicePrimaryCtxRetain(&ctx, 0);
    D.cuCtxSetCurrent(ctx);
    D.cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING);
    D.cuStreamCreate(&launch, CU_STREAM_NON_BLOCKING);
    for (i = 0; i < FORKS - 1; i++)
        D.cuStreamCreate(&forks[i], CU_STREAM_NON_BLOCKING);
    for (i = 0; i < FORKS; i++)
        D.cuEventCreate(&events[i], CU_EVENT_DISABLE_TIMING);
    for (r = 0; r < w->rounds; r++) {
        CUDA_GRAPH_INSTANTIATE_PARAMS params;
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        CUgraphExec exec = NULL;
        CUgraph g = NULL;
        atomic_fetch_add(&progress, 1);
        D.cuStreamBeginCapture(origin, CU_STREAM_CAPTURE_MODE_GLOBAL);
        D.cuLaunchHostFunc(origin, count_call, NULL);
        D.cuEventRecord(events[0], origin);
        for (i = 0; i < FORKS - 1; i++) {
            D.cuStreamWaitEvent(forks[i], events[0], 0);
            D.cuLaunchHostFunc(forks[i], count_call, NULL);
            D.cuEventRecord(events[i + 1], forks[i]);
            D.cuStreamWaitEvent(origin, events[i + 1], 0);
        }
        if (D.cuStreamEndCapture(origin, &g) != CUDA_SUCCESS || !g) {
            w->capture_failures++;
            continue;
        }
        memset(&params, 0, sizeof params);
        D.cuThreadExchangeStreamCaptureMode(&mode);
        if (D.cuGraphInstantiateWithParams(&exec, g, &params) == CUDA_SUCCESS) {
            D.cuGraphLaunch(exec, launch);
            D.cuGraphExecDestroy(exec);
            w->completed++;
        }
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuGraphDestroy(g);
    }
    relaxed_synchronize(launch);
    for (i = 0; i < FORKS; i++)
        D.cuEventDestroy(events[i]);
    for (i = 0; i < FORKS - 1; i++)
        D.cuStreamDestroy(forks[i]);
    D.cuStreamDestroy(origin);
    D.cuStreamDestroy(launch);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
    return NULL;
}

static void raw_beside_invalidator(void)
{
    pthread_t threads[THREADS], other;
    long invalidations = 0;
    int i, completed = 0, failed = 0;

    atomic_store(&stop_others, 0);
    pthread_create(&other, NULL, invalidating_thread, &invalidations);
    for (i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].rounds = ROUNDS;
        pthread_create(&threads[i], NULL, raw_capturing_thread, &workers[i]);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    atomic_store(&stop_others, 1);
    pthread_join(other, NULL);
    for (i = 0; i < THREADS; i++) {
        completed += workers[i].completed;
        failed += workers[i].capture_failures;
    }
    printf("raw driver code: %d cycles completed, %d invalidated\n", completed, failed);
}

/* Run this program again as `--child NAME` and read its one line: a
 * scenario that may crash the driver runs in a process of its own (a
 * process that initialised CUDA cannot fork a working child, but a new
 * program can start). */
static int run_child(const char *self, const char *name, char *line, size_t size)
{
    int fds[2], status = 0;
    size_t used = 0;
    ssize_t n;
    pid_t pid;

    line[0] = '\0';
    if (pipe(fds) != 0 || (pid = fork()) < 0)
        return -1;
    atomic_store(&in_child, 1);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(self, self, "--child", name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    while (used + 1 < size && (n = read(fds[0], line + used, size - used - 1)) > 0)
        used += (size_t)n;
    line[used] = '\0';
    if (used && line[used - 1] == '\n')
        line[used - 1] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    atomic_store(&in_child, 0);
    return status;
}

static const char *fate(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
    return buf;
}

/* Scenario 3 in two child processes: raw driver code first, then the
 * library.  The library must survive wherever the raw driver does; where
 * the driver itself crashes under this load, no library can help, and the
 * scenario says so and skips. */
static void invalidator_scenarios(const char *self)
{
    char raw[1024], lib[2048], raw_fate[64], lib_fate[64];
    int raw_status, lib_status, raw_ok, lib_ok;

#ifdef STRESS_GPU
    {
        const char *defects = getenv("CUCAPTURE_STRESS_DRIVER_DEFECTS");
        if (!defects || strcmp(defects, "1") != 0) {
            /* measured on the H200 (driver 580.159.04, 2026-11-30): raw driver
             * code alone dies with SIGSEGV in cuMemAlloc_v2 or
             * cuStreamEndCapture under this load, and the library's run hangs
             * inside the driver; run it on purpose, not in every check */
            printf("ok %d - 16 threads beside a thread invalidating their captures # SKIP the CUDA driver itself "
                   "crashes under this load (raw driver code: SIGSEGV in cuMemAlloc_v2 / cuStreamEndCapture, "
                   "driver 580.159.04); CUCAPTURE_STRESS_DRIVER_DEFECTS=1 runs it\n", ++tests);
            return;
        }
    }
#endif
    raw_status = run_child(self, "raw-invalidator", raw, sizeof raw);
    lib_status = run_child(self, "library-invalidator", lib, sizeof lib);
    raw_ok = WIFEXITED(raw_status) && WEXITSTATUS(raw_status) == 0;
    lib_ok = WIFEXITED(lib_status) && WEXITSTATUS(lib_status) == 0;

    fate(raw_status, raw_fate, sizeof raw_fate);
    fate(lib_status, lib_fate, sizeof lib_fate);
    printf("# the same load in raw driver code: %s (%s)\n", raw[0] ? raw : "no report", raw_fate);
    if (lib_ok) {   /* the child's own result lines, renumbered */
        char *save = NULL, *l;
        for (l = strtok_r(lib, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            int bad = strncmp(l, "not ok ", 7) == 0;
            const char *rest = strstr(l, " - ");
            if ((bad || strncmp(l, "ok ", 3) == 0) && rest)
                printf("%s %d%s\n", bad ? "not ok" : "ok", ++tests, rest);
        }
    }
    if (!lib_ok && !raw_ok)
        printf("ok %d - 16 threads beside a thread invalidating their captures # SKIP the CUDA driver itself crashes "
               "under this load: raw driver code %s, the library %s (driver %d)\n", ++tests, raw_fate, lib_fate,
               cucap_driver_version());
    else if (!lib_ok)
        printf("not ok %d - 16 threads beside a thread invalidating their captures: the library %s where raw "
               "driver code survives (%s)\n", ++tests, lib_fate, raw);
    if (!lib_ok) {   /* what the library's child said, for the log */
        char *save = NULL, *l;
        for (l = strtok_r(lib, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            printf("# library child: %s\n", l);
    }
}

/* ---------------------------------------------------------------- 4: body end against the parent's discarded end */

struct body_race {
    pthread_barrier_t go;
    cucap_builder *body;
    CUdeviceptr memory;
    CUresult body_rc;
    int body_ended;
};

static void *body_thread(void *p)
{
    struct body_race *r = p;

    pthread_barrier_wait(&r->go);
    r->body_rc = cucap_builder_begin(r->body, CU_STREAM_CAPTURE_MODE_RELAXED, NULL);
    if (r->body_rc == CUDA_SUCCESS) {
        D.cuMemsetD8Async(r->memory, 7, 64, cucap_builder_stream(r->body));
        r->body_rc = cucap_builder_end(r->body, NULL);
        r->body_ended = 1;
    }
    return NULL;
}

static void body_against_discarded_parent(CUdeviceptr memory)
{
    int round, bad = 0, unjoined = 0;
    char first[256] = "";

    atomic_store(&scenario, "a body ended while its parent's end discards the graph");
    for (round = 0; round < BODY_ROUNDS; round++) {
        struct body_race r;
        atomic_fetch_add(&progress, 1);
        cucap_builder *p = NULL, *forks[64];
        CUgraphConditionalHandle c;
        pthread_t t;
        CUresult end_rc;
        int i;

        memset(&r, 0, sizeof r);
        r.memory = memory;
        if (cucap_builder_create(0, &p, NULL) != CUDA_SUCCESS ||
            cucap_builder_begin(p, CU_STREAM_CAPTURE_MODE_RELAXED, NULL) != CUDA_SUCCESS ||
            cucap_builder_create_condition(p, 1, 1, &c, NULL) != CUDA_SUCCESS ||
            cucap_builder_if(p, c, &r.body, NULL) != CUDA_SUCCESS ||
            cucap_builder_split(p, 65, forks, NULL) != CUDA_SUCCESS) {
            bad++;
            snprintf(first, sizeof first, "round %d: setting up the parent failed", round);
            cucap_builder_destroy(r.body);
            cucap_builder_destroy(p);
            continue;
        }
        D.cuMemsetD8Async(memory, 1, 64, cucap_builder_stream(forks[0]));
        for (i = 0; i < 64; i++)
            cucap_builder_destroy(forks[i]);   /* so the parent's end is UNJOINED */
        pthread_barrier_init(&r.go, NULL, 2);
        pthread_create(&t, NULL, body_thread, &r);
        pthread_barrier_wait(&r.go);
        end_rc = cucap_builder_end(p, NULL);
        pthread_join(t, NULL);
        pthread_barrier_destroy(&r.go);
        unjoined += end_rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        /* the body either ran entirely before the discard or found its graph gone */
        if (end_rc != CUDA_ERROR_STREAM_CAPTURE_UNJOINED ||
            (r.body_rc != CUDA_SUCCESS && r.body_rc != CUDA_ERROR_ILLEGAL_STATE)) {
            bad++;
            if (!first[0])
                snprintf(first, sizeof first, "round %d: parent end %d, body %d", round, (int)end_rc,
                         (int)r.body_rc);
        }
        cucap_builder_destroy(p);
        cucap_builder_destroy(r.body);
    }
    report(bad == 0, "a body ended while its parent's end discards the graph: %d rounds, %d UNJOINED, no crash%s%s",
           BODY_ROUNDS, unjoined, first[0] ? "; " : "", first);
}

/* ---------------------------------------------------------------- main */


static int load_driver(void);

static int child_main(const char *name)
{
    if (load_driver() <= 0)
        return 2;
    cucap_set_warning_handler(quiet, NULL);
    signal(SIGSEGV, SIG_DFL);
    start_watchdog();
    if (strcmp(name, "raw-invalidator") == 0) {
        raw_beside_invalidator();
        return 0;
    }
    if (strcmp(name, "library-invalidator") == 0) {
        tests = 0;
        capturing_threads(BESIDE_INVALIDATOR, 0, "16 fresh threads beside a thread invalidating their captures");
        return 0;
    }
    return 2;
}

static int load_driver(void)
{
    cucap_error *err = NULL;
    CUresult rc;
#ifdef STRESS_GPU
    const char *required = getenv("CUCAPTURE_REQUIRE_GPU");

    unsetenv("CUCAPTURE_DRIVER");
    if ((rc = cucap_init(&err)) != CUDA_SUCCESS) {
        if (!(required && strcmp(required, "1") == 0)) {
            printf("1..0 # SKIP no usable CUDA GPU: %s\n", cucap_error_message(err));
            cucap_error_free(err);
            return 0;
        }
        printf("Bail out! CUCAPTURE_REQUIRE_GPU=1 but the GPU is unusable: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return -1;
    }
#else
    const char *sim = getenv("CUCAPTURE_TEST_SIM");

    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0 || (rc = cucap_init(&err)) != CUDA_SUCCESS) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) cannot be loaded: %s\n",
               err ? cucap_error_message(err) : "CUCAPTURE_TEST_SIM is not set");
        cucap_error_free(err);
        return -1;
    }
#endif
    return 1;
}

int main(int argc, char **argv)
{
    CUcontext ctx = NULL;
    CUdeviceptr memory = 0;
    int loaded;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    crash_report_install();
    printf("TAP version 13\n");
    if ((loaded = load_driver()) <= 0)
        return loaded < 0;
    cucap_set_warning_handler(quiet, NULL);
    start_watchdog();
    capturing_threads(BESIDE_NOTHING, 0, "16 fresh threads in global mode");
    capturing_threads(BESIDE_POOLS, 0, "16 fresh threads beside pool setup");
    capturing_threads(BESIDE_POOLS, 1, "16 fresh threads, each resetting one builder, beside pool setup");
    capturing_threads(BESIDE_POOLS, 2, "16 fresh threads, each resetting one builder with kept forks, beside pool "
                                       "setup");
    invalidator_scenarios(argv[0]);
    D.cuDevicePrimaryCtxRetain(&ctx, 0);
    D.cuCtxSetCurrent(ctx);
    D.cuMemAlloc(&memory, 4096);
    D.cuCtxSetCurrent(NULL);
    body_against_discarded_parent(memory);
    D.cuCtxSetCurrent(ctx);
    D.cuMemFree(memory);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(0);
    printf("1..%d\n", tests);
    return 0;
}
