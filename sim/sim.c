/* The simulated driver's core: cuGetProcAddress, initialisation, errors,
 * devices, contexts, the lock and the test hooks. */
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error-names.h"
#include "sim-internal.h"

#define SIM_CTX_MAGIC 0x43545853u

/* ---------------------------------------------------------------- lock, fatal, environment */

static pthread_mutex_t sim_mutex;
static pthread_once_t sim_mutex_once = PTHREAD_ONCE_INIT;

static void sim_mutex_init(void)
{
    pthread_mutexattr_t attr;

    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&sim_mutex, &attr);
    pthread_mutexattr_destroy(&attr);
}

static unsigned int sim_lock_depth;   /* the owner's nesting (only the thread holding the lock changes it) */

void sim_lock(void)
{
    pthread_once(&sim_mutex_once, sim_mutex_init);
    pthread_mutex_lock(&sim_mutex);
    sim_lock_depth++;
}

/* The outermost unlock runs the user objects' destructors that came due
 * (sim-user-object.c), with the lock let go. */
void sim_unlock(void)
{
    int run = --sim_lock_depth == 0 && sim_user_objects_due();

    pthread_mutex_unlock(&sim_mutex);
    if (run)
        sim_user_objects_run_due();
}

void sim_fatal(const char *fmt, ...)
{
    va_list ap;

    fputs("cudasim: FATAL: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (the real driver crashes or corrupts memory here)\n", stderr);
    fflush(stderr);
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
    _Exit(134);
}

int sim_driver_version(void)
{
    return sim_env_int("CUDASIM_DRIVER_VERSION", CUDASIM_DEFAULT_DRIVER_VERSION);
}

int sim_env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (!s || !*s)
        return fallback;
    v = strtol(s, &end, 10);
    return *end ? fallback : (int)v;
}

/* ---------------------------------------------------------------- counters */

static atomic_long count_cuInit, count_cuDriverGetVersion, count_cuGetProcAddress, count_cuStreamWaitEvent;

void sim_count_wait(void)
{
    atomic_fetch_add(&count_cuStreamWaitEvent, 1);
}
static atomic_long live[SIM_KIND_COUNT];
static const char *const live_names[SIM_KIND_COUNT] = {
    "stream", "event", "graph", "exec", "pool", "allocation", "pinned host memory",
};

void sim_live_add(enum sim_kind kind, int delta)
{
    atomic_fetch_add(&live[kind], delta);
}

/* Every live object stays reachable from here: an object whose destroy was
 * failed by the fault layer is the driver's leak, not a leak checkers
 * should pin on the code under test. */
static void **tracked;
static size_t tracked_count, tracked_cap;

void sim_track(void *object)
{
    sim_lock();
    if (tracked_count == tracked_cap) {
        size_t cap = tracked_cap ? tracked_cap * 2 : 256;
        void **grown = realloc(tracked, cap * sizeof *grown);
        if (!grown) {
            sim_unlock();
            return;
        }
        tracked = grown;
        tracked_cap = cap;
    }
    tracked[tracked_count++] = object;
    sim_unlock();
}

void sim_untrack(void *object)
{
    size_t i;

    sim_lock();
    for (i = tracked_count; i-- > 0;)
        if (tracked[i] == object) {
            tracked[i] = tracked[--tracked_count];
            break;
        }
    sim_unlock();
}

/* ---------------------------------------------------------------- init, devices */

static atomic_int initialised;

int sim_is_initialised(void)
{
    return atomic_load(&initialised);
}

int sim_device_count(void)
{
    int n = sim_env_int("CUDASIM_DEVICES", 1);
    return n < 0 ? 0 : n > SIM_MAX_DEVICES ? SIM_MAX_DEVICES : n;
}

static struct sim_ctx contexts[SIM_MAX_DEVICES];

