/* Executable graphs whose destroy is left until their launches are done
 * (see deferred-destroy.h).  A list under a mutex: a destroy or a sweep
 * takes the entries whose event is reached out of it, then destroys them
 * with the lock released. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "context-hold.h"
#include "deferred-destroy.h"
#include "driver.h"
#include "error.h"
#include "reaper.h"

struct waiting_exec {
    CUgraphExec exec;
    CUcontext ctx;
    CUevent done;
    struct cucap_reaped *owned;
    struct waiting_exec *next;
};

static pthread_mutex_t waiting_lock = PTHREAD_MUTEX_INITIALIZER;
static struct waiting_exec *waiting;
static atomic_int waiting_count;   /* read without the lock by a sweep with nothing to do */

/* Whether done is reached (or can never be: an error, warned).  The
 * caller is in done's context. */
static int reached(CUevent done, const char *caller)
{
    CUresult rc = cucap_i_drv.cuEventQuery(done);

    if (rc == CUDA_ERROR_NOT_READY)
        return 0;
    if (rc != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuEventQuery failed on the event behind an executable graph's last launch; destroying "
                     "the graph now: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    return 1;
}

/* Destroy exec and done, in ctx (the caller is in ctx), and give owned
 * back. */
static void destroy_both(CUgraphExec exec, CUevent done, struct cucap_reaped *owned, const char *caller)
{
    struct cucap_reaped *next;
    CUresult rc;

    if ((rc = cucap_i_drv.cuGraphExecDestroy(exec)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuGraphExecDestroy failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    if ((rc = cucap_i_drv.cuEventDestroy(done)) != CUDA_SUCCESS)
        cucap_i_warn(rc, "%s: cuEventDestroy failed: " CUCAP_I_RESULT_FMT, caller, CUCAP_I_RESULT_ARGS(rc));
    for (; owned; owned = next) {
        next = owned->next;
        owned->next = NULL;
        cucap_i_reap(owned);
    }
}

void cucap_i_exec_destroy_when_done(CUgraphExec exec, CUcontext ctx, CUevent done, struct cucap_reaped *owned,
                                    const char *caller)
{
    struct cucap_work_scope w;
    struct waiting_exec *e;
    int now;

    cucap_i_work_enter_quietly(&w, ctx, caller);
    if ((now = reached(done, caller)) || !(e = malloc(sizeof *e))) {
        if (!now)
            cucap_i_warn(CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory; destroying an executable graph now, which "
                         "may wait for its launches, and its host callback data kept", caller);
        destroy_both(exec, done, now ? owned : NULL, caller);
    } else {
        *e = (struct waiting_exec){ exec, ctx, done, owned, NULL };
        pthread_mutex_lock(&waiting_lock);
        e->next = waiting;
        waiting = e;
        waiting_count++;
        pthread_mutex_unlock(&waiting_lock);
    }
    cucap_i_work_leave_quietly(&w, caller);
}

void cucap_i_deferred_destroys_sweep(const char *caller)
{
    struct waiting_exec **at, *e, *done = NULL;
    struct cucap_work_scope w;

    if (!atomic_load_explicit(&waiting_count, memory_order_relaxed))
        return;   /* one handed over meanwhile waits for the next sweep */
    pthread_mutex_lock(&waiting_lock);
    for (at = &waiting; (e = *at) != NULL;) {
        int ready;
        cucap_i_work_enter_quietly(&w, e->ctx, caller);
        ready = reached(e->done, caller);
        cucap_i_work_leave_quietly(&w, caller);
        if (ready) {
            *at = e->next;
            e->next = done;
            done = e;
            waiting_count--;
        } else {
            at = &e->next;
        }
    }
    pthread_mutex_unlock(&waiting_lock);
    while ((e = done) != NULL) {
        done = e->next;
        cucap_i_work_enter_quietly(&w, e->ctx, caller);
        destroy_both(e->exec, e->done, e->owned, caller);
        cucap_i_work_leave_quietly(&w, caller);
        free(e);
    }
}
