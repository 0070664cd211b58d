/* Internal declarations of the simulated driver. */
#ifndef CUDASIM_INTERNAL_H
#define CUDASIM_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sim.h"

#if defined(__GNUC__)
#  define SIM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#  define SIM_NORETURN __attribute__((noreturn))
#else
#  define SIM_PRINTF(a, b)
#  define SIM_NORETURN
#endif

#define SIM_MAX_DEVICES 72
/* Memory of one simulated device (an H200's); larger requests fail. */
#define SIM_DEVICE_MEMORY ((size_t)141 << 30)

/* ---------------------------------------------------------------- sim.c */

/* One lock for the whole simulator; recursive, so that host functions run
 * by a launch may call back into the driver. */
void sim_lock(void);
void sim_unlock(void);

/* Report a behaviour under which the real driver crashes or corrupts
 * memory: a message on stderr, then SIGABRT. */
void sim_fatal(const char *fmt, ...) SIM_PRINTF(1, 2) SIM_NORETURN;

/* The driver the simulator models, and the values of that driver's ABI
 * that CUDA headers older than 12.8 do not name: the simulator is the
 * same whatever headers built it. */
#define SIM_COND_TYPE_SWITCH 2                          /* CU_GRAPH_COND_TYPE_SWITCH */
#define SIM_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED 5     /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
/* CUDASIM_DRIVER_VERSION, or the default */
int sim_driver_version(void);

int sim_env_int(const char *name, int fallback);
int sim_is_initialised(void);
int sim_device_count(void);

/* cuStreamWaitEvent was called (for cudasim_counter) */
void sim_count_wait(void);
/* live objects, by kind, for cudasim_live() */
enum sim_kind { SIM_STREAM, SIM_EVENT, SIM_GRAPH, SIM_EXEC, SIM_POOL, SIM_ALLOCATION, SIM_PINNED, SIM_KIND_COUNT };
void sim_live_add(enum sim_kind kind, int delta);
void sim_track(void *object);     /* keep a live object reachable */
void sim_untrack(void *object);

struct sim_green;
struct sim_ctx {
    uint32_t magic;
    int device;
    int retain_count;
    struct sim_green *green;         /* the green context this one was converted from, or NULL */
};
struct sim_ctx *sim_ctx_of_device(int device);
struct sim_ctx *sim_current_ctx(void);
int sim_ctx_valid(CUcontext c);
void sim_clear_current_ctx(void);
void sim_retain_primary(int device, CUcontext *out);
void sim_release_primary(int device);

/* ---------------------------------------------------------------- sim-green.c */

struct sim_green *sim_green_of(CUgreenCtx g);
int sim_green_ctx_valid(const struct sim_ctx *c);

/* ---------------------------------------------------------------- sim-graph.c (sim-exec.c: executable graphs) */

struct sim_graph;
struct sim_node;

struct sim_node {
    uint32_t magic;
    CUgraphNodeType type;
    struct sim_graph *graph;
    struct sim_node **deps;
    size_t dep_count;
    unsigned int mark;               /* reachability walks */
    int captured;                    /* made by a stream operation under capture, not added by hand */
    size_t index;                    /* position in graph->nodes */
    int disabled;                    /* an executable graph's copy: cuGraphNodeSetEnabled(0) */
    union {
        struct { CUdeviceptr dst; unsigned int value, element_size; size_t width, height, pitch; } memset;
        struct { void *dst; const void *src; size_t bytes; } memcpy;
        struct { CUhostFn fn; void *data; } host;
        struct { struct sim_graph *graph; } child;
        struct { CUdeviceptr ptr; size_t size; } alloc;
        struct { CUdeviceptr ptr; } free;
        struct { CUevent event; } event;   /* EVENT_RECORD, WAIT_EVENT */
        struct { CUgraphConditionalHandle handle; CUgraphConditionalNodeType type;
                 unsigned int size; CUgraph *bodies; } cond;
    } u;
};

enum sim_graph_state { SIM_GRAPH_LIVE, SIM_GRAPH_DISCARDED, SIM_GRAPH_DESTROYED };

/* A graph's references on a user object (sim-user-object.c). */
struct sim_user_object;
struct sim_user_ref {
    struct sim_user_object *obj;
    unsigned int count;
};

