/* The driver seam: every call into the CUDA driver goes through the table
 * that driver.c fills.  Internal. */
#ifndef CUCAPTURE_DRIVER_H
#define CUCAPTURE_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cucapture/error.h"

struct cucap_driver {
#define CUCAP_DRIVER_ENTRY(field, symbol, version, optional) PFN_##symbol##_v##version field;
#include "driver-entries.h"
#undef CUCAP_DRIVER_ENTRY
};

#ifdef __cplusplus
extern "C" {
#endif

/* The oldest driver the library runs on: CUDA 12.3 (conditional handles). */
#define CUCAP_DRIVER_FLOOR 12030

/* The table; its entries are valid only after cucap_i_driver() succeeded.
 * Every required entry is then set; an optional one the driver lacks is
 * NULL. */
extern struct cucap_driver cucap_i_drv;

/* Load the driver once (cucap_init's work).  On failure *err (when err is
 * not NULL) receives an error whose message starts with `caller`. */
CUresult cucap_i_driver(const char *caller, cucap_error **err);

/* Load the driver and check that dev names a device (INVALID_VALUE with a
 * message starting with `caller` otherwise). */
CUresult cucap_i_check_device(CUdevice dev, const char *caller, cucap_error **err);

/* 1 when the loaded driver sees exactly one device (read once, after
 * cuInit), 0 otherwise or before a load. */
int cucap_i_one_device(void);

/* An entry point at a given CUDA version's ABI, NULL when the driver has
 * none (or no driver is loaded). */
void *cucap_i_driver_entry_point_at(const char *symbol, int cuda_version);

/* Whether the driver was loaded (its table filled). */
int cucap_i_driver_loaded(void);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_DRIVER_H */
