/*
 * desync_collect.c - this rank's side of the protocol: reads the newest
 * records of every ring (a cursor of its own per ring, independent of the
 * trace writer's) into per-communicator histories, takes each
 * communicator's running hash from its newest record (the hot path keeps
 * it, see struct ccs_comm) and its calls per step from the communicator's
 * turns, and looks at each ring's in-flight record to tell "blocked in a
 * collective" from "computing".  A pass reads at most TAIL records of a
 * ring, whatever the call rate: older ones are read from the ring only
 * when the coordinator asks for them.  Background thread only.  What an
 * NCCL communicator completed on the device comes from desync_device.c.
 */
#include "desync_collect.h"
#include "desync_device.h"
#include <stdio.h>
#include "ccs_kinds.h"
#include "clock.h"
#include "fingerprint.h"
#include "step.h"
#include "callsite.h"
#include "comm.h"
#include "process.h"
#include "pysite.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TRACKED 64
#define NSITE_CACHE 64
/* Records a pass reads per ring at most, the newest: enough for every
 * communicator's published history (CCS_DSX_HIST) and a checkpoint
 * (CCS_DSX_CHECKPOINT) in the jobs that matter, and a bound on the
 * thread's work per period that does not grow with the call rate (25,600
 * records a second at the default 20 ms period; a job calling less often
 * is read whole, as before). */
#define TAIL 512u
/* Records looked through, newest first, for one record the coordinator
 * asks for (a probe's hash, the records around a differing seq) when it is
 * not where a communicator of one thread would have it. */
#define FIND_SCAN 8192u

struct tracked {
    uint64_t id;
    int32_t rank, size;
    uint16_t backend;
    int used, live, mark, boundary;
    /* Freed, and ISSUED is its exact final count (ccs_comm_final): kept
     * at MPI_Comm_free / ncclCommDestroy, not the count of the last pass
     * that saw it live, which the calls made since may have left behind. */
    int final;
    /* This pass: the seq whose records are asked for, and the probe (with
     * CCS_DSX_NARROW_BIT as asked); 0 when none. */
    uint64_t want_rec, want_probe;
    uint64_t issued, done, hash;
    int issued_moved;         /* ISSUED changed in this pass */
    uint64_t caught;          /* the ISSUED a catch-up settled (catch_up) */
    unsigned catch_tries;     /* catch-ups that did not find it yet */
    uint32_t done_step;       /* the step of the record DONE */
    uint64_t cp_seq[2], cp_hash[2];
    /* The newest probe read back (a probe stays asked for 1 s): its seq
     * (with CCS_DSX_NARROW_BIT as asked), whether the rings held it, and
     * its hash. */
    uint64_t probe_seq, probe_hash;
    int probe_found;
    struct ccs_dsx_op hist[CCS_DSX_HIST]; /* a ring: the next goes at hnext */
    unsigned nhist, hnext;
    struct ccs_record fpkey; /* fields of the last fingerprint computed, */
    uint64_t fp;             /* and it: consecutive calls are mostly alike */
    uint64_t active_ms;      /* last change, to pick what to publish */
    /* Calls per step (docs/desync.md, "a rank at its step boundary"). */
    uint32_t step_now, step_calls, step_prev, prev_calls;
    uint16_t step_kind, prev_kind;
    /* Blocked in a call: which one, since when. */
    int blocked;
    struct ccs_dsx_op bop;
    uint64_t bsince_ms;
    /* NCCL: device progress. */
    uint64_t dev_done, dev_since_ms, iss_since_ms;
    int dev;
};

static struct tracked tc[MAX_TRACKED];
static struct ccs_ring_reader reader; /* ours, apart from the trace writer's and the metrics' */
static struct ccs_record *batch;
static size_t batch_cap;

static struct {
    uint32_t id, pysite;
    char txt[CCS_DSX_SITE];
} site_cache[NSITE_CACHE];

/* What ring_range reads back (one caller at a time: the thread's pass). */
static struct ccs_record range_out[CCS_DSX_HIST];
static uint8_t range_have[CCS_DSX_HIST];

static uint64_t (*want_fn)(uint64_t comm, int probe, void *arg);
static void *want_arg;
static uint64_t records_read;

uint64_t ccs_dsx_collect_records_read(void) { return records_read; }

void ccs_dsx_collect_want(uint64_t (*fn)(uint64_t comm, int probe, void *arg), void *arg)
{
    want_fn = fn;
    want_arg = arg;
}