static CUresult sim_cuInit(unsigned int flags)
{
    atomic_fetch_add(&count_cuInit, 1);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_device_count() <= 0)
        return CUDA_ERROR_NO_DEVICE;
    sim_lock();
    if (!atomic_load(&initialised)) {
        int i;
        for (i = 0; i < SIM_MAX_DEVICES; i++) {
            contexts[i].magic = SIM_CTX_MAGIC;
            contexts[i].device = i;
        }
        sim_memory_init_device_pools();
        atomic_store(&initialised, 1);
    }
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult sim_cuDriverGetVersion(int *version)
{
    atomic_fetch_add(&count_cuDriverGetVersion, 1);
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = sim_driver_version();
    return CUDA_SUCCESS;
}

static CUresult sim_cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = sim_device_count();
    return CUDA_SUCCESS;
}

static CUresult sim_cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static int device_valid(CUdevice dev)
{
    return dev >= 0 && dev < sim_device_count();
}

static CUresult sim_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "cudasim device %d", (int)dev);
    return CUDA_SUCCESS;
}

static CUresult sim_cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- contexts */

static _Thread_local struct sim_ctx *current_ctx;

struct sim_ctx *sim_ctx_of_device(int device)
{
    return &contexts[device];
}

struct sim_ctx *sim_current_ctx(void)
{
    return current_ctx;
}

int sim_ctx_valid(CUcontext c)
{
    struct sim_ctx *x = (struct sim_ctx *)c;
    int i;

    for (i = 0; i < SIM_MAX_DEVICES; i++)
        if (x == &contexts[i])
            return x->magic == SIM_CTX_MAGIC && i < sim_device_count();
    return sim_green_ctx_valid(x);
}

void sim_clear_current_ctx(void)
{
    current_ctx = NULL;
}

void sim_retain_primary(int device, CUcontext *out)
{
    sim_lock();
    contexts[device].retain_count++;
    sim_unlock();
    *out = (CUcontext)&contexts[device];
}

void sim_release_primary(int device)
{
    sim_lock();
    if (contexts[device].retain_count > 0)
        contexts[device].retain_count--;
    sim_unlock();
}

static CUresult sim_cuDevicePrimaryCtxRetain(CUcontext *out, CUdevice dev)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    sim_lock();
    contexts[dev].retain_count++;
    sim_unlock();
    *out = (CUcontext)&contexts[dev];
    return CUDA_SUCCESS;
}

static CUresult sim_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult rc = CUDA_SUCCESS;

    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    sim_lock();
    if (contexts[dev].retain_count <= 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else
        contexts[dev].retain_count--;
    sim_unlock();
    return rc;
}

static CUresult sim_cuCtxGetCurrent(CUcontext *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    *out = (CUcontext)current_ctx;
    return CUDA_SUCCESS;
}

