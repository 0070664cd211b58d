/* The simulated CUDA driver: a test backend for libcucapture, loaded
 * through CUCAPTURE_DRIVER.  It implements, on host memory, every entry
 * point the library resolves, with the capture semantics measured on a
 * real driver (doc/driver-facts.md).  Installed by cucapture-tools as a test
 * backend for everyone: cucapture-sim(7).
 *
 * Environment, read when used:
 *   CUDASIM_DEVICES          number of devices (default 1; 0: cuInit gives NO_DEVICE)
 *   CUDASIM_DRIVER_VERSION   what cuDriverGetVersion reports (default 13000, the driver it
 *                            models, whatever CUDA headers built it)
 *
 * Where the real driver crashes or corrupts memory (destroying a graph it
 * already discarded; using a parent graph whose directly captured
 * conditional body capture was invalidated), the simulator writes
 * "cudasim: FATAL: ..." to stderr and raises SIGABRT.
 *
 * Test hooks, resolved with dlsym on the library's handle:
 *   cudasim_counter(name)    how often the named entry point was called
 *                            (cuInit, cuDriverGetVersion, cuGetProcAddress,
 *                            cuStreamWaitEvent)
 *   cudasim_live(kind)       live objects of a kind: "stream", "event",
 *                            "graph", "exec", "pool", "allocation", and the
 *                            retains of primary contexts not yet released
 *                            ("primary context retain")
 *   cudasim_gate             a host function (CUhostFn): queued or captured and
 *                            launched, it holds its stream's work in flight until
 *                            cudasim_release() (cucapture-sim(7), "Work held in flight")
 *   cudasim_held_waits(last) calls that would have waited on the host for held
 *                            work, and the name of the last one
 * Environment: CUDASIM_REUSE_HANDLES=1 hands a destroyed stream's handle
 * to the next stream made, as the real driver does; by default destroyed
 * handles stay dead and a use of one stops the process.
 */
#ifndef CUDASIM_H
#define CUDASIM_H

#include <cuda.h>

/* The CUDA version the simulator reports unless CUDASIM_DRIVER_VERSION
 * says otherwise: that of the driver it models, whatever headers built it. */
#define CUDASIM_DEFAULT_DRIVER_VERSION 13000

#if defined(__GNUC__)
#  define CUDASIM_EXPORT __attribute__((visibility("default")))
#else
#  define CUDASIM_EXPORT
#endif

typedef long (*cudasim_counter_fn)(const char *name);
typedef long (*cudasim_live_fn)(const char *kind);

#endif /* CUDASIM_H */
