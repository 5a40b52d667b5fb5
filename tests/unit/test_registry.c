/* test_registry.c - the registry's hooks (src/core/registry.h): finish
 * hooks last registered first, verdicts to every feature that takes them,
 * a feature's facts to another through the query hook; and the services
 * beside it (verdicts.h, abort.h). */
#include "verdicts.h"
#include "abort.h"
#include "registry.h"
#include "ccshim.h"
#include "trace_format.h"
#include "unit_main.h"
#include <stdio.h>
#include <string.h>

static char order[8];
static int norder;
static void finish_a(int reason) { order[norder++] = reason == CCS_END_EXIT ? 'a' : 'x'; }
static void finish_b(int reason) { order[norder++] = reason == CCS_END_EXIT ? 'b' : 'x'; }

static int nverdicts;
static char last[128];
static void verdict(const char *cls, uint64_t comm, uint64_t seq, const char *line)
{
    nverdicts++;
    snprintf(last, sizeof last, "%s %#llx %llu %s", cls, (unsigned long long)comm, (unsigned long long)seq, line);
}

static const struct ccs_feature fa = {.name = "a", .finish = finish_a, .verdict = verdict};
static const struct ccs_feature fb = {.name = "b", .finish = finish_b};

START_TEST(finish_last_registered_first_verdicts_to_those_that_take_them)
{
    ck_assert_int_eq(ccs_feature_register(&fa), 0);
    ck_assert_int_eq(ccs_feature_register(&fb), 0);
    ccs_features_finish(CCS_END_EXIT);
    order[norder] = 0;
    ck_assert_str_eq(order, "ba");
    ccs_features_verdict("DESYNC", 0xabc, 7, "comm=0xabc size=2 seq=7: ...");
    ck_assert_int_eq(nverdicts, 1); /* b takes none */
    ck_assert_str_eq(last, "DESYNC 0xabc 7 comm=0xabc size=2 seq=7: ...");
}
END_TEST

/* A language helper's verdict (ccshim_verdict): to the features as the
 * detector's, and noted (a rank at its step boundary stops waiting), but a
 * STRAGGLER is not noted and an unknown class is refused. */
START_TEST(a_helpers_verdict_goes_where_the_detectors_go)
{
    ccs_feature_register(&fa);
    int n = nverdicts;
    uint64_t seen = ccs_verdicts_seen();
    ck_assert_int_eq(ccshim_verdict("DESYNC", "rank 1 ended step 0 after 15 backward passes"), 0);
    ck_assert_int_eq(nverdicts, n + 1);
    ck_assert_str_eq(last, "DESYNC 0 0 rank 1 ended step 0 after 15 backward passes");
    ck_assert_uint_eq(ccs_verdicts_seen(), seen + 1);
    ck_assert_int_eq(ccshim_verdict("STRAGGLER", "late"), 0);
    ck_assert_uint_eq(ccs_verdicts_seen(), seen + 1);
    ck_assert_int_eq(ccshim_verdict("DESYNCH", "typo"), -1);
    ck_assert_int_eq(ccshim_verdict(NULL, "none"), -1);
    ck_assert_int_eq(nverdicts, n + 2);
}
END_TEST

static int tried[2];
static int abort_local(void *arg, uint64_t comm)
{
    (void)arg;
    tried[0]++;
    return comm == 0x11 ? 0 : -1; /* ends only its own communicators */
}
static int abort_wide(void *arg, uint64_t comm)
{
    (void)arg, (void)comm;
    tried[1]++;
    return 0;
}

/* A process with two ways to abort, the local one (ncclCommAbort)
 * registered first: the job counts as ended job-wide (the reporting rank
 * gets its time) since the second, MPI_Abort, is taken for any
 * communicator the first does not own; ccs_abort_job tries them in order. */
START_TEST(abort_ways_in_order_job_wide_if_any)
{
    ck_assert_int_eq(ccs_abort_job_wide(), 0);
    ck_assert_int_eq(ccs_abort_register(abort_local, NULL, 0), 0);
    ck_assert_int_eq(ccs_abort_job_wide(), 0);
    ck_assert_int_eq(ccs_abort_register(abort_wide, NULL, 1), 0);
    ck_assert_int_eq(ccs_abort_job_wide(), 1);
    ck_assert_int_eq(ccs_abort_job(0x11), 0);
    ck_assert_int_eq(tried[0], 1);
    ck_assert_int_eq(tried[1], 0);
    ck_assert_int_eq(ccs_abort_job(0x22), 0);
    ck_assert_int_eq(tried[0], 2);
    ck_assert_int_eq(tried[1], 1);
}
END_TEST

/* Two features that answer facts, one that answers none: a fact goes to the
 * one that owns it; the first registered answers a fact two own; a fact no
 * one owns is -1 with the value left as it was (metrics then writes its
 * "never" 0, as where desync does not run). */
static uint64_t passes = 1234;
static int detector_query(const char *fact, uint64_t *value)
{
    if (strcmp(fact, "desync.last_pass_ms") == 0) {
        *value = passes;
        return 0;
    }
    if (strcmp(fact, "shared.fact") == 0) {
        *value = 1;
        return 0;
    }
    return -1;
}
static int tracker_query(const char *fact, uint64_t *value)
{
    if (strcmp(fact, "nccl.pending") == 0 || strcmp(fact, "shared.fact") == 0) {
        *value = strcmp(fact, "shared.fact") == 0 ? 2 : 3;
        return 0;
    }
    return -1;
}
static const struct ccs_feature fdet = {.name = "detector", .query = detector_query};
static const struct ccs_feature ftrack = {.name = "tracker", .query = tracker_query};

START_TEST(a_fact_from_the_feature_that_owns_it)
{
    uint64_t v = 99;
    ck_assert_int_eq(ccs_features_query("desync.last_pass_ms", &v), -1); /* no feature yet */
    ck_assert_uint_eq(v, 99);
    ck_assert_int_eq(ccs_feature_register(&fb), 0); /* no query hook: skipped */
    ck_assert_int_eq(ccs_feature_register(&fdet), 0);
    ck_assert_int_eq(ccs_feature_register(&ftrack), 0);
    ck_assert_int_eq(ccs_features_query("desync.last_pass_ms", &v), 0);
    ck_assert_uint_eq(v, 1234);
    passes = 5678; /* read when asked, not when registered */
    ck_assert_int_eq(ccs_features_query("desync.last_pass_ms", &v), 0);
    ck_assert_uint_eq(v, 5678);
    ck_assert_int_eq(ccs_features_query("nccl.pending", &v), 0);
    ck_assert_uint_eq(v, 3);
    ck_assert_int_eq(ccs_features_query("shared.fact", &v), 0);
    ck_assert_uint_eq(v, 1); /* the first registered */
    v = 42;
    ck_assert_int_eq(ccs_features_query("desync.last_pass", &v), -1);
    ck_assert_uint_eq(v, 42);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("registry");
    TCase *t = tcase_create("hooks");
    tcase_add_test(t, finish_last_registered_first_verdicts_to_those_that_take_them);
    tcase_add_test(t, abort_ways_in_order_job_wide_if_any);
    tcase_add_test(t, a_helpers_verdict_goes_where_the_detectors_go);
    tcase_add_test(t, a_fact_from_the_feature_that_owns_it);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
