/* The driver conformance program: shared helpers of its row files. */
#ifndef CUCAPTURE_CONFORMANCE_H
#define CUCAPTURE_CONFORMANCE_H

#include <cuda.h>
#include <stddef.h>

#include "driver.h"
#include "test-driver.h"


extern CUcontext conf_ctx;
extern CUdevice conf_dev;

extern const CUstreamCaptureMode conf_modes[3];
const char *conf_mode_name(CUstreamCaptureMode m);
const char *conf_code(CUresult rc);
const char *conf_status_name(CUstreamCaptureStatus s);

/* The capture status of a stream, as text ("ACTIVE", "NONE", ...). */
const char *conf_status(CUstream s);

/* Append formatted text to buf (of size bytes), truncating. */
void conf_append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Report one row: `observed` must equal `expected`. */
void conf_row(const char *what, const char *mode, const char *observed, const char *expected);

CUstream conf_stream(void);
/* End whatever capture s still has, destroy what that returned, destroy s. */
void conf_drop(CUstream s);

/* Run fn(arg) on a new thread with the context current, and wait. */
void conf_on_thread(void (*fn)(void *), void *arg);

/* Fork a capture into a new stream: record on `from`, wait on the new one. */
CUstream conf_fork(CUstream from);
/* Join `fork` back into `origin`. */
void conf_join(CUstream origin, CUstream fork);

/* Add a conditional node (type, size) at the capture point of s; returns
 * its body graphs through bodies and the handle through h. */
CUresult conf_add_conditional(CUstream s, CUgraphConditionalNodeType type, unsigned int size,
                              unsigned int default_value, CUgraphConditionalHandle *h, CUgraph *bodies);

/* The row groups. */
void conf_rows_thread_mode(void);
void conf_rows_other_thread(void);
void conf_rows_ending(void);
void conf_rows_more(void);
void conf_rows_stream_ids(void);
void conf_rows_bodies(const char *self);
void conf_rows_measured(void);
void conf_rows_isolation(void);
void conf_rows_copies(void);
void conf_rows_join(void);
void conf_rows_devices(void);
void conf_rows_graph_memory(void);
void conf_rows_nodes(void);

/* The child-process scenarios of conf_rows_bodies: runs one, prints its
 * progress on stdout, returns the exit status. */
int conf_body_child(const char *scenario, const char *mode);

#endif
