/* The mutex locks the library takes in an update-loop iteration (K = 2:
 * begin, a split in two, a memset on each stream, join_forks, end,
 * complete_into, launch), uncontended, for the three loops of
 * bench/update-loop: a builder per capture, one builder reset, and reset
 * with kept forks.  It counts the calls of pthread_mutex_lock made from
 * libcucapture (this program's own definition stands in front of the C
 * library's for every shared object, and hands each call on), on the
 * simulated driver (the count is the library's, whatever the driver),
 * and fails when a loop takes more than MOST (bench/RESULTS.md).  Not
 * for ThreadSanitizer, whose own pthread_mutex_lock it would stand in
 * front of.  A plain TAP program. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE                  /* dladdr, RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#define WARM 50
#define COUNTED 100
#define MOST 1                       /* the graph lock at the join; the split and the end of a capture no other
                                      * thread can reach take none, nor the registry (its quick slots) */

static atomic_long library_locks;
static void *library_base;   /* the load address of libcucapture, known once loaded */

int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*next)(pthread_mutex_t *);
    Dl_info info;

    if (!next)
        *(void **)&next = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (library_base && dladdr(__builtin_return_address(0), &info) && info.dli_fbase == library_base)
        atomic_fetch_add_explicit(&library_locks, 1, memory_order_relaxed);
    return next(m);
}

enum loop { A_BUILDER_PER_CAPTURE, ONE_BUILDER_RESET, RESET_KEPT_FORKS };

static const char *const loop_names[] = { "a builder per capture", "one builder reset", "reset, kept forks" };

static struct {
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemsetD8Async_v3020 cuMemsetD8Async;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
} D;

static int failed(const char *what, cucap_error *err)
{
    printf("Bail out! %s: %s\n", what, cucap_error_message(err));
    cucap_error_free(err);
    return 1;
}

/* One iteration of loop; *b is the builder kept between iterations. */
static int iteration(enum loop loop, cucap_builder **b, cucap_builder **fork, CUdeviceptr d, cucap_exec **exec)
{
    cucap_error *err = NULL;
    int kept = loop == RESET_KEPT_FORKS;

    if (loop == A_BUILDER_PER_CAPTURE ? cucap_builder_create(0, b, &err) != CUDA_SUCCESS
                                      : cucap_builder_reset(*b, &err) != CUDA_SUCCESS)
        return failed("create or reset", err);
    if (cucap_builder_begin(*b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err) != CUDA_SUCCESS ||
        (kept ? cucap_builder_split_kept(*b, 2, fork, &err) : cucap_builder_split(*b, 2, fork, &err)) != CUDA_SUCCESS)
        return failed("begin or split", err);
    if (D.cuMemsetD8Async(d, 1, 64, cucap_builder_stream(*b)) != CUDA_SUCCESS ||
        D.cuMemsetD8Async(d + 64, 2, 64, cucap_builder_stream(*fork)) != CUDA_SUCCESS) {
        printf("Bail out! cuMemsetD8Async failed\n");
        return 1;
    }
    if (cucap_builder_join_forks(*b, &err) != CUDA_SUCCESS || cucap_builder_end(*b, &err) != CUDA_SUCCESS ||
        cucap_builder_complete_into(*b, NULL, exec, NULL, &err) != CUDA_SUCCESS ||
        cucap_exec_launch(*exec, NULL, &err) != CUDA_SUCCESS)
        return failed("join, end, complete or launch", err);
    if (!kept) {
        cucap_builder_destroy(*fork);
        *fork = NULL;
    }
    if (loop == A_BUILDER_PER_CAPTURE) {
        cucap_builder_destroy(*b);
        *b = NULL;
    }
    return 0;
}

int main(void)
{
    cucap_builder *b = NULL, *fork = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    CUdeviceptr d = 0;
    Dl_info info;
    enum loop loop;
    long before;
    double each;
    int i;

    if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) is not set\n");
        return 1;
    }
    if (cucap_init(&err) != CUDA_SUCCESS)
        return failed("cucap_init", err);
    *(void **)&D.cuCtxSetCurrent = (void *)cucap_driver_entry_point("cuCtxSetCurrent");
    *(void **)&D.cuMemAlloc = (void *)cucap_driver_entry_point("cuMemAlloc");
    *(void **)&D.cuMemFree = (void *)cucap_driver_entry_point("cuMemFree");
    *(void **)&D.cuMemsetD8Async = (void *)cucap_driver_entry_point("cuMemsetD8Async");
    *(void **)&D.cuStreamSynchronize = (void *)cucap_driver_entry_point("cuStreamSynchronize");
    if (!dladdr((void *)cucap_init, &info)) {
        printf("Bail out! libcucapture's address is unknown\n");
        return 1;
    }
    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return failed("cucap_builder_create", err);
    if (!D.cuCtxSetCurrent || D.cuCtxSetCurrent(cucap_builder_context(b)) != CUDA_SUCCESS ||
        D.cuMemAlloc(&d, 128) != CUDA_SUCCESS) {
        printf("Bail out! no device memory\n");
        return 1;
    }
    cucap_builder_destroy(b);
    b = NULL;
    printf("1..3\n");
    for (loop = A_BUILDER_PER_CAPTURE; loop <= RESET_KEPT_FORKS; loop++) {
        if (loop != A_BUILDER_PER_CAPTURE && cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
            return failed("cucap_builder_create", err);
        for (i = 0; i < WARM; i++)
            if (iteration(loop, &b, &fork, d, &exec))
                return 1;
        before = atomic_load(&library_locks);
        library_base = info.dli_fbase;
        for (i = 0; i < COUNTED; i++)
            if (iteration(loop, &b, &fork, d, &exec))
                return 1;
        library_base = NULL;
        each = (double)(atomic_load(&library_locks) - before) / COUNTED;
        printf("%s %d - an update-loop iteration (K=2), %s, takes %.2f mutex locks of the library's (at most %d)\n",
               each <= MOST ? "ok" : "not ok", (int)loop + 1, loop_names[loop], each, MOST);
        cucap_builder_destroy(fork);
        cucap_builder_destroy(b);
        fork = b = NULL;
    }
    (void)D.cuStreamSynchronize(NULL);
    cucap_exec_destroy(exec);
    (void)D.cuMemFree(d);
    cucap_release_cached();
    return 0;
}
