/* tracegen.c - synthetic ccshim traces for the audit tests (see tracegen.h). */
#include "tracegen.h"
#include "ccs_kinds.h"
#include "trace_format.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORLD_COMM 0x9e3779b97f4a7c15ull
#define BUCKET_BASE 0x7f3a00000000ull
#define OLD_BUCKET_BASE 0x7f3900000000ull /* the buckets before --rebuild */
#define CHUNK_RECORDS 4096

/* The functions whose addresses stand for the job's call sites, so that
 * the audit finds real names and lines in this very binary. */
__attribute__((noinline)) void tg_site_reducer_allreduce_bucket(void)
{
    __asm__ volatile("");
}
__attribute__((noinline)) void tg_site_gather_loss(void)
{
    __asm__ volatile("");
}
__attribute__((noinline)) void tg_site_broadcast_params(void)
{
    __asm__ volatile("");
}
__attribute__((noinline)) void tg_site_train_step(void)
{
    __asm__ volatile("");
}

struct writer;
static void put(struct writer *w, const struct ccs_record *r);
static uint64_t fingerprint(unsigned kind, uint64_t count, unsigned dtype, unsigned op, int root);

void tg_defaults(struct tg_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ranks = 4;
    o->steps = 3;
    o->nbuckets = 2;
    o->bucket_bytes[0] = 25u << 20;
    o->bucket_bytes[1] = 10171187; /* 9.7 MiB */
    o->micro = 1;
    o->allgather = 1;
    o->markers = 1;
    o->unmarked_rank = -1;
    o->micro_rank = -1;
    o->head = 1;
    o->desync_rank = o->desync_step = -1;
    o->no_end_rank = -1;
    o->silent_rank = -1;
    o->cut_rank = -1;
    o->late_rank = -1;
    o->hang_rank = -1;
    o->job = "4242";
    o->host = "node1";
    o->dtype = CCS_DT_FLOAT32;
    o->op = CCS_OP_SUM;
}

