/*
 * fuzz_seeds.c - writes the seed corpora of the fuzz targets (docs/fuzzing.md)
 * from the project's own structures and encoders, so that each target
 * starts from valid inputs and mutates past their checks:
 *   fuzz_seeds DIR      writes DIR/<target>/seed-* (tests/fuzz/corpus is
 *                       what it wrote, committed; regress-* there are
 *                       inputs that once found a bug, kept by hand)
 * Traces: versions 3, 2 and 1, every chunk type (META, COMM, MODULE, SITE
 * with symbol names, RECORDS, END, EXT, PYSITE, and from version 2
 * INFLIGHT with an END of signal 15; in version 3 a torch.distributed
 * group and the torch helper's records on it), whole and cut.
 * Side channel: statuses, verdicts, the handshake and sealed frames in
 * the input formats of fuzz_dsx_*.c.  Settings: every CCSHIM_* row with
 * good and bad values.  --expect rules.
 */
#include "ccs_config.h"
#include "ccs_kinds.h"
#include "desync_agg.h"
#include "desync_conn.h"
#include "trace_format.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *top;

static void put(const char *target, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", top, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", top, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, n, 1, f) != 1) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* A growing byte buffer. */
struct buf {
    unsigned char b[1 << 16];
    size_t n;
};

static void add(struct buf *b, const void *p, size_t n)
{
    if (b->n + n > sizeof b->b)
        abort();
    if (n)
        memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void add8(struct buf *b, uint8_t v)
{
    add(b, &v, 1);
}
static void add16(struct buf *b, uint16_t v)
{
    add(b, &v, 2);
}

/* ------------------------------------------------------------- traces */

static void chunk(struct buf *b, uint32_t type, const void *p, uint32_t len)
{
    struct ccs_chunk c = {type, len};
    add(b, &c, sizeof c);
    add(b, p, len);
}

/* A trace of VERSION with every chunk type; CUT > 0 drops that many bytes
 * from the end. */
static void trace(const char *name, unsigned version, int pysite, size_t cut)
{
    static struct buf b;
    b.n = 0;
    size_t rsize = version == 1 ? CCS_TRACE_RECORD_V1_SIZE : sizeof(struct ccs_record);
    struct ccs_trace_header h = {.version = version,
                                 .byteorder = CCS_TRACE_BYTEORDER,
                                 .header_size = sizeof h,
                                 .record_size = (uint32_t)rsize,
                                 .rank = 1,
                                 .size = 2,
                                 .pid = 4242,
                                 .start_realtime_ns = 1700000000000000000ull,
                                 .start_mono_ns = 1000};
    memcpy(h.magic, CCS_TRACE_MAGIC, 8);
    add(&b, &h, sizeof h);
    const char meta[] = "host=node7\njob=fuzz\nexe=/usr/bin/python3\nversion=0.1.0\nbackend=mpi\n";
    chunk(&b, CCS_CHUNK_META, meta, sizeof meta - 1);
    struct ccs_trace_comm c = {.id = 0x1111,
                               .parent = 0,
                               .handle = 0x44,
                               .rank = 1,
                               .size = 2,
                               .backend = CCS_BE_MPI,
                               .how = 0,
                               .color = -1,
                               .t_created = 10};
    chunk(&b, CCS_CHUNK_COMM, &c, sizeof c);
    struct ccs_trace_comm c2 = c;
    c2.id = 0x2222, c2.parent = 0x1111, c2.how = CCS_KIND_ALLREDUCE, c2.color = 3;
    chunk(&b, CCS_CHUNK_COMM, &c2, sizeof c2);
    if (version >= 3) { /* a torch.distributed group, for the torch helper's records */
        struct ccs_trace_comm c3 = c;
        c3.id = 0x3333, c3.handle = 0, c3.backend = CCS_BE_TORCH, c3.how = CCS_KIND_COMM_INIT;
        chunk(&b, CCS_CHUNK_COMM, &c3, sizeof c3);
    }
    {
        unsigned char mb[256];
        const char path[] = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
        struct ccs_trace_module m = {.id = 1, .path_len = sizeof path - 1};
        memcpy(mb, &m, sizeof m);
        memcpy(mb + sizeof m, path, sizeof path - 1);
        chunk(&b, CCS_CHUNK_MODULE, mb, (uint32_t)(sizeof m + sizeof path - 1));
    }
    {
        unsigned char sb[512];
        const char *syms[3] = {"MPI_Allreduce", "train_step", NULL};
        struct ccs_trace_site s = {.id = 1, .depth = 3};
        size_t o = sizeof s;
        memcpy(sb, &s, sizeof s);
        struct ccs_trace_frame fr[3];
        for (int i = 0; i < 3; i++)
            fr[i] = (struct ccs_trace_frame){.module = 1,
                                             .sym_len = syms[i] ? (uint32_t)strlen(syms[i]) + 1 : 0,
                                             .offset = 0x1000u * (unsigned)(i + 1)};
        memcpy(sb + o, fr, sizeof fr);
        o += sizeof fr;
        for (int i = 0; i < 3; i++)
            if (syms[i]) {
                memcpy(sb + o, syms[i], strlen(syms[i]) + 1);
                o += strlen(syms[i]) + 1;
            }
        chunk(&b, CCS_CHUNK_SITE, sb, (uint32_t)o);
    }
    if (pysite) {
        unsigned char pb[128];
        const char text[] = "train.py:318 in train_step";
        struct ccs_trace_pysite p = {.id = 1, .text_len = sizeof text - 1};
        memcpy(pb, &p, sizeof p);
        memcpy(pb + sizeof p, text, sizeof text - 1);
        chunk(&b, CCS_CHUNK_PYSITE, pb, (uint32_t)(sizeof p + sizeof text - 1));
    }
    chunk(&b, CCS_CHUNK_EXT, "later", 5); /* readers skip it */
    /* Two steps of two mini-batches: all-reduces of two buckets, an
     * all-gather, a step mark; one deferred, one nonblocking. */
    unsigned char rb[64 * sizeof(struct ccs_record)];
    size_t nr = 0;
    uint64_t seq = 0;
    for (uint32_t step = 0; step < 2; step++) {
        for (int micro = 0; micro < 2; micro++)
            for (int bucket = 0; bucket < 2; bucket++) {
                struct ccs_record r = {.seq = ++seq,
                                       .comm = 0x1111,
                                       .fingerprint = 0xabc0 + (uint64_t)bucket,
                                       .bytes = 4096u << bucket,
                                       .count = 1024u << bucket,
                                       .buf = 0x7f0000000000ull + 0x100000ull * (uint64_t)bucket,
                                       .t_start = 1000 * seq,
                                       .t_dur = 50,
                                       .step = step,
                                       .site = 1,
                                       .root = -1,
                                       .kind = CCS_KIND_ALLREDUCE,
                                       .dtype = CCS_DT_FLOAT32,
                                       .op = CCS_OP_SUM,
                                       .flags = micro == 0 && bucket == 1 ? CCS_F_DEFERRED : 0,
                                       .backend = CCS_BE_MPI,
                                       .pysite = pysite ? 1 : 0};
                memcpy(rb + nr++ * rsize, &r, rsize);
            }
        struct ccs_record g = {.seq = ++seq,
                               .comm = 0x2222,
                               .fingerprint = 0x77,
                               .bytes = 8,
                               .count = 1,
                               .t_start = 1000 * seq,
                               .step = step,
                               .root = -1,
                               .kind = CCS_KIND_ALLGATHER,
                               .dtype = CCS_DT_FLOAT64,
                               .flags = CCS_F_NONBLOCKING,
                               .backend = CCS_BE_MPI};
        memcpy(rb + nr++ * rsize, &g, rsize);
        if (version >= 3) { /* an all_gather_object on gloo, as the torch helper records it */
            struct ccs_record t = {.comm = 0x3333,
                                   .t_start = 1000 * seq + 1,
                                   .t_dur = 500,
                                   .step = step,
                                   .root = -1,
                                   .kind = CCS_KIND_ALLGATHER,
                                   .backend = CCS_BE_TORCH,
                                   .sig = CCS_TC_ALL_GATHER_OBJECT,
                                   .pysite = pysite ? 1 : 0};
            memcpy(rb + nr++ * rsize, &t, rsize);
        }
        struct ccs_record m = {.t_start = 1000 * seq + 1, .step = step + 1, .root = -1, .kind = CCS_KIND_STEP};
        memcpy(rb + nr++ * rsize, &m, rsize);
    }
    chunk(&b, CCS_CHUNK_RECORDS, rb, (uint32_t)(nr * rsize));
    if (version >= 2) { /* the call in progress at a fatal signal (INFLIGHT) */
        struct ccs_record r = {.seq = 9, .comm = 0x1111, .fingerprint = 0xabc0, .bytes = 4096, .count = 1024,
                               .buf = 0x7f0000000000ull, .t_start = 20000, .t_dur = 2000000000ull, .step = 2,
                               .site = 1, .root = -1, .kind = CCS_KIND_ALLREDUCE, .dtype = CCS_DT_FLOAT32,
                               .op = CCS_OP_SUM, .backend = CCS_BE_MPI};
        chunk(&b, CCS_CHUNK_INFLIGHT, &r, (uint32_t)rsize);
    }
    struct ccs_trace_end e = {.records = nr, .dropped = 0, .steps = 2,
                              .reason = version >= 2 ? CCS_END_SIGNAL : CCS_END_FINALIZE,
                              .signo = version >= 2 ? 15 : 0};
    chunk(&b, CCS_CHUNK_END, &e, sizeof e);
    if (cut) /* cut inside the END chunk and into the records */
        b.n -= cut < b.n ? cut : 0;
    put("fuzz_trace", name, b.b, b.n);
}

/* ------------------------------------------------------- side channel */

#define WSIZE 4

static struct ccs_dsx_op op(uint64_t seq, unsigned kind, uint64_t count)
{
    return (struct ccs_dsx_op){.seq = seq,
                               .fp = 0x5000 + seq * 7 + kind,
                               .count = count,
                               .site = 1,
                               .root = -1,
                               .step = (uint32_t)(seq / 4),
                               .kind = (uint16_t)kind,
                               .dtype = CCS_DT_FLOAT32,
                               .op = CCS_OP_SUM};
}

/* Rank R's status: one world communicator, blocked at seq 9 in KIND when
 * BLOCKED, with its last operations; one idle split. */
static void status(struct ccs_dsx_status *st, int32_t r, int blocked, unsigned kind)
{
    memset(st, 0, sizeof *st);
    st->magic = CCS_DSX_MAGIC;
    st->version = CCS_DSX_VERSION;
    st->wrank = r;
    st->wsize = WSIZE;
    st->pid = 1000 + (uint32_t)r;
    st->beat = 7;
    st->ncomm = 2;
    snprintf(st->host, sizeof st->host, "node%d", r / 2);
    struct ccs_dsx_comm *c = &st->comm[0];
    c->id = 0xc0ffee;
    c->rank = r;
    c->size = WSIZE;
    c->issued = blocked ? 9 : 8;
    c->done = 8;
    c->hash = 0x1234;
    c->state = blocked ? CCS_DSX_BLOCKED : CCS_DSX_IDLE;
    c->blocked_ms = blocked ? 5000 : 0;
    c->backend = CCS_BE_MPI;
    c->nhist = 4;
    for (int i = 0; i < 4; i++)
        c->hist[i] = op((uint64_t)(5 + i), CCS_KIND_ALLREDUCE, 256);
    if (blocked) {
        c->blocked = op(9, kind, 256);
        c->hist[3] = op(9, kind, 256);
        c->hist[2] = op(8, CCS_KIND_ALLREDUCE, 256);
    }
    snprintf(c->site_blocked, sizeof c->site_blocked, "train_step at train.py:%d", 300 + r);
    snprintf(c->site_last, sizeof c->site_last, "MPI_Allreduce");
    struct ccs_dsx_comm *d = &st->comm[1];
    d->id = 0xbeef;
    d->rank = r % 2;
    d->size = 2;
    d->issued = d->done = 3;
    d->cp_seq[0] = 0;
    d->backend = CCS_BE_MPI;
}

static size_t encode(const struct ccs_dsx_status *st, unsigned char *out, size_t cap)
{
    size_t n = ccs_dsx_encode_status(st, NULL, NULL, out, cap);
    if (!n)
        abort();
    return n;
}

/* A STATUS payload: count, then the statuses of ranks FIRST..FIRST+N-1
 * (rank 2 blocked in another kind: a MISMATCH, the others blocked in
 * allreduce). */
static size_t statuses_of(unsigned char *out, size_t cap, int first, int n, int blocked)
{
    struct ccs_dsx_status st;
    uint32_t cnt = (uint32_t)n;
    memcpy(out, &cnt, 4);
    size_t o = 4;
    for (int r = first; r < first + n; r++) {
        status(&st, r, blocked, r == 2 ? CCS_KIND_BCAST : CCS_KIND_ALLREDUCE);
        o += encode(&st, out + o, cap - o);
    }
    return o;
}

static size_t statuses(unsigned char *out, size_t cap, int n, int blocked)
{
    return statuses_of(out, cap, 0, n, blocked);
}

/* An AGG payload folding ranks 0..N-1 (blocked or idle) as a relay would. */
static size_t agg(unsigned char *out, size_t cap, int n, int blocked)
{
    static struct ccs_dsx_status st[WSIZE];
    static struct ccs_dsx_agg a;
    const struct ccs_dsx_status *sp[WSIZE];
    uint32_t listed[WSIZE];
    for (int r = 0; r < n; r++) {
        status(&st[r], r, blocked, r == 2 ? CCS_KIND_BCAST : CCS_KIND_ALLREDUCE);
        st[r].ncomm = 1;
        sp[r] = &st[r];
    }
    memset(&a, 0, sizeof a);
    ccs_dsx_agg_fold(sp, (size_t)n, 500, &a, listed);
    a.head.nhosts = 1;
    return ccs_dsx_agg_encode(&a, sp, listed, NULL, NULL, out, cap);
}

/* A STATUS payload of the four ranks, none blocked in an intercepted call,
 * each inside a torch.distributed call of one group of 4 at its call 7
 * (ccshim_foreign_call): rank 2 in a gather, the others in an all_reduce
 * (desync_rule_foreign.c's DESYNC). */
static size_t torch_statuses(unsigned char *out, size_t cap)
{
    struct ccs_dsx_status st;
    uint32_t cnt = WSIZE;
    memcpy(out, &cnt, 4);
    size_t o = 4;
    for (int r = 0; r < WSIZE; r++) {
        status(&st, r, 0, CCS_KIND_ALLREDUCE);
        unsigned k = r == 2 ? CCS_TC_GATHER : CCS_TC_ALL_REDUCE;
        snprintf(st.foreign, sizeof st.foreign, "torch.distributed.%s (gloo) at train.py:%d in main",
                 ccs_torch_call_name(k), 40 + r);
        st.foreign_ms = 5000;
        st.foreign_size = WSIZE;
        st.foreign_group = 0xa1;
        st.foreign_gseq = 7;
        st.foreign_kind = (uint16_t)k;
        st.foreign_prev = CCS_TC_ALL_REDUCE;
        o += encode(&st, out + o, cap - o);
    }
    return o;
}

static void verdict(struct ccs_dsx_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->cls = CCS_DSX_MISMATCH;
    v->nparty = 2;
    v->comm = 0xc0ffee;
    v->seq = 9;
    v->comm_size = WSIZE;
    snprintf(v->line, sizeof v->line, "comm=0xc0ffee seq=9 ranks 0,1,3 allreduce vs rank 2 bcast");
    for (int i = 0; i < 2; i++) {
        struct ccs_dsx_party *p = &v->party[i];
        struct ccs_dsx_status st;
        p->wrank = i * 2;
        p->role = i ? CCS_DSX_R_DIFFERS : CCS_DSX_R_AGREES;
        p->life = CCS_DSX_ALIVE;
        p->pid = 1000 + (uint32_t)i;
        snprintf(p->host, sizeof p->host, "node%d", i);
        status(&st, p->wrank, 1, i ? CCS_KIND_BCAST : CCS_KIND_ALLREDUCE);
        p->c = st.comm[0];
    }
}

static void frame(struct buf *b, unsigned type, const void *p, size_t n)
{
    /* fuzz_dsx_*.c: [t][length, 2 bytes][payload], type 1 + t % 7 */
    add8(b, (uint8_t)(type - 1));
    add16(b, (uint16_t)n);
    add(b, p, n);
}

static void hello_raw(struct buf *b, unsigned type, int32_t wsize, int32_t rank)
{
    struct ccs_dsx_frame f = {.magic = CCS_DSX_MAGIC,
                              .version = CCS_DSX_VERSION,
                              .type = (uint16_t)type,
                              .length = sizeof(struct ccs_dsx_hello)};
    struct ccs_dsx_hello h = {.byteorder = CCS_DSX_BYTEORDER, .wsize = wsize, .rank = rank, .pid = 77};
    snprintf(h.host, sizeof h.host, "node1");
    memset(h.nonce, 0x5a, sizeof h.nonce);
    add(b, &f, sizeof f);
    add(b, &h, sizeof h);
}

static void dsx_seeds(void)
{
    static struct buf b;
    static unsigned char p[1 << 15];
    struct ccs_dsx_status st;
    struct ccs_dsx_verdict v;
    size_t n;
    uint8_t ws = WSIZE - 1; /* world size byte: 1 + ws % 64, rank (ws >> 6) % size = 0 */

    /* fuzz_dsx_proto: [world size - 1] then the bytes read every way */
    b.n = 0, add8(&b, ws), n = statuses(p, sizeof p, 4, 1), add(&b, p, n);
    put("fuzz_dsx_proto", "seed-statuses-blocked", b.b, b.n);
    b.n = 0, add8(&b, ws), n = statuses(p, sizeof p, 2, 0), add(&b, p, n);
    put("fuzz_dsx_proto", "seed-statuses-idle", b.b, b.n);
    b.n = 0, add8(&b, ws), n = torch_statuses(p, sizeof p), add(&b, p, n);
    put("fuzz_dsx_proto", "seed-statuses-torch", b.b, b.n);
    b.n = 0, add8(&b, ws), verdict(&v), add(&b, &v, sizeof v);
    put("fuzz_dsx_proto", "seed-verdict", b.b, b.n);
    b.n = 0, add8(&b, ws), status(&st, 1, 1, CCS_KIND_ALLREDUCE), add(&b, &st, sizeof st);
    put("fuzz_dsx_proto", "seed-shm-status", b.b, b.n);
    /* AGG payloads (the tree's fold, desync_agg.c): ranks 0..2 of 4, all
     * blocked (rank 2 in a bcast: listed), and ranks 0..1 idle. */
    b.n = 0, add8(&b, ws), n = agg(p, sizeof p, 3, 1), add(&b, p, n);
    put("fuzz_dsx_proto", "seed-agg-blocked", b.b, b.n);
    b.n = 0, add8(&b, ws), n = agg(p, sizeof p, 2, 0), add(&b, p, n);
    put("fuzz_dsx_proto", "seed-agg-idle", b.b, b.n);

    /* fuzz_dsx_coord: [mode][world size][flags] ... */
    b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 1);
    n = statuses(p, sizeof p, 4, 1), frame(&b, CCS_DSX_M_STATUS, p, n);
    put("fuzz_dsx_coord", "seed-sealed-statuses-mismatch", b.b, b.n);
    b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 1);
    n = torch_statuses(p, sizeof p), frame(&b, CCS_DSX_M_STATUS, p, n);
    put("fuzz_dsx_coord", "seed-sealed-statuses-torch", b.b, b.n);
    b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 0);
    n = statuses(p, sizeof p, 1, 0), frame(&b, CCS_DSX_M_STATUS, p, n);
    n = statuses(p, sizeof p, 1, 0), frame(&b, CCS_DSX_M_STATUS, p, n);
    put("fuzz_dsx_coord", "seed-sealed-status-twice", b.b, b.n);
    b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 1); /* a relay's folds (the tree), one listing a rank */
    n = agg(p, sizeof p, 3, 1), frame(&b, CCS_DSX_M_AGG, p, n);
    n = agg(p, sizeof p, 2, 0), frame(&b, CCS_DSX_M_AGG, p, n);
    put("fuzz_dsx_coord", "seed-sealed-agg", b.b, b.n);
    {
        /* The tree on (flag 4): a leader's statuses, a rules pass appoints
         * it; it says where it listens, then sends a verdict of its rules
         * and a fold. */
        struct ccs_dsx_relay_at at = {.group = 1, .port = 4000};
        memset(at.key, 7, sizeof at.key);
        b.n = 0, add8(&b, 2), add8(&b, (uint8_t)(ws | 2 << 6)), add8(&b, 1 | 4);
        n = statuses_of(p, sizeof p, 2, 2, 0), frame(&b, CCS_DSX_M_STATUS, p, n);
        frame(&b, CCS_DSX_M_RELAY_AT, &at, sizeof at);
        verdict(&v), frame(&b, CCS_DSX_M_VERDICT, &v, sizeof v);
        n = agg(p, sizeof p, 3, 1), frame(&b, CCS_DSX_M_AGG, p, n);
        put("fuzz_dsx_coord", "seed-sealed-tree", b.b, b.n);
    }
    {
        struct ccs_dsx_agree ag[2] = {
            {.comm = 0xbeef, .key = 1, .max = 9, .min = 3, .crank = 0, .size = 2, .n = 1},
            {.comm = 0xbeef, .key = 1, .max = 5, .min = 1, .crank = 1, .size = 2, .n = 1}};
        b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 1);
        frame(&b, CCS_DSX_M_AGREE, ag, sizeof ag);
        put("fuzz_dsx_coord", "seed-sealed-agree", b.b, b.n);
    }
    {
        /* Two hosts: ranks 0-1 through client 0, 2-3 through client 1, an
         * agreement folded from both, then host 0 goes away. */
        struct ccs_dsx_agree a0 = {.comm = 0xc0ffee, .key = 2, .max = 4, .min = 4, .crank = 0, .size = 2, .n = 1};
        struct ccs_dsx_agree a1 = a0;
        a1.crank = 1, a1.max = a1.min = 6;
        b.n = 0, add8(&b, 2), add8(&b, ws), add8(&b, 3);
        add8(&b, 0), n = statuses_of(p, sizeof p, 0, 2, 1), frame(&b, CCS_DSX_M_STATUS, p, n);
        add8(&b, 1), n = statuses_of(p, sizeof p, 2, 2, 1), frame(&b, CCS_DSX_M_STATUS, p, n);
        add8(&b, 0), frame(&b, CCS_DSX_M_AGREE, &a0, sizeof a0);
        add8(&b, 1), frame(&b, CCS_DSX_M_AGREE, &a1, sizeof a1);
        add8(&b, 0xff), add8(&b, 0);
        add8(&b, 1), n = statuses_of(p, sizeof p, 2, 2, 0), frame(&b, CCS_DSX_M_STATUS, p, n);
        put("fuzz_dsx_coord", "seed-two-hosts", b.b, b.n);
    }
    b.n = 0, add8(&b, 0), add8(&b, ws), add8(&b, 0), hello_raw(&b, CCS_DSX_M_HELLO, WSIZE, 0);
    hello_raw(&b, CCS_DSX_M_HELLO, WSIZE, 0);
    put("fuzz_dsx_coord", "seed-raw-hellos", b.b, b.n);
    {
        struct ccs_dsx_frame f = {
            .magic = CCS_DSX_MAGIC, .version = CCS_DSX_VERSION, .type = CCS_DSX_M_STATUS, .length = 64};
        b.n = 0, add8(&b, 1), add8(&b, ws), add8(&b, 0), add(&b, &f, sizeof f);
        memset(p, 0x33, 64), add(&b, p, 64);
        put("fuzz_dsx_coord", "seed-injected", b.b, b.n);
    }
    {
        struct ccs_dsx_hello h = {.byteorder = CCS_DSX_BYTEORDER, .wsize = WSIZE, .rank = 1, .pid = 99};
        snprintf(h.host, sizeof h.host, "node1");
        b.n = 0, add8(&b, 3), add8(&b, ws), add8(&b, 1);
        add(&b, &h, sizeof h), add(&b, &h, sizeof h), add8(&b, 0);
        n = statuses(p, sizeof p, 2, 1), frame(&b, CCS_DSX_M_STATUS, p, n);
        put("fuzz_dsx_coord", "seed-fields-hello", b.b, b.n);
    }

    /* fuzz_dsx_client: [mode][world size] ... */
    b.n = 0, add8(&b, 2), add8(&b, ws), verdict(&v), frame(&b, CCS_DSX_M_VERDICT, &v, sizeof v);
    put("fuzz_dsx_client", "seed-sealed-verdict", b.b, b.n);
    {
        uint64_t d1 = 0xc0ffee, d2[2] = {0xc0ffee, 9}, d3[2] = {0xc0ffee, 16 | CCS_DSX_PROBE_BIT};
        struct ccs_dsx_agree ag = {.comm = 0xbeef, .key = 1, .max = 9, .min = 1, .crank = 0, .size = 2, .n = 2};
        b.n = 0, add8(&b, 2), add8(&b, ws);
        frame(&b, CCS_DSX_M_DETAIL, &d1, 8), frame(&b, CCS_DSX_M_DETAIL, d2, 16),
            frame(&b, CCS_DSX_M_DETAIL, d3, 16);
        frame(&b, CCS_DSX_M_AGREE, &ag, sizeof ag), frame(&b, CCS_DSX_M_BYE, NULL, 0);
        put("fuzz_dsx_client", "seed-sealed-detail-agree-bye", b.b, b.n);
    }
    {
        /* The tree: the root appoints this leader, then sends it to a relay. */
        struct ccs_dsx_relay rl = {.group = 1};
        struct ccs_dsx_go go = {.group = 1, .port = 4000, .relay_rank = 1};
        memset(rl.key, 7, sizeof rl.key), memset(go.key, 7, sizeof go.key);
        snprintf(go.host, sizeof go.host, "127.0.0.1");
        b.n = 0, add8(&b, 2), add8(&b, ws);
        frame(&b, CCS_DSX_M_RELAY, &rl, sizeof rl), frame(&b, CCS_DSX_M_GO, &go, sizeof go);
        put("fuzz_dsx_client", "seed-sealed-relay-go", b.b, b.n);
    }
    b.n = 0, add8(&b, 0), add8(&b, ws), hello_raw(&b, CCS_DSX_M_WELCOME, WSIZE, -1);
    put("fuzz_dsx_client", "seed-raw-welcome", b.b, b.n);
    {
        struct ccs_dsx_hello w = {.byteorder = CCS_DSX_BYTEORDER, .wsize = WSIZE, .rank = -1};
        snprintf(w.host, sizeof w.host, "coordinator");
        b.n = 0, add8(&b, 3), add8(&b, ws), add(&b, &w, sizeof w), add8(&b, 0);
        verdict(&v), frame(&b, CCS_DSX_M_VERDICT, &v, sizeof v);
        put("fuzz_dsx_client", "seed-fields-welcome", b.b, b.n);
    }
    {
        struct ccs_dsx_frame f = {.magic = CCS_DSX_MAGIC,
                                  .version = CCS_DSX_VERSION,
                                  .type = CCS_DSX_M_VERDICT,
                                  .length = sizeof v + CCS_DSX_TAGBYTES};
        b.n = 0, add8(&b, 1), add8(&b, ws), add(&b, &f, sizeof f), verdict(&v), add(&b, &v, sizeof v);
        memset(p, 0, CCS_DSX_TAGBYTES), add(&b, p, CCS_DSX_TAGBYTES);
        put("fuzz_dsx_client", "seed-injected-verdict", b.b, b.n);
    }
}

