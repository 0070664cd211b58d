/**
 * \file        cucapture/builder.h
 * \brief       Graph builders: stream capture that never crashes on teardown
 *
 * A builder wraps a stream and its capture.  Kinds:
 *   - PRIMARY, from cucap_builder_create() or cucap_builder_create_on_stream();
 *   - FORKED, from cucap_builder_split(): a stream that joined the capture;
 *     it is ended by cucap_builder_join(), never by cucap_builder_end().
 *
 *   - BODY, from the conditional calls: the body of a conditional node,
 *     captured standalone and attached to the node's body graph at end.
 *
 * States: NOT_STARTED --begin--> CAPTURING --end--> ENDED (the driver
 * returned a graph) or INVALIDATED (it returned none: it discarded the
 * graph, and the builder will never destroy it); any --close--> CLOSED.
 *
 * Every builder that create or split hands out is the caller's to
 * cucap_builder_destroy(), also after join closed it, in any order: no
 * sequence of calls crashes the process or destroys a graph twice.  One
 * builder is used by one thread at a time.
 *
 * The builders of one capture (a primary and its forks) may be used from
 * different threads at once: the library makes its own driver calls on a
 * capture one thread at a time, because the driver does not synchronize
 * a graph internally (the driver API manual, "Graph object thread
 * safety").  Work the application puts on the streams of such a capture
 * itself (kernels, copies) is a driver call on that graph too: while other
 * threads use builders of the same capture, enqueue it through
 * cucap_builder_enqueue(); unserialized, the driver may crash when
 * another thread ends the capture at the same moment.
 */
#ifndef CUCAPTURE_BUILDER_H
#define CUCAPTURE_BUILDER_H

#include <stddef.h>
#include <cuda.h>
#include <cucapture/error.h>
#include <cucapture/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \brief Kinds of builder */
typedef enum {
    CUCAP_BUILDER_PRIMARY,
    CUCAP_BUILDER_FORKED,
    CUCAP_BUILDER_BODY
} cucap_builder_kind;

/** \brief States of a builder */
typedef enum {
    CUCAP_BUILDER_NOT_STARTED,
    CUCAP_BUILDER_CAPTURING,
    CUCAP_BUILDER_ENDED,
    CUCAP_BUILDER_INVALIDATED,
    CUCAP_BUILDER_CLOSED
} cucap_builder_state;

/**
 * \brief       A PRIMARY builder on a non-blocking stream of its own
 *
 * The stream lives in the device's primary context, which the builder
 * (and its forks) retain while they live.  It is made once and kept by
 * the library between builders: a builder per capture costs no
 * cuStreamCreate or cuStreamDestroy once warm.  It is the builder's until
 * it is closed; do not destroy it or change its attributes.
 *
 * \param       dev     A device ordinal of the loaded driver.
 * \param       out     Receives the builder (NOT_STARTED); NULL on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL out or a
 *              device out of range; CUDA_ERROR_OUT_OF_MEMORY; the loader's
 *              error (see cucap_init()); a driver error.
 */
CUCAP_API CUresult cucap_builder_create(CUdevice dev, cucap_builder **out, cucap_error **err);

/**
 * \brief       A PRIMARY builder on the caller's stream, which it borrows
 *
 * The builder works in the stream's context: a device's primary context
 * is retained like cucap_builder_create()'s; any other context (a green
 * context's, a context the caller created) stays the caller's to keep
 * alive.  Forks and bodies of a green-context stream are streams of the
 * same green context.
 *
 * \param       s       A stream made with cuStreamCreate (or
 *                      cuGreenCtxStreamCreate); it must outlive the builder.
 * \param       out     Receives the builder (NOT_STARTED); NULL on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL out, the
 *              NULL, legacy or per-thread stream (they cannot capture);
 *              CUDA_ERROR_OUT_OF_MEMORY; a driver error.
 */
CUCAP_API CUresult cucap_builder_create_on_stream(CUstream s, cucap_builder **out, cucap_error **err);

/**
 * \brief       Begin capturing in mode (one of the three CUstreamCaptureMode values)
 *
 * \param       b       A PRIMARY builder, NOT_STARTED, or a BODY that is
 *                      NOT_STARTED or whose last capture failed.
 * \param       mode    CU_STREAM_CAPTURE_MODE_GLOBAL, _THREAD_LOCAL or _RELAXED.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS (b is CAPTURING); CUDA_ERROR_INVALID_VALUE for a
 *              NULL builder or another mode value; CUDA_ERROR_ILLEGAL_STATE
 *              for a FORKED, closed, capturing or ended builder, or a body
 *              whose parent's graph was discarded; a driver error (nothing
 *              begun then).
 */
