/**
 * \file        cucapture/pool.h
 * \brief       Device memory pools that are safe to set up under capture
 *
 * Reading or changing a memory pool's attributes, and creating or
 * destroying a pool, are calls that a running stream capture refuses: in
 * a global or thread_local capture of the calling thread, or in a global
 * capture of any thread, the driver fails them with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.  The
 * functions here make those calls with the calling thread switched to
 * relaxed capture mode and restore the thread's own mode on every path,
 * so they are legal while any thread captures in any mode, and the capture
 * stays ACTIVE.
 */
#ifndef CUCAPTURE_POOL_H
#define CUCAPTURE_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cucapture/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * \brief       A device memory pool: the device's current pool, borrowed,
 *              or a pool of the caller's own
 */
typedef struct cucap_pool cucap_pool;

/**
 * \brief       Options of cucap_pool_create()
 */
typedef struct cucap_pool_options {
    /** Most bytes the pool may hold; 0 means no limit beyond the device's.
     *  Ask for no more than the device has: the driver may take very long
     *  to refuse a size far beyond it, such as SIZE_MAX
     *  (doc/driver-facts.md). */
    size_t max_size;
    /** 1: allocations can be shared with other processes through POSIX
     *  file descriptors; 0: not. */
    int ipc_enabled;
    /** Room for options of later releases without a new ABI: keep zero
     *  (initialise the struct with {0} or memset). */
    int reserved_int[4];
    void *reserved_ptr[2];
} cucap_pool_options;

/**
 * \brief       Wrap the device's current memory pool
 *
 * The pool is not owned: closing the object leaves the driver's pool
 * alone.  When the pool's release threshold is 0 (the driver's default:
 * memory goes back to the system at every synchronisation), it is raised
 * to UINT64_MAX; a non-zero threshold, someone's choice, is left alone.
 * The object retains the device's primary context until it is closed
 * (one retain per device, shared with the library's other objects: it may
 * outlive the object).
 *
 * \param       dev     A device ordinal.
 * \param       out     Receives the new object.
 * \param       err     See cucapture/error.h.
 *
 * \return      CUDA_SUCCESS;
 *              CUDA_ERROR_INVALID_VALUE for an out-of-range device or a NULL out;
 *              CUDA_ERROR_NOT_SUPPORTED when the device has no memory pools;
 *              CUDA_ERROR_OUT_OF_MEMORY; a driver error.
 */
CUCAP_API CUresult cucap_pool_open_default(CUdevice dev, cucap_pool **out, cucap_error **err);

/**
 * \brief       The process-wide pool object of a device
 *
 * Made on first touch, exactly once however many threads touch it at the
 * same time, like cucap_pool_open_default(); a failed first touch keeps
 * nothing, and a later call tries again.  The object is borrowed:
 * cucap_pool_close() on it does nothing.  Same errors as
 * cucap_pool_open_default().
 */
CUCAP_API CUresult cucap_device_pool(CUdevice dev, cucap_pool **out, cucap_error **err);

/**
 * \brief       Create a new pool on a device, owned by the object
 *
 * \param       opts    NULL for the defaults (no size limit, no IPC).
 *
 * Legal under every capture mode; the capture stays ACTIVE.  The release
 * threshold keeps the driver's default.  cucap_pool_close() destroys the
 * pool.
 */
CUCAP_API CUresult cucap_pool_create(CUdevice dev, const cucap_pool_options *opts, cucap_pool **out,
                                     cucap_error **err);

/**
 * \brief       Allocate from the pool in stream order
 *
 * On a capturing stream the allocation becomes an allocation node of the
 * graph, which owns the memory.  The library remembers the pointer, so that
 * cucap_pool_free() can refuse pointers that are not the pool's.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL pool or
 *              out, or a size of 0; a driver error (on a capturing stream
 *              the capture's own errors, such as
 *              CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).
 */
CUCAP_API CUresult cucap_pool_alloc(cucap_pool *p, size_t size, CUstream s, CUdeviceptr *out,
                                    cucap_error **err);

/**
 * \brief       Free an allocation of the pool in stream order
 *
 * On a capturing stream it becomes a free node of the graph.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL pool, or a
 *              pointer that this pool did not allocate or that was already
 *              freed (nothing reaches the driver then); a driver error.
 */
CUCAP_API CUresult cucap_pool_free(cucap_pool *p, CUdeviceptr ptr, CUstream s, cucap_error **err);

/**
 * \brief       The driver's handle of the pool, NULL for a NULL pool
 */
CUCAP_API CUmemoryPool cucap_pool_handle(const cucap_pool *p);

/**
 * \brief       Close a pool object
 *
 * An owned pool (cucap_pool_create()) is destroyed, legally under every
 * capture mode; allocations still outstanding stay valid until freed.  A
 * pool from cucap_pool_open_default() only loses its wrapper.  The
 * process-wide object of cucap_device_pool() is left as it is.  NULL is
 * accepted and ignored.  The object is gone after the call even when the
 * driver reports a failure, which is then returned.
 */
CUCAP_API CUresult cucap_pool_close(cucap_pool *p, cucap_error **err);

/**
 * \brief       Close a pool object where no error can be returned
 *
 * cucap_pool_close() for cleanup paths (a C++ destructor, say): the same
 * work, and any failure goes to the warning handler
 * (cucap_set_warning_handler()).  NULL is accepted and ignored.
 *
 * \since       1.4.0 (LIBCUCAPTURE_1.4)
 */
CUCAP_API void cucap_pool_destroy(cucap_pool *p);

/**
 * \brief       What the driver reports of a device's graph memory
 *
 * Graph memory is the device memory that the allocation nodes of
 * executable graphs use (cuDeviceGetGraphMemAttribute): `used` is what
 * allocations of launched graphs hold now, `reserved` what the driver
 * keeps for graph allocations (it grows as graphs need and shrinks only
 * when trimmed), each with its high-water mark since the process began
 * using the device.  All in bytes.
 *
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
typedef struct cucap_graph_memory {
    uint64_t used;
    uint64_t used_high;
    uint64_t reserved;
    uint64_t reserved_high;
} cucap_graph_memory;

/**
 * \brief       A device's graph memory now
 *
 * Reads the four figures of cucap_graph_memory on device dev.  A thread
 * needs no current context (the device's primary context is made current
 * for the call, and the thread's own given back), and the call runs in
 * relaxed thread mode, so no capture refuses it.  Graph sets read the
 * same figures (cucap_graph_set(3)).
 *
 * \param       dev     A device ordinal of the loaded driver.
 * \param       out     Receives the figures; unchanged on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL out or a
 *              device out of range; the loader's error (see cucap_init());
 *              a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_device_graph_memory(CUdevice dev, cucap_graph_memory *out, cucap_error **err);

/**
 * \brief       Give a device's unused graph memory back (cuDeviceGraphMemTrim)
 *
 * What the driver reserves for graph allocations beyond what the
 * allocations of executable graphs hold goes back to the device.  Each
 * executable graph with allocation nodes pays a remap at its next launch.
 * Reserved memory that launches in flight use stays reserved until they
 * are done; the call does not wait for them.  Like
 * cucap_device_graph_memory(): no current context needed, relaxed mode.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a device out of
 *              range; the loader's error; a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_device_graph_memory_trim(CUdevice dev, cucap_error **err);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_POOL_H */
