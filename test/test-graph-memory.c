/* The device's graph memory in public (cucap_device_graph_memory,
 * cucap_device_graph_memory_trim), on the simulated driver and on the GPU:
 * from a fresh thread with no context, the figures of a graph whose
 * allocation node ran, the trim that gives the reserve back, and neither
 * call invalidating another thread's global capture. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

BACKEND_SUITES(graph_memory, 60);

#define ALLOCATION ((size_t)8 << 20)

struct reading {
    CUdevice dev;
    cucap_graph_memory m;
    CUresult rc, trim_rc;
    CUcontext current_after;
};

/* Read, then trim, on a thread with no context current. */
static void *read_and_trim(void *p)
{
    struct reading *r = p;

    r->rc = cucap_device_graph_memory(r->dev, &r->m, NULL);
    r->trim_rc = cucap_device_graph_memory_trim(r->dev, NULL);
    D.cuCtxGetCurrent(&r->current_after);
    return NULL;
}

static struct reading read_from_a_fresh_thread(void)
{
    struct reading r;
    pthread_t t;

    memset(&r, 0, sizeof r);
    r.current_after = (CUcontext)(uintptr_t)1;
    cr_assert_eq(pthread_create(&t, NULL, read_and_trim, &r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(r.rc, CUDA_SUCCESS, "%s", cucap_result_name(r.rc));
    cr_assert_eq(r.trim_rc, CUDA_SUCCESS, "%s", cucap_result_name(r.trim_rc));
    cr_assert_null(r.current_after, "the thread was left with a context current");
    return r;
}

/* An executable graph whose capture allocated ALLOCATION bytes and freed
 * them, launched once. */
static cucap_exec *allocating_graph_launched(CUstream s)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    cucap_pool *pool = NULL;
    CUdeviceptr tmp = 0;

    cr_assert_eq(cucap_device_pool(0, &pool, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(pool, ALLOCATION, cucap_builder_stream(b), &tmp, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(tmp, 1, ALLOCATION, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_free(pool, tmp, cucap_builder_stream(b), &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_exec_launch(exec, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    return exec;
}

BACKEND_TEST(graph_memory, a_graph_that_allocated_shows_and_a_trim_gives_its_reserve_back)
{
    CUstream s = new_stream();
    struct reading before = read_from_a_fresh_thread(), during, after;
    cucap_exec *exec = allocating_graph_launched(s);
    cucap_graph_memory m;

    cr_assert_eq(cucap_device_graph_memory(0, &m, NULL), CUDA_SUCCESS);
    cr_assert_geq(m.reserved, ALLOCATION, "%llu bytes reserved with a graph of %zu alive",
                  (unsigned long long)m.reserved, ALLOCATION);
    cr_assert_geq(m.reserved_high, m.reserved);
    cr_assert_geq(m.used_high, ALLOCATION, "the allocation ran: the high mark of use %llu",
                  (unsigned long long)m.used_high);
    cr_assert_geq(m.used_high, m.used);
    during = read_from_a_fresh_thread();   /* the trim keeps what the live graph holds */
    cr_assert_geq(during.m.reserved, ALLOCATION);
    cucap_exec_destroy(exec);
    after = read_from_a_fresh_thread();    /* reads, then trims with no graph left */
    cr_assert_eq(cucap_device_graph_memory(0, &m, NULL), CUDA_SUCCESS);
    cr_assert_eq(m.reserved, 0, "%llu bytes still reserved after the trim", (unsigned long long)m.reserved);
    cr_assert_geq(m.reserved_high, ALLOCATION, "the high mark stays");
    cr_assert_leq(before.m.reserved, m.reserved_high);
    (void)after;
    D.cuStreamDestroy(s);
}

struct capturer {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int phase;                       /* 1: capturing, 2: the other thread read and trimmed */
    CUresult end_rc;
};

static void *capture_globally(void *p)
{
    struct capturer *c = p;
    cucap_builder *b = NULL;

    if (cucap_builder_create(0, &b, NULL) != CUDA_SUCCESS ||
        cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) != CUDA_SUCCESS) {
        c->end_rc = CUDA_ERROR_UNKNOWN;
        cucap_builder_destroy(b);
        pthread_mutex_lock(&c->lock);
        c->phase = 1;
        pthread_cond_broadcast(&c->changed);
        pthread_mutex_unlock(&c->lock);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    c->phase = 1;
    pthread_cond_broadcast(&c->changed);
    while (c->phase != 2)
        pthread_cond_wait(&c->changed, &c->lock);
    pthread_mutex_unlock(&c->lock);
    c->end_rc = cucap_builder_end(b, NULL);
    cucap_builder_destroy(b);
    return NULL;
}

/* Another thread's global capture stays valid while this thread reads and
 * trims: both calls run in relaxed mode. */
BACKEND_TEST(graph_memory, reading_and_trimming_leave_a_global_capture_of_another_thread_alone)
{
    struct capturer c;
    cucap_graph_memory m;
    pthread_t t;

    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.changed, NULL);
    cr_assert_eq(pthread_create(&t, NULL, capture_globally, &c), 0);
    pthread_mutex_lock(&c.lock);
    while (c.phase != 1)
        pthread_cond_wait(&c.changed, &c.lock);
    pthread_mutex_unlock(&c.lock);
    cr_assert_eq(cucap_device_graph_memory(0, &m, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_graph_memory_trim(0, NULL), CUDA_SUCCESS);
    pthread_mutex_lock(&c.lock);
    c.phase = 2;
    pthread_cond_broadcast(&c.changed);
    pthread_mutex_unlock(&c.lock);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.end_rc, CUDA_SUCCESS, "the global capture ended with %s", cucap_result_name(c.end_rc));
}

BACKEND_TEST(graph_memory, bad_input_is_refused)
{
    cucap_graph_memory m;
    cucap_error *err = NULL;
    int count = 0;

    memset(&m, 0x5a, sizeof m);
    cr_assert_eq(cucap_device_graph_memory(0, NULL, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_device_graph_memory: out is NULL"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(D.cuDeviceGetCount(&count), CUDA_SUCCESS);
    cr_assert_eq(cucap_device_graph_memory(count, &m, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_device_graph_memory"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(m.used, 0x5a5a5a5a5a5a5a5aull, "out was written on failure");
    cr_assert_eq(cucap_device_graph_memory_trim(-1, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_device_graph_memory_trim"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
}