CUCAP_API CUresult cucap_builder_begin(cucap_builder *b, CUstreamCaptureMode mode, cucap_error **err);

/**
 * \brief       End the capture and settle who owns the graph
 *
 * With a graph from the driver the builder is ENDED.  Without one (an
 * invalidated capture, forks never joined back, ...) the driver discarded
 * the graph: the builder is INVALIDATED, its graph is retired, and the
 * driver's error is returned; a note names the first library call on the
 * capture that failed with a capture error, when there was one.
 *
 * \param       b       A CAPTURING PRIMARY or BODY builder.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS (ENDED); the driver's error when it discarded
 *              the graph (INVALIDATED: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
 *              _UNJOINED, _WRONG_THREAD, ...); for a body, the error of
 *              attaching it (CUDA_ERROR_NOT_SUPPORTED for a node type bodies
 *              may not hold, CUDA_ERROR_ILLEGAL_STATE when the parent's
 *              graph was discarded); CUDA_ERROR_INVALID_VALUE for NULL;
 *              CUDA_ERROR_ILLEGAL_STATE for a FORKED builder (the capture
 *              is not touched), or one that is not CAPTURING.
 */
CUCAP_API CUresult cucap_builder_end(cucap_builder *b, cucap_error **err);

/**
 * \brief       Fork the capture into count - 1 new FORKED builders
 *
 * \param       b       A CAPTURING builder of any kind.
 * \param       count   2 to CUCAP_SPLIT_MAX: b and count - 1 forks.
 * \param       forks   Receives count - 1 builders; b stays itself.  Not
 *                      written when the count is refused.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_ERROR_INVALID_VALUE for a count outside 2 to
 *              CUCAP_SPLIT_MAX or NULL pointers;
 *              CUDA_ERROR_ILLEGAL_STATE unless b is CAPTURING (a fork whose
 *              primary's capture ended is ENDED or INVALIDATED);
 *              a driver error (no fork is handed out then).
 */
/** The most builders one split may make (count), and the most bodies of a SWITCH. */
#define CUCAP_SPLIT_MAX 65536
#define CUCAP_SWITCH_MAX 65536

CUCAP_API CUresult cucap_builder_split(cucap_builder *b, size_t count, cucap_builder **forks, cucap_error **err);

/**
 * \brief       Split as cucap_builder_split(), into forks that stay b's from
 *              one capture to the next
 *
 * For a loop that splits the same way every capture, as hand-written code
 * keeps its fork streams: the forks are kept by b, each with its stream
 * and context, and a call in a later capture of b (after
 * cucap_builder_reset()) hands the same builders out again, capturing,
 * instead of making new ones.  A capture of such a loop then makes no
 * fork object and takes no stream, event or context reference of its
 * own.
 *
 * Kept forks are forks in every other respect: they capture, split and
 * join as those of cucap_builder_split() do, and a join closes them
 * (CLOSED; cucap_builder_stream() and cucap_builder_context() then return
 * NULL) until b's next capture hands them out again.  A fork is handed out
 * at most once per capture: a second call in the same capture gets
 * further forks.  One that is still open when its capture ended (never
 * joined) is closed by the next call and handed out again.
 *
 * Each kept fork is still the caller's to destroy, once, when the caller
 * is done with it (not after every capture), in any order with b:
 * destroying it gives it up, and b makes a new one when it needs one.
 * Destroying b leaves the kept forks the caller has not destroyed alive
 * until it does.  Do not destroy a kept fork while another thread splits
 * b.  A builder kept by cucap_builder_destroy() for the next
 * cucap_builder_create() lets go of its kept forks first.
 *
 * \param       b       A CAPTURING PRIMARY builder.
 * \param       count   2 to CUCAP_SPLIT_MAX: b and count - 1 forks.
 * \param       forks   Receives count - 1 builders; all NULL on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      as cucap_builder_split(); CUDA_ERROR_ILLEGAL_STATE for a
 *              fork or a conditional body.
 * \since       1.4.0 (LIBCUCAPTURE_1.4)
 */
CUCAP_API CUresult cucap_builder_split_kept(cucap_builder *b, size_t count, cucap_builder **forks,
                                            cucap_error **err);

