/* Memory: device allocations on host memory, memory pools and their
 * attributes, stream-ordered allocation, memset, memcpy and host functions. */
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_POOL_MAGIC 0x4c4f4f50u

struct sim_pool {
    uint32_t magic;
    int device;
    int is_default;
    cuuint64_t release_threshold;
    int reuse_follow_event, reuse_opportunistic, reuse_internal;
    cuuint64_t used, used_high;
    cuuint64_t kept;                 /* freed, and kept for reuse under the release threshold */
};

/* What every pool keeps beyond its allocations: device memory taken. */
static cuuint64_t pools_kept;

static void set_kept(struct sim_pool *pool, cuuint64_t kept)
{
    pools_kept = pools_kept - pool->kept + kept;
    pool->kept = kept;
}

struct allocation {
    unsigned char *base;
    size_t size;
    struct sim_pool *pool;
    struct sim_graph *owner;         /* captured into this graph: its address is the graph's for as long as it */
    int materialized;                /* exists on the device: not captured, or its allocation node ran and
                                        nothing freed it since */
    int planned, planning;           /* a launch being checked: whether it would exist at this point */
    struct allocation *next;
};

#define ALLOCATION_HEADER 256        /* the record before the memory; keeps 256-byte steps */
#define SPARE_BLOCKS 64

/* Released blocks, kept for the next allocation of the same size: a
 * device hands a released address out again, and so does the simulator
 * (whatever the host allocator does, under AddressSanitizer too). */
static struct allocation *spare[SPARE_BLOCKS];
static int spare_count;

static struct allocation *reuse_block(size_t bytes)
{
    int i;

    for (i = spare_count - 1; i >= 0; i--)
        if (spare[i]->size == bytes) {
            struct allocation *a = spare[i];
            spare[i] = spare[--spare_count];
            memset(a, 0, ALLOCATION_HEADER + bytes);
            return a;
        }
    return NULL;
}

static struct allocation *allocations;
static struct sim_pool default_pools[SIM_MAX_DEVICES];

void sim_memory_init_device_pools(void)
{
    int i;

    for (i = 0; i < SIM_MAX_DEVICES; i++) {
        default_pools[i].magic = SIM_POOL_MAGIC;
        default_pools[i].device = i;
        default_pools[i].is_default = 1;
        default_pools[i].reuse_follow_event = 1;
        default_pools[i].reuse_opportunistic = 1;
        default_pools[i].reuse_internal = 1;
    }
}

static struct sim_pool *pool_of(CUmemoryPool p)
{
    struct sim_pool *pool = (struct sim_pool *)p;
    return pool && pool->magic == SIM_POOL_MAGIC && pool->device < sim_device_count() ? pool : NULL;
}

/* ---------------------------------------------------------------- allocations */

static struct allocation *find(CUdeviceptr p, size_t bytes, int exact)
{
    struct allocation *a;
    uintptr_t addr = (uintptr_t)p;

    for (a = allocations; a; a = a->next) {
        uintptr_t base = (uintptr_t)a->base;
        if (exact ? addr == base : addr >= base && addr - base <= a->size && bytes <= a->size - (addr - base))
            return a;
    }
    return NULL;
}

void *sim_memory(CUdeviceptr p, size_t bytes)
{
    struct allocation *a;
    void *host;

    sim_lock();
    a = find(p, bytes, 0);
    host = a ? (void *)(uintptr_t)p : NULL;
    sim_unlock();
    return host;
}

int sim_memory_stream_ordered(CUdeviceptr p)
{
    struct allocation *a;
    int ordered;

    sim_lock();
    a = find(p, 1, 0);
    ordered = a && a->pool && !a->owner;
    sim_unlock();
    return ordered;
}

CUdeviceptr sim_memory_allocate(size_t bytes, CUmemoryPool pool, struct sim_graph *owner)
{
    struct allocation *a;

    if (bytes > SIM_DEVICE_MEMORY)
        return 0;
    /* the record and the memory in one block: a released address comes
     * back for the next allocation of the same size, as on a device */
    if (bytes > SIZE_MAX - ALLOCATION_HEADER ||
        (!(a = reuse_block(bytes)) && !(a = calloc(1, ALLOCATION_HEADER + bytes))))
        return 0;
    a->base = (unsigned char *)a + ALLOCATION_HEADER;
    a->size = bytes;
    a->pool = pool_of(pool);
    a->owner = owner;
    a->materialized = owner == NULL;
    if (a->pool && !owner)   /* from what the pool keeps first */
        set_kept(a->pool, a->pool->kept > bytes ? a->pool->kept - bytes : 0);
    if (a->pool) {
        a->pool->used += bytes;
        if (a->pool->used > a->pool->used_high)
            a->pool->used_high = a->pool->used;
    }
    a->next = allocations;
    allocations = a;
    sim_live_add(SIM_ALLOCATION, 1);
    return (CUdeviceptr)(uintptr_t)a->base;
}

