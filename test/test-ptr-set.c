/* The pointer map of the pools (src/ptr-set.c), alone: ownership, removal,
 * and memory that follows the live pointers; and the pools' striped,
 * thread-safe table of them (src/live-pointers.c). */
#include <criterion/criterion.h>
#include <pthread.h>

#include "heap-count.h"
#include "live-pointers.h"
#include "ptr-set.h"

static const int pool_a, pool_b;

Test(ptr_set, an_address_belongs_to_its_last_owner)
{
    struct cucap_ptr_set set = { 0 };
    const long base = heap_count();

    cr_assert_eq(cucap_i_ptr_set_add(&set, 0x1000, &pool_a, 0), 0);
    cr_assert_eq(cucap_i_ptr_set_add(&set, 0x1000, &pool_b, 0), 0, "the driver handed the address out again");
    cr_assert_eq(set.count, 1);
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_a), -1, "another owner holds it");
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_b), 1);
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_b), 0, "gone");
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0, &pool_b), 0, "0 is never an entry");
    cr_assert_eq(heap_count() - base, 0);
}

Test(ptr_set, forgetting_an_owner_leaves_the_others)
{
    struct cucap_ptr_set set = { 0 };
    const long base = heap_count();
    CUdeviceptr p;

    for (p = 0x10000; p < 0x10000 + 100 * 256; p += 256)
        cr_assert_eq(cucap_i_ptr_set_add(&set, p, (p / 256) % 2 ? &pool_a : &pool_b, 0), 0);
    cucap_i_ptr_set_remove_owner(&set, &pool_a);
    cr_assert_eq(set.count, 50);
    for (p = 0x10000; p < 0x10000 + 100 * 256; p += 256)
        cr_assert_eq(cucap_i_ptr_set_remove(&set, p, &pool_b), (p / 256) % 2 ? 0 : 1);
    cr_assert_eq(heap_count() - base, 0, "an empty map holds no memory");
}

Test(ptr_set, memory_follows_the_live_pointers)
{
    struct cucap_ptr_set set = { 0 };
    const long base = heap_count();
    long peak;
    CUdeviceptr p;
    int i;

    for (p = 0x100000; p < 0x100000 + 10000 * 64; p += 64)
        cr_assert_eq(cucap_i_ptr_set_add(&set, p, &pool_a, 0), 0);
    peak = heap_count() - base;
    for (p = 0x100000; p < 0x100000 + 9990 * 64; p += 64)
        cr_assert_eq(cucap_i_ptr_set_remove(&set, p, &pool_a), 1);
    cr_assert_lt(heap_count() - base, peak / 64, "10 live pointers keep %ld bytes", heap_count() - base);
    for (i = 0; i < 1000000; i++) {   /* at most one more live at a time */
        cr_assert_eq(cucap_i_ptr_set_add(&set, 0x900000 + (CUdeviceptr)(i % 7) * 64, &pool_b, 0), 0);
        cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x900000 + (CUdeviceptr)(i % 7) * 64, &pool_b), 1);
    }
    cr_assert_leq(heap_count() - base, (long)(64 * sizeof(struct cucap_ptr_slot) + 2 * sizeof(size_t)),
                  "removed entries never pile up: %ld bytes", heap_count() - base);
    cr_assert_eq(set.count, 10);
    cucap_i_ptr_set_remove_owner(&set, &pool_a);
    cr_assert_eq(heap_count() - base, 0, "an emptied map holds %ld bytes", heap_count() - base);
}

/* Random adds and removes against a plain array: every answer of the map
 * is the array's (removal empties slots or marks them, and probes must
 * still find what lies past them). */
