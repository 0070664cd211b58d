/* The pointer map of the pools (src/ptr-set.c), alone: ownership, removal,
 * and memory that follows the live pointers. */
#include <criterion/criterion.h>

#include "ptr-set.h"

static const int pool_a, pool_b;

Test(ptr_set, an_address_belongs_to_its_last_owner)
{
    struct cucap_ptr_set set = { 0 };

    cr_assert_eq(cucap_i_ptr_set_add(&set, 0x1000, &pool_a), 0);
    cr_assert_eq(cucap_i_ptr_set_add(&set, 0x1000, &pool_b), 0, "the driver handed the address out again");
    cr_assert_eq(cucap_i_ptr_set_count(&set), 1);
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_a), -1, "another owner holds it");
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_b), 1);
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x1000, &pool_b), 0, "gone");
    cr_assert_eq(cucap_i_ptr_set_remove(&set, 0, &pool_b), 0, "0 is never an entry");
    cucap_i_ptr_set_clear(&set);
}

Test(ptr_set, forgetting_an_owner_leaves_the_others)
{
    struct cucap_ptr_set set = { 0 };
    CUdeviceptr p;

    for (p = 0x10000; p < 0x10000 + 100 * 256; p += 256)
        cr_assert_eq(cucap_i_ptr_set_add(&set, p, (p / 256) % 2 ? &pool_a : &pool_b), 0);
    cucap_i_ptr_set_remove_owner(&set, &pool_a);
    cr_assert_eq(cucap_i_ptr_set_count(&set), 50);
    for (p = 0x10000; p < 0x10000 + 100 * 256; p += 256)
        cr_assert_eq(cucap_i_ptr_set_remove(&set, p, &pool_b), (p / 256) % 2 ? 0 : 1);
    cr_assert_eq(cucap_i_ptr_set_footprint(&set), 0, "an empty map holds no memory");
}

Test(ptr_set, memory_follows_the_live_pointers)
{
    struct cucap_ptr_set set = { 0 };
    size_t peak;
    CUdeviceptr p;
    int i;

    for (p = 0x100000; p < 0x100000 + 10000 * 64; p += 64)
        cr_assert_eq(cucap_i_ptr_set_add(&set, p, &pool_a), 0);
    peak = cucap_i_ptr_set_footprint(&set);
    for (p = 0x100000; p < 0x100000 + 9990 * 64; p += 64)
        cr_assert_eq(cucap_i_ptr_set_remove(&set, p, &pool_a), 1);
    cr_assert_lt(cucap_i_ptr_set_footprint(&set), peak / 64, "10 live pointers keep %zu bytes",
                 cucap_i_ptr_set_footprint(&set));
    for (i = 0; i < 1000000; i++) {   /* at most one more live at a time */
        cr_assert_eq(cucap_i_ptr_set_add(&set, 0x900000 + (CUdeviceptr)(i % 7) * 64, &pool_b), 0);
        cr_assert_eq(cucap_i_ptr_set_remove(&set, 0x900000 + (CUdeviceptr)(i % 7) * 64, &pool_b), 1);
    }
    cr_assert_leq(cucap_i_ptr_set_footprint(&set), 64 * sizeof(struct cucap_ptr_slot),
                  "removed entries never pile up: %zu bytes", cucap_i_ptr_set_footprint(&set));
    cr_assert_eq(cucap_i_ptr_set_count(&set), 10);
    cucap_i_ptr_set_clear(&set);
}
