/* The device's graph memory (graph-memory.c): the driver's figures and
 * its trim, for cucap_device_graph_memory and for graph sets.  Internal. */
#ifndef CUCAP_I_GRAPH_MEMORY_H
#define CUCAP_I_GRAPH_MEMORY_H

#include "cucapture.h"

/* The graph memory reserved on dev now, or fallback when the driver does
 * not say.  In the caller's context and capture mode. */
size_t cucap_i_graph_memory_reserved(CUdevice dev, size_t fallback);
/* cuDeviceGraphMemTrim; in the caller's context, in relaxed mode (a trim
 * invalidates no capture then). */
CUresult cucap_i_graph_memory_trim(CUdevice dev);

#endif
