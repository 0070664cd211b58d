// The C++ layer (include/cucapture.hpp) on the simulated driver and on
// the GPU: every wrapper, the exception paths, moved-from objects, work
// from fresh threads (no current context) and from several at once.
#include <criterion/criterion.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

#include <cucapture.hpp>

#include "backend.h"

BACKEND_SUITES(cxx, 120);
FAULT_BACKEND_SUITES(cxx, 120);

namespace {

// Run fn on a new thread, which has no current context; what it threw
// comes back as text (Criterion's assertions belong to the test's thread).
std::string on_fresh_thread(const std::function<void()> &fn)
{
    std::string failure;
    std::thread t([&] {
        try {
            fn();
        } catch (const cucap::error &e) {
            failure = std::string("cucap::error: ") + e.text();
        } catch (const std::exception &e) {
            failure = e.what();
        }
    });
    t.join();
    return failure;
}

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond); \
    } while (0)

CUdeviceptr device_buffer(size_t size)
{
    CUdeviceptr d = 0;
    cr_assert_eq(D.cuMemAlloc(&d, size), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(d, 0, size), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(NULL), CUDA_SUCCESS);
    return d;
}

void read_back(CUdeviceptr d, unsigned char *host, size_t size)
{
    cr_assert_eq(D.cuMemcpyDtoH(host, d, size), CUDA_SUCCESS);
}

// the driver's context, made current on this thread (a fresh thread has none)
void with_context(CUcontext ctx)
{
    EXPECT(D.cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
}

// the warnings the library reports, counted (the handler is process-wide)
std::atomic<int> cxx_warnings{0};
CUresult cxx_warning_code;

void count_cxx_warning(const cucap_error *w, void *)
{
    cxx_warnings++;
    cxx_warning_code = cucap_error_code(w);
}

} // namespace

// A 3-way fork/join from a fresh thread: split returns owning forks, join
// takes any range, complete gives an exec that launches.
BACKEND_TEST(cxx, fork_join_complete_launch_from_a_fresh_thread)
{
    CUdeviceptr d = device_buffer(3 * 64);
    unsigned char host[3 * 64];

    std::string failure = on_fresh_thread([&] {
        cucap::builder b = cucap::builder::create(0);
        b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
        EXPECT(b.is_building());
        EXPECT(b.kind() == CUCAP_BUILDER_PRIMARY && b.state() == CUCAP_BUILDER_CAPTURING);
        std::vector<cucap::builder> forks = b.split(3);
        EXPECT(forks.size() == 2);
        EXPECT(forks[0].kind() == CUCAP_BUILDER_FORKED);
        EXPECT(D.cuMemsetD8Async(d, 1, 64, b.stream()) == CUDA_SUCCESS);
        for (size_t i = 0; i < forks.size(); i++)
            EXPECT(D.cuMemsetD8Async(d + 64 * (i + 1), (unsigned char)(2 + i), 64, forks[i].stream()) ==
                   CUDA_SUCCESS);
        std::vector<cucap::builder *> all{&b, &forks[0], &forks[1]};
        cucap::builder &root = cucap::join(all);
        EXPECT(&root == &b);
        EXPECT(forks[0].state() == CUCAP_BUILDER_CLOSED && forks[1].state() == CUCAP_BUILDER_CLOSED);
        b.end();
        cucap::exec e = b.complete();
        EXPECT(e && e.handle() != nullptr);
        e.launch(b.stream());
        with_context(b.context());
        EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
        D.cuCtxSetCurrent(NULL);
    });
    cr_assert(failure.empty(), "%s", failure.c_str());
    read_back(d, host, sizeof host);
    cr_assert_eq(host[0], 1);
    cr_assert_eq(host[64], 2);
    cr_assert_eq(host[128], 3);
    D.cuMemFree(d);
}

// join_forks, a graph reference shared and instantiated, exec update from
// a second capture of the same shape, the braced-list join.
BACKEND_TEST(cxx, join_forks_graph_references_and_update)
{
    CUdeviceptr d = device_buffer(128);
    unsigned char host[128];
    cucap::exec e;
    cucap::graph kept;

    for (unsigned char value = 5; value <= 6; value++) {
        cucap::builder b = cucap::builder::create();
        b.begin();
        std::vector<cucap::builder> forks = b.split(2);
        cr_assert_eq(D.cuMemsetD8Async(d, value, 64, b.stream()), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8Async(d + 64, value, 64, forks[0].stream()), CUDA_SUCCESS);
        if (value == 5)
            b.join_forks();
        else
            cr_assert_eq(&cucap::join({std::ref(b), std::ref(forks[0])}), &b);
        b.end();
        if (!e) {
            cucap::graph g = b.graph_ref();
            kept = g.share();
            cr_assert_not_null(kept.handle());
            e = g.instantiate();
        } else {
            e.update(b);
        }
        e.launch(b.stream());
        cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
        read_back(d, host, sizeof host);
        cr_assert_eq(host[0], value);
        cr_assert_eq(host[127], value);
    }
    cr_assert_not_null(kept.handle(), "a shared reference keeps the graph after its builder");
    D.cuMemFree(d);
}

// complete_into: an empty exec is instantiated, the same shape updated in
// place, one branch more instantiated anew (the old C object destroyed by
// the library, the new one owned by the same cucap::exec).
BACKEND_TEST(cxx, complete_into_updates_or_instantiates)
{
    CUdeviceptr d = device_buffer(3 * 64);
    unsigned char host[3 * 64];
    cucap::exec e;
    const int branches[] = {2, 2, 3};
    const cucap_completion expected[] = {CUCAP_COMPLETED_INSTANTIATED, CUCAP_COMPLETED_UPDATED,
                                         CUCAP_COMPLETED_INSTANTIATED};
    cucap_exec *before = nullptr;

    for (int round = 0; round < 3; round++) {
        cucap::builder b = cucap::builder::create();
        b.begin();
        std::vector<cucap::builder> forks = b.split((size_t)branches[round]);
        cr_assert_eq(D.cuMemsetD8Async(d, (unsigned char)(10 * round), 64, b.stream()), CUDA_SUCCESS);
        for (size_t i = 0; i < forks.size(); i++)
            cr_assert_eq(D.cuMemsetD8Async(d + 64 * (i + 1), (unsigned char)(10 * round + 1 + i), 64, forks[i].stream()),
                         CUDA_SUCCESS);
        b.join_forks();
        b.end();
        cr_assert_eq(b.complete_into(e), expected[round], "round %d", round);
        cr_assert(e);
        if (round == 1)
            cr_assert_eq(e.get(), before, "updated in place");
        before = e.get();
        e.launch(b.stream());
        cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
        read_back(d, host, sizeof host);
        cr_assert_eq(host[0], 10 * round);
        cr_assert_eq(host[64], 10 * round + 1);
    }
    cr_assert_eq(host[128], 22, "the third branch ran");
    D.cuMemFree(d);
}

