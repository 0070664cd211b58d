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

/* A test hook of the loaded simulator (see sim/sim.h). */
static inline void *sim_hook(const char *name)
{
    void *h = dlopen(sim_path(), RTLD_NOW | RTLD_NOLOAD), *fn;

    cr_assert_not_null(h, "the simulated driver is not loaded");
    fn = dlsym(h, name);
    cr_assert_not_null(fn, "the simulated driver has no %s", name);
    dlclose(h);   /* the library keeps it loaded */
    return fn;
}

/* How often the simulator saw the named entry point (after the library loaded it). */
static inline long sim_counter(const char *name)
{
    return ((cudasim_counter_fn)sim_hook("cudasim_counter"))(name);
}

/* How many live objects of a kind the simulator holds. */
static inline long sim_live(const char *kind)
{
    return ((cudasim_live_fn)sim_hook("cudasim_live"))(kind);
}

#endif
