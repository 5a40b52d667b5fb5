/* test_callsite.c - call-site ids and their cached stacks. */
#include <config.h>
#include "callsite.h"
#include "unit_main.h"
#include <string.h>

__attribute__((noinline)) static uint32_t site_here(void) { return ccs_site_id(__builtin_return_address(0)); }

__attribute__((noinline)) static uint32_t from_a(void) { return site_here(); }
__attribute__((noinline)) static uint32_t from_b(void) { return site_here(); }

START_TEST(same_site_same_id)
{
    uint32_t a1 = 0, a2 = 0;
    /* volatile: one call instruction, not a loop unrolled into two sites */
    for (volatile int i = 0; i < 2; i++) {
        uint32_t x = from_a();
        if (i == 0)
            a1 = x;
        else
            a2 = x;
    }
    uint32_t b = from_b();
    ck_assert_uint_ne(a1, 0);
    ck_assert_uint_eq(a1, a2);
    ck_assert_uint_ne(a1, b);
    ck_assert_uint_eq(ccs_site_id(NULL), 0);
}
END_TEST

START_TEST(stack_is_cached)
{
    uint32_t id = from_a();
    void *pcs[CCS_MAX_STACK];
    uint32_t depth = 0;
    ck_assert_int_eq(ccs_site_get(id, pcs, &depth), 0);
    ck_assert_uint_ge(depth, 1);
#ifdef HAVE_LIBUNWIND
    ck_assert_uint_ge(depth, 2); /* from_a's caller is in the stack too */
#endif
    char buf[512];
    ccs_site_symbolize(pcs[0], buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "test_callsite"));
    ck_assert_int_eq(ccs_site_get(0, pcs, &depth), -1);
    ck_assert_int_eq(ccs_site_get(999999, pcs, &depth), -1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("callsite");
    TCase *t = tcase_create("sites");
    tcase_add_test(t, same_site_same_id);
    tcase_add_test(t, stack_is_cached);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