static struct ccs_dsx_op op_of(const struct ccs_record *r, struct tracked *t)
{
    struct ccs_dsx_op o;
    memset(&o, 0, sizeof o);
    o.seq = r->seq;
    /* The call's own fingerprint (a ring record's fingerprint word holds
     * the communicator's running hash instead): computed here, once per
     * distinct call when T remembers the last one. */
    if (t && t->fp && t->fpkey.kind == r->kind && t->fpkey.flags == r->flags && t->fpkey.count == r->count &&
        t->fpkey.dtype == r->dtype && t->fpkey.op == r->op && t->fpkey.root == r->root &&
        t->fpkey.sig == r->sig) {
        o.fp = t->fp;
    } else {
        o.fp = ccs_record_fingerprint(r);
        if (t) {
            t->fpkey = *r;
            t->fp = o.fp;
        }
    }
    o.count = r->count;
    o.sig = r->sig;
    o.site = r->site;
    o.pysite = r->pysite;
    o.root = r->root;
    o.step = r->step;
    o.kind = r->kind < CCS_KIND_MAX ? r->kind : 0;
    o.dtype = r->dtype < CCS_DT_MAX ? r->dtype : CCS_DT_UNKNOWN;
    o.op = r->op < CCS_OP_LIMIT ? r->op : CCS_OP_USER;
    o.flags = r->flags;
    return o;
}

static struct tracked *find(uint64_t id, int create)
{
    struct tracked *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tc[i].used && tc[i].id == id)
            return &tc[i];
        if (!tc[i].used && !free_slot)
            free_slot = &tc[i];
        if (tc[i].used && !tc[i].live && (!oldest || tc[i].active_ms < oldest->active_ms))
            oldest = &tc[i];
    }
    if (!create)
        return NULL;
    struct tracked *t = free_slot ? free_slot : oldest; /* reuse the longest-freed one */
    if (!t)
        return NULL;
    memset(t, 0, sizeof *t);
    t->used = 1;
    t->id = id;
    t->rank = -1;
    return t;
}

/* Takes record R of T's communicator, the next newer than T->done (seqs
 * skipped by a pass that read only the tail are fine: the hash is the
 * record's own, and the calls per step come from the turns). */
static void fold(struct tracked *t, const struct ccs_record *r, uint64_t now)
{
    struct ccs_dsx_op o = op_of(r, t);
    uint64_t before = t->done;
    t->hash = r->fingerprint; /* the running hash through it (ccs_call_store) */
    t->done = r->seq;
    t->done_step = r->step;
    if (t->done % CCS_DSX_CHECKPOINT == 0) {
        t->cp_seq[1] = t->cp_seq[0];
        t->cp_hash[1] = t->cp_hash[0];
        t->cp_seq[0] = t->done;
        t->cp_hash[0] = t->hash;
    }
    /* Calls per step counted from the records, for a communicator already
     * gone from the table when it is read (sync_comm takes the exact ones
     * from a live communicator's turns). */
    if (o.step != t->step_now || !t->step_calls) {
        if (t->step_calls) {
            t->step_prev = t->step_now;
            t->prev_calls = t->step_calls;
            t->prev_kind = t->step_kind;
        }
        t->step_now = o.step;
        t->step_calls = 1; /* (records skipped before it: its place in the step is not known here) */
        t->step_kind = o.kind;
    } else {
        /* Steps only grow: every seq skipped since the last record of the
         * same step was issued in it. */
        t->step_calls += (uint32_t)(r->seq - before);
    }
    if (t->step_kind != o.kind)
        t->step_kind = CCS_KIND_MAX; /* mixed */
    t->hist[t->hnext] = o;
    t->hnext = (t->hnext + 1) % CCS_DSX_HIST;
    if (t->nhist < CCS_DSX_HIST)
        t->nhist++;
    t->active_ms = now;
}

/* The I-th operation of T's history, oldest first. */
static const struct ccs_dsx_op *hist_at(const struct tracked *t, unsigned i)
{
    return &t->hist[(t->hnext + CCS_DSX_HIST - t->nhist + i) % CCS_DSX_HIST];
}