// One builder for every capture of a loop, on a fresh thread: reset
// between captures keeps its stream; resetting a capture in progress
// throws ILLEGAL_STATE and leaves it capturing.
BACKEND_TEST(cxx, one_builder_reset_for_every_capture)
{
    CUdeviceptr d = device_buffer(2 * 64);
    unsigned char host[2 * 64];
    std::string failure = on_fresh_thread([&] {
        cucap::builder b = cucap::builder::create();
        cucap::exec e;
        CUstream first = b.stream();
        for (int round = 0; round < 3; round++) {
            b.reset();
            EXPECT(b.state() == CUCAP_BUILDER_NOT_STARTED);
            EXPECT(b.stream() == first);
            b.begin();
            if (round == 0) {
                bool threw = false;
                try {
                    b.reset();
                } catch (const cucap::error &err) {
                    threw = err.code() == CUDA_ERROR_ILLEGAL_STATE;
                }
                EXPECT(threw);
                EXPECT(b.state() == CUCAP_BUILDER_CAPTURING);
            }
            std::vector<cucap::builder> forks = b.split(2);
            EXPECT(D.cuMemsetD8Async(d, (unsigned char)(round + 1), 64, b.stream()) == CUDA_SUCCESS);
            EXPECT(D.cuMemsetD8Async(d + 64, (unsigned char)(round + 101), 64, forks[0].stream()) == CUDA_SUCCESS);
            b.join_forks();
            b.end();
            EXPECT(b.complete_into(e) == (round ? CUCAP_COMPLETED_UPDATED : CUCAP_COMPLETED_INSTANTIATED));
            e.launch(b.stream());
            with_context(b.context());
            EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
            D.cuCtxSetCurrent(NULL);
        }
    });
    cr_assert(failure.empty(), "%s", failure.c_str());
    read_back(d, host, sizeof host);
    cr_assert_eq(host[0], 3, "the last capture's value ran");
    cr_assert_eq(host[64], 103);
    D.cuMemFree(d);
}

// The same loop with kept forks: split_kept hands the same forks back
// every capture, at the front of the vector that owns them.
BACKEND_TEST(cxx, kept_forks_come_back_every_capture)
{
    CUdeviceptr d = device_buffer(3 * 64);
    unsigned char host[3 * 64];
    std::string failure = on_fresh_thread([&] {
        cucap::builder b = cucap::builder::create();
        cucap::exec e;
        std::vector<cucap::builder> kept;
        cucap_builder *first[2] = { nullptr, nullptr };
        for (int round = 0; round < 3; round++) {
            b.reset();
            b.begin();
            b.split_kept(3, kept);
            EXPECT(kept.size() == 2);
            for (int i = 0; i < 2; i++) {
                if (round == 0)
                    first[i] = kept[i].get();
                EXPECT(kept[i].get() == first[i]);
                EXPECT(kept[i].state() == CUCAP_BUILDER_CAPTURING);
                EXPECT(D.cuMemsetD8Async(d + 64 * (i + 1), (unsigned char)(round + 11 * (i + 1)), 64,
                                         kept[i].stream()) == CUDA_SUCCESS);
            }
            EXPECT(D.cuMemsetD8Async(d, (unsigned char)(round + 1), 64, b.stream()) == CUDA_SUCCESS);
            b.join_forks();
            EXPECT(kept[0].state() == CUCAP_BUILDER_CLOSED && kept[0].stream() == nullptr);
            b.end();
            b.complete_into(e);
            e.launch(b.stream());
            with_context(b.context());
            EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
            D.cuCtxSetCurrent(NULL);
        }
    });
    cr_assert(failure.empty(), "%s", failure.c_str());
    read_back(d, host, sizeof host);
    cr_assert_eq(host[0], 3, "the last capture's values ran");
    cr_assert_eq(host[64], 13);
    cr_assert_eq(host[128], 24);
    D.cuMemFree(d);
}