static void unlink_allocation(struct allocation *a)
{
    struct allocation **p;

    for (p = &allocations; *p; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            break;
        }
    if (a->pool)
        a->pool->used -= a->size;
    if (a->pool && !a->owner) {   /* kept up to the release threshold */
        cuuint64_t kept = a->pool->kept + a->size, room = a->pool->release_threshold > a->pool->used ?
                                                          a->pool->release_threshold - a->pool->used : 0;
        set_kept(a->pool, kept < room ? kept : room);
    }
    if (spare_count < SPARE_BLOCKS && a->size <= 65536)
        spare[spare_count++] = a;   /* a->size stays: the key for reuse */
    else
        free(a);
    sim_live_add(SIM_ALLOCATION, -1);
}

/* A free outside a graph: an allocation that exists goes, except that a
 * graph allocation only stops existing - its address stays its graph's,
 * and the next launch makes it again (measured on the H200). */
int sim_memory_release(CUdeviceptr p)
{
    struct allocation *a = find(p, 0, 1);

    if (!a || !a->materialized)
        return -1;
    if (a->owner)
        a->materialized = 0;
    else
        unlink_allocation(a);
    return 0;
}

/* Graph memory: what graph allocations that exist take, and what the
 * device keeps reserved for them (the most they took since the last
 * trim, in granules of 32 MiB; graphs run one after another share it, as
 * measured). */
#define GRAPH_MEMORY_GRANULE ((cuuint64_t)32 << 20)
static cuuint64_t graph_reserved;

static cuuint64_t graph_used(void)
{
    struct allocation *a;
    cuuint64_t used = 0;

    for (a = allocations; a; a = a->next)
        if (a->owner && a->materialized)
            used += a->size;
    return used;
}

/* The high-water marks, noted whenever the figures change or are read. */
static cuuint64_t graph_used_high, graph_reserved_high;

static void note_graph_highs(void)
{
    if (graph_used() > graph_used_high)
        graph_used_high = graph_used();
    if (graph_reserved > graph_reserved_high)
        graph_reserved_high = graph_reserved;
}


void sim_memory_alloc_node(CUdeviceptr p)
{
    struct allocation *a = find(p, 0, 1);
    cuuint64_t used;

    if (a)
        a->materialized = 1;
    used = (graph_used() + GRAPH_MEMORY_GRANULE - 1) / GRAPH_MEMORY_GRANULE * GRAPH_MEMORY_GRANULE;
    if (used > graph_reserved)
        graph_reserved = used;
    note_graph_highs();
}

/* Allocating launches held in flight: their graph memory stays theirs
 * until their hold is released, and a graph launched meanwhile on another
 * stream takes its own, even when that stream waits for them by an event
 * (measured on the H200: 4 graphs of 8 MiB chained by events took 128
 * MiB, on one stream 32).  Launches queued on one stream share. */
#define RUNNING_LAUNCHES 256
static struct {
    unsigned long long hold;
    CUstream stream;
    cuuint64_t reserved;
} running[RUNNING_LAUNCHES];
static size_t running_count;
static cuuint64_t launch_concurrent;   /* of the launch running now */

static cuuint64_t in_granules(cuuint64_t bytes)
{
    return (bytes + GRAPH_MEMORY_GRANULE - 1) / GRAPH_MEMORY_GRANULE * GRAPH_MEMORY_GRANULE;
}

