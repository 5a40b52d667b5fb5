/*
 * test_coalesce.c - Check suite of coalescing's pure logic: the policy
 * parser, the eligibility filter, the identity table and the defer / real
 * decisions, the local answer's arithmetic, the 16-bit conversions, and the
 * step-marker logic (verification, auto learning with a fake agreement).
 */
#include "ccs_config.h"
#include "ccshim.h"
#include "coalesce.h"
#include "unit_main.h"
#include "ccs_kinds.h"
#include <check.h>
#include <math.h>
#include <string.h>

static struct ccs_coal_id *ident(uint64_t comm, const void *buf, uint64_t count)
{
    return ccs_coalesce_identity(comm, (uintptr_t)comm, 4, buf, buf, count, CCS_DT_FLOAT64, CCS_OP_SUM, 0,
                                 CCS_BE_MPI);
}

static void use(int mode, uint32_t every)
{
    struct ccs_coalesce_policy p = {.mode = mode, .every = every};
    ccs_coalesce_table_reset();
    ccs_coalesce_configure(&p);
}

START_TEST(parse_policies)
{
    struct ccs_coalesce_policy p;
    char why[128];
    ck_assert_int_eq(ccs_coalesce_parse("off", &p, why, sizeof why), 0);
    ck_assert_int_eq(p.mode, CCS_COALESCE_OFF);
    ck_assert_int_eq(ccs_coalesce_parse("", &p, why, sizeof why), 0);
    ck_assert_int_eq(p.mode, CCS_COALESCE_OFF);
    ck_assert_int_eq(ccs_coalesce_parse("auto", &p, why, sizeof why), 0);
    ck_assert_int_eq(p.mode, CCS_COALESCE_AUTO);
    ck_assert_int_eq(ccs_coalesce_parse("every:64", &p, why, sizeof why), 0);
    ck_assert_int_eq(p.mode, CCS_COALESCE_EVERY);
    ck_assert_uint_eq(p.every, 64);
    ck_assert_int_eq(ccs_coalesce_parse("every:1", &p, why, sizeof why), -1);
    ck_assert_str_eq(why, "every:N needs a decimal N in 2..1000000");
    ck_assert_int_eq(ccs_coalesce_parse("every:8x", &p, why, sizeof why), -1);
    ck_assert_int_eq(ccs_coalesce_parse("sometimes", &p, why, sizeof why), -1);
    ck_assert_str_eq(why, "expected off, every:N or auto");
    ck_assert_int_eq(p.mode, CCS_COALESCE_OFF);
}
END_TEST

START_TEST(eligibility)
{
    long keep = ccs_cfg.coalesce_min_bytes;
    ccs_cfg.coalesce_min_bytes = 1024;
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_SUM, CCS_DT_FLOAT64, 1024), 1);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_SUM, CCS_DT_FLOAT64, 1023), 0);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_AVG, CCS_DT_FLOAT16, 4096), 1);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_PREMULSUM, CCS_DT_BFLOAT16, 4096), 1);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_MAX, CCS_DT_FLOAT32, 4096), 0);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_PROD, CCS_DT_FLOAT32, 4096), 0);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_SUM, CCS_DT_INT32, 4096), 0);
    ck_assert_int_eq(ccs_coalesce_eligible(CCS_OP_SUM, CCS_DT_INT64, 4096), 0);
    ccs_cfg.coalesce_min_bytes = keep;
}
END_TEST

START_TEST(identities_and_every_n)
{
    static double a[16], b[16];
    use(CCS_COALESCE_EVERY, 3);
    struct ccs_coal_id *ia = ident(7, a, 16), *ib = ident(7, b, 16), *ic = ident(9, a, 16);
    ck_assert_ptr_nonnull(ia);
    ck_assert_ptr_eq(ident(7, a, 16), ia);
    ck_assert_ptr_ne(ia, ib);
    ck_assert_ptr_ne(ia, ic);
    ck_assert_ptr_ne(ident(7, a, 15), ia);
    ck_assert_uint_eq(ia->ordinal, 0);
    ck_assert_uint_eq(ib->ordinal, 1);
    ck_assert_uint_eq(ic->ordinal, 0); /* per communicator */
    enum ccs_coalesce_action want[] = {CCS_COALESCE_DEFER, CCS_COALESCE_DEFER, CCS_COALESCE_REAL,
                                       CCS_COALESCE_DEFER, CCS_COALESCE_DEFER, CCS_COALESCE_REAL};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ia), want[i]);
    ck_assert_uint_eq(ia->deferred, 4);
    ck_assert_uint_eq(ia->real, 2);
    ck_assert_uint_eq(ia->in_step, 6);
    ck_assert_uint_eq(ia->pending, 0);
    char d[256];
    ccs_coalesce_describe(ia, d, sizeof d);
    ck_assert_ptr_nonnull(strstr(d, "16 x float64 sum"));
}
END_TEST

