/*
 * desync_proto.c - encoding and, above all, validation of what peers send:
 * a malformed or hostile peer must neither crash a rank nor make it believe
 * something out of range.  Fuzzed by tests/fuzz/fuzz_dsx_*.c.
 */
#include "desync_proto.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include <stdio.h>
#include <string.h>

/* Number-to-name from the lists of desync_proto.h: alike in shape on
 * purpose, as in src/core/names.c (each the list's own expansion). */
const char *ccs_dsx_class_name(unsigned cls)
{
    switch (cls) {
#define CCS_X(e, n, s, ...)                                                                                        \
    case n:                                                                                                        \
        return s;
        CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

const char *ccs_dsx_life_name(unsigned life)
{
    switch (life) {
#define CCS_X(e, n, s)                                                                                             \
    case n:                                                                                                        \
        return s;
        CCS_DSX_LIFE_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

/* On the wire a comm entry is: the struct up to its call-site texts (which
 * include nhist), a 64-bit word of wire flags, the two texts when flag
 * WIRE_SITES is set, then NHIST operations. */
#define COMM_A offsetof(struct ccs_dsx_comm, site_blocked)
#define WIRE_SITES 1u
#define SITES (2 * CCS_DSX_SITE)
#define STATUS_FIXED offsetof(struct ccs_dsx_status, comm)

static int sites_wanted(const struct ccs_dsx_comm *c, uint16_t nh)
{
    return c->state == CCS_DSX_BLOCKED || nh > 0;
}

size_t ccs_dsx_encoded_size(const struct ccs_dsx_status *st)
{
    size_t n = STATUS_FIXED;
    for (uint32_t i = 0; i < st->ncomm && i < CCS_DSX_MAXCOMM; i++) {
        const struct ccs_dsx_comm *c = &st->comm[i];
        uint16_t nh = c->nhist <= CCS_DSX_HIST ? c->nhist : CCS_DSX_HIST;
        n += COMM_A + 8 + (sites_wanted(c, nh) ? SITES : 0) + (size_t)nh * sizeof(struct ccs_dsx_op);
    }
    return n;
}

size_t ccs_dsx_encode_status(const struct ccs_dsx_status *st, int (*keep_hist)(uint64_t, void *), void *arg,
                             unsigned char *buf, size_t cap)
{
    uint32_t nc = st->ncomm < CCS_DSX_MAXCOMM ? st->ncomm : CCS_DSX_MAXCOMM;
    if (cap < STATUS_FIXED)
        return 0;
    memcpy(buf, st, STATUS_FIXED);
    memcpy(buf + offsetof(struct ccs_dsx_status, ncomm), &nc, sizeof nc);
    size_t o = STATUS_FIXED;
    for (uint32_t i = 0; i < nc; i++) {
        const struct ccs_dsx_comm *c = &st->comm[i];
        uint16_t nh = c->nhist <= CCS_DSX_HIST ? c->nhist : CCS_DSX_HIST;
        if (keep_hist) {
            int k = keep_hist(c->id, arg);
            if (k < (int)nh)
                nh = (uint16_t)(k > 0 ? k : 0);
        }
        uint64_t wf = sites_wanted(c, nh) ? WIRE_SITES : 0;
        size_t need = COMM_A + 8 + (wf ? SITES : 0) + (size_t)nh * sizeof(struct ccs_dsx_op);
        if (o + need > cap)
            return 0;
        memcpy(buf + o, c, COMM_A);
        memcpy(buf + o + offsetof(struct ccs_dsx_comm, nhist), &nh, sizeof nh);
        o += COMM_A;
        memcpy(buf + o, &wf, 8);
        o += 8;
        if (wf) {
            memcpy(buf + o, c->site_blocked, SITES);
            o += SITES;
        }
        /* The newest NH operations. */
        memcpy(buf + o, &c->hist[c->nhist - nh], (size_t)nh * sizeof(struct ccs_dsx_op));
        o += (size_t)nh * sizeof(struct ccs_dsx_op);
    }
    return o;
}

static int fail(char *why, size_t n, const char *fmt, long long a, long long b)
{
    if (why && n)
        snprintf(why, n, fmt, a, b);
    return -1;
}

/* A string field must hold a NUL within its size. */
static int terminated(const char *s, size_t n)
{
    return memchr(s, 0, n) != NULL;
}

static int check_op(const struct ccs_dsx_op *op, char *why, size_t n)
{
    if (op->kind >= CCS_KIND_MAX || ccs_kind_name(op->kind)[0] == '?')
        return fail(why, n, "operation kind %lld is not a known kind (0..%lld)", op->kind, CCS_KIND_MAX - 1);
    if (op->dtype >= CCS_DT_MAX)
        return fail(why, n, "datatype %lld out of range 0..%lld", op->dtype, CCS_DT_MAX - 1);
    if (op->op >= CCS_OP_LIMIT)
        return fail(why, n, "reduction op %lld out of range 0..%lld", op->op, CCS_OP_LIMIT - 1);
    return 0;
}

static int check_comm(struct ccs_dsx_comm *c, char *why, size_t n)
{
    if (c->size <= 0 || c->size > CCS_DSX_MAX_RANKS || c->rank < 0 || c->rank >= c->size)
        return fail(why, n, "communicator rank %lld of size %lld is out of range", c->rank, c->size);
    if (c->state > CCS_DSX_FREED)
        return fail(why, n, "communicator state %lld is not one of 0..%lld", c->state, CCS_DSX_FREED);
    if (c->nhist > CCS_DSX_HIST)
        return fail(why, n, "history of %lld operations exceeds %lld", c->nhist, CCS_DSX_HIST);
    /* Every seq bounded before anything loops or counts over it (2^48
     * collectives: nine years at a million a second). */
    if (c->issued > CCS_DSX_MAX_SEQ || (c->state == CCS_DSX_BLOCKED && c->blocked.seq > CCS_DSX_MAX_SEQ))
        return fail(why, n, "sequence number beyond %lld (issued %lld, or blocked at a larger seq)",
                    (long long)CCS_DSX_MAX_SEQ, (long long)c->issued);
    if (c->done > c->issued || (c->cp_seq[0] && c->cp_seq[0] > c->done) || (c->cp_seq[1] && c->cp_seq[1] > c->done))
        return fail(why, n, "sequence numbers inconsistent (done %lld > issued %lld, or a checkpoint beyond done)",
                    (long long)c->done, (long long)c->issued);
    if (c->step_kind > CCS_KIND_MAX || c->prev_kind > CCS_KIND_MAX)
        return fail(why, n, "step call kind %lld is not a kind (0..%lld)",
                    c->step_kind > CCS_KIND_MAX ? c->step_kind : c->prev_kind, CCS_KIND_MAX);
    if (!terminated(c->site_blocked, sizeof c->site_blocked) || !terminated(c->site_last, sizeof c->site_last))
        return fail(why, n, "call-site text not NUL-terminated", 0, 0);
    if (c->state == CCS_DSX_BLOCKED && check_op(&c->blocked, why, n) != 0)
        return -1;
    /* Blocked in an operation it has issued: the rules count a member
     * blocked beyond its issued seq as behind, not waiting, and a
     * verdict then had no waiting operation to name (a NULL read in the
     * coordinator; found by tests/fuzz/fuzz_dsx_coord.c). */
    if (c->state == CCS_DSX_BLOCKED && c->blocked.seq > c->issued)
        return fail(why, n, "blocked at seq %lld beyond issued %lld", (long long)c->blocked.seq,
                    (long long)c->issued);
    for (unsigned i = 0; i < c->nhist; i++) {
        if (check_op(&c->hist[i], why, n) != 0)
            return -1;
        if (i && c->hist[i].seq <= c->hist[i - 1].seq)
            return fail(why, n, "history not in increasing sequence order (%lld after %lld)",
                        (long long)c->hist[i].seq, (long long)c->hist[i - 1].seq);
        if (c->hist[i].seq > c->issued)
            return fail(why, n, "history entry seq %lld beyond issued %lld", (long long)c->hist[i].seq,
                        (long long)c->issued);
    }
    return 0;
}

/* The foreign call's identity: all of it or none, only in a foreign call,
 * its kinds in the list (the rules compare them and name them). */
static int check_foreign_id(const struct ccs_dsx_status *st, char *why, size_t n)
{
    if (st->foreign_kind >= CCS_TC_LIMIT || st->foreign_prev >= CCS_TC_LIMIT)
        return fail(why, n, "torch.distributed call kind %lld is not a known kind (0..%lld)",
                    st->foreign_kind >= CCS_TC_LIMIT ? st->foreign_kind : st->foreign_prev, CCS_TC_LIMIT - 1);
    if (st->foreign_gseq > CCS_DSX_MAX_SEQ)
        return fail(why, n, "torch.distributed call seq %lld beyond %lld", (long long)st->foreign_gseq,
                    (long long)CCS_DSX_MAX_SEQ);
    if (st->foreign_pad)
        return fail(why, n, "reserved word after the call's kinds is %lld, expected %lld", st->foreign_pad, 0);
    int any = st->foreign_group || st->foreign_gseq || st->foreign_kind || st->foreign_prev;
    if (!any)
        return 0;
    if (!st->foreign_group || !st->foreign_gseq || st->foreign_kind == CCS_TC_NONE)
        return fail(why, n,
                    "identity of the call not intercepted incomplete: seq %lld, kind %lld, and its group "
                    "must all be nonzero",
                    (long long)st->foreign_gseq, st->foreign_kind);
    if (!st->foreign_ms)
        return fail(why, n, "identity of a call not intercepted (seq %lld, kind %lld) while in none",
                    (long long)st->foreign_gseq, st->foreign_kind);
    if (st->foreign_gseq == 1 && st->foreign_prev != CCS_TC_NONE)
        return fail(why, n, "the first call on its group (seq %lld) names a call before it, of kind %lld",
                    (long long)st->foreign_gseq, st->foreign_prev);
    return 0;
}

int ccs_dsx_check_status(struct ccs_dsx_status *st, int32_t wsize, char *why, size_t n)
{
    if (st->magic != CCS_DSX_MAGIC)
        return fail(why, n, "bad magic %#llx (expected %#llx)", st->magic, CCS_DSX_MAGIC);
    if (st->version != CCS_DSX_VERSION)
        return fail(why, n, "protocol version %lld, expected %lld", st->version, CCS_DSX_VERSION);
    if (st->wsize != wsize || st->wrank < 0 || st->wrank >= wsize)
        return fail(why, n, "rank %lld of world size %lld does not fit this job", st->wrank, st->wsize);
    if (st->life > CCS_DSX_DIED)
        return fail(why, n, "life state %lld is not one of 0..%lld", st->life, CCS_DSX_DIED);
    if (st->ncomm > CCS_DSX_MAXCOMM)
        return fail(why, n, "%lld communicators, at most %lld", st->ncomm, CCS_DSX_MAXCOMM);
    if (st->boundary && st->boundary - 1 > st->step + 1)
        return fail(why, n, "step boundary %lld beyond the next step of step %lld", (long long)st->boundary - 1,
                    st->step);
    if (!terminated(st->host, sizeof st->host))
        return fail(why, n, "host name not NUL-terminated", 0, 0);
    if (!terminated(st->foreign, sizeof st->foreign))
        return fail(why, n, "name of the call not intercepted not NUL-terminated", 0, 0);
    if (st->foreign_size > (uint32_t)wsize)
        return fail(why, n, "call not intercepted has a group of %lld ranks, the job %lld", st->foreign_size, wsize);
    /* The rules name the call: a time in one needs its name. */
    if (st->foreign_ms && !st->foreign[0])
        return fail(why, n, "in a call not intercepted for %lld ms without its name", st->foreign_ms, 0);
    if (check_foreign_id(st, why, n) != 0)
        return -1;
    for (uint32_t i = 0; i < st->ncomm; i++)
        if (check_comm(&st->comm[i], why, n) != 0)
            return -1;
    return 0;
}

size_t ccs_dsx_decode_status(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_status *out,
                             char *why, size_t whylen)
{
    if (len < STATUS_FIXED) {
        fail(why, whylen, "status truncated: %lld bytes, at least %lld needed", (long long)len, STATUS_FIXED);
        return 0;
    }
    /* The entries in use only are cleared (the coordinator decodes every
     * status of the job: clearing all eight cost it 17 KB of writes per
     * status); what lies past ncomm is never read. */
    memcpy(out, buf, STATUS_FIXED);
    if (out->ncomm > CCS_DSX_MAXCOMM) {
        fail(why, whylen, "%lld communicators, at most %lld", out->ncomm, CCS_DSX_MAXCOMM);
        return 0;
    }
    memset(out->comm, 0, out->ncomm * sizeof out->comm[0]);
    size_t o = STATUS_FIXED;
    for (uint32_t i = 0; i < out->ncomm; i++) {
        struct ccs_dsx_comm *c = &out->comm[i];
        uint64_t wf;
        if (len - o < COMM_A + 8) {
            fail(why, whylen, "communicator entry %lld truncated (%lld bytes left)", i, (long long)(len - o));
            return 0;
        }
        memcpy(c, buf + o, COMM_A);
        memcpy(&wf, buf + o + COMM_A, 8);
        o += COMM_A + 8;
        if (wf & ~(uint64_t)WIRE_SITES) {
            fail(why, whylen, "unknown wire flags %#llx in entry %lld", (long long)wf, i);
            return 0;
        }
        if (wf) {
            if (len - o < SITES) {
                fail(why, whylen, "call sites of entry %lld truncated (%lld bytes left)", i, (long long)(len - o));
                return 0;
            }
            memcpy(c->site_blocked, buf + o, SITES);
            o += SITES;
        }
        if (c->nhist > CCS_DSX_HIST) {
            fail(why, whylen, "history of %lld operations exceeds %lld", c->nhist, CCS_DSX_HIST);
            return 0;
        }
        size_t h = (size_t)c->nhist * sizeof(struct ccs_dsx_op);
        if (len - o < h) {
            fail(why, whylen, "history of entry %lld truncated (%lld bytes left)", i, (long long)(len - o));
            return 0;
        }
        memcpy(c->hist, buf + o, h);
        o += h;
    }
    if (ccs_dsx_check_status(out, wsize, why, whylen) != 0)
        return 0;
    return o;
}

int ccs_dsx_check_verdict(struct ccs_dsx_verdict *v, int32_t wsize, char *why, size_t n)
{
    if (v->cls == 0 || v->cls >= CCS_DSX_CLASS_MAX)
        return fail(why, n, "verdict class %lld is not one of 1..%lld", v->cls, CCS_DSX_CLASS_MAX - 1);
    if (v->nparty > CCS_DSX_PARTIES)
        return fail(why, n, "%lld parties, at most %lld", v->nparty, CCS_DSX_PARTIES);
    if (v->comm_size <= 0 || v->comm_size > wsize)
        return fail(why, n, "communicator size %lld out of range 1..%lld", v->comm_size, wsize);
    if (!terminated(v->line, sizeof v->line))
        return fail(why, n, "verdict line not NUL-terminated", 0, 0);
    for (uint32_t i = 0; i < v->nparty; i++) {
        struct ccs_dsx_party *p = &v->party[i];
        if (p->wrank < 0 || p->wrank >= wsize)
            return fail(why, n, "party rank %lld outside world size %lld", p->wrank, wsize);
        if (p->role < CCS_DSX_R_WAITING || p->role > CCS_DSX_R_AGREES || p->life > CCS_DSX_DIED)
            return fail(why, n, "party role %lld or life %lld out of range", p->role, p->life);
        if (!terminated(p->host, sizeof p->host))
            return fail(why, n, "party host not NUL-terminated", 0, 0);
        if (p->other_comm && check_op(&p->other_op, why, n) != 0)
            return -1;
        if (check_comm(&p->c, why, n) != 0)
            return -1;
    }
    return 0;
}

int ccs_dsx_check_frame(const struct ccs_dsx_frame *f, char *why, size_t n)
{
    if (f->magic != CCS_DSX_MAGIC)
        return fail(why, n, "bad frame magic %#llx (expected %#llx)", f->magic, CCS_DSX_MAGIC);
    if (f->version != CCS_DSX_VERSION)
        return fail(why, n, "frame version %lld, expected %lld", f->version, CCS_DSX_VERSION);
    if (f->type < CCS_DSX_M_HELLO || f->type > CCS_DSX_M_GO)
        return fail(why, n, "unknown frame type %lld (1..%lld)", f->type, CCS_DSX_M_GO);
    if (f->length > CCS_DSX_MAX_FRAME)
        return fail(why, n, "frame of %lld bytes exceeds %lld", f->length, CCS_DSX_MAX_FRAME);
    return 0;
}

int ccs_dsx_check_relay_at(struct ccs_dsx_relay_at *a, char *why, size_t n)
{
    if (!memchr(a->host, 0, sizeof a->host))
        return fail(why, n, "RELAY_AT's host is not terminated within %lld bytes", (long long)sizeof a->host, 0);
    if (a->port < 0 || a->port > 65535)
        return fail(why, n, "RELAY_AT's port %lld is not in 0..65535", (long long)a->port, 0);
    return 0;
}

int ccs_dsx_check_go(struct ccs_dsx_go *g, int32_t wsize, char *why, size_t n)
{
    if (!memchr(g->host, 0, sizeof g->host) || !g->host[0])
        return fail(why, n, "GO's host is empty or not terminated within %lld bytes", (long long)sizeof g->host, 0);
    if (g->port < 1 || g->port > 65535)
        return fail(why, n, "GO's port %lld is not in 1..65535", (long long)g->port, 0);
    if (g->relay_rank < 0 || g->relay_rank >= wsize)
        return fail(why, n, "GO's relay rank %lld is not in 0..%lld", (long long)g->relay_rank, (long long)wsize - 1);
    return 0;
}
