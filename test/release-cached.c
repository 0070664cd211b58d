/* A program that creates and frees every kind of library object from
 * several fresh threads at once (builders, forks, kept forks, graph
 * references, executable graphs, pools, parameter blocks), then calls
 * cucap_release_cached(): afterwards the driver holds no stream, event,
 * graph, executable graph, pool or allocation of the library's and no
 * retain of a primary context, and under LeakSanitizer (a build with
 * --enable-sanitizers) no memory of the library's is left, with no
 * suppression for it.
 *
 * Built twice: release-cached-sim on the simulated driver, which counts
 * every kind of object, and release-cached-gpu on the real one (skipped
 * without a GPU, failed without one under CUCAPTURE_REQUIRE_GPU=1), where
 * cuDevicePrimaryCtxGetState says whether a retain is left and
 * compute-sanitizer's leak check sees the rest.  A plain TAP program. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cucapture.h>
#include <cudaTypedefs.h>

#include "sim/sim.h"

/* The simulator's count of live objects of a kind (the library loaded it). */
static long sim_live(const char *kind)
{
    void *sim = dlopen(getenv("CUCAPTURE_TEST_SIM"), RTLD_NOW | RTLD_NOLOAD);
    cudasim_live_fn live = sim ? (cudasim_live_fn)dlsym(sim, "cudasim_live") : NULL;
    long n = live ? live(kind) : -1;

    if (sim)
        dlclose(sim);
    return n;
}

#define THREADS 6
#define ROUNDS 20

static int tests, failures;

static void check(int ok, const char *what)
{
    printf("%s %d - %s\n", ok ? "ok" : "not ok", ++tests, what);
    failures += !ok;
}

struct work {
    int index;
    CUresult rc;
    char message[512];
};

static CUresult fail(struct work *w, cucap_error *err, const char *doing)
{
    snprintf(w->message, sizeof w->message, "thread %d, %s: %s", w->index, doing,
             err ? cucap_error_message(err) : "(no error object)");
    w->rc = err ? cucap_error_code(err) : CUDA_ERROR_UNKNOWN;
    cucap_error_free(err);
    return w->rc;
}

/* A block of 256 KiB launched twice: its values go through pinned
 * buffers of the library's. */
static CUresult large_values(struct work *w, int round)
{
    static _Thread_local unsigned char values[256 << 10];
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 0;
    CUresult rc;

    memset(values, round, sizeof values);
    if ((rc = cucap_builder_create(0, &b, &err)) != CUDA_SUCCESS ||
        (rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err)) != CUDA_SUCCESS ||
        (rc = cucap_builder_params(b, sizeof values, &block, &err)) != CUDA_SUCCESS ||
        (rc = cucap_builder_end(b, &err)) != CUDA_SUCCESS ||
        (rc = cucap_builder_complete(b, NULL, &exec, &err)) != CUDA_SUCCESS ||
        (rc = cucap_exec_launch_params(exec, values, sizeof values, cucap_builder_stream(b), &err)) != CUDA_SUCCESS ||
        (rc = cucap_exec_launch_params(exec, values, sizeof values, cucap_builder_stream(b), &err)) != CUDA_SUCCESS)
        fail(w, err, "a round's large values");
    else
        cucap_error_free(err);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    return rc;
}

/* One round: a capture with a split, a kept split and a parameter block,
 * its graph referenced, instantiated and launched, a pool allocation on a
 * fork; everything destroyed in an order of its own. */