// A bad argument, a failed join, an invalidated capture ended and
// destroyed: each throws cucap::error with the C error's code, message and
// notes, and nothing leaks or crashes.
BACKEND_TEST(cxx, failures_throw_with_code_message_and_notes)
{
    cucap::builder b = cucap::builder::create();
    try {
        b.split(1);
        cr_assert_fail("split(1) did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_INVALID_VALUE);
        cr_assert_str_eq(e.name(), "CUDA_ERROR_INVALID_VALUE");
        cr_assert_not_null(std::strstr(e.what(), "cucap_builder_split"), "%s", e.what());
        cr_assert(e.error_code() == cucap::make_error_code(CUDA_ERROR_INVALID_VALUE));
        cr_assert_str_eq(e.error_code().category().name(), "cucapture");
        cr_assert_eq(e.error_code().message(), std::string("CUDA_ERROR_INVALID_VALUE"));
    }
    try {   // not capturing: the join touches nothing
        cucap::builder other = cucap::builder::create();
        cucap::join({std::ref(b), std::ref(other)});
        cr_assert_fail("a join of builders that are not capturing did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_ILLEGAL_STATE, "%s", e.text().c_str());
    }
    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    std::vector<cucap::builder> forks = b.split(2);
    cucap::pool p = cucap::pool::device(0);
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);   // invalidates
    try {
        p.alloc(64, forks[0].stream());
        cr_assert_fail("an allocation in an invalidated capture did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    try {
        b.end();
        cr_assert_fail("end of an invalidated capture did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        cr_assert_geq(e.notes().size(), 1u);
        cr_assert_not_null(std::strstr(e.notes()[0].c_str(), "cucap_pool_alloc"), "%s", e.notes()[0].c_str());
        cr_assert_not_null(std::strstr(e.text().c_str(), e.notes()[0].c_str()), "text() holds the notes");
    }
    cr_assert_eq(b.state(), CUCAP_BUILDER_INVALIDATED);
    try {
        b.complete();
        cr_assert_fail("complete of an invalidated capture did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_ILLEGAL_STATE);
    }
    // b and its fork go out of scope in any order: never a crash
}

// Moved-from objects are empty and safe to destroy; move assignment
// destroys what was there.
BACKEND_TEST(cxx, moved_from_objects_are_empty_and_safe)
{
    cucap::builder a = cucap::builder::create();
    cucap::builder b = std::move(a);
    cr_assert(!a);
    cr_assert(b);
    cr_assert_null(a.stream());
    a = std::move(b);
    cr_assert(a && !b);
    cucap::builder c = cucap::builder::create();
    a = std::move(c);   // the first builder is destroyed here
    cr_assert(a && !c);

    cucap::pool p = cucap::pool::create(0);
    cucap::pool q = std::move(p);
    cr_assert(!p && q && q.handle() != nullptr);
    q.close();
    cr_assert(!q, "close empties the object");

    cucap::exec e;
    cucap::exec f = std::move(e);
    cr_assert(!e && !f);
    cucap::graph g;
    cr_assert(!g.share());
    cr_assert_null(g.handle());
}

// Pools: the device pool and a created one, stream-ordered allocation
// inside a global capture.
BACKEND_TEST(cxx, pools_allocate_inside_a_capture)
{
    cucap::builder b = cucap::builder::create();
    cucap::pool device = cucap::pool::device(0), own = cucap::pool::create(0), wrapped = cucap::pool::open_default(0);
    cr_assert_not_null(device.handle());
    cr_assert_not_null(wrapped.handle());
    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUdeviceptr x = device.alloc(256, b.stream()), y = own.alloc(256, b.stream());
    cr_assert_eq(D.cuMemsetD8Async(x, 1, 256, b.stream()), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(y, 2, 256, b.stream()), CUDA_SUCCESS);
    device.free(x, b.stream());
    own.free(y, b.stream());
    b.end();
    cucap::exec e = b.complete();
    e.launch(b.stream());
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
    try {
        own.free(y, b.stream());
        cr_assert_fail("a second free did not throw");
    } catch (const cucap::error &err) {
        cr_assert_eq(err.code(), CUDA_ERROR_INVALID_VALUE);
    }
}

// Conditional nodes whose bodies are builders, filled by callables.
BACKEND_TEST(cxx, conditional_bodies_filled_by_callables)
{
    CUdeviceptr d = device_buffer(4 * 64);
    unsigned char host[4 * 64];
    cucap::builder b = cucap::builder::create();
    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraphConditionalHandle yes = b.create_condition(1, true), no = b.create_condition(0, true),
                             zero = b.create_condition(0, true);
    cucap::builder then_body = b.if_then(yes);
    then_body.capture([&](cucap::builder &body) {
        cr_assert_eq(D.cuMemsetD8Async(d, 0x11, 64, body.stream()), CUDA_SUCCESS);
    });
    std::pair<cucap::builder, cucap::builder> branches = b.if_else(no);
    branches.first.capture([&](cucap::builder &body) { D.cuMemsetD8Async(d + 64, 0x22, 64, body.stream()); });
    branches.second.capture([&](cucap::builder &body) { D.cuMemsetD8Async(d + 64, 0x33, 64, body.stream()); });
    cucap::builder loop = b.while_loop(zero);
    loop.capture([&](cucap::builder &body) { D.cuMemsetD8Async(d + 128, 0x44, 64, body.stream()); });
#if CUDA_VERSION >= 12080
    CUgraphConditionalHandle which = b.create_condition(2, true);
    std::vector<cucap::builder> cases = b.switch_on(which, 3);
    cr_assert_eq(cases.size(), 3u);
    for (size_t i = 0; i < cases.size(); i++)
        cases[i].capture([&](cucap::builder &body) {
            D.cuMemsetD8Async(d + 192, (unsigned char)(0x50 + i), 64, body.stream());
        });
#endif
    b.end();
    cucap::exec e = b.complete();
    e.launch(b.stream());
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
    read_back(d, host, sizeof host);
    cr_assert_eq(host[0], 0x11);
    cr_assert_eq(host[64], 0x33, "IF-ELSE with 0 runs the else body");
    cr_assert_eq(host[128], 0, "WHILE with 0 runs nothing");
#if CUDA_VERSION >= 12080
    cr_assert_eq(host[192], 0x52);
#endif
    D.cuMemFree(d);
}

// A body whose callable throws: the exception goes on, the builders tear
// down in their destructors.
BACKEND_TEST(cxx, a_throwing_fill_leaves_nothing_behind)
{
    try {
        cucap::builder b = cucap::builder::create();
        b.begin();
        CUgraphConditionalHandle c = b.create_condition(1, true);
        cucap::builder body = b.if_then(c);
        body.capture([](cucap::builder &) { throw std::runtime_error("fill failed"); });
        cr_assert_fail("capture did not rethrow");
    } catch (const std::runtime_error &e) {
        cr_assert_str_eq(e.what(), "fill failed");
    }
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

// An exception inside capture() on a fresh thread, in each mode: it comes
// out unchanged, the thread is no longer capturing (a synchronous
// allocation works), nothing is warned, and the builder captures again
// after reset().
BACKEND_TEST(cxx, an_exception_inside_capture_leaves_no_capture_behind)
{
    CUdeviceptr d = device_buffer(128);
    unsigned char host[128];
    cxx_warnings = 0;
    cucap_set_warning_handler(count_cxx_warning, NULL);

    std::string failure = on_fresh_thread([&] {
        cucap::builder b = cucap::builder::create();
        for (CUstreamCaptureMode mode : all_modes) {
            try {
                b.capture([&](cucap::builder &self) {
                    std::vector<cucap::builder> forks = self.split(2);
                    EXPECT(D.cuMemsetD8Async(d, 0xee, 64, self.stream()) == CUDA_SUCCESS);
                    EXPECT(D.cuMemsetD8Async(d + 64, 0xee, 64, forks[0].stream()) == CUDA_SUCCESS);
                    throw std::domain_error("shape not supported: fall back to eager launches");
                }, mode);
                EXPECT(!"capture() did not rethrow");
            } catch (const std::domain_error &e) {
                EXPECT(std::string(e.what()) == "shape not supported: fall back to eager launches");
            }
            EXPECT(b.state() == CUCAP_BUILDER_NOT_STARTED);
            with_context(b.context());
            EXPECT(capture_status(b.stream()) == CU_STREAM_CAPTURE_STATUS_NONE);
            CUdeviceptr scratch = 0;
            EXPECT(D.cuMemAlloc(&scratch, 256) == CUDA_SUCCESS);   // the next unrelated call works
            EXPECT(D.cuMemFree(scratch) == CUDA_SUCCESS);
            D.cuCtxSetCurrent(NULL);
            b.reset();
            unsigned char value = (unsigned char)(0x50 + mode);
            b.capture([&](cucap::builder &self) {
                std::vector<cucap::builder> forks = self.split(2);
                EXPECT(D.cuMemsetD8Async(d, value, 64, self.stream()) == CUDA_SUCCESS);
                EXPECT(D.cuMemsetD8Async(d + 64, value, 64, forks[0].stream()) == CUDA_SUCCESS);
                self.join_forks();
            }, mode);
            cucap::exec e = b.complete();
            e.launch(b.stream());
            with_context(b.context());
            EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
            EXPECT(D.cuMemcpyDtoH(host, d, sizeof host) == CUDA_SUCCESS);
            EXPECT(host[3] == value && host[64 + 3] == value);
            D.cuCtxSetCurrent(NULL);
            b.reset();
        }
    });
    cr_assert(failure.empty(), "%s", failure.c_str());
    cr_assert_eq(cxx_warnings, 0);
    cucap_set_warning_handler(NULL, NULL);
    D.cuMemFree(d);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

// Two captures joined: refused with both named, both captures whole; each
// then ends, launches and runs.
BACKEND_TEST(cxx, a_join_of_two_captures_is_refused_and_both_run)
{
    CUdeviceptr d = device_buffer(128);
    unsigned char host[128];
    cucap::builder a = cucap::builder::create(), b = cucap::builder::create();
    a.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(D.cuMemsetD8Async(d, 0x61, 64, a.stream()), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8Async(d + 64, 0x62, 64, b.stream()), CUDA_SUCCESS);
    try {
        cucap::join({std::ref(a), std::ref(b)});
        cr_assert_fail("a join of two captures did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_INVALID_VALUE, "%s", e.text().c_str());
        cr_assert_not_null(std::strstr(e.what(), "another capture"), "%s", e.what());
    }
    cr_assert(a.is_building() && b.is_building());
    a.end();
    b.end();
    cucap::exec ea = a.complete(), eb = b.complete();
    ea.launch(a.stream());
    eb.launch(b.stream());
    cr_assert_eq(D.cuStreamSynchronize(a.stream()), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
    read_back(d, host, sizeof host);
    cr_assert_eq(host[1], 0x61);
    cr_assert_eq(host[65], 0x62);
    D.cuMemFree(d);
}

// Eight fresh threads capture in global mode; each waits on its own
// launches inside a relaxed_mode scope, synchronously allocates there, and
// instantiates: every capture of every thread ends whole.
BACKEND_TEST(cxx, eight_global_captures_while_each_thread_waits_in_a_relaxed_scope)
{
    enum { THREADS = 8, ROUNDS = 25 };
    std::vector<std::thread> threads;
    std::vector<std::string> failures(THREADS);
    std::vector<CUdeviceptr> buffers(THREADS);
    std::atomic<int> whole{0};

    for (CUdeviceptr &x : buffers)
        x = device_buffer(64);
    for (int t = 0; t < THREADS; t++)
        threads.emplace_back([&, t] {
            failures[t] = on_fresh_thread([&] {
                cucap::builder b = cucap::builder::create();
                cucap::exec e;
                for (int round = 0; round < ROUNDS; round++) {
                    unsigned char value = (unsigned char)(t * ROUNDS + round);
                    b.reset();
                    b.capture([&](cucap::builder &self) {
                        EXPECT(D.cuMemsetD8Async(buffers[t], value, 64, self.stream()) == CUDA_SUCCESS);
                    }, CU_STREAM_CAPTURE_MODE_GLOBAL);
                    b.complete_into(e);
                    e.launch(b.stream());
                    with_context(b.context());
                    {
                        cucap::relaxed_mode relaxed;
                        CUdeviceptr scratch = 0;
                        unsigned char host[64];
                        EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
                        EXPECT(D.cuMemAlloc(&scratch, 64) == CUDA_SUCCESS);
                        EXPECT(D.cuMemFree(scratch) == CUDA_SUCCESS);
                        EXPECT(D.cuMemcpyDtoH(host, buffers[t], sizeof host) == CUDA_SUCCESS);
                        EXPECT(host[0] == value && host[63] == value);
                    }
                    D.cuCtxSetCurrent(NULL);
                    whole++;
                }
            });
        });
    for (std::thread &t : threads)
        t.join();
    for (int t = 0; t < THREADS; t++)
        cr_assert(failures[t].empty(), "thread %d: %s", t, failures[t].c_str());
    cr_assert_eq(whole.load(), THREADS * ROUNDS);
    for (CUdeviceptr x : buffers)
        D.cuMemFree(x);
}

// relaxed_mode nests and restores the thread's mode; the C scope refuses
// a leave out of order, twice, on another thread, or of a scope never
// entered, changing nothing.
BACKEND_TEST(cxx, relaxed_scopes_nest_and_refuse_misuse)
{
    cucap_error *err = nullptr;
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    {
        cucap::relaxed_mode outer;
        cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
        set_thread_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        {
            cucap::relaxed_mode inner;
            cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
        }
        cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "the inner scope restores what it found");
        set_thread_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    }
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);

    cucap_relaxed_mode a, b, never;
    std::memset(&never, 0, sizeof never);
    cr_assert_eq(cucap_relaxed_mode_enter(nullptr, &err), CUDA_ERROR_INVALID_VALUE);
    cucap_error_free(err);
    err = nullptr;
    cr_assert_eq(cucap_relaxed_mode_leave(&never, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(std::strstr(cucap_error_message(err), "never entered"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = nullptr;
    cr_assert_eq(cucap_relaxed_mode_enter(&a, nullptr), CUDA_SUCCESS);
    cr_assert_eq(cucap_relaxed_mode_enter(&b, nullptr), CUDA_SUCCESS);
    cr_assert_eq(cucap_relaxed_mode_leave(&a, &err), CUDA_ERROR_ILLEGAL_STATE, "a leaves before b");
    cr_assert_not_null(std::strstr(cucap_error_message(err), "reverse order"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    err = nullptr;
    CUresult elsewhere = CUDA_SUCCESS;
    std::thread([&] { elsewhere = cucap_relaxed_mode_leave(&b, nullptr); }).join();
    cr_assert_eq(elsewhere, CUDA_ERROR_ILLEGAL_STATE, "another thread cannot leave b");
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED, "the refusals changed nothing");
    cr_assert_eq(cucap_relaxed_mode_leave(&b, nullptr), CUDA_SUCCESS);
    cr_assert_eq(cucap_relaxed_mode_leave(&a, nullptr), CUDA_SUCCESS);
    cr_assert_eq(cucap_relaxed_mode_leave(&a, &err), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_not_null(std::strstr(cucap_error_message(err), "left already"), "%s", cucap_error_message(err));
    cucap_error_free(err);
    cr_assert_eq(thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
}

// On a thread that itself captures in global mode, the scope relaxes the
// thread, not its capture: a synchronous allocation and a wait on a stream
// outside the capture work and the capture stays ACTIVE; a wait on the
// capture's own stream still invalidates it.
BACKEND_TEST(cxx, a_relaxed_scope_on_a_thread_that_captures_in_global_mode)
{
    CUstream other = new_stream();
    cucap::builder b = cucap::builder::create();
    b.begin(CU_STREAM_CAPTURE_MODE_GLOBAL);
    {
        cucap::relaxed_mode relaxed;
        CUdeviceptr scratch = 0;
        cr_assert_eq(D.cuMemAlloc(&scratch, 64), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamSynchronize(other), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemFree(scratch), CUDA_SUCCESS);
        cr_assert_eq(capture_status(b.stream()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
        cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        cr_assert_eq(capture_status(b.stream()), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    }
    try {
        b.end();
        cr_assert_fail("the end of the invalidated capture did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s", e.text().c_str());
    }
    cr_assert_eq(D.cuStreamDestroy(other), CUDA_SUCCESS);
}

// A graph captured once reads a struct from its parameter block; each
// launch gives new values; a wrong type is refused at compile time, a
// graph without a block at run time.
BACKEND_TEST(cxx, replay_with_per_launch_values)
{
    struct step {
        std::uint32_t position;
        float scale;
    };
    CUdeviceptr out = device_buffer(sizeof(step) * 50);
    std::vector<step> host(50);
    cucap::builder b = cucap::builder::create();
    b.capture([&](cucap::builder &self) {
        step *p = self.params<step>();
        EXPECT(p != nullptr);
        EXPECT(D.cuMemcpyDtoDAsync(out, reinterpret_cast<CUdeviceptr>(p), sizeof(step), self.stream()) ==
               CUDA_SUCCESS);
    });
    cucap::exec e = b.complete();
    cr_assert_eq(e.params_size(), sizeof(step));
    for (std::uint32_t i = 0; i < 50; i++) {
        e.launch(b.stream(), step{i, 0.5f * i});
        cr_assert_eq(D.cuMemcpyDtoDAsync(out + i * sizeof(step), out, sizeof(step), b.stream()), CUDA_SUCCESS);
    }
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
    read_back(out, reinterpret_cast<unsigned char *>(host.data()), sizeof(step) * 50);
    for (std::uint32_t i = 1; i < 50; i++)
        cr_assert(host[i].position == i && host[i].scale == 0.5f * i, "launch %u read %u", i, host[i].position);
    cucap::builder plain = cucap::builder::create();
    plain.capture([&](cucap::builder &self) { EXPECT(D.cuMemsetD8Async(out, 0, 1, self.stream()) == CUDA_SUCCESS); });
    cucap::exec none = plain.complete();
    try {
        none.launch(plain.stream(), step{1, 1.0f});
        cr_assert_fail("a graph without a block launched with values");
    } catch (const cucap::error &err) {
        cr_assert_eq(err.code(), CUDA_ERROR_ILLEGAL_STATE, "%s", err.text().c_str());
    }
    D.cuMemFree(out);
}

// A block made for one struct refuses values of another size; a block made
// by size takes values through a pointer and a size.
BACKEND_TEST(cxx, launch_values_of_the_blocks_type_or_by_pointer_and_size)
{
    struct step {
        std::uint32_t position;
        float scale;
    };
    struct other {
        float a, b, c;
    };
    static_assert(sizeof(step) != sizeof(other), "another size");
    CUdeviceptr out = device_buffer(sizeof(step));
    cucap::builder b = cucap::builder::create();
    b.capture([&](cucap::builder &self) {
        step *p = self.params<step>();
        EXPECT(D.cuMemcpyDtoDAsync(out, reinterpret_cast<CUdeviceptr>(p), sizeof(step), self.stream()) ==
               CUDA_SUCCESS);
    });
    cucap::exec e = b.complete();
    e.launch(b.stream(), step{7, 1.0f});
    try {
        e.launch(b.stream(), other{1.0f, 2.0f, 3.0f});
        cr_assert_fail("values of another size were launched");
    } catch (const cucap::error &err) {
        cr_assert_eq(err.code(), CUDA_ERROR_INVALID_VALUE, "%s", err.text().c_str());
        cr_assert(std::strstr(err.text().c_str(), "bytes") != nullptr, "%s", err.text().c_str());
    }
    cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);   // both graphs write out: one after the other
    cucap::builder untyped = cucap::builder::create();
    untyped.capture([&](cucap::builder &self) {
        CUdeviceptr block = self.params(sizeof(step));
        EXPECT(block != 0);
        EXPECT(D.cuMemcpyDtoDAsync(out, block, sizeof(step), self.stream()) == CUDA_SUCCESS);
    });
    cucap::exec u = untyped.complete();
    const step values{42, 4.0f};
    u.launch(untyped.stream(), &values, sizeof values);   // by pointer and size
    cr_assert_eq(D.cuStreamSynchronize(untyped.stream()), CUDA_SUCCESS);
    step host{0, 0.0f};
    read_back(out, reinterpret_cast<unsigned char *>(&host), sizeof host);
    cr_assert(host.position == 42 && host.scale == 4.0f, "read %u", host.position);
    u.launch(untyped.stream(), step{43, 5.0f});   // a block made by size takes a struct of its size
    try {
        u.launch(untyped.stream(), &values, sizeof values + 1);
        cr_assert_fail("a size other than the block's was launched");
    } catch (const cucap::error &err) {
        cr_assert_eq(err.code(), CUDA_ERROR_INVALID_VALUE, "%s", err.text().c_str());
    }
    cr_assert_eq(D.cuStreamSynchronize(untyped.stream()), CUDA_SUCCESS);
    D.cuMemFree(out);
}

// enqueue: a callable returning nothing, one returning a driver error,
// one throwing.
BACKEND_TEST(cxx, enqueue_runs_callables_and_carries_their_failures)
{
    CUdeviceptr d = device_buffer(64);
    cucap::builder b = cucap::builder::create();
    b.begin();
    int ran = 0;
    b.enqueue([&](CUstream s) {
        ran++;
        D.cuMemsetD8Async(d, 7, 64, s);
    });
    cr_assert_eq(ran, 1);
    try {
        b.enqueue([](CUstream) { return CUDA_ERROR_INVALID_VALUE; });
        cr_assert_fail("a failing callable did not throw");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_INVALID_VALUE);
        cr_assert_not_null(std::strstr(e.what(), "cucap_builder_enqueue"), "%s", e.what());
    }
    try {
        b.enqueue([](CUstream) -> CUresult { throw std::logic_error("mine"); });
        cr_assert_fail("a throwing callable did not rethrow");
    } catch (const std::logic_error &e) {
        cr_assert_str_eq(e.what(), "mine");
    }
    b.end();
    D.cuMemFree(d);
}

// host_callback: the callback at each launch; its data given back once,
// on another thread, after the graph and executable graph are gone; a
// refusal throws and gives it back before it returns.
static std::atomic<int> cxx_calls, cxx_freed;
static void CUDA_CB cxx_count(void *) { cxx_calls++; }
static void cxx_free(void *) { cxx_freed++; }

BACKEND_TEST(cxx, host_callback_gives_its_data_back_once)
{
    CUstream s = new_stream();
    cxx_calls = 0;
    cxx_freed = 0;
    {
        cucap::builder b = cucap::builder::create();
        b.begin();
        b.host_callback(cxx_count, nullptr, cxx_free);
        b.end();
        cucap::exec e = b.complete();
        e.launch(s);
        e.launch(s);
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    }
    for (int waited = 0; cxx_freed.load() < 1 && waited < 5000; waited++)
        usleep(1000);
    cr_assert_eq(cxx_calls.load(), 2);
    cr_assert_eq(cxx_freed.load(), 1);
    try {
        cucap::builder idle = cucap::builder::create();
        idle.host_callback(cxx_count, nullptr, cxx_free);
        cr_assert_fail("a builder that is not capturing took a callback");
    } catch (const cucap::error &e) {
        cr_assert_eq(e.code(), CUDA_ERROR_ILLEGAL_STATE, "%s", e.what());
    }
    cr_assert_eq(cxx_freed.load(), 2, "the refusal gave the data back %d times", cxx_freed.load() - 1);
    D.cuStreamDestroy(s);
}

// Named nodes from a fresh thread (no current context): every change by
// name, a refusal thrown, the data set by name given back once.
BACKEND_TEST(cxx, named_nodes_change_from_a_fresh_thread)
{
    CUdeviceptr a = device_buffer(64), c = device_buffer(64), d = device_buffer(64);
    CUstream s = new_stream();
    CUevent ev = nullptr;
    unsigned char host[64];

    cr_assert_eq(D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cxx_calls = 0;
    cxx_freed = 0;
    std::string failure = on_fresh_thread([&] {
        cucap::builder one = cucap::builder::create();
        one.begin();
        EXPECT(D.cuMemsetD8Async(a, 1, 16, one.stream()) == CUDA_SUCCESS);
        one.end();
        cucap::builder other = cucap::builder::create();
        other.begin();
        EXPECT(D.cuMemsetD8Async(a, 6, 16, other.stream()) == CUDA_SUCCESS);
        other.end();
        cucap::builder b = cucap::builder::create();
        b.begin();
        EXPECT(D.cuMemsetD8Async(a, 1, 64, b.stream()) == CUDA_SUCCESS);
        b.name_node("fill");
        EXPECT(D.cuMemcpyAsync(c, a, 64, b.stream()) == CUDA_SUCCESS);
        b.name_node("copy");
        b.host_callback(cxx_count, nullptr, nullptr);
        b.name_node("callback");
        b.embed(one);
        b.name_node("step");
        EXPECT(D.cuEventRecordWithFlags(ev, b.stream(), CU_EVENT_RECORD_EXTERNAL) == CUDA_SUCCESS);
        b.name_node("done");
        b.end();
        cucap::exec e = b.complete();
        e.set_memset("fill", d, 3);
        e.set_memcpy("copy", c, d, 64);
        e.set_host_callback("callback", cxx_count, nullptr, cxx_free);
        e.set_child_graph("step", other.graph_ref());
        e.set_event("done", ev);
        e.set_enabled("copy", false);
        e.set_enabled("copy", true);
        try {
            e.set_memset("copy", d, 1);
            EXPECT(!"a memset of a copy's name was taken");
        } catch (const cucap::error &x) {
            EXPECT(x.code() == CUDA_ERROR_INVALID_VALUE);
        }
        e.launch(s);
        with_context(b.context());
        EXPECT(D.cuStreamSynchronize(s) == CUDA_SUCCESS);
        D.cuCtxSetCurrent(NULL);
    });
    cr_assert(failure.empty(), "%s", failure.c_str());
    read_back(c, host, sizeof host);
    cr_assert_eq(host[63], 3, "the copy took the memset's new destination");
    read_back(a, host, sizeof host);
    cr_assert_eq(host[0], 6, "the embedded graph replaced");
    cr_assert_eq(host[63], 0, "the memset no longer writes a");
    cr_assert_eq(cxx_calls.load(), 1);
    for (int waited = 0; cxx_freed.load() < 1 && waited < 5000; waited++)
        usleep(1000);
    cr_assert_eq(cxx_freed.load(), 1, "the data set by name given back %d times", cxx_freed.load());
    D.cuEventDestroy(ev);
    D.cuMemFree(a);
    D.cuMemFree(c);
    D.cuMemFree(d);
    D.cuStreamDestroy(s);
}

// embed, dot_print, on_stream with a borrowed stream, upload.
BACKEND_TEST(cxx, embed_dot_print_and_borrowed_streams)
{
    CUstream s = new_stream();
    char path[] = "/tmp/cucapture-cxx-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    {
        CUdeviceptr d = device_buffer(64);
        cucap::builder child = cucap::builder::create();
        child.begin(CU_STREAM_CAPTURE_MODE_RELAXED);
        cr_assert_eq(D.cuMemsetD8Async(d, 9, 64, child.stream()), CUDA_SUCCESS);
        child.end();
        cucap::builder parent = cucap::builder::on_stream(s);
        cr_assert_eq(parent.stream(), s);
        parent.begin();
        parent.embed(child);
        parent.end();
        parent.dot_print(path);
        cucap::exec e = parent.complete();
        e.upload(s);
        e.launch(s);
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        unsigned char host[64];
        read_back(d, host, sizeof host);
        cr_assert_eq(host[10], 9);
        D.cuMemFree(d);
    }
    FILE *f = std::fopen(path, "r");
    char line[64] = "";
    cr_assert_not_null(f);
    cr_assert_not_null(std::fgets(line, sizeof line, f));
    std::fclose(f);
    std::remove(path);
    cr_assert_not_null(std::strstr(line, "digraph"), "%s", line);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS, "the borrowed stream is still the caller's");
}

// Eight fresh threads, each with builders of its own, sharing the device pool.
BACKEND_TEST(cxx, eight_threads_capture_at_once)
{
    std::vector<std::thread> threads;
    std::vector<std::string> failures(8);
    std::atomic<int> done{0};

    for (int t = 0; t < 8; t++)
        threads.emplace_back([&, t] {
            failures[t] = on_fresh_thread([&] {
                for (int round = 0; round < 10; round++) {
                    cucap::builder b = cucap::builder::create();
                    cucap::pool p = cucap::pool::device(0);
                    b.begin(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
                    std::vector<cucap::builder> forks = b.split(2);
                    CUdeviceptr x = p.alloc(64, b.stream());
                    EXPECT(D.cuMemsetD8Async(x, 1, 64, b.stream()) == CUDA_SUCCESS);
                    p.free(x, b.stream());
                    b.join_forks();
                    b.end();
                    cucap::exec e = b.complete();
                    e.launch(b.stream());
                    with_context(b.context());
                    EXPECT(D.cuStreamSynchronize(b.stream()) == CUDA_SUCCESS);
                    D.cuCtxSetCurrent(NULL);
                }
                done++;
            });
        });
    for (std::thread &t : threads)
        t.join();
    for (int t = 0; t < 8; t++)
        cr_assert(failures[t].empty(), "thread %d: %s", t, failures[t].c_str());
    cr_assert_eq(done.load(), 8);
}

// The library functions.
BACKEND_TEST(cxx, library_functions)
{
    cucap::init();
    cr_assert_str_eq(cucap::version_string(), cucap_version_string());
    cr_assert_geq(cucap::driver_version(), 12030);
    cr_assert_not_null(cucap::driver_entry_point("cuMemsetD8Async"));
    cr_assert_str_eq(cucap::result_name(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY");
    cr_assert_eq(cucap::result_category().message(CUDA_SUCCESS), std::string("CUDA_SUCCESS"));
    cucap_graph_memory m = cucap::device_graph_memory(0);
    cr_assert_geq(m.reserved_high, m.reserved);
    cucap::device_graph_memory_trim(0);
    bool threw = false;
    try {
        cucap::device_graph_memory(-1);
    } catch (const cucap::error &e) {
        threw = e.code() == CUDA_ERROR_INVALID_VALUE;
    }
    cr_assert(threw, "a device out of range did not throw CUDA_ERROR_INVALID_VALUE");
}

// ---------------------------------------------------------------- under injected faults

// capture()'s callable throws and the end of the abandoned capture fails
// twice: the warning handler hears of it, the user's exception still comes
// out unchanged, and the builder's destructor ends the capture.
FAULT_BACKEND_TEST(cxx, a_failed_end_of_an_abandoned_capture_goes_to_the_warning_handler)
{
    cxx_warnings = 0;
    cucap_set_warning_handler(count_cxx_warning, NULL);
    {
        cucap::builder b = cucap::builder::create();
        try {
            b.capture([](cucap::builder &) {
                cr_assert_eq(set_rules("cuStreamEndCapture:1:CUDA_ERROR_UNKNOWN,cuStreamEndCapture:2:CUDA_ERROR_UNKNOWN"), 0);
                throw std::out_of_range("mine");
            });
            cr_assert_fail("capture() did not rethrow");
        } catch (const std::out_of_range &e) {
            cr_assert_str_eq(e.what(), "mine");
        }
        cr_assert_eq(cxx_warnings, 1);
        cr_assert_eq(cxx_warning_code, CUDA_ERROR_UNKNOWN);
        cr_assert_eq(b.state(), CUCAP_BUILDER_CAPTURING, "the capture could not be ended");
        cr_assert_eq(set_rules(""), 0);
    }
    cr_assert_eq(cxx_warnings, 1, "the destructor ended the capture");
    cucap_set_warning_handler(NULL, NULL);
    if (on_simulator()) {
        cr_assert_eq(sim_live_settled("graph"), 0);
        cr_assert_eq(sim_live_settled("stream"), 0);
    }
}

// A pool's destructor whose close fails warns and does not throw; a split
// whose driver call fails throws and hands out nothing.
FAULT_BACKEND_TEST(cxx, destructor_failures_warn_and_failed_calls_leak_nothing)
{
    cucap_set_warning_handler(count_cxx_warning, NULL);
    {
        cucap::pool p = cucap::pool::create(0);
        cr_assert_eq(set_rules("cuMemPoolDestroy:1:CUDA_ERROR_ILLEGAL_STATE"), 0);
    }
    cr_assert_eq(cxx_warnings, 1);
    cr_assert_eq(cxx_warning_code, CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(set_rules(""), 0);
    cucap_set_warning_handler(NULL, NULL);

    long streams = on_simulator() ? sim_live_settled("stream") : 0;
    {
        cucap::builder b = cucap::builder::create();
        b.begin();
        cr_assert_eq(set_rules("cuEventRecord:1:CUDA_ERROR_UNKNOWN"), 0);
        try {
            std::vector<cucap::builder> forks = b.split(4);
            cr_assert_fail("the split did not throw");
        } catch (const cucap::error &e) {
            cr_assert_eq(e.code(), CUDA_ERROR_UNKNOWN);
            cr_assert_not_null(std::strstr(e.what(), "cuEventRecord"), "%s", e.what());
        }
        cr_assert_eq(set_rules(""), 0);
    }
    if (on_simulator())
        cr_assert_eq(sim_live_settled("stream"), streams, "a failed split leaked a stream");
}

// What NVIDIA's graph samples needed of the C++ layer: typed pool memory,
// a wait between two builders of one capture, the reason of a refused
// update, graphs built by hand and cloned.
BACKEND_TEST(cxx, samples_typed_pool_wait_refusal_adopt_and_clone)
{
    unsigned char host[4 * 64];
    CUdeviceptr d = device_buffer(sizeof host);
    cucap::pool pool = cucap::pool::device(0);
    cucap::exec e;
    cucap_update_refusal why;

    {
        cucap::builder b = cucap::builder::create();
        b.begin();
        float *x = pool.alloc<float>(64, b.stream());   // a graph allocation, typed
        cr_assert_not_null(x);
        cr_assert_eq(D.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(x), 0x41, 64 * sizeof(float), b.stream()),
                     CUDA_SUCCESS);
        std::vector<cucap::builder> forks = b.split(2);
        cr_assert_eq(D.cuMemcpyDtoDAsync(d, reinterpret_cast<CUdeviceptr>(x), 64, forks[0].stream()), CUDA_SUCCESS);
        b.wait(forks[0]);
        cr_assert_eq(D.cuMemcpyDtoDAsync(d + 64, d, 64, b.stream()), CUDA_SUCCESS);
        b.join_forks();
        b.end();
        cr_assert_eq(b.complete_into(e, &why), CUCAP_COMPLETED_INSTANTIATED);
        cr_assert_eq(why.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
        for (int launch = 0; launch < 3; launch++) {
            e.launch(b.stream());
            cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
            read_back(d, host, sizeof host);
            cr_assert_eq(host[64 + 63], 0x41, "launch %d", launch);
            pool.free(x, b.stream());   // freed outside the graph, after every launch
            cr_assert_eq(D.cuStreamSynchronize(b.stream()), CUDA_SUCCESS);
        }
        try {
            pool.alloc<double>(SIZE_MAX / 4, b.stream());
            cr_assert_fail("an allocation of more bytes than size_t holds did not throw");
        } catch (const cucap::error &err) {
            cr_assert_not_null(std::strstr(err.what(), "cuMemAllocFromPoolAsync"), "the driver refused it: %s",
                               err.what());
        }
    }
    {
        // one more node: the update is refused, and the reason comes back
        cucap::builder b = cucap::builder::create();
        b.begin();
        for (int i = 0; i < 3; i++)
            cr_assert_eq(D.cuMemsetD8Async(d + 64 * i, (unsigned char)(7 + i), 64, b.stream()), CUDA_SUCCESS);
        b.end();
        cr_assert_eq(b.complete_into(e, &why), CUCAP_COMPLETED_INSTANTIATED);
        cr_assert_eq(why.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "%d", (int)why.result);
        cr_assert_not_null(std::strstr(why.message, "TOPOLOGY_CHANGED"), "%s", why.message);
        cucap::graph copy = b.graph_ref().clone();
        b.reset();
        cucap::exec ce = copy.instantiate();
        ce.launch(nullptr);
        cr_assert_eq(D.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
        read_back(d, host, sizeof host);
        cr_assert_eq(host[128], 9, "the clone ran after its builder was reset");
        e.update(copy);
    }
    {
        CUgraph raw = nullptr;
        cr_assert_eq(D.cuGraphCreate(&raw, 0), CUDA_SUCCESS);
        cucap::graph built = cucap::graph::adopt(raw);
        cr_assert_eq(built.handle(), raw);
        try {
            cucap::graph::adopt(nullptr);
            cr_assert_fail("adopting NULL did not throw");
        } catch (const cucap::error &err) {
            cr_assert_eq(err.code(), CUDA_ERROR_INVALID_VALUE);
        }
    }
    D.cuMemFree(d);
}

// A graph set from C++: a lambda records the step, values come in through
// the parameter block, an exception comes out unchanged and leaves no
// capture behind.
BACKEND_TEST(cxx, graph_set_runs_lambdas_with_values_and_passes_exceptions_on)
{
    struct values { std::uint64_t step, key; };
    CUdeviceptr d = device_buffer(sizeof(values));
    cucap_graph_set_options opts{};
    opts.budget_bytes = 64u << 20;
    cucap::graph_set set = cucap::graph_set::create(0, opts);
    CUstream s = nullptr;
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    auto step = [d](cucap::builder &b) {
        values *block = b.params<values>();
        EXPECT(D.cuMemcpyDtoDAsync(d, reinterpret_cast<CUdeviceptr>(block), sizeof(values), b.stream()) ==
               CUDA_SUCCESS);
    };
    for (std::uint64_t i = 0; i < 5; i++) {
        std::uint32_t key = 7;
        cucap_run_kind kind = set.run(key, step, values{i, key}, s);
        cr_assert_eq(kind, i == 0 ? CUCAP_RUN_INSTANTIATED : CUCAP_RUN_LAUNCHED);
        cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
        values host{};
        cr_assert_eq(D.cuMemcpyDtoH(&host, d, sizeof host), CUDA_SUCCESS);
        cr_assert(host.step == i && host.key == 7);
    }
    try {
        set.run(8, [](cucap::builder &) { throw std::logic_error("the step's own"); }, s);
        cr_assert_fail("the exception did not come out");
    } catch (const std::logic_error &e) {
        cr_assert_str_eq(e.what(), "the step's own");
    }
    cr_assert_eq(set.stats().graphs, 1u);
    cr_assert_eq(set.key_stats(8).has_graph, 0);
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(set.run(8, [](cucap::builder &) {}, s), CUCAP_RUN_INSTANTIATED, "the next run captures again");
    cr_assert_eq(set.run(8, [](cucap::builder &) {}, s), CUCAP_RUN_LAUNCHED);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
    D.cuMemFree(d);
}

// A warm-up from C++: every key of the vector is instantiated ahead of its
// first run, the first exception its function throws comes out once the
// call returns, and release_cached() leaves the set working.
BACKEND_TEST(cxx, graph_set_warms_a_vector_of_keys_and_passes_exceptions_on)
{
    CUdeviceptr d = device_buffer(4);
    cucap_graph_set_options opts{};
    opts.budget_bytes = 64u << 20;
    cucap::graph_set set = cucap::graph_set::create(0, opts);
    CUstream s = nullptr;
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    std::uint32_t current = 0;
    auto step = [d, &current](cucap::builder &b) {
        EXPECT(D.cuMemsetD8Async(d + current, static_cast<unsigned char>(100 + current), 1, b.stream()) == CUDA_SUCCESS);
    };
    const std::vector<std::uint32_t> keys{0, 1, 2};
    int calls = 0;
    set.warm(keys, [&](cucap::builder &b) {
        current = static_cast<std::uint32_t>(calls++);
        step(b);
    });
    cr_assert_eq(calls, 3);
    cr_assert_eq(set.stats().instantiations, 3u);
    cr_assert_eq(set.stats().runs, 0u, "a warm-up runs nothing");
    for (std::uint32_t k : keys) {
        current = k;
        cr_assert_eq(set.run(k, step, s), CUCAP_RUN_LAUNCHED, "key %u was not warmed", k);
    }
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    unsigned char host[3] = {0, 0, 0};
    cr_assert_eq(D.cuMemcpyDtoH(host, d, sizeof host), CUDA_SUCCESS);
    cr_assert(host[0] == 100 && host[1] == 101 && host[2] == 102, "read %u %u %u", host[0], host[1], host[2]);
    try {
        set.warm(std::vector<std::uint32_t>{3}, [](cucap::builder &) { throw std::logic_error("warm's own"); });
        cr_assert_fail("the exception did not come out of the warm-up");
    } catch (const std::logic_error &e) {
        cr_assert_str_eq(e.what(), "warm's own");
    }
    cr_assert_eq(set.key_stats(std::uint32_t{3}).has_graph, 0);
    cr_assert_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    cucap::release_cached();
    current = 0;
    cr_assert_eq(set.run(std::uint32_t{0}, step, s), CUCAP_RUN_LAUNCHED, "the set works after release_cached");
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    D.cuStreamDestroy(s);
    D.cuMemFree(d);
}
