/**
 * \file        cucapture.h
 * \brief       libcucapture: CUDA graphs by stream capture, without the traps
 *
 * The umbrella header.  It includes <cuda.h> and every module header of
 * the library.  Link with `pkg-config --cflags --libs cucapture`.
 *
 * libcucapture does not link against libcuda.  On first use it loads the
 * driver with dlopen(): the library named by the environment variable
 * CUCAPTURE_DRIVER when it is set, otherwise libcuda.so.1.  Every entry
 * point is resolved through cuGetProcAddress at the CUDA version of the
 * headers the library was built against, so the driver must be at least
 * that version.
 */
#ifndef CUCAPTURE_H
#define CUCAPTURE_H

#include <cuda.h>
#include <cucapture/error.h>
#include <cucapture/pool.h>
#include <cucapture/graph.h>
#include <cucapture/builder.h>

/** The version of the headers, for compile-time checks; the library's own
 *  is cucap_version_string(). */
#define CUCAP_VERSION_MAJOR 1
#define CUCAP_VERSION_MINOR 3
#define CUCAP_VERSION_PATCH 0
/** One number to compare: CUCAP_VERSION >= CUCAP_VERSION_NUMBER(1, 3, 0) */
#define CUCAP_VERSION_NUMBER(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define CUCAP_VERSION CUCAP_VERSION_NUMBER(CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/**
 * \brief       Load the driver and initialise it
 *
 * Loads the driver library, checks its version, resolves its entry points
 * and calls cuInit(0).  Optional: every library function that needs the
 * driver does this on first use.  Idempotent and thread-safe: the work is
 * done once per process, and later calls return the first call's outcome.
 *
 * \return      CUDA_SUCCESS;
 *              CUDA_ERROR_SHARED_OBJECT_INIT_FAILED when the driver library
 *              cannot be loaded (the message names the path and the
 *              dlopen() reason);
 *              CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND when it loads but
 *              lacks cuGetProcAddress_v2 (not a CUDA 12.0 or newer driver);
 *              CUDA_ERROR_NOT_SUPPORTED when the driver is older than the
 *              headers the library was built against;
 *              whatever cuInit() returned (for example CUDA_ERROR_NO_DEVICE).
 */
CUCAP_API CUresult cucap_init(cucap_error **err);

/**
 * \brief       The library's version, "1.3.0"
 *
 * \return      A static string.
 */
CUCAP_API const char *cucap_version_string(void);

/**
 * \brief       The loaded driver's version, as cuDriverGetVersion() reports it
 *
 * \return      For example 13000 for CUDA 13.0; 0 before cucap_init() (or
 *              the first library call that needs the driver) and when the
 *              driver library could not be loaded.  A driver that was
 *              loaded but refused (too old, or cuInit() failed) still
 *              reports its version.
 */
CUCAP_API int cucap_driver_version(void);

/**
 * \brief       An entry point of the loaded driver, for programs that do not
 *              link against libcuda themselves
 *
 * Loads the driver like cucap_init() if needed and resolves symbol with
 * cuGetProcAddress at the CUDA version of the headers the library was built
 * against.  Cast the result to the matching PFN_<name>_v<version> type of
 * <cudaTypedefs.h>, for example
 *     PFN_cuMemsetD8Async_v3020 memset_async =
 *         (PFN_cuMemsetD8Async_v3020)cucap_driver_entry_point("cuMemsetD8Async");
 *
 * \return      The function, or NULL when the driver cannot be loaded or
 *              does not have it.
 */
CUCAP_API void *cucap_driver_entry_point(const char *symbol);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_H */
