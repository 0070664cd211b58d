/* Safety nets of the thread programs: a crash (inside the driver, most
 * often) prints its frames as TAP comments before the process dies, and a
 * hang ends the program with a bail-out, so that the log says where.
 * Needs _GNU_SOURCE (dladdr) before the first include. */
#ifndef CUCAPTURE_TEST_CRASH_REPORT_H
#define CUCAPTURE_TEST_CRASH_REPORT_H

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

/* The calling thread's frames as TAP comments, each as file+offset so
 * that addr2line can name it on another machine. */
static void print_frames(const char *what)
{
    void *frames[32];
    int n = backtrace(frames, 32), i;
    long tid = syscall(SYS_gettid);
    char line[512];

    for (i = 0; i < n; i++) {
        Dl_info info;
        int len;
        if (dladdr(frames[i], &info) && info.dli_fname)
            len = snprintf(line, sizeof line, "# %s, thread %ld, frame %d: %s+%#lx (%s)\n", what, tid, i,
                           info.dli_fname, (unsigned long)((char *)frames[i] - (char *)info.dli_fbase),
                           info.dli_sname ? info.dli_sname : "?");
        else
            len = snprintf(line, sizeof line, "# %s, thread %ld, frame %d: %p\n", what, tid, i, frames[i]);
        if (len > 0)
            (void)!write(1, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    }
}

/* A crash inside the driver is this program's finding: say where. */
static void crashed(int sig)
{
    print_frames("crash");
    signal(sig, SIG_DFL);
    raise(sig);
}

static void hung(int sig)
{
    (void)sig;
    print_frames("hang");
}

/* Every other thread of the process prints where it stands. */
static void report_every_thread(void)
{
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *t;
    long me = syscall(SYS_gettid);

    if (!tasks)
        return;
    signal(SIGUSR2, hung);
    while ((t = readdir(tasks)) != NULL) {
        long tid = atol(t->d_name);
        if (tid > 0 && tid != me) {
            syscall(SYS_tgkill, (long)getpid(), tid, SIGUSR2);
            usleep(100000);   /* one thread's frames at a time */
        }
    }
    closedir(tasks);
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
            fflush(stdout);
            report_every_thread();
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
