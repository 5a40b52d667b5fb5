/*
 * check_audit.c - unit tests of ccshim-audit's parts: the trace reader on
 * generated and broken traces, the hash map, the step inference, the
 * pattern compressor, the --expect parser and the findings.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include "trace_reader.h"
#include "tracegen.h"
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every test runs in a fresh temporary directory of its own (a checked
 * fixture: made before the test, removed after it, in the test's process). */
static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/check_audit.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ------------------------------------------------------------ reader */

struct counts {
    int meta, comm, module, site, record, end, marks;
    int rc;
    uint64_t lost;
    char err[512];
};

static struct counts read_counts(const char *path, int *truncated)
{
    struct counts c;
    memset(&c, 0, sizeof c);
    struct ccs_trace_reader *r = ccs_trace_open(path, c.err, sizeof c.err);
    ck_assert_msg(r != NULL, "open: %s", c.err);
    struct ccs_item it;
    while ((c.rc = ccs_trace_next(r, &it, c.err, sizeof c.err)) == 1) {
        switch (it.type) {
        case CCS_ITEM_META:
            c.meta++;
            break;
        case CCS_ITEM_COMM:
            c.comm++;
            break;
        case CCS_ITEM_MODULE:
            c.module++;
            break;
        case CCS_ITEM_SITE:
            c.site++;
            ck_assert_uint_eq(it.u.site.depth, 2);
            ck_assert_ptr_nonnull(it.u.site.symbols[0]);
            ck_assert_str_eq(it.u.site.symbols[1], "tg_site_train_step");
            break;
        case CCS_ITEM_RECORD:
            c.record++;
            c.marks += it.u.record.kind == CCS_KIND_STEP;
            break;
        case CCS_ITEM_END:
            c.end++;
            break;
        case CCS_ITEM_PYSITE:   /* tracegen writes none */
        case CCS_ITEM_INFLIGHT: /* nor these */
            break;
        }
    }
    *truncated = ccs_trace_truncated(r);
    c.lost = ccs_trace_lost(r);
    ck_assert_str_eq(ccs_trace_meta(r, "job"), "4242");
    ck_assert_str_eq(ccs_trace_meta(r, "host"), "node1");
    ccs_trace_close(r);
    return c;
}

START_TEST(reader_whole_trace)
{
    struct tg_opts o;
    char path[4096];
    int trunc;
    tg_defaults(&o);
    o.steps = 5;
    o.micro = 3;
    ck_assert_int_eq(tg_write_rank(tmpdir, &o, 1, path, sizeof path), 0);
    ck_assert_ptr_nonnull(strstr(path, "/ccshim-4242-node1-r1-p1001.cctrace"));
    struct counts c = read_counts(path, &trunc);
    ck_assert_int_eq(c.rc, 0);
    ck_assert_int_eq(c.meta, 1);
    ck_assert_int_eq(c.comm, 1);
    ck_assert_int_eq(c.module, 1);
    ck_assert_int_eq(c.site, 3);
    ck_assert_int_eq(c.end, 1);
    /* 1 broadcast, then per step 3 x 2 buckets, an all-gather and a marker */
    ck_assert_int_eq(c.record, 1 + 5 * (3 * 2 + 1 + 1));
    ck_assert_int_eq(c.marks, 5);
    ck_assert_int_eq(trunc, 0);
}
END_TEST

START_TEST(reader_truncated_and_no_end)
{
    struct tg_opts o;
    char path[4096];
    int trunc;
    tg_defaults(&o);
    o.steps = 4;
    o.cut_rank = 0;
    o.cut_bytes = 100; /* the END chunk (40 bytes) and the end of the one records chunk */
    ck_assert_int_eq(tg_write_rank(tmpdir, &o, 0, path, sizeof path), 0);
    struct counts c = read_counts(path, &trunc);
    ck_assert_int_eq(c.rc, -1);
    ck_assert_ptr_nonnull(strstr(c.err, "truncated"));
    ck_assert_ptr_nonnull(strstr(c.err, path));
    ck_assert_int_eq(c.end, 0);
    /* The one records chunk (17 records of 88 bytes) is cut 60 bytes short:
     * its 16 whole records are read, the 17th is lost and said so. */
    ck_assert_int_eq(c.record, 16);
    ck_assert_uint_eq(c.lost, 1);
    ck_assert_msg(strstr(c.err, "ends inside a chunk of 17 records; 16 read, 1 lost") != NULL, "%s", c.err);
    ck_assert_int_eq(trunc, 1);

    o.cut_rank = -1;
    o.no_end_rank = 2;
    ck_assert_int_eq(tg_write_rank(tmpdir, &o, 2, path, sizeof path), 0);
    c = read_counts(path, &trunc);
    ck_assert_int_eq(c.rc, 0);
    ck_assert_int_eq(c.end, 0);
    ck_assert_int_eq(c.record, 1 + 4 * 4);
    ck_assert_int_eq(trunc, 1);
}
END_TEST

