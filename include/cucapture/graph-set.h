/**
 * \file        cucapture/graph-set.h
 * \brief       Graph sets: many executable graphs under a memory budget
 *
 * An inference engine captures one graph per batch size or shape and
 * replays whichever fits the step.  A graph set is that cache: the
 * program gives a key (its own bytes) and a capture function; the first
 * run of a key captures the function's work, instantiates it and
 * launches it, later runs launch the same executable graph with the
 * run's values in its parameter block.  The set holds what it takes from
 * the device under a budget in bytes (and optionally in graphs), retires
 * the least recently used graphs to make room, updates a kept executable
 * graph instead of instantiating where the driver allows, and runs the
 * function eagerly, without capturing, when a step cannot be captured,
 * instantiated or kept within the budget.
 *
 * The budget with graphs that run at the same time: the driver reserves
 * graph memory for an allocating graph at its launch, in 32 MiB granules;
 * graphs queued on one stream share it, while graphs running at once on
 * different streams each take their own, even when one stream waits for
 * the other by an event (H200: 4 graphs of 8 MiB held in flight took 32
 * MiB on one stream, 128 MiB on four, 128 MiB on four chained by events).
 * So the set launches every graph with allocation nodes on a stream of
 * its own, after what the run's stream had queued and before what it
 * queues next (two event handoffs; the host does not wait): the set's
 * allocating graphs run one after another and share their memory, and
 * the budget (the reserved graph memory the driver reports, read after
 * every such launch, plus 2 KiB a node of each executable graph) holds
 * whatever the threads and streams.  The price: graphs that allocate do
 * not run side by side; graphs without allocation nodes are launched on
 * the run's stream.  stats.set_stream_launches counts those launches.  At
 * most 16 are in flight on the set's stream (a launch behind a longer
 * queue waits on the host): a run that finds it full runs eagerly.
 *
 * No call of a set waits for the GPU: not for launches in flight, the
 * set's or anyone's; retiring or destroying a graph leaves its launches
 * to finish (a graph with conditional nodes, whose destroy by the driver
 * waits, is destroyed by a later call once its launches are done).  The
 * one wait a set makes is for other threads' host work:
 * a run that needs room only graphs being made (captured and instantiated
 * by other threads) stand in the way of waits until they are counted.
 *
 * Eager runs take their memory where the step's allocations say (the
 * device's pool, for cucap_device_pool()), outside the budget; it goes
 * back to that pool when the step frees it, and to the device at
 * cucap_release_cached(), which trims the pools the library set up.
 *
 * One executable graph launched on several streams at once runs one launch
 * at a time (H100: 8.1 ms a round of a 1 ms graph on 8 streams, 1.0 ms
 * with an executable graph each).  So each stream keeps a graph of its
 * own: a run on a stream none of its key's graphs was last launched on
 * captures the step again and launches a copy for its stream, counted in
 * budget_graphs and the budget and made only where it fits without
 * retiring another graph (at most 8 graphs a key; none for graphs with
 * allocation nodes, which run on the set's stream anyway); when none can
 * be made, it takes one whose last launch is done, else the next in turn.
 *
 * The capture function runs on the calling thread with the context that
 * thread has current (none on a fresh thread): the builder it is handed
 * is in the device's primary context whatever the thread has current.
 *
 * New in 1.6.0 (version node LIBCUCAPTURE_1.6).
 */
#ifndef CUCAPTURE_GRAPH_SET_H
#define CUCAPTURE_GRAPH_SET_H

#include <stddef.h>
#include <cuda.h>
#include <cucapture/error.h>
#include <cucapture/builder.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \brief A keyed set of executable graphs */
typedef struct cucap_graph_set cucap_graph_set;

/** \brief The longest key, in bytes */
#define CUCAP_GRAPH_SET_KEY_MAX 256

/**
 * \brief       A step's work, recorded on the builder it is handed
 *
 * The function records the step on b's stream and on forks it splits
 * from b (joined before it returns), with pool allocations, a parameter
 * block (cucap_builder_params() of the size of the run's values), named
 * nodes, runtime-API kernels and library calls on those streams.  b is
 * CAPTURING; it is the set's, not the function's to end or destroy (the
 * set keeps its builders and resets them between captures: no block of
 * one capture is offered to another key's, and kept forks the function
 * splits stay with the builder until the set's destroy).  When
 * the set runs the step eagerly, b does the same work at once: forks are
 * streams ordered by events, pool allocations are stream-ordered, the
 * parameter block holds the run's values; conditional nodes and
 * cucap_builder_embed() are refused then (CUDA_ERROR_NOT_SUPPORTED), and
 * naming a node does nothing.
 *
 * \return      CUDA_SUCCESS, or an error (with *err set) that the set
 *              returns from the run as it is, notes included.
 */
