/* The stateful API fuzzer's interpreter.  Each input decodes into calls of
 * the public API over a few live builders, pools, graphs, executable
 * graphs and conditional handles, direct driver calls a user makes on
 * builder streams (memsets, synchronizing a capturing stream, waiting
 * across streams), and armed driver faults.  It runs on the simulated
 * driver under the fault-injecting layer, whose loud crash paths turn a
 * graph destroyed twice into a finding.  After every step:
 *   - a call returned CUDA_SUCCESS with no error object, or a failure with
 *     an error object of the same code and a message naming the function;
 *   - builder states moved only along the contract's transitions;
 *   - the thread's capture mode is what it was before the call;
 * and at the end, destroying everything in an order the input chooses
 * leaves no live driver object in the simulator.
 *
 * Differential mode (fuzz_setup_differential): the same inputs with no
 * fault layer and faults off, on the simulator or on the real driver,
 * recording every return code; two transcripts that differ are a
 * simulator bug or a library bug. */
#include "config.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucapture.h"
#include "driver.h"
#include "test-driver.h"
#include "fault/fault.h"
#include "fuzz/fuzz.h"
#include "error-names.h"
#include "error.h"
#include "cucapture.h"
#include "sim/sim.h"

#define BUILDERS 8
#define POOLS 3
#define GRAPHS 3
#define EXECS 3
#define HANDLES 3
#define PTRS 8

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz: invariant broken at step %d: ", step);                 \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static cudasim_live_fn sim_live;
/* The simulator's held work (held-work.h): a host function that holds its
 * stream, and everything behind it, in flight until released; not in
 * differential mode (the GPU has no such gate). */
static CUhostFn sim_gate;
static void (*sim_release)(void);
static cudafault_set_rules_fn set_rules;
static cudafault_last_injected_fn last_injected;
static cudafault_injected_fn injected;
static CUcontext ctx;
static int step;
static int differential;             /* no fault layer; record return codes */
static char transcript[8192];
static size_t transcript_len;

/* The return codes of one input, space-separated (differential mode). */
static unsigned current_op;

static void record(CUresult rc)
{
    int n;

    if (getenv("FUZZ_TRACE"))
        fprintf(stderr, "  -> %d\n", (int)rc);
    if (!differential || transcript_len + 12 >= sizeof transcript)
        return;
    n = snprintf(transcript + transcript_len, sizeof transcript - transcript_len, "%u:%d ", current_op, (int)rc);
    if (n > 0)
        transcript_len += (size_t)n;
}

const char *fuzz_transcript(void)
{
    return transcript;
}

/* Stand-ins for the fault layer's and the simulator's hooks where they
 * are not loaded. */
static int no_rules(const char *rules)
{
    (void)rules;
    return 0;
}

static const char *no_fault(void)
{
    return NULL;
}

static long no_count(void)
{
    return 0;
}

static long no_live(const char *kind)
{
    (void)kind;
    return 0;
}

struct ptr {
    CUdeviceptr p;
    int pool;
};

#define KINDS 7   /* of live driver objects (kinds below) */
static struct state {
    cucap_builder *b[BUILDERS];
    cucap_builder_state seen[BUILDERS];
    cucap_pool *pool[POOLS];
    cucap_graph *g[GRAPHS];
    cucap_exec *e[EXECS];
    CUgraphConditionalHandle h[HANDLES];
    unsigned int h_value[HANDLES];   /* the default each launch applies: a WHILE needs 0 to end */
    struct ptr ptr[PTRS];
    CUdeviceptr buffer;
    CUstream spare;
    cucap_graph_set *set;
    int fault_in_release;            /* a destroy-like call failed: leaks are the driver's */
    long baseline[KINDS];            /* live objects before the input (earlier inputs may have lost some
                                        to failed destroys) */
} st;

static const char *const kinds[KINDS] = { "stream", "event", "graph", "exec", "pool", "allocation",
                                          "pinned host memory" };