static void expect_refused(const char *kind, const char *what)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s.cctrace", tmpdir, kind);
    ck_assert_int_eq(tg_write_broken(path, kind), 0);
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    ck_assert_msg(r == NULL, "%s opened", kind);
    ck_assert_msg(strstr(err, what) != NULL, "%s: message '%s' lacks '%s'", kind, err, what);
    ck_assert_msg(strstr(err, path) != NULL, "%s: message '%s' does not name the file", kind, err);
}

START_TEST(reader_refuses_broken_files)
{
    expect_refused("not-a-trace", "not a ccshim trace");
    expect_refused("newer-version", "version 4 is newer");
    expect_refused("other-byteorder", "other byte order");
    expect_refused("truncated-header", "truncated header");
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/dc.cctrace", tmpdir);
    ck_assert_int_eq(tg_write_broken(path, "damaged-chunk"), 0);
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    ck_assert_ptr_nonnull(r);
    struct ccs_item it;
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "claims 4294967280 bytes"));
    ccs_trace_close(r);
}
END_TEST

/* -------------------------------------------------------------- hmap */

START_TEST(hmap_many_keys)
{
    struct hmap m;
    struct e {
        uint64_t k;
        uint64_t v;
    };
    hmap_init(&m, sizeof(struct e), 8);
    for (uint64_t i = 0; i < 20000; i++) {
        struct e *e = hmap_get(&m, &i, 1);
        ck_assert_ptr_nonnull(e);
        e->v += i * 3;
    }
    for (uint64_t i = 0; i < 20000; i += 2) {
        struct e *e = hmap_get(&m, &i, 1);
        e->v += 1;
    }
    ck_assert_uint_eq(m.n, 20000);
    for (uint64_t i = 0; i < 20000; i++) {
        struct e *e = hmap_get(&m, &i, 0);
        ck_assert_ptr_nonnull(e);
        ck_assert_uint_eq(e->v, i * 3 + (i % 2 == 0));
    }
    uint64_t absent = 20000;
    ck_assert_ptr_null(hmap_get(&m, &absent, 0));
    hmap_free(&m);
}
END_TEST

/* ------------------------------------------------------- step inference */

static size_t build(uint32_t *t, const char *spec)
{
    size_t n = 0;
    for (const char *p = spec; *p; p++)
        t[n++] = (uint32_t)(*p - 'a');
    return n;
}

START_TEST(infer_period_cases)
{
    uint32_t t[4096];
    uint64_t p, h;
    size_t n = build(t, "abcabcabcabc");
    ck_assert_int_eq(audit_infer_period(t, n, &p, &h), 0);
    ck_assert_uint_eq(p, 3);
    ck_assert_uint_eq(h, 0);
    /* setup head, last step cut short */
    n = build(t, "xxabcdabcdabcdab");
    ck_assert_int_eq(audit_infer_period(t, n, &p, &h), 0);
    ck_assert_uint_eq(p, 4);
    ck_assert_uint_eq(h, 2);
    /* per-mini-batch: [b0 b1] x32 then an all-gather, 3 steps, after one broadcast */
    n = 0;
    t[n++] = 9;
    for (int s = 0; s < 3; s++) {
        for (int m = 0; m < 32; m++) {
            t[n++] = 0;
            t[n++] = 1;
        }
        t[n++] = 2;
    }
    ck_assert_int_eq(audit_infer_period(t, n, &p, &h), 0);
    ck_assert_uint_eq(p, 65);
    ck_assert_uint_eq(h, 1);
    /* no repetition */
    n = build(t, "abcdefgh");
    ck_assert_int_eq(audit_infer_period(t, n, &p, &h), -1);
    /* only one whole period: not enough */
    n = build(t, "abcab");
    ck_assert_int_eq(audit_infer_period(t, n, &p, &h), -1);
}
END_TEST

/* --------------------------------------------------- pattern compressor */

static const char *names(uint32_t id, void *arg)
{
    static const char *n[] = {"a", "b", "c", "d", "x"};
    (void)arg;
    return id < 5 ? n[id] : "?";
}

