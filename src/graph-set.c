/* Graph sets: keys to executable graphs, captured on first use, held
 * under a budget of device memory, the least recently used retired first,
 * and the step run eagerly (eager-run.c) when it cannot be captured.
 * Stands above the builders and executable graphs, and calls them as a
 * program would. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "builder-internal.h"
#include "context-hold.h"
#include "driver.h"
#include "eager-run.h"
#include "error.h"
#include "graph-memory.h"
#include "graph-set-keys.h"
#include "graph.h"
#include "hand-back.h"
#include "params.h"
#include "stream-cache.h"

#define RETRY_CAP 64                 /* the longest wait, in runs of the key, before a capture is tried again */
/* The driver reserves graph memory in granules, and reports no
 * executable graph's own footprint: it is estimated per node from the
 * device's free memory as measured (doc/driver-facts.md; free memory is
 * the whole device's, other processes' too, so it is not read at each
 * instantiation). */
#define GRAPH_MEMORY_GRANULE ((size_t)32 << 20)
#define FOOTPRINT_PER_NODE ((size_t)2 << 10)
/* The most launches in flight on the set's stream: the driver makes a
 * launch on a stream with a long queue wait on the host (an H100 waited
 * after about 30 held launches: doc/driver-facts.md), so a run that finds
 * the queue this long runs eagerly instead. */
#define SET_STREAM_QUEUE 16
/* What a launch that found the set's stream full returns (no launch of
 * the driver's returns it). */
#define CUCAP_I_SET_STREAM_FULL CUDA_ERROR_NOT_READY
#define SET_STREAM_TEXT(n) #n
#define SET_STREAM_FULL_REASON_OF(n) \
    "the set's stream held " SET_STREAM_TEXT(n) " launches in flight (a launch behind a longer queue waits on the host)"
#define SET_STREAM_FULL_REASON SET_STREAM_FULL_REASON_OF(SET_STREAM_QUEUE)


struct kept_exec {
    cucap_exec *exec;
    size_t footprint;
    struct kept_exec *next;
};

struct cucap_graph_set {
    pthread_mutex_t lock;            /* all below, and every launch of the set's executable graphs */
    pthread_cond_t settled;          /* a graph being made was counted, or given up */
    struct ctx_hold *hold;
    CUdevice dev;
    cucap_graph_set_options opts;
    struct key_table keys;           /* newest and oldest: the keys with a graph, by their last run */
    struct kept_exec *kept;          /* not while a thread tries them for an update */
    int offering;                    /* a capture has a kept graph's block (kept_block): one at a time */
    CUstream stream;                 /* where graphs that allocate are launched (made on first need) */
    CUevent handoff;                 /* from a run's stream to the set's */
    CUevent queued[SET_STREAM_QUEUE];   /* behind each launch on the set's stream still in flight, the oldest at
                                           queued_first (a run's stream waits for its own to hand back) */
    unsigned int queued_first, queued_count;
    size_t making, making_bytes;     /* graphs being instantiated or updated, and the room set aside for them */
    cucap_builder **builders;        /* every builder the set made, destroyed with it */
    cucap_builder **idle;            /* those between captures, reset (as many places as builders) */
    size_t builder_count, idle_count, builder_places;   /* places: builders, and those being made */
    cucap_graph_set_stats stats;
};

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---------------------------------------------------------------- device memory (under the lock) */

/* The graph memory reserved on the device now, or fallback when the
 * driver does not say. */
static void measure_graph_memory(cucap_graph_set *set)
{
    set->stats.graph_memory = cucap_i_graph_memory_reserved(set->dev, set->stats.graph_memory);
}

static size_t taken(const cucap_graph_set *set)
{
    return set->stats.graph_memory + set->stats.footprint;
}

/* An executable graph of a key's, its event with it. */
static void destroy_key_exec(struct key_exec *x)
{
    cucap_exec_destroy(x->exec);
    if (x->done)
        (void)cucap_i_drv.cuEventDestroy(x->done);
    *x = (struct key_exec){ NULL, NULL, NULL };
}

/* The oldest key's graphs out: its first kept aside for an update when an
 * update could use it (no memory nodes: the driver updates no such
 * graph) and kept_for_update leaves room, the rest destroyed (launches in
 * flight finish first; the driver frees them then). */
static void retire_oldest(cucap_graph_set *set)
{
    struct entry *e = set->keys.oldest;
    struct kept_exec *k;

    cucap_i_keys_unlink(&set->keys, e);
    set->stats.graphs -= e->exec_count;
    set->stats.copies -= e->exec_count - 1;
    set->stats.retirements++;
    while (e->exec_count > 1) {
        set->stats.footprint -= e->footprint;
        destroy_key_exec(&e->execs[--e->exec_count]);
    }
    if (!e->memory_nodes && set->stats.kept < set->opts.kept_for_update && (k = malloc(sizeof *k))) {
        k->exec = e->execs[0].exec;
        k->footprint = e->footprint;
        k->next = set->kept;
        set->kept = k;
        set->stats.kept++;
        e->execs[0].exec = NULL;
    } else {
        set->stats.footprint -= e->footprint;
    }
    destroy_key_exec(&e->execs[0]);
    e->exec_count = 0;
    e->several_streams = 0;
    e->no_copies = 0;
}

/* The kept executable graph that stays longest out when room is needed
 * for a graph of a key. */
static int drop_kept(cucap_graph_set *set)
{
    struct kept_exec **at = &set->kept, *k;

    if (!*at)
        return 0;
    while ((*at)->next)
        at = &(*at)->next;
    k = *at;
    *at = NULL;
    set->stats.kept--;
    set->stats.footprint -= k->footprint;
    cucap_exec_destroy(k->exec);
    free(k);
    return 1;
}

