/* Graph references, instantiation and executable graphs (graph.c).
 * Internal. */
#ifndef CUCAP_I_GRAPH_H
#define CUCAP_I_GRAPH_H

#include "cucapture.h"
#include "capture.h"

/* A new cucap_graph reference to the hierarchy, pointing at box (NULL: the
 * root), or NULL when out of memory. */
cucap_graph *cucap_i_capture_graph(struct cucap_capture *h, struct cucap_box *box);

/* Instantiate a graph of the hierarchy (box NULL: the root), for complete
 * and cucap_graph_instantiate: in the hierarchy's context, in relaxed
 * thread mode (a global-mode instantiate invalidates other threads' global
 * captures), under the graph lock. */
CUresult cucap_i_capture_instantiate(struct cucap_capture *h, const struct cucap_box *box,
                                  const cucap_complete_options *opts, cucap_exec **out, const char *caller,
                                  cucap_error **err);

/* Update e from h's root graph (cucap_exec_update); a refused update's
 * reason also in *refusal when not NULL. */
CUresult cucap_i_exec_update(cucap_exec *e, struct cucap_capture *h, cucap_update_refusal *refusal, const char *caller,
                             cucap_error **err);

/* The parameter block e's graph reads, or NULL; e's, not a reference. */
struct cucap_params *cucap_i_exec_params(const cucap_exec *e);

/* Destroy an executable graph in ctx, in relaxed thread mode; failures go
 * to the warning handler. */
void cucap_i_exec_destroy_handle(CUgraphExec exec, CUcontext ctx, const char *caller);

#endif
