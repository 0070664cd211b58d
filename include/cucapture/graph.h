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
 * \brief       Hand the library a graph built node by node
 *
 * For a graph made with cuGraphCreate and cuGraphAdd*Node: the library
 * owns it from now on (the last reference destroys it; never
 * cuGraphDestroy it yourself) and instantiates, launches, updates
 * (cucap_exec_update_graph()) and tears it down as it does a captured
 * one.  Its executable graphs are instantiated in the context current
 * now, which must outlive them.
 *
 * \param       graph   A graph no capture writes into, and no node of
 *                      another graph owns.
 * \param       out     Receives one reference.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments
 *              (graph stays the caller's); CUDA_ERROR_INVALID_CONTEXT with
 *              no current context (graph stays the caller's);
 *              CUDA_ERROR_OUT_OF_MEMORY (graph is destroyed: the call took it).
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_adopt(CUgraph graph, cucap_graph **out, cucap_error **err);

/**
 * \brief       A copy of the graph, in a hierarchy of its own (cuGraphClone)
 *
 * The copy reads the same parameter block as g (launch its executable
 * graphs with cucap_exec_launch_params() as g's), and does not carry the
 * names of g's kernels.  The driver clones no graph with memory
 * allocation or free nodes, nor one with conditional nodes.
 *
 * \param       g       A graph reference (a conditional body's too).
 * \param       out     Receives one reference to the copy.
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments;
 *              CUDA_ERROR_ILLEGAL_STATE for a graph the driver discarded;
 *              CUDA_ERROR_NOT_SUPPORTED for a graph with memory or
 *              conditional nodes (the message says so); a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_clone(cucap_graph *g, cucap_graph **out, cucap_error **err);

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
 * cucap_graph(3)).
 *
 * Values of any size are taken at the call without waiting for the GPU.
 * Up to CUCAP_PARAMS_MAX (64 KiB) the driver copies them from the caller's
 * memory; above that a pageable copy may wait until the stream reaches
 * it, so the library first copies them into pinned memory of its own and
 * queues the copy from there, with an event behind it: a pinned buffer is
 * written again only once that event is reached, and the block keeps as
 * many as its launches in flight need (given back to the library when the
 * block goes, freed by cucap_release_cached()).  Such values cannot be
 * launched into a capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
 * the capture would read the pinned buffer at its own launches).
 * Work the program queued on s before the call runs before the block is
 * written, and the launch's work after it: a buffer of the program's that
 * a cuMemcpyHtoDAsync queued on s before the call fills is ready for the
 * graph, as on any stream.
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

/**
 * \brief       Update the executable graph from a graph reference
 *
 * cucap_exec_update() for a graph that cucap_graph_adopt(),
 * cucap_graph_clone() or cucap_builder_graph() gave: the same checks,
 * the same messages.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments or
 *              a conditional body's graph; CUDA_ERROR_ILLEGAL_STATE for a
 *              graph the driver discarded; CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
 *              a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_update_graph(cucap_exec *e, cucap_graph *source, cucap_error **err);

/**
 * \brief       Change one argument of a named kernel in the executable
 *              graph
 *
 * The changes by name (this call and the cucap_exec_set_* calls below)
 * reach a node its capture named (cucap_builder_name_node()), from the
 * next launch on; launches queued before keep what they had.  After
 * cucap_exec_update() a node has the values of the updating capture's
 * node of the same name; a kernel, copy or memset that capture did not
 * name (or named with another shape) is refused (its values are not
 * known).  Not at the same time as another call on e.
 *
 * Here the argument takes size bytes at value
 * (cuGraphExecKernelNodeSetParams), and the other arguments keep the
 * values this executable graph has.
 *
 * \param       name    The kernel's name.
 * \param       index   The parameter, from 0.
 * \param       value   size bytes (copied).
 * \param       size    The parameter's size, exactly.
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments, a
 *              name the capture did not give or gave another kind of node,
 *              an index past the kernel's parameters, or a size other than
 *              the parameter's (the message gives both);
 *              CUDA_ERROR_ILLEGAL_STATE after an update from a capture that
 *              did not name it; a driver error (the executable graph keeps
 *              the old value).
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_kernel_arg(cucap_exec *e, const char *name, unsigned int index, const void *value,
                                             size_t size, cucap_error **err);

/**
 * \brief       Change a named copy's destination, source and size
 *
 * A one-dimensional copy between addresses (cuMemcpyAsync and its
 * kin): dst and src are addresses of the same kind of memory (device,
 * host, managed) and context as the captured ones, size bytes, not 0
 * (cuGraphExecMemcpyNodeSetParams).
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL e or name,
 *              a 0 address or size, a name the capture did not give or
 *              gave another kind of node; CUDA_ERROR_NOT_SUPPORTED for a
 *              copy of more dimensions or with an array;
 *              CUDA_ERROR_ILLEGAL_STATE as for cucap_exec_set_kernel_arg();
 *              a driver error (memory of another kind or context).
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_memcpy(cucap_exec *e, const char *name, CUdeviceptr dst, CUdeviceptr src,
                                         size_t size, cucap_error **err);

/**
 * \brief       Change a named memset's destination and value
 *
 * The element size and count stay the captured ones; value must fit the
 * element (cuGraphExecMemsetNodeSetParams).
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL e or name,
 *              a 0 dst, a value too wide for the element, a name the
 *              capture did not give or gave another kind of node;
 *              CUDA_ERROR_NOT_SUPPORTED for a two-dimensional memset;
 *              CUDA_ERROR_ILLEGAL_STATE as for cucap_exec_set_kernel_arg();
 *              a driver error (memory of another context).
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_memset(cucap_exec *e, const char *name, CUdeviceptr dst, unsigned int value,
                                         cucap_error **err);

/**
 * \brief       Change a named host callback and its data
 *
 * The node's launches from here on call fn(data)
 * (cuGraphExecHostNodeSetParams).  With free_data, e owns data: the
 * library calls free_data(data) once, on a thread of its own where CUDA
 * calls are allowed, after data is replaced (by this call again, or by
 * cucap_exec_update()) or e is destroyed, and the last launch of e that
 * could run it finished; a refused call gives data back at once, on the
 * caller's thread.  The data the capture gave goes with the graphs that
 * hold it (cucap_builder_host_callback()).  Launches of e's handle made
 * directly with the driver are not counted.
 *
 * \param       fn          Not NULL.
 * \param       data        fn's argument.
 * \param       free_data   NULL: the caller keeps data alive.
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL e, name or
 *              fn, a name the capture did not give or gave another kind of
 *              node; CUDA_ERROR_OUT_OF_MEMORY; a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_host_callback(cucap_exec *e, const char *name, CUhostFn fn, void *data,
                                                CUhostFn free_data, cucap_error **err);

/**
 * \brief       Replace a named embedded graph's work
 *
 * g has the embedded graph's nodes, edges and order, with other values
 * (cuGraphExecChildGraphNodeSetParams copies them: g may go after).
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments, a
 *              name the capture did not give or gave another kind of node;
 *              CUDA_ERROR_ILLEGAL_STATE for a graph the driver discarded;
 *              CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE for a graph of another
 *              shape (the driver's answer); a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_child_graph(cucap_exec *e, const char *name, cucap_graph *g, cucap_error **err);

/**
 * \brief       Change the event a named event record or wait node uses
 *
 * (cuGraphExecEventRecordNodeSetEvent, cuGraphExecEventWaitNodeSetEvent).
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments, a
 *              name the capture did not give or gave another kind of node;
 *              a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_event(cucap_exec *e, const char *name, CUevent event, cucap_error **err);

/**
 * \brief       Enable or disable a named kernel, copy or memset
 *
 * A disabled node does nothing at launch, its values kept, until it is
 * enabled again (cuGraphNodeSetEnabled; the driver does this for these
 * three kinds only).
 *
 * \param       enabled     0 disables, any other value enables.
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL e or name,
 *              a name the capture did not give; CUDA_ERROR_NOT_SUPPORTED
 *              for another kind of node; a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_exec_set_enabled(cucap_exec *e, const char *name, int enabled, cucap_error **err);

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
