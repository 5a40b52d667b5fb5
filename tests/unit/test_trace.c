/* test_trace.c - the trace writer and reader round trip, and the reader's
 * answers to damaged files. */
#include "ccs_config.h"
#include "ccshim.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "runtime.h"
#include "trace_format.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "unit_main.h"
#include <ftw.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Each test runs in its own process (CK_FORK): its directory goes with it. */
static void remove_dir(void)
{
    if (dir[0])
        nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ccshim-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    atexit(remove_dir);
    ccs_cfg.trace_dir = dir;
    ccs_runtime_set_world(3, 4);
}

static void one(struct ccs_comm *c, unsigned kind, uint64_t count)
{
    struct ccs_call call = {.kind = (uint16_t)kind, .dtype = CCS_DT_FLOAT64, .op = CCS_OP_SUM,
                            .backend = CCS_BE_MPI, .root = -1, .count = count, .bytes = count * 8};
    ccs_call_end(ccs_call_begin(c, &call, __builtin_return_address(0)), 0);
}

/* Writes a trace with 3 allreduce + 1 bcast on one comm; returns its path. */
static const char *write_sample(void)
{
    make_dir();
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0xabc, 0x1234, 0, 3, 4, CCS_KIND_COMM_INIT, -1);
    for (int i = 0; i < 3; i++)
        one(c, CCS_KIND_ALLREDUCE, 100);
    one(c, CCS_KIND_BCAST, 7);
    ck_assert_int_eq(ccs_writer_flush(CCS_END_EXIT, 0), 0);
    const char *p = ccs_writer_path();
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(round_trip)
{
    const char *path = write_sample();
    char want[64];
    snprintf(want, sizeof want, "-r3-p%d.cctrace", (int)getpid());
    ck_assert_ptr_nonnull(strstr(path, want));
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_int_eq(ccs_trace_hdr(r)->rank, 3);
    ck_assert_int_eq(ccs_trace_hdr(r)->size, 4);
    struct ccs_item it;
    int comms = 0, sites = 0, recs = 0, ends = 0, rc;
    uint64_t seqs[8];
    while ((rc = ccs_trace_next(r, &it, err, sizeof err)) == 1) {
        switch (it.type) {
        case CCS_ITEM_COMM:
            if (it.u.comm.id == 0x1234)
                comms++;
            break;
        case CCS_ITEM_SITE:
            sites++;
            ck_assert_uint_ge(it.u.site.depth, 1);
            break;
        case CCS_ITEM_RECORD:
            ck_assert_uint_eq(it.u.record.comm, 0x1234);
            seqs[recs++] = it.u.record.seq;
            break;
        case CCS_ITEM_END:
            ends++;
            ck_assert_uint_eq(it.u.end.records, 4);
            ck_assert_uint_eq(it.u.end.dropped, 0);
            ck_assert_int_eq(it.u.end.reason, CCS_END_EXIT);
            break;
        default:
            break;
        }
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(comms, 1);
    ck_assert_int_ge(sites, 1);
    ck_assert_int_eq(recs, 4);
    ck_assert_int_eq(ends, 1);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(seqs[i], (uint64_t)i + 1);
    ck_assert_int_eq(ccs_trace_truncated(r), 0);
    ck_assert_str_eq(ccs_trace_meta(r, "rank"), "3");
    ccs_trace_close(r);
}
END_TEST

static long file_size(const char *p)
{
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

START_TEST(truncated_is_reported)
{
    const char *path = write_sample();
    ck_assert_int_eq(truncate(path, file_size(path) - 30), 0); /* cuts into the END chunk */
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    ck_assert_ptr_nonnull(r);
    struct ccs_item it;
    int rc, recs = 0;
    while ((rc = ccs_trace_next(r, &it, err, sizeof err)) == 1)
        recs += it.type == CCS_ITEM_RECORD;
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(recs, 4); /* every whole record before the cut */
    ck_assert_int_eq(ccs_trace_truncated(r), 1);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    ck_assert_ptr_nonnull(strstr(err, path));
    ccs_trace_close(r);
}
END_TEST

static void write_bytes(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

START_TEST(refuses_what_it_cannot_read)
{
    char p[300], err[512];
    make_dir();
    snprintf(p, sizeof p, "%s/junk.cctrace", dir);
    write_bytes(p, "hello world, not a trace at all, no no no no no no no no no no no no", 64);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "not a ccshim trace"));
    ck_assert_ptr_nonnull(strstr(err, "junk.cctrace"));

    struct ccs_trace_header h = {.version = CCS_TRACE_VERSION + 1, .byteorder = CCS_TRACE_BYTEORDER,
                                 .header_size = sizeof h, .record_size = sizeof(struct ccs_record)};
    memcpy(h.magic, CCS_TRACE_MAGIC, 8);
    write_bytes(p, &h, sizeof h);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "newer"));

    h.version = CCS_TRACE_VERSION;
    h.byteorder = 0x04030201u;
    write_bytes(p, &h, sizeof h);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "byte order"));

    h.byteorder = CCS_TRACE_BYTEORDER;
    write_bytes(p, &h, 20);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "truncated header"));

    snprintf(p, sizeof p, "%s/missing.cctrace", dir);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
}
END_TEST

