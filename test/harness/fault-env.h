/* Helpers for suites that run the library over the fault-injecting driver. */
#ifndef CUCAPTURE_TEST_FAULT_ENV_H
#define CUCAPTURE_TEST_FAULT_ENV_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "fault/fault.h"

static inline void *fault_handle(void)
{
    const char *path = getenv("CUCAPTURE_TEST_FAULT");
    void *h;

    cr_assert(path && *path, "CUCAPTURE_TEST_FAULT is not set: run the suite through make check");
    h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h, "the fault driver is not loaded");
    return h;
}

static inline int set_rules(const char *rules)
{
    void *h = fault_handle();
    cudafault_set_rules_fn fn = (cudafault_set_rules_fn)dlsym(h, "cudafault_set_rules");
    int rc = fn(rules);
    dlclose(h);
    return rc;
}

static inline long calls(const char *name)
{
    void *h = fault_handle();
    long n = ((cudafault_calls_fn)dlsym(h, "cudafault_calls"))(name);
    dlclose(h);
    return n;
}

static inline long injected(void)
{
    void *h = fault_handle();
    long n = ((cudafault_injected_fn)dlsym(h, "cudafault_injected"))();
    dlclose(h);
    return n;
}

static inline void use_fault_driver_over(const char *driver)
{
    const char *fault = getenv("CUCAPTURE_TEST_FAULT");

    cr_assert(fault && *fault, "CUCAPTURE_TEST_FAULT is not set: run the suite through make check");
    cr_assert_eq(setenv("CUCAPTURE_DRIVER", fault, 1), 0);
    if (driver)
        cr_assert_eq(setenv("CUDAFAULT_DRIVER", driver, 1), 0);
    else
        cr_assert_eq(unsetenv("CUDAFAULT_DRIVER"), 0);
}

static inline const char *last_injected(void)
{
    void *h = fault_handle();
    const char *name = ((cudafault_last_injected_fn)dlsym(h, "cudafault_last_injected"))();
    dlclose(h);
    return name;
}

#endif