/* What a graph of nodes whose allocations ask for bytes may add: its
 * graph memory in whole granules, and its footprint. */
static size_t footprint_of(size_t nodes)
{
    return nodes * FOOTPRINT_PER_NODE;
}

static size_t may_take(size_t bytes, size_t nodes)
{
    return (bytes + GRAPH_MEMORY_GRANULE - 1) / GRAPH_MEMORY_GRANULE * GRAPH_MEMORY_GRANULE + footprint_of(nodes);
}

/* budget_graphs counts the graphs held for keys; the kept ones come on
 * top (kept_for_update bounds them), their footprint within budget_bytes. */
static int fits(const cucap_graph_set *set, size_t bytes, size_t nodes)
{
    return !(set->opts.budget_graphs && set->stats.graphs + set->making >= set->opts.budget_graphs) &&
           taken(set) + set->making_bytes + may_take(bytes, nodes) <= set->opts.budget_bytes;
}

static void trim(cucap_graph_set *set)
{
    if (cucap_i_graph_memory_trim(set->dev) == CUDA_SUCCESS)
        set->stats.trims++;
    measure_graph_memory(set);
}

/* Room for a graph whose allocations ask for bytes, beside the room set
 * aside for the graphs other threads are making: kept executable graphs
 * dropped, then graphs retired, least recently used first, until the
 * budget would hold it were their allocations given back, and graph
 * memory trimmed when a retired graph held some (a trim costs every live
 * graph a remap at its next launch: at most one per round of
 * retirements); when only graphs being made stand in the way, their
 * settling is waited for (host work of other threads, never the GPU).
 * 0, or -1 with the reason in why. */
static int make_room(cucap_graph_set *set, size_t bytes, size_t nodes, char *why, size_t why_size)
{
    size_t measured, freed;

    if (may_take(bytes, nodes) > set->opts.budget_bytes) {
        snprintf(why, why_size, "its allocations (%zu bytes, %zu with the driver's granule and its footprint) "
                 "alone pass the budget (%zu bytes)", bytes, may_take(bytes, nodes), set->opts.budget_bytes);
        return -1;
    }
    /* a graph without allocations adds no graph memory: the last figure
     * serves unless it stands in the way */
    if (bytes || taken(set) + set->making_bytes + may_take(0, nodes) > set->opts.budget_bytes)
        measure_graph_memory(set);
    while (!fits(set, bytes, nodes) && (set->kept || set->keys.oldest || set->making)) {
        if (!set->kept && !set->keys.oldest) {
            pthread_cond_wait(&set->settled, &set->lock);
            measure_graph_memory(set);
            continue;
        }
        measured = set->stats.graph_memory;
        for (freed = 0; !fits(set, bytes, nodes) && (set->kept || set->keys.oldest);) {
            if (set->kept) {
                drop_kept(set);   /* kept graphs have no memory nodes */
            } else {
                freed += may_take(set->keys.oldest->allocation_bytes, 0);
                retire_oldest(set);
            }
            set->stats.graph_memory = measured > freed ? measured - freed : 0;   /* until the trim measures it */
        }
        if (freed || (!set->kept && !set->keys.oldest && measured))
            trim(set);
        else
            set->stats.graph_memory = measured;
    }
    if (fits(set, bytes, nodes))
        return 0;
    snprintf(why, why_size, "over the budget: %zu bytes taken (graph memory %zu, footprint %zu), %zu set aside for "
             "graphs being made and up to %zu more, against %zu", taken(set), set->stats.graph_memory,
             set->stats.footprint, set->making_bytes, may_take(bytes, nodes), set->opts.budget_bytes);
    return -1;
}

/* ---------------------------------------------------------------- making a key's graph */

/* What a captured graph will take: its top-level nodes, what its
 * allocation nodes ask for, and how many memory nodes it has. */
