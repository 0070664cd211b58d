/* The first captures of a fresh process: create, begin, a split in two,
 * a memset on each stream, join, end, complete, launch, synchronize and
 * destroy, six times in turn, through the library and by hand-written
 * driver calls.  Each side runs in processes of its own (this program
 * runs itself with --lib or --raw), alternating, ROUNDS each; the driver
 * is initialised before the first capture is timed.  Prints, for each of
 * the six captures, the median microseconds of each side and their ratio.
 * Run on a GPU: bench/first-captures [rounds]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#define CAPTURES 6

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static struct {
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemsetD8Async_v3020 cuMemsetD8Async;
    PFN_cuStreamCreate_v2000 cuStreamCreate;
    PFN_cuStreamDestroy_v4000 cuStreamDestroy;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
    PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture;
    PFN_cuStreamEndCapture_v10000 cuStreamEndCapture;
    PFN_cuEventCreate_v2000 cuEventCreate;
    PFN_cuEventRecord_v2000 cuEventRecord;
    PFN_cuEventDestroy_v4000 cuEventDestroy;
    PFN_cuStreamWaitEvent_v3020 cuStreamWaitEvent;
    PFN_cuGraphInstantiateWithParams_v12000 cuGraphInstantiateWithParams;
    PFN_cuGraphLaunch_v10000 cuGraphLaunch;
    PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy;
    PFN_cuGraphDestroy_v10000 cuGraphDestroy;
} drv;
#define RESOLVE(name) (drv.name = (void *)cucap_driver_entry_point(#name)) != NULL

static int resolve(void)
{
    return RESOLVE(cuCtxSetCurrent) && RESOLVE(cuDevicePrimaryCtxRetain) && RESOLVE(cuMemAlloc) &&
           RESOLVE(cuMemsetD8Async) && RESOLVE(cuStreamCreate) && RESOLVE(cuStreamDestroy) &&
           RESOLVE(cuStreamSynchronize) && RESOLVE(cuStreamBeginCapture) && RESOLVE(cuStreamEndCapture) &&
           RESOLVE(cuEventCreate) && RESOLVE(cuEventRecord) && RESOLVE(cuEventDestroy) &&
           RESOLVE(cuStreamWaitEvent) && RESOLVE(cuGraphInstantiateWithParams) && RESOLVE(cuGraphLaunch) &&
           RESOLVE(cuGraphExecDestroy) && RESOLVE(cuGraphDestroy);
}

static int capture_lib(CUdeviceptr d)
{
    cucap_builder *b = NULL, *fork = NULL, *both[2];
    cucap_exec *exec = NULL;
    int ok;

    ok = cucap_builder_create(0, &b, NULL) == CUDA_SUCCESS &&
         cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) == CUDA_SUCCESS &&
         cucap_builder_split(b, 2, &fork, NULL) == CUDA_SUCCESS &&
         drv.cuMemsetD8Async(d, 1, 32, cucap_builder_stream(b)) == CUDA_SUCCESS &&
         drv.cuMemsetD8Async(d + 32, 2, 32, cucap_builder_stream(fork)) == CUDA_SUCCESS;
    both[0] = b;
    both[1] = fork;
    ok = ok && cucap_builder_join(both, 2, NULL, NULL) == CUDA_SUCCESS &&
         cucap_builder_end(b, NULL) == CUDA_SUCCESS && cucap_builder_complete(b, NULL, &exec, NULL) == CUDA_SUCCESS &&
         cucap_exec_launch(exec, cucap_builder_stream(b), NULL) == CUDA_SUCCESS &&
         drv.cuStreamSynchronize(cucap_builder_stream(b)) == CUDA_SUCCESS;
    cucap_exec_destroy(exec);
    cucap_builder_destroy(fork);
    cucap_builder_destroy(b);
    return ok;
}

static int capture_raw(CUdeviceptr d)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    CUstream s = NULL, f = NULL;
    CUevent split = NULL, join = NULL;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    int ok;

    memset(&ip, 0, sizeof ip);
    ok = drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
         drv.cuStreamCreate(&f, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
         drv.cuEventCreate(&split, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
         drv.cuEventCreate(&join, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
         drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS &&
         drv.cuEventRecord(split, s) == CUDA_SUCCESS && drv.cuStreamWaitEvent(f, split, 0) == CUDA_SUCCESS &&
         drv.cuMemsetD8Async(d, 1, 32, s) == CUDA_SUCCESS && drv.cuMemsetD8Async(d + 32, 2, 32, f) == CUDA_SUCCESS &&
         drv.cuEventRecord(join, f) == CUDA_SUCCESS && drv.cuStreamWaitEvent(s, join, 0) == CUDA_SUCCESS &&
         drv.cuStreamEndCapture(s, &g) == CUDA_SUCCESS && drv.cuGraphInstantiateWithParams(&exec, g, &ip) == CUDA_SUCCESS &&
         drv.cuGraphLaunch(exec, s) == CUDA_SUCCESS && drv.cuStreamSynchronize(s) == CUDA_SUCCESS;
    if (exec)
        drv.cuGraphExecDestroy(exec);
    if (g)
        drv.cuGraphDestroy(g);
    if (split)
        drv.cuEventDestroy(split);
    if (join)
        drv.cuEventDestroy(join);
    if (f)
        drv.cuStreamDestroy(f);
    if (s)
        drv.cuStreamDestroy(s);
    return ok;
}

/* One fresh process's six captures, printed as six numbers. */
static int child(int lib)
{
    CUcontext ctx = NULL;
    CUdeviceptr d = 0;
    double t[CAPTURES];
    int i;

    if (cucap_init(NULL) != CUDA_SUCCESS || !resolve() || drv.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        drv.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || drv.cuMemAlloc(&d, 64) != CUDA_SUCCESS)
        return 1;
    for (i = 0; i < CAPTURES; i++) {
        double t0 = now_us();
        if (!(lib ? capture_lib(d) : capture_raw(d)))
            return 1;
        t[i] = now_us() - t0;
    }
    for (i = 0; i < CAPTURES; i++)
        printf("%s%.1f", i ? " " : "", t[i]);
    printf("\n");
    return 0;
}

