/* The library's reaper thread (reaper.c): frees handed over by threads
 * where no CUDA call may be made (a user object's destructor, a host
 * function), run on a thread of the library's.  Internal. */
#ifndef CUCAP_I_REAPER_H
#define CUCAP_I_REAPER_H

/* One free to run: the caller allocates it with the data it frees and
 * gives it up here; the reaper calls fn(data), then free(item). */
struct cucap_reaped {
    struct cucap_reaped *next;
    void (*fn)(void *data);
    void *data;
};

/* Queue item for the reaper thread, started on first need; no CUDA call,
 * no wait: safe in a driver callback.  When no thread can be started, the
 * item waits for the next call that can start one, or for
 * cucap_i_reaper_drain. */
void cucap_i_reap(struct cucap_reaped *item);
/* cucap_release_cached: stop the reaper thread, after what it runs now
 * (1), or 0 on the reaper thread itself (a free that releases); until
 * cucap_i_reaper_resume, frees queue and run only in
 * cucap_i_reaper_run_queued, so none runs beside the release. */
int cucap_i_reaper_stop(void);
/* Run what is queued, on the calling thread: how many ran. */
unsigned long cucap_i_reaper_run_queued(void);
/* After cucap_i_reaper_stop's 1: frees run on a thread again. */
void cucap_i_reaper_resume(void);

#endif