static CUresult weigh(CUgraph g, size_t *nodes, size_t *bytes, size_t *memory_nodes)
{
    CUgraphNode local[64], *all = local;
    CUgraphNodeType type;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    size_t n = 0, i;
    CUresult rc;

    *bytes = *memory_nodes = 0;
    if ((rc = cucap_i_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS || n == 0) {
        *nodes = 0;
        return rc;   /* an array for no node is refused (measured) */
    }
    if (n > 64 && !(all = malloc(n * sizeof *all)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = cucap_i_drv.cuGraphGetNodes(g, all, &n);
    for (i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        if ((rc = cucap_i_drv.cuGraphNodeGetType(all[i], &type)) != CUDA_SUCCESS)
            break;
        if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            ++*memory_nodes;
        if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && (rc = cucap_i_drv.cuGraphMemAllocNodeGetParams(all[i], &p)) ==
                                                        CUDA_SUCCESS)
            *bytes += p.bytesize;
    }
    *nodes = n;
    if (all != local)
        free(all);
    return rc;
}

/* An error the set keeps as a reason instead of returning: one that left
 * the thread in another capture mode or context (a restore failed) is
 * also given to the warning handler, since it outlasts the call. */
static void hear_lasting_failure(const cucap_error *e)
{
    size_t i;
    int lasting = e && strstr(cucap_error_message(e), "restoring the thread's") != NULL;

    for (i = 0; e && !lasting && cucap_error_note(e, i); i++)
        lasting = strstr(cucap_error_note(e, i), "restoring the thread's") != NULL;
    if (lasting)
        cucap_warn(e);
}

static void reason_from(char *why, size_t size, const char *what, CUresult rc, const cucap_error *e)
{
    size_t i, used;

    if (!e) {
        snprintf(why, size, "%s: it returned %s", what, cucap_result_name(rc));
        return;
    }
    hear_lasting_failure(e);
    snprintf(why, size, "%s: %s", what, cucap_error_message(e));
    for (i = 0; cucap_error_note(e, i) && (used = strlen(why)) + 8 < size; i++)
        snprintf(why + used, size - used, " (%s)", cucap_error_note(e, i));
}

/* ---------------------------------------------------------------- the set's builders */

/* A builder for a capture: an idle one of the set's, or a new one, made
 * outside the lock with its place among the idle ones made first (so
 * that giving it back cannot fail). */
static CUresult take_builder(cucap_graph_set *set, cucap_builder **b, cucap_error **err)
{
    size_t n;
    cucap_builder **grown;
    CUresult rc;

    pthread_mutex_lock(&set->lock);
    if (set->idle_count) {
        *b = set->idle[--set->idle_count];
        pthread_mutex_unlock(&set->lock);
        return CUDA_SUCCESS;
    }
    n = ++set->builder_places;
    if ((grown = realloc(set->builders, n * sizeof *grown)))
        set->builders = grown;
    if (grown && (grown = realloc(set->idle, n * sizeof *grown)))
        set->idle = grown;
    if (!grown)
        set->builder_places--;
    pthread_mutex_unlock(&set->lock);
    if (!grown)
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "cucap_graph_set_run: out of memory");
    rc = cucap_builder_create(set->dev, b, err);
    pthread_mutex_lock(&set->lock);
    if (rc == CUDA_SUCCESS)
        set->builders[set->builder_count++] = *b;
    else
        set->builder_places--;
    pthread_mutex_unlock(&set->lock);
    return rc;
}

/* b back among the idle builders: its capture abandoned if still running,
 * NOT_STARTED, holding no block (the next capture is another key's,
 * whose launches must not wait for this one's).  One whose capture the
 * driver would not end stays out, until the set's destroy. */
static void give_builder(cucap_graph_set *set, cucap_builder *b)
{
    if (!b)
        return;
    cucap_builder_abandon(b);
    cucap_i_builder_offer_params(b, NULL);
    if (cucap_builder_reset(b, NULL) != CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&set->lock);
    set->idle[set->idle_count++] = b;
    pthread_mutex_unlock(&set->lock);
}

/* Capture fn on a builder of the set: the builder, ENDED, or NULL with
 * the reason in why.  A block of offer's size that fn asks for is offer
 * (NULL: a new one). */
static cucap_builder *capture(cucap_graph_set *set, cucap_capture_fn fn, void *user_data, struct cucap_params *offer,
                              double *us, char *why, size_t why_size)
{
    cucap_builder *b = NULL;
    cucap_error *e = NULL;
    double t0 = now_us();
    CUresult rc;

    if ((rc = take_builder(set, &b, &e)) == CUDA_SUCCESS && offer)
        cucap_i_builder_offer_params(b, offer);
    if (rc != CUDA_SUCCESS || (rc = cucap_builder_begin(b, set->opts.capture_mode, &e)) != CUDA_SUCCESS) {
        reason_from(why, why_size, "the capture could not begin", rc, e);
    } else if ((rc = fn(b, user_data, &e)) != CUDA_SUCCESS) {
        reason_from(why, why_size, "the capture function failed while capturing", rc, e);
        cucap_builder_abandon(b);   /* no capture left open, no thread left in capture mode */
    } else if ((rc = cucap_builder_end(b, &e)) != CUDA_SUCCESS) {
        reason_from(why, why_size, "the capture could not be ended", rc, e);
    } else {
        *us = now_us() - t0;
        cucap_error_free(e);
        return b;
    }
    cucap_error_free(e);
    give_builder(set, b);
    return NULL;
}

/* A kept executable graph of the list (taken from the set) updated from
 * b: it, unlinked from the list, or NULL (each refusal keeps it for
 * another topology). */
static struct kept_exec *update_kept(struct kept_exec **list, cucap_builder *b, char *refusal, size_t size)
{
    struct kept_exec **at, *k;
    cucap_error *e = NULL;

    for (at = list; *at; at = &(*at)->next) {
        if (cucap_exec_update((*at)->exec, b, &e) == CUDA_SUCCESS) {
            k = *at;
            *at = k->next;
            return k;
        }
        snprintf(refusal, size, "%s", cucap_error_message(e));
        hear_lasting_failure(e);
        cucap_error_free(e);
        e = NULL;
    }
    return NULL;
}

/* Instantiate b's graph, and upload it on s (its graph memory is
 * reserved then, when it has allocations). */
static cucap_exec *instantiate(cucap_builder *b, CUstream s, char *why, size_t why_size)
{
    cucap_exec *exec = NULL;
    cucap_error *e = NULL;

    if (cucap_builder_complete(b, NULL, &exec, &e) != CUDA_SUCCESS ||
        (s && cucap_exec_upload(exec, s, &e) != CUDA_SUCCESS)) {
        reason_from(why, why_size, "the graph could not be instantiated", CUDA_ERROR_UNKNOWN, e);
        cucap_exec_destroy(exec);
        exec = NULL;
    }
    cucap_error_free(e);
    return exec;
}

/* The first launch of a graph just made, under the lock that counted it,
 * so that no other thread retires it first. */
struct first_launch {
    const void *values;
    size_t values_size;
    CUstream s;
    const char *caller;
    cucap_error **err;
    CUresult rc;
};

static CUresult launch(cucap_graph_set *set, struct entry *e, struct key_exec *x, const void *values,
                       size_t values_size, CUstream s, const char *caller, cucap_error **err);

/* What a thread making a graph holds between the set's lock and its
 * settling: the room set aside, and the kept executable graphs it took
 * to try for an update (the one it updated in used). */
struct making {
    const char *refusal;             /* why the kept graphs it tried refused, "" when one was updated; NULL: none tried */
    size_t room, memory_nodes;
    int counted;                     /* among the set's graphs being made */
    struct kept_exec *kept, *used;
};

/* e's graph made, or the reason it was not, recorded (under the lock),
 * what m held given back, and the threads waiting for room told; a graph
 * made is launched first when `first` says so. */
static int settle(cucap_graph_set *set, struct entry *e, cucap_exec *exec, size_t nodes, size_t bytes,
                  double capture_us, cucap_run_kind how, const char *why, struct making *m, struct first_launch *first)
{
    size_t footprint = m->used ? m->used->footprint : footprint_of(nodes);
    struct kept_exec **end;
    int made = exec ? 0 : -1;

    pthread_mutex_lock(&set->lock);
    if (m->counted) {
        set->making--;
        set->making_bytes -= m->room;
    }
    for (end = &set->kept; *end; end = &(*end)->next)
        ;
    *end = m->kept;   /* the kept graphs it did not update, back */
    if (m->used) {
        set->stats.kept--;
        set->stats.footprint -= m->used->footprint;   /* counted again with its key's graph */
        free(m->used);
    }
    e->capturing = 0;
    e->nodes = nodes;
    e->allocation_bytes = bytes;
    e->memory_nodes = m->memory_nodes;
    if (m->refusal)
        snprintf(e->refusal, sizeof e->refusal, "%s", m->refusal);
    if (!exec) {
        e->failures++;
        e->retry_at = e->runs + (e->failures > 6 ? RETRY_CAP : 1u << (e->failures - 1));
        snprintf(e->reason, sizeof e->reason, "%s", why);
        set->stats.capture_failures++;
    } else {
        e->execs[0] = (struct key_exec){ exec, NULL, NULL };
        e->exec_count = 1;
        e->footprint = footprint;
        e->capture_us = capture_us;
        e->failures = 0;
        e->reason[0] = '\0';
        cucap_i_keys_link_newest(&set->keys, e);
        set->stats.graphs++;
        set->stats.footprint += footprint;
        if (bytes)
            measure_graph_memory(set);
        if (how == CUCAP_RUN_UPDATED)
            set->stats.updates++;
        else
            set->stats.instantiations++;
        if (first)
            first->rc = launch(set, e, &e->execs[0], first->values, first->values_size, first->s, first->caller,
                               first->err);
    }
    pthread_cond_broadcast(&set->settled);
    pthread_mutex_unlock(&set->lock);
    return made;
}

/* The block of the executable graph that the next update will try first
 * (the first kept one, or the oldest key's when the count of graphs will
 * retire it into the kept ones), when what the run launches on s (NULL:
 * a warm-up, which launches nothing) follows every launch that reads it
 * (the last one was on s, or all are done) and no other capture has it:
 * a reference, or NULL (given back with kept_block_done).  A capture that
 * takes it gives the update the block the executable graph reads already,
 * and needs no new one; a graph instantiated from it instead shares it,
 * its launches ordered after that graph's, which s's work (or the set's
 * stream, which waits for s) follows already.  Two captures at once
 * never share one. */
static struct cucap_params *kept_block(cucap_graph_set *set, CUstream s, int launching)
{
    struct cucap_params *p = NULL;
    struct entry *oldest;
    cucap_exec *next = NULL;

    pthread_mutex_lock(&set->lock);
    if (set->offering)
        ;
    else if (set->kept)
        next = set->kept->exec;
    else if (set->opts.kept_for_update && set->opts.budget_graphs &&
             set->stats.graphs + set->making >= set->opts.budget_graphs && (oldest = set->keys.oldest) &&
             !oldest->memory_nodes && oldest->exec_count)
        next = oldest->execs[0].exec;
    if ((p = cucap_i_exec_params(next)) && (launching ? cucap_i_params_free_for(p, s) : cucap_i_params_idle(p))) {
        cucap_i_params_ref(p);
        set->offering = 1;
    } else {
        p = NULL;
    }
    pthread_mutex_unlock(&set->lock);
    return p;
}

static void kept_block_done(cucap_graph_set *set, struct cucap_params *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&set->lock);
    set->offering = 0;
    pthread_mutex_unlock(&set->lock);
    cucap_i_params_unref(p, "cucap_graph_set_run");
}

