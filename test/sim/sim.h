/* The simulated CUDA driver: a test backend for libcucapture, loaded
 * through CUCAPTURE_DRIVER.  Never installed, never a product path.
 *
 * Environment read at cuInit / first use:
 *   CUDASIM_DEVICES          number of devices (default 1; 0: cuInit gives NO_DEVICE)
 *   CUDASIM_DRIVER_VERSION   what cuDriverGetVersion reports (default CUDA_VERSION)
 *
 * Test hooks (resolve with dlsym on the library's handle):
 *   cudasim_counter(name)    how often the named entry point was called
 */
#ifndef CUDASIM_H
#define CUDASIM_H

#include <cuda.h>

#if defined(__GNUC__)
#  define CUDASIM_EXPORT __attribute__((visibility("default")))
#else
#  define CUDASIM_EXPORT
#endif

typedef long (*cudasim_counter_fn)(const char *name);

#endif /* CUDASIM_H */