unsigned tg_dtype_size(unsigned dtype)
{
    switch (dtype) {
    case CCS_DT_INT8:
    case CCS_DT_UINT8:
        return 1;
    case CCS_DT_FLOAT16:
    case CCS_DT_BFLOAT16:
        return 2;
    case CCS_DT_INT32:
    case CCS_DT_UINT32:
    case CCS_DT_FLOAT32:
        return 4;
    case CCS_DT_INT64:
    case CCS_DT_UINT64:
    case CCS_DT_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* One all-reduce of a bucket's kind (datatype, operation) into W. */
static void bucket_call(struct writer *w, const struct tg_opts *o, int rank, uint64_t *seq, uint64_t *t,
                        uint32_t step, uint64_t bytes, uint64_t buf, int deferred, int coalesced)
{
    struct ccs_record r;
    unsigned esz = tg_dtype_size(o->dtype) ? tg_dtype_size(o->dtype) : 4;
    memset(&r, 0, sizeof r);
    r.seq = ++*seq;
    r.comm = WORLD_COMM;
    r.bytes = bytes;
    r.count = r.bytes / esz;
    r.buf = buf;
    r.kind = CCS_KIND_ALLREDUCE;
    r.dtype = (uint8_t)o->dtype;
    r.op = (uint8_t)o->op;
    r.root = -1;
    r.fingerprint = fingerprint(r.kind, r.count, r.dtype, r.op, r.root);
    r.step = step;
    r.site = 1;
    r.backend = CCS_BE_MPI;
    r.flags = CCS_F_IN_PLACE;
    if (deferred)
        r.flags |= CCS_F_DEFERRED;
    else if (coalesced)
        r.flags |= CCS_F_COALESCED;
    r.t_start = *t;
    r.t_dur = deferred ? 800 : 2000 + r.bytes / 1000;
    if (!deferred && o->late_rank >= 0 && rank != o->late_rank)
        r.t_dur += o->late_ns; /* waiting for the late rank */
    put(w, &r);
    *t += r.t_dur + 500;
}

int tg_parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    switch (*end) {
    case 0:
        break;
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end)
        return -1;
    *out = (uint64_t)(v + 0.5);
    return 0;
}

struct writer {
    FILE *f;
    struct ccs_record buf[CHUNK_RECORDS];
    size_t n;
    uint64_t written;
    int err;
};

static void chunk(struct writer *w, uint32_t type, const void *p, uint32_t len)
{
    struct ccs_chunk c = {type, len};
    if (fwrite(&c, sizeof c, 1, w->f) != 1 || (len && fwrite(p, len, 1, w->f) != 1))
        w->err = 1;
}

static void flush_records(struct writer *w)
{
    if (!w->n)
        return;
    chunk(w, CCS_CHUNK_RECORDS, w->buf, (uint32_t)(w->n * sizeof(struct ccs_record)));
    w->written += w->n;
    w->n = 0;
}

static void put(struct writer *w, const struct ccs_record *r)
{
    w->buf[w->n++] = *r;
    if (w->n == CHUNK_RECORDS)
        flush_records(w);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static uint64_t fingerprint(unsigned kind, uint64_t count, unsigned dtype, unsigned op, int root)
{
    return mix(mix(mix(mix(mix(0, kind), count), dtype), op), (uint64_t)(int64_t)root);
}

static void site_chunk(struct writer *w, uint32_t id, void (*fn)(void), const char *name)
{
    unsigned char b[512];
    Dl_info di;
    struct ccs_trace_site s = {id, 2};
    struct ccs_trace_frame fr[2];
    uint64_t base = 0;
    if (dladdr((void *)(uintptr_t)fn, &di) && di.dli_fbase)
        base = (uint64_t)(uintptr_t)di.dli_fbase;
    /* Frames are return addresses: one byte into the function, as a
     * return address always lies past the call (the audit looks up the
     * byte before it, which is then the function's first). */
    fr[0].module = 1;
    fr[0].offset = (uint64_t)(uintptr_t)fn - base + 1;
    fr[0].sym_len = (uint32_t)strlen(name) + 1;
    fr[1].module = 1;
    fr[1].offset = (uint64_t)(uintptr_t)tg_site_train_step - base + 1;
    fr[1].sym_len = (uint32_t)strlen("tg_site_train_step") + 1;
    size_t o = 0;
    memcpy(b + o, &s, sizeof s);
    o += sizeof s;
    memcpy(b + o, fr, sizeof fr);
    o += sizeof fr;
    memcpy(b + o, name, fr[0].sym_len);
    o += fr[0].sym_len;
    memcpy(b + o, "tg_site_train_step", fr[1].sym_len);
    o += fr[1].sym_len;
    chunk(w, CCS_CHUNK_SITE, b, (uint32_t)o);
}

static void header(struct ccs_trace_header *h, int rank, int size)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CCS_TRACE_MAGIC, 8);
    h->version = CCS_TRACE_VERSION;
    h->byteorder = CCS_TRACE_BYTEORDER;
    h->header_size = sizeof *h;
    h->record_size = sizeof(struct ccs_record);
    h->rank = rank;
    h->size = size;
    h->pid = 1000u + (uint32_t)rank;
    h->start_realtime_ns = 1767225600000000000ull + (uint64_t)rank * 1000u;
    h->start_mono_ns = 5000000000ull;
}

/* Where a rank's calls stand: the last sequence number and the clock. */
struct rank_clock {
    uint64_t seq, t;
};

/* Writes call R of the world communicator, numbered and timed: it starts
 * now, lasts DUR and the next starts GAP after its start. */
static void world_call(struct writer *w, struct rank_clock *clock, struct ccs_record *r, uint64_t dur, uint64_t gap)
{
    r->seq = ++clock->seq;
    r->comm = WORLD_COMM;
    r->fingerprint = fingerprint(r->kind, r->count, r->dtype, r->op, r->root);
    r->backend = CCS_BE_MPI;
    r->t_start = clock->t;
    r->t_dur = dur;
    put(w, r);
    clock->t += gap;
}

/* The three call sites (before the calls, or after them with --late-sites,
 * as the runtime's writer does for a site first seen during a flush). */
static void write_sites(struct writer *w)
{
    site_chunk(w, 1, tg_site_reducer_allreduce_bucket, "tg_site_reducer_allreduce_bucket");
    site_chunk(w, 2, tg_site_gather_loss, "tg_site_gather_loss");
    site_chunk(w, 3, tg_site_broadcast_params, "tg_site_broadcast_params");
}

/* The chunks before the calls: header, metadata, the world communicator,
 * this program as the one module, and the three call sites. */