static cuuint64_t allocation_bytes(const struct sim_graph *g)
{
    cuuint64_t bytes = 0;
    size_t i;

    for (i = 0; i < g->node_count; i++)
        if (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            bytes += g->nodes[i]->u.alloc.size;
    return bytes;
}

/* What the launches held in flight keep: launches queued on one stream
 * share, so each stream's largest, summed over the streams (but s). */
static cuuint64_t running_reserved_beside(CUstream s)
{
    cuuint64_t sum = 0, most;
    size_t i, j;

    for (i = 0; i < running_count; i++) {
        if (!sim_hold_running(running[i].hold) || (s && running[i].stream == s))
            continue;
        for (j = 0; j < i && !(running[j].stream == running[i].stream && sim_hold_running(running[j].hold)); j++)
            ;
        if (j < i)
            continue;   /* its stream was counted */
        for (most = 0, j = i; j < running_count; j++)
            if (running[j].stream == running[i].stream && sim_hold_running(running[j].hold) && running[j].reserved > most)
                most = running[j].reserved;
        sum += most;
    }
    return sum;
}

static cuuint64_t running_reserved(void)
{
    return running_reserved_beside(NULL);
}

void sim_memory_graph_launch(const struct sim_graph *g, CUstream s, int phase)
{
    cuuint64_t mine = in_granules(allocation_bytes(g));
    unsigned long long hold = sim_stream_hold(s);
    size_t i, kept;

    if (!mine)
        return;
    if (phase == 0) {
        (void)hold;
        launch_concurrent = running_reserved_beside(s);
        return;
    }
    if (launch_concurrent && launch_concurrent + mine > graph_reserved)
        graph_reserved = launch_concurrent + mine;
    note_graph_highs();
    for (kept = 0, i = 0; i < running_count; i++)   /* the released ones out */
        if (sim_hold_running(running[i].hold))
            running[kept++] = running[i];
    running_count = kept;
    if ((hold = sim_stream_hold(s)) && running_count < RUNNING_LAUNCHES) {
        running[running_count].hold = hold;
        running[running_count].stream = s;
        running[running_count++].reserved = mine;
    }
}

/* Whether p is an allocation that exists now: a graph allocation exists
 * once its graph ran, until something frees it. */
static int exists(CUdeviceptr p)
{
    struct allocation *a = find(p, 0, 1);

    return a && a->materialized;
}

static int graph_allocation(CUdeviceptr p)
{
    struct allocation *a = find(p, 0, 1);

    return a && a->owner;
}

void sim_memory_free_node(CUdeviceptr p)
{
    struct allocation *a = find(p, 0, 1);

    if (a && a->owner)
        a->materialized = 0;
    else if (a)
        unlink_allocation(a);    /* its graph is gone: an ordinary allocation now */
}

static int exists_during_check(struct allocation *a)
{
    return a->planning ? a->planned : a->materialized;
}

static int plan_memory_nodes(const struct sim_graph *g)
{
    size_t i;

    for (i = 0; i < g->node_count; i++) {
        const struct sim_node *n = g->nodes[i];
        struct allocation *a;
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->u.child.graph && !plan_memory_nodes(n->u.child.graph))
            return 0;
        if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->type != CU_GRAPH_NODE_TYPE_MEM_FREE)
            continue;
        a = find(n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? n->u.alloc.ptr : n->u.free.ptr, 0, 1);
        if (!a || exists_during_check(a) != (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE))
            return 0;
        a->planning = 1;
        a->planned = n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    }
    return 1;
}

int sim_memory_launch_possible(const struct sim_graph *g)
{
    struct allocation *a;
    int possible = plan_memory_nodes(g);

    for (a = allocations; a; a = a->next)
        a->planning = 0;
    return possible;
}

/* The graph is gone: what its allocation nodes made and nothing freed
 * lives on as an ordinary allocation, freed with cuMemFree (the CUDA
 * programming guide: destroying a graph frees no live allocation); the
 * rest goes. */
void sim_memory_release_owned_by(struct sim_graph *g)
{
    struct allocation *a = allocations, *next;

    for (; a; a = next) {
        next = a->next;
        if (a->owner != g)
            continue;
        if (a->materialized)
            a->owner = NULL;
        else
            unlink_allocation(a);
    }
}

/* ---------------------------------------------------------------- pools */

static CUresult device_pool(CUmemoryPool *out, CUdevice dev)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *out = (CUmemoryPool)&default_pools[dev];
    return CUDA_SUCCESS;
}

static CUresult sim_cuDeviceGetDefaultMemPool(CUmemoryPool *out, CUdevice dev)
{
    return device_pool(out, dev);
}

static CUresult sim_cuDeviceGetMemPool(CUmemoryPool *out, CUdevice dev)
{
    return device_pool(out, dev);
}

