/* Host callbacks that own their data (cucap_builder_host_callback), on the
 * simulated driver and on the GPU: the callback runs at each launch, its
 * data is given back exactly once, on the library's thread (where a CUDA
 * call is allowed), once the last graph or executable graph that can run
 * it is gone and its last launch finished (held launches included); also
 * when the capture is invalidated or abandoned, when an update replaces
 * it, after an eager run, and at once when the call is refused; from a
 * fresh thread with no context current, with a free that calls back into
 * the library. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "held-work.h"

BACKEND_SUITES(host_callback, 60);

struct owned {
    atomic_int calls, freed;
    atomic_int free_could_call_cuda;
    pthread_t caller;
    atomic_int freed_on_caller;
};

static void owned_init(struct owned *o)
{
    memset(o, 0, sizeof *o);
    o->caller = pthread_self();
}

static void CUDA_CB count_call(void *p)
{
    atomic_fetch_add(&((struct owned *)p)->calls, 1);
}

static void free_owned(void *p)
{
    struct owned *o = p;
    cucap_graph_memory m;

    if (cucap_device_graph_memory(0, &m, NULL) == CUDA_SUCCESS)   /* a CUDA call is allowed here */
        atomic_fetch_add(&o->free_could_call_cuda, 1);
    if (pthread_equal(pthread_self(), o->caller))
        atomic_fetch_add(&o->freed_on_caller, 1);
    atomic_fetch_add(&o->freed, 1);
}

static void pause_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&t, NULL);
}

/* The data given back `times` times (within 5 s), never more. */
static void expect_freed(struct owned *o, int times, const char *when)
{
    int waited;

    for (waited = 0; atomic_load(&o->freed) < times && waited < 5000; waited += 5)
        pause_ms(5);
    pause_ms(on_simulator() ? 0 : 20);
    cr_assert_eq(atomic_load(&o->freed), times, "%s: the data was given back %d times, not %d", when,
                 atomic_load(&o->freed), times);
    cr_assert_eq(atomic_load(&o->free_could_call_cuda), times, "%s: a free could not call CUDA", when);
    cr_assert_eq(atomic_load(&o->freed_on_caller), 0, "%s: freed on the caller's thread", when);
}

/* The same for a free that cucap_release_cached may run on its caller's
 * thread (it runs the frees due). */
static void expect_freed_by_release(struct owned *o, int times, const char *when)
{
    int waited;

    for (waited = 0; atomic_load(&o->freed) < times && waited < 5000; waited += 5)
        pause_ms(5);
    cr_assert_eq(atomic_load(&o->freed), times, "%s: the data was given back %d times, not %d", when,
                 atomic_load(&o->freed), times);
    cr_assert_eq(atomic_load(&o->free_could_call_cuda), times, "%s: a free could not call CUDA", when);
}

static void expect_not_freed(struct owned *o, const char *when)
{
    pause_ms(on_simulator() ? 0 : 50);
    cr_assert_eq(atomic_load(&o->freed), 0, "%s: the data was given back already", when);
}