/* Make e's graph (e->capturing is set; the lock is not held): captured
 * and instantiated (or a kept one updated) side by side with other
 * threads' graphs, the room it may take set aside under the lock first,
 * so that the graphs being made never pass the budget together.  How it
 * was made in *how; 0, or -1 with the reason on e. */
static int make_graph(cucap_graph_set *set, struct entry *e, cucap_capture_fn fn, void *user_data, CUstream s,
                      struct first_launch *first, cucap_run_kind *how)
{
    char why[256] = "", refusal[256] = "";
    double capture_us = 0, t0;
    size_t nodes = 0, bytes = 0, memory_nodes = 0;
    struct cucap_params *offer = kept_block(set, s, first != NULL);
    cucap_builder *b = capture(set, fn, user_data, offer, &capture_us, why, sizeof why);
    cucap_graph *g = NULL;
    cucap_exec *exec = NULL;
    struct cucap_work_scope w;
    struct making m = { NULL, 0, 0, 0, NULL, NULL };
    int made;

    if (b && (cucap_builder_graph(b, &g, NULL) != CUDA_SUCCESS ||
              weigh(cucap_graph_handle(g), &nodes, &bytes, &memory_nodes) != CUDA_SUCCESS))
        snprintf(why, sizeof why, "the captured graph could not be read");
    cucap_graph_unref(g);
    kept_block_done(set, offer);
    m.memory_nodes = memory_nodes;
    if (!b || why[0]) {
        give_builder(set, b);
        return settle(set, e, NULL, nodes, bytes, 0, *how, why, &m, NULL);
    }
    /* the graph memory calls in the set's context and relaxed mode (a
     * trim is no call for another thread's global capture to refuse) */
    cucap_i_work_enter_quietly(&w, set->hold->ctx, "cucap_graph_set_run");
    pthread_mutex_lock(&set->lock);
    if (make_room(set, bytes, nodes, why, sizeof why) == 0) {
        m.counted = 1;
        m.room = may_take(bytes, nodes);
        set->making++;
        set->making_bytes += m.room;
        if (!memory_nodes) {   /* the driver updates no executable graph with memory nodes (measured) */
            m.kept = set->kept;
            set->kept = NULL;
        }
    }
    pthread_mutex_unlock(&set->lock);
    t0 = now_us();
    if (m.counted && (m.used = update_kept(&m.kept, b, refusal, sizeof refusal))) {
        exec = m.used->exec;
        *how = CUCAP_RUN_UPDATED;
    } else if (m.counted && (exec = instantiate(b, bytes ? NULL : s, why, sizeof why))) {   /* memory at the first launch, on the set's stream */
        *how = CUCAP_RUN_INSTANTIATED;
    }
    e->instantiate_us = now_us() - t0;
    if (m.kept || m.used)
        m.refusal = m.used ? "" : refusal;
    made = settle(set, e, exec, nodes, bytes, capture_us, *how, why, &m, first);
    cucap_i_work_leave_quietly(&w, "cucap_graph_set_run");
    give_builder(set, b);
    return made;
}