START_TEST(table_full_passes_through)
{
    static double buf[CCS_COALESCE_SLOTS + 1];
    use(CCS_COALESCE_EVERY, 2);
    for (int i = 0; i < CCS_COALESCE_SLOTS; i++)
        ck_assert_ptr_nonnull(ident(1, &buf[i], 8));
    ck_assert_ptr_null(ident(1, &buf[CCS_COALESCE_SLOTS], 8));
    ck_assert_ptr_nonnull(ident(1, &buf[5], 8)); /* the known ones are still found */
}
END_TEST

START_TEST(local_answer)
{
    double d[3] = {1.5, -2, 0.25}, o[3];
    ck_assert_int_eq(ccs_coalesce_scale_host(o, d, 3, CCS_DT_FLOAT64, 4), 0);
    ck_assert(o[0] == 6 && o[1] == -8 && o[2] == 1);
    ck_assert_int_eq(ccs_coalesce_scale_host(d, d, 3, CCS_DT_FLOAT64, 2), 0); /* in place */
    ck_assert(d[0] == 3 && d[1] == -4 && d[2] == 0.5);
    float f[2] = {3, 0.5f};
    ck_assert_int_eq(ccs_coalesce_scale_host(f, f, 2, CCS_DT_FLOAT32, 3), 0);
    ck_assert(f[0] == 9 && f[1] == 1.5f);
    uint16_t h[2] = {ccs_float_to_half(1.5f), ccs_float_to_half(-0.125f)};
    ck_assert_int_eq(ccs_coalesce_scale_host(h, h, 2, CCS_DT_FLOAT16, 8), 0);
    ck_assert(ccs_half_to_float(h[0]) == 12 && ccs_half_to_float(h[1]) == -1);
    uint16_t bf[1] = {ccs_float_to_bf16(3)};
    ck_assert_int_eq(ccs_coalesce_scale_host(bf, bf, 1, CCS_DT_BFLOAT16, 0.5), 0);
    ck_assert(ccs_bf16_to_float(bf[0]) == 1.5f);
    int32_t ints[1] = {1};
    ck_assert_int_eq(ccs_coalesce_scale_host(ints, ints, 1, CCS_DT_INT32, 2), -1);

    double fac;
    ck_assert_int_eq(ccs_coalesce_factor(CCS_OP_SUM, CCS_DT_FLOAT32, 0, 4, &fac), 0);
    ck_assert(fac == 4);
    ck_assert_int_eq(ccs_coalesce_factor(CCS_OP_AVG, CCS_DT_FLOAT32, 0, 4, &fac), 0);
    ck_assert(fac == 1);
    float quarter = 0.25f;
    uint32_t qb;
    memcpy(&qb, &quarter, 4);
    ck_assert_int_eq(ccs_coalesce_factor(CCS_OP_PREMULSUM, CCS_DT_FLOAT32, qb, 8, &fac), 0);
    ck_assert(fac == 2);
    ck_assert_int_eq(ccs_coalesce_factor(CCS_OP_PREMULSUM, CCS_DT_FLOAT16, ccs_float_to_half(0.5f), 4, &fac), 0);
    ck_assert(fac == 2);
    ck_assert_int_eq(ccs_coalesce_factor(CCS_OP_MAX, CCS_DT_FLOAT32, 0, 4, &fac), -1);
}
END_TEST