static void write_preamble(struct writer *w, const struct tg_opts *o, int rank)
{
    struct ccs_trace_header h;
    header(&h, rank, o->ranks);
    if (fwrite(&h, sizeof h, 1, w->f) != 1)
        w->err = 1;
    char exe[PATH_MAX] = "";
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[el > 0 ? el : 0] = 0;
    char meta[PATH_MAX + 200];
    int ml = snprintf(meta, sizeof meta, "host=%s\njob=%s\nexe=%s\nversion=0.1.0\n", o->host, o->job, exe);
    chunk(w, CCS_CHUNK_META, meta, (uint32_t)ml);
    struct ccs_trace_comm c = {WORLD_COMM, 0, 0x44000000, rank, o->ranks, CCS_BE_MPI, CCS_KIND_COMM_INIT, -1, 0};
    chunk(w, CCS_CHUNK_COMM, &c, sizeof c);
    unsigned char mb[PATH_MAX + 16];
    struct ccs_trace_module m = {1, (uint32_t)strlen(exe)};
    memcpy(mb, &m, sizeof m);
    memcpy(mb + sizeof m, exe, m.path_len);
    chunk(w, CCS_CHUNK_MODULE, mb, (uint32_t)(sizeof m + m.path_len));
    if (!o->late_sites)
        write_sites(w);
}

/* The set-up before the first step: O->head broadcasts of the parameters. */
static void write_head(struct writer *w, const struct tg_opts *o, struct rank_clock *clock)
{
    for (int i = 0; i < o->head; i++) {
        struct ccs_record r;
        memset(&r, 0, sizeof r);
        r.count = 1u << 20;
        r.bytes = 4u << 20;
        r.buf = 0x7f2000000000ull + (uint64_t)i * (8u << 20);
        r.kind = CCS_KIND_BCAST;
        r.dtype = CCS_DT_FLOAT32;
        r.root = 0;
        r.site = 3;
        world_call(w, clock, &r, 3000, 4000);
    }
}

/* --desync: the one rank's extra all-reduce (a MAX of one int32). */
static void write_odd_call(struct writer *w, struct rank_clock *clock, uint32_t step)
{
    struct ccs_record r;
    memset(&r, 0, sizeof r);
    r.bytes = 4;
    r.count = 1;
    r.buf = 0x7f1000000000ull;
    r.kind = CCS_KIND_ALLREDUCE;
    r.dtype = CCS_DT_INT32;
    r.op = CCS_OP_MAX;
    r.root = -1;
    r.step = step;
    r.site = 2;
    world_call(w, clock, &r, 1500, 2000);
}

/* The loss's all-gather of two floats. */
static void write_gather(struct writer *w, struct rank_clock *clock, uint32_t step)
{
    struct ccs_record r;
    memset(&r, 0, sizeof r);
    r.bytes = 8;
    r.count = 2;
    r.buf = 0x7f1100000000ull;
    r.kind = CCS_KIND_ALLGATHER;
    r.dtype = CCS_DT_FLOAT32;
    r.root = -1;
    r.step = step;
    r.site = 2;
    world_call(w, clock, &r, 1200, 1700);
}

/* The marker that ends step S (a marker is no call: no sequence number). */
static void write_step_mark(struct writer *w, struct rank_clock *clock, int s)
{
    struct ccs_record r;
    memset(&r, 0, sizeof r);
    r.kind = CCS_KIND_STEP;
    r.step = (uint32_t)s + 1;
    r.root = -1;
    r.t_start = clock->t;
    put(w, &r);
    clock->t += 100;
}

/* Step S of RANK: each mini-batch reduces every bucket, then the optional
 * alias, extra call, all-gather and marker. */
static void write_step(struct writer *w, const struct tg_opts *o, int rank, int s, struct rank_clock *clock)
{
    int marks = o->markers && rank != o->unmarked_rank;
    uint32_t step = marks ? (uint32_t)s : 0;
    int micro = rank == o->micro_rank ? o->micro_of : o->micro;
    for (int mb = 0; mb < micro; mb++) {
        clock->t += 50000; /* the mini-batch's compute */
        for (int b = 0; b < o->nbuckets; b++)
            bucket_call(w, o, rank, &clock->seq, &clock->t, step, o->bucket_bytes[b],
                        (o->rebuild && s == 0 && mb == 0 ? OLD_BUCKET_BASE : BUCKET_BASE) +
                            (uint64_t)b * (64u << 20),
                        o->deferred && s >= o->deferred_from && mb < micro - 1,
                        o->deferred && s >= o->deferred_from);
    }
    if (o->alias_bytes) /* another size at bucket 0's address */
        bucket_call(w, o, rank, &clock->seq, &clock->t, step, o->alias_bytes, BUCKET_BASE, 0, 0);
    if (rank == o->desync_rank && s == o->desync_step)
        write_odd_call(w, clock, step);
    if (o->allgather)
        write_gather(w, clock, step);
    if (marks)
        write_step_mark(w, clock, s);
}