static CUresult sim_cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
    struct sim_pool *pool;
    CUresult rc;

    if (!out || !props)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.id < 0 || props->location.id >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    if (props->maxSize > SIM_DEVICE_MEMORY)   /* the H200 refuses SIZE_MAX: OUT_OF_MEMORY */
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool = calloc(1, sizeof *pool);
    if (!pool)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool->magic = SIM_POOL_MAGIC;
    pool->device = props->location.id;
    pool->reuse_follow_event = pool->reuse_opportunistic = pool->reuse_internal = 1;
    sim_live_add(SIM_POOL, 1);
    sim_track(pool);
    *out = (CUmemoryPool)pool;
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemPoolDestroy(CUmemoryPool p)
{
    struct sim_pool *pool;
    struct allocation *a;
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    pool = pool_of(p);
    if (!pool || pool->is_default) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (a = allocations; a; a = a->next)
        if (a->pool == pool)
            a->pool = NULL;          /* outstanding allocations outlive the pool */
    set_kept(pool, 0);
    pool->magic = 0;
    sim_untrack(pool);
    free(pool);
    sim_live_add(SIM_POOL, -1);
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult pool_attribute(CUmemoryPool p, CUmemPool_attribute attr, void *value, int set)
{
    struct sim_pool *pool;
    cuuint64_t *u64 = value;
    int *i32 = value;
    int *flag = NULL;
    CUresult rc;

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    pool = pool_of(p);
    rc = pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (!pool)
        goto done;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            pool->release_threshold = *u64;
        else
            *u64 = pool->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: flag = &pool->reuse_follow_event; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: flag = &pool->reuse_opportunistic; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: flag = &pool->reuse_internal; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        if (set)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *u64 = pool->used + (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? pool->kept : 0);
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (set && *u64 != 0)
            rc = CUDA_ERROR_INVALID_VALUE;   /* only a reset to 0 */
        else if (set)
            pool->used_high = pool->used;
        else
            *u64 = pool->used_high;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    if (flag) {
        if (set)
            *flag = *i32 != 0;
        else
            *i32 = *flag;
    }
done:
    sim_unlock();
    return rc;
}

static CUresult sim_cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(p, attr, value, 0);
}

static CUresult sim_cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(p, attr, value, 1);
}

