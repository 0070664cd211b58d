/* The heap bytes that the code linked into a test binary holds: the
 * library's internal objects and the test's own, not those of shared
 * libraries (Criterion, the driver).  The test links with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free; include
 * this header in one file of it. */
#ifndef CUCAPTURE_TEST_HEAP_COUNT_H
#define CUCAPTURE_TEST_HEAP_COUNT_H

#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void __wrap_free(void *p);

static atomic_long heap_count_bytes;

static void heap_count_add(void *p, long sign)
{
    if (p)
        atomic_fetch_add(&heap_count_bytes, sign * (long)malloc_usable_size(p));
}

void *__wrap_malloc(size_t size)
{
    void *p = __real_malloc(size);
    heap_count_add(p, 1);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = __real_calloc(n, size);
    heap_count_add(p, 1);
    return p;
}

void *__wrap_realloc(void *p, size_t size)
{
    size_t before = p ? malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, size);

    if (q || size == 0) {
        atomic_fetch_sub(&heap_count_bytes, (long)before);
        heap_count_add(q, 1);
    }
    return q;
}

void __wrap_free(void *p)
{
    heap_count_add(p, -1);
    __real_free(p);
}

/* Bytes allocated and not freed since the process started. */
static inline long heap_count(void)
{
    return atomic_load(&heap_count_bytes);
}

#endif