/**
 * \brief       Fork the capture onto another device
 *
 * As cucap_builder_split(), but the forks' streams belong to the primary
 * context of device dev (retained for the forks' life): work queued on
 * them runs on dev, and cucap_builder_join() brings them back into b's
 * capture, which ends as one graph holding every device's work.  Device
 * memory used on a fork must be device dev's (a cucap_device_pool(dev)
 * allocation on the fork's stream becomes an allocation node of the same
 * graph); the driver needs no peer access for that.  The calls on the
 * forks that need a context make dev's current and restore the caller's.
 * Every builder rule holds unchanged for such forks: an unjoined or
 * invalidated fork, and any destroy order.  dev equal to b's device is
 * cucap_builder_split().
 *
 * \param       b       A CAPTURING builder of any kind.
 * \param       dev     The device of the forks.
 * \param       count   2 to CUCAP_SPLIT_MAX: b and count - 1 forks.
 * \param       forks   Receives count - 1 builders.  Not written when the
 *                      count is refused.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      as cucap_builder_split(); CUDA_ERROR_INVALID_VALUE for a
 *              device ordinal that does not exist (as cucap_builder_create());
 *              an error of cuDevicePrimaryCtxRetain.
 */
CUCAP_API CUresult cucap_builder_split_on(cucap_builder *b, CUdevice dev, size_t count, cucap_builder **forks,
                                          cucap_error **err);

/**
 * \brief       Join builders back into one
 *
 * The root (the first builder that is not FORKED, else the first) waits
 * on every other builder, which is then closed.  If that fails partway,
 * every other builder is still closed, joined or not: its stream waits
 * for the end of the root's capture, which still holds it, and goes back
 * to the library's cache then.  The root's capture is never ended here.
 *
 * \param       builders  count builders; every one CAPTURING.
 * \param       count   2 or more.
 * \param       root    Receives the root (may be NULL; may point into
 *                      builders: it is written after they are read).
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_ERROR_INVALID_VALUE for fewer than two builders, a NULL
 *              or repeated entry, or builders of different captures (the
 *              message names each capture by the stream that began it; the
 *              driver would answer CUDA_ERROR_STREAM_CAPTURE_MERGE and
 *              invalidate both): nothing is done then, and both captures
 *              go on; CUDA_ERROR_ILLEGAL_STATE for a closed
 *              entry or one that is not capturing, the root included (a
 *              NOT_STARTED body, a fork whose primary's capture ended):
 *              nothing is done then; a driver error.
 */
CUCAP_API CUresult cucap_builder_join(cucap_builder *const *builders, size_t count, cucap_builder **root,
                                      cucap_error **err);

/**
 * \brief       Join every open fork split from b back into b
 *
 * The common case of cucap_builder_join(): b is the root, and the others
 * are the forks that cucap_builder_split(b, ...) handed out and that are
 * still open (forks of those forks are not included).  Each joined fork
 * is closed; the caller still destroys it.  The forks must not be in use
 * by other threads during the call.
 *
 * \param       b       A CAPTURING builder.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS (also when no fork is open);
 *              CUDA_ERROR_OUT_OF_MEMORY; otherwise as cucap_builder_join().
 */
CUCAP_API CUresult cucap_builder_join_forks(cucap_builder *b, cucap_error **err);

/**
 * \brief       Make b's work from here on wait for the work captured on
 *              other so far, leaving both open
 *
 * cudaStreamWaitEvent between two streams of one capture, without a
 * throwaway split and join: b and other go on capturing, other is not
 * closed, and work captured on other later does not order b.  Both are
 * builders of one running capture (a primary, its forks, a body and its
 * own forks), in any order.
 *
 * \param       b       A CAPTURING builder, which waits.
 * \param       other   Another CAPTURING builder of b's capture.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL, b == other,
 *              or builders of two captures (nothing is done, both go on, as
 *              in cucap_builder_join()); CUDA_ERROR_ILLEGAL_STATE when
 *              either is not CAPTURING; a driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_builder_wait(cucap_builder *b, cucap_builder *other, cucap_error **err);

/**
 * \brief       Make an ENDED or INVALIDATED PRIMARY builder NOT_STARTED again,
 *              keeping its stream, for the next capture
 *
 * For a loop that captures again and again with one builder, as
 * hand-written code keeps one stream.  The builder drops its reference to
 * the last capture's graph: references from cucap_builder_graph() and
 * executable graphs made from it stay valid.  The last capture's forks
 * stay the caller's to destroy and are no longer the builder's forks
 * (cucap_builder_join_forks() does not see them); kept forks
 * (cucap_builder_split_kept()) stay kept for the next capture.  A NOT_STARTED builder
 * is left as it is.  No driver call is made but the graph's destruction
 * when this was its last reference.
 *
 * \param       b       A PRIMARY builder, not CAPTURING.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL;
 *              CUDA_ERROR_ILLEGAL_STATE for a CAPTURING or CLOSED builder,
 *              a fork or a body (the builder is left as it was).
 * \since       1.4.0 (LIBCUCAPTURE_1.4)
 */