struct sim_graph {
    uint32_t magic;
    enum sim_graph_state state;
    struct sim_node *owner;          /* the conditional or child node that owns it, or NULL */
    struct sim_node **nodes;
    size_t node_count, node_cap;
    int capturing;                   /* a capture is writing into it */
    int exec_count;                  /* live execs instantiated from it */
    int counted;                     /* a root graph that counts as a live object */
    struct sim_user_ref *user_refs;  /* the user objects it holds references on */
    size_t user_ref_count;
};

int sim_graph_valid(CUgraph g);      /* LIVE; a discarded or destroyed graph is fatal */
/* Whether g, or a child graph of it, holds memory allocation or free
 * nodes (alloc_free) or conditional nodes (conditional). */
int sim_graph_has_node_types(const struct sim_graph *g, int alloc_free, int conditional);
struct sim_node *sim_graph_add(struct sim_graph *g, CUgraphNodeType type,
                               struct sim_node *const *deps, size_t dep_count);
struct sim_graph *sim_graph_new(void);
/* The live node h, or NULL. */
struct sim_node *sim_node_of(CUgraphNode h);
void sim_graph_count(struct sim_graph *g);   /* a root graph the caller can name: a live object */
/* the driver frees a capture's graph: it stays known as DISCARDED */
void sim_graph_discard(struct sim_graph *g);
int sim_graph_has_dead_body(const struct sim_graph *g);
/* Free a graph's nodes and the graphs they own; its state becomes `state`. */
void sim_graph_release(struct sim_graph *g, enum sim_graph_state state);
/* The same for an executable graph's copy, whose user objects are let go
 * of only once hold (its last launch's) is released. */
void sim_graph_release_behind(struct sim_graph *g, enum sim_graph_state state, unsigned long long hold);

/* ---------------------------------------------------------------- sim-user-object.c */

/* dst holds src's references too; -1 when out of memory. */
int sim_user_refs_copy(struct sim_graph *dst, const struct sim_graph *src);
/* g's references let go of, now or once hold is released. */
void sim_user_refs_drop(struct sim_graph *g, unsigned long long hold);
/* Holds were released: the references behind them let go of. */
void sim_user_objects_released(void);
/* Destructors due (the caller holds the lock), and running them (it does not). */
int sim_user_objects_due(void);
void sim_user_objects_run_due(void);
/* Free a destroyed graph no executable graph uses (CUDASIM_RECYCLE only). */
void sim_graph_recycle(struct sim_graph *g);
/* A copy of src owned by node `owner` (NULL: a root), or NULL when out of memory. */
struct sim_graph *sim_graph_clone(const struct sim_graph *src, struct sim_node *owner);
/* Stop when g holds a conditional node whose body the driver freed. */
void sim_graph_check_no_dead_body(const struct sim_graph *g, const char *call);
/* The conditional handles made so far: CUgraphConditionalHandle h is
 * table[h - 1]. */
struct sim_handle {
    struct sim_graph *graph;         /* where it was created */
    unsigned int default_value, flags;
    struct sim_node *node;           /* the conditional node that uses it */
};
struct sim_handle *sim_handle_table(size_t *count);
/* mark (with epoch) every node that the given nodes depend on, and themselves */
int sim_graph_mark_ancestors(struct sim_node *const *from, size_t n, unsigned int epoch);

/* ---------------------------------------------------------------- sim-stream.c */

/* Calls that the capture rules refuse: see sim_capture_check_unsafe. */
CUresult sim_capture_check_unsafe(void);
/* Common prologue of every stream-ordered call: validates the stream and
 * reports whether the work is captured (1) or runs now (0), or an error. */
CUresult sim_stream_enqueue(CUstream s, int *captured);
/* Append a node to the capture of s and make it the stream's dependency. */
struct sim_node *sim_stream_capture_node(CUstream s, CUgraphNodeType type);
struct sim_graph *sim_stream_capture_graph(CUstream s);
/* A new stream of context ctx. */
CUresult sim_stream_create_in(struct sim_ctx *ctx, CUstream *out, unsigned int flags);
/* Invalidate the capture s is part of (a call the capture refuses). */
void sim_stream_invalidate_capture(CUstream s);
int sim_stream_in_capture(CUstream s);   /* ACTIVE or INVALIDATED */