static int cmp_rec(const void *a, const void *b)
{
    const struct ccs_record *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int grow_batch(size_t need)
{
    if (need <= batch_cap)
        return 0;
    size_t nc = batch_cap ? batch_cap : 4096;
    while (nc < need)
        nc *= 2;
    struct ccs_record *nb = realloc(batch, nc * sizeof *nb);
    if (!nb)
        return -1;
    batch = nb;
    batch_cap = nc;
    return 0;
}

/* Keeps the sequenced records of a chunk read (the only ones compared) at
 * the end of the batch. */
static int keep_sequenced(void *ctx, struct ccs_record *recs, size_t k)
{
    size_t *n = ctx;
    records_read += k;
    if (grow_batch(*n + k) != 0)
        return 1;
    for (size_t i = 0; i < k; i++)
        if (recs[i].comm && recs[i].seq && ccs_kind_sequenced(recs[i].kind))
            batch[(*n)++] = recs[i];
    return 0;
}

/* Reads the newest records of every ring through the collector's own
 * cursors (at most TAIL per ring: a cursor further back skips to there)
 * and folds the sequenced ones (the only ones compared), in seq order per
 * communicator, records at or before a communicator's last one left out
 * (another thread's, published late). */
static void fold_all(uint64_t now)
{
    enum { CHUNK = 256 }; /* 24 KiB: copied while still in cache */
    static struct ccs_record chunk[CHUNK];
    size_t n = 0;
    ccs_ring_reader_pass(&reader, TAIL, chunk, CHUNK, keep_sequenced, &n);
    /* One ring and one communicator (most jobs) are in order already. */
    size_t i = 1;
    while (i < n && cmp_rec(&batch[i - 1], &batch[i]) <= 0)
        i++;
    if (i < n)
        qsort(batch, n, sizeof *batch, cmp_rec);
    struct tracked *t = NULL;
    for (i = 0; i < n; i++) {
        const struct ccs_record *r = &batch[i];
        if (!t || t->id != r->comm)
            t = find(r->comm, 1);
        if (t && r->seq > t->done)
            fold(t, r, now);
    }
}

/* Keeps REC in OUT (indexed by seq - LO) when it is of T's communicator
 * with a seq in [LO, HI]; 1 when it was kept. */
static int keep_in_range(const struct tracked *t, const struct ccs_record *rec, uint64_t lo, uint64_t hi,
                         struct ccs_record *out, uint8_t *have)
{
    if (rec->comm != t->id || rec->seq < lo || rec->seq > hi || !ccs_kind_sequenced(rec->kind) ||
        have[rec->seq - lo])
        return 0;
    out[rec->seq - lo] = *rec;
    have[rec->seq - lo] = 1;
    return 1;
}

/* Up to MAX records of R from position POS on into OUT; *AT: the
 * position of OUT[0] (later than POS where the producer has overwritten
 * them meanwhile).  Returns how many. */
static size_t read_at(struct ccs_ring *r, uint64_t pos, struct ccs_record *out, size_t max, uint64_t *at)
{
    struct ccs_ring_cursor c;
    atomic_init(&c.next, pos);
    atomic_init(&c.lost, 0);
    size_t k = ccs_ring_read(r, &c, out, max);
    *at = atomic_load_explicit(&c.next, memory_order_relaxed) - k;
    return k;
}

enum { RANGE_CHUNK = 64 };

/* The seq of T's first sequenced record at a position in [POS, END) of R,
 * and that position (*AT); 0 when there is none. */
static uint64_t first_seq_from(struct ccs_ring *r, const struct tracked *t, uint64_t pos, uint64_t end, uint64_t *at)
{
    struct ccs_record chunk[RANGE_CHUNK];
    while (pos < end) {
        uint64_t from;
        size_t k = read_at(r, pos, chunk, end - pos < RANGE_CHUNK ? (size_t)(end - pos) : RANGE_CHUNK, &from);
        if (k == 0)
            return 0;
        for (size_t i = 0; i < k; i++)
            if (chunk[i].comm == t->id && chunk[i].seq && ccs_kind_sequenced(chunk[i].kind)) {
                *at = from + i;
                return chunk[i].seq;
            }
        pos = from + k;
    }
    return 0;
}

/* LO..HI among R's records older than its newest FIND_SCAN (positions
 * below END), where a communicator's records are interleaved with many
 * others' (HPCC's, a job of a dozen communicators): a communicator's seqs
 * grow along a ring (but for nonblocking calls completed out of order, a
 * few places apart), so halving the positions finds where LO lies, each
 * step reading on to T's next record; then the records from there are
 * read until T's seqs pass HI.  At most about twice the ring's records,
 * once per probe or request (before, such a seq was "no longer kept" and
 * the search never named it). */
static unsigned ring_deep(struct ccs_ring *r, const struct tracked *t, uint64_t head, uint64_t end, uint64_t lo,
                          uint64_t hi, struct ccs_record *out, uint8_t *have)
{
    uint64_t cap = r->mask + 1;
    /* (the oldest eighth is left to the producer, which overwrites it
     * while this reads) */
    uint64_t left = head > cap - cap / 8 ? head - (cap - cap / 8) : 0, right = end;
    while (right - left > RANGE_CHUNK) {
        uint64_t mid = left + (right - left) / 2, at = 0;
        uint64_t s = first_seq_from(r, t, mid, right, &at);
        if (s && s < lo)
            left = at + 1; /* LO lies after T's record at AT */
        else if (s == lo)
            left = right = at; /* found */
        else
            right = mid; /* none of T's in [mid, right), or a later seq: LO lies before MID */
    }
    /* Back a few records for calls completed out of order, then forward
     * until a few of T's records past HI. */
    struct ccs_record chunk[RANGE_CHUNK];
    unsigned found = 0, want = (unsigned)(hi - lo + 1);
    uint64_t pos = left > RANGE_CHUNK ? left - RANGE_CHUNK : 0, past = 0;
    while (pos < end && found < want && past < 8) {
        uint64_t from;
        size_t k = read_at(r, pos, chunk, end - pos < RANGE_CHUNK ? (size_t)(end - pos) : RANGE_CHUNK, &from);
        if (k == 0)
            break;
        for (size_t i = 0; i < k; i++) {
            found += (unsigned)keep_in_range(t, &chunk[i], lo, hi, out, have);
            past += chunk[i].comm == t->id && ccs_kind_sequenced(chunk[i].kind) && chunk[i].seq > hi;
        }
        pos = from + k;
    }
    return found;
}

/* The records of T's communicator with seqs LO..HI (at most CCS_DSX_HIST
 * of them; completed ones only, as every record in a ring) from the rings,
 * into OUT[seq - LO] with HAVE[] set; returns how many were found.  Where
 * HI <= T->done and a communicator used by one thread has them (as many
 * slots back as seqs back) that is one read; else the
 * newest FIND_SCAN records of each ring are looked through, newest first,
 * until older seqs show, and where DEEP the ring's older records by
 * ring_deep: for a search that narrows and the records it asks for, not
 * for the look at the members' last common seq that a search of agreeing
 * members makes every 100 ms (a rank far ahead of the others would have
 * its rings read through at that rate).  The diagnostic path, not every
 * pass. */
static unsigned ring_range(const struct tracked *t, uint64_t lo, uint64_t hi, struct ccs_record *out, uint8_t *have,
                           int deep)
{
    enum { CH = RANGE_CHUNK };
    struct ccs_record chunk[CH];
    uint32_t pid = (uint32_t)getpid();
    unsigned want = (unsigned)(hi - lo + 1), found = 0;
    memset(have, 0, want);
    for (struct ccs_ring *r = ccs_ring_first(); r && found < want; r = r->next) {
        if (r->pid != pid)
            continue;
        uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
        uint64_t back = t->done - lo, at; /* slots back from the newest to LO's, if alone in this ring */
        if (lo <= t->done && back < head && want <= CH) {
            size_t k = read_at(r, head - 1 - back, chunk, want, &at);
            for (size_t i = 0; i < k; i++)
                found += (unsigned)keep_in_range(t, &chunk[i], lo, hi, out, have);
            if (found == want)
                break;
        }
        uint64_t stop = head > FIND_SCAN ? head - FIND_SCAN : 0, to = head;
        int ended = 0; /* older seqs seen, or records overwritten: nothing further back */
        while (to > stop && found < want && !ended) {
            uint64_t from = to - stop > CH ? to - CH : stop;
            size_t k = read_at(r, from, chunk, (size_t)(to - from), &at);
            for (size_t i = k; i-- > 0;) {
                found += (unsigned)keep_in_range(t, &chunk[i], lo, hi, out, have);
                ended |= chunk[i].comm == t->id && ccs_kind_sequenced(chunk[i].kind) && chunk[i].seq < lo;
            }
            ended |= at != from; /* (read from later on: the producer overwrote them) */
            to = from;
        }
        if (deep && found < want && !ended && to > 0)
            found += ring_deep(r, t, head, to, lo, hi, out, have);
    }
    return found;
}

/* The text every rank shows for OP: its annotated (Python) site, when it
 * has one, then its native site: "train.py:57 in step | PMPI_Allreduce+0x..". */
static void site_text(const struct ccs_dsx_op *op, char *out)
{
    uint32_t id = op->site, py = op->pysite;
    out[0] = 0;
    if (!id && !py)
        return;
    unsigned slot = (id ^ (py * 0x9e3779b1u)) % NSITE_CACHE;
    if (site_cache[slot].id == id && site_cache[slot].pysite == py && site_cache[slot].txt[0]) {
        memcpy(out, site_cache[slot].txt, CCS_DSX_SITE);
        return;
    }
    size_t o = 0;
    const char *t = ccs_pysite_text(py);
    if (t)
        o = (size_t)snprintf(out, CCS_DSX_SITE, "%s%s", t, id ? " | " : "");
    void *pcs[CCS_MAX_STACK];
    uint32_t depth = 0;
    if (o < CCS_DSX_SITE - 1 && ccs_site_get(id, pcs, &depth) == 0 && depth > 0)
        ccs_site_symbolize(pcs[0], out + o, CCS_DSX_SITE - o);
    out[CCS_DSX_SITE - 1] = 0;
    site_cache[slot].id = id;
    site_cache[slot].pysite = py;
    memcpy(site_cache[slot].txt, out, CCS_DSX_SITE);
}

/* Blocked calls: a ring's in-flight record of a blocking sequenced call. */
static void scan_inflight(uint64_t now)
{
    uint32_t pid = (uint32_t)getpid();
    int seen[MAX_TRACKED] = {0};
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next) {
        if (r->pid != pid)
            continue;
        struct ccs_record *p = atomic_load_explicit(&r->inflight, memory_order_acquire);
        if (!p)
            continue;
        struct ccs_record rec;
        ccs_record_snapshot(p, &rec); /* its thread may still be writing times and flags */
        if (atomic_load_explicit(&r->inflight, memory_order_acquire) != p)
            continue; /* it returned while we looked */
        if (!rec.comm || !rec.seq || !ccs_kind_sequenced(rec.kind) || (rec.flags & CCS_F_NONBLOCKING))
            continue;
        struct tracked *t = find(rec.comm, 1);
        if (!t)
            continue;
        seen[t - tc] = 1;
        if (!t->blocked || t->bop.seq != rec.seq) {
            t->blocked = 1;
            t->bop = op_of(&rec, NULL);
            t->bsince_ms = now;
            t->active_ms = now;
        }
    }
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tc[i].used && !seen[i])
            tc[i].blocked = 0;
}