START_TEST(damaged_chunk_length)
{
    char p[300], err[512];
    make_dir();
    snprintf(p, sizeof p, "%s/big.cctrace", dir);
    struct {
        struct ccs_trace_header h;
        struct ccs_chunk c;
    } f = {.h = {.version = CCS_TRACE_VERSION, .byteorder = CCS_TRACE_BYTEORDER, .header_size = sizeof f.h,
                 .record_size = sizeof(struct ccs_record)},
           .c = {.type = CCS_CHUNK_RECORDS, .length = 0xfffffff0u}};
    memcpy(f.h.magic, CCS_TRACE_MAGIC, 8);
    write_bytes(p, &f, sizeof f);
    struct ccs_trace_reader *r = ccs_trace_open(p, err, sizeof err);
    ck_assert_ptr_nonnull(r);
    struct ccs_item it;
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "damaged"));
    ccs_trace_close(r);
}
END_TEST

/* Annotated (Python) sites: interned once, current process-wide until the
 * next call, written as PYSITE chunks, read back with each record's id. */
START_TEST(pysite_round_trip)
{
    make_dir();
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0xabd, 0x4321, 0, 3, 4, CCS_KIND_COMM_INIT, -1);
    one(c, CCS_KIND_ALLREDUCE, 1); /* before any: 0 */
    uint32_t a = ccshim_annotate("train.py:10 in step");
    ck_assert_uint_eq(a, 1);
    one(c, CCS_KIND_ALLREDUCE, 2);
    uint32_t b = ccshim_annotate("train.py:20 in step");
    ck_assert_uint_eq(b, 2);
    ck_assert_uint_eq(ccshim_annotate_current(), b);
    one(c, CCS_KIND_ALLREDUCE, 3);
    ck_assert_uint_eq(ccshim_annotate("train.py:10 in step"), a); /* interned once */
    ccshim_annotate_id(b);
    one(c, CCS_KIND_ALLREDUCE, 4);
    ccshim_annotate_id(999); /* never returned: clears */
    ck_assert_uint_eq(ccshim_annotate_current(), 0);
    one(c, CCS_KIND_ALLREDUCE, 5);
    ck_assert_uint_eq(ccshim_annotate(""), 0);
    ck_assert_uint_eq(ccshim_annotate(NULL), 0);
    ccshim_annotate_id(a);
    one(c, CCS_KIND_ALLREDUCE, 6);
    ccshim_annotate_id(0);
    one(c, CCS_KIND_ALLREDUCE, 7);
    ck_assert_int_eq(ccs_writer_flush(CCS_END_EXIT, 0), 0);
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(ccs_writer_path(), err, sizeof err);
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_uint_eq(ccs_trace_hdr(r)->version, CCS_TRACE_VERSION);
    struct ccs_item it;
    char texts[3][64] = {"", "", ""};
    uint32_t got[8];
    int n = 0, npy = 0, rc;
    while ((rc = ccs_trace_next(r, &it, err, sizeof err)) == 1) {
        if (it.type == CCS_ITEM_PYSITE) {
            ck_assert_uint_le(it.u.pysite.id, 2);
            ck_assert_int_eq(n, it.u.pysite.id == 1 ? 0 : n); /* written before the records */
            snprintf(texts[it.u.pysite.id], sizeof texts[0], "%s", it.u.pysite.text);
            npy++;
        } else if (it.type == CCS_ITEM_RECORD && n < 8) {
            got[n++] = it.u.record.pysite;
        }
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(npy, 2);
    ck_assert_str_eq(texts[1], "train.py:10 in step");
    ck_assert_str_eq(texts[2], "train.py:20 in step");
    ck_assert_int_eq(n, 7);
    uint32_t want[7] = {0, 1, 2, 2, 0, 1, 0};
    for (int i = 0; i < 7; i++)
        ck_assert_msg(got[i] == want[i], "record %d: pysite %u, expected %u", i, got[i], want[i]);
    ccs_trace_close(r);
}
END_TEST