/* Work held in flight (cudasim_gate): the stream a launch runs on, while
 * it runs (the launch's host nodes hold it); a call that would wait on
 * the host for held work of the device (all = 1), of blocking streams
 * only (all = 0), counted under its name. */
void sim_launch_stream(CUstream s);
/* Event e recorded by a graph launched on the launch stream (the caller
 * holds the lock). */
void sim_event_record_at_launch(CUevent e);
/* The launch stream waits for event e from here on (the same). */
void sim_event_wait_at_launch(CUevent e);
void sim_hold_stream(CUstream s);
void sim_wait_for_held(const char *call, int all);
/* The same for hold h alone (0: none). */
void sim_wait_for_hold(unsigned long long h, const char *call);
/* A graph launch queued on s: counted as a wait when s's queue behind
 * held work is full (sim-stream.c).  The caller holds the lock. */
void sim_stream_queue_launch(CUstream s, int host_nodes, int memory_nodes);
/* Stream-ordered allocation work queued on s (an allocation, a free, a
 * launch of a graph with memory nodes): in flight while s is held
 * (sim-stream.c's model of a thread's exit).  The caller holds the lock. */
void sim_stream_queue_allocation(CUstream s);
/* A copy of bytes from pageable host memory queued on s: counted as a
 * wait when the driver would stage it only once s reaches it (behind
 * held work: above 2 MiB, or the third above 64 KiB).  The caller holds
 * the lock. */
void sim_stream_queue_pageable(CUstream s, size_t bytes);
/* The hold s's work waits behind (0: none), and whether hold h is still held. */
unsigned long long sim_stream_hold(CUstream s);
int sim_hold_running(unsigned long long h);

/* ---------------------------------------------------------------- sim-memory.c */

void *sim_memory(CUdeviceptr p, size_t bytes);   /* NULL unless inside a live allocation */
/* inside memory of a stream-ordered pool (cuMemAllocAsync, cuMemAllocFromPoolAsync, outside a capture) */
int sim_memory_stream_ordered(CUdeviceptr p);
CUdeviceptr sim_memory_allocate(size_t bytes, CUmemoryPool pool, struct sim_graph *owner);
/* A free outside a graph (cuMemFree): 0, or -1 when p is no allocation
 * that exists now.  A graph allocation keeps its address for its graph. */
int sim_memory_release(CUdeviceptr p);
void sim_memory_alloc_node(CUdeviceptr p);       /* an allocation node ran: the memory exists */
void sim_memory_free_node(CUdeviceptr p);        /* a free node ran: it does not, until the next launch */
/* Whether a launch of g can run its allocation and free nodes: the H200
 * refuses one (INVALID_VALUE) whose allocation exists still (a graph
 * allocation not freed since the last launch), or whose free node frees
 * memory that does not exist then. */
int sim_memory_launch_possible(const struct sim_graph *g);
/* g is gone: its allocations that exist live on as ordinary ones. */
void sim_memory_release_owned_by(struct sim_graph *g);
void sim_memory_init_device_pools(void);
/* A launch of g on s: before it runs (phase 0), and after (phase 1).
 * Graphs running at once on streams not ordered after each other do not
 * share graph memory (measured): one held in flight keeps its own. */
void sim_memory_graph_launch(const struct sim_graph *g, CUstream s, int phase);

/* ---------------------------------------------------------------- the entry points */

/* Each module lists the entry points it implements: the name, the CUDA
 * version that introduced the variant implemented, and the function. */
struct sim_entry {
    const char *name;
    int version;
    void *fn;
};
#define SIM_ENTRY(name, version) { #name, version, (void *)sim_##name }

extern const struct sim_entry sim_core_entries[], sim_stream_entries[],
                              sim_graph_entries[], sim_exec_entries[], sim_memory_entries[], sim_green_entries[],
                              sim_user_object_entries[], sim_unmodelled_entries[];
extern const size_t sim_core_entry_count, sim_stream_entry_count,
                    sim_graph_entry_count, sim_exec_entry_count, sim_memory_entry_count, sim_green_entry_count,
                    sim_user_object_entry_count, sim_unmodelled_entry_count;

#endif
