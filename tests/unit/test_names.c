/* test_names.c - one call named for the logs (ccs_call_str, names.c): the
 * line desync's verdicts and NCCL's asynchronous errors print. */
#include "ccs_kinds.h"
#include "unit_main.h"
#include "trace_format.h"
#include <string.h>

static const char *str(unsigned kind, uint64_t count, unsigned dtype, unsigned op, int root, unsigned flags)
{
    static char buf[160];
    ccs_call_str(kind, count, dtype, op, root, flags, buf, sizeof buf);
    return buf;
}

START_TEST(collectives_with_their_arguments)
{
    ck_assert_str_eq(str(CCS_KIND_ALLREDUCE, 8, CCS_DT_FLOAT32, CCS_OP_SUM, -1, 0), "allreduce(count=8, float32, sum)");
    ck_assert_str_eq(str(CCS_KIND_REDUCE, 3, CCS_DT_INT64, CCS_OP_MAX, 2, CCS_F_NONBLOCKING),
                     "reduce(count=3, int64, max, root=2, nonblocking)");
    ck_assert_str_eq(str(CCS_KIND_BCAST, 4, CCS_DT_INT32, CCS_OP_NONE, 0, 0), "bcast(count=4, int32, root=0)");
    ck_assert_str_eq(str(CCS_KIND_ALLREDUCE, 1u << 20, CCS_DT_BFLOAT16, CCS_OP_AVG, -1,
                         CCS_F_DEFERRED | CCS_F_IN_PLACE),
                     "allreduce(count=1048576, bfloat16, avg, deferred)");
}
END_TEST

START_TEST(other_kinds_by_name_only)
{
    ck_assert_str_eq(str(CCS_KIND_BARRIER, 0, CCS_DT_NONE, CCS_OP_NONE, -1, 0), "barrier");
    ck_assert_str_eq(str(CCS_KIND_BARRIER, 0, CCS_DT_NONE, CCS_OP_NONE, -1, CCS_F_DEFERRED), "barrier(deferred)");
    ck_assert_str_eq(str(CCS_KIND_SEND, 5, CCS_DT_FLOAT64, CCS_OP_NONE, 1, 0), "send");
    ck_assert_str_eq(str(CCS_KIND_COMM_SPLIT, 0, CCS_DT_NONE, CCS_OP_NONE, -1, 0), "comm_split");
    ck_assert_str_eq(str(200, 0, CCS_DT_NONE, CCS_OP_NONE, -1, 0), "?");
}
END_TEST

START_TEST(cut_to_the_buffer)
{
    const char *full = "reduce(count=3, int64, max, root=2, nonblocking, deferred)";
    for (size_t n = 1; n <= strlen(full) + 1; n++) {
        char buf[80];
        memset(buf, 'x', sizeof buf);
        ccs_call_str(CCS_KIND_REDUCE, 3, CCS_DT_INT64, CCS_OP_MAX, 2, CCS_F_NONBLOCKING | CCS_F_DEFERRED, buf, n);
        ck_assert_uint_eq(strlen(buf), n - 1); /* terminated, as much as fits */
        ck_assert_int_eq(strncmp(buf, full, n - 1), 0);
        ck_assert_int_eq(buf[n], 'x'); /* nothing written past it */
    }
}
END_TEST

/* ccs_ranks_str: desync's verdicts and ccshim-audit print rank lists with it. */
START_TEST(ranks_as_ranges)
{
    int32_t r[] = {0, 2, 3, 4, 9};
    char b[64];
    ccs_ranks_str(r, 5, b, sizeof b);
    ck_assert_str_eq(b, "0,2-4,9");
    ccs_ranks_str(r, 0, b, sizeof b);
    ck_assert_str_eq(b, "");
    ccs_ranks_str(r, 5, b, 6);
    ck_assert_str_eq(b, "0...");
}
END_TEST

START_TEST(ranks_cut_at_a_range)
{
    /* 32 even ranks into the audit table's 64-byte column: cut after the
     * last whole entry that leaves room for "...". */
    int32_t r[32];
    for (int i = 0; i < 32; i++)
        r[i] = 2 * i;
    char b[64];
    memset(b, 'x', sizeof b);
    ccs_ranks_str(r, 32, b, sizeof b);
    ck_assert_str_eq(b, "0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40...");
    ck_assert_int_eq(b[sizeof b - 1], 'x'); /* nothing written past the terminator's room */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("names");
    TCase *t = tcase_create("call");
    tcase_add_test(t, collectives_with_their_arguments);
    tcase_add_test(t, other_kinds_by_name_only);
    tcase_add_test(t, cut_to_the_buffer);
    suite_add_tcase(s, t);
    t = tcase_create("ranks");
    tcase_add_test(t, ranks_as_ranges);
    tcase_add_test(t, ranks_cut_at_a_range);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
