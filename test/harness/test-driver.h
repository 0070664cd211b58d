/* The tests' own table of driver entry points (the library's table holds
 * only what src/ calls): every entry the library resolves plus
 * test-driver-entries.h, each resolved at the same ABI version through
 * the loaded driver, so the fault layer wraps them alike.  Use D.name(...)
 * once the library has loaded a driver (cucap_init). */
#ifndef CUCAPTURE_TEST_DRIVER_H
#define CUCAPTURE_TEST_DRIVER_H

#include <pthread.h>
#include <string.h>
#ifdef __cplusplus   /* the C++ suite (test-cxx.cc) */
#  include <atomic>
using std::atomic_int;
using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;
#else
#  include <stdatomic.h>
#endif

#include "driver.h"

struct test_driver {
#define CUCAP_DRIVER_ENTRY(field, symbol, version, optional) PFN_##symbol##_v##version field;
#include "driver-entries.h"
#include "test-driver-entries.h"
#undef CUCAP_DRIVER_ENTRY
};

/* One table per translation unit, filled on first use after the library
 * loaded a driver. */
static struct test_driver test_driver_table;
static atomic_int test_driver_filled;
static pthread_mutex_t test_driver_lock = PTHREAD_MUTEX_INITIALIZER;

static inline struct test_driver *test_driver(void)
{
    if (atomic_load_explicit(&test_driver_filled, memory_order_acquire))
        return &test_driver_table;
    pthread_mutex_lock(&test_driver_lock);
    if (!atomic_load_explicit(&test_driver_filled, memory_order_relaxed) &&
        cucap_i_driver_entry_point_at("cuGetErrorName", CUCAP_DRIVER_FLOOR)) {
        void *fn;
#define CUCAP_DRIVER_ENTRY(field, symbol, version, optional)                                  \
        fn = cucap_i_driver_entry_point_at(#symbol, version);                                 \
        memcpy(&test_driver_table.field, &fn, sizeof fn);
#include "driver-entries.h"
#include "test-driver-entries.h"
#undef CUCAP_DRIVER_ENTRY
        atomic_store_explicit(&test_driver_filled, 1, memory_order_release);
    }
    pthread_mutex_unlock(&test_driver_lock);
    return &test_driver_table;
}

#define D (*test_driver())

/* cuStreamSynchronize in relaxed thread mode: it still invalidates a
 * capture its stream is part of, but never other threads' global captures
 * (a global-mode call racing other threads' captures crashes the real
 * driver itself: test/stress-threads.c). */
static inline CUresult relaxed_synchronize(CUstream s)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult rc;

    D.cuThreadExchangeStreamCaptureMode(&mode);
    rc = D.cuStreamSynchronize(s);
    D.cuThreadExchangeStreamCaptureMode(&mode);
    return rc;
}

#endif