CUCAP_API CUresult cucap_builder_reset(cucap_builder *b, cucap_error **err);

/**
 * \brief       Give up a running capture: end it and discard what it made
 *
 * For the error path of code that fills a capture and cannot finish it
 * (a C++ exception, a failed step of the caller's own).  A CAPTURING
 * builder's capture is ended, so the thread that began it is no longer
 * capturing, and its graph, if the driver made one, is discarded; the
 * driver's UNJOINED, INVALIDATED or WRONG_THREAD answers end the capture
 * too and are not failures here.  Afterwards the builder may begin again:
 * a PRIMARY is NOT_STARTED, as after cucap_builder_reset(); a BODY is
 * INVALIDATED, its node's body empty until it captures again (until then
 * the parent refuses to be instantiated).  Forks split from it stay the
 * caller's to destroy.  A builder that is not CAPTURING, or NULL, is left
 * as it is.  A FORKED builder is not abandoned on its own (its capture is
 * its primary's): it is left as it is and a warning says so.  A capture
 * that could not be ended (the driver refused twice and reports it still
 * running) goes to the warning handler.
 *
 * \param       b       Any builder, or NULL.
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API void cucap_builder_abandon(cucap_builder *b);

/**
 * Values up to this many bytes go from the caller's memory straight to the
 * parameter block; larger ones through pinned memory of the library's
 * (cucap_exec_launch_params()).  Before 1.6 it was the largest block; a
 * block may now have any size the device's memory holds.
 */
#define CUCAP_PARAMS_MAX 65536

/**
 * \brief       A parameter block: device memory the capture's work reads,
 *              filled anew at each launch
 *
 * For a graph captured once and replayed with values that change at each
 * launch (a token's position, a step's scalars): capture kernels that read
 * their values from *block, then launch with cucap_exec_launch_params(),
 * which copies the launch's values into the block just before it.  The
 * library owns the memory and the copy: the values of one launch never
 * change what an earlier launch reads, with any number of launches queued
 * on any streams, and the block lives until the last executable graph
 * that reads it is destroyed and its last launch is done.
 *
 * One block per capture: put every value in one struct.  A primary
 * builder keeps its last capture's block while it lives: reset and begun
 * again, it gets the same block back when it asks for the same size,
 * whatever else holds the last capture's graph (so an executable graph
 * updated from the new capture reads the same address); a destroyed
 * builder that cucap_builder_create() hands out again makes a new one,
 * and a block asked for on a fork is new in each capture.  Allocated
 * stream-ordered from a memory pool of the library's, in relaxed thread
 * mode, which no capture refuses; its contents are undefined until the
 * first launch with values.
 * Executable graphs made from the capture (cucap_builder_complete(),
 * cucap_graph_instantiate(), cucap_builder_complete_into()), or updated
 * from it (cucap_exec_update()), read the block; a graph that embeds this
 * one (cucap_builder_embed()) is refused, since nothing would fill it.
 *
 * \param       b       A CAPTURING PRIMARY or FORKED builder (a fork's block
 *                      is its capture's).
 * \param       size    Bytes, 1 or more (any size since 1.6; up to 1.5,
 *                      CUCAP_PARAMS_MAX at most).
 * \param       block   Receives the block's device address (0 on failure).
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL builder or
 *              block, or a size of 0;
 *              CUDA_ERROR_ILLEGAL_STATE for a builder that is not capturing,
 *              a conditional body (make the block in the parent's capture),
 *              or a capture that has its block already; the driver's error
 *              of the allocation.  Nothing is made on failure, and the
 *              capture goes on.
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API CUresult cucap_builder_params(cucap_builder *b, size_t size, CUdeviceptr *block, cucap_error **err);

/**
 * \brief       Close: end a live capture first, release the stream, CLOSED
 *
 * Always leaves the builder CLOSED, then returns the end's error, if any.
 * A second close, or a NULL builder, does nothing.  A FORKED builder's
 * capture is never ended.
 *
 * \param       b       Any builder, or NULL.
 * \param       err     Receives the end's error (may be NULL).
 * \return      CUDA_SUCCESS, or the error of ending a live capture (as
 *              cucap_builder_end()); the builder is CLOSED either way.
 */
