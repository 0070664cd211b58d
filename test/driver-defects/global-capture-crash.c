/* A stand-alone reproducer, in raw CUDA driver API code (no libcucapture),
 * of a crash inside libcuda: while several threads run global-mode stream
 * captures, one more thread, in the default global capture mode with the
 * primary context current, calls the driver outside any capture.
 *
 * Each run is a process of its own (a crash takes only that run down); the
 * parent reports how each ended.  See README in this folder.
 *
 *   global-capture-crash [--call query|alloc|endcapture|all] [--threads N]
 *                        [--seconds S] [--runs R]
 *
 * Exit status: 1 when a run crashed (the defect reproduced), 0 when every
 * run completed, 77 when there is no usable GPU, 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum call { CALL_QUERY, CALL_ALLOC, CALL_ENDCAPTURE, CALL_COUNT };
static const char *const call_names[CALL_COUNT] = { "query", "alloc", "endcapture" };
static const char *const call_descriptions[CALL_COUNT] = {
    "cuStreamQuery(CU_STREAM_LEGACY)",
    "cuMemAlloc + cuMemFree (the free in relaxed mode)",
    "cuStreamEndCapture on a stream of its own that is not capturing",
};

struct child_args {
    enum call call;
    int threads;
    double seconds;
};

static atomic_int stop;
static pthread_barrier_t ready;   /* every thread set up before any capture begins */
static atomic_long captures, invalidated, outside_calls;
static CUcontext primary;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void check(CUresult rc, const char *what)
{
    const char *name = NULL;

    if (rc == CUDA_SUCCESS)
        return;
    cuGetErrorName(rc, &name);
    fprintf(stderr, "%s failed: %s\n", what, name ? name : "?");
    exit(3);
}

/* Global-mode captures of a fork/join of two memsets, ended and destroyed,
 * until told to stop. */