typedef CUresult (*cucap_capture_fn)(cucap_builder *b, void *user_data, cucap_error **err);

/**
 * \brief       Options of a graph set
 */
typedef struct cucap_graph_set_options {
    /** The budget, in bytes of device memory: graph memory as the driver
     *  reports it reserved on the device, plus the executable graphs' own
     *  footprint (which the driver does not report: 2 KiB a node, as
     *  measured on the H200).  Above 0. */
    size_t budget_bytes;
    /** At most this many executable graphs held for keys; 0: no limit.
     *  The kept executable graphs below come on top of it. */
    size_t budget_graphs;
    /** Retired executable graphs kept aside to be updated by a new
     *  capture instead of instantiating one (their footprint within
     *  budget_bytes; only graphs without memory nodes, which the driver
     *  cannot update, are kept); 0: none.  An update is made only between
     *  graphs whose nodes match one for one in kind, kernel function and
     *  launch attributes (see cucap_exec_update()). */
    size_t kept_for_update;
    /** The capture mode of the set's captures (0 is
     *  CU_STREAM_CAPTURE_MODE_GLOBAL, the driver's default). */
    CUstreamCaptureMode capture_mode;
    /** Keep zero. */
    int reserved_int[4];
    void *reserved_ptr[2];
} cucap_graph_set_options;

/** \brief How a run ran */
typedef enum {
    CUCAP_RUN_LAUNCHED = 1,        /**< the key's executable graph was launched */
    CUCAP_RUN_INSTANTIATED = 2,    /**< captured, instantiated and launched */
    CUCAP_RUN_UPDATED = 3,         /**< captured, a kept executable graph updated and launched */
    CUCAP_RUN_EAGER = 4            /**< the function ran without capturing (the key says why) */
} cucap_run_kind;

/**
 * \brief       The set's counters and totals, read without a driver call
 */
typedef struct cucap_graph_set_stats {
    unsigned long long runs;       /**< calls of cucap_graph_set_run() that ran (not those refused) */
    unsigned long long hits;       /**< runs that found their key's executable graph and launched it */
    unsigned long long misses;     /**< the other runs: made a graph (instantiated or updated) or ran eagerly */
    unsigned long long instantiations, updates;   /**< graphs made, by runs and by warm-up */
    unsigned long long retirements;   /**< graphs retired to make room */
    unsigned long long trims;      /**< graph memory trims: only after retirements that gave some back */
    unsigned long long eager_runs, capture_failures;
    unsigned long long set_stream_launches;   /**< launches of allocating graphs, made on the set's stream */
    size_t graphs;                 /**< executable graphs held for keys, copies included */
    size_t copies;                 /**< of those, copies made for runs on other streams (see cucap_graph_set_run()) */
    size_t kept;                   /**< retired executable graphs kept for updates */
    size_t graph_memory;           /**< graph memory reserved on the device, as last measured */
    size_t footprint;              /**< the executable graphs' own footprint, summed */
    size_t budget_bytes, budget_graphs;
    char last_reason[256];         /**< why the last eager run was eager ("" if none) */
} cucap_graph_set_stats;

/**
 * \brief       What the set knows of one key
 */
typedef struct cucap_graph_set_key_stats {
    int has_graph;                 /**< an executable graph is held for it */
    size_t copies;                 /**< copies of it held for runs on other streams */
    size_t nodes;                  /**< its graph's nodes at the top level */
    size_t allocation_bytes;       /**< what its allocation nodes ask for */
    size_t footprint;              /**< the executable graph's own footprint */
    double capture_us, instantiate_us;   /**< the last capture and instantiation (or update) */
    unsigned long long runs, last_run;   /**< its runs, and the set's run count at its last */
    unsigned int failures;         /**< captures that failed in a row */
    unsigned long long retry_at;   /**< no capture is tried before its run count reaches this */
    char reason[256];              /**< why its last capture failed ("" if none) */
    char update_refusal[256];      /**< why the last kept graph tried for it was not updated ("" if none) */
} cucap_graph_set_key_stats;