/* --cut: drops the last BYTES of PATH.  0, or -1. */
static int cut_file(const char *path, long bytes)
{
    FILE *f = fopen(path, "rb");
    long sz = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        sz = ftell(f);
    if (f)
        fclose(f);
    return sz < bytes || truncate(path, sz - bytes) != 0 ? -1 : 0;
}

int tg_write_rank(const char *dir, const struct tg_opts *o, int rank, char *path, size_t n)
{
    snprintf(path, n, "%s/ccshim-%s-%s-r%d-p%d.cctrace", dir, o->job, o->host, rank, 1000 + rank);
    struct writer *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->f = fopen(path, "wb");
    if (!w->f) {
        free(w);
        return -1;
    }
    write_preamble(w, o, rank);
    struct rank_clock clock = {.seq = 0, .t = 1000};
    int silent = o->silent_rank == rank || o->silent_rank == -2;
    if (!silent)
        write_head(w, o, &clock);
    for (int s = 0; s < o->steps && !silent; s++)
        write_step(w, o, rank, s, &clock);
    flush_records(w);
    if (o->late_sites)
        write_sites(w);
    if (o->hang_rank >= 0 && rank != o->hang_rank && !silent) {
        /* --hang: the next bucket reduction, that the hang rank never
         * makes, in progress at the end (as the runtime writes it at a
         * fatal signal): 2 s in it so far. */
        bucket_call(w, o, rank, &clock.seq, &clock.t, o->markers ? (uint32_t)o->steps : 0, o->bucket_bytes[0],
                    BUCKET_BASE, 0, 0);
        w->buf[0].t_dur = 2000000000ull;
        chunk(w, CCS_CHUNK_INFLIGHT, w->buf, (uint32_t)(w->n * sizeof(struct ccs_record)));
        w->n = 0;
    }
    if (rank != o->no_end_rank) {
        struct ccs_trace_end e = {w->written, o->dropped, (uint64_t)o->steps,
                                  o->hang_rank >= 0 ? CCS_END_SIGNAL : CCS_END_FINALIZE, o->hang_rank >= 0 ? 15 : 0};
        chunk(w, CCS_CHUNK_END, &e, sizeof e);
    }
    int err = w->err | (fclose(w->f) != 0);
    free(w);
    if (!err && rank == o->cut_rank)
        err = cut_file(path, o->cut_bytes) != 0;
    return err ? -1 : 0;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

int tg_write_job(const char *dir, const struct tg_opts *o)
{
    char path[4096];
    for (int r = 0; r < o->ranks; r++)
        if (tg_write_rank(dir, o, r, path, sizeof path) != 0)
            return -1;
    if (o->reports) {
        char text[512];
        int r = o->desync_rank >= 0 ? o->desync_rank : 0;
        snprintf(path, sizeof path, "%s/ccshim-desync-%s-r%d.txt", dir, o->job, r);
        snprintf(text, sizeof text,
                 "# ccshim desync report\nrank %d issued allreduce (seq %d) while the others issued allgather\n"
                 "ranks: %d\n",
                 r, 2, o->ranks);
        if (write_text(path, text) != 0)
            return -1;
        snprintf(path, sizeof path, "%s/ccshim-%s-%s-r%d-p%d.flight", dir, o->job, o->host, r, 1000 + r);
        if (write_text(path, "flight recorder: last 2 calls\nallreduce seq 1\nallgather seq 2\n") != 0)
            return -1;
    }
    return 0;
}

int tg_write_broken(const char *path, const char *kind)
{
    struct ccs_trace_header h;
    header(&h, 0, 1);
    size_t len = sizeof h;
    if (strcmp(kind, "not-a-trace") == 0)
        return write_text(path, "this is a text file, not a trace\n");
    else if (strcmp(kind, "newer-version") == 0)
        h.version = CCS_TRACE_VERSION + 1;
    else if (strcmp(kind, "other-byteorder") == 0)
        h.byteorder = __builtin_bswap32(CCS_TRACE_BYTEORDER);
    else if (strcmp(kind, "truncated-header") == 0)
        len = 20;
    else if (strcmp(kind, "damaged-chunk") != 0)
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int err = fwrite(&h, len, 1, f) != 1;
    if (strcmp(kind, "damaged-chunk") == 0) {
        /* A chunk claiming far more than any writer makes. */
        struct ccs_chunk c = {CCS_CHUNK_RECORDS, 0xfffffff0u};
        err |= fwrite(&c, sizeof c, 1, f) != 1;
    }
    return (fclose(f) != 0 || err) ? -1 : 0;
}
