/* Streams, events and stream capture, with the rules of doc/driver-facts.md:
 * per-thread capture modes, the unsafe-call rules, forks joining through
 * events, and every way a capture can end. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_STREAM_MAGIC 0x4d525453u
#define SIM_EVENT_MAGIC 0x544e5645u
#define SIM_DEAD_STREAM_MAGIC 0x44525453u
#define SIM_DEAD_EVENT_MAGIC 0x44564e45u

struct sim_capture;

struct sim_member {                  /* a stream that joined a capture */
    struct sim_stream *stream;       /* NULL once destroyed: its work still counts */
    struct sim_node **deps;
    size_t dep_count;
};

struct sim_capture {
    unsigned long long id;
    CUstreamCaptureMode mode;
    pthread_t thread;
    CUstreamCaptureStatus status;    /* ACTIVE or INVALIDATED */
    struct sim_graph *graph;
    int into_existing_graph;         /* cuStreamBeginCaptureToGraph */
    struct sim_member *members;      /* members[0] is the origin */
    size_t member_count;
    struct sim_capture *next;
};

struct sim_stream {
    uint32_t magic;
    unsigned long long id;           /* cuStreamGetId: never reused, unlike the handle */
    struct sim_ctx *ctx;
    unsigned int flags;
    struct sim_capture *cap;
    size_t member;                   /* index in cap->members */
    CUgraphEdgeData *edge_data;      /* zeroed, handed out by cuStreamGetCaptureInfo */
    size_t edge_cap;
    unsigned long long held;         /* its work is in flight until hold `held` is released */
    unsigned int held_slots;         /* launch slots taken behind that hold (sim_stream_queue_launch) */
    unsigned int held_pageable;      /* pageable copies above 64 KiB queued behind it (sim_stream_queue_pageable) */
    unsigned long long alloc_held;   /* stream-ordered allocations queued behind hold `alloc_held`, or waited for */
};

struct sim_event {
    uint32_t magic;
    struct sim_ctx *ctx;
    unsigned long long capture_id;   /* 0: not recorded in a capture */
    int recorded_outside;            /* last recorded on a stream that was not capturing */
    struct sim_node **deps;
    size_t dep_count;
    unsigned long long held;         /* reached only once hold `held` is released */
    unsigned long long alloc_held;   /* behind allocations in flight until hold `alloc_held` is released */
};

