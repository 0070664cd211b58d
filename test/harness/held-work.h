/* Work held in flight, on both back ends: a gate a host function or host
 * node reaches, which holds its stream (and everything behind it) until
 * the test opens it.  On the GPU a host function that waits until then,
 * or 10 s (then timed_out: something waited for the stream's work); on
 * the simulator its held-work model's gate (cudasim_gate), whose
 * cudasim_held_waits counts every call that would have waited. */
#ifndef CUCAPTURE_TEST_HELD_WORK_H
#define CUCAPTURE_TEST_HELD_WORK_H

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* A host function that holds its stream until the test opens it, or 10 s
 * have passed (then timed_out: something waited for the stream's work). */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open, timed_out;
};

static inline void CUDA_CB hold_the_stream(void *p)
{
    struct gate *g = p;
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->lock);
    while (!g->open && !g->timed_out)
        if (pthread_cond_timedwait(&g->cond, &g->lock, &until))
            g->timed_out = 1;
    pthread_mutex_unlock(&g->lock);
}

static inline void open_gate(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* A gate at the end of every step: on the GPU a host node that waits
 * until the test opens it (or 10 s pass); on the simulator its held-work
 * model's gate (cudasim_gate), which holds the launch's stream, and
 * everything behind it, in flight until cudasim_release, and counts every
 * call that would wait for it on the host. */
typedef void (*sim_release_fn)(void);
typedef long (*sim_held_waits_fn)(const char **last_call);

struct held {
    struct gate gpu;
    CUhostFn fn;
    void *data;
};

static inline void held_init(struct held *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->gpu.lock, NULL);
    pthread_cond_init(&h->gpu.cond, NULL);
    h->fn = on_simulator() ? (CUhostFn)sim_hook("cudasim_gate") : hold_the_stream;
    h->data = &h->gpu;
}

static inline void held_release(struct held *h)
{
    if (on_simulator())
        ((sim_release_fn)sim_hook("cudasim_release"))();
    else
        open_gate(&h->gpu);
}

/* Calls that waited for held work, by the simulator's count (the last
 * one's name in *call); on the GPU the gate's timeout tells instead. */
static inline long held_waits(const char **call)
{
    *call = NULL;
    return on_simulator() ? ((sim_held_waits_fn)sim_hook("cudasim_held_waits"))(call) : 0;
}

#endif
