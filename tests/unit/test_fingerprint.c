/* test_fingerprint.c - which fields enter a collective's fingerprint. */
#include "shim.h"
#include "unit_main.h"

START_TEST(deterministic_and_sensitive)
{
    uint64_t a = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
    ck_assert_uint_eq(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 101, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT64, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_MAX, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_REDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, 0));
    /* blocking and nonblocking collectives never match each other in MPI */
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, CCS_F_NONBLOCKING, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
}
END_TEST

START_TEST(irrelevant_fields_ignored)
{
    /* in-place or not, buffers, group depth: local choices */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLREDUCE, CCS_F_IN_PLACE, 8, CCS_DT_INT32, CCS_OP_SUM, -1),
                      ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, -1));
    /* the op of a non-reduction, the root of a rootless kind */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 1),
                      ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 1));
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLGATHER, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 3),
                      ccs_fingerprint(CCS_KIND_ALLGATHER, 0, 8, CCS_DT_INT32, CCS_OP_NONE, -1));
    /* v-variants: per-rank counts legitimately differ */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLGATHERV, 0, 3, CCS_DT_INT32, CCS_OP_NONE, -1),
                      ccs_fingerprint(CCS_KIND_ALLGATHERV, 0, 5, CCS_DT_INT32, CCS_OP_NONE, -1));
    /* a barrier carries nothing but its kind */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_BARRIER, 0, 0, CCS_DT_NONE, CCS_OP_NONE, -1),
                      ccs_fingerprint(CCS_KIND_BARRIER, 0, 7, CCS_DT_INT8, CCS_OP_SUM, 2));
}
END_TEST

START_TEST(root_matters_for_rooted)
{
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 0),
                      ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 1));
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_REDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 0),
                      ccs_fingerprint(CCS_KIND_REDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 2));
}
END_TEST

START_TEST(hash_bytes)
{
    ck_assert_uint_eq(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghij", 10, 1));
    ck_assert_uint_ne(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghik", 10, 1));
    ck_assert_uint_ne(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghij", 10, 2));
    ck_assert_uint_ne(ccs_hash_bytes("abc", 3, 0), ccs_hash_bytes("abc\0", 4, 0));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fingerprint");
    TCase *t = tcase_create("fields");
    tcase_add_test(t, deterministic_and_sensitive);
    tcase_add_test(t, irrelevant_fields_ignored);
    tcase_add_test(t, root_matters_for_rooted);
    tcase_add_test(t, hash_bytes);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