CUCAP_API CUresult cucap_builder_close(cucap_builder *b, cucap_error **err);

/**
 * \brief       Close if needed and free; failures go to the warning handler
 *
 * Ending a global or thread_local capture from a thread other than the one
 * that began it ends it with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, so a
 * builder destroyed on another thread while capturing loses its capture.
 *
 * \param       b       Any builder in any state, in any order relative to
 *                      its forks, bodies and graphs; NULL is ignored.
 */
CUCAP_API void cucap_builder_destroy(cucap_builder *b);

/**
 * \brief       The builder's stream, for the caller's own work on it
 *
 * \param       b       A builder, or NULL.
 * \return      The stream; NULL once closed, or for NULL.
 */
CUCAP_API CUstream cucap_builder_stream(const cucap_builder *b);

/**
 * \brief       The context the builder's work runs in
 *
 * For a builder of cucap_builder_create(), and its forks and bodies, the
 * device's primary context, which the builder retains while it (or any
 * fork or body of it) lives: retain it yourself
 * (cuDevicePrimaryCtxRetain) to use it longer.  For a builder on a
 * borrowed stream, that stream's context (for a stream of a green
 * context, the green context's CUcontext).  Make it current to load
 * modules or allocate memory for the work you put on the builder's
 * streams; the library itself makes it current for its own calls.
 *
 * \param       b       A builder, or NULL.
 * \return      The context; NULL once closed, or for NULL.
 */
CUCAP_API CUcontext cucap_builder_context(const cucap_builder *b);

/**
 * \brief       The builder's kind
 *
 * \param       b       A builder, or NULL.
 * \return      Its kind; CUCAP_BUILDER_PRIMARY for NULL.
 */
CUCAP_API cucap_builder_kind cucap_builder_get_kind(const cucap_builder *b);

/**
 * \brief       The builder's state
 *
 * A FORKED builder's capture is its primary's: once that ended, the fork
 * reports ENDED (the primary got a graph) or INVALIDATED.
 *
 * \param       b       A builder, or NULL.
 * \return      Its state; CUCAP_BUILDER_CLOSED for NULL.
 */
CUCAP_API cucap_builder_state cucap_builder_get_state(const cucap_builder *b);

/**
 * \brief       Whether the driver reports the capture ACTIVE
 *
 * \param       b         A builder that is not closed.
 * \param       building  Receives 1 while the capture is ACTIVE, else 0.
 * \param       err       Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL pointers;
 *              CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for a capture the
 *              driver invalidated and nobody ended yet (call end);
 *              CUDA_ERROR_ILLEGAL_STATE when closed.
 */
CUCAP_API CUresult cucap_builder_is_building(const cucap_builder *b, int *building, cucap_error **err);

/** \brief The application's work for cucap_builder_enqueue(): put it on
 *  stream and return CUDA_SUCCESS or the failing driver call's code. */
typedef CUresult (*cucap_enqueue_fn)(CUstream stream, void *user_data);

/**
 * \brief       Put the application's work on a capturing builder's stream,
 *              serialized with every other call on the same capture
 *
 * Calls fn(cucap_builder_stream(b), user_data) with the capture's lock
 * held and b's context current (the caller's is restored after), once the
 * library knows the capture is still running: a fork whose primary's
 * capture ended is refused instead of running the work outside any
 * capture.  Needed only when several threads use builders of one capture
 * at once (see the top of this file); one thread may enqueue directly.
 *
 * fn may call the library, also on builders of the same capture (the lock
 * is taken again, not waited for), but must not destroy b.  Other threads'
 * calls on the capture wait while fn runs: keep it to enqueueing.  When fn
 * fails with a capture error, the capture's end names this call as the
 * one that broke it.
 *
 * \param       b          A CAPTURING builder of any kind.
 * \param       fn         The work (not NULL).
 * \param       user_data  Passed to fn.
 * \param       err        Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS when fn returned it; fn's code when it failed
 *              (the message says so); CUDA_ERROR_INVALID_VALUE for NULL b
 *              or fn; CUDA_ERROR_ILLEGAL_STATE when b is not capturing (or
 *              is a fork whose primary's capture ended), or is closed.
 */
CUCAP_API CUresult cucap_builder_enqueue(cucap_builder *b, cucap_enqueue_fn fn, void *user_data,
                                         cucap_error **err);

