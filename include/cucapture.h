/**
 * \file        cucapture.h
 * \brief       libcucapture: CUDA graphs by stream capture, without the traps
 *
 * The umbrella header.  It includes <cuda.h> and every module header of
 * the library.  Link with `pkg-config --cflags --libs cucapture`.
 *
 * The call sequence:
 *
 *     cucap_builder_create(dev, &b, &err);           a builder, with a stream
 *     cucap_builder_begin(b, mode, &err);            capture on it
 *     ...work on cucap_builder_stream(b); cucap_builder_split() for forks,
 *        cucap_builder_join() to bring them back...
 *     cucap_builder_end(b, &err);                    the graph
 *     cucap_builder_complete(b, NULL, &exec, &err);  an executable graph
 *     cucap_exec_launch(exec, stream, &err);         as often as needed
 *     cucap_exec_destroy(exec); cucap_builder_destroy(b);
 *
 * Who frees what: every object a call hands out is the caller's and is
 * freed with its own call, in any order, also after an error: builders
 * and forks with cucap_builder_destroy(), executable graphs with
 * cucap_exec_destroy(), graph references with cucap_graph_unref(), pools
 * with cucap_pool_close() or cucap_pool_destroy() (not the one of
 * cucap_device_pool(), which the library keeps), errors with
 * cucap_error_free().  Each of these accepts NULL.  What the library keeps
 * for reuse after that, cucap_release_cached() gives back.
 *
 * Threads: an object is used by one thread at a time, except that
 *   - the builders of one capture (a primary and its forks) may be used
 *     from different threads at once; the application's own work on
 *     their streams then goes through cucap_builder_enqueue();
 *   - an executable graph with a parameter block may be launched with
 *     cucap_exec_launch_params() from several threads at once, and so may
 *     every executable graph that reads one block: the block's launches
 *     are serialized, each with its own values;
 *   - a graph reference may be referenced, released and instantiated from
 *     any thread;
 *   - a pool may allocate and free from several threads at once (close or
 *     destroy it once no other thread uses it);
 *   - a graph set may be run and warmed from several threads at once
 *     (destroy it once no other thread uses it);
 *   - the library's functions that take no object (cucap_init(),
 *     cucap_device_pool(), ...) are thread-safe; cucap_release_cached()
 *     runs while no other thread is inside the library.
 * A thread needs no current context: every call makes the context it
 * needs current and gives the thread's own back.
 *
 * Calls that can block: none waits for the GPU, but cucap_release_cached()
 * where it frees pinned host memory or the device words the per-thread,
 * legacy and blocking streams wait on (it says when).  The last release of a
 * capture's parameter block (from cucap_exec_destroy(),
 * cucap_graph_unref(), cucap_builder_destroy(), cucap_builder_reset(),
 * the updates and cucap_builder_params()) gives the block back to the
 * library's memory pool behind the last launch that reads it, on a stream
 * of its own, and returns at once; only when the driver refuses that does
 * it wait on the host for that launch, with a warning.
 *
 * libcucapture does not link against libcuda.  On first use it loads the
 * driver with dlopen(): the library named by the environment variable
 * CUCAPTURE_DRIVER when it is set, otherwise libcuda.so.1.  Every entry
 * point is resolved through cuGetProcAddress at the oldest CUDA version
 * whose ABI variant the library calls, so one build runs on every driver
 * from CUDA 12.3 (driver series 545) up, whatever headers it was built
 * with.  Features that need newer drivers (IF-ELSE and SWITCH nodes: 12.8)
 * return CUDA_ERROR_NOT_SUPPORTED on older ones, naming the version.
 */
#ifndef CUCAPTURE_H
#define CUCAPTURE_H

#if defined(__has_include)
#  if !__has_include(<cuda.h>)
#    error "libcucapture needs cuda.h (CUDA 12.3 or newer): install nvidia-cuda-dev, or add your CUDA toolkit's include directory (for example -I/usr/local/cuda/include)"
#  endif
#endif
#include <cuda.h>
#include <cucapture/error.h>
#include <cucapture/pool.h>
#include <cucapture/graph.h>
#include <cucapture/builder.h>
#include <cucapture/relaxed.h>
#include <cucapture/graph-set.h>

/** The version of the headers, for compile-time checks; the library's own
 *  is cucap_version_string(). */
