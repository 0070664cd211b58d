/* Graph references, instantiation and executable graphs (graph.c).
 * Internal. */
#ifndef CUCAP_I_GRAPH_H
#define CUCAP_I_GRAPH_H

#include "cucapture.h"
#include "capture.h"

/* A new cucap_graph reference to a graph of owner o, the one at box
 * (NULL: the root), whose nodes read params (NULL: none; the reference
 * takes one of its own), or NULL when out of memory. */
struct cucap_params;
cucap_graph *cucap_i_graph_new(struct cucap_graph_owner *o, struct cucap_box *box, struct cucap_params *params);

/* Instantiate a graph of o (box NULL: the root), for complete and
 * cucap_graph_instantiate: in o's context, in relaxed thread mode (a
 * global-mode instantiate invalidates other threads' global captures),
 * under the graph lock. */
CUresult cucap_i_instantiate(struct cucap_graph_owner *o, const struct cucap_box *box, struct cucap_params *params,
                             const cucap_complete_options *opts, cucap_exec **out, const char *caller,
                             cucap_error **err);

/* Update e from o's root graph, whose nodes read params (cucap_exec_update);
 * c: the capture that made o, when the caller holds a reference to it
 * (for the lock's check), or NULL; a refused update's reason also in
 * *refusal when not NULL. */
CUresult cucap_i_exec_update(cucap_exec *e, struct cucap_graph_owner *o, struct cucap_params *params,
                             struct cucap_capture *c, cucap_update_refusal *refusal, const char *caller,
                             cucap_error **err);

/* The parameter block e's graph reads, or NULL; e's, not a reference. */
struct cucap_params *cucap_i_exec_params(const cucap_exec *e);

/* Destroy an executable graph in ctx, in relaxed thread mode; failures go
 * to the warning handler. */
void cucap_i_exec_destroy_handle(CUgraphExec exec, CUcontext ctx, const char *caller);

#endif