/**
 * \brief       Queue a host callback that owns its data
 *
 * fn(data) is queued on b's stream: in a capture a host node, which calls
 * it at each launch of every executable graph made from the capture; in
 * a step that a graph set runs eagerly, a host function that calls it
 * once, in stream order.  fn may make no CUDA call (the driver's rule for
 * host functions).
 *
 * free_data(data), when free_data is not NULL, is called exactly once, on
 * a thread of the library's (never inside a driver callback, so it may
 * call CUDA and the library), once nothing can run the callback any more:
 * the capture's graph and every graph, copy and executable graph made from
 * it destroyed (an executable graph updated from a graph without the
 * callback lets go of it) and their last launch finished; when the
 * capture is invalidated or abandoned, once its graph is gone; after the
 * eager call ran.  The driver's user objects keep this count
 * (cuUserObjectCreate, cuGraphRetainUserObject; measured: doc/driver-facts.md).
 * When the call fails, free_data(data) has been called before it
 * returns, unless the message says the capture took the callback.
 * cucap_release_cached runs the frees due and stops the library's thread.
 *
 * \param       b          A CAPTURING builder, not a conditional body (the
 *                         driver refuses host nodes in bodies).
 * \param       fn         The callback (not NULL).
 * \param       data       Passed to fn and to free_data.
 * \param       free_data  Gives data back (may be NULL); a CUhostFn, called
 *                         on the library's thread, where CUDA calls are allowed.
 * \param       err        Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL b or fn;
 *              CUDA_ERROR_ILLEGAL_STATE when b is not capturing, closed or
 *              a conditional body; the driver's error (the capture fails
 *              with it, naming this call).
 */
CUCAP_API CUresult cucap_builder_host_callback(cucap_builder *b, CUhostFn fn, void *data, CUhostFn free_data,
                                               cucap_error **err);

/**
 * \brief       Instantiate the ended graph
 *
 * Instantiation runs in the builder's context and in relaxed thread mode
 * (so it never invalidates another thread's global capture).
 *
 * \param       b       An ENDED PRIMARY builder.
 * \param       opts    NULL for the defaults.
 * \param       out     Receives the executable graph (cucap_exec_destroy() it).
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL pointers;
 *              CUDA_ERROR_ILLEGAL_STATE unless ENDED (INVALIDATED: the
 *              driver discarded the graph), for a body, or while a body of
 *              the graph failed or is still capturing (the message names
 *              it); the driver's error (CUDA_ERROR_NOT_SUPPORTED for a
 *              second executable graph of a graph with conditional nodes).
 */
CUCAP_API CUresult cucap_builder_complete(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **out,
                                          cucap_error **err);

/** \brief What cucap_builder_complete_into() did */
typedef enum {
    CUCAP_COMPLETED_UPDATED = 1,       /**< the executable graph was updated in place */
    CUCAP_COMPLETED_INSTANTIATED = 2   /**< a new executable graph was instantiated */
} cucap_completion;

/**
 * \brief       Complete into an executable graph: update it when the driver
 *              can, instantiate anew when it cannot
 *
 * The one call for a program that captures the same work again and again:
 * with *exec NULL it instantiates as cucap_builder_complete(); otherwise
 * it updates *exec from b's graph (cucap_exec_update()), and when the
 * driver refuses the update (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: the
 * topology or a node changed in a way an update cannot follow) it
 * instantiates a new executable graph with opts, destroys the old one
 * (launches of it still in flight complete first: the driver frees it
 * when they are done) and stores the new one in *exec.  opts apply only
 * when instantiating.
 *
 * \param       b       An ENDED PRIMARY builder.
 * \param       opts    NULL for the defaults.
 * \param       exec    In: an executable graph, or NULL.  Out: the
 *                      executable graph of b's graph.  On failure *exec is
 *                      left as it was, still the caller's to destroy.
 * \param       how     Receives what was done (may be NULL); left alone
 *                      on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL exec;
 *              otherwise as cucap_builder_complete() and
 *              cucap_exec_update(), except that a refused update is not
 *              an error.
 * \since       1.4.0 (LIBCUCAPTURE_1.4)
 */
CUCAP_API CUresult cucap_builder_complete_into(cucap_builder *b, const cucap_complete_options *opts, cucap_exec **exec,
                                               cucap_completion *how, cucap_error **err);