static void *capturing(void *arg)
{
    CUstream origin, fork;
    CUevent forked, joined;
    CUdeviceptr d;

    (void)arg;
    check(cuCtxSetCurrent(primary), "cuCtxSetCurrent");
    check(cuMemAlloc(&d, 4096), "cuMemAlloc");
    check(cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(cuStreamCreate(&fork, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(cuEventCreate(&forked, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(cuEventCreate(&joined, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    pthread_barrier_wait(&ready);
    while (!atomic_load(&stop)) {
        CUgraph g = NULL;
        if (cuStreamBeginCapture(origin, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
            continue;
        cuMemsetD8Async(d, 1, 2048, origin);
        cuEventRecord(forked, origin);
        cuStreamWaitEvent(fork, forked, 0);
        cuMemsetD8Async(d + 2048, 2, 2048, fork);
        cuEventRecord(joined, fork);
        cuStreamWaitEvent(origin, joined, 0);
        if (cuStreamEndCapture(origin, &g) == CUDA_SUCCESS && g)
            cuGraphDestroy(g);
        else
            atomic_fetch_add(&invalidated, 1);
        atomic_fetch_add(&captures, 1);
    }
    return NULL;
}

/* The thread outside the captures: global mode (the default), the primary
 * context current. */
static void *timer(void *arg);

static void outside(const struct child_args *a)
{
    enum call call = a->call;
    pthread_t stopper;
    CUstream own;

    check(cuCtxSetCurrent(primary), "cuCtxSetCurrent");
    check(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    pthread_barrier_wait(&ready);
    pthread_create(&stopper, NULL, timer, (void *)a);
    while (!atomic_load(&stop)) {
        CUdeviceptr d = 0;
        CUgraph g = NULL;
        switch (call) {
        case CALL_QUERY:
            cuStreamQuery(CU_STREAM_LEGACY);
            break;
        case CALL_ALLOC:
            if (cuMemAlloc(&d, 256) == CUDA_SUCCESS) {
                CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
                cuThreadExchangeStreamCaptureMode(&mode);
                cuMemFree(d);
                cuThreadExchangeStreamCaptureMode(&mode);
            }
            break;
        default:
            cuStreamEndCapture(own, &g);
            break;
        }
        atomic_fetch_add(&outside_calls, 1);
    }
    pthread_join(stopper, NULL);
}

static void *timer(void *arg)
{
    const struct child_args *a = arg;
    struct timespec t = { (time_t)a->seconds, (long)((a->seconds - (double)(time_t)a->seconds) * 1e9) };

    nanosleep(&t, NULL);
    atomic_store(&stop, 1);
    return NULL;
}

static int child(const struct child_args *a)
{
    pthread_t threads[64];
    CUdevice dev;
    int i;

    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
    pthread_barrier_init(&ready, NULL, (unsigned)a->threads + 1);
    for (i = 0; i < a->threads; i++)
        pthread_create(&threads[i], NULL, capturing, NULL);
    outside(a);   /* starts the timer once every thread is ready */
    for (i = 0; i < a->threads; i++)
        pthread_join(threads[i], NULL);
    printf("%ld captures (%ld invalidated), %ld outside calls\n", atomic_load(&captures), atomic_load(&invalidated),
           atomic_load(&outside_calls));
    return 0;
}

/* One run: this program again, as a child, its one line read back. */
static int run(const char *self, const struct child_args *a, int index)
{
    char threads[16], seconds[32], line[256] = "";
    int fds[2], status = 0;
    double start = now();
    ssize_t n;
    pid_t pid;

    snprintf(threads, sizeof threads, "%d", a->threads);
    snprintf(seconds, sizeof seconds, "%g", a->seconds);
    if (pipe(fds) != 0 || (pid = fork()) < 0) {
        perror("fork");
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl(self, self, "--child", call_names[a->call], "--threads", threads, "--seconds", seconds, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    n = read(fds[0], line, sizeof line - 1);
    line[n > 0 ? n : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    printf("run %d, %s: ", index, call_descriptions[a->call]);
    if (WIFSIGNALED(status)) {
        printf("CRASHED: %s after %.1f s\n", strsignal(WTERMSIG(status)), now() - start);
        return 1;
    }
    printf("completed (exit %d): %s\n", WEXITSTATUS(status), line);
    return WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void describe_driver(int threads)
{
    char name[128] = "?", version[256] = "";
    int v = 0;
    CUdevice dev;
    FILE *f;

    cuDriverGetVersion(&v);
    if (cuDeviceGet(&dev, 0) == CUDA_SUCCESS)
        cuDeviceGetName(name, sizeof name, dev);
    if ((f = fopen("/proc/driver/nvidia/version", "r"))) {
        if (fgets(version, sizeof version, f))
            version[strcspn(version, "\n")] = '\0';
        fclose(f);
    }
    printf("device 0: %s; CUDA driver API %d.%d; %s\n", name, v / 1000, v % 1000 / 10,
           version[0] ? version : "kernel module version unknown");
    printf("%d threads capturing in global mode, one more thread calling the driver outside them\n", threads);
}

int main(int argc, char **argv)
{
    struct child_args a = { CALL_COUNT, 8, 10.0 };
    int runs = 6, is_child = 0, crashed = 0, failed = 0, i, c;

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--child")) {
            is_child = 1;
        } else if (strcmp(arg, "--call") && strcmp(arg, "--threads") && strcmp(arg, "--seconds") &&
                   strcmp(arg, "--runs")) {
            fprintf(stderr, "usage: %s [--call query|alloc|endcapture|all] [--threads N] [--seconds S] [--runs R]\n",
                    argv[0]);
            return 2;
        }
        if (!value)
            return 2;
        i++;
        if (!strcmp(arg, "--child") || !strcmp(arg, "--call")) {
            for (c = 0; c < CALL_COUNT && strcmp(value, call_names[c]); c++)
                ;
            if (c == CALL_COUNT && strcmp(value, "all"))
                return 2;
            a.call = (enum call)c;
        } else if (!strcmp(arg, "--threads")) {
            a.threads = atoi(value);
        } else if (!strcmp(arg, "--seconds")) {
            a.seconds = atof(value);
        } else {
            runs = atoi(value);
        }
    }
    if (a.threads < 1 || a.threads > 64 || a.seconds <= 0 || runs < 1)
        return 2;
    if (is_child)
        return a.call == CALL_COUNT ? 2 : child(&a);
    if (cuInit(0) != CUDA_SUCCESS) {
        printf("SKIP: no usable CUDA GPU (cuInit failed)\n");
        return 77;
    }
    describe_driver(a.threads);
    for (c = 0; c < CALL_COUNT; c++) {
        struct child_args one = a;
        if (a.call != CALL_COUNT && (int)a.call != c)
            continue;
        one.call = (enum call)c;
        for (i = 1; i <= runs; i++) {
            int r = run(argv[0], &one, i);
            crashed += r > 0;
            failed += r < 0;
        }
    }
    printf("%s: %d crashed run(s), %d run(s) that failed otherwise\n",
           crashed ? "REPRODUCED" : "not reproduced", crashed, failed);
    fflush(stdout);
    return crashed ? 1 : 0;
}