/* The single kind of a step's kinds mask, or CCS_KIND_MAX when mixed. */
static uint16_t kind_of(uint64_t kinds)
{
    if (!kinds)
        return 0;
    return (kinds & (kinds - 1)) ? CCS_KIND_MAX : (uint16_t)__builtin_ctzll(kinds);
}

/* Calls per step of a live communicator, exact whatever the pass read:
 * the completed calls of the step of T's last record (T->done) and of the
 * step before it with calls here, from C's turns (the seq each step's
 * first collective had). */
static void step_counts(struct tracked *t, struct ccs_comm *c)
{
    if (!t->done)
        return;
    struct ccs_comm_turns tu;
    ccs_comm_turns(c, &tu);
    for (int j = 0; j < 3; j++) {
        if (!tu.seq0[j] || tu.step[j] != t->done_step || tu.seq0[j] > t->done)
            continue;
        t->step_now = tu.step[j];
        t->step_calls = (uint32_t)(t->done - tu.seq0[j] + 1);
        t->step_kind = kind_of(tu.kinds[j]);
        if (j + 1 < 3 && tu.seq0[j + 1]) {
            t->step_prev = tu.step[j + 1];
            t->prev_calls = (uint32_t)(tu.seq0[j] - tu.seq0[j + 1]);
            t->prev_kind = kind_of(tu.kinds[j + 1]);
        } else if (j + 1 < 3) { /* the first step with calls here */
            t->step_prev = 0;
            t->prev_calls = 0;
            t->prev_kind = 0;
        } /* (else the step before is older than the turns kept: as folded) */
        return;
    }
}

