/* Several devices: forks on another device in one capture, a device's pool
 * on such a fork, teardown in every order, one thread per device.  On the
 * simulated driver with 2 and with 4 devices, and on the GPUs when there
 * are two or more (a host with one GPU says SKIP and why). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define MAX_DEVICES 8

static int device_count(void)
{
    int n = 0;

    cr_assert_eq(D.cuDeviceGetCount(&n), CUDA_SUCCESS);
    return n;
}

static void sim2_setup(void)
{
    cr_assert_eq(setenv("CUDASIM_DEVICES", "2", 1), 0);
    sim_setup();
}

static void sim4_setup(void)
{
    cr_assert_eq(setenv("CUDASIM_DEVICES", "4", 1), 0);
    sim_setup();
}

/* in the test, not the suite's init: a skip there would read as a crash */
static void need_two_gpus(void)
{
    if (device_count() < 2)
        cr_skip_test("needs two GPUs (this host has one)");
}

TestSuite(multi_sim2, .init = sim2_setup, .fini = gpu_teardown, .timeout = 60);
TestSuite(multi_sim4, .init = sim4_setup, .fini = gpu_teardown, .timeout = 60);
TestSuite(multi_gpu, .init = gpu_setup, .fini = gpu_teardown, .timeout = 120);

static void fault_sim2_setup(void)
{
    cr_assert_eq(setenv("CUDASIM_DEVICES", "2", 1), 0);
    fault_sim_setup();
}

TestSuite(multi_fault_sim2, .init = fault_sim2_setup, .fini = gpu_teardown, .timeout = 60);
TestSuite(multi_fault_gpu, .init = fault_gpu_setup, .fini = gpu_teardown, .timeout = 120);