/* What the pool keeps beyond its allocations given back, down to keep bytes in all. */
static CUresult sim_cuMemPoolTrimTo(CUmemoryPool p, size_t keep)
{
    struct sim_pool *pool;

    sim_lock();
    if ((pool = pool_of(p)) && pool->used + pool->kept > keep)
        set_kept(pool, keep > pool->used ? keep - pool->used : 0);
    sim_unlock();
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- stream-ordered allocation */

static int is_legacy_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

static CUresult sim_cuMemAllocFromPoolAsync(CUdeviceptr *out, size_t bytes, CUmemoryPool p, CUstream s)
{
    int captured;
    CUresult rc;

    if (!out || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_current_ctx() && is_legacy_stream(s))   /* measured on the H200: an explicit stream has a context */
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_lock();
    if (!pool_of(p)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((rc = sim_stream_enqueue(s, &captured)) == CUDA_SUCCESS &&
               (captured || (rc = sim_capture_check_unsafe()) == CUDA_SUCCESS)) {
        struct sim_graph *owner = captured ? sim_stream_capture_graph(s) : NULL;
        /* under capture the address is fixed now and belongs to the graph */
        CUdeviceptr ptr = sim_memory_allocate(bytes, p, owner);
        struct sim_node *node = NULL;
        if (!ptr || (captured && !(node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_MEM_ALLOC)))) {
            if (ptr)
                unlink_allocation(find(ptr, 0, 1));
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            if (node) {
                node->u.alloc.ptr = ptr;
                node->u.alloc.size = bytes;
            }
            *out = ptr;
            if (!captured)
                sim_stream_queue_allocation(s);
        }
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuMemFreeAsync(CUdeviceptr ptr, CUstream s)
{
    int captured;
    CUresult rc;

    sim_lock();
    if (!find(ptr, 0, 1)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((rc = sim_stream_enqueue(s, &captured)) == CUDA_SUCCESS && !captured && !exists(ptr)) {
        rc = CUDA_ERROR_INVALID_VALUE;   /* the H200: a graph allocation before its graph ran, or freed since */
    } else if (rc == CUDA_SUCCESS &&
               (captured || (rc = sim_capture_check_unsafe()) == CUDA_SUCCESS)) {
        if (captured && !graph_allocation(ptr)) {
            /* measured by the differential run: a free node frees graph allocations only */
            rc = CUDA_ERROR_INVALID_VALUE;
        } else if (captured) {
            struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_MEM_FREE);
            if (node)
                node->u.free.ptr = ptr;
            else
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            sim_memory_release(ptr);
            sim_stream_queue_allocation(s);
        }
    }
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------- graph memory */

static CUresult sim_cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
    cuuint64_t *out = value;
    CUresult rc = CUDA_SUCCESS;

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    sim_lock();
    note_graph_highs();
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *out = graph_used(); break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *out = graph_reserved; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *out = graph_used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *out = graph_reserved_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    sim_unlock();
    return rc;
}

static CUresult sim_cuDeviceGraphMemTrim(CUdevice dev)
{
    if (!sim_is_initialised())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= sim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    sim_lock();
    note_graph_highs();
    graph_reserved = in_granules(graph_used()) + running_reserved();   /* held launches keep theirs */
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    struct allocation *a;
    size_t used = 0;

    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_lock();
    for (a = allocations; a; a = a->next)
        if (!a->owner)
            used += a->size;
    used += (size_t)pools_kept;
    sim_unlock();
    used += (size_t)graph_reserved;
    *total = SIM_DEVICE_MEMORY;
    *free_bytes = used < SIM_DEVICE_MEMORY ? SIM_DEVICE_MEMORY - used : 0;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- synchronous memory calls */

static CUresult sim_cuMemAlloc(CUdeviceptr *out, size_t bytes)
{
    CUresult rc;

    if (!out || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    *out = sim_memory_allocate(bytes, NULL, NULL);
    sim_unlock();
    return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult sim_cuMemFree(CUdeviceptr ptr)
{
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    sim_lock();
    rc = sim_memory_release(ptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    if (rc == CUDA_SUCCESS)
        sim_wait_for_held("cuMemFree", 1);   /* measured: it waits for all the device's work */
    return rc;
}

static CUresult sim_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
    const void *from;
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    if (!(from = sim_memory(src, bytes)) || (!dst && bytes))
        return CUDA_ERROR_INVALID_VALUE;
    sim_wait_for_held("cuMemcpyDtoH", 0);   /* on the legacy stream */
    memmove(dst, from, bytes);
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
    void *to;
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    if (!(to = sim_memory(dst, bytes)) || (!src && bytes))
        return CUDA_ERROR_INVALID_VALUE;
    sim_wait_for_held("cuMemcpyHtoD", 0);
    memmove(to, src, bytes);
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n)
{
    void *to;
    CUresult rc;

    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    if (!(to = sim_memory(dst, n)))
        return CUDA_ERROR_INVALID_VALUE;
    sim_wait_for_held("cuMemsetD8", 0);
    memset(to, value, n);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- stream-ordered work */

static CUresult sim_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    int captured;
    CUresult rc;

    sim_lock();
    if (!sim_memory(dst, n)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((rc = sim_stream_enqueue(s, &captured)) == CUDA_SUCCESS) {
        if (captured) {
            struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_MEMSET);
            if (!node) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                node->u.memset.dst = dst;
                node->u.memset.value = value;
                node->u.memset.element_size = 1;
                node->u.memset.width = n;
                node->u.memset.height = 1;
                node->u.memset.pitch = n;
            }
        } else {
            memset(sim_memory(dst, n), value, n);
        }
    }
    sim_unlock();
    return rc;
}

/* A copy on stream s between host addresses (device memory is host memory
 * here): a memcpy node when the stream is captured, done now otherwise. */
static CUresult enqueue_copy(void *dst, const void *src, size_t bytes, CUstream s)
{
    int captured;
    CUresult rc;

    if ((!dst || !src) && bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_stream_enqueue(s, &captured)) != CUDA_SUCCESS)
        return rc;
    if (captured) {
        struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_MEMCPY);
        if (!node)
            return CUDA_ERROR_OUT_OF_MEMORY;
        node->u.memcpy.dst = dst;
        node->u.memcpy.src = src;
        node->u.memcpy.bytes = bytes;
    } else if (bytes) {
        memmove(dst, src, bytes);
    }
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    CUresult rc;

    sim_lock();
    rc = enqueue_copy(dst, sim_memory(src, bytes), bytes, s);
    sim_unlock();
    return rc;
}

/* Pinned host memory (cuMemAllocHost): host memory the driver copies from
 * without staging it. */
struct pinned {
    struct pinned *next;
    char *p;
    size_t bytes;
};
static struct pinned *pinned;

static int is_pinned(const void *p, size_t bytes)
{
    struct pinned *at;

    for (at = pinned; at; at = at->next)
        if ((const char *)p >= at->p && (const char *)p + bytes <= at->p + at->bytes)
            return 1;
    return 0;
}

static CUresult sim_cuMemAllocHost(void **out, size_t bytes)
{
    struct pinned *at;
    CUresult rc;

    if (!out || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    if (!(at = calloc(1, sizeof *at)) || !(at->p = malloc(bytes))) {
        free(at);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    at->bytes = bytes;
    sim_lock();
    at->next = pinned;
    pinned = at;
    sim_unlock();
    sim_live_add(SIM_PINNED, 1);
    *out = at->p;
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemFreeHost(void *p)
{
    struct pinned **at, *gone = NULL;

    sim_lock();
    for (at = &pinned; *at; at = &(*at)->next)
        if ((*at)->p == p) {
            gone = *at;
            *at = gone->next;
            break;
        }
    sim_unlock();
    if (!gone)
        return CUDA_ERROR_INVALID_VALUE;
    sim_live_add(SIM_PINNED, -1);
    free(gone->p);
    free(gone);
    return CUDA_SUCCESS;
}

static CUresult sim_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
{
    int pageable;
    CUresult rc;

    sim_lock();
    pageable = !is_pinned(src, bytes) && !sim_stream_in_capture(s);
    if ((rc = enqueue_copy(sim_memory(dst, bytes), src, bytes, s)) == CUDA_SUCCESS && pageable)
        sim_stream_queue_pageable(s, bytes);
    sim_unlock();
    return rc;
}

static CUresult sim_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    CUresult rc;

    sim_lock();
    rc = enqueue_copy(sim_memory(dst, bytes), sim_memory(src, bytes), bytes, s);
    sim_unlock();
    return rc;
}

/* Unified addressing: either side may be device or host memory.  A range
 * that starts inside an allocation must lie inside it. */
static CUresult sim_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    void *to = (void *)(uintptr_t)dst;
    const void *from = (const void *)(uintptr_t)src;
    CUresult rc;

    sim_lock();
    if ((sim_memory(dst, 1) && !sim_memory(dst, bytes)) || (sim_memory(src, 1) && !sim_memory(src, bytes)))
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = enqueue_copy(to, from, bytes, s);
    sim_unlock();
    return rc;
}

static CUresult sim_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    int captured;
    CUresult rc;

    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if ((rc = sim_stream_enqueue(s, &captured)) == CUDA_SUCCESS) {
        if (captured) {
            struct sim_node *node = sim_stream_capture_node(s, CU_GRAPH_NODE_TYPE_HOST);
            if (!node) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                node->u.host.fn = fn;
                node->u.host.data = data;
            }
        } else {
            sim_launch_stream(s);
            fn(data);
            sim_launch_stream(NULL);
        }
    }
    sim_unlock();
    return rc;
}

const struct sim_entry sim_memory_entries[] = {
    SIM_ENTRY(cuDeviceGetDefaultMemPool, 11020),
    SIM_ENTRY(cuDeviceGetMemPool, 11020),
    SIM_ENTRY(cuMemPoolCreate, 11020),
    SIM_ENTRY(cuMemPoolDestroy, 11020),
    SIM_ENTRY(cuMemPoolGetAttribute, 11020),
    SIM_ENTRY(cuMemPoolSetAttribute, 11020),
    SIM_ENTRY(cuMemPoolTrimTo, 11020),
    SIM_ENTRY(cuMemAllocFromPoolAsync, 11020),
    SIM_ENTRY(cuMemFreeAsync, 11020),
    SIM_ENTRY(cuDeviceGetGraphMemAttribute, 11040),
    SIM_ENTRY(cuDeviceGraphMemTrim, 11040),
    SIM_ENTRY(cuMemGetInfo, 3020),
    SIM_ENTRY(cuMemAlloc, 3020),
    SIM_ENTRY(cuMemFree, 3020),
    SIM_ENTRY(cuMemcpyDtoH, 3020),
    SIM_ENTRY(cuMemcpyHtoD, 3020),
    SIM_ENTRY(cuMemsetD8, 3020),
    SIM_ENTRY(cuMemsetD8Async, 3020),
    SIM_ENTRY(cuMemcpyDtoHAsync, 3020),
    SIM_ENTRY(cuMemcpyHtoDAsync, 3020),
    SIM_ENTRY(cuMemAllocHost, 3020),
    SIM_ENTRY(cuMemFreeHost, 2000),
    SIM_ENTRY(cuMemcpyDtoDAsync, 3020),
    SIM_ENTRY(cuMemcpyAsync, 4000),
    SIM_ENTRY(cuLaunchHostFunc, 10000),
};
const size_t sim_memory_entry_count = sizeof sim_memory_entries / sizeof sim_memory_entries[0];
