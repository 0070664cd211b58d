/* The driver loader: paths, bad libraries, versions, repeated and
 * concurrent initialisation. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cucapture.h"
#include "sim-env.h"

#define MISSING_DRIVER "/nonexistent/cucapture-test/libcuda.so.1"

Test(loader, missing_library_names_its_path)
{
    cucap_error *err = NULL;
    CUresult rc;

    cr_assert_eq(setenv("CUCAPTURE_DRIVER", MISSING_DRIVER, 1), 0);
    cr_assert_eq(cucap_driver_version(), 0);
    rc = cucap_init(&err);
    cr_assert_eq(rc, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
    cr_assert_not_null(err);
    cr_assert_eq(cucap_error_code(err), rc);
    cr_assert_str_eq(cucap_error_name(err), "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED");
    cr_assert_not_null(strstr(cucap_error_message(err), MISSING_DRIVER),
                       "message does not name the path: %s", cucap_error_message(err));
    cr_assert_eq(strncmp(cucap_error_message(err), "cucap_init: ", 12), 0,
                 "message does not start with the function: %s", cucap_error_message(err));
    cr_assert_eq(cucap_driver_version(), 0);
    cucap_error_free(err);
}

/* CUCAPTURE_DRIVER=simulated where the simulated driver is not installed
 * (a build tree: it is installed by make install) says where to get it. */
Test(loader, a_missing_simulated_driver_names_its_package)
{
    cucap_error *err = NULL;

    if (access(CUCAP_SIMULATED_DRIVER, F_OK) == 0)
        cr_skip_test("the simulated driver is installed at %s", CUCAP_SIMULATED_DRIVER);
    cr_assert_eq(setenv("CUCAPTURE_DRIVER", "simulated", 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "simulated driver"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), CUCAP_SIMULATED_DRIVER), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "cucapture-sim"), "%s", cucap_error_message(err));
    cucap_error_free(err);
}

