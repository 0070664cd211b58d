/* The keys of a graph set (see graph-set-keys.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "graph-set-keys.h"

#define FIRST_BUCKETS 16

static uint64_t hash_of(const unsigned char *key, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i < size; i++)
        h = (h ^ key[i]) * 0x100000001b3ull;
    return h;
}

int cucap_i_keys_init(struct key_table *t)
{
    memset(t, 0, sizeof *t);
    if (!(t->buckets = calloc(FIRST_BUCKETS, sizeof *t->buckets)))
        return -1;
    t->bucket_count = FIRST_BUCKETS;
    return 0;
}

static struct entry *find_hashed(const struct key_table *t, const void *key, size_t size, uint64_t h)
{
    struct entry *e;

    for (e = t->buckets[h & (t->bucket_count - 1)]; e; e = e->next)
        if (e->hash == h && e->key_size == size && !memcmp(e->key, key, size))
            return e;
    return NULL;
}

struct entry *cucap_i_keys_find(const struct key_table *t, const void *key, size_t size)
{
    return find_hashed(t, key, size, hash_of(key, size));
}

static int grow(struct key_table *t)
{
    size_t count = t->bucket_count * 2, i;
    struct entry **buckets = calloc(count, sizeof *buckets);

    if (!buckets)
        return -1;
    for (i = 0; i < t->bucket_count; i++)
        while (t->buckets[i]) {
            struct entry *e = t->buckets[i];
            t->buckets[i] = e->next;
            e->next = buckets[e->hash & (count - 1)];
            buckets[e->hash & (count - 1)] = e;
        }
    free(t->buckets);
    t->buckets = buckets;
    t->bucket_count = count;
    return 0;
}

struct entry *cucap_i_keys_find_or_add(struct key_table *t, const void *key, size_t size)
{
    uint64_t h = hash_of(key, size);
    struct entry *e = find_hashed(t, key, size, h);

    if (e)
        return e;
    if (t->entry_count >= t->bucket_count && grow(t) != 0)
        return NULL;
    if (!(e = calloc(1, sizeof *e + size)))
        return NULL;
    e->hash = h;
    e->key_size = size;
    memcpy(e->key, key, size);
    e->next = t->buckets[h & (t->bucket_count - 1)];
    t->buckets[h & (t->bucket_count - 1)] = e;
    t->entry_count++;
    return e;
}

struct entry *cucap_i_keys_next(const struct key_table *t, const struct entry *e)
{
    size_t i = 0;

    if (e && e->next)
        return e->next;
    if (e)
        i = (e->hash & (t->bucket_count - 1)) + 1;
    for (; i < t->bucket_count; i++)
        if (t->buckets[i])
            return t->buckets[i];
    return NULL;
}

struct entry *cucap_i_keys_take(struct key_table *t)
{
    struct entry *e;
    size_t i;

    for (i = 0; i < t->bucket_count; i++)
        if ((e = t->buckets[i]) != NULL) {
            t->buckets[i] = e->next;
            t->entry_count--;
            return e;
        }
    free(t->buckets);
    memset(t, 0, sizeof *t);
    return NULL;
}

void cucap_i_keys_unlink(struct key_table *t, struct entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    e->newer = e->older = NULL;
}

void cucap_i_keys_link_newest(struct key_table *t, struct entry *e)
{
    e->older = t->newest;
    e->newer = NULL;
    if (t->newest)
        t->newest->newer = e;
    else
        t->oldest = e;
    t->newest = e;
}
