/* The cucapture program: shared declarations of its subcommands. */
#ifndef CUCAPTURE_TOOL_H
#define CUCAPTURE_TOOL_H

#include <cuda.h>

#include <cucapture.h>

#include "tools/driver-calls.h"

#define D tool_drv

/* Exit statuses of every command (cucapture(1)). */
enum {
    TOOL_OK = 0,            /* done; every check passed */
    TOOL_FAILED = 1,        /* a check failed */
    TOOL_USAGE = 2,         /* a usage error */
    TOOL_CANNOT_RUN = 77    /* cannot run here: no usable driver or device */
};

/* Initialise the driver and make device 0's primary context current;
 * on failure print why on stderr and return non-zero. */
int tool_open_device(const char *command, CUcontext *ctx);
void tool_close_device(CUcontext ctx);

int tool_info(void);
int tool_selftest(void);
int tool_bench(int argc, char **argv);

#endif