/* Run this program as a child with arg; its six times into t. */
static int run_child(const char *self, const char *arg, double *t)
{
    char cmd[4096];
    FILE *p;
    int i, ok;

    snprintf(cmd, sizeof cmd, "'%s' %s", self, arg);
    if (!(p = popen(cmd, "r")))
        return 0;
    ok = fscanf(p, "%lf %lf %lf %lf %lf %lf", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5]) == CAPTURES;
    ok = pclose(p) == 0 && ok;
    for (i = 0; ok && i < CAPTURES; i++)
        ok = t[i] > 0;
    return ok;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int rounds, r, i;
    double (*lib)[CAPTURES], (*raw)[CAPTURES], col_l[100], col_r[100];

    if (argc == 2 && !strcmp(argv[1], "--lib"))
        return child(1);
    if (argc == 2 && !strcmp(argv[1], "--raw"))
        return child(0);
    rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 100 || !(lib = calloc((size_t)rounds, sizeof *lib)) ||
        !(raw = calloc((size_t)rounds, sizeof *raw)))
        return 2;
    for (r = 0; r < rounds; r++)
        if (!run_child(argv[0], "--lib", lib[r]) || !run_child(argv[0], "--raw", raw[r])) {
            fprintf(stderr, "first-captures: a child process failed\n");
            return 1;
        }
    printf("capture  library us  raw us  ratio   (medians of %d fresh processes each)\n", rounds);
    for (i = 0; i < CAPTURES; i++) {
        double ml, mr;
        for (r = 0; r < rounds; r++) {
            col_l[r] = lib[r][i];
            col_r[r] = raw[r][i];
        }
        ml = median_of(col_l, rounds);
        mr = median_of(col_r, rounds);
        printf("%7d  %10.1f  %6.1f  %5.2f\n", i + 1, ml, mr, ml / mr);
    }
    free(lib);
    free(raw);
    return 0;
}