#define CUCAP_VERSION_MAJOR 1
#define CUCAP_VERSION_MINOR 6
#define CUCAP_VERSION_PATCH 0
/** One number to compare: CUCAP_VERSION >= CUCAP_VERSION_NUMBER(1, 3, 0) */
#define CUCAP_VERSION_NUMBER(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define CUCAP_VERSION CUCAP_VERSION_NUMBER(CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/** A driver function of any type: cast it to its PFN_<name>_v<version>
 *  type.  A function pointer type, so the cast is clean under -Wpedantic
 *  in C and C++ (an object pointer is not). */
typedef void (*cucap_driver_fn)(void);

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
 *              CUDA_ERROR_NOT_SUPPORTED when the driver is older than
 *              CUDA 12.3, whatever headers the library was built with, or
 *              lacks an entry point of CUDA 12.3 the library needs;
 *              whatever cuInit() returned (for example CUDA_ERROR_NO_DEVICE).
 */
CUCAP_API CUresult cucap_init(cucap_error **err);

/**
 * \brief       The library's version, such as "1.5.0"
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
 * cuGetProcAddress at CUDA 12.3 (CUCAP_ENTRY_POINT_ABI), whatever headers
 * the library was built with: every build returns the variant current at
 * CUDA 12.3, so a program gets the same function type from every build.
 * Cast the result to the matching PFN_<name>_v<version> type of
 * <cudaTypedefs.h>, the newest one not newer than 12030, for example
 *     PFN_cuMemsetD8Async_v3020 memset_async =
 *         (PFN_cuMemsetD8Async_v3020)cucap_driver_entry_point("cuMemsetD8Async");
 *
 * \param       symbol  A driver entry point's name, such as "cuMemsetD8Async".
 * \return      The function, or NULL when the driver cannot be loaded or
 *              does not have it.
 */
CUCAP_API cucap_driver_fn cucap_driver_entry_point(const char *symbol);

/** The CUDA version at which cucap_driver_entry_point() resolves. */
#define CUCAP_ENTRY_POINT_ABI 12030

/**
 * \brief       An entry point at the ABI variant of a given CUDA version
 *
 * Resolves symbol with cuGetProcAddress at cuda_version: the newest variant
 * not newer than that version, as the driver defines it.  A version newer
 * than the loaded driver gives NULL.  For example
 *     PFN_cuStreamGetCtx_v12050 get_ctx = (PFN_cuStreamGetCtx_v12050)
 *         cucap_driver_entry_point_version("cuStreamGetCtx", 12050);
 *
 * \param       symbol        A driver entry point's name.
 * \param       cuda_version  1000 * major + 10 * minor, for example 12050.
 * \return      The function, or NULL when the driver cannot be loaded, is
 *              older than cuda_version, or does not have the symbol.
 */
CUCAP_API cucap_driver_fn cucap_driver_entry_point_version(const char *symbol, int cuda_version);

/**
 * \brief       Give back everything the library keeps for reuse
 *
 * The library keeps, for the next objects it makes: freed builder, capture,
 * graph owner and pool objects (a few of each), builders destroyed between
 * captures (with their stream and their last forks'), cached streams and
 * events, the pool objects of cucap_device_pool() and the memory those
 * device pools keep under the release threshold the library raised, the
 * memory pools of parameter blocks (one a device), the pinned host buffers
 * that launches' values above 64 KiB went through (those whose copies are
 * done), and a retain of each device's primary context it used; the device
 * words through which graph sets handed work back to the per-thread, legacy
 * and blocking streams; and the thread that gives host callbacks' data back
 * (cucap_builder_host_callback()), which this call runs the frees due on and
 * stops.  This call destroys and releases all of them, so that a program
 * that destroyed its objects and calls it before it exits (or before
 * dlclose() of a plugin that uses the library) leaves no memory, stream,
 * event or context retain of the library's behind.
 *
 * Objects still alive keep what they hold and give it back when they are
 * destroyed; what the library keeps after this call, it keeps again until
 * the next one.  Call it while no other thread is inside a library call.
 * The pool pointers returned by cucap_device_pool() before the call are
 * not valid after it (call cucap_device_pool() again).  It waits for the
 * GPU only where the driver does: freeing pinned host memory
 * (cuMemFreeHost) and those device words (cuMemFree) waits until all the
 * device's work is done, so when it has either to free (a block's values
 * above 64 KiB were launched, a graph set ran on such a stream), call it
 * once the program's GPU work is done; words a wait still reads are kept
 * for the next call.  Failures of the
 * driver's destroy calls go to the warning handler.  Does not unload the
 * driver.  New in 1.6.
 */
CUCAP_API void cucap_release_cached(void);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_H */
