/**
 * \file        cucapture/relaxed.h
 * \brief       A thread's own waits and synchronous calls beside other
 *              threads' global captures
 *
 * While any thread captures in CU_STREAM_CAPTURE_MODE_GLOBAL, the driver
 * refuses "potentially unsafe" calls from every thread whose own capture
 * mode is GLOBAL, the default of every thread, and invalidates that
 * capture: cuStreamSynchronize or cudaStreamSynchronize of a stream that
 * is not capturing, cuMemAlloc or cudaMalloc, graph instantiation,
 * cuGraphExecDestroy, cuMemAllocAsync outside a capture, and more.  A
 * program whose threads capture in global mode while others wait on their
 * own work has each of those calls break somebody else's capture.  The
 * library's own such calls already run in relaxed thread mode; this
 * scope does the same for the caller's:
 *
 *     cucap_relaxed_mode scope;
 *     if (cucap_relaxed_mode_enter(&scope, &err) == CUDA_SUCCESS) {
 *         cuStreamSynchronize(my_stream);          // no capture is harmed
 *         cucap_relaxed_mode_leave(&scope, &err);
 *     }
 *
 * (C++: a cucap::relaxed_mode object for the duration of a block.)
 *
 * The rules it relies on, as measured (doc/driver-facts.md, "Calls from
 * another thread" and "Capture mode of the calling thread"):
 *   - the mode is the calling thread's, set by
 *     cuThreadExchangeStreamCaptureMode; other threads are unaffected;
 *   - a thread in RELAXED mode may make those calls while other threads
 *     capture in any mode, and no capture is invalidated by them;
 *   - cuStreamSynchronize of a stream that is itself capturing is
 *     illegal in every mode: it invalidates that capture, scope or not.
 *
 * Scopes nest: each saves the mode it found and leave restores it, so
 * scopes are left in the reverse order of entering, on the thread that
 * entered them; the library refuses anything else.  On a thread that is
 * itself capturing in global mode, the scope relaxes the thread, not its
 * capture: the capture stays a global one for the other threads, and the
 * thread's own calls in the scope (a synchronous allocation, a wait on a
 * stream outside its capture) run as they would outside any capture
 * instead of invalidating it.  Such calls are not captured: they happen
 * now, once, not at each launch of the graph.
 */
#ifndef CUCAPTURE_RELAXED_H
#define CUCAPTURE_RELAXED_H

#include <cuda.h>
#include <cucapture/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * \brief       One relaxed-mode scope, in the caller's memory
 *
 * The fields are the library's: enter fills them, leave reads them.
 */
typedef struct cucap_relaxed_mode {
    CUstreamCaptureMode saved;   /**< private: the mode the scope found */
    unsigned int depth;          /**< private: its place among the thread's open scopes */
    unsigned int state;          /**< private: open or left */
    const void *thread;          /**< private: the thread that entered it */
} cucap_relaxed_mode;

/**
 * \brief       Switch the calling thread to relaxed capture mode
 *
 * Loads the driver first if needed (as cucap_init()).  Cheap: one
 * cuThreadExchangeStreamCaptureMode, no allocation.
 *
 * \param       scope   Where the scope keeps the mode it found; it must
 *                      stay valid until cucap_relaxed_mode_leave().
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL scope;
 *              cucap_init()'s error; the driver's error of the exchange
 *              (the thread's mode is then unchanged and the scope not
 *              open).
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API CUresult cucap_relaxed_mode_enter(cucap_relaxed_mode *scope, cucap_error **err);

/**
 * \brief       Restore the capture mode the scope found
 *
 * \param       scope   The thread's innermost open scope.
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL scope;
 *              CUDA_ERROR_ILLEGAL_STATE for a scope that is not open
 *              (never entered, or left already), one entered on another
 *              thread, or one with scopes entered after it still open
 *              (nothing is changed then); the driver's error of the
 *              exchange (the scope is left, the thread stays relaxed).
 * \since       1.5.0 (LIBCUCAPTURE_1.5)
 */
CUCAP_API CUresult cucap_relaxed_mode_leave(cucap_relaxed_mode *scope, cucap_error **err);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_RELAXED_H */