/* A version-2 trace (before the torch helper's records of backend
 * torch.distributed, version 3) still reads: its records are today's. */
START_TEST(reads_version_2)
{
    char p[300], err[512];
    make_dir();
    snprintf(p, sizeof p, "%s/v2.cctrace", dir);
    struct ccs_record rec = {
        .seq = 3, .comm = 9, .kind = CCS_KIND_BCAST, .root = 0, .pysite = 0, .backend = CCS_BE_MPI};
    struct ccs_trace_header h = {.version = 2,
                                 .byteorder = CCS_TRACE_BYTEORDER,
                                 .header_size = sizeof h,
                                 .record_size = sizeof rec,
                                 .rank = 0,
                                 .size = 1};
    memcpy(h.magic, CCS_TRACE_MAGIC, 8);
    struct ccs_chunk c = {.type = CCS_CHUNK_RECORDS, .length = sizeof rec},
                     e = {.type = CCS_CHUNK_END, .length = sizeof(struct ccs_trace_end)};
    struct ccs_trace_end end = {.records = 1};
    unsigned char v2[sizeof h + 2 * sizeof c + sizeof rec + sizeof end];
    size_t o = 0;
    memcpy(v2 + o, &h, sizeof h), o += sizeof h;
    memcpy(v2 + o, &c, sizeof c), o += sizeof c;
    memcpy(v2 + o, &rec, sizeof rec), o += sizeof rec;
    memcpy(v2 + o, &e, sizeof e), o += sizeof e;
    memcpy(v2 + o, &end, sizeof end), o += sizeof end;
    write_bytes(p, v2, sizeof v2);
    struct ccs_trace_reader *r = ccs_trace_open(p, err, sizeof err);
    ck_assert_msg(r != NULL, "%s", err);
    struct ccs_item it;
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 1);
    ck_assert_int_eq(it.type, CCS_ITEM_RECORD);
    ck_assert_uint_eq(it.u.record.seq, 3);
    ck_assert_uint_eq(it.u.record.kind, CCS_KIND_BCAST);
    ck_assert_uint_eq(it.u.record.backend, CCS_BE_MPI);
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 1);
    ck_assert_int_eq(it.type, CCS_ITEM_END);
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 0);
    ck_assert_int_eq(ccs_trace_truncated(r), 0);
    ccs_trace_close(r);
}
END_TEST

/* A version-1 trace (before annotated sites) still reads: its records'
 * former `reserved` word is not taken for a site; a bad PYSITE is damage. */