/* ----------------------------------------------------------- settings */

/* One line per row of the table: the value VAL(row) gives. */
static void settings(const char *name, const char *(*val)(const struct ccs_config_row *), const char *site,
                     int small)
{
    static struct buf b;
    b.n = 0;
    for (size_t i = 0; i < ccs_config_nrows; i++) {
        const char *v = val(&ccs_config_rows[i]);
        add(&b, v, strlen(v));
        add8(&b, '\n');
    }
    add(&b, site, strlen(site));
    add8(&b, '\n');
    add8(&b, (uint8_t)small);
    put("fuzz_config", name, b.b, b.n);
}

static const char *defaults(const struct ccs_config_row *r)
{
    return r->def;
}

static const char *good(const struct ccs_config_row *r)
{
    if (strcmp(r->type, "BOOL") == 0)
        return strcmp(r->def, "1") == 0 ? "off" : "yes";
    if (strcmp(r->type, "ENUM") == 0)
        return strrchr(r->help, '}') ? "WARN" : "";
    if (strcmp(r->type, "INT") == 0)
        return "1024";
    if (strcmp(r->name, "CCSHIM_LOG") == 0)
        return "/tmp/ccshim-%j-%h-r%r-p%p-%%-%x.log";
    if (strcmp(r->name, "CCSHIM_COALESCE") == 0)
        return "every:4";
    if (strcmp(r->name, "CCSHIM_COALESCE_INCLUDE") == 0)
        return "train_step,,backward";
    if (strcmp(r->name, "CCSHIM_COALESCE_EXCLUDE") == 0)
        return "eval,";
    if (strcmp(r->name, "CCSHIM_COORD") == 0)
        return "node0:29501";
    return "x";
}

