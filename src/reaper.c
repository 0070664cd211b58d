/* The library's reaper thread (reaper.h). */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "reaper.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER;
static struct cucap_reaped *head, **tail = &head;
static int running, stopping;
static pthread_t thread;

static struct cucap_reaped *take(void)
{
    struct cucap_reaped *item = head;

    if (item && !(head = item->next))
        tail = &head;
    return item;
}

static void run(struct cucap_reaped *item)
{
    item->fn(item->data);
    free(item);
}

static void *reaper(void *unused)
{
    struct cucap_reaped *item;

    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head && !stopping)
            pthread_cond_wait(&queued, &lock);
        if (!(item = take()))
            break;
        pthread_mutex_unlock(&lock);
        run(item);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

void cucap_i_reap(struct cucap_reaped *item)
{
    item->next = NULL;
    pthread_mutex_lock(&lock);
    *tail = item;
    tail = &item->next;
    if (!running && !stopping && pthread_create(&thread, NULL, reaper, NULL) == 0)
        running = 1;
    pthread_cond_signal(&queued);
    pthread_mutex_unlock(&lock);
}

int cucap_i_reaper_stop(void)
{
    int joining;

    pthread_mutex_lock(&lock);
    if (running && pthread_equal(pthread_self(), thread)) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    joining = running;
    stopping = 1;
    pthread_cond_broadcast(&queued);
    pthread_mutex_unlock(&lock);
    if (joining)
        pthread_join(thread, NULL);   /* it runs what was queued before it stops */
    pthread_mutex_lock(&lock);
    running = 0;
    pthread_mutex_unlock(&lock);
    return 1;
}

unsigned long cucap_i_reaper_run_queued(void)
{
    struct cucap_reaped *item;
    unsigned long ran = 0;

    pthread_mutex_lock(&lock);
    while ((item = take()) != NULL) {
        pthread_mutex_unlock(&lock);
        run(item);
        ran++;
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return ran;
}

void cucap_i_reaper_resume(void)
{
    pthread_mutex_lock(&lock);
    stopping = 0;
    if (head && pthread_create(&thread, NULL, reaper, NULL) == 0)
        running = 1;
    pthread_mutex_unlock(&lock);
}
