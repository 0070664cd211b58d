/* Parameter blocks: a graph captured once, launched again and again with
 * new values (cucap_builder_params, cucap_exec_launch_params), on the
 * simulated driver and on the GPU.  The values of one launch never change
 * what an earlier launch reads: queued on one stream, on several streams,
 * from several threads; the block outlives the graph while launches run;
 * every bad input is refused and changes nothing. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend.h"
#include "held-work.h"

BACKEND_SUITES(params, 120);
FAULT_BACKEND_SUITES(params, 120);
TestSuite(params_kernels_gpu, .init = gpu_setup, .fini = gpu_teardown, .timeout = 120);

struct values {
    uint32_t index;
    uint32_t check;
    uint64_t tag;
};

static uint32_t check_of(uint32_t i)
{
    return i * 2654435761u ^ 0x5bd1e995u;
}

/* A graph that copies its parameter block to out: captured once. */
struct replay {
    cucap_builder *b;
    cucap_exec *exec;
    CUdeviceptr block, out;
};

static struct replay capture_replay(size_t size)
{
    struct replay r = { NULL, NULL, 0, 0 };
    cucap_error *err = NULL;

    cr_assert_eq(D.cuMemAlloc(&r.out, size), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &r.b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(r.b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(r.b, size, &r.block, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_neq(r.block, 0);
    cr_assert_eq(D.cuMemcpyDtoDAsync(r.out, r.block, size, cucap_builder_stream(r.b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(r.b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(r.b, NULL, &r.exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_params_size(r.exec), size);
    return r;
}

static void release_replay(struct replay *r)
{
    cucap_exec_destroy(r->exec);
    cucap_builder_destroy(r->b);
    D.cuMemFree(r->out);
}

static void check_results(CUdeviceptr results, uint32_t n, uint32_t first)
{
    static struct values host[1000];
    uint32_t i;

    cr_assert_leq(n, 1000);
    cr_assert_eq(D.cuMemcpyDtoH(host, results, n * sizeof *host), CUDA_SUCCESS);
    for (i = 0; i < n; i++) {
        cr_assert_eq(host[i].index, first + i, "launch %u read index %u", i, host[i].index);
        cr_assert_eq(host[i].check, check_of(first + i), "launch %u read a torn value", i);
        cr_assert_eq(host[i].tag, 0x7a67000000000000ull + first + i);
    }
}

/* ---------------------------------------------------------------- launches in order */

/* 1,000 launches queued without a wait, each with its own values written
 * into one host variable that changes at once; after each launch, on the
 * same stream, what the graph copied out is kept: every launch read its
 * own values. */
BACKEND_TEST(params, a_thousand_launches_queued_each_reads_its_own_values)
{
    struct replay r = capture_replay(sizeof(struct values));
    CUstream s = new_stream();
    CUdeviceptr results = 0;
    cucap_error *err = NULL;
    struct values v;
    uint32_t i;

    cr_assert_eq(D.cuMemAlloc(&results, 1000 * sizeof v), CUDA_SUCCESS);
    for (i = 0; i < 1000; i++) {
        v.index = i;
        v.check = check_of(i);
        v.tag = 0x7a67000000000000ull + i;
        cr_assert_eq(cucap_exec_launch_params(r.exec, &v, sizeof v, s, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(D.cuMemcpyDtoDAsync(results + i * sizeof v, r.out, sizeof v, s), CUDA_SUCCESS);
    }
    memset(&v, 0xff, sizeof v);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_results(results, 1000, 0);
    /* a plain launch reads what the last one left (out cleared on s: a
     * memset on the legacy stream is not ordered with a non-blocking one,
     * and may even run after the launch) */
    cr_assert_eq(D.cuMemsetD8Async(r.out, 0, sizeof v, s), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch(r.exec, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemcpyDtoDAsync(results, r.out, sizeof v, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_results(results, 1, 999);
    D.cuMemFree(results);
    release_replay(&r);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Launches from four fresh threads at once, on one stream (each launch
 * and the copy of what it read kept together by the test's own lock) and
 * then each on a stream of its own. */
struct sharer {
    struct replay *r;
    CUstream shared, own;
    CUdeviceptr results;
    pthread_mutex_t *adjacent;
    pthread_barrier_t *phase;
    CUcontext ctx;
    uint32_t thread;
    CUresult rc;
    char why[256];
};

static void *share_launches(void *p)
{
    struct sharer *t = p;
    struct values v;
    uint32_t i, first = t->thread * 250;
    cucap_error *err = NULL;

    t->rc = D.cuCtxSetCurrent(t->ctx);   /* for the test's own copies; the launches need none */
    for (i = 0; i < 250 && t->rc == CUDA_SUCCESS; i++) {
        v.index = first + i;
        v.check = check_of(first + i);
        v.tag = 0x7a67000000000000ull + first + i;
        pthread_mutex_lock(t->adjacent);
        t->rc = cucap_exec_launch_params(t->r->exec, &v, sizeof v, t->shared, &err);
        if (t->rc == CUDA_SUCCESS)
            t->rc = D.cuMemcpyDtoDAsync(t->results + (first + i) * sizeof v, t->r->out, sizeof v, t->shared);
        pthread_mutex_unlock(t->adjacent);
    }
    pthread_barrier_wait(t->phase);   /* every copy of what the shared launches read is queued ... */
    if (t->rc == CUDA_SUCCESS)
        t->rc = D.cuStreamSynchronize(t->shared);   /* ... and done before the own-stream launches */
    for (i = 0; i < 250 && t->rc == CUDA_SUCCESS; i++) {
        v.index = first + i;
        v.check = check_of(first + i);
        v.tag = 0x7a67000000000000ull + first + i;
        t->rc = cucap_exec_launch_params(t->r->exec, &v, sizeof v, t->own, &err);
    }
    if (err)
        snprintf(t->why, sizeof t->why, "%s", cucap_error_message(err));
    cucap_error_free(err);
    return NULL;
}

BACKEND_TEST(params, launches_from_several_threads_at_once)
{
    struct replay r = capture_replay(sizeof(struct values));
    pthread_mutex_t adjacent = PTHREAD_MUTEX_INITIALIZER;
    pthread_barrier_t phase;
    CUcontext ctx = NULL;
    struct sharer t[4];
    pthread_t id[4];
    CUstream shared = new_stream();
    CUdeviceptr results = 0;
    struct values last;
    int i, found = 0;

    cr_assert_eq(D.cuMemAlloc(&results, 1000 * sizeof(struct values)), CUDA_SUCCESS);
    cr_assert_eq(pthread_barrier_init(&phase, NULL, 4), 0);
    cr_assert_eq(D.cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    for (i = 0; i < 4; i++) {
        t[i] = (struct sharer){ &r, shared, new_stream(), results, &adjacent, &phase, ctx, (uint32_t)i, CUDA_SUCCESS, "" };
        cr_assert_eq(pthread_create(&id[i], NULL, share_launches, &t[i]), 0);
    }
    for (i = 0; i < 4; i++)
        cr_assert_eq(pthread_join(id[i], NULL), 0);
    pthread_barrier_destroy(&phase);
    for (i = 0; i < 4; i++)
        cr_assert_eq(t[i].rc, CUDA_SUCCESS, "thread %d: %s", i, t[i].why);
    for (i = 0; i < 4; i++)
        cr_assert_eq(D.cuStreamSynchronize(t[i].own), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(shared), CUDA_SUCCESS);
    check_results(results, 1000, 0);
    /* the last launch of all left one thread's last values, whole */
    cr_assert_eq(D.cuMemcpyDtoH(&last, r.out, sizeof last), CUDA_SUCCESS);
    for (i = 0; i < 4; i++)
        found |= last.index == (uint32_t)i * 250 + 249 && last.check == check_of(last.index);
    cr_assert(found, "the graph's last read was %u/%#x", last.index, last.check);
    for (i = 0; i < 4; i++)
        cr_assert_eq(D.cuStreamDestroy(t[i].own), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(shared), CUDA_SUCCESS);
    D.cuMemFree(results);
    release_replay(&r);
}

/* The executable graph and its builder destroyed while 200 launches are
 * still queued: the block stays until the last one is done, and every one
 * reads its own values. */
BACKEND_TEST(params, the_graph_destroyed_while_launches_are_in_flight)
{
    struct replay r = capture_replay(sizeof(struct values));
    CUstream s = new_stream();
    CUdeviceptr results = 0;
    cucap_error *err = NULL;
    struct values v;
    uint32_t i;

    cr_assert_eq(D.cuMemAlloc(&results, 200 * sizeof v), CUDA_SUCCESS);
    for (i = 0; i < 200; i++) {
        v.index = i;
        v.check = check_of(i);
        v.tag = 0x7a67000000000000ull + i;
        cr_assert_eq(cucap_exec_launch_params(r.exec, &v, sizeof v, s, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(D.cuMemcpyDtoDAsync(results + i * sizeof v, r.out, sizeof v, s), CUDA_SUCCESS);
    }
    cucap_exec_destroy(r.exec);
    cucap_builder_destroy(r.b);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    check_results(results, 200, 0);
    D.cuMemFree(results);
    D.cuMemFree(r.out);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A builder reset for every capture gets the same block back for the same
 * size, so an executable graph updated from the new capture reads the
 * same address; another size is a new block, which complete_into takes. */
BACKEND_TEST(params, a_reset_builder_keeps_its_block_and_update_follows_it)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_completion how;
    cucap_error *err = NULL;
    CUdeviceptr block[3] = { 0, 0, 0 }, out = 0;
    CUstream s = new_stream();
    uint64_t wide[4] = { 1, 2, 3, 4 }, got[4];
    struct values v = { 7, 0, 0 };
    int round;

    v.check = check_of(7);
    cr_assert_eq(D.cuMemAlloc(&out, sizeof wide), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    for (round = 0; round < 3; round++) {
        size_t size = round < 2 ? sizeof v : sizeof wide;
        cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_params(b, size, &block[round], &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(D.cuMemcpyDtoDAsync(out, block[round], size, cucap_builder_stream(b)), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_complete_into(b, NULL, &exec, &how, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(cucap_exec_params_size(exec), size);
        if (round < 2) {
            v.index = (uint32_t)round;
            cr_assert_eq(cucap_exec_launch_params(exec, &v, sizeof v, s, &err), CUDA_SUCCESS, "%s",
                         cucap_error_message(err));
        } else {
            cr_assert_eq(cucap_exec_launch_params(exec, wide, sizeof wide, s, &err), CUDA_SUCCESS, "%s",
                         cucap_error_message(err));
        }
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemcpyDtoH(got, out, size), CUDA_SUCCESS);
        cr_assert_eq(memcmp(got, round < 2 ? (const void *)&v : (const void *)wide, size), 0, "round %d", round);
    }
    cr_assert_eq(block[1], block[0], "the same size: the same block");
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFree(out);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A destroyed builder that cucap_builder_create hands out again does not
 * hand its block on: the graphs of two builders made one after the other
 * read blocks of their own, and each launch reads its own values. */
BACKEND_TEST(params, a_builder_created_again_makes_a_block_of_its_own)
{
    cucap_exec *exec[2] = { NULL, NULL };
    cucap_error *err = NULL;
    CUdeviceptr block[2] = { 0, 0 }, out = 0;
    CUstream s = new_stream();
    struct values v[2] = { { 3, 0, 0 }, { 4, 0, 0 } }, got;
    int i;

    cr_assert_eq(D.cuMemAlloc(&out, 2 * sizeof got), CUDA_SUCCESS);
    for (i = 0; i < 2; i++) {
        cucap_builder *b = NULL;
        cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_params(b, sizeof v[i], &block[i], &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(D.cuMemcpyDtoDAsync(out + (CUdeviceptr)i * sizeof got, block[i], sizeof got,
                                         cucap_builder_stream(b)), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_complete(b, NULL, &exec[i], &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cucap_builder_destroy(b);   /* kept for the next create */
    }
    cr_assert_neq(block[1], block[0], "the second builder's capture read the first one's block");
    for (i = 0; i < 2; i++) {
        v[i].check = check_of(v[i].index);
        cr_assert_eq(cucap_exec_launch_params(exec[i], &v[i], sizeof v[i], s, &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
    }
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    for (i = 0; i < 2; i++) {
        cr_assert_eq(D.cuMemcpyDtoH(&got, out + (CUdeviceptr)i * sizeof got, sizeof got), CUDA_SUCCESS);
        cr_assert_eq(memcmp(&got, &v[i], sizeof got), 0, "graph %d", i);
        cucap_exec_destroy(exec[i]);
    }
    D.cuMemFree(out);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- refusals */

/* Every bad input is refused with a message and changes nothing: the
 * capture goes on, and the graph launches with its values afterwards. */
BACKEND_TEST(params, bad_inputs_are_refused_and_change_nothing)
{
    cucap_builder *b = NULL, *other = NULL, *body = NULL, *child = NULL;
    CUgraphConditionalHandle c;
    cucap_exec *exec = NULL, *plain = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 0, again = 1, out = 0;
    CUstream s = new_stream();
    struct values v = { 3, 0, 9 }, got;

    v.check = check_of(3);
    cr_assert_eq(D.cuMemAlloc(&out, sizeof v), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(NULL, 16, &block, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_params(b, 16, &block, &err), CUDA_ERROR_ILLEGAL_STATE, "not capturing yet");
    cr_assert_not_null(strstr(cucap_error_message(err), "NOT_STARTED"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(b, 16, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_params(b, 0, &block, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "of 0 bytes"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    /* no constant caps a block: more than the device holds is the driver's refusal */
    cr_assert_eq(cucap_builder_params(b, (size_t)1 << 50, &block, &err), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuMemAllocFromPoolAsync"), "%s", cucap_error_message(err));
    cr_assert_eq(block, 0);
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create_condition(b, 0, 1, &c, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_if(b, c, &body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(body, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(body, 16, &block, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "parent's capture"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_end(body, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(b, sizeof v, &block, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_params(b, sizeof v, &again, &err), CUDA_ERROR_ILLEGAL_STATE, "one block per capture");
    cr_assert_not_null(strstr(cucap_error_message(err), "one per capture"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(again, 0);
    /* a graph that makes a block is not embedded: nothing would fill it */
    cr_assert_eq(cucap_builder_create(0, &child, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(child, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(child, 8, &again, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(child, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_embed(b, child, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "parameter block"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture goes on");
    cr_assert_eq(D.cuMemcpyDtoDAsync(out, block, sizeof v, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(b, 16, &again, NULL), CUDA_ERROR_ILLEGAL_STATE, "ENDED");
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));

    cr_assert_eq(cucap_exec_launch_params(NULL, &v, sizeof v, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_exec_launch_params(exec, NULL, sizeof v, s, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_exec_launch_params(exec, &v, sizeof v - 1, s, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "15 bytes, the graph's parameter block 16"), "%s",
                       cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(cucap_builder_create(0, &other, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(other, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(out, 0, 1, cucap_builder_stream(other)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(other, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(other, NULL, &plain, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_params_size(plain), 0);
    cr_assert_eq(cucap_exec_params_size(NULL), 0);
    cr_assert_eq(cucap_exec_launch_params(plain, &v, sizeof v, s, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(strstr(cucap_error_message(err), "reads no parameter block"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    /* nothing was launched by the refusals: out is as the launch below leaves it */
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(cucap_exec_launch_params(exec, &v, sizeof v, s, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(&got, out, sizeof got), CUDA_SUCCESS);
    cr_assert_eq(memcmp(&got, &v, sizeof v), 0);
    cucap_exec_destroy(plain);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(child);
    cucap_builder_destroy(body);
    cucap_builder_destroy(other);
    cucap_builder_destroy(b);
    D.cuMemFree(out);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A capture that another call invalidated still makes its block (the
 * allocation is no stream work); the capture ends INVALIDATED, refuses to
 * be instantiated, and the block goes with it. */
BACKEND_TEST(params, a_capture_invalidated_while_it_makes_a_block)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 0;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(cucap_builder_params(b, 64, &block, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, NULL), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_null(exec);
    cucap_builder_destroy(b);
    if (on_simulator())
        cr_assert_eq(sim_live_settled("graph"), 0);
}

/* The allocation of the block fails: nothing is made, the capture goes on
 * and ends with a graph that reads no block. */
FAULT_BACKEND_TEST(params, a_failed_allocation_makes_nothing_and_the_capture_goes_on)
{
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 1, out = 0;

    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(set_rules("cuMemAllocFromPoolAsync:1:CUDA_ERROR_OUT_OF_MEMORY"), 0);
    cr_assert_eq(cucap_builder_params(b, 8, &block, &err), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuMemAllocFromPoolAsync"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = NULL;
    cr_assert_eq(set_rules(""), 0);
    cr_assert_eq(block, 0);
    cr_assert_eq(capture_status(cucap_builder_stream(b)), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(D.cuMemsetD8Async(out, 1, 8, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_params_size(exec), 0);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFree(out);
}

/* ---------------------------------------------------------------- with a kernel, on the GPU */

/* record(p, log): sleeps about 200 us, then log[p->index] = p->check.  A
 * copy of the next launch's values that did not wait for this launch
 * would land during the sleep, and the entry would be wrong. */
static const char record_ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry record(.param .u64 p, .param .u64 log)\n"
    "{\n"
    "  .reg .b32 %r<4>;\n"
    "  .reg .b64 %rd<7>;\n"
    "  .reg .pred %q;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u64 %rd2, [log];\n"
    "  mov.u32 %r3, 0;\n"
    "WAIT:\n"
    "  nanosleep.u32 1000;\n"
    "  add.u32 %r3, %r3, 1;\n"
    "  setp.lt.u32 %q, %r3, 200;\n"
    "  @%q bra WAIT;\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n"
    "  cvta.to.global.u64 %rd4, %rd2;\n"
    "  ld.global.u32 %r1, [%rd3];\n"
    "  ld.global.u32 %r2, [%rd3+4];\n"
    "  mul.wide.u32 %rd5, %r1, 4;\n"
    "  add.s64 %rd6, %rd4, %rd5;\n"
    "  st.global.u32 [%rd6], %r2;\n"
    "  ret;\n"
    "}\n";

struct kernel_graph {
    CUmodule module;
    cucap_builder *b;
    cucap_exec *exec;
    CUdeviceptr log;
};

static struct kernel_graph capture_record(uint32_t entries)
{
    PFN_cuModuleLoadData_v2000 load = (PFN_cuModuleLoadData_v2000)cucap_driver_entry_point("cuModuleLoadData");
    PFN_cuModuleGetFunction_v2000 get = (PFN_cuModuleGetFunction_v2000)cucap_driver_entry_point("cuModuleGetFunction");
    PFN_cuLaunchKernel_v4000 launch = (PFN_cuLaunchKernel_v4000)cucap_driver_entry_point("cuLaunchKernel");
    struct kernel_graph k = { NULL, NULL, NULL, 0 };
    cucap_error *err = NULL;
    CUdeviceptr block = 0;
    CUfunction f = NULL;
    void *args[2];

    cr_assert(load && get && launch);
    cr_assert_eq(load(&k.module, record_ptx), CUDA_SUCCESS);
    cr_assert_eq(get(&f, k.module, "record"), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&k.log, entries * sizeof(uint32_t)), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(k.log, 0, entries * sizeof(uint32_t)), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    cr_assert_eq(cucap_builder_create(0, &k.b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(k.b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(k.b, sizeof(struct values), &block, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    args[0] = &block;
    args[1] = &k.log;
    cr_assert_eq(launch(f, 1, 1, 1, 1, 1, 1, 0, cucap_builder_stream(k.b), args, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(k.b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(k.b, NULL, &k.exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    return k;
}

static void check_log(const struct kernel_graph *k, uint32_t entries)
{
    static uint32_t host[256];
    uint32_t i;

    cr_assert_leq(entries, 256);
    cr_assert_eq(D.cuMemcpyDtoH(host, k->log, entries * sizeof *host), CUDA_SUCCESS);
    for (i = 0; i < entries; i++)
        cr_assert_eq(host[i], check_of(i), "launch %u wrote %#x: it read another launch's values", i, host[i]);
}

static void release_record(struct kernel_graph *k)
{
    PFN_cuModuleUnload_v2000 unload = (PFN_cuModuleUnload_v2000)cucap_driver_entry_point("cuModuleUnload");

    cucap_exec_destroy(k->exec);
    cucap_builder_destroy(k->b);
    D.cuMemFree(k->log);
    unload(k->module);
}

/* 64 launches alternating between two streams, none waited for: each
 * copy of values waits for the launch before it. */
Test(params_kernels_gpu, launches_alternating_between_two_streams_each_read_their_own_values)
{
    struct kernel_graph k = capture_record(64);
    CUstream s[2] = { new_stream(), new_stream() };
    cucap_error *err = NULL;
    struct values v = { 0, 0, 0 };
    uint32_t i;

    for (i = 0; i < 64; i++) {
        v.index = i;
        v.check = check_of(i);
        cr_assert_eq(cucap_exec_launch_params(k.exec, &v, sizeof v, s[i % 2], &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
    }
    cr_assert_eq(D.cuStreamSynchronize(s[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s[1]), CUDA_SUCCESS);
    check_log(&k, 64);
    release_record(&k);
    cr_assert_eq(D.cuStreamDestroy(s[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s[1]), CUDA_SUCCESS);
}

struct recorder {
    cucap_exec *exec;
    CUcontext ctx;
    uint32_t thread;
    CUresult rc;
};

static void *record_from_a_thread(void *p)
{
    struct recorder *t = p;
    CUstream s = NULL;
    struct values v = { 0, 0, 0 };
    uint32_t i;

    /* the thread's own stream needs a context; the launches do not */
    if ((t->rc = D.cuCtxSetCurrent(t->ctx)) != CUDA_SUCCESS ||
        (t->rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
        (t->rc = D.cuCtxSetCurrent(NULL)) != CUDA_SUCCESS)
        return NULL;
    for (i = 0; i < 32 && t->rc == CUDA_SUCCESS; i++) {
        v.index = t->thread * 32 + i;
        v.check = check_of(v.index);
        t->rc = cucap_exec_launch_params(t->exec, &v, sizeof v, s, NULL);
    }
    if (t->rc == CUDA_SUCCESS && (t->rc = D.cuCtxSetCurrent(t->ctx)) == CUDA_SUCCESS)
        t->rc = D.cuStreamSynchronize(s);
    D.cuStreamDestroy(s);
    return NULL;
}

/* Four threads, each on a stream of its own, 32 launches each at once:
 * every launch wrote its own entry. */
Test(params_kernels_gpu, launches_from_four_threads_on_their_own_streams)
{
    struct kernel_graph k = capture_record(128);
    struct recorder t[4];
    pthread_t id[4];
    CUcontext ctx = NULL;
    int i;

    cr_assert_eq(D.cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    for (i = 0; i < 4; i++) {
        t[i] = (struct recorder){ k.exec, ctx, (uint32_t)i, CUDA_SUCCESS };
        cr_assert_eq(pthread_create(&id[i], NULL, record_from_a_thread, &t[i]), 0);
    }
    for (i = 0; i < 4; i++)
        cr_assert_eq(pthread_join(id[i], NULL), 0);
    for (i = 0; i < 4; i++)
        cr_assert_eq(t[i].rc, CUDA_SUCCESS, "thread %d: %s", i, cucap_result_name(t[i].rc));
    check_log(&k, 128);
    release_record(&k);
}

/* ---------------------------------------------------------------- stream identity: the id, not the handle */

/* Two threads take turns launching on CU_STREAM_PER_THREAD: one handle,
 * and a different stream in each thread. */
struct turns {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int turn;                        /* whose turn: 0 or 1 */
    int launches;                    /* each thread's */
    cucap_exec *exec;
    CUcontext ctx;
    CUdeviceptr out, results;        /* the replay graph's copy, what each launch read (NULL: none) */
};

struct taker {
    struct turns *t;
    int me;
    CUresult rc;
};

static void *take_turns(void *p)
{
    struct taker *k = p;
    struct turns *t = k->t;
    struct values v;
    int i;

    if ((k->rc = D.cuCtxSetCurrent(t->ctx)) != CUDA_SUCCESS)   /* the per-thread stream is the context's */
        return NULL;
    for (i = 0; i < t->launches && k->rc == CUDA_SUCCESS; i++) {
        uint32_t n = (uint32_t)(2 * i + k->me);
        pthread_mutex_lock(&t->lock);
        while (t->turn != k->me)
            pthread_cond_wait(&t->changed, &t->lock);
        pthread_mutex_unlock(&t->lock);
        v.index = n;
        v.check = check_of(n);
        v.tag = 0x7a67000000000000ull + n;
        k->rc = cucap_exec_launch_params(t->exec, &v, sizeof v, CU_STREAM_PER_THREAD, NULL);
        if (k->rc == CUDA_SUCCESS && t->results)
            k->rc = D.cuMemcpyDtoDAsync(t->results + n * sizeof v, t->out, sizeof v, CU_STREAM_PER_THREAD);
        pthread_mutex_lock(&t->lock);
        t->turn = !k->me;
        pthread_cond_broadcast(&t->changed);
        pthread_mutex_unlock(&t->lock);
    }
    if (k->rc == CUDA_SUCCESS)
        k->rc = D.cuStreamSynchronize(CU_STREAM_PER_THREAD);
    return NULL;
}

static void run_turns(struct turns *t)
{
    struct taker k[2] = { { t, 0, CUDA_SUCCESS }, { t, 1, CUDA_SUCCESS } };
    pthread_t id[2];
    int i;

    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    cr_assert_eq(D.cuCtxGetCurrent(&t->ctx), CUDA_SUCCESS);
    for (i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&id[i], NULL, take_turns, &k[i]), 0);   /* fresh threads */
    for (i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(id[i], NULL), 0);
    for (i = 0; i < 2; i++)
        cr_assert_eq(k[i].rc, CUDA_SUCCESS, "thread %d: %s", i, cucap_result_name(k[i].rc));
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
}

/* The simulator runs every launch at once, so values cannot be lost
 * there: it shows the library's ordering by its waits instead.  Every
 * launch after the other thread's must wait for it. */
Test(params_sim, two_threads_taking_turns_on_the_per_thread_stream_each_read_their_own_values)
{
    struct replay r = capture_replay(sizeof(struct values));
    struct turns t = { .launches = 30 };
    long waits;

    cr_assert_eq(D.cuMemAlloc(&t.results, 60 * sizeof(struct values)), CUDA_SUCCESS);
    t.exec = r.exec;
    t.out = r.out;
    waits = sim_counter("cuStreamWaitEvent");
    run_turns(&t);
    waits = sim_counter("cuStreamWaitEvent") - waits;
    cr_assert_geq(waits, 59, "%ld launches of 60 waited for the other thread's last one: the per-thread stream is "
                  "one handle and two streams", waits);
    check_results(t.results, 60, 0);
    D.cuMemFree(t.results);
    release_replay(&r);
}

/* Streams destroyed with their launches queued, each replaced by a new
 * stream that the simulator gives the same handle, as the driver does. */
Test(params_sim, streams_destroyed_in_flight_and_replaced_each_read_their_own_values)
{
    struct replay r = capture_replay(sizeof(struct values));
    CUdeviceptr results = 0;
    CUstream s, last = NULL;
    struct values v;
    long waits, reused = 0;
    uint32_t i, j, n = 0;

    cr_assert_eq(setenv("CUDASIM_REUSE_HANDLES", "1", 1), 0);
    cr_assert_eq(D.cuMemAlloc(&results, 240 * sizeof v), CUDA_SUCCESS);
    waits = sim_counter("cuStreamWaitEvent");
    for (i = 0; i < 12; i++) {
        cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        reused += s == last;
        for (j = 0; j < 20; j++, n++) {
            v.index = n;
            v.check = check_of(n);
            v.tag = 0x7a67000000000000ull + n;
            cr_assert_eq(cucap_exec_launch_params(r.exec, &v, sizeof v, s, NULL), CUDA_SUCCESS);
            cr_assert_eq(D.cuMemcpyDtoDAsync(results + n * sizeof v, r.out, sizeof v, s), CUDA_SUCCESS);
        }
        cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);   /* its work still queued */
        last = s;
    }
    unsetenv("CUDASIM_REUSE_HANDLES");
    waits = sim_counter("cuStreamWaitEvent") - waits;
    cr_assert_eq(reused, 11, "the simulator gave %ld of 11 new streams the handle just destroyed", reused);
    cr_assert_geq(waits, 11, "%ld of the 11 new streams' first launches waited for the last launch of the stream "
                  "before, whose handle they got", waits);
    check_results(results, 240, 0);
    D.cuMemFree(results);
    release_replay(&r);
}

/* On the GPU with the recording kernel: each launch sleeps before it
 * reads, so a copy of values that did not wait would land meanwhile. */
Test(params_kernels_gpu, two_threads_taking_turns_on_the_per_thread_stream_each_read_their_own_values)
{
    struct kernel_graph k = capture_record(120);
    struct turns t = { .launches = 60 };

    t.exec = k.exec;
    run_turns(&t);
    check_log(&k, 120);
    release_record(&k);
}

Test(params_kernels_gpu, streams_destroyed_in_flight_and_replaced_each_read_their_own_values)
{
    PFN_cuCtxSynchronize_v2000 sync = (PFN_cuCtxSynchronize_v2000)cucap_driver_entry_point("cuCtxSynchronize");
    struct kernel_graph k = capture_record(240);
    struct values v = { 0, 0, 0 };
    CUstream s;
    uint32_t i, j, n = 0;

    cr_assert(sync);
    for (i = 0; i < 12; i++) {
        cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        for (j = 0; j < 20; j++, n++) {
            v.index = n;
            v.check = check_of(n);
            cr_assert_eq(cucap_exec_launch_params(k.exec, &v, sizeof v, s, NULL), CUDA_SUCCESS);
        }
        cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);   /* its launches still queued */
    }
    cr_assert_eq(sync(), CUDA_SUCCESS);
    check_log(&k, 240);
    release_record(&k);
}

/* ---------------------------------------------------------------- values of any size */

/* A graph that copies its block to pinned host memory, then checks there,
 * in a host node, that the launch read whole the values it was given: a
 * header (thread, sequence number) and a pattern of both in every word
 * after it; each thread's launches must arrive in its order. */
struct big_check {
    size_t size;
    uint64_t *seen;                   /* pinned, size bytes */
    uint32_t next[4];                 /* each thread's next sequence number */
    uint32_t checked, torn;
};

static uint64_t word_of(uint32_t thread, uint32_t seq, size_t k)
{
    return ((uint64_t)thread << 56 | (uint64_t)seq << 32 | (uint32_t)k) * 0x9e3779b97f4a7c15ull;
}

static void CUDA_CB check_big(void *p)
{
    struct big_check *c = p;
    uint32_t thread = (uint32_t)(c->seen[0] >> 32), seq = (uint32_t)c->seen[0];
    size_t k, words = c->size / 8;

    if (thread >= 4 || seq != c->next[thread]) {
        c->torn++;
        return;
    }
    for (k = 1; k < words; k++)
        if (c->seen[k] != word_of(thread, seq, k)) {
            c->torn++;
            return;
        }
    for (k = words * 8; k < c->size; k++)
        if (((unsigned char *)c->seen)[k] != (unsigned char)(thread + seq)) {
            c->torn++;
            return;
        }
    c->next[thread]++;
    c->checked++;
}

static void fill_big(uint64_t *v, size_t size, uint32_t thread, uint32_t seq)
{
    size_t k, words = size / 8;

    v[0] = (uint64_t)thread << 32 | seq;
    for (k = 1; k < words; k++)
        v[k] = word_of(thread, seq, k);
    for (k = words * 8; k < size; k++)
        ((unsigned char *)v)[k] = (unsigned char)(thread + seq);
}

struct big_launcher {
    cucap_exec *exec;
    CUcontext ctx;
    struct held *gate;
    pthread_barrier_t *all_held;      /* every thread's held launches queued */
    size_t size;
    uint32_t thread, launches, held;  /* the first `held` launches queue behind the gate */
    CUresult rc;
    char message[256];
};

static void *launch_big(void *p)
{
    struct big_launcher *t = p;
    cucap_error *err = NULL;
    uint64_t *values = malloc(t->size < 8 ? 8 : t->size);
    CUstream s = NULL;
    uint32_t i;

    /* a fresh thread: only its stream needs a context, the launches do not */
    if (!values || (t->rc = D.cuCtxSetCurrent(t->ctx)) != CUDA_SUCCESS ||
        (t->rc = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
        (t->rc = D.cuLaunchHostFunc(s, t->gate->fn, t->gate->data)) != CUDA_SUCCESS ||
        (t->rc = D.cuCtxSetCurrent(NULL)) != CUDA_SUCCESS) {
        free(values);
        return NULL;
    }
    for (i = 0; i < t->launches && t->rc == CUDA_SUCCESS; i++) {
        if (i == t->held && pthread_barrier_wait(t->all_held) == PTHREAD_BARRIER_SERIAL_THREAD)
            held_release(t->gate);
        if (i == t->held)
            pthread_barrier_wait(t->all_held);
        fill_big(values, t->size, t->thread, i);
        if ((t->rc = cucap_exec_launch_params(t->exec, values, t->size, s, &err)) != CUDA_SUCCESS)
            snprintf(t->message, sizeof t->message, "launch %u: %s", i, cucap_error_message(err));
        memset(values, 0xee, t->size);   /* the values were taken at the call */
    }
    cucap_error_free(err);
    if (t->rc == CUDA_SUCCESS && (t->rc = D.cuCtxSetCurrent(t->ctx)) == CUDA_SUCCESS)
        t->rc = D.cuStreamSynchronize(s);
    D.cuStreamDestroy(s);
    free(values);
    return NULL;
}

/* size bytes a launch, 100 launches from each of `threads` fresh threads
 * on streams of their own, the first ones queued behind work held in
 * flight: no call waits for it, and every launch reads its own values
 * whole, although the caller overwrites them as soon as the call returns. */
static void launch_values_of_size(size_t size, uint32_t threads)
{
    struct big_launcher t[4];
    struct big_check *c = calloc(1, sizeof *c);
    const char *call = NULL;
    cucap_builder *b = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr block = 0;
    CUcontext ctx = NULL;
    struct held gate;
    pthread_t id[4];
    uint32_t i, held = (uint32_t)((64u << 20) / size);

    pthread_barrier_t all_held;

    held = held < 1 ? 1 : held > 16 ? 16 : held;   /* well below a stream's queue of host-node launches (56) */
    pthread_barrier_init(&all_held, NULL, threads);
    held_init(&gate);
    cr_assert_not_null(c);
    c->size = size;
    cr_assert_eq(D.cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAllocHost((void **)&c->seen, size < 8 ? 8 : size), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_params(b, size, &block, &err), CUDA_SUCCESS, "%zu bytes: %s", size,
                 cucap_error_message(err));
    cr_assert_eq(D.cuMemcpyDtoHAsync(c->seen, block, size, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(D.cuLaunchHostFunc(cucap_builder_stream(b), check_big, c), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    for (i = 0; i < threads; i++)
        t[i] = (struct big_launcher){ exec, ctx, &gate, &all_held, size, i, 100, held, CUDA_SUCCESS, "" };
    for (i = 0; i < threads; i++)
        cr_assert_eq(pthread_create(&id[i], NULL, launch_big, &t[i]), 0);
    for (i = 0; i < threads; i++)
        cr_assert_eq(pthread_join(id[i], NULL), 0);
    for (i = 0; i < threads; i++)
        cr_assert_eq(t[i].rc, CUDA_SUCCESS, "%zu bytes, thread %u: %s %s", size, i, cucap_result_name(t[i].rc),
                     t[i].message);
    cr_assert_not(gate.gpu.timed_out, "%zu bytes: a launch waited for the work held before it", size);
    cr_assert_eq(held_waits(&call), 0, "%zu bytes: %s waited for the work held before it", size, call);
    cr_assert_eq(c->torn, 0, "%zu bytes: %u launches read values not their own, or out of order", size, c->torn);
    cr_assert_eq(c->checked, 100 * threads, "%zu bytes: %u launches checked", size, c->checked);
    pthread_barrier_destroy(&all_held);
    cucap_exec_destroy(exec);
    cucap_builder_destroy(b);
    D.cuMemFreeHost(c->seen);
    free(c);
}

static const size_t any_sizes[] = { 16, 65536 + 1, 256 << 10, 1 << 20, 16 << 20 };

BACKEND_TEST(params, values_of_any_size_from_one_thread)
{
    size_t i;

    for (i = 0; i < sizeof any_sizes / sizeof *any_sizes; i++)
        launch_values_of_size(any_sizes[i], 1);
}

BACKEND_TEST(params, values_of_any_size_from_four_threads_on_their_own_streams)
{
    size_t i;

    for (i = 0; i < sizeof any_sizes / sizeof *any_sizes; i++)
        launch_values_of_size(any_sizes[i], 4);
}