/* ---------------------------------------------------------------- the eager run */

/* fn run eagerly on s (eager-run.c), counted with the reason. */
static CUresult run_eagerly(cucap_graph_set *set, cucap_capture_fn fn, void *user_data, const void *values,
                            size_t values_size, CUstream s, const char *why, const char *caller, cucap_error **err)
{
    CUresult rc = cucap_i_run_eagerly(set->hold, fn, user_data, values, values_size, s, caller, err);

    pthread_mutex_lock(&set->lock);
    set->stats.eager_runs++;
    snprintf(set->stats.last_reason, sizeof set->stats.last_reason, "%s", why);
    pthread_mutex_unlock(&set->lock);
    return rc;
}

/* ---------------------------------------------------------------- copies for other streams */

/* A run on s, a stream none of the key's executable graphs was last
 * launched on (the room of one more set aside, e->capturing set): fn
 * captured again and instantiated, a copy of the key's graph counted
 * among the set's graphs, and launched.  When the capture or the instantiation
 * fails, the run launches one of the key's graphs (and no copy is tried
 * until the key is retired); when the key was retired meanwhile, the new
 * graph is its graph again. */
static CUresult run_on_copy(cucap_graph_set *set, struct entry *e, cucap_capture_fn fn, void *user_data,
                            const void *values, size_t values_size, CUstream s, cucap_run_kind *kind,
                            const char *caller, cucap_error **err)
{
    char why[256] = "";
    double capture_us = 0;
    cucap_builder *b = capture(set, fn, user_data, NULL, &capture_us, why, sizeof why);
    cucap_exec *exec = b ? instantiate(b, s, why, sizeof why) : NULL;
    cucap_run_kind how = CUCAP_RUN_LAUNCHED;
    struct key_exec *x = NULL;
    CUresult rc;

    give_builder(set, b);
    pthread_mutex_lock(&set->lock);
    set->making--;
    set->making_bytes -= may_take(0, e->nodes);
    e->capturing = 0;
    if (exec) {
        x = &e->execs[e->exec_count++];
        *x = (struct key_exec){ exec, NULL, NULL };
        how = CUCAP_RUN_INSTANTIATED;
        set->stats.instantiations++;
        set->stats.graphs++;
        set->stats.footprint += e->footprint;
        if (e->exec_count > 1)
            set->stats.copies++;
        else
            cucap_i_keys_link_newest(&set->keys, e);
    } else if (e->exec_count) {
        e->no_copies = 1;
        snprintf(e->reason, sizeof e->reason, "a copy for another stream: %s", why);
        x = &e->execs[e->turn++ % e->exec_count];
    }
    rc = x ? launch(set, e, x, values, values_size, s, caller, err) : CUDA_SUCCESS;
    set->stats.runs++;
    e->runs++;
    e->last_run = set->stats.runs;
    if (x && how == CUCAP_RUN_LAUNCHED)
        set->stats.hits++;
    else
        set->stats.misses++;
    if (x && how == CUCAP_RUN_LAUNCHED) {
        cucap_i_keys_unlink(&set->keys, e);
        cucap_i_keys_link_newest(&set->keys, e);
    }
    pthread_cond_broadcast(&set->settled);
    pthread_mutex_unlock(&set->lock);
    if (!x) {   /* retired meanwhile, and no graph made */
        rc = run_eagerly(set, fn, user_data, values, values_size, s, why, caller, err);
        how = CUCAP_RUN_EAGER;
    }
    if (kind && rc == CUDA_SUCCESS)
        *kind = how;
    return rc;
}

