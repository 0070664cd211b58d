/* The fault-injecting forwarding driver (see fault.h). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"
#include "fault.h"
#include "error-names.h"
#include "error.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_RULES 16

enum entry_index {
#define FAULT_WRAP(field, symbol, type, version, params, args) IDX_##field,
#include "fault-wrappers.h"
#undef FAULT_WRAP
    ENTRY_COUNT
};

static const char *const entry_names[ENTRY_COUNT] = {
#define FAULT_WRAP(field, symbol, type, version, params, args) #symbol,
#include "fault-wrappers.h"
#undef FAULT_WRAP
};

struct rule {
    int entry;                       /* -1: any entry point */
    long nth;
    CUresult code;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int rule_count;
/* calls are counted per entry point, every variant asked for (two
 * versions of one symbol) under the first's index */
static int symbol_of[ENTRY_COUNT];
static long calls[ENTRY_COUNT], total_calls, injected;
static int last_injected = -1;

static int parse_rules(const char *text)
{
    char buf[1024], *save = NULL, *item;
    struct rule parsed[MAX_RULES];
    int count = 0;

    if (!text)
        text = "";
    if (strlen(text) >= sizeof buf)
        return -1;
    strcpy(buf, text);
    for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *name = item, *n = strchr(item, ':'), *code, *end;
        struct rule r;
        int i;

        if (!n || !(code = strchr(n + 1, ':')) || count == MAX_RULES)
            return -1;
        *n++ = '\0';
        *code++ = '\0';
        r.entry = -1;
        if (strcmp(name, "*") != 0) {
            for (i = 0; i < ENTRY_COUNT && strcmp(entry_names[i], name) != 0; i++)
                ;
            if (i == ENTRY_COUNT)
                return -1;
            r.entry = i;
        }
        r.nth = strtol(n, &end, 10);
        if (*end || r.nth < 1)
            return -1;
        r.code = (CUresult)strtol(code, &end, 10);
        if (*end) {
            for (i = 0; i < 1000 && !(cucap_i_result_name((CUresult)i) &&
                                      !strcmp(cucap_i_result_name((CUresult)i), code)); i++)
                ;
            if (i == 1000)
                return -1;
            r.code = (CUresult)i;
        }
        parsed[count++] = r;
    }
    memcpy(rules, parsed, sizeof parsed);
    rule_count = count;
    memset(calls, 0, sizeof calls);
    total_calls = injected = 0;
    last_injected = -1;
    return 0;
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
/* CUDAFAULT_SLOW_MS: a call forwarded that took longer is reported on
 * stderr with the stack that made it (a call that waited for the GPU). */
static double slow_ms = -1;
static int trace_calls;              /* CUDAFAULT_TRACE: each call on stderr as it returns */
/* CUDAFAULT_TIMES: each entry point's calls and the time spent in the
 * driver under them, printed on stderr at exit, most time first (where a
 * library call's time goes on the real driver). */
static double spent_ms[ENTRY_COUNT];
static int print_times_at_exit;

__attribute__((destructor)) static void print_times(void)
{
    int order[ENTRY_COUNT], i, j, t;

    if (!print_times_at_exit)
        return;
    for (i = 0; i < ENTRY_COUNT; i++)
        order[i] = i;
    for (i = 1; i < ENTRY_COUNT; i++)
        for (j = i; j > 0 && spent_ms[order[j]] > spent_ms[order[j - 1]]; j--)
            t = order[j], order[j] = order[j - 1], order[j - 1] = t;
    fprintf(stderr, "cudafault: %-40s %10s %12s %10s\n", "entry point", "calls", "ms", "us a call");
    for (i = 0; i < ENTRY_COUNT && calls[order[i]]; i++)
        fprintf(stderr, "cudafault: %-40s %10ld %12.3f %10.3f\n", entry_names[order[i]], calls[order[i]],
                spent_ms[order[i]], spent_ms[order[i]] * 1e3 / calls[order[i]]);
}

static void forget_watchdog_in_child(void);