START_TEST(half_and_bfloat16)
{
    ck_assert_uint_eq(ccs_float_to_half(1.0f), 0x3c00);
    ck_assert_uint_eq(ccs_float_to_half(-2.0f), 0xc000);
    ck_assert_uint_eq(ccs_float_to_half(65504.0f), 0x7bff);
    ck_assert_uint_eq(ccs_float_to_half(1e6f), 0x7c00);              /* overflow to inf */
    ck_assert_uint_eq(ccs_float_to_half(5.9604645e-8f), 0x0001);     /* smallest subnormal */
    ck_assert_uint_eq(ccs_float_to_half(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
    ck_assert_uint_eq(ccs_float_to_half(1.0f + 3.0f / 2048), 0x3c02);
    ck_assert(ccs_half_to_float(0x0001) == 5.9604645e-8f);
    ck_assert(isinf(ccs_half_to_float(0x7c00)));
    ck_assert(isnan(ccs_half_to_float(0x7e00)));
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite half survives the round trip */
        ck_assert_uint_eq(ccs_float_to_half(ccs_half_to_float((uint16_t)h)), h);
    ck_assert_uint_eq(ccs_float_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(ccs_float_to_bf16(-3.0f), 0xc040);
    ck_assert(ccs_bf16_to_float(0x3fc0) == 1.5f);
    ck_assert_uint_eq(ccs_float_to_bf16(1.0f + 1.0f / 256), 0x3f80); /* tie to even */
    ck_assert(isnan(ccs_bf16_to_float(ccs_float_to_bf16(NAN))));
}
END_TEST

START_TEST(shorter_step_is_caught_and_switches_off)
{
    static double a[8];
    use(CCS_COALESCE_EVERY, 4);
    struct ccs_coal_id *ia = ident(3, a, 8);
    for (int i = 0; i < 4; i++)
        ccs_coalesce_decide(ia);
    ccshim_step_mark(); /* complete step: nothing to report */
    ck_assert_int_eq(atomic_load(&ccs_coalesce_on), 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_DEFER);
    ccshim_step_mark(); /* the real one never came: CCSHIM_ON_DESYNC unset = warn */
    ck_assert_int_eq(atomic_load(&ccs_coalesce_on), 0);
    ck_assert_uint_eq(ia->pending, 0);
}
END_TEST

/* Fake agreement: records what it was given and answers AGREE for all. */
static int agree_answer = 1;
static size_t agree_n;
static uint64_t agree_digest;
static int fake_agree(size_t n, const uint64_t *comms, const int32_t *sizes, const uint64_t *digests,
                      uint8_t *agreed)
{
    (void)comms, (void)sizes;
    agree_n = n;
    agree_digest = n ? digests[0] : 0;
    for (size_t i = 0; i < n; i++)
        agreed[i] = (uint8_t)agree_answer;
    return 0;
}

/* One step: A called NA times, B NB times, C NC times (all passed through
 * while learning). */
static void learning_step(struct ccs_coal_id *ia, int na, struct ccs_coal_id *ib, int nb, struct ccs_coal_id *ic,
                          int nc)
{
    for (int i = 0; i < na; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_PASS);
    for (int i = 0; i < nb; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ib), CCS_COALESCE_PASS);
    for (int i = 0; i < nc; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ic), CCS_COALESCE_PASS);
    ccshim_step_mark();
}

/* N-1 deferred calls then the real one. */
static void coalesced_step(struct ccs_coal_id *id, int n)
{
    for (int i = 0; i < n - 1; i++)
        ck_assert_int_eq(ccs_coalesce_decide(id), CCS_COALESCE_DEFER);
    ck_assert_int_eq(ccs_coalesce_decide(id), CCS_COALESCE_REAL);
}

START_TEST(auto_learns_agrees_and_verifies)
{
    static double a[8], b[8], c[8];
    long keep = ccs_cfg.coalesce_learn_steps;
    ccs_cfg.coalesce_learn_steps = 2;
    ccs_coalesce_agree = fake_agree;
    agree_answer = 1;
    use(CCS_COALESCE_AUTO, 0);
    struct ccs_coal_id *ia = ident(5, a, 8), *ib = ident(5, b, 8), *ic = ident(5, c, 8);
    /* A whole from the start; B first seen part way through its first step
     * (DDP's bucket rebuild: 3 calls, then 4 in every later step); C once
     * per step. */
    learning_step(ia, 4, ib, 3, ic, 1);
    ck_assert_uint_eq(agree_n, 0);
    learning_step(ia, 4, ib, 4, ic, 1); /* A: two equal steps */
    ck_assert_uint_eq(agree_n, 1);      /* one communicator with candidates */
    ck_assert_uint_eq(ia->period, 4);
    ck_assert_uint_eq(ib->period, 0);
    uint64_t d1 = agree_digest;
    ccshim_step_mark(); /* a second optimizer's marker: no calls, not counted */
    coalesced_step(ia, 4);
    learning_step(NULL, 0, ib, 4, ic, 1); /* B: two equal steps after the partial one */
    ck_assert_uint_eq(ib->period, 4);
    ck_assert_uint_eq(ic->period, 0); /* once per step: nothing to coalesce */
    coalesced_step(ia, 4);
    coalesced_step(ib, 4);
    ccshim_step_mark();
    ck_assert_int_eq(atomic_load(&ccs_coalesce_on), 1);

    /* A short step: A's real call never comes; completed before the
     * optimizer step, so the marker finds nothing pending, and A (3 calls
     * instead of 4) is learned again while B stays coalesced. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_DEFER);
    coalesced_step(ib, 4);
    ck_assert_uint_eq(ccs_coalesce_pending_calls(), 3);
    ck_assert_int_eq(ccs_coalesce_complete(1), 1);
    ck_assert_uint_eq(ccs_coalesce_pending_calls(), 0);
    ck_assert_uint_eq(ia->completions, 1);
    ccshim_step_mark();
    ck_assert_int_eq(atomic_load(&ccs_coalesce_on), 1);
    ck_assert_uint_eq(ia->period, 0);
    ck_assert_uint_eq(ib->period, 4);
    ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_PASS);

    /* The same schedule with the other ranks disagreeing: nothing coalesced,
     * and the digest does not depend on the buffers' addresses. */
    agree_answer = 0;
    use(CCS_COALESCE_AUTO, 0);
    ia = ident(5, c, 8), ib = ident(5, a, 8), ic = ident(5, b, 8);
    learning_step(ia, 4, ib, 3, ic, 1);
    learning_step(ia, 4, ib, 4, ic, 1);
    ck_assert_uint_eq(agree_digest, d1);
    ck_assert_uint_eq(ia->period, 0);
    ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_PASS);
    ccs_cfg.coalesce_learn_steps = keep;
    ccs_coalesce_agree = NULL;
}
END_TEST