static CUresult round_of(struct work *w, int round)
{
    cucap_builder *b = NULL, *forks[2] = { NULL, NULL }, *kept[2] = { NULL, NULL }, *all[3];
    cucap_graph *g = NULL;
    cucap_exec *exec = NULL;
    cucap_pool *pool = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 0, scratch = 0;
    int value = round;

    if (cucap_builder_create(0, &b, &err) != CUDA_SUCCESS)
        return fail(w, err, "cucap_builder_create");
    if (cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err) != CUDA_SUCCESS ||
        cucap_builder_params(b, sizeof value, &block, &err) != CUDA_SUCCESS ||
        cucap_builder_split(b, 3, forks, &err) != CUDA_SUCCESS)
        goto failed;
    if (cucap_pool_create(0, NULL, &pool, &err) != CUDA_SUCCESS ||
        cucap_pool_alloc(pool, 256, cucap_builder_stream(forks[0]), &scratch, &err) != CUDA_SUCCESS ||
        cucap_pool_free(pool, scratch, cucap_builder_stream(forks[0]), &err) != CUDA_SUCCESS)
        goto failed;
    all[0] = b;
    all[1] = forks[0];
    all[2] = forks[1];
    if (cucap_builder_join(all, 3, NULL, &err) != CUDA_SUCCESS ||
        cucap_builder_split_kept(b, 3, kept, &err) != CUDA_SUCCESS ||
        cucap_builder_join_forks(b, &err) != CUDA_SUCCESS ||
        cucap_builder_end(b, &err) != CUDA_SUCCESS ||
        cucap_builder_graph(b, &g, &err) != CUDA_SUCCESS ||
        cucap_graph_instantiate(g, NULL, &exec, &err) != CUDA_SUCCESS)
        goto failed;
    if (cucap_exec_launch_params(exec, &value, sizeof value, cucap_builder_stream(b), &err) != CUDA_SUCCESS ||
        large_values(w, round) != CUDA_SUCCESS)
        goto failed;
    if (round % 2) {   /* the builder first, then what it handed out */
        cucap_builder_destroy(b);
        cucap_graph_unref(g);
        cucap_exec_destroy(exec);
    } else {
        cucap_exec_destroy(exec);
        cucap_graph_unref(g);
        cucap_builder_destroy(b);
    }
    cucap_builder_destroy(kept[0]);
    cucap_builder_destroy(kept[1]);
    cucap_builder_destroy(forks[0]);
    cucap_builder_destroy(forks[1]);
    cucap_pool_destroy(pool);
    return CUDA_SUCCESS;
failed:
    fail(w, err, "a round");
    cucap_exec_destroy(exec);
    cucap_graph_unref(g);
    cucap_builder_destroy(kept[0]);
    cucap_builder_destroy(kept[1]);
    cucap_builder_destroy(forks[0]);
    cucap_builder_destroy(forks[1]);
    cucap_builder_destroy(b);
    cucap_pool_destroy(pool);
    return w->rc;
}

static void CUDA_CB no_op(void *p)
{
    (void)p;
}

/* A free that takes a while on the library's thread and then calls the
 * library, which keeps a context hold again. */
static void slow_free_calling_the_library(void *p)
{
    struct timespec pause = { 0, 200 * 1000000L };
    cucap_graph_memory m;

    (void)p;
    nanosleep(&pause, NULL);
    (void)cucap_device_graph_memory(0, &m, NULL);
}

/* A capture's graph with such a free, let go of just before
 * cucap_release_cached: the free runs during the release. */
static int free_during_release(void)
{
    cucap_builder *b = NULL;

    if (cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS ||
        cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL) != CUDA_SUCCESS ||
        cucap_builder_host_callback(b, no_op, NULL, slow_free_calling_the_library, NULL) != CUDA_SUCCESS ||
        cucap_builder_end(b, NULL) != CUDA_SUCCESS) {
        cucap_builder_destroy(b);
        return 0;
    }
    cucap_builder_destroy(b);   /* its graph, and the callback's data, go */
    return 1;
}

static void *worker(void *p)
{
    struct work *w = p;
    int round;

    for (round = 0; round < ROUNDS && w->rc == CUDA_SUCCESS; round++)
        (void)round_of(w, round);
    return NULL;
}

/* A thread that keeps objects for its next captures (the free lists'
 * per-thread slots) while cucap_release_cached runs in another, then
 * captures again: the release freed what the thread kept, and the
 * thread is handed none of it afterwards (AddressSanitizer sees a use
 * after free otherwise). */
struct alive {
    struct work w;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int step;                        /* 1: its first rounds ran; 2: the release ran */
};

static void *alive_across_release(void *p)
{
    struct alive *a = p;

    (void)round_of(&a->w, 0);
    (void)round_of(&a->w, 1);
    pthread_mutex_lock(&a->lock);
    a->step = 1;
    pthread_cond_broadcast(&a->changed);
    while (a->step < 2)
        pthread_cond_wait(&a->changed, &a->lock);
    pthread_mutex_unlock(&a->lock);
    if (a->w.rc == CUDA_SUCCESS)
        (void)round_of(&a->w, 2);
    if (a->w.rc == CUDA_SUCCESS)
        (void)round_of(&a->w, 3);
    return NULL;
}