/* Sequence counters and membership from the comm table. */
static void sync_comm(struct ccs_comm *c, void *arg)
{
    uint64_t now = *(uint64_t *)arg;
    if (!c->agreed || !c->id)
        return;
    struct tracked *t = find(c->id, 1);
    if (!t)
        return;
    t->rank = c->rank;
    t->size = c->size;
    t->backend = c->backend;
    t->live = 1;
    t->mark = 1; /* seen in the table this pass */
    uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
    t->issued_moved = s != t->issued;
    if (s != t->issued) {
        t->active_ms = now;
        t->iss_since_ms = now;
    }
    t->issued = s;
    step_counts(t, c);
}

/* T's communicator has left the table: its exact final count, kept at its
 * free, replaces the last count a pass read (1 when known). */
static int take_final(struct tracked *t)
{
    uint64_t seq, hash;
    if (t->final || ccs_comm_final(t->id, &seq, &hash) != 0)
        return t->final;
    if (seq >= t->done)
        t->issued = seq;
    t->final = seq >= t->done;
    return t->final;
}

/* Rank and size of communicators seen only in records (created and freed
 * between two passes, e.g. a rank that finished quickly): from the table's
 * list of every definition, freed ones included. */
static void resolve_unknown(void)
{
    int need = 0;
    for (int i = 0; i < MAX_TRACKED; i++)
        need |= tc[i].used && tc[i].rank < 0;
    if (!need)
        return;
    struct ccs_trace_comm d[64];
    size_t from = 0, k;
    while ((k = ccs_comm_defs(from, d, 64)) > 0) {
        for (size_t j = 0; j < k; j++)
            for (int i = 0; i < MAX_TRACKED; i++)
                if (tc[i].used && tc[i].rank < 0 && tc[i].id == d[j].id && d[j].size > 0 && d[j].rank >= 0 &&
                    d[j].rank < d[j].size) {
                    tc[i].rank = d[j].rank;
                    tc[i].size = d[j].size;
                    tc[i].backend = d[j].backend;
                    /* Freed before any pass saw it live: its count kept at
                     * the free, else only what its records showed (not
                     * final: the rules then take it for unknown). */
                    tc[i].issued = tc[i].done;
                    take_final(&tc[i]);
                }
        from += k;
    }
}