static struct sim_capture *captures;     /* ongoing ones, ACTIVE or INVALIDATED */
static unsigned long long next_capture_id = 1;
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static int is_legacy(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* ---------------------------------------------------------------- work held in flight */

static struct sim_stream *stream_of(CUstream s);

/* A stream whose work reached cudasim_gate (a host function, or a host
 * node of a launch) holds it, and everything queued after it, in flight
 * until cudasim_release: the work itself ran when it was queued, as all
 * work does here, but queries say NOT_READY, events recorded behind it
 * are not reached, streams that wait for them are held too, and a call
 * that would wait on the host for it is counted ("held wait"): on a GPU
 * it would block until the program opens its gate. */
static unsigned long long hold_next = 1, hold_released;
static unsigned long long newest_hold, newest_blocking_hold;   /* of any stream, destroyed ones too */
/* the newest hold with allocations that the legacy stream or a blocking
 * stream waits for by an event: the per-thread stream follows them */
static unsigned long long blocking_alloc_held;
static _Thread_local CUstream launch_stream;
static long held_waits;
static char held_wait_call[64];

/* Measured on the H100 (doc/driver-facts.md): with 174 to 232 streams
 * destroyed while their work waited behind held work, cuStreamCreate
 * waited for it; the simulator counts a wait past 128. */
#define DESTROYED_BEHIND_HELD_MAX 128
static unsigned long destroyed_behind_held;

static int is_held(unsigned long long hold)
{
    return hold > hold_released;
}

static void hold(struct sim_stream *st, unsigned long long h)
{
    if (h > st->held)
        st->held = h;
    if (h > newest_hold)
        newest_hold = h;
    if (!(st->flags & CU_STREAM_NON_BLOCKING) && h > newest_blocking_hold)
        newest_blocking_hold = h;
}

void sim_launch_stream(CUstream s)
{
    launch_stream = s;
}

void sim_hold_stream(CUstream s)
{
    struct sim_stream *st;

    sim_lock();
    if (!s)
        s = launch_stream;
    if (!is_legacy(s) && (st = stream_of(s)))
        hold(st, hold_next++);
    sim_unlock();
}

unsigned long long sim_stream_hold(CUstream s)
{
    struct sim_stream *st = is_legacy(s) ? NULL : stream_of(s);

    return st && is_held(st->held) ? st->held : 0;
}

int sim_hold_running(unsigned long long h)
{
    return is_held(h);
}

void sim_wait_for_held(const char *call, int all)
{
    sim_lock();
    if (is_held(all ? newest_hold : newest_blocking_hold)) {
        held_waits++;
        snprintf(held_wait_call, sizeof held_wait_call, "%s", call);
    }
    sim_unlock();
}

void sim_wait_for_hold(unsigned long long h, const char *call)
{
    sim_lock();
    if (h && is_held(h)) {
        held_waits++;
        snprintf(held_wait_call, sizeof held_wait_call, "%s", call);
    }
    sim_unlock();
}

/* Measured on the H100 (doc/driver-facts.md): a stream holds at most 56
 * launches of graphs with host nodes behind held work, and about 28 of
 * graphs that also allocate, before a launch waits on the host; plain
 * launches and memsets reach about 1,021.  Slots: 2 for a graph with host
 * and memory nodes, 1 for one with host nodes, 1/18 for the others (56 of
 * 1,021 rounded). */
#define HELD_SLOTS (56 * 18)

void sim_stream_queue_launch(CUstream s, int host_nodes, int memory_nodes)
{
    struct sim_stream *st;
    unsigned int slots = host_nodes ? (memory_nodes ? 36 : 18) : 1;

    st = is_legacy(s) ? NULL : stream_of(s);
    if (st && !is_held(st->held))
        st->held_slots = 0;
    if (st && is_held(st->held)) {
        if (st->held_slots + slots > HELD_SLOTS) {
            held_waits++;
            snprintf(held_wait_call, sizeof held_wait_call, "cuGraphLaunch");
        }
        st->held_slots += slots;
    }
}

/* Measured on the H100 (doc/driver-facts.md): behind held work, one
 * pageable copy above 2 MiB waited for it, and the third pageable copy
 * above 64 KiB did, whatever its size. */
#define PAGEABLE_STAGED 65536
#define PAGEABLE_ALONE ((size_t)2 << 20)
#define PAGEABLE_QUEUED 2

void sim_stream_queue_pageable(CUstream s, size_t bytes)
{
    struct sim_stream *st = is_legacy(s) ? NULL : stream_of(s);

    if (bytes <= PAGEABLE_STAGED || !st)
        return;
    if (!is_held(st->held)) {
        st->held_pageable = 0;
        return;
    }
    if (bytes > PAGEABLE_ALONE || ++st->held_pageable > PAGEABLE_QUEUED) {
        held_waits++;
        snprintf(held_wait_call, sizeof held_wait_call, "cuMemcpyHtoDAsync");
    }
}

/* Measured on the H100 (doc/driver-facts.md): a thread whose per-thread
 * stream waits, by an event or in its own queue, for stream-ordered
 * allocations (cuMemAllocAsync and the like, or a graph's memory nodes)
 * still in flight hangs in the driver when it exits; a wait for a value
 * (cuStreamWaitValue64) is no such wait.  Here such an exit behind held
 * work is counted as a held wait. */
static pthread_key_t per_thread_exit;
static pthread_once_t per_thread_exit_once = PTHREAD_ONCE_INIT;

static void per_thread_stream_exits(void *alloc_held)
{
    sim_lock();
    if (is_held((unsigned long long)(uintptr_t)alloc_held)) {
        held_waits++;
        snprintf(held_wait_call, sizeof held_wait_call, "thread exit (per-thread stream behind allocations)");
    }
    sim_unlock();
}

static void make_per_thread_exit_key(void)
{
    (void)pthread_key_create(&per_thread_exit, per_thread_stream_exits);
}

static void per_thread_stream_waits_for(unsigned long long alloc_held)
{
    pthread_once(&per_thread_exit_once, make_per_thread_exit_key);
    if (alloc_held > (unsigned long long)(uintptr_t)pthread_getspecific(per_thread_exit))
        (void)pthread_setspecific(per_thread_exit, (void *)(uintptr_t)alloc_held);
}

void sim_stream_queue_allocation(CUstream s)
{
    struct sim_stream *st = is_legacy(s) ? NULL : stream_of(s);

    if (st && is_held(st->held))
        st->alloc_held = st->held;
}

/* Values written by streams behind held work, written once it is released. */
struct pending_write {
    CUdeviceptr addr;
    cuuint64_t value;
    unsigned long long hold;
};
static struct pending_write *pending_writes;
static size_t pending_count, pending_cap;

static void write_released_values(void)
{
    size_t i, kept = 0;
    void *p;

    for (i = 0; i < pending_count; i++) {
        if (is_held(pending_writes[i].hold))
            pending_writes[kept++] = pending_writes[i];
        else if ((p = sim_memory(pending_writes[i].addr, sizeof(cuuint64_t))))
            memcpy(p, &pending_writes[i].value, sizeof(cuuint64_t));
    }
    pending_count = kept;
}

CUDASIM_EXPORT void CUDA_CB cudasim_gate(void *unused);
CUDASIM_EXPORT void cudasim_release(void);
CUDASIM_EXPORT long cudasim_held_waits(const char **last_call);

CUDASIM_EXPORT void CUDA_CB cudasim_gate(void *unused)
{
    (void)unused;
    sim_hold_stream(NULL);
}

CUDASIM_EXPORT void cudasim_release(void)
{
    sim_lock();
    hold_released = hold_next - 1;
    destroyed_behind_held = 0;
    write_released_values();
    sim_user_objects_released();
    sim_unlock();
}

CUDASIM_EXPORT long cudasim_held_waits(const char **last_call)
{
    long n;

    sim_lock();
    n = held_waits;
    if (last_call)
        *last_call = held_waits ? held_wait_call : NULL;
    sim_unlock();
    return n;
}

/* Destroyed streams and events are kept, marked dead, for the last
 * QUARANTINED destroys: a call on such a handle stops the process, as a
 * stale handle on the real driver is a use after free (it crashes, or
 * reaches whatever object the driver made there since). */
#define QUARANTINED 4096
static void *quarantine[QUARANTINED];
static size_t quarantine_next;

/* Under sim_lock: the object's memory is kept dead for a while. */
static void bury(uint32_t *magic, uint32_t dead)
{
    *magic = dead;
    free(quarantine[quarantine_next]);
    quarantine[quarantine_next] = magic;
    quarantine_next = (quarantine_next + 1) % QUARANTINED;
}

/* The driver hands a destroyed stream's handle to the next stream made
 * (11 times in 12 on an H200, also with the destroyed stream's work still
 * queued): with CUDASIM_REUSE_HANDLES=1 the simulator does the same, always,
 * taking the last destroyed stream out of the quarantine.  Otherwise a
 * destroyed handle stays dead, so that a use after destroy stops the
 * process.  Stream ids (cuStreamGetId) are never reused. */
static struct sim_stream *last_destroyed;
static unsigned long long next_stream_id = 64;
static _Thread_local unsigned long long per_thread_id;

/* Under sim_lock: the last destroyed stream's memory, out of the
 * quarantine, or NULL. */
static struct sim_stream *reuse_handle(void)
{
    const char *reuse = getenv("CUDASIM_REUSE_HANDLES");
    struct sim_stream *st = last_destroyed;
    size_t i;

    last_destroyed = NULL;
    if (!st || !reuse || strcmp(reuse, "1") != 0)
        return NULL;
    for (i = 0; i < QUARANTINED; i++)
        if (quarantine[i] == (void *)st) {
            quarantine[i] = NULL;
            memset(st, 0, sizeof *st);
            return st;
        }
    return NULL;
}

static struct sim_stream *stream_of(CUstream s)
{
    struct sim_stream *st = (struct sim_stream *)s;

    if (is_legacy(s))
        return NULL;
    if (st->magic == SIM_DEAD_STREAM_MAGIC)
        sim_fatal("use of stream %p after cuStreamDestroy", (void *)s);
    return st->magic == SIM_STREAM_MAGIC ? st : NULL;
}

static struct sim_event *event_of(CUevent e)
{
    struct sim_event *ev = (struct sim_event *)e;

    if (ev && ev->magic == SIM_DEAD_EVENT_MAGIC)
        sim_fatal("use of event %p after cuEventDestroy", (void *)e);
    return ev && ev->magic == SIM_EVENT_MAGIC ? ev : NULL;
}

static struct sim_capture *capture_by_id(unsigned long long id)
{
    struct sim_capture *c;

    for (c = captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static int set_deps(struct sim_node ***deps, size_t *count, struct sim_node *const *from, size_t n)
{
    struct sim_node **copy = NULL;

    if (n) {
        copy = malloc(n * sizeof *copy);
        if (!copy)
            return -1;
        memcpy(copy, from, n * sizeof *copy);
    }
    free(*deps);
    *deps = copy;
    *count = n;
    return 0;
}

static int add_deps(struct sim_node ***deps, size_t *count, struct sim_node *const *from, size_t n)
{
    size_t i, j;

    for (i = 0; i < n; i++) {
        struct sim_node **grown;
        for (j = 0; j < *count; j++)
            if ((*deps)[j] == from[i])
                break;
        if (j < *count)
            continue;
        grown = realloc(*deps, (*count + 1) * sizeof *grown);
        if (!grown)
            return -1;
        grown[(*count)++] = from[i];
        *deps = grown;
    }
    return 0;
}

/* ---------------------------------------------------------------- capture lifecycle */

static void invalidate(struct sim_capture *c)
{
    c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* The capture is over: every stream of it leaves it.  With discard, the
 * driver frees the graph (a graph the caller supplied included). */
static void terminate(struct sim_capture *c, int discard)
{
    struct sim_capture **p;
    size_t i;

    for (i = 0; i < c->member_count; i++) {
        if (c->members[i].stream)
            c->members[i].stream->cap = NULL;
        free(c->members[i].deps);
    }
    free(c->members);
    for (p = &captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->graph->capturing = 0;
    if (discard)
        sim_graph_discard(c->graph);
    free(c);
}

static CUresult begin(CUstream s, struct sim_graph *into, struct sim_node *const *deps, size_t dep_count,
                      CUstreamCaptureMode mode)
{
    struct sim_stream *st = stream_of(s);
    struct sim_capture *c;

    if (is_legacy(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (st->cap)
        return CUDA_ERROR_ILLEGAL_STATE;
    c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->members = calloc(1, sizeof *c->members);
    c->graph = into ? into : sim_graph_new();
    if (c->graph && !into)
        sim_graph_count(c->graph);
    if (!c->members || !c->graph || set_deps(&c->members[0].deps, &c->members[0].dep_count, deps, dep_count)) {
        if (c->graph && !into)
            sim_graph_discard(c->graph);
        free(c->members);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->id = next_capture_id++;
    c->mode = mode;
    c->thread = pthread_self();
    c->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    c->into_existing_graph = into != NULL;
    c->graph->capturing = 1;
    c->members[0].stream = st;
    c->member_count = 1;
    c->next = captures;
    captures = c;
    st->cap = c;
    st->member = 0;
    return CUDA_SUCCESS;
}

static CUresult sim_cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
    CUresult rc;

    sim_lock();
    rc = begin(s, NULL, NULL, 0, mode);
    sim_unlock();
    return rc;
}

static CUresult sim_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                const CUgraphEdgeData *edge_data, size_t dep_count,
                                                CUstreamCaptureMode mode)
{
    CUresult rc;

    (void)edge_data;
    sim_lock();
    if (!sim_graph_valid(g))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (((struct sim_graph *)g)->capturing)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    else if (dep_count && !deps)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = begin(s, (struct sim_graph *)g, (struct sim_node *const *)deps, dep_count, mode);
    sim_unlock();
    return rc;
}

/* 1 when a stream other than the origin has captured work that the
 * origin's dependencies do not reach, -1 when memory ran out.  A node
 * added by hand (cuGraphAddNode) that a stream's dependencies were SET to
 * is not such work: the driver ends that capture (measured on the H200,
 * conformance "a fork whose only work is ... added by hand"). */
static int unjoined(struct sim_capture *c)
{
    static unsigned int epoch;
    size_t i, j;

    if (sim_graph_mark_ancestors(c->members[0].deps, c->members[0].dep_count, ++epoch) != 0)
        return -1;
    for (i = 1; i < c->member_count; i++)
        for (j = 0; j < c->members[i].dep_count; j++)
            if (c->members[i].deps[j]->captured && c->members[i].deps[j]->mark != epoch)
                return 1;
    return 0;
}

static CUresult sim_cuStreamEndCapture(CUstream s, CUgraph *out)
{
    struct sim_stream *st;
    struct sim_capture *c;
    CUresult rc = CUDA_SUCCESS;
    int open_work;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    st = stream_of(s);
    *out = NULL;
    if (!st) {
        rc = is_legacy(s) ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
        goto done;
    }
    c = st->cap;
    if (!c) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (st->member != 0) {
        invalidate(c);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    } else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        terminate(c, 1);
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else if (c->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        terminate(c, 1);
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if ((open_work = unjoined(c)) != 0) {
        if (open_work < 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            terminate(c, 1);
            rc = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        }
    } else {
        struct sim_graph *g = c->graph;
        if (sim_graph_has_dead_body(g))
            sim_fatal("cuStreamEndCapture: the captured graph holds a conditional node whose body "
                      "capture was invalidated and whose body graph the driver freed");
        terminate(c, 0);
        *out = (CUgraph)g;
    }
done:
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------- queries */

static CUresult sim_cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                           CUgraph *graph, const CUgraphNode **deps,
                                           const CUgraphEdgeData **edge_data, size_t *dep_count)
{
    struct sim_stream *st;
    CUresult rc = CUDA_SUCCESS;

    if (!status || (edge_data && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    st = stream_of(s);
    if (!st && !is_legacy(s)) {
        rc = CUDA_ERROR_INVALID_HANDLE;
    } else if (!st || !st->cap) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (st->cap->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        /* measured: the other outputs are not written, graph_out included */
        *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    } else {
        struct sim_member *m = &st->cap->members[st->member];
        *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id)
            *id = st->cap->id;
        if (graph)
            *graph = (CUgraph)st->cap->graph;
        if (deps)
            *deps = (const CUgraphNode *)m->deps;
        if (dep_count)
            *dep_count = m->dep_count;
        if (edge_data) {
            if (st->edge_cap < m->dep_count) {
                CUgraphEdgeData *grown = realloc(st->edge_data, m->dep_count * sizeof *grown);
                if (!grown) {
                    rc = CUDA_ERROR_OUT_OF_MEMORY;
                    goto done;
                }
                st->edge_data = grown;
                st->edge_cap = m->dep_count;
            }
            if (m->dep_count)
                memset(st->edge_data, 0, m->dep_count * sizeof *st->edge_data);
            *edge_data = m->dep_count ? st->edge_data : NULL;
        }
    }
done:
    sim_unlock();
    return rc;
}

static CUresult sim_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return sim_cuStreamGetCaptureInfo(s, status, NULL, NULL, NULL, NULL, NULL);
}

static CUresult sim_cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *nodes,
                                                      const CUgraphEdgeData *edge_data, size_t n,
                                                      unsigned int flags)
{
    struct sim_stream *st;
    CUresult rc = CUDA_SUCCESS;
    size_t i;

    (void)edge_data;
    sim_lock();
    st = stream_of(s);
    if (!st) {
        rc = is_legacy(s) ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
    } else if (!st->cap) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (st->cap->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if ((n && !nodes) || (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
                                 flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        struct sim_member *m = &st->cap->members[st->member];
        for (i = 0; i < n; i++) {
            struct sim_node *node = (struct sim_node *)nodes[i];
            if (!node || node->graph != st->cap->graph) {
                rc = CUDA_ERROR_INVALID_VALUE;
                goto done;
            }
        }
        if ((flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES
                 ? set_deps(&m->deps, &m->dep_count, (struct sim_node *const *)nodes, n)
                 : add_deps(&m->deps, &m->dep_count, (struct sim_node *const *)nodes, n)) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
done:
    sim_unlock();
    return rc;
}

static CUresult sim_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode previous;

    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    previous = thread_mode;
    thread_mode = *mode;             /* the real driver does not validate it either */
    *mode = previous;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- the capture rules */

/* A call that is not allowed during capture: refused, and the captures
 * that refuse it invalidated, by the rules of cuThreadExchangeStreamCaptureMode:
 * GLOBAL threads are refused by their own non-relaxed captures and by any
 * thread's GLOBAL capture, THREAD_LOCAL threads by their own non-relaxed
 * captures, RELAXED threads never. */
CUresult sim_capture_check_unsafe(void)
{
    struct sim_capture *c;
    int refused = 0;

    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    sim_lock();
    for (c = captures; c; c = c->next) {
        int own = c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && pthread_equal(c->thread, pthread_self());
        int global = thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (own || global) {
            invalidate(c);
            refused = 1;
        }
    }
    sim_unlock();
    return refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Work queued on the legacy stream waits for every blocking stream of
 * its context, so it cannot be queued while one of them captures: the
 * call is refused (STREAM_CAPTURE_IMPLICIT) and that capture invalidated
 * (CUDA's documentation of cudaErrorStreamCaptureImplicit; a conformance
 * row holds the GPU to it). */
static CUresult legacy_enqueue(void)
{
    struct sim_ctx *ctx = sim_current_ctx();
    struct sim_capture *c;
    int refused = 0;
    size_t i;

    sim_lock();
    for (c = captures; c; c = c->next)
        for (i = 0; c->status == CU_STREAM_CAPTURE_STATUS_ACTIVE && i < c->member_count; i++) {
            struct sim_stream *st = c->members[i].stream;
            if (st && st->ctx == ctx && !(st->flags & CU_STREAM_NON_BLOCKING)) {
                invalidate(c);
                refused = 1;
            }
        }
    sim_unlock();
    return refused ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

CUresult sim_stream_enqueue(CUstream s, int *captured)
{
    struct sim_stream *st;
    CUresult rc = CUDA_SUCCESS;

    *captured = 0;
    if (s == NULL || s == CU_STREAM_LEGACY)
        return legacy_enqueue();
    if (s == CU_STREAM_PER_THREAD) {
        /* measured on the H100: it waits for the legacy stream's work */
        sim_lock();
        if (is_held(blocking_alloc_held))
            per_thread_stream_waits_for(blocking_alloc_held);
        sim_unlock();
        return CUDA_SUCCESS;
    }
    if (is_legacy(s))
        return CUDA_SUCCESS;
    sim_lock();
    st = stream_of(s);
    if (!st)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (st->cap && st->cap->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (st->cap)
        *captured = 1;
    sim_unlock();
    return rc;
}

int sim_stream_in_capture(CUstream s)
{
    struct sim_stream *st = stream_of(s);

    return st && st->cap;
}

void sim_stream_invalidate_capture(CUstream s)
{
    struct sim_stream *st = stream_of(s);

    if (st && st->cap)
        invalidate(st->cap);
}

struct sim_graph *sim_stream_capture_graph(CUstream s)
{
    struct sim_stream *st = stream_of(s);
    return st && st->cap ? st->cap->graph : NULL;
}

struct sim_node *sim_stream_capture_node(CUstream s, CUgraphNodeType type)
{
    struct sim_stream *st = stream_of(s);
    struct sim_member *m = &st->cap->members[st->member];
    struct sim_node *node = sim_graph_add(st->cap->graph, type, m->deps, m->dep_count);

    if (node)
        node->captured = 1;
    if (node && set_deps(&m->deps, &m->dep_count, &node, 1) != 0)
        return NULL;
    return node;
}

/* ---------------------------------------------------------------- streams */

CUresult sim_stream_create_in(struct sim_ctx *ctx, CUstream *out, unsigned int flags)
{
    struct sim_stream *st;

    if (!out || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_lock();
    st = reuse_handle();
    if (destroyed_behind_held > DESTROYED_BEHIND_HELD_MAX) {
        held_waits++;
        snprintf(held_wait_call, sizeof held_wait_call, "cuStreamCreate");
    }
    sim_unlock();
    if (!st && !(st = calloc(1, sizeof *st)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_lock();
    st->id = next_stream_id++;
    sim_unlock();
    st->magic = SIM_STREAM_MAGIC;
    st->ctx = ctx;   /* a green context's converted context: a stream of that green context */
    st->flags = flags;
    sim_live_add(SIM_STREAM, 1);
    sim_track(st);
    *out = (CUstream)st;
    return CUDA_SUCCESS;
}

static CUresult sim_cuStreamCreate(CUstream *out, unsigned int flags)
{
    return sim_stream_create_in(sim_current_ctx(), out, flags);
}

static CUresult sim_cuStreamDestroy(CUstream s)
{
    struct sim_stream *st;

    sim_lock();
    st = stream_of(s);
    if (!st) {
        sim_unlock();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (st->cap) {
        if (st->member == 0)
            terminate(st->cap, 1);   /* the origin is gone: so is its capture */
        else
            st->cap->members[st->member].stream = NULL;   /* its work still has to be joined */
    }
    if (is_held(st->held))
        destroyed_behind_held++;
    sim_untrack(st);
    free(st->edge_data);
    st->edge_data = NULL;
    bury(&st->magic, SIM_DEAD_STREAM_MAGIC);
    last_destroyed = st;
    sim_live_add(SIM_STREAM, -1);
    sim_unlock();
    return CUDA_SUCCESS;
}

/* The legacy stream (NULL too) has one id; the per-thread stream one id
 * in each thread (as measured on the H200: doc/driver-facts.md). */
static CUresult sim_cuStreamGetFlags(CUstream s, unsigned int *flags)
{
    struct sim_stream *st;
    CUresult rc = CUDA_SUCCESS;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (is_legacy(s)) {
        *flags = 0;
        return CUDA_SUCCESS;
    }
    sim_lock();
    if ((st = stream_of(s)) != NULL)
        *flags = st->flags;
    else
        rc = CUDA_ERROR_INVALID_HANDLE;
    sim_unlock();
    return rc;
}

static CUresult sim_cuStreamGetId(CUstream s, unsigned long long *id)
{
    struct sim_stream *st;

    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (s == NULL || s == CU_STREAM_LEGACY) {
        *id = 7;
        return CUDA_SUCCESS;
    }
    sim_lock();
    if (s == CU_STREAM_PER_THREAD) {
        if (!per_thread_id)
            per_thread_id = next_stream_id++;
        *id = per_thread_id;
        sim_unlock();
        return CUDA_SUCCESS;
    }
    st = stream_of(s);
    if (st)
        *id = st->id;
    sim_unlock();
    return st ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A synchronizing call on a stream that is part of a capture invalidates
 * that capture in every mode. */
static CUresult synchronize(CUstream s, int query)
{
    struct sim_stream *st;
    CUresult rc = CUDA_SUCCESS;

    sim_lock();
    st = stream_of(s);
    if (!st && !is_legacy(s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (st && st->cap) {
        invalidate(st->cap);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if ((rc = sim_capture_check_unsafe()) == CUDA_SUCCESS) {
        /* the legacy stream waits for every blocking stream */
        int held = st ? is_held(st->held) : is_held(newest_blocking_hold);
        if (held && query)
            rc = CUDA_ERROR_NOT_READY;
        else if (held)
            sim_wait_for_held("cuStreamSynchronize", 0);
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuStreamSynchronize(CUstream s)
{
    return synchronize(s, 0);
}

static CUresult sim_cuStreamQuery(CUstream s)
{
    return synchronize(s, 1);
}

static CUresult stream_ctx(CUstream s, CUcontext *ctx)
{
    struct sim_stream *st;

    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (is_legacy(s)) {
        if (!sim_current_ctx())
            return CUDA_ERROR_INVALID_CONTEXT;
        *ctx = (CUcontext)sim_current_ctx();
        return CUDA_SUCCESS;
    }
    sim_lock();
    st = stream_of(s);
    if (st)
        *ctx = (CUcontext)st->ctx;
    sim_unlock();
    return st ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult sim_cuStreamGetCtx(CUstream s, CUcontext *ctx)
{
    return stream_ctx(s, ctx);
}

/* A stream of a green context: the green context, and the device's
 * primary context as the context (cuStreamGetCtx, the first variant,
 * returns the green context's converted CUcontext instead). */
static CUresult sim_cuStreamGetCtx_v2(CUstream s, CUcontext *ctx, CUgreenCtx *green)
{
    CUcontext handle = NULL;
    CUresult rc = stream_ctx(s, &handle);
    struct sim_ctx *c = (struct sim_ctx *)handle;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (green)
        *green = (CUgreenCtx)c->green;
    *ctx = (CUcontext)(c->green ? sim_ctx_of_device(c->device) : c);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- events */

static CUresult sim_cuEventCreate(CUevent *out, unsigned int flags)
{
    struct sim_event *ev;

    (void)flags;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    ev = calloc(1, sizeof *ev);
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->magic = SIM_EVENT_MAGIC;
    ev->ctx = sim_current_ctx();
    sim_live_add(SIM_EVENT, 1);
    sim_track(ev);
    *out = (CUevent)ev;
    return CUDA_SUCCESS;
}

static CUresult sim_cuEventDestroy(CUevent e)
{
    struct sim_event *ev;

    sim_lock();
    ev = event_of(e);
    if (ev) {
        sim_untrack(ev);
        free(ev->deps);
        ev->deps = NULL;
        bury(&ev->magic, SIM_DEAD_EVENT_MAGIC);
        sim_live_add(SIM_EVENT, -1);
    }
    sim_unlock();
    return ev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ev recorded on s outside any capture (the caller holds the lock). */
static void record_outside(struct sim_event *ev, CUstream s)
{
    struct sim_stream *st = stream_of(s);

    ev->capture_id = 0;
    ev->recorded_outside = 1;
    set_deps(&ev->deps, &ev->dep_count, NULL, 0);
    ev->held = st && is_held(st->held) ? st->held : is_legacy(s) && is_held(newest_blocking_hold) ? newest_blocking_hold : 0;
    ev->alloc_held = st && is_held(st->alloc_held) ? st->alloc_held : 0;
}

void sim_event_record_at_launch(CUevent e)
{
    struct sim_event *ev = event_of(e);

    if (ev)
        record_outside(ev, launch_stream);
}

void sim_event_wait_at_launch(CUevent e)
{
    struct sim_event *ev = event_of(e);
    struct sim_stream *st = stream_of(launch_stream);

    if (ev && st && is_held(ev->held))
        hold(st, ev->held);
}

/* With external: an event record node when s captures. */
static CUresult record(CUevent e, CUstream s, int external)
{
    struct sim_event *ev;
    struct sim_stream *st;
    int captured;
    CUresult rc;

    sim_lock();
    ev = event_of(e);
    rc = ev ? sim_stream_enqueue(s, &captured) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && captured && external) {
        struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
        if (!node)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            node->u.event.event = e;
    } else if (rc == CUDA_SUCCESS && captured) {
        st = stream_of(s);
        struct sim_member *m = &st->cap->members[st->member];
        if (set_deps(&ev->deps, &ev->dep_count, m->deps, m->dep_count) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            ev->capture_id = st->cap->id;
        ev->recorded_outside = 0;
    } else if (rc == CUDA_SUCCESS) {
        record_outside(ev, s);
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuEventRecord(CUevent e, CUstream s)
{
    return record(e, s, 0);
}

static CUresult sim_cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
    if (flags & ~(unsigned int)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    return record(e, s, (flags & CU_EVENT_RECORD_EXTERNAL) != 0);
}

static CUresult event_reached(CUevent e, int query)
{
    CUresult rc;

    sim_lock();
    if (!event_of(e))
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (capture_by_id(event_of(e)->capture_id))
        rc = CUDA_ERROR_CAPTURED_EVENT;
    else if ((rc = sim_capture_check_unsafe()) == CUDA_SUCCESS && is_held(event_of(e)->held)) {
        if (query)
            rc = CUDA_ERROR_NOT_READY;
        else {
            held_waits++;
            snprintf(held_wait_call, sizeof held_wait_call, "cuEventSynchronize");
        }
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuEventSynchronize(CUevent e)
{
    return event_reached(e, 0);
}

/* The simulator's work is done when it is queued: a recorded event has
 * been reached unless held work was before it. */
static CUresult sim_cuEventQuery(CUevent e)
{
    return event_reached(e, 1);
}

static CUresult sim_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    struct sim_event *ev;
    struct sim_stream *st;
    struct sim_capture *from;
    CUresult rc = CUDA_SUCCESS;

    if (flags & ~(unsigned int)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    sim_count_wait();
    sim_lock();
    ev = event_of(e);
    st = stream_of(s);
    if (!ev || (!st && !is_legacy(s))) {
        rc = CUDA_ERROR_INVALID_HANDLE;
        goto done;
    }
    if (st && st->cap && st->cap->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        goto done;
    }
    from = capture_by_id(ev->capture_id);
    if (!from && !(st && st->cap) && is_held(ev->alloc_held)) {
        if (st && ev->alloc_held > st->alloc_held)
            st->alloc_held = ev->alloc_held;
        else if (s == CU_STREAM_PER_THREAD)
            per_thread_stream_waits_for(ev->alloc_held);
        if ((st ? !(st->flags & CU_STREAM_NON_BLOCKING) : s != CU_STREAM_PER_THREAD) &&
            ev->alloc_held > blocking_alloc_held)
            blocking_alloc_held = ev->alloc_held;
    }
    if (!from && !(st && st->cap) && is_held(ev->held)) {
        if (st)
            hold(st, ev->held);
        else
            newest_blocking_hold = ev->held > newest_blocking_hold ? ev->held : newest_blocking_hold;
    }
    if (st && st->cap && (flags & CU_EVENT_WAIT_EXTERNAL)) {   /* a wait node: any event */
        struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
        if (!node)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            node->u.event.event = e;
        goto done;
    }
    if (!from && st && st->cap && ev->recorded_outside) {
        /* measured on the H200: a capture may not wait on work outside it */
        invalidate(st->cap);
        rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        goto done;
    }
    if (!from)
        goto done;                    /* a completed event: nothing to wait for */
    if (!st) {
        invalidate(from);             /* the legacy stream cannot join a capture */
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (st->cap && st->cap != from) {
        invalidate(st->cap);
        invalidate(from);
        rc = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (from->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (st->cap) {
        struct sim_member *m = &st->cap->members[st->member];
        if (add_deps(&m->deps, &m->dep_count, ev->deps, ev->dep_count) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        struct sim_member *grown = realloc(from->members, (from->member_count + 1) * sizeof *grown);
        if (!grown) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto done;
        }
        from->members = grown;
        memset(&grown[from->member_count], 0, sizeof *grown);
        if (set_deps(&grown[from->member_count].deps, &grown[from->member_count].dep_count,
                     ev->deps, ev->dep_count) != 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto done;
        }
        grown[from->member_count].stream = st;
        st->cap = from;
        st->member = from->member_count++;
    }
done:
    sim_unlock();
    return rc;
}

/* The work of every stream done: a wait, counted, when any is held. */
static CUresult sim_cuCtxSynchronize(void)
{
    CUresult rc;

    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_wait_for_held("cuCtxSynchronize", 1);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- stream memory operations */

static int value_passes(cuuint64_t now, cuuint64_t value, unsigned int flags)
{
    switch (flags & 0xf) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return (int64_t)(now - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return now == value;
    case CU_STREAM_WAIT_VALUE_AND:
        return (now & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR:
        return ~(now | value) != 0;
    default:
        return 0;
    }
}

/* Not modelled in a capture (the library captures none): refused there. */
static CUresult value_op_enqueue(CUstream s, CUdeviceptr addr, void **mem)
{
    int captured;
    CUresult rc = sim_stream_enqueue(s, &captured);

    if (rc == CUDA_SUCCESS && captured) {
        sim_stream_invalidate_capture(s);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    /* measured on the H100: memory of a stream-ordered pool is refused */
    if (rc == CUDA_SUCCESS && (!(*mem = sim_memory(addr, sizeof(cuuint64_t))) || sim_memory_stream_ordered(addr)))
        rc = CUDA_ERROR_INVALID_VALUE;
    return rc;
}

static CUresult sim_cuStreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    struct sim_stream *st;
    struct pending_write *grown;
    void *mem = NULL;
    CUresult rc;

    (void)flags;
    sim_lock();
    st = is_legacy(s) ? NULL : stream_of(s);
    if ((rc = value_op_enqueue(s, addr, &mem)) == CUDA_SUCCESS) {
        if (st && is_held(st->held)) {
            if (pending_count == pending_cap &&
                (grown = realloc(pending_writes, (pending_cap ? 2 * pending_cap : 16) * sizeof *grown))) {
                pending_writes = grown;
                pending_cap = pending_cap ? 2 * pending_cap : 16;
            }
            if (pending_count < pending_cap)
                pending_writes[pending_count++] = (struct pending_write){ addr, value, st->held };
            else
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            memcpy(mem, &value, sizeof value);
        }
    }
    sim_unlock();
    return rc;
}

/* A wait for a value no queued write gives is reached at once (not
 * modelled: on a GPU the stream would wait until something wrote it). */
static CUresult sim_cuStreamWaitValue64(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    struct sim_stream *st;
    cuuint64_t now;
    void *mem = NULL;
    CUresult rc;
    size_t i;

    sim_lock();
    st = is_legacy(s) ? NULL : stream_of(s);
    if ((rc = value_op_enqueue(s, addr, &mem)) == CUDA_SUCCESS) {
        memcpy(&now, mem, sizeof now);
        for (i = pending_count; !value_passes(now, value, flags) && i-- > 0;)
            if (pending_writes[i].addr == addr && value_passes(pending_writes[i].value, value, flags)) {
                if (st)
                    hold(st, pending_writes[i].hold);
                else if (!(s == CU_STREAM_PER_THREAD) && pending_writes[i].hold > newest_blocking_hold)
                    newest_blocking_hold = pending_writes[i].hold;
                break;
            }
    }
    sim_unlock();
    return rc;
}

const struct sim_entry sim_stream_entries[] = {
    SIM_ENTRY(cuStreamBeginCapture, 10010),
    SIM_ENTRY(cuStreamBeginCaptureToGraph, 12030),
    SIM_ENTRY(cuStreamEndCapture, 10000),
    SIM_ENTRY(cuStreamGetCaptureInfo, 12030),
    SIM_ENTRY(cuStreamIsCapturing, 10000),
    SIM_ENTRY(cuStreamUpdateCaptureDependencies, 12030),
    SIM_ENTRY(cuThreadExchangeStreamCaptureMode, 10010),
    SIM_ENTRY(cuStreamCreate, 2000),
    SIM_ENTRY(cuStreamDestroy, 4000),
    SIM_ENTRY(cuStreamSynchronize, 2000),
    SIM_ENTRY(cuStreamQuery, 2000),
    SIM_ENTRY(cuStreamGetCtx, 9020),
    { "cuStreamGetCtx", 12050, (void *)sim_cuStreamGetCtx_v2 },
    SIM_ENTRY(cuStreamGetId, 12000),
    SIM_ENTRY(cuStreamGetFlags, 5050),
    SIM_ENTRY(cuStreamWaitEvent, 3020),
    SIM_ENTRY(cuCtxSynchronize, 2000),
    SIM_ENTRY(cuStreamWriteValue64, 11070),
    SIM_ENTRY(cuStreamWaitValue64, 11070),
    SIM_ENTRY(cuEventCreate, 2000),
    SIM_ENTRY(cuEventDestroy, 4000),
    SIM_ENTRY(cuEventRecord, 2000),
    SIM_ENTRY(cuEventRecordWithFlags, 11010),
    SIM_ENTRY(cuEventSynchronize, 2000),
    SIM_ENTRY(cuEventQuery, 2000),
};
const size_t sim_stream_entry_count = sizeof sim_stream_entries / sizeof sim_stream_entries[0];