Test(ptr_set, agrees_with_a_plain_array_under_random_use)
{
    enum { ADDRESSES = 96 };
    const void *owner_of[ADDRESSES] = { NULL };
    const void *owners[] = { &pool_a, &pool_b };
    struct cucap_ptr_set set = { 0 };
    const long base = heap_count();
    unsigned long long x = 0x2545f4914f6cdd1dull;
    size_t live = 0;
    int i;

    for (i = 0; i < 2000000; i++) {
        int a, o, expect;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        a = (int)(x % ADDRESSES);
        o = (int)(x >> 32) & 1;
        if ((x >> 40) % 3 == 0) {
            cr_assert_eq(cucap_i_ptr_set_add(&set, 0x200000 + (CUdeviceptr)a * 512, owners[o], 0), 0);
            live += !owner_of[a];
            owner_of[a] = owners[o];
        } else {
            expect = !owner_of[a] ? 0 : owner_of[a] == owners[o] ? 1 : -1;
            cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x200000 + (CUdeviceptr)a * 512, owners[o]), expect,
                         "step %d, address %d", i, a);
            if (expect == 1) {
                owner_of[a] = NULL;
                live--;
            }
        }
        cr_assert_eq(set.count, live);
    }
    cucap_i_ptr_set_remove_owner(&set, &pool_a);
    cucap_i_ptr_set_remove_owner(&set, &pool_b);
    cr_assert_eq(set.count, 0);
    cr_assert_eq(heap_count() - base, 0, "an emptied map holds %ld bytes", heap_count() - base);
}

/* A map of a few pointers lives in itself: no heap memory, however often
 * they come and go. */
Test(ptr_set, a_few_pointers_take_no_heap_memory)
{
    struct cucap_ptr_set set = { 0 };
    const long base = heap_count();
    int i, j;

    for (i = 0; i < 100000; i++) {
        for (j = 0; j < CUCAP_PTR_SET_SMALL / 2; j++)
            cr_assert_eq(cucap_i_ptr_set_add(&set, 0x300000 + (CUdeviceptr)(i % 5 + j) * 256, &pool_a, 0), 0);
        cr_assert_eq(heap_count() - base, 0, "%ld bytes", heap_count() - base);
        for (j = 0; j < CUCAP_PTR_SET_SMALL / 2; j++)
            cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x300000 + (CUdeviceptr)(i % 5 + j) * 256, &pool_a), 1);
    }
    cr_assert_eq(set.count, 0);
    cr_assert_eq(heap_count() - base, 0);
}

/* The pools' striped table from many threads at once: each thread's
 * pointers are its own, found, and forgotten; nothing is held after. */
#define LIVE_THREADS 8
static void *live_worker(void *arg)
{
    CUdeviceptr base = 0x10000000 * (CUdeviceptr)((size_t)arg + 1);
    const void *owner = (const char *)&pool_a + (size_t)arg;
    long bad = 0;
    int i, j;

    for (i = 0; i < 20000; i++) {
        for (j = 0; j < 20; j++)
            bad += cucap_i_live_add(base + (CUdeviceptr)(i % 50 + j) * 4096, owner, 0) != 0;
        for (j = 0; j < 20; j++)
            bad += cucap_i_live_remove(base + (CUdeviceptr)(i % 50 + j) * 4096, owner) != 1;
    }
    return (void *)bad;
}

Test(live_pointers, many_threads_each_find_their_own)
{
    pthread_t t[LIVE_THREADS];
    const long base = heap_count();
    size_t i;

    for (i = 0; i < LIVE_THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, live_worker, (void *)i), 0);
    for (i = 0; i < LIVE_THREADS; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        cr_assert_eq((long)bad, 0, "thread %zu: %ld wrong answers", i, (long)bad);
    }
    cr_assert_eq(heap_count() - base, 0, "the stripes hold %ld bytes for no live pointer", heap_count() - base);
    cr_assert_eq(cucap_i_live_add(0x5000, &pool_a, 0), 0);
    cr_assert_eq(cucap_i_live_remove(0x5000, &pool_b), -1, "another owner holds it");
    cucap_i_live_forget_owner(&pool_a);
    cr_assert_eq(cucap_i_live_remove(0x5000, &pool_a), 0, "forgotten with its owner");
}