/**
 * \brief       Name the node the last work on b's stream made, so that its
 *              executable graphs can change it
 *
 * Call it right after the work (a kernel launch of any API, a copy, a
 * memset, cucap_builder_host_callback(), cucap_builder_embed(), an event
 * recorded or waited for with the EXTERNAL flags, a conditional node),
 * before anything else is captured on b's stream.  Every executable graph
 * instantiated from the capture's graph can then change the node by name
 * (graph.h): a kernel's arguments (cucap_exec_set_kernel_arg()), a copy's
 * operands (cucap_exec_set_memcpy()), a memset's destination and value
 * (cucap_exec_set_memset()), a host callback and its data
 * (cucap_exec_set_host_callback()), an embedded graph
 * (cucap_exec_set_child_graph()), an event (cucap_exec_set_event()), and
 * whether a kernel, copy or memset runs (cucap_exec_set_enabled()).  For a
 * kernel the library reads its launch parameters and argument values
 * (cuGraphKernelNodeGetParams) and each parameter's size
 * (cuFuncGetParamInfo); for a copy or a memset, its operands.  Names
 * belong to the capture (its primary and forks), not to a conditional
 * body; a graph made by cucap_graph_clone() or embedded with
 * cucap_builder_embed() does not carry them.  In an eager run of a graph
 * set (no graph) the name is checked and nothing else is done.
 *
 * \param       b       A CAPTURING PRIMARY or FORKED builder.
 * \param       name    1 to 63 characters, new in the capture (copied).
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL builder, a
 *              NULL, empty, long or repeated name, when the last work
 *              captured on b's stream is not one node, or is a node no
 *              executable graph can change (an allocation, a free, an empty
 *              node: the message says which); CUDA_ERROR_ILLEGAL_STATE
 *              unless CAPTURING; CUDA_ERROR_NOT_SUPPORTED for a body, a
 *              kernel launched with `extra`, or a kernel on a driver older
 *              than CUDA 12.4; CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; a
 *              driver error.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_builder_name_node(cucap_builder *b, const char *name, cucap_error **err);

/** \brief Why cucap_builder_complete_into_why() did not update */
typedef struct cucap_update_refusal {
    /** The driver's answer (cuGraphExecUpdate): CU_GRAPH_EXEC_UPDATE_SUCCESS
     *  when no update was refused (*exec was updated, or was NULL). */
    CUgraphExecUpdateResult result;
    /** The node of b's graph the driver named, or NULL (borrowed: valid
     *  while b's graph lives). */
    CUgraphNode node;
    /** The driver's reason and node in words, as cucap_exec_update()'s
     *  error message gives them; "" when no update was refused. */
    char message[256];
} cucap_update_refusal;

/**
 * \brief       cucap_builder_complete_into(), saying why an update was
 *              refused
 *
 * The same call, with the driver's reason when it refused the update and
 * a new executable graph was instantiated: *how is then
 * CUCAP_COMPLETED_INSTANTIATED and *refusal holds the update result, the
 * node the driver named and the same in words.
 *
 * \param       refusal Receives the refusal (may be NULL); on success
 *                      always written, result CU_GRAPH_EXEC_UPDATE_SUCCESS
 *                      unless an update was refused; left alone on failure.
 * \return      As cucap_builder_complete_into().
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_builder_complete_into_why(cucap_builder *b, const cucap_complete_options *opts,
                                                   cucap_exec **exec, cucap_completion *how,
                                                   cucap_update_refusal *refusal, cucap_error **err);

/**
 * \brief       A shared reference to the builder's graph hierarchy
 *
 * Valid after the builder is closed or destroyed; cucap_graph_unref() it.
 * For a BODY, the body graph of its node, which lives in the parent's
 * hierarchy.
 *
 * \param       b       An ENDED PRIMARY builder, or a BODY.
 * \param       out     Receives the reference; NULL on failure.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL pointers;
 *              CUDA_ERROR_OUT_OF_MEMORY;      CUDA_ERROR_ILLEGAL_STATE for a FORKED builder, during capture,
 *              before begin, and when the driver discarded the graph.
 */
CUCAP_API CUresult cucap_builder_graph(cucap_builder *b, cucap_graph **out, cucap_error **err);

/**
 * \brief       Write the ended graph as DOT (cuGraphDebugDotPrint)
 *
 * \param       b       An ENDED builder.
 * \param       path    The file to write.
 * \param       flags   CU_GRAPH_DEBUG_DOT_FLAGS_* bits; 0 for none.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL pointers;
 *              CUDA_ERROR_ILLEGAL_STATE unless ENDED; the driver's error
 *              (the message names the path).
 */
CUCAP_API CUresult cucap_builder_dot_print(cucap_builder *b, const char *path, unsigned int flags,
                                           cucap_error **err);