int fuzz_setup(void)
{
    const char *sim = getenv("CUCAPTURE_TEST_SIM"), *fault = getenv("CUCAPTURE_TEST_FAULT");
    void *hs, *hf;

    if (!sim || !fault) {
        fprintf(stderr, "fuzz: set CUCAPTURE_TEST_SIM and CUCAPTURE_TEST_FAULT (make check does)\n");
        return -1;
    }
    setenv("CUCAPTURE_DRIVER", fault, 1);
    setenv("CUDAFAULT_DRIVER", sim, 1);
    if (cucap_init(NULL) != CUDA_SUCCESS)
        return -1;
    hs = dlopen(sim, RTLD_NOW | RTLD_NOLOAD);
    hf = dlopen(fault, RTLD_NOW | RTLD_NOLOAD);
    if (!hs || !hf)
        return -1;
    sim_live = (cudasim_live_fn)dlsym(hs, "cudasim_live");
    sim_gate = (CUhostFn)dlsym(hs, "cudasim_gate");
    sim_release = (void (*)(void))dlsym(hs, "cudasim_release");
    set_rules = (cudafault_set_rules_fn)dlsym(hf, "cudafault_set_rules");
    last_injected = (cudafault_last_injected_fn)dlsym(hf, "cudafault_last_injected");
    injected = (cudafault_injected_fn)dlsym(hf, "cudafault_injected");
    if (!sim_live || !set_rules || !last_injected || !injected)
        return -1;
    if (D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    cucap_set_warning_handler(NULL, NULL);
    return 0;
}

int fuzz_setup_differential(int on_simulator)
{
    const char *sim = getenv("CUCAPTURE_TEST_SIM");
    CUresult rc;

    differential = 1;
    set_rules = no_rules;
    last_injected = no_fault;
    injected = no_count;
    sim_live = no_live;
    if (on_simulator) {
        void *hs;
        if (!sim)
            return -1;
        setenv("CUCAPTURE_DRIVER", sim, 1);
        if (cucap_init(NULL) != CUDA_SUCCESS || !(hs = dlopen(sim, RTLD_NOW | RTLD_NOLOAD)) ||
            !(sim_live = (cudasim_live_fn)dlsym(hs, "cudasim_live")))
            return -1;
    } else {
        unsetenv("CUCAPTURE_DRIVER");
        if ((rc = cucap_init(NULL)) != CUDA_SUCCESS)
            return 77;   /* no GPU here */
    }
    if (D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    cucap_set_warning_handler(NULL, NULL);
    return 0;
}

static int step_reported;   /* this step returned an error or warned */

static void quiet(const cucap_error *w, void *data)
{
    (void)w;
    (void)data;
    step_reported = 1;
}

/* ---------------------------------------------------------------- input */

struct input {
    const uint8_t *p;
    size_t left;
};

static unsigned next(struct input *in)
{
    if (!in->left)
        return 0;
    in->left--;
    return *in->p++;
}

/* ---------------------------------------------------------------- invariants */

/* The thread's mode, read by exchanging twice; an injected fault on the
 * checker's own exchange fires once, so it is simply retried. */
static CUstreamCaptureMode thread_mode(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED, back;
    int tries;

    for (tries = 0; tries < 3 && D.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS; tries++)
        m = CU_STREAM_CAPTURE_MODE_RELAXED;
    back = m;
    for (tries = 0; tries < 3 && D.cuThreadExchangeStreamCaptureMode(&back) != CUDA_SUCCESS; tries++)
        back = m;
    return m;
}

static void note_fault(void)
{
    const char *name = last_injected();

    /* a failed destroy, release or end leaves its object to the driver, and
     * so does a destroy that ran in a capture-refusing mode because the
     * switch to relaxed mode failed */
    if (name && (strstr(name, "Destroy") || strstr(name, "Release") || strstr(name, "Free") ||
                 !strcmp(name, "cuStreamEndCapture") || !strcmp(name, "cuStreamGetCaptureInfo") ||
                 !strcmp(name, "cuThreadExchangeStreamCaptureMode")))
        st.fault_in_release = 1;
}


/* After a library call: the error convention. */
static void checked(CUresult rc, cucap_error *err, const char *what)
{
    record(rc);
    if (err && getenv("FUZZ_TRACE"))
        fprintf(stderr, "     %s\n", cucap_error_message(err));
    CHECK((rc == CUDA_SUCCESS) == (err == NULL), "%s returned %d with%s an error object", what, rc,
          err ? "" : "out");
    if (err) {
        CHECK(cucap_error_code(err) == rc, "%s returned %d but its error says %d", what, rc, cucap_error_code(err));
        CHECK(strncmp(cucap_error_message(err), "cucap_", 6) == 0, "%s: message '%s' does not name the function",
              what, cucap_error_message(err));
        step_reported = 1;
    }
    cucap_error_free(err);
    note_fault();
}

/* After every step: the thread's capture mode is still GLOBAL, unless a
 * restore failed (a fault in cuThreadExchangeStreamCaptureMode), and then
 * the step reported it. */
static void check_thread_mode(void)
{
    CUstreamCaptureMode mode = thread_mode();   /* through the fault layer too: read what failed after it */
    const char *name = last_injected();

    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
        return;
    CHECK(name && !strcmp(name, "cuThreadExchangeStreamCaptureMode"),
          "the thread's capture mode changed (last injected fault: %s)", name ? name : "none");
    CHECK(step_reported, "a failed capture-mode restore was neither returned nor warned about");
    set_rules("");
    mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    D.cuThreadExchangeStreamCaptureMode(&mode);
}

static int allowed(cucap_builder_kind kind, cucap_builder_state from, cucap_builder_state to)
{
    if (from == to)
        return 1;
    switch (from) {
    case CUCAP_BUILDER_NOT_STARTED: return to == CUCAP_BUILDER_CAPTURING || to == CUCAP_BUILDER_CLOSED;
    case CUCAP_BUILDER_CAPTURING:
        /* a fork's capture is its primary's: it ends with it */
        return to != CUCAP_BUILDER_NOT_STARTED;
    case CUCAP_BUILDER_ENDED:
    case CUCAP_BUILDER_INVALIDATED:
        /* a body whose capture failed may capture again; a reset primary begins again */
        return to == CUCAP_BUILDER_CLOSED || (kind == CUCAP_BUILDER_BODY && to == CUCAP_BUILDER_CAPTURING) ||
               (kind == CUCAP_BUILDER_PRIMARY && to == CUCAP_BUILDER_NOT_STARTED);
    default: return 0;
    }
}

static void check_states(void)
{
    int i;

    for (i = 0; i < BUILDERS; i++) {
        cucap_builder_state now;
        if (!st.b[i])
            continue;
        now = cucap_builder_get_state(st.b[i]);
        CHECK(allowed(cucap_builder_get_kind(st.b[i]), st.seen[i], now), "builder %d moved from state %d to %d", i,
              st.seen[i], now);
        st.seen[i] = now;
    }
}

/* ---------------------------------------------------------------- slots */

static int free_builder_slot(void)
{
    int i;
    for (i = 0; i < BUILDERS; i++)
        if (!st.b[i])
            return i;
    return -1;
}

static void adopt(cucap_builder *b)
{
    int i = free_builder_slot();

    if (i < 0) {
        cucap_builder_destroy(b);
        return;
    }
    st.b[i] = b;
    st.seen[i] = cucap_builder_get_state(b);
}

/* A kept fork handed out again (CLOSED to CAPTURING, which only that
 * allows) is already the input's: seen anew, not adopted twice. */
static void adopt_once(cucap_builder *b)
{
    int i;

    for (i = 0; i < BUILDERS; i++)
        if (st.b[i] == b) {
            st.seen[i] = cucap_builder_get_state(b);
            return;
        }
    adopt(b);
}

static const char *const trace_states[] = { "NOT_STARTED", "CAPTURING", "ENDED", "INVALIDATED", "CLOSED" };

static CUstream stream_of(struct input *in)
{
    unsigned k = next(in) % BUILDERS;
    cucap_builder *b = st.b[k];
    CUstream s = b ? cucap_builder_stream(b) : NULL;

    if (getenv("FUZZ_TRACE"))
        fprintf(stderr, "  on the stream of builder %u (%s)\n", k, b ? trace_states[cucap_builder_get_state(b)] : "none: the spare");
    return s ? s : st.spare;
}

static const CUresult fault_codes[] = {
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_MERGE,
    CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_UNKNOWN,
};

/* ---------------------------------------------------------------- one step */

static void set_op(unsigned op, unsigned a, unsigned c);

/* Host callbacks' data: given out, and given back (never more often). */
static atomic_long callbacks_given, callbacks_back;

static const char *const node_names[3] = { "a", "b", "c" };

static void CUDA_CB count_callback(void *unused)
{
    (void)unused;
}

static void CUDA_CB give_callback_back(void *unused)
{
    (void)unused;
    CHECK(atomic_fetch_add(&callbacks_back, 1) < atomic_load(&callbacks_given),
          "a host callback's data was given back more often than it was given");
}

static void run_step(struct input *in)
{
    unsigned op = next(in) % 33, a = next(in), c = next(in);
    cucap_error *err = NULL;

    current_op = op;
    step_reported = 0;
    if (getenv("FUZZ_TRACE"))
        fprintf(stderr, "step %d: op %u a %u c %u (last fault %s, pools %ld, allocations %ld, streams %ld)\n", step, op, a, c,
                last_injected() ? last_injected() : "-", sim_live("pool"), sim_live("allocation"), sim_live("stream"));
    cucap_builder *b = st.b[a % BUILDERS];
    CUresult rc;
    int i;

    if (getenv("FUZZ_TRACE") && b)
        fprintf(stderr, "  builder %u: kind %d, %s\n", a % BUILDERS, (int)cucap_builder_get_kind(b),
                trace_states[cucap_builder_get_state(b)]);

    switch (op) {
    case 0: {
        cucap_builder *nb = NULL;
        rc = cucap_builder_create(0, &nb, &err);
        checked(rc, err, "cucap_builder_create");
        if (nb)
            adopt(nb);
        break;
    }
    case 1: {
        static const CUstreamCaptureMode modes[4] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                      CU_STREAM_CAPTURE_MODE_RELAXED, (CUstreamCaptureMode)7 };
        rc = cucap_builder_begin(b, modes[c % 4], &err);
        checked(rc, err, "cucap_builder_begin");
        break;
    }
    case 2:
        if (c & 0x40) {   /* a loop's next capture on the same builder */
            rc = cucap_builder_reset(b, &err);
            checked(rc, err, "cucap_builder_reset");
            break;
        }
        rc = cucap_builder_end(b, &err);

        checked(rc, err, "cucap_builder_end");
        break;
    case 3: {
        cucap_builder *forks[4] = { NULL, NULL, NULL, NULL };
        size_t count = 1 + c % 4;
        int kept = (c >> 4) & 1;
        rc = kept ? cucap_builder_split_kept(b, count, forks, &err) : cucap_builder_split(b, count, forks, &err);
        checked(rc, err, kept ? "cucap_builder_split_kept" : "cucap_builder_split");
        for (i = 0; i < 4; i++) {
            CHECK(rc == CUDA_SUCCESS || !forks[i], "a failed split handed out a fork");
            if (forks[i])
                adopt_once(forks[i]);
        }
        break;
    }
    case 4: {
        cucap_builder *list[4], *root = NULL;
        size_t n = 0;
        int k;
        for (k = 0; k < 4; k++) {
            cucap_builder *x = st.b[(a + (unsigned)k * (c | 1)) % BUILDERS];
            size_t j;
            for (j = 0; j < n && list[j] != x; j++)
                ;
            if (x && j == n)
                list[n++] = x;
        }
        rc = cucap_builder_join(n ? list : NULL, n, &root, &err);
        checked(rc, err, "cucap_builder_join");
        if (rc != CUDA_ERROR_INVALID_VALUE && rc != CUDA_ERROR_ILLEGAL_STATE)
            for (size_t j = 0; j < n; j++)
                CHECK(list[j] == root || cucap_builder_get_state(list[j]) == CUCAP_BUILDER_CLOSED,
                      "join left builder %zu of %zu open", j, n);
        break;
    }
    case 5:
        rc = cucap_builder_close(b, &err);

        checked(rc, err, "cucap_builder_close");
        break;
    case 6:
        if (b) {
            cucap_builder_destroy(b);
            st.b[a % BUILDERS] = NULL;
            note_fault();
        }
        break;
    case 7:
        if (!differential && sim_gate && (c & 0x80))   /* work held in flight behind this, until released */
            record(D.cuLaunchHostFunc(stream_of(in), sim_gate, NULL));
        else
            record(D.cuMemsetD8Async(st.buffer + (c % 16) * 64, (unsigned char)c, 64, stream_of(in)));
        note_fault();
        break;
    case 8:
        record(D.cuStreamSynchronize(stream_of(in)));
        note_fault();
        break;
    case 9: {
        CUevent ev;
        if (D.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
            record(D.cuEventRecord(ev, stream_of(in)));
            record(D.cuStreamWaitEvent(stream_of(in), ev, 0));
            if (D.cuEventDestroy(ev) != CUDA_SUCCESS)
                st.fault_in_release = 1;
        }
        note_fault();
        break;
    }
    case 10: {
        int building = 0;
        rc = cucap_builder_is_building(b, &building, &err);

        checked(rc, err, "cucap_builder_is_building");
        break;
    }
    case 11: {
        cucap_exec **slot = &st.e[c % EXECS];
        if (*slot)
            break;
        rc = cucap_builder_complete(b, NULL, slot, &err);

        checked(rc, err, "cucap_builder_complete");
        break;
    }
    case 12: {
        cucap_graph **slot = &st.g[c % GRAPHS];
        if (*slot)
            break;
        rc = cucap_builder_graph(b, slot, &err);

        checked(rc, err, "cucap_builder_graph");
        break;
    }
    case 13:
        cucap_graph_unref(st.g[c % GRAPHS]);
        st.g[c % GRAPHS] = NULL;
        note_fault();
        break;
    case 14: {
        cucap_exec **slot = &st.e[a % EXECS];
        if (*slot || !st.g[c % GRAPHS])
            break;
        rc = cucap_graph_instantiate(st.g[c % GRAPHS], NULL, slot, &err);

        checked(rc, err, "cucap_graph_instantiate");
        break;
    }
    case 15:
        if (st.e[c % EXECS]) {
            rc = cucap_exec_launch(st.e[c % EXECS], stream_of(in), &err);
            checked(rc, err, "cucap_exec_launch");
        }
        break;
    case 16:
        cucap_exec_destroy(st.e[c % EXECS]);
        st.e[c % EXECS] = NULL;
        note_fault();
        break;
    case 17:
        if (st.e[c % EXECS]) {
            rc = cucap_exec_update(st.e[c % EXECS], b, &err);
            checked(rc, err, "cucap_exec_update");
        }
        break;
    case 18:
        rc = cucap_builder_create_condition(b, c & 1, (c >> 1) & 1, &st.h[c % HANDLES], &err);
        st.h_value[c % HANDLES] = (c & 1) && ((c >> 1) & 1);

        checked(rc, err, "cucap_builder_create_condition");
        break;
    case 19: {
        cucap_builder *bodies[3] = { NULL, NULL, NULL };
        CUgraphConditionalHandle h = st.h[a % HANDLES];
        switch (c % 4) {
        case 0: rc = cucap_builder_if(b, h, &bodies[0], &err); break;
        case 1: rc = cucap_builder_if_else(b, h, &bodies[0], &bodies[1], &err); break;
        case 2:
            /* a WHILE whose condition stays 1 never ends, on any device */
            if (st.h_value[a % HANDLES]) {
                rc = CUDA_SUCCESS;
                break;
            }
            rc = cucap_builder_while(b, h, &bodies[0], &err);
            break;
        default: rc = cucap_builder_switch(b, h, 3, bodies, &err); break;
        }
        checked(rc, err, "a conditional call");
        for (i = 0; i < 3; i++)
            if (bodies[i])
                adopt(bodies[i]);
        break;
    }
    case 20: {
        cucap_pool **slot = &st.pool[c % POOLS];
        if (*slot)
            break;
        if (a % 3 == 0)
            rc = cucap_device_pool(0, slot, &err);
        else if (a % 3 == 1)
            rc = cucap_pool_open_default(0, slot, &err);
        else
            rc = cucap_pool_create(0, NULL, slot, &err);
        checked(rc, err, "a pool constructor");
        break;
    }
    case 21: {
        struct ptr *slot = &st.ptr[a % PTRS];
        if (slot->p || !st.pool[c % POOLS])
            break;
        rc = cucap_pool_alloc(st.pool[c % POOLS], 64 + c, stream_of(in), &slot->p, &err);
        checked(rc, err, "cucap_pool_alloc");
        slot->pool = (int)(c % POOLS);
        break;
    }
    case 22: {
        struct ptr *slot = &st.ptr[a % PTRS];
        if (!slot->p || slot->pool < 0 || !st.pool[slot->pool])
            break;
        {
            CUstream s = stream_of(in);
            CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
            D.cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL);
            rc = cucap_pool_free(st.pool[slot->pool], slot->p, s, &err);
            checked(rc, err, "cucap_pool_free");
            /* a free captured into a graph happens only if the graph runs:
             * the teardown frees what is still there */
            if (rc == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_NONE)
                slot->p = 0;
            else if (rc == CUDA_SUCCESS)
                slot->pool = -1;
        }
        break;
    }
    case 23:
        if (st.pool[c % POOLS]) {
            int j;
            for (j = 0; j < PTRS; j++)   /* a pool's pointers cannot be freed through it any more */
                if (st.ptr[j].p && st.ptr[j].pool == (int)(c % POOLS))
                    st.ptr[j].pool = -1;
            rc = cucap_pool_close(st.pool[c % POOLS], &err);

            checked(rc, err, "cucap_pool_close");
            st.pool[c % POOLS] = NULL;
        }
        break;
    case 24: {
        char rule[64];
        snprintf(rule, sizeof rule, "*:%u:%d", 1 + c % 12, (int)fault_codes[a % (sizeof fault_codes / sizeof fault_codes[0])]);
        set_rules(rule);
        break;
    }
    case 25:
        rc = cucap_builder_embed(b, st.b[c % BUILDERS], &err);

        checked(rc, err, "cucap_builder_embed");
        break;
    case 26:
        if (c & 1) {   /* a host callback that owns its data: given back exactly once (checked at teardown) */
            atomic_fetch_add(&callbacks_given, 1);
            rc = cucap_builder_host_callback(b, count_callback, NULL, give_callback_back, &err);
            checked(rc, err, "cucap_builder_host_callback");
            if (rc == CUDA_SUCCESS && (c & 2)) {   /* named, for the changes below */
                rc = cucap_builder_name_node(b, node_names[(c >> 2) % 3], &err);
                checked(rc, err, "cucap_builder_name_node");
            }
            break;
        }
        if (c & 2) {   /* a change by name, in an executable graph: its data owned by it from here */
            cucap_exec *e = st.e[a % EXECS];
            const char *name = node_names[(c >> 2) % 3];
            if (c & 4) {
                atomic_fetch_add(&callbacks_given, 1);
                rc = cucap_exec_set_host_callback(e, name, count_callback, NULL, give_callback_back, &err);
                checked(rc, err, "cucap_exec_set_host_callback");
            } else {
                rc = cucap_exec_set_enabled(e, name, (int)(c & 8), &err);
                checked(rc, err, "cucap_exec_set_enabled");
            }
            break;
        }
        rc = cucap_builder_dot_print(b, "/dev/null", 0, &err);

        checked(rc, err, "cucap_builder_dot_print");
        break;
    case 27:
    case 28:
    case 29:
    case 30:
    case 31:
        set_op(op, a, c);
        break;
    default:
        set_rules("");
        if (!differential && sim_release && (c & 1))
            sim_release();
        break;
    }
    note_fault();   /* whatever the step's calls were, a fault in a release counts */
    check_states();
    check_thread_mode();
}

