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

/* Whether the driver the library loads (or loaded) is the simulated one. */
int tool_on_simulator(void);
/* Before the library loads a driver: where CUCAPTURE_DRIVER is unset and
 * there is no usable GPU (libcuda.so.1 cannot be loaded, or its cuInit
 * fails or it sees no device), point the library at the simulated
 * driver (saying so on stdout) and return 1; 0 when nothing changed; -1
 * (having said why) when the command cannot run: a GPU is required, or no
 * simulated driver is there. */
int tool_fallback_to_simulator(const char *command, int require_gpu);

int tool_info(void);
int tool_selftest(int require_gpu);
int tool_bench(int argc, char **argv);

#endif