static void read_environment(void)
{
    const char *slow = getenv("CUDAFAULT_SLOW_MS"), *times = getenv("CUDAFAULT_TIMES"), *trace = getenv("CUDAFAULT_TRACE");
    int i, j;

    for (i = 0; i < ENTRY_COUNT; i++)
        for (j = symbol_of[i] = i; j-- > 0;)
            if (!strcmp(entry_names[j], entry_names[i]))
                symbol_of[i] = j;

    if (slow && *slow)
        slow_ms = strtod(slow, NULL);
    if (times && *times && strcmp(times, "0") != 0) {
        if (slow_ms < 0)
            slow_ms = 1e300;   /* time every call; report none as slow */
        print_times_at_exit = 1;
    }
    if (trace && *trace && strcmp(trace, "0") != 0) {
        trace_calls = 1;
        if (slow_ms < 0)
            slow_ms = 1e300;
    }
    if (slow_ms >= 0)
        pthread_atfork(NULL, NULL, forget_watchdog_in_child);
    if (parse_rules(getenv("CUDAFAULT_RULES")) != 0)
        fprintf(stderr, "cudafault: ignoring malformed CUDAFAULT_RULES\n");
}

/* Count the call; CUDA_SUCCESS lets it through. */
static CUresult fault_check(int entry)
{
    CUresult rc = CUDA_SUCCESS;
    long nth, all;
    int i;

    pthread_once(&env_once, read_environment);
    pthread_mutex_lock(&lock);
    entry = symbol_of[entry];
    nth = ++calls[entry];
    all = ++total_calls;
    for (i = 0; i < rule_count; i++)
        if ((rules[i].entry == entry && rules[i].nth == nth) || (rules[i].entry == -1 && rules[i].nth == all)) {
            rc = rules[i].code;
            injected++;
            last_injected = entry;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}


static double ms_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Under CUDAFAULT_SLOW_MS, a watchdog reports a call still running after
 * that long (a call that never returns: a hang), and a process whose
 * threads made no call for that long while one of its threads stays in
 * the library (which is then waiting on something else than the driver). */
#define WATCHED_THREADS 256
static struct {
    pthread_t thread;
    int entry;                       /* -1: in no call */
    double since;
    int reported;
} watched[WATCHED_THREADS];
static int watched_count, watchdog_running;
static __thread int my_watch = -1;
static double last_return_ms;
static int last_return_entry = -1;

static double ms_now(void);

static void *watchdog(void *unused)
{
    int quiet_reported = 0, i;

    (void)unused;
    for (;;) {
        struct timespec pause = { 0, 250 * 1000 * 1000 };
        double now;
        nanosleep(&pause, NULL);
        now = ms_now();
        pthread_mutex_lock(&lock);
        for (i = 0; i < watched_count; i++)
            if (watched[i].entry >= 0 && !watched[i].reported && now - watched[i].since > slow_ms) {
                fprintf(stderr, "cudafault: %s still running after %.0f ms on thread %lu\n",
                        entry_names[watched[i].entry], now - watched[i].since, (unsigned long)watched[i].thread);
                watched[i].reported = 1;
            }
        if (last_return_entry >= 0 && now - last_return_ms > slow_ms && !quiet_reported) {
            fprintf(stderr, "cudafault: no driver call returned for %.0f ms (the last: %s)\n", now - last_return_ms,
                    entry_names[last_return_entry]);
            quiet_reported = 1;
        } else if (now - last_return_ms <= slow_ms) {
            quiet_reported = 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void forget_watchdog_in_child(void)
{
    watchdog_running = 0;
    watched_count = 0;
    my_watch = -1;
}

static void call_began(int entry, double t0)
{
    pthread_t t;

    pthread_mutex_lock(&lock);
    if (!watchdog_running && slow_ms < 1e299 && pthread_create(&t, NULL, watchdog, NULL) == 0) {
        pthread_detach(t);
        watchdog_running = 1;
    }
    if (my_watch < 0 && watched_count < WATCHED_THREADS) {
        my_watch = watched_count++;
        watched[my_watch].thread = pthread_self();
    }
    if (my_watch >= 0) {
        watched[my_watch].entry = entry;
        watched[my_watch].since = t0;
        watched[my_watch].reported = 0;
    }
    pthread_mutex_unlock(&lock);
}

static void call_ended(int entry, double t1, double ms)
{
    pthread_mutex_lock(&lock);
    spent_ms[symbol_of[entry]] += ms;
    if (my_watch >= 0)
        watched[my_watch].entry = -1;
    last_return_ms = t1;
    last_return_entry = entry;
    if (trace_calls)
        fprintf(stderr, "cudafault: thread %d %s %.3f ms\n", my_watch, entry_names[entry], ms);
    pthread_mutex_unlock(&lock);
}

static void report_slow(int entry, double ms)
{
    void *frames[24];
    int n = backtrace(frames, 24);

    fprintf(stderr, "cudafault: %s took %.1f ms, called from:\n", entry_names[entry], ms);
    backtrace_symbols_fd(frames, n, 2);
}

#define FAULT_WRAP(field, symbol, type, version, params, args)                  \
    static type real_##field;                                                   \
    static CUresult CUDAAPI fault_##field params                                \
    {                                                                           \
        CUresult rc = fault_check(IDX_##field);                                 \
        double t0, ms;                                                          \
        if (rc != CUDA_SUCCESS)                                                 \
            return rc;                                                          \
        if (slow_ms < 0)                                                        \
            return real_##field args;                                           \
        t0 = ms_now();                                                          \
        call_began(IDX_##field, t0);                                            \
        rc = real_##field args;                                                 \
        ms = ms_now() - t0;                                                     \
        call_ended(IDX_##field, t0 + ms, ms);                                   \
        if (ms > slow_ms)                                                       \
            report_slow(IDX_##field, ms);                                       \
        return rc;                                                              \
    }
#include "fault-wrappers.h"
#undef FAULT_WRAP

/* ---------------------------------------------------------------- forwarding */

static PFN_cuGetProcAddress_v12000 real_get_proc;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_real_driver(void)
{
    const char *path = getenv("CUDAFAULT_DRIVER");
    void *h;

    if (!path || !*path)
        path = "libcuda.so.1";
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
    real_get_proc = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    const char *symbol_name;
    CUresult rc;

    pthread_once(&load_once, load_real_driver);
    if (!real_get_proc)
        return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    rc = real_get_proc(symbol, pfn, version, flags, status);
    if (rc != CUDA_SUCCESS || !symbol || !pfn || !*pfn)
        return rc;
    symbol_name = symbol;
    /* wrap the variants the library and the tests ask for, at the version
     * they ask for them; error texts pass untouched */
#define FAULT_WRAP(field, symbol, type, at, params, args)                                           \
    if (!strcmp(symbol_name, #symbol) && strcmp(#symbol, "cuGetErrorName") &&                       \
        strcmp(#symbol, "cuGetErrorString") && (version == (at) || !strcmp(#symbol, "cuDriverGetVersion"))) { \
        pthread_mutex_lock(&lock);                                                                  \
        real_##field = (type)*pfn;                                                                  \
        pthread_mutex_unlock(&lock);                                                                \
        *pfn = (void *)fault_##field;                                                               \
        return rc;                                                                                  \
    }
#include "fault-wrappers.h"
#undef FAULT_WRAP
    return rc;
}

/* ---------------------------------------------------------------- test hooks */

EXPORT int cudafault_set_rules(const char *text);
EXPORT long cudafault_calls(const char *name);
EXPORT long cudafault_injected(void);
EXPORT const char *cudafault_last_injected(void);

EXPORT const char *cudafault_last_injected(void)
{
    const char *name;

    pthread_mutex_lock(&lock);
    name = last_injected >= 0 ? entry_names[last_injected] : NULL;
    pthread_mutex_unlock(&lock);
    return name;
}

EXPORT int cudafault_set_rules(const char *text)
{
    int rc;

    pthread_once(&env_once, read_environment);
    pthread_mutex_lock(&lock);
    rc = parse_rules(text);
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT long cudafault_calls(const char *name)
{
    long n = -1;
    int i;

    pthread_once(&env_once, read_environment);
    pthread_mutex_lock(&lock);
    if (!name || !strcmp(name, "*"))
        n = total_calls;
    for (i = 0; name && i < ENTRY_COUNT && n < 0; i++)
        if (!strcmp(entry_names[i], name))
            n = calls[i];
    pthread_mutex_unlock(&lock);
    return n;
}

EXPORT long cudafault_injected(void)
{
    long n;

    pthread_mutex_lock(&lock);
    n = injected;
    pthread_mutex_unlock(&lock);
    return n;
}
