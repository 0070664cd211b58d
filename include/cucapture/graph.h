/**
 * \file        cucapture/graph.h
 * \brief       Graph hierarchies and executable graphs
 *
 * A graph hierarchy is one root CUgraph and every graph the driver owns
 * below it (child-graph nodes, conditional bodies).  A cucap_graph is a
 * shared reference to a hierarchy.  The hierarchy is destroyed once, when
 * its last reference goes, and never when it was retired: a capture that
 * ended without a graph leaves a retired hierarchy, whose graphs the driver
 * already discarded.
 */
#ifndef CUCAPTURE_GRAPH_H
#define CUCAPTURE_GRAPH_H

#include <cuda.h>
#include <cucapture/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \brief A graph builder (see cucapture/builder.h) */
typedef struct cucap_builder cucap_builder;

/** \brief A shared reference to a graph hierarchy */
typedef struct cucap_graph cucap_graph;

/**
 * \brief       Options of instantiation
 *
 * All fields 0 (or a NULL pointer to the record) mean the driver's
 * defaults.
 */
typedef struct cucap_complete_options {
    /** CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
    int auto_free_on_launch;
    /** non-NULL: upload the executable graph on this stream at instantiation
     *  (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD); NULL: no upload */
    CUstream upload_stream;
    /** CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH (not with auto_free_on_launch) */
    int device_launch;
    /** CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY */
    int use_node_priority;
    /** Room for options of later releases without a new ABI: keep zero
     *  (initialise the struct with {0} or memset). */
    int reserved_int[4];
    void *reserved_ptr[2];
} cucap_complete_options;

/** \brief An executable graph, owned by the object */
typedef struct cucap_exec cucap_exec;

/**
 * \brief       Take another reference
 * \return      g; NULL for NULL.
 */
CUCAP_API cucap_graph *cucap_graph_ref(cucap_graph *g);

/**
 * \brief       Drop a reference; the last one destroys the hierarchy
 *
 * Destroys the root graph unless the hierarchy was retired.  A failure
 * goes to the warning handler.  NULL is ignored.
 */
CUCAP_API void cucap_graph_unref(cucap_graph *g);

/**
 * \brief       The driver's graph, NULL once retired (or for NULL)
 *
 * Borrowed: valid while the reference is held; never cuGraphDestroy it.
 */
CUCAP_API CUgraph cucap_graph_handle(const cucap_graph *g);

/**
 * \brief       Instantiate the graph
 *
 * \param       opts    NULL for the defaults.
 * \param       out     Receives the new executable graph.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments;
 *              CUDA_ERROR_ILLEGAL_STATE for a retired graph or one whose
 *              conditional body failed; the driver's error, whose message
 *              says what the instantiate result means.
 */
CUCAP_API CUresult cucap_graph_instantiate(cucap_graph *g, const cucap_complete_options *opts, cucap_exec **out,
                                           cucap_error **err);

/**
 * \brief       Launch the executable graph on s (cuGraphLaunch)
 *
 * The graph runs in the context it was instantiated in, whatever context
 * the calling thread has current (or none); the thread's is left as it
 * was.  s NULL (or CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is the legacy
 * or per-thread stream of the graph's context.
 */
CUCAP_API CUresult cucap_exec_launch(cucap_exec *e, CUstream s, cucap_error **err);

/**
 * \brief       Launch with new values in the graph's parameter block
 *
 * Copies size bytes from values into the parameter block the graph reads
 * (cucap_builder_params()), on s, then launches the graph on s.  The
 * values are taken at the call: the caller may change them as soon as it
 * returns, and no later launch's values change what this one reads, on s
 * or on any other stream (a launch on another stream than the block's last
 * launch waits for that one first).  Launches of graphs that read one
 * block may come from several threads at once; they are serialized.
 * cucap_exec_launch() of such a graph keeps the same order and reads the
 * values the last launch left.  Costs a cuMemcpyHtoDAsync and a
 * cuEventRecord beside the cuGraphLaunch (see "Choosing a loop" in
 * cucap_exec(3)).
 *
 * \param       e       An executable graph that reads a parameter block.
 * \param       values  The values, size bytes.
 * \param       size    The block's size, cucap_exec_params_size(e).
 * \param       s       The stream, as cucap_exec_launch().
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL e or
 *              values, or a size other than the block's;
 *              CUDA_ERROR_ILLEGAL_STATE for a graph that reads no block;
 *              nothing is copied or launched then; the driver's error of
 *              the copy or the launch.
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API CUresult cucap_exec_launch_params(cucap_exec *e, const void *values, size_t size, CUstream s,
                                            cucap_error **err);

/**
 * \brief       cucap_exec_launch_params() for values of one type
 *
 * The same, and refused with CUDA_ERROR_INVALID_VALUE, nothing copied or
 * launched, when the graph's block was made for values of another type
 * (cucap_builder_params_typed()); a block made without a type takes
 * values of any type of its size.  type NULL is cucap_exec_launch_params().
 *
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_launch_params_typed(cucap_exec *e, const void *values, size_t size, const void *type,
                                                  CUstream s, cucap_error **err);

/**
 * \brief       The size of the parameter block the graph reads
 *
 * \return      Its size in bytes; 0 when it reads none, or e is NULL.
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API size_t cucap_exec_params_size(const cucap_exec *e);

/** \brief Upload the executable graph on s (cuGraphUpload) */
CUCAP_API CUresult cucap_exec_upload(cucap_exec *e, CUstream s, cucap_error **err);

/**
 * \brief       Update the executable graph from a builder's ended graph
 *
 * The topology must be identical.  On failure the message names the
 * update result and, when the driver names one, the offending node.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments;
 *              CUDA_ERROR_ILLEGAL_STATE when source is not ENDED;
 *              CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE; a driver error.
 */
CUCAP_API CUresult cucap_exec_update(cucap_exec *e, cucap_builder *source, cucap_error **err);

/** \brief The driver's executable graph (borrowed), NULL for NULL */
CUCAP_API CUgraphExec cucap_exec_handle(const cucap_exec *e);

/**
 * \brief       Destroy the executable graph
 *
 * A failure goes to the warning handler.  NULL is ignored.
 */
CUCAP_API void cucap_exec_destroy(cucap_exec *e);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_GRAPH_H */
