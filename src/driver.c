/* Loading the CUDA driver: dlopen + cuGetProcAddress, once per process.
 * The only file that knows where the driver's entry points come from. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device-table.h"
#include "driver.h"
#include "error.h"

#define CUCAP_DEFAULT_DRIVER "libcuda.so.1"

_Alignas(64) struct cucap_driver cucap_i_drv;

/* The outcome of the one load, kept so that every later call can report
 * it again in its own error object. */
static struct {
    CUresult code;
    char message[1024];
} load_result;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static PFN_cuGetProcAddress_v12000 loaded_get_proc;
static atomic_int driver_loaded;   /* 1 once the table is filled */
static atomic_int driver_version;
static atomic_int device_count;    /* the devices the driver sees, 0 when it could not say */

static void load_failed(CUresult code, const char *fmt, ...) CUCAP_PRINTF(2, 3);

/* secure_getenv where there is one: a setuid or setgid program ignores
 * CUCAPTURE_DRIVER and loads libcuda.so.1. */
static const char *environment(const char *name)
{
#ifdef HAVE_SECURE_GETENV
    return secure_getenv(name);
#else
    return getenv(name);
#endif
}

static void load_failed(CUresult code, const char *fmt, ...)
{
    va_list ap;

    load_result.code = code;
    va_start(ap, fmt);
    vsnprintf(load_result.message, sizeof load_result.message, fmt, ap);
    va_end(ap);
}

/* The installed simulated driver: libdir/cucapture/libcudasim.so, looked
 * for first beside the libcucapture this code was loaded from, so that a
 * moved installation loads its own, then where it was installed.  path
 * receives the last one tried. */