/* A run whose graph found the set's stream full: eager. */
static CUresult eager_instead(cucap_graph_set *set, cucap_capture_fn fn, void *user_data, const void *values,
                              size_t values_size, CUstream s, cucap_run_kind *kind, const char *caller, cucap_error **err)
{
    CUresult rc = run_eagerly(set, fn, user_data, values, values_size, s, SET_STREAM_FULL_REASON, caller, err);

    if (kind && rc == CUDA_SUCCESS)
        *kind = CUCAP_RUN_EAGER;
    return rc;
}

/* ---------------------------------------------------------------- the calls */

static CUresult check_key(const cucap_graph_set *set, const void *key, size_t key_size, const char *caller,
                          cucap_error **err)
{
    if (!set)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the set is NULL", caller);
    if (!key)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the key is NULL", caller);
    if (key_size == 0 || key_size > CUCAP_GRAPH_SET_KEY_MAX)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a key has 1 to %d bytes, not %zu", caller,
                            CUCAP_GRAPH_SET_KEY_MAX, key_size);
    return CUDA_SUCCESS;
}

CUresult cucap_graph_set_create(CUdevice dev, const cucap_graph_set_options *opts, cucap_graph_set **out,
                                cucap_error **err)
{
    static const char caller[] = "cucap_graph_set_create";
    cucap_graph_set *set;
    CUresult rc;

    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    *out = NULL;
    if (!opts)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the options are NULL (a budget is needed)", caller);
    if (opts->budget_bytes == 0)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: a budget of 0 bytes holds no graph", caller);
    if (opts->capture_mode != CU_STREAM_CAPTURE_MODE_GLOBAL && opts->capture_mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        opts->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: %d is not a capture mode", caller,
                            (int)opts->capture_mode);
    if (!cucap_i_reserved_zero(opts->reserved_int, sizeof opts->reserved_int, opts->reserved_ptr,
                               sizeof opts->reserved_ptr / sizeof opts->reserved_ptr[0]))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the options' reserved members must be zero", caller);
    if ((rc = cucap_i_check_device(dev, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!(set = calloc(1, sizeof *set)) || cucap_i_keys_init(&set->keys) != 0) {
        free(set);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    if ((rc = cucap_i_ctx_hold_primary(dev, &set->hold, caller, err)) != CUDA_SUCCESS) {
        while (cucap_i_keys_take(&set->keys))
            ;
        free(set);
        return rc;
    }
    set->dev = dev;
    set->opts = *opts;
    set->stats.budget_bytes = opts->budget_bytes;
    set->stats.budget_graphs = opts->budget_graphs;
    pthread_mutex_init(&set->lock, NULL);
    pthread_cond_init(&set->settled, NULL);
    *out = set;
    return CUDA_SUCCESS;
}

/* Graphs that run at the same time do not share graph memory unless they
 * are queued on one stream: a launch on another stream takes its own,
 * even when that stream waits for the running ones by an event (measured:
 * doc/driver-facts.md).  So a graph that allocates is launched on the
 * set's own stream, after what s has queued and before what s queues
 * next (two event handoffs; the host does not wait), and its memory is
 * shared with every other allocating graph of the set, whatever the
 * threads and streams: the budget's arithmetic, one graph's graph memory
 * at a time, holds. */
/* Whether the set's stream has room for one more launch: its launches
 * done are counted out first (in relaxed mode: a query is no call for
 * another thread's global capture to refuse). */
static int set_stream_has_room(cucap_graph_set *set)
{
    struct cucap_work_scope w;

    if (set->queued_count < SET_STREAM_QUEUE)
        return 1;
    cucap_i_work_enter_quietly(&w, set->hold->ctx, "cucap_graph_set_run");
    while (set->queued_count && cucap_i_drv.cuEventQuery(set->queued[set->queued_first]) == CUDA_SUCCESS) {
        set->queued_first = (set->queued_first + 1) % SET_STREAM_QUEUE;
        set->queued_count--;
    }
    cucap_i_work_leave_quietly(&w, "cucap_graph_set_run");
    return set->queued_count < SET_STREAM_QUEUE;
}

/* A stream or event of the set's (kind), made in its context on first
 * need. */
static CUresult made(cucap_graph_set *set, int kind, void **at, const char *caller, cucap_error **err)
{
    CUresult rc;

    if (*at || (rc = cucap_i_create_in(set->hold->ctx, kind, at)) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    return cucap_i_fail_driver(err, rc, caller, kind == CUCAP_I_STREAM ? "cuStreamCreate" : "cuEventCreate");
}

/* Launch x, an executable graph of e's, on s, under the lock (no
 * retirement can take it meanwhile).  A graph that allocates goes on the
 * set's stream (as above), behind the event *back that s then waits for.
 * Once e ran on two streams, an event behind the launch says when x is
 * free again (a failure to make or record one only makes x look in
 * flight). */
static CUresult launch(cucap_graph_set *set, struct entry *e, struct key_exec *x, const void *values,
                       size_t values_size, CUstream s, const char *caller, cucap_error **err)
{
    size_t size = cucap_exec_params_size(x->exec);
    CUevent *back = NULL;
    CUstream on = s;
    CUresult rc;

    if (values && !size)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the key's graph reads no parameter block (values "
                            "of %zu bytes were given)", caller, values_size);
    if (values && values_size != size)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the key's parameter block holds %zu bytes, not %zu",
                            caller, size, values_size);
    if (e->allocation_bytes) {
        if (!set_stream_has_room(set))
            return CUCAP_I_SET_STREAM_FULL;
        back = &set->queued[(set->queued_first + set->queued_count) % SET_STREAM_QUEUE];
        if ((rc = made(set, CUCAP_I_STREAM, (void **)&set->stream, caller, err)) != CUDA_SUCCESS ||
            (rc = made(set, CUCAP_I_EVENT, (void **)&set->handoff, caller, err)) != CUDA_SUCCESS ||
            (rc = made(set, CUCAP_I_EVENT, (void **)back, caller, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = cucap_i_stream_after(set->hold->ctx, set->stream, s, set->handoff)) != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "ordering the set's stream after the run's (cuEventRecord, "
                                       "cuStreamWaitEvent)");
        on = set->stream;
    }
    rc = values ? cucap_exec_launch_params(x->exec, values, values_size, on, err) : cucap_exec_launch(x->exec, on, err);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (back) {
        if ((rc = cucap_i_hand_back(set->hold, s, set->stream, *back, caller)) != CUDA_SUCCESS)
            return cucap_i_fail(err, rc, "%s: the launch was queued on the set's stream, but the run's stream could "
                                "not be made to wait for it: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
        set->queued_count++;
        set->stats.set_stream_launches++;
        measure_graph_memory(set);
        return CUDA_SUCCESS;
    }
    x->stream = s;
    if (e->several_streams && (made(set, CUCAP_I_EVENT, (void **)&x->done, caller, NULL) != CUDA_SUCCESS ||
                               cucap_i_event_record_in(set->hold->ctx, x->done, s) != CUDA_SUCCESS) && x->done) {
        (void)cucap_i_drv.cuEventDestroy(x->done);
        x->done = NULL;
    }
    return CUDA_SUCCESS;
}

/* Which of e's executable graphs a run on s launches: one last launched
 * on s (or never); else NULL, a copy for s, when one may be made (so that
 * each stream keeps a graph of its own and no two streams take turns at
 * one); else one whose last launch is done (an event behind each launch
 * once the key ran on two streams says); else the next in turn.  Graphs
 * that allocate run one after another on the set's stream: their first. */
static struct key_exec *pick(cucap_graph_set *set, struct entry *e, CUstream s)
{
    struct cucap_work_scope w;
    struct key_exec *done = NULL;
    unsigned int i;

    if (e->allocation_bytes)
        return &e->execs[0];
    for (i = 0; i < e->exec_count; i++)
        if (e->execs[i].stream == s || !e->execs[i].stream)
            return &e->execs[i];
    e->several_streams = 1;
    if (!e->capturing && e->exec_count < KEY_EXECS_MAX && !e->no_copies && fits(set, 0, e->nodes))
        return NULL;
    /* relaxed: a query is no call for another thread's global capture to refuse */
    cucap_i_work_enter_quietly(&w, set->hold->ctx, "cucap_graph_set_run");
    for (i = 0; i < e->exec_count && !done; i++)
        if (e->execs[i].done && cucap_i_drv.cuEventQuery(e->execs[i].done) == CUDA_SUCCESS)
            done = &e->execs[i];
    cucap_i_work_leave_quietly(&w, "cucap_graph_set_run");
    return done ? done : &e->execs[e->turn++ % e->exec_count];
}

CUresult cucap_graph_set_run(cucap_graph_set *set, const void *key, size_t key_size, cucap_capture_fn fn,
                             void *user_data, const void *values, size_t values_size, CUstream s,
                             cucap_run_kind *kind, cucap_error **err)
{
    static const char caller[] = "cucap_graph_set_run";
    cucap_run_kind how = CUCAP_RUN_LAUNCHED;
    char why[256];
    struct entry *e;
    CUresult rc;

    if ((rc = check_key(set, key, key_size, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the capture function is NULL", caller);
    if (!values != !values_size)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: values and values_size go together (%s values, "
                            "%zu bytes)", caller, values ? "given" : "no", values_size);
    pthread_mutex_lock(&set->lock);
    if (!(e = cucap_i_keys_find_or_add(&set->keys, key, key_size))) {
        pthread_mutex_unlock(&set->lock);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    if (e->exec_count) {
        struct key_exec *x = pick(set, e, s);
        if (!x) {
            e->capturing = 1;
            set->making++;
            set->making_bytes += may_take(0, e->nodes);
            pthread_mutex_unlock(&set->lock);
            return run_on_copy(set, e, fn, user_data, values, values_size, s, kind, caller, err);
        }
        /* values of another size than the block are refused before anything is counted */
        if ((rc = launch(set, e, x, values, values_size, s, caller, err)) == CUCAP_I_SET_STREAM_FULL) {
            set->stats.runs++;
            set->stats.misses++;
            e->runs++;
            e->last_run = set->stats.runs;
            pthread_mutex_unlock(&set->lock);
            return eager_instead(set, fn, user_data, values, values_size, s, kind, caller, err);
        }
        if (rc == CUDA_SUCCESS) {
            set->stats.runs++;
            set->stats.hits++;
            e->runs++;
            e->last_run = set->stats.runs;
            cucap_i_keys_unlink(&set->keys, e);
            cucap_i_keys_link_newest(&set->keys, e);
        }
        pthread_mutex_unlock(&set->lock);
        if (kind && rc == CUDA_SUCCESS)
            *kind = CUCAP_RUN_LAUNCHED;
        return rc;
    }
    set->stats.runs++;
    e->runs++;
    e->last_run = set->stats.runs;
    set->stats.misses++;
    if (e->capturing || e->runs < e->retry_at) {
        snprintf(why, sizeof why, "%s", e->capturing ? "another thread was capturing the key" : e->reason);
        pthread_mutex_unlock(&set->lock);
    } else {
        struct first_launch first = { values, values_size, s, caller, err, CUDA_SUCCESS };
        e->capturing = 1;
        pthread_mutex_unlock(&set->lock);
        if (make_graph(set, e, fn, user_data, s, &first, &how) == 0) {
            if (first.rc == CUCAP_I_SET_STREAM_FULL)
                return eager_instead(set, fn, user_data, values, values_size, s, kind, caller, err);
            if (kind && first.rc == CUDA_SUCCESS)
                *kind = how;
            return first.rc;
        }
        pthread_mutex_lock(&set->lock);
        snprintf(why, sizeof why, "%s", e->reason);
        pthread_mutex_unlock(&set->lock);
    }
    rc = run_eagerly(set, fn, user_data, values, values_size, s, why, caller, err);
    if (kind && rc == CUDA_SUCCESS)
        *kind = CUCAP_RUN_EAGER;
    return rc;
}

CUresult cucap_graph_set_warm(cucap_graph_set *set, const void *const *keys, const size_t *key_sizes, size_t count,
                              cucap_capture_fn fn, void *const *user_data, cucap_error **err)
{
    static const char caller[] = "cucap_graph_set_warm";
    cucap_run_kind how = CUCAP_RUN_INSTANTIATED;
    struct entry *e;
    CUresult rc;
    size_t i;

    if (!set || !fn || (count && (!keys || !key_sizes)))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: %s is NULL", caller,
                            !set ? "the set" : !fn ? "the capture function" : "the key list");
    for (i = 0; i < count; i++)
        if ((rc = check_key(set, keys[i], key_sizes[i], caller, err)) != CUDA_SUCCESS)
            return rc;
    /* as a run makes a graph, side by side with other threads' */
    for (i = 0; i < count; i++) {
        pthread_mutex_lock(&set->lock);
        e = cucap_i_keys_find_or_add(&set->keys, keys[i], key_sizes[i]);
        if (e && (e->exec_count || e->capturing))
            e = NULL;   /* made, or being made */
        else if (e)
            e->capturing = 1;
        pthread_mutex_unlock(&set->lock);
        if (e)
            (void)make_graph(set, e, fn, user_data ? user_data[i] : NULL, NULL, NULL, &how);
    }
    return CUDA_SUCCESS;
}

void cucap_graph_set_get_stats(cucap_graph_set *set, cucap_graph_set_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!set)
        return;
    pthread_mutex_lock(&set->lock);
    *out = set->stats;
    pthread_mutex_unlock(&set->lock);
}

CUresult cucap_graph_set_get_key_stats(cucap_graph_set *set, const void *key, size_t key_size,
                                       cucap_graph_set_key_stats *out, cucap_error **err)
{
    static const char caller[] = "cucap_graph_set_get_key_stats";
    struct entry *e;
    CUresult rc;

    if ((rc = check_key(set, key, key_size, caller, err)) != CUDA_SUCCESS)
        return rc;
    if (!out)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: out is NULL", caller);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&set->lock);
    if ((e = cucap_i_keys_find(&set->keys, key, key_size))) {
        out->has_graph = e->exec_count > 0;
        out->copies = e->exec_count > 1 ? e->exec_count - 1 : 0;
        out->nodes = e->nodes;
        out->allocation_bytes = e->allocation_bytes;
        out->footprint = e->footprint;
        out->capture_us = e->capture_us;
        out->instantiate_us = e->instantiate_us;
        out->runs = e->runs;
        out->last_run = e->last_run;
        out->failures = e->failures;
        out->retry_at = e->retry_at;
        snprintf(out->reason, sizeof out->reason, "%s", e->reason);
        snprintf(out->update_refusal, sizeof out->update_refusal, "%s", e->refusal);
    }
    pthread_mutex_unlock(&set->lock);
    if (!e)
        return cucap_i_fail(err, CUDA_ERROR_NOT_FOUND, "%s: the set never ran this key", caller);
    return CUDA_SUCCESS;
}

void cucap_graph_set_destroy(cucap_graph_set *set)
{
    struct cucap_work_scope w;
    struct entry *e;
    int i;

    if (!set)
        return;
    cucap_i_work_enter_quietly(&w, set->hold->ctx, "cucap_graph_set_destroy");
    while ((e = cucap_i_keys_take(&set->keys)) != NULL) {
        while (e->exec_count)
            destroy_key_exec(&e->execs[--e->exec_count]);
        free(e);
    }
    while (set->kept) {
        struct kept_exec *k = set->kept;
        set->kept = k->next;
        cucap_exec_destroy(k->exec);
        free(k);
    }
    if (set->stream)   /* its launches finish first (the driver waits for them, the call does not) */
        (void)cucap_i_drv.cuStreamDestroy(set->stream);
    if (set->handoff)
        (void)cucap_i_drv.cuEventDestroy(set->handoff);
    for (i = 0; i < SET_STREAM_QUEUE; i++)
        if (set->queued[i])
            (void)cucap_i_drv.cuEventDestroy(set->queued[i]);
    (void)cucap_i_graph_memory_trim(set->dev);
    cucap_i_work_leave_quietly(&w, "cucap_graph_set_destroy");
    while (set->builder_count)
        cucap_builder_destroy(set->builders[--set->builder_count]);
    free(set->builders);
    free(set->idle);
    cucap_i_ctx_hold_release(set->hold);
    pthread_mutex_destroy(&set->lock);
    pthread_cond_destroy(&set->settled);
    free(set);
}
