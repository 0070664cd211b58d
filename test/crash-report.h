/* For the thread programs: a crash (inside the driver, most often) prints
 * its frames as TAP comments before the process dies, so that the log
 * says where.  Needs _GNU_SOURCE (dladdr) before the first include. */
#ifndef CUCAPTURE_TEST_CRASH_REPORT_H
#define CUCAPTURE_TEST_CRASH_REPORT_H

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
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

#endif
