/* The symbolic names of CUresult values, without a loaded driver
 * (error-names.c); shared with the simulated driver and the fault layer. */
#ifndef CUCAPTURE_ERROR_NAMES_H
#define CUCAPTURE_ERROR_NAMES_H

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "CUDA_ERROR_INVALID_VALUE", ...; NULL for a code cuda.h does not name. */
const char *cucap_i_result_name(CUresult code);

#ifdef __cplusplus
}
#endif

#endif
