/* User objects: a destructor the driver calls once no reference is left,
 * references held by the caller and by graphs; a graph's copies
 * (clones, child-graph nodes, executable graphs) hold their own.  As
 * measured on the H100 (doc/driver-facts.md): an executable graph lets go
 * of its references once its last launch is done (here, once the hold that
 * launch waits behind is released); a discarded capture's graph at once.
 * The destructor runs after the simulator's lock is let go, on the thread
 * of the call that dropped the last reference (the driver runs it there,
 * or on a thread of its own). */
#include <stdlib.h>
#include <string.h>

#include "sim-internal.h"

#define SIM_USER_OBJECT_MAGIC 0x75736572u

struct sim_user_object {
    uint32_t magic;
    long refs;
    void *ptr;
    CUhostFn destroy;
};

/* References dropped behind a hold, dropped once it is released. */
struct late_drop {
    struct sim_user_object *obj;
    unsigned int count;
    unsigned long long hold;
};
static struct late_drop *late;
static size_t late_count, late_cap;

/* Destructors due, run by sim_unlock once the lock is let go. */
struct due {
    void *ptr;
    CUhostFn destroy;
};
static struct due *due;
static size_t due_count, due_cap;

static struct sim_user_object *object_of(CUuserObject o)
{
    struct sim_user_object *u = (struct sim_user_object *)o;

    return u && u->magic == SIM_USER_OBJECT_MAGIC && u->refs > 0 ? u : NULL;
}

static void drop(struct sim_user_object *u, unsigned int count)
{
    struct due *grown;

    if ((u->refs -= count) > 0)
        return;
    if (due_count == due_cap && (grown = realloc(due, (due_cap ? 2 * due_cap : 8) * sizeof *due))) {
        due = grown;
        due_cap = due_cap ? 2 * due_cap : 8;
    }
    if (due_count < due_cap)
        due[due_count++] = (struct due){ u->ptr, u->destroy };
    u->magic = 0;
    free(u);
}

int sim_user_objects_due(void)
{
    return due_count != 0;
}

void sim_user_objects_run_due(void)
{
    struct due *run;
    size_t n, i;

    sim_lock();   /* none is due as it unlocks: the list is taken */
    run = due;
    n = due_count;
    due = NULL;
    due_count = due_cap = 0;
    sim_unlock();
    for (i = 0; i < n; i++)
        run[i].destroy(run[i].ptr);
    free(run);
}

static int add_ref(struct sim_graph *g, struct sim_user_object *u, unsigned int count)
{
    struct sim_user_ref *grown;
    size_t i;

    for (i = 0; i < g->user_ref_count; i++)
        if (g->user_refs[i].obj == u) {
            g->user_refs[i].count += count;
            return 0;
        }
    if (!(grown = realloc(g->user_refs, (g->user_ref_count + 1) * sizeof *grown)))
        return -1;
    g->user_refs = grown;
    g->user_refs[g->user_ref_count++] = (struct sim_user_ref){ u, count };
    return 0;
}

int sim_user_refs_copy(struct sim_graph *dst, const struct sim_graph *src)
{
    size_t i;

    for (i = 0; i < src->user_ref_count; i++) {
        if (add_ref(dst, src->user_refs[i].obj, src->user_refs[i].count) != 0)
            return -1;
        src->user_refs[i].obj->refs += src->user_refs[i].count;
    }
    return 0;
}

void sim_user_refs_drop(struct sim_graph *g, unsigned long long hold)
{
    struct late_drop *grown;
    size_t i;

    for (i = 0; i < g->user_ref_count; i++) {
        if (hold && sim_hold_running(hold)) {
            if (late_count == late_cap &&
                (grown = realloc(late, (late_cap ? 2 * late_cap : 8) * sizeof *late))) {
                late = grown;
                late_cap = late_cap ? 2 * late_cap : 8;
            }
            if (late_count < late_cap) {
                late[late_count++] = (struct late_drop){ g->user_refs[i].obj, g->user_refs[i].count, hold };
                continue;
            }
        }
        drop(g->user_refs[i].obj, g->user_refs[i].count);
    }
    free(g->user_refs);
    g->user_refs = NULL;
    g->user_ref_count = 0;
}

void sim_user_objects_released(void)
{
    size_t i, kept = 0;

    for (i = 0; i < late_count; i++)
        if (sim_hold_running(late[i].hold))
            late[kept++] = late[i];
        else
            drop(late[i].obj, late[i].count);
    late_count = kept;
}

static CUresult sim_cuUserObjectCreate(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned int initial,
                                       unsigned int flags)
{
    struct sim_user_object *u;

    if (!out || !destroy || !initial || initial > 0x7fffffff || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(u = calloc(1, sizeof *u)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *u = (struct sim_user_object){ SIM_USER_OBJECT_MAGIC, (long)initial, ptr, destroy };
    *out = (CUuserObject)u;
    return CUDA_SUCCESS;
}

static CUresult sim_cuUserObjectRetain(CUuserObject o, unsigned int count)
{
    struct sim_user_object *u;
    CUresult rc = CUDA_SUCCESS;

    sim_lock();
    if (!(u = object_of(o)) || !count)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        u->refs += count;
    sim_unlock();
    return rc;
}

static CUresult sim_cuUserObjectRelease(CUuserObject o, unsigned int count)
{
    struct sim_user_object *u;
    CUresult rc = CUDA_SUCCESS;

    sim_lock();
    if (!(u = object_of(o)) || !count || count > u->refs)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        drop(u, count);
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphRetainUserObject(CUgraph g, CUuserObject o, unsigned int count, unsigned int flags)
{
    struct sim_graph *graph = (struct sim_graph *)g;
    struct sim_user_object *u;
    CUresult rc = CUDA_SUCCESS;

    sim_lock();
    if (!(u = object_of(o)) || !count || !sim_graph_valid(g) || (flags & ~CU_GRAPH_USER_OBJECT_MOVE) ||
        ((flags & CU_GRAPH_USER_OBJECT_MOVE) && count > u->refs))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (add_ref(graph, u, count) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
        u->refs += count;
    sim_unlock();
    return rc;
}

static CUresult sim_cuGraphReleaseUserObject(CUgraph g, CUuserObject o, unsigned int count)
{
    struct sim_graph *graph = (struct sim_graph *)g;
    struct sim_user_object *u;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    size_t i;

    sim_lock();
    if ((u = object_of(o)) && count && sim_graph_valid(g))
        for (i = 0; i < graph->user_ref_count; i++)
            if (graph->user_refs[i].obj == u && graph->user_refs[i].count >= count) {
                graph->user_refs[i].count -= count;
                drop(u, count);
                rc = CUDA_SUCCESS;
                break;
            }
    sim_unlock();
    return rc;
}

const struct sim_entry sim_user_object_entries[] = {
    SIM_ENTRY(cuUserObjectCreate, 11030),
    SIM_ENTRY(cuUserObjectRetain, 11030),
    SIM_ENTRY(cuUserObjectRelease, 11030),
    SIM_ENTRY(cuGraphRetainUserObject, 11030),
    SIM_ENTRY(cuGraphReleaseUserObject, 11030),
};
const size_t sim_user_object_entry_count = sizeof sim_user_object_entries / sizeof sim_user_object_entries[0];