Test(loader, failure_is_reported_again_on_every_call)
{
    cucap_error *first = NULL, *second = NULL;

    cr_assert_eq(setenv("CUCAPTURE_DRIVER", MISSING_DRIVER, 1), 0);
    cr_assert_eq(cucap_init(&first), CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
    cr_assert_eq(cucap_init(NULL), CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
    cr_assert_eq(cucap_init(&second), CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
    cr_assert_str_eq(cucap_error_message(first), cucap_error_message(second));
    cr_assert_neq(first, second, "each call must hand out its own error object");
    cucap_error_free(first);
    cucap_error_free(second);
}

Test(loader, library_without_cuGetProcAddress)
{
    const char *dir = getenv("CUCAPTURE_TEST_FIXTURES");
    char path[4096];
    cucap_error *err = NULL;

    cr_assert_not_null(dir, "CUCAPTURE_TEST_FIXTURES is not set: run through make check");
    snprintf(path, sizeof path, "%s/libnoproc.so", dir);
    cr_assert_eq(setenv("CUCAPTURE_DRIVER", path, 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    cr_assert_not_null(strstr(cucap_error_message(err), path), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "cuGetProcAddress"), "%s",
                       cucap_error_message(err));
    cr_assert_eq(cucap_driver_version(), 0);
    cucap_error_free(err);
}

Test(loader, default_library_is_libcuda_so_1)
{
    cucap_error *err = NULL;
    CUresult rc;

    cr_assert_eq(unsetenv("CUCAPTURE_DRIVER"), 0);
    rc = cucap_init(&err);
    if (rc == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) {
        cr_assert_not_null(strstr(cucap_error_message(err), "'libcuda.so.1'"), "%s",
                           cucap_error_message(err));
    } else if (rc == CUDA_SUCCESS) {
        cr_assert_null(err);
        cr_assert_geq(cucap_driver_version(), 12030, "the library refuses drivers below CUDA 12.3");
    } else {
        /* a driver that is there but has no device or is too old */
        cr_assert_not_null(err);
        cr_assert_eq(cucap_error_code(err), rc);
    }
    cucap_error_free(err);
}

Test(loader, simulated_driver_loads_once)
{
    cucap_error *err = NULL;

    use_simulated_driver();
    cr_assert_eq(cucap_init(&err), CUDA_SUCCESS);
    cr_assert_null(err);
    cr_assert_eq(cucap_driver_version(), CUDASIM_DEFAULT_DRIVER_VERSION);
    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    cr_assert_eq(cucap_init(&err), CUDA_SUCCESS);
    cr_assert_null(err);
    cr_assert_eq(sim_counter("cuInit"), 1);
    cr_assert_eq(sim_counter("cuDriverGetVersion"), 1);
}

#define INIT_THREADS 32

struct init_race {
    pthread_barrier_t start;
    CUresult rc[INIT_THREADS];
    char message[INIT_THREADS][512];
};

struct init_arg {
    struct init_race *race;
    int index;
};

static void *init_thread(void *p)
{
    struct init_arg *arg = p;
    cucap_error *err = NULL;

    pthread_barrier_wait(&arg->race->start);
    arg->race->rc[arg->index] = cucap_init(&err);
    snprintf(arg->race->message[arg->index], sizeof arg->race->message[0], "%s",
             cucap_error_message(err));
    cucap_error_free(err);
    return NULL;
}

static void run_init_race(struct init_race *race)
{
    pthread_t threads[INIT_THREADS];
    struct init_arg args[INIT_THREADS];
    int i;

    cr_assert_eq(pthread_barrier_init(&race->start, NULL, INIT_THREADS), 0);
    for (i = 0; i < INIT_THREADS; i++) {
        args[i].race = race;
        args[i].index = i;
        cr_assert_eq(pthread_create(&threads[i], NULL, init_thread, &args[i]), 0);
    }
    for (i = 0; i < INIT_THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&race->start);
}

Test(loader, concurrent_init_loads_once)
{
    static struct init_race race;
    int i;

    use_simulated_driver();
    run_init_race(&race);
    for (i = 0; i < INIT_THREADS; i++)
        cr_assert_eq(race.rc[i], CUDA_SUCCESS, "thread %d: %s", i, race.message[i]);
    cr_assert_eq(sim_counter("cuInit"), 1);
    cr_assert_eq(cucap_driver_version(), CUDASIM_DEFAULT_DRIVER_VERSION);
}

Test(loader, concurrent_init_failure_is_the_same_everywhere)
{
    static struct init_race race;
    int i;

    cr_assert_eq(setenv("CUCAPTURE_DRIVER", MISSING_DRIVER, 1), 0);
    run_init_race(&race);
    for (i = 0; i < INIT_THREADS; i++) {
        cr_assert_eq(race.rc[i], CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
        cr_assert_str_eq(race.message[i], race.message[0]);
    }
}

Test(loader, driver_below_the_floor_is_refused)
{
    cucap_error *err = NULL;
    /* keep the simulator mapped after the library unloads it, to read its counters */
    void *pin = dlopen(sim_path(), RTLD_NOW | RTLD_LOCAL);

    cr_assert_not_null(pin);
    use_simulated_driver();
    cr_assert_eq(setenv("CUDASIM_DRIVER_VERSION", "12020", 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_not_null(strstr(cucap_error_message(err), "CUDA 12.2"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "CUDA 12.3 or newer"), "%s", cucap_error_message(err));
    cr_assert_eq(sim_counter("cuInit"), 0, "an unsupported driver must not be initialised");
    cr_assert_eq(sim_counter("cuDriverGetVersion"), 1);
    cr_assert_eq(cucap_driver_version(), 12020, "the version found is still reported");
    cucap_error_free(err);
    dlclose(pin);
}

Test(loader, cuInit_failure_is_returned)
{
    cucap_error *err = NULL;

    use_simulated_driver();
    cr_assert_eq(setenv("CUDASIM_DEVICES", "0", 1), 0);
    cr_assert_eq(cucap_init(&err), CUDA_ERROR_NO_DEVICE);
    cr_assert_not_null(strstr(cucap_error_message(err), "cuInit"), "%s", cucap_error_message(err));
    cr_assert_not_null(strstr(cucap_error_message(err), "CUDA_ERROR_NO_DEVICE"), "%s",
                       cucap_error_message(err));
    /* the driver itself loaded, so its version is known */
    cr_assert_eq(cucap_driver_version(), CUDASIM_DEFAULT_DRIVER_VERSION);
    cucap_error_free(err);
}

Test(loader, version_string)
{
    cr_assert_str_eq(cucap_version_string(), PACKAGE_VERSION);
    cr_assert_str_eq(cucap_version_string(), PACKAGE_VERSION);
}

/* What the simulated driver does not model answers NOT_SUPPORTED and says
 * which entry point, once: never a crash, never a silent success. */
static void redirect_stderr(void)
{
    cr_redirect_stderr();
}

Test(loader, simulated_driver_refuses_what_it_does_not_model, .init = redirect_stderr)
{
    PFN_cuEventElapsedTime_v2000 elapsed;
    PFN_cuLaunchKernel_v4000 launch;
    float ms = -1;
    char buf[512] = "";
    FILE *err;
    size_t n;

    use_simulated_driver();
    cr_assert_eq(cucap_init(NULL), CUDA_SUCCESS);
    elapsed = (PFN_cuEventElapsedTime_v2000)cucap_driver_entry_point("cuEventElapsedTime");
    launch = (PFN_cuLaunchKernel_v4000)cucap_driver_entry_point("cuLaunchKernel");
    cr_assert_not_null(elapsed);
    cr_assert_not_null(launch);
    cr_assert_eq(elapsed(&ms, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(elapsed(&ms, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(ms, -1, "a refused call wrote its output");
    cr_assert_eq(launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    /* a name no driver has is still not found */
    cr_assert_null(cucap_driver_entry_point("cuNoSuchEntryPoint"));
    fflush(stderr);
    err = cr_get_redirected_stderr();
    n = fread(buf, 1, sizeof buf - 1, err);
    buf[n] = '\0';
    cr_assert_not_null(strstr(buf, "cuEventElapsedTime is not modelled by the simulated driver"), "%s", buf);
    cr_assert_null(strstr(strstr(buf, "cuEventElapsedTime") + 1, "cuEventElapsedTime"), "said twice: %s", buf);
    cr_assert_not_null(strstr(buf, "cuLaunchKernel: the simulated driver runs no kernels"), "%s", buf);
}
