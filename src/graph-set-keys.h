/* The keys of a graph set (graph-set-keys.c): a hash table of entries,
 * one a key the set ever ran, and the list of those holding a graph, by
 * their last run.  The set's lock guards it all.  Internal. */
#ifndef CUCAP_I_GRAPH_SET_KEYS_H
#define CUCAP_I_GRAPH_SET_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "cucapture.h"

/* The most executable graphs of one key: its graph, and copies made for
 * runs on other streams while it is in flight (one executable graph
 * launched on several streams runs one launch at a time). */
#define KEY_EXECS_MAX 8

/* An executable graph of a key's step, and where its last launch went. */
struct key_exec {
    cucap_exec *exec;
    CUstream stream;                 /* of its last launch (NULL: none yet) */
    CUevent done;                    /* behind its last launch, once the key ran on two streams (NULL: none) */
};

struct entry {
    struct entry *next;              /* in its hash bucket */
    struct entry *newer, *older;     /* the list of entries with a graph, most recently run first */
    struct key_exec execs[KEY_EXECS_MAX];   /* the first exec_count; none: never made, retired, or failed */
    unsigned int exec_count, turn;   /* turn: the next to take when every one is in flight */
    int several_streams;             /* it ran on two streams: launches record their event */
    int no_copies;                   /* a copy's capture failed: none is tried until the key is retired */
    int capturing;                   /* a thread is making its graph, or a copy */
    size_t nodes, allocation_bytes, memory_nodes, footprint;   /* footprint: of each executable graph */
    double capture_us, instantiate_us;
    unsigned long long runs, last_run, retry_at;
    unsigned int failures;
    char reason[256], refusal[256];
    uint64_t hash;
    size_t key_size;
    unsigned char key[];
};

struct key_table {
    struct entry **buckets;
    size_t bucket_count, entry_count;
    struct entry *newest, *oldest;   /* the entries with a graph, most recently run first */
};

/* An empty table: 0, or -1 when out of memory. */
int cucap_i_keys_init(struct key_table *t);
/* The entry of key, or NULL. */
struct entry *cucap_i_keys_find(const struct key_table *t, const void *key, size_t size);
/* The entry of key, added (zeroed but for the key) when new; NULL when out of memory. */
struct entry *cucap_i_keys_find_or_add(struct key_table *t, const void *key, size_t size);
/* Every entry, one after another: NULL gives the first, NULL comes after the last. */
struct entry *cucap_i_keys_next(const struct key_table *t, const struct entry *e);
/* An entry out of the table (the caller frees it), or NULL when none is left;
 * then the table's own memory is freed. */
struct entry *cucap_i_keys_take(struct key_table *t);
/* Out of the list of entries with a graph, and in as its newest. */
void cucap_i_keys_unlink(struct key_table *t, struct entry *e);
void cucap_i_keys_link_newest(struct key_table *t, struct entry *e);

#endif
