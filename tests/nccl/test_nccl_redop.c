/* test_nccl_redop.c - the table of NCCL PreMulSum operators (src/nccl/nccl_redop.c). */
#include "nccl_redop.h"
#include "unit_main.h"
#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <stdint.h>

static struct ccs_nccl_premul host_op(uintptr_t comm, int op, double scalar)
{
    struct ccs_nccl_premul p = {.comm = comm, .op = op, .nccl_dtype = 8 /* ncclFloat64 */, .host_scalar = 1};
    memcpy(p.scalar, &scalar, sizeof scalar);
    return p;
}

static double scalar_of(const struct ccs_nccl_premul *p)
{
    double d;
    memcpy(&d, p->scalar, sizeof d);
    return d;
}

START_TEST(add_find_remove)
{
    struct ccs_nccl_premul a = host_op(0x1000, 5, 0.25), b = host_op(0x2000, 5, 4.0), out;
    struct ccs_nccl_premul dev = {.comm = 0x1000, .op = 6, .nccl_dtype = 7, .dev_ptr = (void *)0xdead0};
    ck_assert_int_eq(ccs_nccl_redop_add(&a), 0);
    ck_assert_int_eq(ccs_nccl_redop_add(&b), 0);
    ck_assert_int_eq(ccs_nccl_redop_add(&dev), 0);
    /* The same value on two communicators: two operators. */
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 5, &out), 1);
    ck_assert(scalar_of(&out) == 0.25);
    ck_assert_int_eq(out.host_scalar, 1);
    ck_assert_int_eq(ccs_nccl_redop_find(0x2000, 5, &out), 1);
    ck_assert(scalar_of(&out) == 4.0);
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 6, &out), 1);
    ck_assert_int_eq(out.host_scalar, 0);
    ck_assert_ptr_eq(out.dev_ptr, (void *)0xdead0);
    ck_assert_int_eq(out.nccl_dtype, 7);
    ck_assert_int_eq(ccs_nccl_redop_find(0x3000, 5, NULL), 0);
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 7, NULL), 0);

    ck_assert_int_eq(ccs_nccl_redop_remove(0x1000, 5, &out), 0);
    ck_assert(scalar_of(&out) == 0.25);
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 5, NULL), 0);
    ck_assert_int_eq(ccs_nccl_redop_find(0x2000, 5, NULL), 1);
    ck_assert_int_eq(ccs_nccl_redop_remove(0x1000, 5, NULL), -1);

    /* Destroying a communicator forgets all of its operators only. */
    ck_assert_int_eq(ccs_nccl_redop_add(&a), 0);
    ccs_nccl_redop_forget_comm(0x1000);
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 5, NULL), 0);
    ck_assert_int_eq(ccs_nccl_redop_find(0x1000, 6, NULL), 0);
    ck_assert_int_eq(ccs_nccl_redop_find(0x2000, 5, NULL), 1);
    ccs_nccl_redop_forget_comm(0x2000);
}
END_TEST

START_TEST(full_table)
{
    for (int i = 0; i < CCS_NCCL_REDOPS; i++) {
        struct ccs_nccl_premul p = host_op(0x4000, 5 + i, i);
        ck_assert_int_eq(ccs_nccl_redop_add(&p), 0);
    }
    struct ccs_nccl_premul extra = host_op(0x4000, 5 + CCS_NCCL_REDOPS, 1);
    ck_assert_int_eq(ccs_nccl_redop_add(&extra), -1);
    struct ccs_nccl_premul out;
    ck_assert_int_eq(ccs_nccl_redop_find(0x4000, 5 + CCS_NCCL_REDOPS - 1, &out), 1);
    ck_assert(scalar_of(&out) == CCS_NCCL_REDOPS - 1);
    ccs_nccl_redop_forget_comm(0x4000);
    ck_assert_int_eq(ccs_nccl_redop_add(&extra), 0); /* room again */
    ccs_nccl_redop_forget_comm(0x4000);
}
END_TEST

/* A reader racing a writer that keeps re-creating (comm, op) with scalar A
 * on one dtype and B on another never sees a mix of the two. */
static atomic_int stop;

static void *rewriter(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        struct ccs_nccl_premul p = host_op(0x5000, 9, i % 2 ? 2.0 : 3.0);
        p.nccl_dtype = i % 2 ? 8 : 9;
        ccs_nccl_redop_add(&p);
        ccs_nccl_redop_remove(0x5000, 9, NULL);
    }
    return NULL;
}

START_TEST(no_torn_reads)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, rewriter, NULL), 0);
    long seen = 0;
    for (long i = 0; i < 2000000 && seen < 20000; i++) {
        struct ccs_nccl_premul out;
        if (!ccs_nccl_redop_find(0x5000, 9, &out))
            continue;
        seen++;
        double s = scalar_of(&out);
        ck_assert_msg((s == 2.0 && out.nccl_dtype == 8) || (s == 3.0 && out.nccl_dtype == 9),
                      "torn entry: scalar %g dtype %d", s, out.nccl_dtype);
        ck_assert(out.comm == 0x5000 && out.op == 9);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    ccs_nccl_redop_forget_comm(0x5000);
    ck_assert_int_gt(seen, 0); /* the race was actually run */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nccl_redop");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, add_find_remove);
    tcase_add_test(tc, full_table);
    tcase_add_test(tc, no_torn_reads);
    suite_add_tcase(s, tc);
    return s;
}

CCS_UNIT_MAIN(suite)
