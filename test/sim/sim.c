/* The simulated driver's entry, cuGetProcAddress, and initialisation. */
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ---------------------------------------------------------------- state */

static atomic_int sim_initialised;
static atomic_long count_cuInit;
static atomic_long count_cuDriverGetVersion;
static atomic_long count_cuGetProcAddress;

static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (!s || !*s)
        return fallback;
    v = strtol(s, &end, 10);
    return *end ? fallback : (int)v;
}

static int sim_device_count(void)
{
    return env_int("CUDASIM_DEVICES", 1);
}

/* ---------------------------------------------------------------- entry points */

static CUresult sim_cuInit(unsigned int flags)
{
    atomic_fetch_add(&count_cuInit, 1);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_device_count() <= 0)
        return CUDA_ERROR_NO_DEVICE;
    atomic_store(&sim_initialised, 1);
    return CUDA_SUCCESS;
}

static CUresult sim_cuDriverGetVersion(int *version)
{
    atomic_fetch_add(&count_cuDriverGetVersion, 1);
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = env_int("CUDASIM_DRIVER_VERSION", CUDA_VERSION);
    return CUDA_SUCCESS;
}

static const struct {
    CUresult code;
    const char *name;
    const char *text;
} sim_errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
};

static CUresult sim_cuGetErrorName(CUresult code, const char **out)
{
    size_t i;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (sim_errors[i].code == code) {
            *out = sim_errors[i].name;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuGetErrorString(CUresult code, const char **out)
{
    size_t i;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (sim_errors[i].code == code) {
            *out = sim_errors[i].text;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult sim_cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!atomic_load(&sim_initialised))
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = sim_device_count();
    return CUDA_SUCCESS;
}

static CUresult sim_cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!atomic_load(&sim_initialised))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- cuGetProcAddress */

/* Each entry: the name, the CUDA version that introduced the variant the
 * simulator implements, and the function. */
static const struct {
    const char *name;
    int version;
    void *fn;
} sim_entries[] = {
    { "cuInit", 2000, (void *)sim_cuInit },
    { "cuDriverGetVersion", 2020, (void *)sim_cuDriverGetVersion },
    { "cuGetErrorName", 6000, (void *)sim_cuGetErrorName },
    { "cuGetErrorString", 6000, (void *)sim_cuGetErrorString },
    { "cuDeviceGetCount", 2000, (void *)sim_cuDeviceGetCount },
    { "cuDeviceGet", 2000, (void *)sim_cuDeviceGet },
};

CUDASIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags, CUdriverProcAddressQueryResult *status);

CUDASIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    size_t i;
    int driver = env_int("CUDASIM_DRIVER_VERSION", CUDA_VERSION);
    int matched = 0;

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
    for (i = 0; i < sizeof sim_entries / sizeof sim_entries[0]; i++) {
        if (strcmp(sim_entries[i].name, symbol) != 0)
            continue;
        matched = 1;
        if (sim_entries[i].version <= version) {
            *pfn = sim_entries[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
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
    return -1;
}