/* ---------------------------------------------------------------- graph sets */

/* A graph set's step, by the key's first byte: a memset, a parameter
 * block copied out, a fork, a pool allocation inside the step, a call
 * the capture forbids (the step runs eagerly), or the function's own
 * failure. */
static CUresult set_step(cucap_builder *b, void *user_data, cucap_error **err)
{
    unsigned shape = (unsigned)(uintptr_t)user_data;
    CUstream s = cucap_builder_stream(b);
    cucap_builder *fork = NULL;
    CUdeviceptr block, tmp;
    cucap_pool *pool;
    CUresult rc;

    switch (shape % 6) {
    case 1:
        if ((rc = cucap_builder_params(b, 8, &block, err)) != CUDA_SUCCESS)
            return rc;
        return D.cuMemcpyDtoDAsync(st.buffer + 8 * 64, block, 8, s);
    case 2:
        if ((rc = cucap_builder_split(b, 2, &fork, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemsetD8Async(st.buffer + 9 * 64, 2, 64, cucap_builder_stream(fork))) == CUDA_SUCCESS)
            rc = cucap_builder_join_forks(b, err);
        cucap_builder_destroy(fork);
        return rc;
    case 3:
        if ((rc = cucap_device_pool(0, &pool, err)) != CUDA_SUCCESS ||
            (rc = cucap_pool_alloc(pool, 4096u << (shape % 4), s, &tmp, err)) != CUDA_SUCCESS)
            return rc;
        if ((rc = D.cuMemsetD8Async(tmp, 3, 64, s)) == CUDA_SUCCESS)
            rc = D.cuMemcpyDtoDAsync(st.buffer + 10 * 64, tmp, 64, s);
        if (cucap_pool_free(pool, tmp, s, NULL) != CUDA_SUCCESS) {   /* an injected fault: teardown frees it */
            int j;
            for (j = 0; j < PTRS && st.ptr[j].p; j++)
                ;
            if (j < PTRS) {
                st.ptr[j].p = tmp;
                st.ptr[j].pool = -1;
            }
        }
        return rc;
    case 4:
        (void)D.cuStreamSynchronize(s);   /* refused, and the capture is invalidated */
        return D.cuMemsetD8Async(st.buffer + 11 * 64, 4, 64, s);
    case 5:
        return cucap_i_fail(err, CUDA_ERROR_LAUNCH_FAILED, "cucap_fuzz_step: the step's own failure");
    default:
        return D.cuMemsetD8Async(st.buffer + 12 * 64, 5, 64, s);
    }
}

static void set_op(unsigned op, unsigned a, unsigned c)
{
    cucap_graph_set_options opts;
    cucap_graph_set_stats stats;
    cucap_graph_set_key_stats ks;
    cucap_error *err = NULL;
    unsigned char key = (unsigned char)(c % 6 + (a & 0x10));
    uint64_t values = c;
    CUresult rc;

    switch (op) {
    case 27:
        if (st.set && (c & 0x80)) {
            cucap_graph_set_destroy(st.set);
            st.set = NULL;
            note_fault();
            break;
        }
        if (st.set)
            break;
        memset(&opts, 0, sizeof opts);
        opts.budget_bytes = (c & 0x40) ? 0 : (size_t)(1 + c % 64) << 20;   /* 0: refused */
        opts.budget_graphs = a % 4;
        opts.kept_for_update = (a >> 2) % 3;
        opts.capture_mode = (CUstreamCaptureMode)((a >> 4) % 4);   /* 3: no mode */
        rc = cucap_graph_set_create(0, &opts, &st.set, &err);
        checked(rc, err, "cucap_graph_set_create");
        CHECK((rc == CUDA_SUCCESS) == (st.set != NULL), "create returned %d and %s set", rc, st.set ? "a" : "no");
        break;
    case 28: {
        cucap_run_kind kind = (cucap_run_kind)0;
        size_t size = (a & 1) ? ((a & 2) ? 4 : 8) : 0;   /* 4: the wrong size */
        rc = cucap_graph_set_run(st.set, &key, (a & 0x20) ? 0 : 1, set_step, (void *)(uintptr_t)key,
                                 size ? &values : NULL, size, (a & 4) ? NULL : st.spare, &kind, &err);
        checked(rc, err, "cucap_graph_set_run");
        CHECK(rc != CUDA_SUCCESS || (kind >= CUCAP_RUN_LAUNCHED && kind <= CUCAP_RUN_EAGER),
              "a run succeeded with kind %d", (int)kind);
        break;
    }
    case 29: {
        unsigned char keys[3] = { (unsigned char)(c % 6), (unsigned char)((c + 1) % 6), (unsigned char)(a % 6) };
        const void *list[3] = { &keys[0], &keys[1], &keys[2] };
        size_t sizes[3] = { 1, 1, (a & 8) ? 0 : 1 };
        void *users[3] = { (void *)(uintptr_t)keys[0], (void *)(uintptr_t)keys[1], (void *)(uintptr_t)keys[2] };
        rc = cucap_graph_set_warm(st.set, list, sizes, 3, set_step, users, &err);
        checked(rc, err, "cucap_graph_set_warm");
        break;
    }
    case 30:
        cucap_graph_set_get_stats(st.set, &stats);
        CHECK(!st.set || stats.hits + stats.misses == stats.runs, "hits %llu + misses %llu != runs %llu", stats.hits,
              stats.misses, stats.runs);
        rc = cucap_graph_set_get_key_stats(st.set, &key, 1, &ks, &err);
        checked(rc, err, "cucap_graph_set_get_key_stats");
        break;
    default: {   /* parameter blocks outside sets, some of them above 64 KiB (staged through pinned memory) */
        static unsigned char large[65536 + 4096];
        CUdeviceptr block = 0;
        size_t size = (a & 2) ? 65537 + c % 4096 : 1 + c % 8;
        if (a & 1) {
            rc = cucap_builder_params(st.b[c % BUILDERS], size, &block, &err);
            checked(rc, err, "cucap_builder_params");
        } else {
            large[0] = (unsigned char)c;
            rc = cucap_exec_launch_params(st.e[c % EXECS], size > sizeof values ? (const void *)large : &values, size,
                                          st.spare, &err);
            checked(rc, err, "cucap_exec_launch_params");
        }
        break;
    }
    }
}

/* ---------------------------------------------------------------- teardown */

static void teardown(struct input *in)
{
    unsigned order = next(in);
    int i, k;
    long n;

    set_rules("");
    if (!differential && sim_release)
        sim_release();   /* what is held finishes, so that everything can be given back */
    D.cuStreamSynchronize(st.spare);
    cucap_graph_set_destroy(st.set);
    st.set = NULL;
    /* builders in an order the input picks */
    for (k = 0; k < BUILDERS; k++) {
        i = (int)((order + (unsigned)k * 3) % BUILDERS);
        if (getenv("FUZZ_TRACE") && st.b[i])
            fprintf(stderr, "teardown: builder %d kind %d state %d, streams %ld\n", i,
                    cucap_builder_get_kind(st.b[i]), cucap_builder_get_state(st.b[i]), sim_live("stream"));
        cucap_builder_destroy(st.b[i]);
        st.b[i] = NULL;
    }
    for (i = 0; i < EXECS; i++) {
        cucap_exec_destroy(st.e[i]);
        st.e[i] = NULL;
    }
    for (i = 0; i < GRAPHS; i++) {
        cucap_graph_unref(st.g[i]);
        st.g[i] = NULL;
    }
    for (i = 0; i < PTRS; i++) {
        if (st.ptr[i].p) {
            CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
            D.cuThreadExchangeStreamCaptureMode(&m);
            D.cuMemFree(st.ptr[i].p);   /* whatever pool it came from, or none any more */
            D.cuThreadExchangeStreamCaptureMode(&m);
        }
        st.ptr[i].p = 0;
    }
    for (i = 0; i < POOLS; i++) {
        cucap_pool_close(st.pool[i], NULL);
        st.pool[i] = NULL;
    }
    D.cuStreamDestroy(st.spare);
    {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        D.cuThreadExchangeStreamCaptureMode(&m);
        D.cuMemFree(st.buffer);
        D.cuThreadExchangeStreamCaptureMode(&m);
    }
    cucap_release_cached();   /* the frees due run here */
    if (!st.fault_in_release) {
        n = atomic_load(&callbacks_given) - atomic_load(&callbacks_back);
        CHECK(n == 0, "%ld host callbacks' data not given back after everything was destroyed", n);
    }
    atomic_store(&callbacks_given, 0);
    atomic_store(&callbacks_back, 0);
    if (!st.fault_in_release)
        for (i = 0; i < KINDS; i++) {
            n = sim_live(kinds[i]) - st.baseline[i];
            CHECK(n == 0, "%ld more live %s(s) after everything was destroyed than before the input", n, kinds[i]);
        }
}

void fuzz_one(const uint8_t *data, size_t size)
{
    struct input in = { data, size };

    int i;

    memset(&st, 0, sizeof st);
    transcript[0] = '\0';
    transcript_len = 0;
    set_rules("");
    cucap_set_warning_handler(quiet, NULL);
    cucap_release_cached();
    for (i = 0; i < KINDS; i++)
        st.baseline[i] = sim_live(kinds[i]);
    {
        /* relaxed: a capture that an earlier input's faults left running must not refuse these */
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        D.cuThreadExchangeStreamCaptureMode(&m);
        if (D.cuMemAlloc(&st.buffer, 16 * 64) != CUDA_SUCCESS ||
            D.cuStreamCreate(&st.spare, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
            fprintf(stderr, "fuzz: setting up an input failed (%d)\n", (int)D.cuMemAlloc(&st.buffer, 16));
            abort();
        }
        D.cuThreadExchangeStreamCaptureMode(&m);
    }
    for (step = 0; in.left > 1 && step < 64; step++)
        run_step(&in);
    teardown(&in);
    cucap_set_warning_handler(NULL, NULL);
}