static CUresult sim_cuCtxSetCurrent(CUcontext c)
{
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (c && !sim_ctx_valid(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    current_ctx = (struct sim_ctx *)c;
    return CUDA_SUCCESS;
}

static CUresult ctx_device(CUcontext c, CUdevice *dev)
{
    struct sim_ctx *x = c ? (struct sim_ctx *)c : current_ctx;

    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!x || !sim_ctx_valid((CUcontext)x))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = x->device;
    return CUDA_SUCCESS;
}

static CUresult sim_cuCtxGetDevice(CUdevice *dev)
{
    return ctx_device(NULL, dev);
}

static CUresult sim_cuCtxGetDevice_v2(CUdevice *dev, CUcontext c)
{
    return ctx_device(c, dev);
}

/* ---------------------------------------------------------------- errors */

/* The symbolic names come from the library's own table (src/error-names.c). */

static CUresult sim_cuGetErrorName(CUresult code, const char **out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = cucap_i_result_name(code);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuGetErrorString(CUresult code, const char **out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cucap_i_result_name(code)) {
        *out = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = "(simulated driver: see the code's name)";
    return CUDA_SUCCESS;
}

const struct sim_entry sim_core_entries[] = {
    SIM_ENTRY(cuInit, 2000),
    SIM_ENTRY(cuDriverGetVersion, 2020),
    SIM_ENTRY(cuGetErrorName, 6000),
    SIM_ENTRY(cuGetErrorString, 6000),
    SIM_ENTRY(cuDeviceGetCount, 2000),
    SIM_ENTRY(cuDeviceGet, 2000),
    SIM_ENTRY(cuDeviceGetName, 2000),
    SIM_ENTRY(cuDeviceGetAttribute, 2000),
    SIM_ENTRY(cuDevicePrimaryCtxRetain, 7000),
    SIM_ENTRY(cuDevicePrimaryCtxRelease, 11000),
    SIM_ENTRY(cuCtxGetCurrent, 4000),
    SIM_ENTRY(cuCtxSetCurrent, 4000),
    SIM_ENTRY(cuCtxGetDevice, 2000),
    { "cuCtxGetDevice", 13000, (void *)sim_cuCtxGetDevice_v2 },
};
const size_t sim_core_entry_count = sizeof sim_core_entries / sizeof sim_core_entries[0];

/* ---------------------------------------------------------------- cuGetProcAddress */

static const struct {
    const struct sim_entry *entries;
    const size_t *count;
} sim_modules[] = {
    { sim_core_entries, &sim_core_entry_count },
    { sim_stream_entries, &sim_stream_entry_count },
    { sim_graph_entries, &sim_graph_entry_count },
    { sim_exec_entries, &sim_exec_entry_count },
    { sim_memory_entries, &sim_memory_entry_count },
    { sim_green_entries, &sim_green_entry_count },
    { sim_user_object_entries, &sim_user_object_entry_count },
    { sim_unmodelled_entries, &sim_unmodelled_entry_count },
};

CUDASIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags, CUdriverProcAddressQueryResult *status);

CUDASIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    int driver = sim_driver_version();
    const struct sim_entry *best = NULL;
    int matched = 0;
    size_t m, i;

    (void)flags;
    atomic_fetch_add(&count_cuGetProcAddress, 1);
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (version > driver) {
        if (status)
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (m = 0; m < sizeof sim_modules / sizeof sim_modules[0]; m++)
        for (i = 0; i < *sim_modules[m].count; i++) {
            const struct sim_entry *e = &sim_modules[m].entries[i];
            if (strcmp(e->name, symbol) != 0)
                continue;
            matched = 1;
            if (e->version <= version && (!best || e->version > best->version))
                best = e;
        }
    if (best) {
        *pfn = best->fn;
        if (status)
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (status)
        *status = matched ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

/* The CUDA 11.3 signature, exported under the plain name as real drivers
 * do; cuda.h maps the plain name to the _v2 variant. */
#undef cuGetProcAddress
CUDASIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

CUDASIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* ---------------------------------------------------------------- test hooks */

CUDASIM_EXPORT long cudasim_counter(const char *name);
CUDASIM_EXPORT long cudasim_live(const char *kind);

CUDASIM_EXPORT long cudasim_counter(const char *name)
{
    if (!name)
        return -1;
    if (!strcmp(name, "cuInit"))
        return atomic_load(&count_cuInit);
    if (!strcmp(name, "cuDriverGetVersion"))
        return atomic_load(&count_cuDriverGetVersion);
    if (!strcmp(name, "cuGetProcAddress"))
        return atomic_load(&count_cuGetProcAddress);
    if (!strcmp(name, "cuStreamWaitEvent"))
        return atomic_load(&count_cuStreamWaitEvent);
    return -1;
}

CUDASIM_EXPORT long cudasim_live(const char *kind)
{
    long retains = 0;
    int i;

    if (kind && !strcmp(kind, "primary context retain")) {
        sim_lock();
        for (i = 0; i < SIM_MAX_DEVICES; i++)
            retains += contexts[i].retain_count;
        sim_unlock();
        return retains;
    }
    for (i = 0; kind && i < SIM_KIND_COUNT; i++)
        if (!strcmp(kind, live_names[i]))
            return atomic_load(&live[i]);
    return -1;
}