static void release_beside_a_live_thread(void)
{
    struct alive a;
    pthread_t t;
    int started;

    memset(&a, 0, sizeof a);
    a.w.index = THREADS;
    pthread_mutex_init(&a.lock, NULL);
    pthread_cond_init(&a.changed, NULL);
    started = pthread_create(&t, NULL, alive_across_release, &a) == 0;
    pthread_mutex_lock(&a.lock);
    while (started && a.step < 1)
        pthread_cond_wait(&a.changed, &a.lock);
    pthread_mutex_unlock(&a.lock);
    cucap_release_cached();   /* the thread waits outside the library */
    pthread_mutex_lock(&a.lock);
    a.step = 2;
    pthread_cond_broadcast(&a.changed);
    pthread_mutex_unlock(&a.lock);
    if (started)
        pthread_join(t, NULL);
    if (a.w.rc != CUDA_SUCCESS)
        printf("# %s\n", a.w.message);
    check(started && a.w.rc == CUDA_SUCCESS,
          "a thread that captured, waiting while cucap_release_cached runs in another, captures again afterwards");
    pthread_cond_destroy(&a.changed);
    pthread_mutex_destroy(&a.lock);
}

static int load_driver(int on_gpu)
{
    cucap_error *err = NULL;
    const char *required = getenv("CUCAPTURE_REQUIRE_GPU"), *sim = getenv("CUCAPTURE_TEST_SIM");

    if (on_gpu)
        unsetenv("CUCAPTURE_DRIVER");
    else if (!sim || setenv("CUCAPTURE_DRIVER", sim, 1) != 0) {
        printf("Bail out! the simulated driver (CUCAPTURE_TEST_SIM) is not set\n");
        return -1;
    }
    if (cucap_init(&err) == CUDA_SUCCESS)
        return 1;
    if (on_gpu && !(required && strcmp(required, "1") == 0)) {
        printf("1..0 # SKIP no usable CUDA GPU: %s\n", cucap_error_message(err));
        cucap_error_free(err);
        return 0;
    }
    printf("Bail out! %s cannot be used: %s\n", on_gpu ? "the GPU (CUCAPTURE_REQUIRE_GPU=1)" : "the simulated driver",
           cucap_error_message(err));
    cucap_error_free(err);
    return -1;
}

int main(void)
{
#ifdef RELEASE_CACHED_GPU
    const int on_gpu = 1;
#else
    const int on_gpu = 0;
#endif
    struct work w[THREADS];
    pthread_t t[THREADS];
    int i, loaded, all_ran = 1, started[THREADS];

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((loaded = load_driver(on_gpu)) <= 0)
        return loaded == 0 ? 0 : 1;
    printf("1..%d\n", on_gpu ? 4 : 11);
    memset(w, 0, sizeof w);
    for (i = 0; i < THREADS; i++) {
        w[i].index = i;
        if (!(started[i] = pthread_create(&t[i], NULL, worker, &w[i]) == 0))
            w[i].rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (i = 0; i < THREADS; i++)
        if (started[i])
            pthread_join(t[i], NULL);
    for (i = 0; i < THREADS; i++)
        if (w[i].rc != CUDA_SUCCESS) {
            all_ran = 0;
            printf("# %s\n", w[i].message[0] ? w[i].message : "a thread could not start");
        }
    check(all_ran && free_during_release(),
          "6 fresh threads created and destroyed every kind of object, 20 rounds each; a host callback's free "
          "that calls the library runs during the release");
    cucap_release_cached();
    if (on_gpu) {
        PFN_cuDevicePrimaryCtxGetState_v7000 get_state =
            (PFN_cuDevicePrimaryCtxGetState_v7000)cucap_driver_entry_point("cuDevicePrimaryCtxGetState");
        unsigned int flags = 0;
        int active = -1;
        check(get_state && get_state(0, &flags, &active) == CUDA_SUCCESS && active == 0,
              "after cucap_release_cached no retain of device 0's primary context is left");
    } else {
        static const char *const kinds[] = { "stream", "event", "graph", "exec", "pool", "allocation",
                                             "pinned host memory", "primary context retain" };
        char what[128];
        for (i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++) {
            long live = sim_live(kinds[i]);
            snprintf(what, sizeof what, "after cucap_release_cached the driver holds no %s of the library's (%ld)",
                     kinds[i], live);
            check(live == 0, what);
        }
    }
    release_beside_a_live_thread();
    /* the library works again after it, and gives back again */
    {
        struct work again = { 0 };
        again.index = -1;
        (void)round_of(&again, 0);
        cucap_release_cached();
        check(again.rc == CUDA_SUCCESS, "a round after cucap_release_cached runs, and the call again gives back");
        if (again.rc != CUDA_SUCCESS)
            printf("# %s\n", again.message);
    }
    return failures ? 1 : 0;
}