static void *open_simulated(char *path, size_t size)
{
    const char *slash;
    Dl_info self;
    void *handle;

    if (dladdr((void *)&open_simulated, &self) && self.dli_fname && (slash = strrchr(self.dli_fname, '/'))) {
        snprintf(path, size, "%.*s/%s/libcudasim.so", (int)(slash - self.dli_fname), self.dli_fname, PACKAGE);
        if (strcmp(path, CUCAP_SIMULATED_DRIVER) && (handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
            return handle;
    }
    snprintf(path, size, "%s", CUCAP_SIMULATED_DRIVER);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void load_driver(void)
{
    const char *path = environment("CUCAPTURE_DRIVER");
    PFN_cuGetProcAddress_v12000 get_proc;
    PFN_cuDriverGetVersion_v2020 get_version = NULL;
    CUdriverProcAddressQueryResult found;
    CUresult rc;
    void *handle;
    int version = 0;
    int simulated = path && !strcmp(path, "simulated");   /* the installed simulated driver (cucapture-sim(7)) */
    char sim_path[4096];

    if (!path || !*path)
        path = CUCAP_DEFAULT_DRIVER;
    if (simulated) {
        handle = open_simulated(sim_path, sizeof sim_path);
        path = sim_path;
    } else
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        if (simulated)
            load_failed(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
                        "cannot load the simulated driver (CUCAPTURE_DRIVER=simulated) '%s': %s; it is installed "
                        "by libcucapture's make install, and on Debian by the package cucapture-sim", path,
                        why ? why : "dlopen failed");
        else
            load_failed(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "cannot load the CUDA driver library '%s': %s", path,
                        why ? why : "dlopen failed");
        return;
    }
    get_proc = (PFN_cuGetProcAddress_v12000)dlsym(handle, "cuGetProcAddress_v2");
    if (!get_proc) {
        load_failed(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
                    "the CUDA driver library '%s' does not export cuGetProcAddress_v2; "
                    "it is not a CUDA 12.0 or newer driver", path);
        dlclose(handle);
        return;
    }

    /* cuDriverGetVersion exists in every driver: the floor is checked
     * before anything else is asked for. */
    rc = get_proc("cuDriverGetVersion", (void **)&get_version, 2020,
                  CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (rc == CUDA_SUCCESS && get_version)
        rc = get_version(&version);
    else if (rc == CUDA_SUCCESS)
        rc = CUDA_ERROR_NOT_FOUND;
    if (rc != CUDA_SUCCESS) {
        load_failed(rc, "cuDriverGetVersion of the CUDA driver library '%s' failed: " CUCAP_I_RESULT_FMT,
                    path, CUCAP_I_RESULT_ARGS(rc));
        dlclose(handle);
        return;
    }
    atomic_store_explicit(&driver_version, version, memory_order_relaxed);
    if (version < CUCAP_DRIVER_FLOOR) {
        load_failed(CUDA_ERROR_NOT_SUPPORTED,
                    "the CUDA driver '%s' supports CUDA %d.%d; libcucapture needs CUDA %d.%d or newer "
                    "(driver series 545 or newer)", path, version / 1000, version % 1000 / 10,
                    CUCAP_DRIVER_FLOOR / 1000, CUCAP_DRIVER_FLOOR % 1000 / 10);
        dlclose(handle);
        return;
    }

    /* each entry at the version of the variant the library calls; a
     * required one the driver lacks stops the load */
#define CUCAP_DRIVER_ENTRY(field, symbol, at, optional)                                           \
    {                                                                                             \
        void *fn = NULL;                                                                          \
        if (get_proc(#symbol, &fn, at, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||     \
            found != CU_GET_PROC_ADDRESS_SUCCESS)                                                 \
            fn = NULL;                                                                            \
        memcpy(&cucap_i_drv.field, &fn, sizeof fn);                                               \
        if (!fn && !(optional)) {                                                                 \
            load_failed(CUDA_ERROR_NOT_SUPPORTED, "the CUDA driver '%s' (CUDA %d.%d) lacks %s at "   \
                        "CUDA %d.%d, which libcucapture needs", path, version / 1000,              \
                        version % 1000 / 10, #symbol, (at) / 1000, (at) % 1000 / 10);             \
            dlclose(handle);                                                                      \
            return;                                                                               \
        }                                                                                         \
    }
#include "driver-entries.h"
#undef CUCAP_DRIVER_ENTRY

    loaded_get_proc = get_proc;
    /* The handle stays open for the life of the process: resolved entry
     * points and driver threads must outlive every library call. */
    atomic_store_explicit(&driver_loaded, 1, memory_order_release);
    cucap_i_error_use_driver(cucap_i_drv.cuGetErrorName, cucap_i_drv.cuGetErrorString);

    rc = cucap_i_drv.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        load_failed(rc, "cuInit of the CUDA driver '%s' failed: " CUCAP_I_RESULT_FMT, path,
                    CUCAP_I_RESULT_ARGS(rc));
        return;
    }
    {   /* the count a process sees is fixed once cuInit succeeded */
        int count = 0;
        if (cucap_i_drv.cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0) {
            atomic_store_explicit(&device_count, count, memory_order_relaxed);
            cucap_i_device_table_size(count);
        }
    }
}

int cucap_i_driver_loaded(void)
{
    return atomic_load_explicit(&driver_loaded, memory_order_acquire);
}

CUresult cucap_i_driver(const char *caller, cucap_error **err)
{
    pthread_once(&load_once, load_driver);
    if (load_result.code == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    return cucap_i_fail(err, load_result.code, "%s: %s", caller, load_result.message);
}

CUresult cucap_i_check_device(CUdevice dev, const char *caller, cucap_error **err)
{
    int count = 0;
    CUresult rc;

    if ((rc = cucap_i_driver(caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuDeviceGetCount(&count)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuDeviceGetCount");
    if (dev < 0 || dev >= count)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE,
                            "%s: device ordinal %d is out of range (the driver reports %d device%s)", caller,
                            (int)dev, count, count == 1 ? "" : "s");
    return CUDA_SUCCESS;
}

int cucap_i_one_device(void)
{
    return atomic_load_explicit(&device_count, memory_order_relaxed) == 1;
}

CUresult cucap_init(cucap_error **err)
{
    return cucap_i_driver("cucap_init", err);
}

const char *cucap_version_string(void)
{
    return PACKAGE_VERSION;
}

int cucap_driver_version(void)
{
    return atomic_load_explicit(&driver_version, memory_order_relaxed);
}

void *cucap_i_driver_entry_point_at(const char *symbol, int cuda_version)
{
    CUdriverProcAddressQueryResult found;
    void *fn = NULL;

    if (!symbol || cucap_i_driver("cucap_driver_entry_point", NULL) != CUDA_SUCCESS)
        return NULL;
    if (loaded_get_proc(symbol, &fn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS)
        return NULL;
    return fn;
}

cucap_driver_fn cucap_driver_entry_point(const char *symbol)
{
    return cucap_driver_entry_point_version(symbol, CUCAP_ENTRY_POINT_ABI);
}

cucap_driver_fn cucap_driver_entry_point_version(const char *symbol, int cuda_version)
{
    void *fn = cuda_version > 0 ? cucap_i_driver_entry_point_at(symbol, cuda_version) : NULL;
    cucap_driver_fn out;

    memcpy(&out, &fn, sizeof out);   /* an object pointer that holds a function's address */
    return out;
}

