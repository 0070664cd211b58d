/* The signature of a graph's nodes (node-signature.c): each node's kind,
 * and a kernel node's function and launch attributes, in the order the
 * driver lists them, child graphs' nodes included.  An executable graph
 * keeps the signature of the graph it runs and is updated only from a
 * graph of the same signature: the driver accepts some updates between
 * kernels of other launch attributes (cluster dimensions, a preferred
 * cluster size) and the executable graph then runs them wrong.  On the
 * decode step's kernels (H100) the driver's reads cost 27 ns a node for
 * the kind, about 15 ns for the function (CUDA 10.0's read; 12.0's takes
 * 100-280) and 51 ns an attribute: its re-capture runs 1.01-1.03 times
 * hand-written code, 1.00 without the check (bench/RESULTS.md,
 * doc/driver-facts.md).  Internal. */
#ifndef CUCAP_I_NODE_SIGNATURE_H
#define CUCAP_I_NODE_SIGNATURE_H

#include <cuda.h>
#include <stddef.h>

struct cucap_signature;

/* g's signature, read from the driver: *out, or an error (*out NULL). */
CUresult cucap_i_signature_of(CUgraph g, struct cucap_signature **out);
void cucap_i_signature_free(struct cucap_signature *s);
/* Whether s has kernel nodes: without them the driver's own checks of an
 * update (topology, node types) are all there is to check. */
int cucap_i_signature_has_kernels(const struct cucap_signature *s);
/* Whether s has conditional nodes: destroying an executable graph with
 * some waits for its launches (doc/driver-facts.md). */
int cucap_i_signature_has_conditionals(const struct cucap_signature *s);
/* 0 when now matches was; otherwise 1, with the update result that names
 * the difference in *result, now's node in *node and the difference in
 * words in why. */
int cucap_i_signature_differs(const struct cucap_signature *was, const struct cucap_signature *now,
                              CUgraphExecUpdateResult *result, CUgraphNode *node, char *why, size_t why_size);

#endif