static void expect_pattern(const char *spec, const char *want)
{
    uint32_t t[256];
    size_t n = build(t, spec);
    for (size_t i = 0; i < n; i++)
        if (t[i] == 'x' - 'a')
            t[i] = 4;
    char *got = audit_compress(t, n, names, NULL);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(strcmp(got, want) == 0, "%s: got '%s', want '%s'", spec, got, want);
    free(got);
}

START_TEST(pattern_cases)
{
    expect_pattern("abababc", "[a, b] x3, c");
    expect_pattern("aaaab", "a x4, b");
    expect_pattern("abc", "a, b, c");
    expect_pattern("xababababd", "x, [a, b] x4, d");
    expect_pattern("aabaabaab", "[a x2, b] x3");
    expect_pattern("", "");
}
END_TEST

/* --------------------------------------------------------------- expect */

START_TEST(expect_parse_cases)
{
    struct audit_expect e;
    char err[256];
    ck_assert_int_eq(audit_expect_parse("allreduce<=2", &e, err, sizeof err), 0);
    ck_assert_int_eq(e.kind, CCS_KIND_ALLREDUCE);
    ck_assert_uint_eq(e.limit, 2);
    ck_assert_int_eq(e.scope, EXPECT_COMM);
    ck_assert_int_eq(audit_expect_parse("allgather<=10/step", &e, err, sizeof err), 0);
    ck_assert_int_eq(e.scope, EXPECT_STEP);
    ck_assert_int_eq(audit_expect_parse("allreduce<=1/buffer", &e, err, sizeof err), 0);
    ck_assert_int_eq(e.scope, EXPECT_BUFFER);
    ck_assert_int_eq(audit_expect_parse("allreduce<2", &e, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "KIND<=N"));
    ck_assert_int_eq(audit_expect_parse("allreduse<=2", &e, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown kind 'allreduse'"));
    ck_assert_int_eq(audit_expect_parse("allreduce<=2/rank", &e, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown scope"));
    /* The largest limit is taken; one past it is refused, not saturated
     * (tests/fuzz/corpus/fuzz_expect/regress-limit-overflow). */
    ck_assert_int_eq(audit_expect_parse("allreduce<=18446744073709551615/step", &e, err, sizeof err), 0);
    ck_assert_uint_eq(e.limit, UINT64_MAX);
    ck_assert_int_eq(audit_expect_parse("allreduce<=18446744073709551616", &e, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "limit 18446744073709551616 is larger than 18446744073709551615"));
}
END_TEST

/* ------------------------------------------------------------- findings */

/* Writes the job O describes into a new directory and audits it, findings included. */
static void run_audit(struct audit *a, const struct tg_opts *o)
{
    static int jobs;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/job%d", tmpdir, jobs++);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(tg_write_job(dir, o), 0);
    audit_init(a);
    a->symbolize = 0;
    char *args[] = {dir};
    ck_assert_int_eq(audit_collect(a, args, 1), 0);
    audit_sort_files(a);
    audit_find_steps(a);
    ck_assert_uint_eq(audit_read_all(a), (size_t)o->ranks);
    audit_expect_check(a);
    audit_findings(a);
}

static const struct audit_finding *find(const struct audit *a, int kind)
{
    for (size_t i = 0; i < a->nfindings; i++)
        if (a->findings[i].kind == kind)
            return &a->findings[i];
    return NULL;
}

START_TEST(findings_redundant_per_minibatch)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.micro = 32;
    o.steps = 3;
    run_audit(&a, &o);
    ck_assert_int_eq(a.steps.source, STEPS_MARKERS);
    ck_assert_uint_eq(a.max_step, 2);
    const struct audit_finding *f = find(&a, FIND_REDUNDANT);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->k, 32);
    ck_assert_uint_eq(f->steps, 3);
    ck_assert_ptr_nonnull(strstr(f->action, "CCSHIM_COALESCE=every:32"));
    ck_assert_ptr_nonnull(strstr(f->action, "no_sync()"));
    ck_assert_ptr_null(find(&a, FIND_MISMATCH));
    audit_free(&a);
}
END_TEST

START_TEST(findings_none_per_step)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.micro = 1;
    run_audit(&a, &o);
    ck_assert_uint_eq(a.nfindings, 0);
    audit_free(&a);
}
END_TEST

START_TEST(findings_desync)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.micro = 2;
    o.steps = 4;
    o.desync_rank = 2;
    o.desync_step = 1;
    run_audit(&a, &o);
    const struct audit_finding *f = find(&a, FIND_MISMATCH);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->nranks, 1);
    ck_assert_int_eq(f->ranks[0], 2);
    ck_assert_uint_eq(f->step_first, 1);
    /* 1 broadcast + step 0 (2 x 2 + 1) + step 1's four: the extra call is the 11th */
    ck_assert_uint_eq(f->first_seq, 11);
    int32_t out[8];
    ck_assert_uint_eq(audit_step_outliers(&a, 0, 0x9e3779b97f4a7c15ull, out, 8), 0);
    ck_assert_uint_eq(audit_step_outliers(&a, 1, 0x9e3779b97f4a7c15ull, out, 8), 1);
    ck_assert_int_eq(out[0], 2);
    audit_free(&a);
}
END_TEST