/* A communicator whose calls stopped (ISSUED unchanged over a pass) with
 * completed calls that no pass read: more than TAIL records of other
 * communicators followed them in the same period, and the cursor skipped
 * them.  Left so, T's DONE would stay behind its last call for good (its
 * hash and probes, the records asked for, a device hang at its last seq,
 * the step counts).  So its newest completed records, up to CCS_DSX_HIST,
 * are read back from the rings once, when the calls stop: not every pass
 * (an active communicator's newest records come with a later pass's
 * tail), so the thread's work still does not grow with the call rate.
 * A call still in flight is not complete: it stays out.  Up to three
 * passes for one ISSUED, in case its record was being published. */
static void catch_up(struct tracked *t, uint64_t now)
{
    uint64_t hi = t->issued;
    if (t->blocked && t->bop.seq == hi)
        hi--;
    if (hi <= t->done || t->issued_moved || hi == t->caught)
        return;
    uint64_t lo = hi - t->done > CCS_DSX_HIST ? hi - CCS_DSX_HIST + 1 : t->done + 1;
    if (ring_range(t, lo, hi, range_out, range_have, 0))
        for (uint64_t q = lo; q <= hi; q++) /* all above DONE, in order */
            if (range_have[q - lo])
                fold(t, &range_out[q - lo], now);
    if (t->done == hi || ++t->catch_tries >= 3) {
        t->caught = hi;
        t->catch_tries = 0;
    }
}

/* NCCL: what the device completed on T (desync_device.c), and a call it
 * holds that does not complete: blocked. */
static void nccl_progress(struct tracked *t, uint64_t now)
{
    uint64_t d;
    if (ccs_dsx_device_done(t->id, &d)) {
        t->dev = 1;
        if (d != t->dev_done || t->issued <= d) {
            t->dev_done = d;
            t->dev_since_ms = now;
        }
        if (t->issued > d && !t->blocked) {
            /* Enqueued work that does not complete: blocked at the last seq
             * enqueued, since the device and the enqueueing both stopped.
             * (With rate-limited events only d + 1 .. issued is known to
             * hold the first uncompleted seq; the members of a program stop
             * at the same last seq, so they agree on it.) */
            for (unsigned h = 0; h < t->nhist; h++)
                if (hist_at(t, h)->seq == t->issued) {
                    t->blocked = 1;
                    t->bop = *hist_at(t, h);
                    t->bsince_ms = t->dev_since_ms > t->iss_since_ms ? t->dev_since_ms : t->iss_since_ms;
                }
        }
    }
}

/* More communicators than a status holds (CCS_DSX_MAXCOMM): which to
 * publish.  The rules and the search see a communicator only in a pass in
 * which every member published it, so the members must pick alike.  First
 * by tiers that every member sees the same way: waited for at a step
 * boundary, blocked, asked about by a search that narrows its interval or
 * wants its records (it asks every member alike), live, active in the
 * last RECENT_MS.  Then by turns that the wall clock gives every rank
 * alike: each communicator's place on a circle (its mixed id) is measured
 * from a pointer that moves a sixteenth of the circle every ROTATE_MS, and
 * the communicators just past the pointer come first.  Each so gets its
 * turn for several passes in a row (every member publishes it, the search
 * sees its hashes; a search that narrows then keeps it in view), and every
 * one comes round within 16 turns (0.8 s).  Across hosts the turns overlap
 * as long as the wall clocks differ by less than a turn's length (400 ms
 * with 16 communicators).  (Before: the most recently active first, which
 * with more than 8 active communicators picked a different subset on each
 * rank and in each pass, and with more than 8 idle ones the same 8 for
 * good: a MISMATCH on the others was never reported.) */
#define ROTATE_MS 50
#define RECENT_MS 1000
static uint64_t pick_now, pick_pointer;

static uint64_t pick_turn(const struct tracked *t) { return ccs_hash_mix(0, t->id) - pick_pointer; }

