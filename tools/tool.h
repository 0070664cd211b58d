/* The cucapture program: shared declarations of its subcommands. */
#ifndef CUCAPTURE_TOOL_H
#define CUCAPTURE_TOOL_H

#include <cuda.h>

#include <cucapture.h>

#include "tools/driver-calls.h"

#define D tool_drv

/* Initialise the driver and make device 0's primary context current;
 * on failure print why on stderr and return non-zero. */
int tool_open_device(const char *command, CUcontext *ctx);
void tool_close_device(CUcontext ctx);

int tool_info(void);
int tool_selftest(void);
int tool_bench(int argc, char **argv);

#endif