START_TEST(reads_version_1)
{
    char p[300], err[512];
    make_dir();
    snprintf(p, sizeof p, "%s/v1.cctrace", dir);
    /* A version-1 record: the first 88 bytes of today's, then the next chunk. */
    struct ccs_record rec = {.seq = 1, .comm = 9, .kind = CCS_KIND_ALLREDUCE, .root = -1, .sig = 5};
    struct ccs_trace_header h = {.version = 1, .byteorder = CCS_TRACE_BYTEORDER, .header_size = sizeof h,
                                 .record_size = CCS_TRACE_RECORD_V1_SIZE, .rank = 0, .size = 1};
    memcpy(h.magic, CCS_TRACE_MAGIC, 8);
    struct ccs_chunk c = {.type = CCS_CHUNK_RECORDS, .length = CCS_TRACE_RECORD_V1_SIZE},
                     e = {.type = CCS_CHUNK_END, .length = sizeof(struct ccs_trace_end)};
    struct ccs_trace_end end = {.records = 1};
    unsigned char v1[sizeof h + 2 * sizeof c + CCS_TRACE_RECORD_V1_SIZE + sizeof end];
    size_t o = 0;
    memcpy(v1 + o, &h, sizeof h), o += sizeof h;
    memcpy(v1 + o, &c, sizeof c), o += sizeof c;
    memcpy(v1 + o, &rec, CCS_TRACE_RECORD_V1_SIZE), o += CCS_TRACE_RECORD_V1_SIZE;
    memcpy(v1 + o, &e, sizeof e), o += sizeof e;
    memcpy(v1 + o, &end, sizeof end), o += sizeof end;
    ck_assert_uint_eq(o, sizeof v1);
    write_bytes(p, v1, sizeof v1);
    struct ccs_trace_reader *r = ccs_trace_open(p, err, sizeof err);
    ck_assert_msg(r != NULL, "%s", err);
    struct ccs_item it;
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 1);
    ck_assert_int_eq(it.type, CCS_ITEM_RECORD);
    ck_assert_uint_eq(it.u.record.seq, 1);
    ck_assert_uint_eq(it.u.record.kind, CCS_KIND_ALLREDUCE);
    ck_assert_uint_eq(it.u.record.sig, 5);
    ck_assert_uint_eq(it.u.record.pysite, 0);
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 1);
    ck_assert_int_eq(it.type, CCS_ITEM_END);
    ck_assert_uint_eq(it.u.end.records, 1);
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), 0);
    ck_assert_int_eq(ccs_trace_truncated(r), 0);
    ccs_trace_close(r);

    /* A version-1 header with version-2 records, or the reverse, is refused. */
    h.record_size = sizeof(struct ccs_record);
    write_bytes(p, &h, sizeof h);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "expected record 88"));
    h.version = 2;
    h.record_size = CCS_TRACE_RECORD_V1_SIZE;
    write_bytes(p, &h, sizeof h);
    ck_assert_ptr_null(ccs_trace_open(p, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "expected record 96"));

    /* A PYSITE whose text runs past its chunk is damage. */
    h.record_size = sizeof(struct ccs_record);
    struct {
        struct ccs_trace_header h;
        struct ccs_chunk c;
        struct ccs_trace_pysite ps;
        char text[4];
    } g = {.h = h, .c = {.type = CCS_CHUNK_PYSITE, .length = sizeof g.ps + 4}, .ps = {.id = 1, .text_len = 40},
           .text = "a.py"};
    write_bytes(p, &g, sizeof g);
    r = ccs_trace_open(p, err, sizeof err);
    ck_assert_int_eq(ccs_trace_next(r, &it, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "damaged pysite chunk"));
    ccs_trace_close(r);
}
END_TEST

START_TEST(unwritable_dir_turns_tracing_off)
{
    /* The runtime checks the directory at start; the writer itself also
     * fails cleanly when the directory vanished. */
    ccs_cfg.trace_dir = "/proc/ccshim-nonexistent/dir";
    ccs_runtime_set_world(0, 1);
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0xdef, 0x55, 0, 0, 1, 0, -1);
    one(c, CCS_KIND_ALLREDUCE, 1);
    ck_assert_int_eq(ccs_writer_flush(CCS_END_EXIT, 0), -1);
    ck_assert_ptr_null(ccs_writer_path());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = tcase_create("roundtrip");
    tcase_add_test(t, round_trip);
    tcase_add_test(t, truncated_is_reported);
    tcase_add_test(t, refuses_what_it_cannot_read);
    tcase_add_test(t, damaged_chunk_length);
    tcase_add_test(t, unwritable_dir_turns_tracing_off);
    tcase_add_test(t, pysite_round_trip);
    tcase_add_test(t, reads_version_1);
    tcase_add_test(t, reads_version_2);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
