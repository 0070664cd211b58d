/* Named nodes (node-names.c): nodes a capture named
 * (cucap_builder_name_node), with what an executable graph may change in
 * each (a kernel's arguments, a copy's or a memset's operands, a host
 * callback and its data, an embedded graph, an event; enabled or not), so
 * that an executable graph of the capture changes them by name, checked
 * (cucap_exec_set_*).  A capture's list lives in its graph owner, under its
 * graph lock; each executable graph has a copy of its own, which also owns
 * the host callbacks' data set through it.  Internal. */
#ifndef CUCAP_I_NODE_NAMES_H
#define CUCAP_I_NODE_NAMES_H

#include <cuda.h>

#include "cucapture.h"

struct cucap_node_names;
struct cucap_reaped;

/* Name the node that the last work captured on stream s made, in the
 * list at *list (created on first use). */
CUresult cucap_i_names_add(struct cucap_node_names **list, CUstream s, const char *name, const char *caller,
                           cucap_error **err);
/* A copy of list (NULL for NULL): *out, or CUDA_ERROR_OUT_OF_MEMORY.  The
 * copy owns no data. */
CUresult cucap_i_names_copy(const struct cucap_node_names *list, struct cucap_node_names **out, const char *caller,
                            cucap_error **err);
/* Free list; the data it owns is returned, chained, to be given back once
 * the executable graph's launches are done (NULL: none). */
struct cucap_reaped *cucap_i_names_free(struct cucap_node_names *list);
/* An executable graph holding list was updated from a capture whose list
 * is source: each node takes the values of source's of the same name,
 * kind and shape, and the others are marked unknown (their values came
 * from a capture that did not name them). */
void cucap_i_names_updated(struct cucap_node_names *list, const struct cucap_node_names *source);

/* What an executable graph changes in a named node: what the caller
 * passes, and where (the caller made the graph's context current). */
struct cucap_node_change {
    CUgraphExec exec;
    CUcontext ctx;
    const char *name;
    const char *caller;
    int launches_done;               /* none of exec's launches can be running or queued */
};

CUresult cucap_i_names_set_kernel_arg(struct cucap_node_names *list, const struct cucap_node_change *c,
                                      unsigned int index, const void *value, size_t size, cucap_error **err);
CUresult cucap_i_names_set_memcpy(struct cucap_node_names *list, const struct cucap_node_change *c, CUdeviceptr dst,
                                  CUdeviceptr src, size_t size, cucap_error **err);
CUresult cucap_i_names_set_memset(struct cucap_node_names *list, const struct cucap_node_change *c, CUdeviceptr dst,
                                  unsigned int value, cucap_error **err);
/* The callback's new data is owned by list from here on (free_data not
 * NULL); the data it replaces, owned by list, is given back at once when
 * c->launches_done, else kept until cucap_i_names_launches_done. */
CUresult cucap_i_names_set_host_callback(struct cucap_node_names *list, const struct cucap_node_change *c,
                                         CUhostFn fn, void *data, CUhostFn free_data, cucap_error **err);
CUresult cucap_i_names_set_child_graph(struct cucap_node_names *list, const struct cucap_node_change *c,
                                       CUgraph graph, cucap_error **err);
CUresult cucap_i_names_set_event(struct cucap_node_names *list, const struct cucap_node_change *c, CUevent event,
                                 cucap_error **err);
CUresult cucap_i_names_set_enabled(struct cucap_node_names *list, const struct cucap_node_change *c, int enabled,
                                   cucap_error **err);
/* Whether list owns host data set by name (its executable graph then
 * tracks its launches). */
int cucap_i_names_own_data(const struct cucap_node_names *list);
/* The executable graph's launches are done: the data that was replaced
 * is given back. */
void cucap_i_names_launches_done(struct cucap_node_names *list);

#endif