/**
 * \brief       Make a graph set on device dev (its primary context)
 *
 * \param       opts    budget_bytes above 0; the reserved members zero.
 * \param       out     Receives the set.
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for NULL arguments, a
 *              budget of 0 bytes, a capture mode that is not one, or
 *              reserved members that are not zero, or a device ordinal
 *              the driver does not have; CUDA_ERROR_OUT_OF_MEMORY.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_set_create(CUdevice dev, const cucap_graph_set_options *opts, cucap_graph_set **out,
                                          cucap_error **err);

/**
 * \brief       Run the step of key on stream s
 *
 * A key with an executable graph launches it (with values in its
 * parameter block when values is not NULL).  A new key is captured with
 * fn on a builder of the set, in the set's capture mode: when its graph
 * fits the budget (the least recently used graphs retired first, their
 * launches in flight left to finish, graph memory trimmed), it is
 * instantiated, or a kept executable graph is updated with it, and
 * launched on s.  When the step cannot be captured (another thread's call
 * invalidated the capture, fn made a call that capture forbids, or left a
 * fork unjoined), instantiated (out of memory) or kept within the budget,
 * fn runs again on a builder that does not capture, its work queued on s
 * at once; the reason stays on the key, and its next capture is tried
 * after 1, 2, 4, ... more runs of it (at most 64).  Either way the
 * results are those of running fn's work once on s, in stream order
 * after what s had queued.
 *
 * One set may be run from several threads at once, with equal or
 * different keys and any streams.  While one thread captures a key,
 * another thread's run of the same key runs eagerly (it never waits for
 * the capture).  Captures and instantiations go on side by side, the
 * room each graph may take set aside first, so that the graphs being
 * made never pass the budget together.
 *
 * \param       key, key_size   1 to CUCAP_GRAPH_SET_KEY_MAX bytes,
 *                      compared whole (copied).
 * \param       fn, user_data   The capture function.
 * \param       values, values_size   The run's parameter values, or NULL
 *                      and 0.
 * \param       s       The stream the step runs on (any, the NULL stream
 *                      too).
 * \param       kind    Receives how it ran (may be NULL).
 * \param       err     Receives the error on failure (may be NULL).
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL set, key
 *              or fn, an empty key or one past the limit, values without
 *              a size or a size without values (nothing runs, nothing
 *              changes), values of another size than the key's parameter
 *              block (nothing runs; a new key's graph is captured first,
 *              which tells the block's size, and kept: the run counts as
 *              a miss); fn's own error, with its notes, when fn fails
 *              eagerly too; a driver error of the launch.  *kind is
 *              written only on success.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_set_run(cucap_graph_set *set, const void *key, size_t key_size, cucap_capture_fn fn,
                                       void *user_data, const void *values, size_t values_size, CUstream s,
                                       cucap_run_kind *kind, cucap_error **err);

/**
 * \brief       Capture and instantiate keys ahead of their first runs
 *
 * Each key without an executable graph is captured with fn (user_data[i]
 * for key i, or NULL) and instantiated, within the budget, without a
 * launch.  Several threads may warm one set at once: as in runs, their
 * captures and instantiations go on side by side within the budget; a
 * key another thread is making is left to it.  A key that cannot be
 * captured keeps the reason, as a run would, and is not an error.
 *
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE as for
 *              cucap_graph_set_run() (for any key: nothing is done).
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_set_warm(cucap_graph_set *set, const void *const *keys, const size_t *key_sizes,
                                        size_t count, cucap_capture_fn fn, void *const *user_data,
                                        cucap_error **err);

/** \brief The set's counters and totals (zeros for NULL) */
CUCAP_API void cucap_graph_set_get_stats(cucap_graph_set *set, cucap_graph_set_stats *out);

/**
 * \brief       What the set knows of key
 * \return      CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for bad arguments;
 *              CUDA_ERROR_NOT_FOUND for a key the set never ran.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API CUresult cucap_graph_set_get_key_stats(cucap_graph_set *set, const void *key, size_t key_size,
                                                 cucap_graph_set_key_stats *out, cucap_error **err);

/**
 * \brief       Destroy the set and every executable graph it holds
 *
 * Launches in flight finish (the driver frees each executable graph when
 * they are done); the call does not wait for them.  Graph memory is
 * trimmed.  Not while another thread uses the set.  NULL is ignored;
 * failures go to the warning handler.
 * \since       1.6.0 (LIBCUCAPTURE_1.6)
 */
CUCAP_API void cucap_graph_set_destroy(cucap_graph_set *set);

#ifdef __cplusplus
}
#endif

#endif /* CUCAPTURE_GRAPH_SET_H */