START_TEST(findings_inferred_steps_and_deferred)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.micro = 4;
    o.steps = 6;
    o.markers = 0;
    o.head = 3;
    o.deferred = 1;
    run_audit(&a, &o);
    ck_assert_int_eq(a.steps.source, STEPS_INFERRED);
    ck_assert_uint_eq(a.steps.period, 4 * 2 + 1);
    ck_assert_uint_eq(a.steps.head, 3);
    ck_assert_uint_eq(a.max_step, 5);
    ck_assert_ptr_null(find(&a, FIND_REDUNDANT)); /* coalesced: one real reduction per buffer */
    const struct audit_finding *f = find(&a, FIND_DEFERRED);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->k, 4 * 6 * 3 * 2); /* ranks x steps x (micro-1) x buckets */
    audit_free(&a);
}
END_TEST

START_TEST(findings_unmarked_no_coalescing_advice)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.micro = 4;
    o.steps = 6;
    o.markers = 0;
    run_audit(&a, &o);
    ck_assert_int_eq(a.steps.source, STEPS_INFERRED);
    const struct audit_finding *f = find(&a, FIND_REDUNDANT);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->k, 4);
    ck_assert_int_eq(f->severity, 0);
    ck_assert_ptr_null(strstr(f->action, "every:"));
    ck_assert_ptr_null(strstr(f->action, "CCSHIM_COALESCE"));
    ck_assert_ptr_nonnull(strstr(f->action, "ccshim_step_mark()"));
    ck_assert_ptr_nonnull(strstr(f->action, "ccshim-run --torch"));
    audit_free(&a);
}
END_TEST

START_TEST(findings_group_by_address_and_size)
{
    struct tg_opts o;
    struct audit a;
    tg_defaults(&o);
    o.ranks = 2;
    o.micro = 8;
    o.nbuckets = 1;
    o.bucket_bytes[0] = 3u << 19; /* 1.5 MiB */
    o.alias_bytes = 2u << 20;     /* 2 MiB at the same address, once per step */
    run_audit(&a, &o);
    const struct audit_finding *f = find(&a, FIND_REDUNDANT);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->k, 8);
    ck_assert_ptr_nonnull(strstr(f->action, "CCSHIM_COALESCE=every:8,"));
    audit_free(&a);
}
END_TEST

START_TEST(findings_none_for_integer_or_max)
{
    static const unsigned dt[] = {CCS_DT_INT32, CCS_DT_FLOAT32, CCS_DT_INT64};
    static const unsigned op[] = {CCS_OP_SUM, CCS_OP_MAX, CCS_OP_AVG};
    for (int i = 0; i < 3; i++) {
        struct tg_opts o;
        struct audit a;
        tg_defaults(&o);
        o.ranks = 2;
        o.micro = 8;
        o.dtype = dt[i];
        o.op = op[i];
        run_audit(&a, &o);
        ck_assert_ptr_null(find(&a, FIND_REDUNDANT));
        audit_free(&a);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("audit");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, make_tmpdir, remove_tmpdir);
    tcase_add_test(tc, reader_whole_trace);
    tcase_add_test(tc, reader_truncated_and_no_end);
    tcase_add_test(tc, reader_refuses_broken_files);
    tcase_add_test(tc, hmap_many_keys);
    tcase_add_test(tc, infer_period_cases);
    tcase_add_test(tc, pattern_cases);
    tcase_add_test(tc, expect_parse_cases);
    tcase_add_test(tc, findings_redundant_per_minibatch);
    tcase_add_test(tc, findings_none_per_step);
    tcase_add_test(tc, findings_desync);
    tcase_add_test(tc, findings_inferred_steps_and_deferred);
    tcase_add_test(tc, findings_unmarked_no_coalescing_advice);
    tcase_add_test(tc, findings_group_by_address_and_size);
    tcase_add_test(tc, findings_none_for_integer_or_max);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
