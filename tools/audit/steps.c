/*
 * steps.c - how ccshim-audit splits a job into steps.  With step markers
 * (ccshim_step_mark) each record carries its step.  Without them a training
 * loop still repeats the same calls every step, so the step is the shortest
 * period of the call stream, after a head of setup calls (parameter
 * broadcasts, communicator creation) that happen once.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include "trace_reader.h"
#include <stdlib.h>
#include <string.h>

int audit_infer_period(const uint32_t *tok, size_t n, uint64_t *period, uint64_t *head)
{
    /* The smallest P for which the last mismatch tok[i] != tok[i+P] lies
     * before N - 2P (at least two whole periods after the head) and in the
     * first half (a head, not most of the stream). Walking back from the end
     * stops at the first mismatch, so wrong periods cost little. */
    for (size_t p = 1; p <= n / 2; p++) {
        size_t i = n - p; /* candidate head: one past the last mismatch */
        while (i > 0 && tok[i - 1] == tok[i - 1 + p])
            i--;
        if (i + 2 * p > n || i > n / 2)
            continue;
        *period = p;
        *head = i;
        return 0;
    }
    return -1;
}

struct tok_key {
    uint64_t comm, bytes, buf;
    uint32_t kind, deferred;
};
struct tok_ent {
    struct tok_key k;
    uint32_t id;
};

/* The steps of trace F, into F->steps: its own markers when it has any,
 * else the period of its own call stream (none when it has no repeating
 * pattern: everything is its step 0). */
static void file_steps(struct audit *a, struct audit_file *f)
{
    memset(&f->steps, 0, sizeof f->steps);
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(f->path, err, sizeof err);
    if (!r)
        return;
    struct hmap ids;
    hmap_init(&ids, sizeof(struct tok_ent), sizeof(struct tok_key));
    uint32_t *tok = NULL;
    size_t n = 0, cap = 0;
    int markers = 0, oom = 0;
    struct ccs_item it;
    while (!markers && ccs_trace_next(r, &it, err, sizeof err) == 1) {
        if (it.type != CCS_ITEM_RECORD)
            continue;
        const struct ccs_record *rec = &it.u.record;
        if (rec->kind == CCS_KIND_STEP || rec->step > 0) {
            markers = 1;
            break;
        }
        if (n >= a->max_tokens || oom)
            continue; /* keep scanning for markers */
        struct tok_key k;
        memset(&k, 0, sizeof k);
        k.comm = rec->comm;
        k.bytes = rec->bytes;
        k.buf = ccs_kind_reduces(rec->kind) ? rec->buf : 0;
        k.kind = rec->kind;
        k.deferred = (rec->flags & CCS_F_DEFERRED) != 0;
        struct tok_ent *e = hmap_get(&ids, &k, 0);
        if (!e) {
            size_t id = ids.n;
            e = hmap_get(&ids, &k, 1);
            if (!e) {
                oom = 1;
                continue;
            }
            e->id = (uint32_t)id;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 4096;
            uint32_t *t = realloc(tok, nc * sizeof *t);
            if (!t) {
                oom = 1;
                continue;
            }
            tok = t;
            cap = nc;
        }
        tok[n++] = e->id;
    }
    ccs_trace_close(r);
    hmap_free(&ids);
    if (markers) {
        f->steps.source = STEPS_MARKERS;
    } else if (n > 0) {
        f->steps.tokens = n;
        if (audit_infer_period(tok, n, &f->steps.period, &f->steps.head) == 0)
            f->steps.source = STEPS_INFERRED;
    }
    free(tok);
}

/* Each trace's steps come from that trace (issue 41: a rank that never
 * ended its step 0 has no markers, and the period inferred from its stream
 * was applied to a rank whose trace has them).  The job marks steps when
 * any trace has markers: a trace without them is then all in its step 0
 * (it never ended one), not inferred.  Otherwise each trace's own period
 * counts its steps; A->steps, what the outputs say of the job, is the
 * first readable trace's, as before. */
void audit_find_steps(struct audit *a)
{
    memset(&a->steps, 0, sizeof a->steps);
    int chosen = 0;
    for (size_t fi = 0; fi < a->nfiles; fi++) {
        struct audit_file *f = &a->files[fi];
        if (f->status == FILE_REFUSED)
            continue;
        file_steps(a, f);
        if (f->steps.source == STEPS_MARKERS)
            a->steps.source = STEPS_MARKERS;
        else if (!chosen && f->steps.tokens > 0 && a->steps.source != STEPS_MARKERS) {
            a->steps = f->steps;
            chosen = 1;
        }
    }
    if (a->steps.source != STEPS_MARKERS)
        return;
    memset(&a->steps, 0, sizeof a->steps);
    a->steps.source = STEPS_MARKERS;
    for (size_t fi = 0; fi < a->nfiles; fi++)
        if (a->files[fi].status != FILE_REFUSED && a->files[fi].steps.source != STEPS_MARKERS) {
            memset(&a->files[fi].steps, 0, sizeof a->files[fi].steps);
            a->files[fi].steps.source = STEPS_MARKERS;
        }
}

uint32_t audit_step_of(const struct audit_file *f, const struct ccs_record *r, uint64_t idx)
{
    if (f->steps.source != STEPS_INFERRED)
        return r->step;
    if (idx < f->steps.head || f->steps.period == 0)
        return 0;
    uint64_t s = (idx - f->steps.head) / f->steps.period;
    return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}