/**
 * \brief       Add child's ended graph as a child-graph node where parent captures
 *
 * The driver clones the graph; a graph with allocation, free or
 * conditional nodes cannot be embedded (CUDA_ERROR_NOT_SUPPORTED).
 *
 * \param       parent  A CAPTURING builder (any kind).
 * \param       child   An ENDED builder of another capture.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL;
 *              CUDA_ERROR_ILLEGAL_STATE unless parent captures and child
 *              ENDED; the driver's error.
 */
CUCAP_API CUresult cucap_builder_embed(cucap_builder *parent, cucap_builder *child, cucap_error **err);

/**
 * \brief       Create a conditional handle on the graph b is capturing into
 *
 * \param       b               A CAPTURING builder (not inside a body).
 * \param       default_value   Applied at every launch when assign_default is set.
 * \param       assign_default  0: no default (the value is set by device code).
 * \param       out             Receives the handle.
 * \param       err             Receives the error on failure (may be NULL).
 *
 * \return      CUDA_ERROR_ILLEGAL_STATE unless the driver reports b's capture
 *              ACTIVE; CUDA_ERROR_NOT_SUPPORTED inside a conditional body
 *              (see cucap_builder_if()).
 */
CUCAP_API CUresult cucap_builder_create_condition(cucap_builder *b, unsigned int default_value, int assign_default,
                                                  CUgraphConditionalHandle *out, cucap_error **err);

/**
 * \brief       Add an IF node where b captures; its body runs when c is non-zero
 *
 * The node's body is handed out as a BODY builder (NOT_STARTED, with a
 * stream of its own) that the caller begins, captures into, ends, and
 * destroys.  A body is captured standalone and attached to the node's body
 * graph as a child graph at end, so an invalidated body capture never
 * crashes the process: its end returns the driver's error, and the
 * parent's complete refuses (CUDA_ERROR_ILLEGAL_STATE, naming the body)
 * until that body is captured again successfully.  b keeps capturing after
 * the node.
 *
 * Conditional nodes cannot be nested inside a body: the driver refuses
 * child graphs that hold them (CUDA_ERROR_NOT_SUPPORTED).  A body may hold
 * kernel, memset, memcpy, empty, child-graph and conditional nodes; its
 * end refuses others (CUDA_ERROR_NOT_SUPPORTED, naming the node type).
 *
 * \param       b          A CAPTURING builder (any kind but a body's own).
 * \param       c          A handle of b's graph (cucap_builder_create_condition()).
 * \param       then_body  Receives the BODY builder; NULL on failure.
 * \param       err        Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL pointers;
 *              CUDA_ERROR_ILLEGAL_STATE unless the driver reports b's
 *              capture ACTIVE; CUDA_ERROR_NOT_SUPPORTED inside a body or
 *              on a driver too old for the node; a driver error (no node
 *              and no body then).
 */
CUCAP_API CUresult cucap_builder_if(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body,
                                    cucap_error **err);

/**
 * \brief       Add an IF node with two bodies: then_body runs when c is
 *              non-zero, else_body when it is zero (CUDA 12.8 drivers)
 *
 * \param       then_body  Receives the body that runs for non-zero.
 * \param       else_body  Receives the body that runs for zero.
 * \return      As cucap_builder_if(); CUDA_ERROR_NOT_SUPPORTED on drivers
 *              before CUDA 12.8.
 */
CUCAP_API CUresult cucap_builder_if_else(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **then_body,
                                         cucap_builder **else_body, cucap_error **err);

/**
 * \brief       Add a WHILE node: its body repeats while c is non-zero
 *
 * \param       body    Receives the BODY builder.
 * \return      As cucap_builder_if().
 */
CUCAP_API CUresult cucap_builder_while(cucap_builder *b, CUgraphConditionalHandle c, cucap_builder **body,
                                       cucap_error **err);

/**
 * \brief       Add a SWITCH node with count bodies: body n runs when c is n,
 *              none when c >= count (CUDA 12.8 drivers)
 *
 * \param       count   1 to CUCAP_SWITCH_MAX bodies.
 * \param       bodies  Receives count BODY builders.
 * \return      CUDA_ERROR_INVALID_VALUE for a count outside 1 to
 *              CUCAP_SWITCH_MAX or NULL bodies; CUDA_ERROR_NOT_SUPPORTED on
 *              drivers before CUDA 12.8; otherwise as cucap_builder_if().
 */
CUCAP_API CUresult cucap_builder_switch(cucap_builder *b, CUgraphConditionalHandle c, size_t count,
                                        cucap_builder **bodies, cucap_error **err);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_BUILDER_H */
