/* Attaching a conditional body's capture to its node (body.c).  Internal. */
#ifndef CUCAP_I_BODY_H
#define CUCAP_I_BODY_H

#include "cucapture.h"
#include "graph-owner.h"

/* A body's capture ended with graph g: add it to its node's body
 * graph (body_box of the parent's graph owner) as a child-graph node, and
 * mark its record attached or failed. */
CUresult cucap_i_attach_body(struct cucap_graph_owner *parent, struct cucap_box *body_box,
                             struct cucap_body_record *record, CUgraph g, const char *caller, cucap_error **err);

#endif