#define MULTI_TEST(name)                                                                        \
    static void multi_##name##_body(void);                                                      \
    Test(multi_sim2, name) { multi_##name##_body(); }                                           \
    Test(multi_sim4, name) { multi_##name##_body(); }                                           \
    Test(multi_gpu, name) { need_two_gpus(); multi_##name##_body(); }                           \
    static void multi_##name##_body(void)

/* Memory of device dev, allocated with its primary context current (the
 * caller's context is restored).  The context stays retained until
 * device_memory_free: the real driver destroys a primary context, and the
 * memory in it, when its last retain is released (the simulator does not
 * model that). */
static CUdeviceptr device_memory(int dev, size_t bytes)
{
    CUcontext ctx, saved;
    CUdevice d;
    CUdeviceptr p = 0;

    cr_assert_eq(D.cuDeviceGet(&d, dev), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxGetCurrent(&saved), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, d), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(p, 0, bytes), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);   /* non-blocking streams do not wait for it */
    cr_assert_eq(D.cuCtxSetCurrent(saved), CUDA_SUCCESS);
    return p;
}

static void device_memory_free(int dev, CUdeviceptr p)
{
    CUdevice d;

    cr_assert_eq(D.cuMemFree(p), CUDA_SUCCESS);
    cr_assert_eq(D.cuDeviceGet(&d, dev), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
}

static int filled(CUdeviceptr p, size_t bytes, unsigned char value)
{
    unsigned char host[256];
    size_t i;

    cr_assert_leq(bytes, sizeof host);
    cr_assert_eq(D.cuMemcpyDtoH(host, p, bytes), CUDA_SUCCESS);
    for (i = 0; i < bytes; i++)
        if (host[i] != value)
            return 0;
    return 1;
}

/* A capture on device 0 forks onto every other device, each fork writes
 * its device's memory, join, one graph runs them all. */
MULTI_TEST(fork_onto_every_device_runs_as_one_graph)
{
    int n = device_count(), dev;
    cucap_builder *b = NULL, *all[MAX_DEVICES];
    CUdeviceptr mem[MAX_DEVICES];
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;

    cr_assert_leq(n, MAX_DEVICES);
    for (dev = 0; dev < n; dev++)
        mem[dev] = device_memory(dev, 64);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    all[0] = b;
    cr_assert_eq(D.cuMemsetD8Async(mem[0], 0x10, 64, cucap_builder_stream(b)), CUDA_SUCCESS);
    for (dev = 1; dev < n; dev++) {
        cr_assert_eq(cucap_builder_split_on(b, dev, 2, &all[dev], &err), CUDA_SUCCESS, "%s",
                     cucap_error_message(err));
        cr_assert_eq(cucap_builder_get_state(all[dev]), CUCAP_BUILDER_CAPTURING);
        {
            /* the fork's stream is of device dev's primary context, by the driver's account */
            CUcontext stream_ctx = NULL, primary = NULL;
            CUdevice d;
            cr_assert_eq(D.cuDeviceGet(&d, dev), CUDA_SUCCESS);
            cr_assert_eq(D.cuDevicePrimaryCtxRetain(&primary, d), CUDA_SUCCESS);
            cr_assert_eq(D.cuStreamGetCtx(cucap_builder_stream(all[dev]), &stream_ctx), CUDA_SUCCESS);
            cr_assert_eq(stream_ctx, primary, "device %d's fork stream is of another context", dev);
            cr_assert_eq(cucap_builder_context(all[dev]), primary);
            cr_assert_eq(D.cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
        }
        cr_assert_eq(D.cuMemsetD8Async(mem[dev], (unsigned char)(0x10 + dev), 64, cucap_builder_stream(all[dev])),
                     CUDA_SUCCESS);
    }
    cr_assert_eq(cucap_builder_join(all, (size_t)n, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    for (dev = 0; dev < n; dev++)
        cr_assert(!filled(mem[dev], 64, (unsigned char)(0x10 + dev)), "device %d's work ran before launch", dev);
    cr_assert_eq(cucap_exec_launch(exec, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_SUCCESS);
    for (dev = 0; dev < n; dev++)
        cr_assert(filled(mem[dev], 64, (unsigned char)(0x10 + dev)), "device %d's memory was not written", dev);
    cucap_exec_destroy(exec);
    for (dev = 0; dev < n; dev++) {
        cucap_builder_destroy(all[dev]);
        device_memory_free(dev, mem[dev]);
    }
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("exec"), 0);
    }
}

/* An unjoined or invalidated cross-device fork, destroyed in either order. */
static void teardown(int invalidate, int fork_first)
{
    int n = device_count();
    cucap_builder *b = NULL, *f = NULL;
    CUdeviceptr mem = device_memory(n - 1, 64);
    cucap_error *err = NULL;
    CUresult rc;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_on(b, n - 1, 2, &f, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(mem, 1, 64, cucap_builder_stream(f)), CUDA_SUCCESS);
    if (invalidate) {
        CUdeviceptr p = 0;
        /* a call the capture refuses, made on this thread in global mode */
        cr_assert_eq(D.cuMemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    if (fork_first)
        cucap_builder_destroy(f);
    rc = cucap_builder_end(b, &err);
    cr_assert_eq(rc, invalidate ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                 "end gave %d: %s", rc, cucap_error_message(err));
    cucap_error_free(err);
    cucap_builder_destroy(b);
    if (!fork_first)
        cucap_builder_destroy(f);
    device_memory_free(n - 1, mem);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("stream"), 0);
        cr_assert_eq(sim_live_settled("graph"), 0);
    }
}

MULTI_TEST(unjoined_fork_destroyed_first) { teardown(0, 1); }
MULTI_TEST(unjoined_fork_root_destroyed_first) { teardown(0, 0); }
MULTI_TEST(invalidated_fork_destroyed_first) { teardown(1, 1); }
MULTI_TEST(invalidated_fork_root_destroyed_first) { teardown(1, 0); }

struct copy {
    CUdeviceptr from, to;
};

static CUresult fill_and_copy(CUstream s, void *data)
{
    const struct copy *c = data;
    CUresult rc = D.cuMemsetD8Async(c->from, 0x5c, 64, s);
    return rc != CUDA_SUCCESS ? rc : D.cuMemcpyDtoDAsync(c->to, c->from, 64, s);
}

/* cucap_device_pool(D) on a device-D fork: an allocation node of the same
 * graph, freed inside it. */
MULTI_TEST(device_pool_on_a_fork_of_another_device)
{
    int dev = device_count() - 1;
    cucap_builder *b = NULL, *all[2];
    cucap_pool *pool = NULL;
    cucap_exec *exec = NULL;
    cucap_error *err = NULL;
    CUdeviceptr p = 0, out = device_memory(dev, 64);
    struct copy copy;
    CUresult rc;

    cr_assert_eq(cucap_device_pool(dev, &pool, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    all[0] = b;
    cr_assert_eq(cucap_builder_split_on(b, dev, 2, &all[1], NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_pool_alloc(pool, 64, cucap_builder_stream(all[1]), &p, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    /* the copy through enqueue: with the fork's device's context current */
    copy.from = p;
    copy.to = out;
    rc = cucap_builder_enqueue(all[1], fill_and_copy, &copy, &err);
    cr_assert_eq(rc, CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_free(pool, p, cucap_builder_stream(all[1]), &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_join(all, 2, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_complete(b, NULL, &exec, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch(exec, cucap_builder_stream(b), NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert(filled(out, 64, 0x5c));
    cucap_exec_destroy(exec);
    cucap_builder_destroy(all[1]);
    cucap_builder_destroy(b);
    device_memory_free(dev, out);
}

MULTI_TEST(split_on_a_device_that_does_not_exist)
{
    cucap_builder *b = NULL, *f = (cucap_builder *)&b;
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_split_on(b, device_count(), 2, &f, &err), CUDA_ERROR_INVALID_VALUE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cucap_builder_split_on"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(cucap_builder_split_on(b, 0, 1, &f, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_split_on(NULL, 1, 2, &f, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cucap_builder_get_state(b), CUCAP_BUILDER_CAPTURING, "a refused split touches nothing");
    cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
    cucap_builder_destroy(b);
}

/* One thread per device, global captures through the library in a loop:
 * no thread's library calls invalidate another's capture. */
struct device_thread {
    int dev, cycles, lost;
    CUdeviceptr mem;
};

static void *capture_loop(void *p)
{
    struct device_thread *t = p;
    int i;

    for (i = 0; i < t->cycles; i++) {
        cucap_builder *b = NULL;
        cucap_exec *exec = NULL;
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

        if (cucap_builder_create(t->dev, &b, NULL) != CUDA_SUCCESS ||
            cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL) != CUDA_SUCCESS) {
            t->lost++;
            cucap_builder_destroy(b);
            continue;
        }
        D.cuMemsetD8Async(t->mem, (unsigned char)i, 64, cucap_builder_stream(b));
        if (cucap_builder_end(b, NULL) != CUDA_SUCCESS || cucap_builder_complete(b, NULL, &exec, NULL) != CUDA_SUCCESS ||
            cucap_exec_launch(exec, cucap_builder_stream(b), NULL) != CUDA_SUCCESS)
            t->lost++;
        /* the program's own wait, in relaxed mode as the facts require */
        D.cuThreadExchangeStreamCaptureMode(&mode);
        D.cuStreamSynchronize(cucap_builder_stream(b));
        D.cuThreadExchangeStreamCaptureMode(&mode);
        cucap_exec_destroy(exec);
        cucap_builder_destroy(b);
    }
    return NULL;
}

MULTI_TEST(one_thread_per_device_loses_no_capture)
{
    int n = device_count(), dev;
    struct device_thread t[MAX_DEVICES];
    pthread_t th[MAX_DEVICES];

    for (dev = 0; dev < n; dev++) {
        t[dev].dev = dev;
        t[dev].cycles = on_simulator() ? 200 : 1000;
        t[dev].lost = 0;
        t[dev].mem = device_memory(dev, 64);
    }
    for (dev = 0; dev < n; dev++)
        cr_assert_eq(pthread_create(&th[dev], NULL, capture_loop, &t[dev]), 0);
    for (dev = 0; dev < n; dev++)
        pthread_join(th[dev], NULL);
    for (dev = 0; dev < n; dev++) {
        cr_assert_eq(t[dev].lost, 0, "device %d lost %d of %d captures", dev, t[dev].lost, t[dev].cycles);
        device_memory_free(dev, t[dev].mem);
    }
}

/* One fork/join cycle onto device 1 from a device-0 stream: wrap, begin,
 * split onto it, join (across devices: by event), end, destroy. */
static void cycle_onto_device_1(CUstream origin)
{
    cucap_builder *b = NULL, *all[2];
    cucap_error *err = NULL;

    cr_assert_eq(cucap_builder_create_on_stream(origin, &b, NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL), CUDA_SUCCESS);
    all[0] = b;
    cr_assert_eq(cucap_builder_split_on(b, 1, 2, &all[1], &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_join(all, 2, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cucap_builder_destroy(all[1]);
    cucap_builder_destroy(b);
}

/* A joined fork's stream on another device goes back to the stream cache
 * at the end, and the next split onto that device takes it: no stream is
 * made again.  (Found on 2 x H200: the join by event did not tell the
 * hierarchy its capture's id, so each cycle destroyed the fork's stream
 * and made a new one, 6 us more per cycle.) */
static void fork_stream_on_another_device_is_reused(void)
{
    CUstream origin = new_stream();

    cycle_onto_device_1(origin);
    cr_assert_eq(set_rules(""), 0);
    cycle_onto_device_1(origin);
    cr_assert_eq(calls("cuStreamCreate"), 0, "the second cycle made %ld streams", calls("cuStreamCreate"));
    cr_assert_eq(calls("cuStreamDestroy"), 0, "the second cycle destroyed %ld streams", calls("cuStreamDestroy"));
    cr_assert_eq(D.cuStreamDestroy(origin), CUDA_SUCCESS);
}

Test(multi_fault_sim2, fork_stream_on_another_device_is_reused) { fork_stream_on_another_device_is_reused(); }
Test(multi_fault_gpu, fork_stream_on_another_device_is_reused)
{
    need_two_gpus();
    fork_stream_on_another_device_is_reused();
}

/* A builder reset for every capture whose fork is on another device:
 * that join goes by events, taken from the cache, which the capture's
 * hierarchy keeps for the next captures once it is over.  What it keeps
 * stays bounded: 300 captures leave fewer than 150 live events and
 * streams (one more event for each capture without the bound). */
MULTI_TEST(a_reset_builder_joining_across_devices_keeps_a_bounded_number)
{
    cucap_builder *b = NULL, *f = NULL;
    cucap_error *err = NULL;
    int c;

    cr_assert_eq(cucap_builder_create(0, &b, NULL), CUDA_SUCCESS);
    for (c = 0; c < 300; c++) {
        cr_assert_eq(cucap_builder_reset(b, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
        cr_assert_eq(cucap_builder_split_on(b, 1, 2, &f, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_join_forks(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
        cucap_builder_destroy(f);
    }
    if (on_simulator())
        cr_assert_lt(sim_live("event") + sim_live("stream"), 150, "%ld events and %ld streams live",
                     sim_live("event"), sim_live("stream"));
    cucap_builder_destroy(b);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("event"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

/* A builder destroyed between captures comes back from
 * cucap_builder_create of its own device only. */
MULTI_TEST(a_destroyed_builder_comes_back_for_its_own_device_only)
{
    cucap_builder *b = NULL;
    CUcontext primary[2] = { NULL, NULL };
    int dev, round;

    for (dev = 0; dev < 2; dev++)
        cr_assert_eq(D.cuDevicePrimaryCtxRetain(&primary[dev], dev), CUDA_SUCCESS);
    for (round = 0; round < 4; round++)
        for (dev = 0; dev < 2; dev++) {
            int want = (dev + round) % 2;
            cr_assert_eq(cucap_builder_create(want, &b, NULL), CUDA_SUCCESS);
            cr_assert_eq(cucap_builder_context(b), primary[want], "round %d: device %d", round, want);
            cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_RELAXED, NULL), CUDA_SUCCESS);
            cr_assert_eq(cucap_builder_end(b, NULL), CUDA_SUCCESS);
            cucap_builder_destroy(b);
        }
    for (dev = 0; dev < 2; dev++)
        D.cuDevicePrimaryCtxRelease(dev);
}

/* ---------------------------------------------------------------- more devices than any table of the library's once held */

static void sim72_setup(void)
{
    cr_assert_eq(setenv("CUDASIM_DEVICES", "72", 1), 0);
    sim_setup();
}

TestSuite(multi_sim72, .init = sim72_setup, .fini = gpu_teardown, .timeout = 60);

/* Device 71 of 72: its pool, a parameter block read by a launch, and a
 * builder kept between captures as on device 0 (the library's per-device
 * tables had room for 8 or 64 devices); then cucap_release_cached gives
 * every stream and event back. */
Test(multi_sim72, the_last_of_seventy_two_devices_is_served_as_the_first)
{
    const CUdevice dev = 71;
    cucap_builder *b = NULL, *again = NULL;
    cucap_exec *e = NULL;
    cucap_error *err = NULL;
    cucap_pool *pool = NULL;
    CUdeviceptr block, out, p;
    CUcontext ctx;
    uint64_t value = 71, got = 0;
    long streams;

    cr_assert_eq(device_count(), 72);
    cr_assert_eq(cucap_device_pool(dev, &pool, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_alloc(pool, 64, NULL, &p, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_pool_free(pool, p, NULL, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&out, 8), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_create(dev, &b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_begin(b, CU_STREAM_CAPTURE_MODE_GLOBAL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(cucap_builder_params(b, sizeof value, &block, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(D.cuMemcpyDtoDAsync(out, block, sizeof value, cucap_builder_stream(b)), CUDA_SUCCESS);
    cr_assert_eq(cucap_builder_end(b, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_builder_complete(b, NULL, &e, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(cucap_exec_launch_params(e, &value, sizeof value, NULL, &err), CUDA_SUCCESS, "%s",
                 cucap_error_message(err));
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(&got, out, sizeof got), CUDA_SUCCESS);
    cr_assert_eq(got, 71);
    cucap_builder_destroy(b);
    streams = sim_live("stream");
    cr_assert_eq(cucap_builder_create(dev, &again, &err), CUDA_SUCCESS, "%s", cucap_error_message(err));
    cr_assert_eq(again, b, "the builder destroyed between captures was kept for the next create");
    cr_assert_eq(sim_live("stream"), streams, "the kept builder brought its stream");
    cucap_builder_destroy(again);
    cucap_exec_destroy(e);
    D.cuMemFree(out);
    cr_assert_eq(D.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    cucap_release_cached();
    cr_assert_eq(sim_live_settled("stream"), 0);
    cr_assert_eq(sim_live_settled("event"), 0);
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}
