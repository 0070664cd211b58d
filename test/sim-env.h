/* Helpers for suites that run the library on the simulated driver. */
#ifndef CUCAPTURE_TEST_SIM_ENV_H
#define CUCAPTURE_TEST_SIM_ENV_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "sim/sim.h"

/* The simulated driver's path, from `make check`'s environment. */
static inline const char *sim_path(void)
{
    const char *path = getenv("CUCAPTURE_TEST_SIM");

    cr_assert(path && *path, "CUCAPTURE_TEST_SIM is not set: run the suite through make check");
    return path;
}

/* Point the library at the simulated driver; call before any library call. */
static inline void use_simulated_driver(void)
{
    cr_assert_eq(setenv("CUCAPTURE_DRIVER", sim_path(), 1), 0);
}

/* How often the simulator saw the named entry point (after the library loaded it). */
static inline long sim_counter(const char *name)
{
    void *h = dlopen(sim_path(), RTLD_NOW | RTLD_NOLOAD);
    cudasim_counter_fn fn;
    long n;

    cr_assert_not_null(h, "the simulated driver is not loaded");
    fn = (cudasim_counter_fn)dlsym(h, "cudasim_counter");
    cr_assert_not_null(fn, "the simulated driver has no cudasim_counter");
    n = fn(name);
    dlclose(h);
    return n;
}

/* How many live objects of a kind the simulator holds. */
static inline long sim_live(const char *kind)
{
    void *h = dlopen(sim_path(), RTLD_NOW | RTLD_NOLOAD);
    cudasim_live_fn fn;
    long n;

    cr_assert_not_null(h, "the simulated driver is not loaded");
    fn = (cudasim_live_fn)dlsym(h, "cudasim_live");
    cr_assert_not_null(fn);
    n = fn(kind);
    dlclose(h);
    return n;
}

#endif