/* A builder that captured the callback on o between two memsets. */
static cucap_builder *captured(struct owned *o, CUdeviceptr out)
{
    cucap_builder *b = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(out, 1, 8, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_host_callback(b, count_call, o, free_owned, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(out, 2, 8, cucap_builder_stream(b)), CUDA_SUCCESS);
    return b;
}

static cucap_exec *completed(cucap_builder *b)
{
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return exec;
}

BACKEND_TEST(host_callback, runs_at_each_launch_and_its_data_goes_with_the_last_graph)
{
    struct owned o;
    CUstream s = new_stream();
    cucap_graph *g = NULL, *copy = NULL;
    cucap_exec *exec;
    cucap_builder *b;
    CUdeviceptr out;
    int i;

    owned_init(&o);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    b = captured(&o, out);
    exec = completed(b);
    for (i = 0; i < 3; i++)
        cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(atomic_load(&o.calls), 3, "the callback ran %d times in 3 launches", atomic_load(&o.calls));
    cr_assert_eq(cucap_builder_graph(b, &g, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_graph_clone(g, &copy, NULL), CUDA_SUCCESS);
    cucap_graph_unref(g);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    expect_not_freed(&o, "a copy of the graph is alive");
    cucap_graph_unref(copy);
    expect_freed(&o, 1, "the copy destroyed");
    D.cuMemFree(out);
    D.cuStreamDestroy(s);
}

BACKEND_TEST(host_callback, its_data_outlives_a_held_launch_of_an_executable_graph_destroyed)
{
    struct owned o;
    struct held gate;
    CUstream s = new_stream();
    cucap_exec *exec;
    cucap_builder *b;
    CUdeviceptr out;

    owned_init(&o);
    held_init(&gate);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    b = captured(&o, out);
    exec = completed(b);
    cucap_builder_destroy(b);
    cr_assert_eq(D.cuLaunchHostFunc(s, gate.fn, gate.data), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    expect_not_freed(&o, "its launch is held");
    held_release(&gate);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    expect_freed(&o, 1, "the held launch finished");
    cr_assert_eq(atomic_load(&o.calls), 1);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held launch");
    D.cuMemFree(out);
    D.cuStreamDestroy(s);
}

BACKEND_TEST(host_callback, an_invalidated_or_abandoned_capture_gives_its_data_back)
{
    struct owned invalidated, abandoned;
    cucap_error *err = NULL;
    cucap_builder *b;
    CUdeviceptr out;

    owned_init(&invalidated);
    owned_init(&abandoned);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    b = captured(&invalidated, out);
    (void)D.cuStreamSynchronize(cucap_builder_stream(b));   /* refused in a capture, which it invalidates */
    cr_assert_neq(cucap_builder_end(b, &err), CUDA_SUCCESS, "the invalidated capture ended");
    cucap_error_free(err);
    cucap_builder_destroy(b);
    expect_freed(&invalidated, 1, "the invalidated capture");
    b = captured(&abandoned, out);
    cucap_builder_destroy(b);   /* never ended */
    expect_freed(&abandoned, 1, "the abandoned capture");
    cr_assert_eq(atomic_load(&invalidated.calls) + atomic_load(&abandoned.calls), 0);
    D.cuMemFree(out);
}

BACKEND_TEST(host_callback, an_update_hands_the_old_data_back)
{
    struct owned first, second;
    CUstream s = new_stream();
    cucap_error *err = NULL;
    cucap_builder *b1, *b2;
    cucap_exec *exec;
    CUdeviceptr out;

    owned_init(&first);
    owned_init(&second);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    b1 = captured(&first, out);
    exec = completed(b1);
    cucap_builder_destroy(b1);
    b2 = captured(&second, out);
    cr_assert_eq(cucap_builder_end(b2, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_update(exec, b2, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    expect_freed(&first, 1, "the executable graph updated to the second capture");
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(atomic_load(&second.calls), 1);
    cr_assert_eq(atomic_load(&first.calls), 0);
    cucap_builder_destroy(b2);
    expect_not_freed(&second, "the updated executable graph is alive");
    cucap_exec_destroy(exec);
    expect_freed(&second, 1, "the executable graph destroyed");
    D.cuMemFree(out);
    D.cuStreamDestroy(s);
}

/* A step whose capture the synchronize invalidates: the set runs it
 * eagerly, where the callback is a host function on the stream. */
static CUresult callback_then_synchronize(cucap_builder *b, void *user_data, cucap_error **err)
{
    CUresult rc = cucap_builder_host_callback(b, count_call, user_data, free_owned, err);

    if (rc == CUDA_SUCCESS)
        (void)D.cuStreamSynchronize(cucap_builder_stream(b));
    return rc;
}

BACKEND_TEST(host_callback, an_eager_run_calls_it_once_and_gives_its_data_back)
{
    struct owned o;
    cucap_graph_set_options opts;
    cucap_graph_set *set = NULL;
    cucap_run_kind kind;
    cucap_error *err = NULL;
    CUstream s = new_stream();
    int key = 1;

    owned_init(&o);
    memset(&opts, 0, sizeof opts);
    opts.capture_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    opts.budget_bytes = (size_t)64 << 20;
    cr_assert_eq(cucap_graph_set_create(0, &opts, &set, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_graph_set_run(set, &key, sizeof key, callback_then_synchronize, &o, NULL, 0, s, &kind, &err),
                 CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(kind, CUCAP_RUN_EAGER);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(atomic_load(&o.calls), 1, "the callback ran %d times", atomic_load(&o.calls));
    expect_freed(&o, 2, "the invalidated capture and the eager run");
    cucap_graph_set_destroy(set);
    D.cuStreamDestroy(s);
}

/* From a fresh thread with no context current: capture, launch, destroy;
 * the data's free calls back into the library, cucap_release_cached
 * included (on the library's own thread, which must not wait for itself). */
static atomic_int drained_from_free;

static void free_and_release_cached(void *p)
{
    cucap_release_cached();
    atomic_fetch_add(&drained_from_free, 1);
    free_owned(p);
}

struct fresh_run {
    struct owned *o;
    CUdeviceptr out;
    CUresult rc;
    CUcontext current_after;
};

static void *capture_from_a_fresh_thread(void *p)
{
    struct fresh_run *r = p;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;

    if ((r->rc = cucap_builder_create(0, &b, NULL)) == CUDA_SUCCESS &&
        (r->rc = cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL)) == CUDA_SUCCESS &&
        (r->rc = cucap_builder_host_callback(b, count_call, r->o, free_and_release_cached, NULL)) == CUDA_SUCCESS &&
        (r->rc = cucap_builder_end(b, NULL)) == CUDA_SUCCESS &&
        (r->rc = cucap_builder_complete(b, NULL, &exec, NULL)) == CUDA_SUCCESS)
        r->rc = cucap_exec_launch(exec, CU_STREAM_PER_THREAD, NULL);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuCtxGetCurrent(&r->current_after);
    return NULL;
}

BACKEND_TEST(host_callback, from_a_fresh_thread_whose_free_calls_back_into_the_library)
{
    struct owned o;
    struct fresh_run r = { &o, 0, CUDA_ERROR_UNKNOWN, NULL };
    pthread_t t;
    int waited;

    owned_init(&o);
    atomic_store(&drained_from_free, 0);
    cr_assert_eq(pthread_create(&t, NULL, capture_from_a_fresh_thread, &r), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(r.rc, CUDA_SUCCESS, "%s", cucap_result_name(r.rc));
    cr_assert_null(r.current_after, "the thread was left with a context current");
    for (waited = 0; atomic_load(&drained_from_free) < 1 && waited < 5000; waited += 5)
        pause_ms(5);
    cr_assert_eq(atomic_load(&drained_from_free), 1, "the free did not return from cucap_release_cached");
    expect_freed(&o, 1, "the graph and executable graph destroyed");
    cr_assert_eq(atomic_load(&o.calls), 1);
}

BACKEND_TEST(host_callback, a_refused_call_gives_the_data_back_at_once)
{
    struct owned o;
    cucap_builder *b = NULL, *body = NULL;
    CUgraphConditionalHandle c;
    cucap_error *err = NULL;

    owned_init(&o);
    cr_assert_eq(cucap_builder_host_callback(NULL, count_call, &o, free_owned, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_host_callback(b, NULL, &o, free_owned, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_host_callback(b, count_call, &o, free_owned, &err), CUDA_ERROR_ILLEGAL_STATE,
                 "a builder that is not capturing");
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(b, 1, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_host_callback(body, count_call, &o, free_owned, &err), CUDA_ERROR_ILLEGAL_STATE,
                 "a conditional body");
    cr_assert(strstr(cucap_error_message(err), "body") != NULL, "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(atomic_load(&o.freed), 4, "4 refusals gave the data back %d times", atomic_load(&o.freed));
    cr_assert_eq(atomic_load(&o.freed_on_caller), 4, "a refusal gives it back before it returns");
    cucap_builder_destroy(body);
    cucap_builder_destroy(b);
}

/* Changed by name (cucap_exec_set_host_callback): the executable graph
 * owns the new data; data it replaced goes once no launch can run it (at
 * its next change by name once the held launch finished), and the data it
 * owns when destroyed with a launch held goes once that launch finished;
 * the capture's own data goes with the graph. */
BACKEND_TEST(host_callback, data_set_by_name_goes_after_the_last_launch_that_can_run_it)
{
    struct owned captured_data, second, third, fourth, refused;
    struct held gate1, gate2;
    CUstream s = new_stream();
    cucap_error *err = NULL;
    cucap_exec *exec;
    cucap_builder *b;
    CUdeviceptr out;

    owned_init(&captured_data);
    owned_init(&second);
    owned_init(&third);
    owned_init(&fourth);
    owned_init(&refused);
    held_init(&gate1);
    held_init(&gate2);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_host_callback(b, count_call, &captured_data, free_owned, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_name_node(b, "callback", &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(out, 2, 8, cucap_builder_stream(b)), CUDA_SUCCESS);
    exec = completed(b);
    cucap_builder_destroy(b);
    cr_assert_eq(cucap_exec_set_host_callback(exec, "callback", count_call, &second, free_owned, &err), CUDA_SUCCESS,
                 "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(atomic_load(&second.calls), 2, "the data set by name ran %d times in 2 launches",
                 atomic_load(&second.calls));
    cr_assert_eq(atomic_load(&captured_data.calls), 0);
    /* replaced while a launch that can run it is held */
    cr_assert_eq(D.cuLaunchHostFunc(s, gate1.fn, gate1.data), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_set_host_callback(exec, "callback", count_call, &third, free_owned, &err), CUDA_SUCCESS,
                 "%s", cucap_error_message(err));
    expect_not_freed(&second, "a launch that can run it is held");
    held_release(&gate1);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(atomic_load(&second.calls), 3, "the held launch ran the data it was launched with");
    cr_assert_eq(cucap_exec_set_host_callback(exec, "callback", count_call, &fourth, free_owned, &err), CUDA_SUCCESS,
                 "%s", cucap_error_message(err));
    expect_freed(&second, 1, "the held launch finished");
    expect_freed(&third, 1, "replaced with no launch of it");
    /* a refusal gives its data back at once */
    cr_assert_eq(cucap_exec_set_host_callback(exec, "no such node", count_call, &refused, free_owned, &err),
                 CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(atomic_load(&refused.freed), 1, "a refused call kept its data");
    /* destroyed with a launch held */
    cr_assert_eq(D.cuLaunchHostFunc(s, gate2.fn, gate2.data), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(exec, s, NULL), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    expect_not_freed(&fourth, "its executable graph's launch is held");
    held_release(&gate2);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cucap_release_cached();   /* a sweep of the destroys left until launches finished; it runs the frees due */
    cr_assert_eq(atomic_load(&fourth.freed), 1, "the held launch finished: given back %d times",
                 atomic_load(&fourth.freed));
    cr_assert_eq(atomic_load(&fourth.free_could_call_cuda), 1);
    /* the driver lets go of the executable graph's user objects after its destroy, on a thread of its own */
    expect_freed_by_release(&captured_data, 1, "the graph and executable graph that held it destroyed");
    cr_assert_eq(atomic_load(&fourth.calls), 1);
    cr_assert_not(gate1.gpu.timed_out || gate2.gpu.timed_out, "a call waited for the held launch");
    D.cuMemFree(out);
    D.cuStreamDestroy(s);
}