/* every:N under the PyTorch helper: the communicator's first step (DDP's
 * bucket rebuild) all real, then every identity cycles alike, an identity
 * first seen in a later step too (a fresh tensor at an address one rank
 * used before and another did not: the ranks must still defer the same
 * calls).  A communicator first used in step 1 (the first step(closure))
 * has all of step 1 real. */
START_TEST(torch_helper_every_n_after_first_step)
{
    static double a[16], b[16], c[16];
    ccs_cfg.torch_helper = 1;
    use(CCS_COALESCE_EVERY, 3);
    struct ccs_coal_id *ia = ident(7, a, 16);
    ck_assert_ptr_nonnull(ia);
    ck_assert_uint_eq(ccshim_step_current(), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ia), CCS_COALESCE_PASS);
    ccshim_step_mark();
    ck_assert_uint_eq(ccshim_step_current(), 1);
    struct ccs_coal_id *ib = ident(7, b, 16); /* first seen in step 1 */
    ck_assert_ptr_nonnull(ib);
    enum ccs_coalesce_action want[] = {CCS_COALESCE_DEFER, CCS_COALESCE_DEFER, CCS_COALESCE_REAL};
    struct ccs_coal_id *ic = ident(8, c, 16); /* another communicator, first used in step 1 */
    ck_assert_ptr_nonnull(ic);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ccs_coalesce_decide(ia), want[i]);
        ck_assert_int_eq(ccs_coalesce_decide(ib), want[i]);
        ck_assert_int_eq(ccs_coalesce_decide(ic), CCS_COALESCE_PASS);
    }
    ccshim_step_mark();
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ccs_coalesce_decide(ic), want[i]);
    ccs_cfg.torch_helper = 0;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coalesce");
    TCase *t = tcase_create("core");
    tcase_add_test(t, parse_policies);
    tcase_add_test(t, eligibility);
    tcase_add_test(t, identities_and_every_n);
    tcase_add_test(t, table_full_passes_through);
    tcase_add_test(t, local_answer);
    tcase_add_test(t, half_and_bfloat16);
    tcase_add_test(t, shorter_step_is_caught_and_switches_off);
    tcase_add_test(t, auto_learns_agrees_and_verifies);
    tcase_add_test(t, torch_helper_every_n_after_first_step);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