static int cmp_pick(const void *a, const void *b)
{
    const struct tracked *x = *(const struct tracked *const *)a, *y = *(const struct tracked *const *)b;
    if (x->boundary != y->boundary)
        return x->boundary ? -1 : 1;
    if (x->blocked != y->blocked)
        return x->blocked ? -1 : 1;
    int xa = x->want_rec || (x->want_probe & CCS_DSX_NARROW_BIT);
    int ya = y->want_rec || (y->want_probe & CCS_DSX_NARROW_BIT);
    if (xa != ya)
        return xa ? -1 : 1;
    if ((x->live != 0) != (y->live != 0))
        return x->live ? -1 : 1;
    int xr = pick_now - x->active_ms < RECENT_MS, yr = pick_now - y->active_ms < RECENT_MS;
    if (xr != yr)
        return xr ? -1 : 1;
    uint64_t tx = pick_turn(x), ty = pick_turn(y);
    return tx < ty ? -1 : tx > ty;
}

/* 1 when this rank waits at its step boundary for the members of ID. */
static int at_boundary(uint64_t id, const uint64_t *bcomm, uint32_t nb)
{
    for (uint32_t i = 0; i < nb; i++)
        if (bcomm[i] == id)
            return 1;
    return 0;
}

/* The calls since the last pass: the rings' newest records, the calls in
 * flight, the comm table (what was created and freed), the communicators
 * not yet known. */
static void read_calls(uint64_t now)
{
    fold_all(now);
    scan_inflight(now);
    for (int i = 0; i < MAX_TRACKED; i++)
        tc[i].mark = 0;
    ccs_comm_foreach(sync_comm, &now);
    resolve_unknown();
}

/* Each communicator's completed calls brought up to date: a freed one's
 * last, a live one's missed and its device progress (NCCL). */
static void settle_all(uint64_t now)
{
    for (int i = 0; i < MAX_TRACKED; i++) {
        struct tracked *t = &tc[i];
        if (!t->used)
            continue;
        if (t->live && !t->mark) {
            t->live = 0; /* gone from the table: freed */
            t->active_ms = now;
            t->issued_moved = 0;
            if (take_final(t))
                catch_up(t, now); /* its last records, that no pass read: DONE and the hash to its end */
        }
        if (t->live) {
            catch_up(t, now);
            nccl_progress(t, now);
        } else if (t->final && t->done < t->issued && t->caught != t->issued) {
            catch_up(t, now);
        }
    }
}

/* The communicators to publish into PICK, the most relevant first (see
 * cmp_pick: waited for at a step boundary, blocked, asked about, live,
 * recently active, then by turns); returns how many. */
static int pick_published(struct tracked **pick, const uint64_t *bcomm, uint32_t nb, uint64_t now)
{
    int np = 0;
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tc[i].used && tc[i].rank >= 0 && tc[i].size > 0) {
            tc[i].boundary = nb && at_boundary(tc[i].id, bcomm, nb);
            tc[i].want_rec = want_fn ? want_fn(tc[i].id, 0, want_arg) : 0;
            tc[i].want_probe = want_fn ? want_fn(tc[i].id, 1, want_arg) : 0;
            pick[np++] = &tc[i];
        }
    pick_now = now;
    /* (All fit: no turns, so an idle rank's status stays the same and goes
     * out as a heartbeat only.) */
    pick_pointer = np <= CCS_DSX_MAXCOMM ? 0
                                          : (ccs_clock_start_realtime_ns() / 1000000u +
                                             (now - ccs_clock_start_mono_ns() / 1000000u)) /
                                                ROTATE_MS * (UINT64_MAX / 16 + 1);
    qsort(pick, (size_t)np, sizeof pick[0], cmp_pick);
    return np;
}

/* E: what T is now (its counters, checkpoints, state, step counts, the
 * call it is blocked in, its newest operations). */
