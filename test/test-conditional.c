/* Conditional nodes, on the simulated driver and on the GPU: each type
 * selects the right body, invalidated bodies never crash and are refused
 * at complete until captured again, unused handles, nesting, teardown in
 * every order. */
#include <criterion/criterion.h>
#include <limits.h>
#include <string.h>

#include "backend.h"
#include "held-work.h"

BACKEND_SUITES(cond, 120);

#define SPAN 64

struct fixture {
    cucap_builder *parent;
    CUdeviceptr d;
    CUstream s;
};

static struct fixture start(CUstreamCaptureMode mode)
{
    struct fixture f;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &f.parent, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemAlloc(&f.d, 4 * SPAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(f.d, 0, 4 * SPAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    f.s = new_stream();
    cr_assert_eq(cucap_builder_begin(f.parent, mode, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return f;
}

/* Capture a memset of `value` into span `span` on body b. */
static void fill_body(cucap_builder *b, CUdeviceptr d, int span, unsigned char value, CUstreamCaptureMode mode)
{
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_get_kind(b), CUCAP_BUILDER_BODY);
    cr_assert_eq(cucap_builder_begin(b, mode, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemsetD8Async(d + (CUdeviceptr)span * SPAN, value, SPAN, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
}

/* End the parent, complete, launch and return the first byte of each span. */
static void finish(struct fixture *f, unsigned char spans[4])
{
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char host[4 * SPAN];
    int i;

    cr_assert_eq(cucap_builder_end(f->parent, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(f->parent, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, f->s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(f->s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, f->d, sizeof host), CUDA_SUCCESS);
    for (i = 0; i < 4; i++) {
        spans[i] = host[i * SPAN];
        cr_assert_eq(host[i * SPAN + SPAN - 1], spans[i], "span %d is not uniform", i);
    }
    cucap_exec_destroy(exec);
}

static void done(struct fixture *f)
{
    cucap_builder_destroy(f->parent);
    D.cuMemFree(f->d);
    D.cuStreamDestroy(f->s);
}

static void run_if(unsigned int value, unsigned char expect)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h;
    cucap_builder *then_body = NULL;
    unsigned char spans[4];

    cr_assert_eq(cucap_builder_create_condition(f.parent, value, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &then_body, NULL), CUDA_SUCCESS);
    fill_body(then_body, f.d, 0, 0xa1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    /* the parent keeps capturing after the node */
    cr_assert_eq(D.cuMemsetD8Async(f.d + 3 * SPAN, 0x33, SPAN, cucap_builder_stream(f.parent)), CUDA_SUCCESS);
    finish(&f, spans);
    cr_assert_eq(spans[0], expect);
    cr_assert_eq(spans[3], 0x33);
    cucap_builder_destroy(then_body);
    done(&f);
}

BACKEND_TEST(cond, if_true_runs_the_body) { run_if(1, 0xa1); }

static double now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The driver's destroy of an executable graph with conditional nodes
 * waits for its launches in flight (measured on the H100); the library's
 * does not: it destroys the graph at a later call, once they are done. */
BACKEND_TEST(cond, a_destroy_with_launches_held_returns_at_once)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    long execs_before = on_simulator() ? sim_live("exec") : 0;
    CUgraphConditionalHandle h;
    cucap_builder *then_body = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char host[SPAN];
    struct held gate;
    const char *call;
    CUstream other = new_stream();
    double t0, destroy_ms, release_ms;
    long waits;

    held_init(&gate);
    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &then_body, NULL), CUDA_SUCCESS);
    fill_body(then_body, f.d, 0, 0xa1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(D.cuLaunchHostFunc(cucap_builder_stream(f.parent), gate.fn, gate.data), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(f.parent, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, f.s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, other, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamQuery(f.s), CUDA_ERROR_NOT_READY, "the launch is not held");
    t0 = now_ms();
    cucap_exec_destroy(exec);
    destroy_ms = now_ms() - t0;
    t0 = now_ms();
    cucap_release_cached();
    release_ms = now_ms() - t0;
    waits = held_waits(&call);
    held_release(&gate);
    cr_assert_eq(D.cuStreamSynchronize(f.s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(other), CUDA_SUCCESS);
    cr_assert_eq(waits, 0, "%ld calls waited for the held launches, the last %s", waits, call);
    cr_assert_not(gate.gpu.timed_out, "a call waited for the held launches (destroy %.1f ms, release %.1f ms)",
                  destroy_ms, release_ms);
    cr_assert_eq(D.cuMemcpyDtoH(host, f.d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[0], 0xa1, "the held launches ran the body");
    cucap_release_cached();     /* the launches are done: the graph goes now */
    if (on_simulator())
        cr_assert_eq(sim_live("exec"), execs_before, "the executable graph was destroyed once its launches were done");
    cucap_builder_destroy(then_body);
    D.cuStreamDestroy(other);
    done(&f);
}
BACKEND_TEST(cond, if_false_skips_the_body) { run_if(0, 0x00); }

static void run_if_else(unsigned int value)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_RELAXED);
    CUgraphConditionalHandle h;
    cucap_builder *then_body = NULL, *else_body = NULL;
    unsigned char spans[4];

    cr_assert_eq(cucap_builder_create_condition(f.parent, value, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if_else(f.parent, h, &then_body, &else_body, NULL), CUDA_SUCCESS);
    fill_body(then_body, f.d, 0, 0xb1, CU_STREAM_CAPTURE_MODE_RELAXED);
    fill_body(else_body, f.d, 1, 0xb2, CU_STREAM_CAPTURE_MODE_RELAXED);
    finish(&f, spans);
    cr_assert_eq(spans[0], value ? 0xb1 : 0x00);
    cr_assert_eq(spans[1], value ? 0x00 : 0xb2);
    cucap_builder_destroy(else_body);
    cucap_builder_destroy(then_body);
    done(&f);
}

BACKEND_TEST(cond, if_else_takes_then_when_true) { run_if_else(7); }
BACKEND_TEST(cond, if_else_takes_else_when_false) { run_if_else(0); }

#if CUDA_VERSION < 12080
/* Headers older than CUDA 12.8 do not name SWITCH nodes: compiled out. */
BACKEND_TEST(cond, switch_needs_a_build_with_cuda_12_8_headers)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CUgraphConditionalHandle h;
    cucap_builder *bodies[3] = { NULL, NULL, NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_switch(f.parent, h, 3, bodies, &err), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "CUDA 12.8 or newer headers"), "%s", cucap_error_message(err));
    cr_assert_null(bodies[0]);
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS, "a refused switch leaves the capture intact");
    done(&f);
}
#else
BACKEND_TEST(cond, switch_selects_each_body_and_none_out_of_range)
{
    unsigned int value;

    for (value = 0; value <= 3; value++) {
        struct fixture f = start(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        CUgraphConditionalHandle h;
        cucap_builder *bodies[3] = { NULL, NULL, NULL };
        unsigned char spans[4];
        int i;

        cr_assert_eq(cucap_builder_create_condition(f.parent, value, 1, &h, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_switch(f.parent, h, 3, bodies, NULL), CUDA_SUCCESS);
        for (i = 0; i < 3; i++)
            fill_body(bodies[i], f.d, i, (unsigned char)(0xc0 + i), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        finish(&f, spans);
        for (i = 0; i < 3; i++)
            cr_assert_eq(spans[i], (unsigned)i == value ? 0xc0 + i : 0, "value %u, span %d: %#x", value, i, spans[i]);
        for (i = 0; i < 3; i++)
            cucap_builder_destroy(bodies[i]);
        done(&f);
    }
}
#endif

BACKEND_TEST(cond, while_with_zero_runs_nothing)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h;
    cucap_builder *body = NULL;
    unsigned char spans[4];

    cr_assert_eq(cucap_builder_create_condition(f.parent, 0, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_while(f.parent, h, &body, NULL), CUDA_SUCCESS);
    fill_body(body, f.d, 2, 0xd1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    finish(&f, spans);
    cr_assert_eq(spans[2], 0);
    cucap_builder_destroy(body);
    done(&f);
}

BACKEND_TEST(cond, a_body_may_split_and_join)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h;
    cucap_builder *body = NULL, *fork = NULL;
    unsigned char spans[4];

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split(body, 2, &fork, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(f.d, 0x11, SPAN, cucap_builder_stream(body)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(f.d + SPAN, 0x22, SPAN, cucap_builder_stream(fork)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ body, fork }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS);
    finish(&f, spans);
    cr_assert_eq(spans[0], 0x11);
    cr_assert_eq(spans[1], 0x22);
    cucap_builder_destroy(fork);
    cucap_builder_destroy(body);
    done(&f);
}

/* ---------------------------------------------------------------- invalidated bodies */

static void invalidated_body(CUstreamCaptureMode mode, int parent_first)
{
    struct fixture f = start(mode);
    CUgraphConditionalHandle h;
    cucap_builder *body = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char host[SPAN];

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, mode, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(f.d, 0xe1, SPAN, cucap_builder_stream(body)), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(body)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (parent_first)
        cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, &err), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_get_state(body), CUCAP_BUILDER_INVALIDATED);
    cucap_error_free(err);
    err = NULL;
    if (!parent_first)
        cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);

    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_null(exec);
    cr_assert_not_null(strstr(cucap_error_message(err), "body 0 of the IF node added by cucap_builder_if"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;

    /* the body graph is untouched: capture the body again, then the parent runs it */
    fill_body(body, f.d, 0, 0xe2, mode);
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, f.s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(f.s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, f.d, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(host[0], 0xe2);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    done(&f);
}

BACKEND_TEST(cond, invalidated_body_body_first_global) { invalidated_body(CU_STREAM_CAPTURE_MODE_GLOBAL, 0); }
BACKEND_TEST(cond, invalidated_body_parent_first_global) { invalidated_body(CU_STREAM_CAPTURE_MODE_GLOBAL, 1); }
BACKEND_TEST(cond, invalidated_body_body_first_thread_local) { invalidated_body(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 0); }
BACKEND_TEST(cond, invalidated_body_parent_first_thread_local) { invalidated_body(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1); }
BACKEND_TEST(cond, invalidated_body_body_first_relaxed) { invalidated_body(CU_STREAM_CAPTURE_MODE_RELAXED, 0); }
BACKEND_TEST(cond, invalidated_body_parent_first_relaxed) { invalidated_body(CU_STREAM_CAPTURE_MODE_RELAXED, 1); }

BACKEND_TEST(cond, a_body_still_capturing_blocks_complete)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_RELAXED);
    CUgraphConditionalHandle h;
    cucap_builder *body = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "still capturing"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, NULL), CUDA_SUCCESS);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    done(&f);
}

/* ---------------------------------------------------------------- handles, nesting, states */

BACKEND_TEST(cond, an_unattached_handle_fails_complete_with_a_reason)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(f.d, 1, SPAN, cucap_builder_stream(f.parent)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(exec);
    cr_assert_not_null(strstr(cucap_error_message(err), "no conditional node uses it"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    done(&f);
}

BACKEND_TEST(cond, nested_conditionals_in_a_body_are_refused_clearly)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h, inner = 0;
    cucap_builder *body = NULL, *nested = NULL, *fork = NULL;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(body, 1, 1, &inner, &err), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "nested"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_if(body, h, &nested, NULL), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_null(nested);
    cr_assert_eq(cucap_builder_split(body, 2, &fork, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_while(fork, h, &nested, NULL), CUDA_ERROR_NOT_SUPPORTED, "forks of a body too");
    cr_assert_eq(cucap_builder_join((cucap_builder *const[]){ body, fork }, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS, "refusals leave the body capture intact");
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(fork);
    cucap_builder_destroy(body);
    done(&f);
}

BACKEND_TEST(cond, conditional_calls_need_an_active_capture)
{
    cucap_builder *b = NULL, *body = NULL, *bodies[2];
    CUgraphConditionalHandle h = 0;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create_condition(b, 0, 0, &h, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "not actively capturing"));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_if(b, h, &body, NULL), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(cucap_builder_switch(b, h, 0, bodies, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_if(b, h, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_create_condition(b, 0, 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cucap_builder_create_condition(b, 0, 0, &h, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "invalidated"));
    cucap_error_free(err);
    cucap_builder_destroy(b);
}

/* ---------------------------------------------------------------- teardown in every order */

BACKEND_TEST(cond, teardown_in_every_order)
{
    static const int orders[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
    int o, i;

    for (o = 0; o < 6; o++) {
        struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
        CUgraphConditionalHandle h;
        cucap_builder *bodies[2] = { NULL, NULL };
        cucap_graph *g = NULL, *body_graph = NULL;

        cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_if_else(f.parent, h, &bodies[0], &bodies[1], NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_graph(bodies[1], &body_graph, NULL), CUDA_SUCCESS, "a body graph exists at once");
        cr_assert_not_null(cucap_graph_handle(body_graph));
        fill_body(bodies[0], f.d, 0, 0x5a, CU_STREAM_CAPTURE_MODE_GLOBAL);
        cr_assert_eq(cucap_builder_begin(bodies[1], CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        /* bodies[1] is left capturing: destroying it ends it */
        cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_graph(f.parent, &g, NULL), CUDA_SUCCESS);
        for (i = 0; i < 3; i++) {
            int what = orders[o][i];
            if (what == 0) {
                cucap_builder_destroy(f.parent);
                f.parent = NULL;
            } else {
                cucap_builder_destroy(bodies[what - 1]);
            }
        }
        cr_assert_not_null(cucap_graph_handle(g), "the graph reference keeps the hierarchy alive");
        cucap_graph_unref(body_graph);
        cucap_graph_unref(g);
        done(&f);
    }
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* ---------------------------------------------------------------- node types a body may not hold */

static void noop_host(void *p)
{
    (void)p;
}

/* The H200 refuses to instantiate a parent whose body holds a host-function
 * node (INVALID_VALUE, NODE_OPERATION_NOT_SUPPORTED): the body's end says
 * so, naming the body and the node type, and the body can be captured
 * again without it. */
BACKEND_TEST(cond, a_body_with_a_host_function_node_is_refused_at_its_end)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_RELAXED);
    CUgraphConditionalHandle h;
    cucap_builder *body = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    unsigned char spans[4];

    cr_assert_eq(cucap_builder_create_condition(f.parent, 1, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(f.parent, h, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuLaunchHostFunc(cucap_builder_stream(body), noop_host, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(body, &err), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "body 0 of the IF node"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "host function node"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "body 0"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    fill_body(body, f.d, 0, 0x21, CU_STREAM_CAPTURE_MODE_RELAXED);   /* again, with allowed work */
    cr_assert_eq(cucap_builder_complete(f.parent, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, f.s, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(f.s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(spans, f.d, 1), CUDA_SUCCESS);
    cr_assert_eq(spans[0], 0x21);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(body);
    done(&f);
}

BACKEND_TEST(cond, a_switch_count_beyond_the_limit_says_so)
{
    struct fixture f = start(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle h;
    cucap_builder *bodies[1] = { NULL };
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_condition(f.parent, 0, 1, &h, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_switch(f.parent, h, (size_t)UINT_MAX + 1, bodies, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(strstr(cucap_error_message(err), "at least one"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "65536"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_null(bodies[0]);
    cr_assert_eq(cucap_builder_end(f.parent, NULL), CUDA_SUCCESS, "a refused switch leaves the capture intact");
    done(&f);
}
