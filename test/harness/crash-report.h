/* Safety nets of the thread programs: a crash (inside the driver, most
 * often) prints its frames as TAP comments before the process dies, and a
 * hang ends the program with a bail-out, so that the log says where.
 * Needs _GNU_SOURCE (dladdr) before the first include. */
#ifndef CUCAPTURE_TEST_CRASH_REPORT_H
#define CUCAPTURE_TEST_CRASH_REPORT_H

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

/* A crash inside the driver is this program's finding: say where. */
static void crashed(int sig)
{
    void *frames[32];
    int n = backtrace(frames, 32), i;
    char line[512];

    for (i = 0; i < n; i++) {
        Dl_info info;
        int len;
        if (dladdr(frames[i], &info) && info.dli_fname)
            len = snprintf(line, sizeof line, "# crash frame %d: %s+%#lx (%s)\n", i, info.dli_fname,
                           (unsigned long)((char *)frames[i] - (char *)info.dli_fbase),
                           info.dli_sname ? info.dli_sname : "?");
        else
            len = snprintf(line, sizeof line, "# crash frame %d: %p\n", i, frames[i]);
        if (len > 0)
            (void)!write(1, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static inline void crash_report_install(void)
{
    signal(SIGSEGV, crashed);
    signal(SIGBUS, crashed);
}

/* A program whose counter stops moving for `seconds` is hung: it says so
 * as a TAP bail-out and ends, so that a hang inside the driver costs one
 * test and not the whole run. */
struct progress_watch {
    atomic_long *counter;
    int seconds;
};

static void *progress_watchdog(void *p)
{
    struct progress_watch *w = p;
    long last = -1;
    int still = 0;

    for (;;) {
        long now = atomic_load(w->counter);
        sleep(1);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still >= w->seconds) {
            printf("Bail out! no progress for %d s: a hang (inside the driver, as a rule)\n", w->seconds);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

static inline void progress_watch_start(atomic_long *counter, int seconds)
{
    static struct progress_watch watch;
    pthread_t t;

    watch.counter = counter;
    watch.seconds = seconds;
    if (pthread_create(&t, NULL, progress_watchdog, &watch) == 0)
        pthread_detach(t);
}

#endif