static void publish(struct ccs_dsx_comm *e, const struct tracked *t, uint64_t now)
{
    memset(e, 0, offsetof(struct ccs_dsx_comm, hist));
    e->id = t->id;
    e->rank = t->rank;
    e->size = t->size;
    e->backend = t->backend;
    e->done = t->done;
    e->issued = t->issued > t->done ? t->issued : t->done;
    if (t->blocked && t->bop.seq > e->issued)
        e->issued = t->bop.seq;
    e->hash = t->hash;
    memcpy(e->cp_seq, t->cp_seq, sizeof e->cp_seq);
    memcpy(e->cp_hash, t->cp_hash, sizeof e->cp_hash);
    e->flags = (uint16_t)(t->dev ? CCS_DSX_DEVICE : 0); /* (the hash is never lost: the hot path keeps it) */
    if (t->dev && t->live && t->issued > t->dev_done) /* a freed one finished its work first */
        e->dev_pending = (uint16_t)(t->issued - t->dev_done > UINT16_MAX ? UINT16_MAX : t->issued - t->dev_done);
    e->state = t->blocked ? CCS_DSX_BLOCKED : t->live ? CCS_DSX_IDLE : CCS_DSX_FREED;
    if (e->state == CCS_DSX_FREED && t->final)
        e->flags |= CCS_DSX_FINAL;
    if (t->boundary)
        e->flags |= CCS_DSX_BOUNDARY;
    e->step_now = t->step_now;
    e->step_calls = t->step_calls;
    e->step_kind = t->step_kind;
    e->step_prev = t->step_prev;
    e->prev_calls = t->prev_calls;
    e->prev_kind = t->prev_kind;
    if (t->blocked) {
        e->blocked = t->bop;
        uint64_t ms = now - t->bsince_ms;
        e->blocked_ms = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
        site_text(&t->bop, e->site_blocked);
    }
    if (t->nhist)
        site_text(hist_at(t, t->nhist - 1), e->site_last);
    e->nhist = (uint16_t)t->nhist;
    for (unsigned h = 0; h < t->nhist; h++)
        e->hist[h] = *hist_at(t, h);
}

/* Records asked for: the operations around that seq instead of the newest
 * (the newest are what is published otherwise), read back from the
 * rings. */
static void publish_asked_records(struct ccs_dsx_comm *e, struct tracked *t)
{
    uint64_t w = t->want_rec;
    if (w && w <= t->done) {
        uint64_t lo = w > CCS_DSX_HIST / 2 ? w - CCS_DSX_HIST / 2 + 1 : 1;
        uint64_t hi = lo + CCS_DSX_HIST - 1 < t->done ? lo + CCS_DSX_HIST - 1 : t->done;
        if (ring_range(t, lo, hi, range_out, range_have, 1)) {
            unsigned n = 0;
            for (uint64_t q = lo; q <= hi; q++)
                if (range_have[q - lo])
                    e->hist[n++] = op_of(&range_out[q - lo], t);
            e->nhist = (uint16_t)n;
            e->flags |= CCS_DSX_PINNED;
        }
    }
}

/* A probe: the hash through that seq, in the second checkpoint. */
static void publish_probe(struct ccs_dsx_comm *e, struct tracked *t)
{
    uint64_t praw = t->want_probe, p = praw & ~CCS_DSX_NARROW_BIT;
    if (p && p <= t->done && praw != t->probe_seq) {
        /* Read back once per probe, not in every pass while it is
         * asked for: a completed record's hash does not change, and
         * one the rings no longer hold does not come back.  (Every
         * pass read it back, up to FIND_SCAN records, before: a
         * third of the thread's time in a loop of 2.4 million calls
         * a second.) */
        t->probe_seq = praw; /* (with its bit: a look that was not read deep is read deep once narrowing) */
        t->probe_found = ring_range(t, p, p, range_out, range_have, (praw & CCS_DSX_NARROW_BIT) != 0) != 0;
        t->probe_hash = t->probe_found ? range_out[0].fingerprint : 0;
    }
    if (p && praw == t->probe_seq && t->probe_found) {
        e->cp_seq[1] = p;
        e->cp_hash[1] = t->probe_hash;
        e->flags |= CCS_DSX_PROBED;
    }
}

void ccs_dsx_collect(struct ccs_dsx_status *st, uint64_t now)
{
    uint64_t bcomm[CCS_BOUNDARY_COMMS];
    uint32_t nb = 0;
    st->boundary = ccs_boundary_get(bcomm, &nb);
    st->step = ccs_step_now();
    ccs_step_units(&st->units, &st->units_prev);
    read_calls(now);
    settle_all(now);
    struct tracked *pick[MAX_TRACKED];
    int np = pick_published(pick, bcomm, nb, now);
    st->ncomm = 0;
    for (int i = 0; i < np && st->ncomm < CCS_DSX_MAXCOMM; i++) {
        struct tracked *t = pick[i];
        struct ccs_dsx_comm *e = &st->comm[st->ncomm++];
        publish(e, t, now);
        publish_asked_records(e, t);
        publish_probe(e, t);
    }
}

int ccs_dsx_collect_find(uint64_t comm, uint64_t seq, struct ccs_dsx_op *out)
{
    struct tracked *t = find(comm, 0);
    if (!t)
        return 0;
    for (unsigned h = t->nhist; h-- > 0;)
        if (hist_at(t, h)->seq <= seq) {
            *out = *hist_at(t, h);
            return 1;
        }
    return 0;
}

void ccs_dsx_collect_reset(void)
{
    memset(tc, 0, sizeof tc);
    ccs_ring_reader_at_end(&reader);
}