static const char *bad(const struct ccs_config_row *r)
{
    if (strcmp(r->type, "BOOL") == 0)
        return "maybe";
    if (strcmp(r->type, "ENUM") == 0)
        return "sometimes";
    if (strcmp(r->type, "INT") == 0)
        return "99999999999999999999";
    if (strcmp(r->name, "CCSHIM_COALESCE") == 0)
        return "every:1";
    if (strcmp(r->name, "CCSHIM_LOG") == 0)
        return "%";
    return "\x01"; /* unset */
}

static void config_seeds(void)
{
    settings("seed-defaults", defaults, "train_step at model.py:12", 16);
    settings("seed-good", good, "backward at autograd.py:200", 8);
    settings("seed-bad", bad, "", 1);
}

static void expect_seeds(void)
{
    static const char *rules[] = {"allreduce<=2", "bcast<=0/step", "allgather<=10/buffer", "reduce<=3/comm",
                                  "allreduce<2",  "step<=1",       "allreduce<=x",         "allreduce<=1/node"};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "seed-%zu", i);
        put("fuzz_expect", name, rules[i], strlen(rules[i]));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR (writes DIR/<target>/seed-*)\n");
        return 2;
    }
    top = argv[1];
    if (mkdir(top, 0755) != 0 && errno != EEXIST) {
        perror(top);
        return 1;
    }
    trace("seed-v3-all-chunks", 3, 1, 0);
    trace("seed-v2-all-chunks", 2, 1, 0);
    trace("seed-v1-all-chunks", 1, 0, 0);
    trace("seed-v1-with-pysite-chunk", 1, 1, 0);
    trace("seed-v2-cut-in-records", 2, 1, sizeof(struct ccs_chunk) + sizeof(struct ccs_trace_end) + 150);
    trace("seed-v1-cut-in-end", 1, 0, 10);
    dsx_seeds();
    config_seeds();
    expect_seeds();
    return 0;
}
