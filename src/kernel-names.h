/* Named kernels (kernel-names.c): kernel nodes a capture named
 * (cucap_builder_name_kernel), with their launch parameters and argument
 * values, so that an executable graph of the capture can change one
 * argument with a checked size (cucap_exec_set_kernel_arg).  A capture's
 * list lives in its hierarchy, under its graph lock; each executable
 * graph has a copy of its own.  Internal. */
#ifndef CUCAP_I_KERNEL_NAMES_H
#define CUCAP_I_KERNEL_NAMES_H

#include <cuda.h>

#include "cucapture.h"

struct cucap_kernels;

/* Name the kernel node that the last work captured on stream s made, in
 * the list at *list (created on first use). */
CUresult cucap_i_kernels_name(struct cucap_kernels **list, CUstream s, const char *name, const char *caller,
                              cucap_error **err);
/* A copy of list (NULL for NULL): *out, or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult cucap_i_kernels_copy(const struct cucap_kernels *list, struct cucap_kernels **out, const char *caller,
                              cucap_error **err);
void cucap_i_kernels_free(struct cucap_kernels *list);
/* An executable graph holding list was updated from a capture whose list
 * is source: each kernel takes the values of source's of the same name
 * and shape, and the others are marked unknown (their values came from a
 * capture that did not name them). */
void cucap_i_kernels_updated(struct cucap_kernels *list, const struct cucap_kernels *source);
/* Set argument index of the kernel called name to size bytes at value,
 * in executable graph exec (the caller made its context current). */
CUresult cucap_i_kernels_set_arg(struct cucap_kernels *list, CUgraphExec exec, const char *name, unsigned int index,
                                 const void *value, size_t size, const char *caller, cucap_error **err);

#endif
