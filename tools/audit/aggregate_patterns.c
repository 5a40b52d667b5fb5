/*
 * aggregate_patterns.c - the reference rank's call pattern: its calls kept as tokens
 * (interned labels), and at its file's end each communicator's repeating
 * pattern (pattern.c compresses it).
 */
#include "aggregate.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct label_arg {
    struct file_reading *rd;
    struct label **by_id;
    char buf[256];
};

static uint32_t intern_label(struct file_reading *rd, const struct ccs_record *r, uint32_t site)
{
    struct label_key k;
    memset(&k, 0, sizeof k);
    k.kind = r->kind;
    k.deferred = (r->flags & CCS_F_DEFERRED) != 0;
    k.bytes = r->bytes;
    k.buf = ccs_kind_reduces(r->kind) ? r->buf : 0;
    k.pysite_site = site && site <= rd->a->nsites && rd->a->site_list[site - 1]->pysite ? site : 0;
    struct label *l = hmap_get(&rd->labels, &k, 0);
    if (l)
        return l->id;
    l = hmap_get(&rd->labels, &k, 1);
    if (!l)
        return 0;
    l->id = (uint32_t)rd->nlabels;
    rd->nlabels++;
    if (k.buf) { /* number buffers in order of first use */
        struct {
            uint64_t buf;
            uint64_t idx;
        } bk = {k.buf, 0}, *b = hmap_get(&rd->bufidx, &bk, 0);
        if (!b) {
            size_t n = rd->bufidx.n;
            b = hmap_get(&rd->bufidx, &bk, 1);
            if (b)
                b->idx = n;
        }
    }
    return l->id;
}

static const char *label_text(uint32_t id, void *arg)
{
    struct label_arg *la = arg;
    struct file_reading *rd = la->rd;
    if (id < rd->nlabels && la->by_id[id]) {
        struct label *l = la->by_id[id];
        char b[32], kb[48];
        int o = snprintf(la->buf, sizeof la->buf, "%s %s", kind_label(l->k.kind, (int)l->k.deferred, kb, sizeof kb),
                         fmt_bytes(l->k.bytes, b, sizeof b));
        if (l->k.buf) {
            struct {
                uint64_t buf;
                uint64_t idx;
            } bk = {l->k.buf, 0}, *bi = hmap_get(&rd->bufidx, &bk, 0);
            if (bi && o > 0 && (size_t)o < sizeof la->buf)
                o += snprintf(la->buf + o, sizeof la->buf - (size_t)o, " @buf%" PRIu64, bi->idx);
        }
        if (l->k.pysite_site && o > 0 && (size_t)o < sizeof la->buf) {
            /* "from train.py:57": the line, without the function */
            const char *t = rd->a->site_list[l->k.pysite_site - 1]->pysite, *in = strstr(t, " in ");
            int tl = in ? (int)(in - t) : (int)strlen(t);
            snprintf(la->buf + o, sizeof la->buf - (size_t)o, " from %.*s", tl > 80 ? 80 : tl, t);
        }
        return la->buf;
    }
    return "?";
}

static int tok_cmp(const void *p, const void *q)
{
    const struct token *a = p, *b = q;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Compresses the reference rank's calls of each (step, comm) into a pattern. */
void agg_make_patterns(struct file_reading *rd)
{
    struct audit *a = rd->a;
    struct label_arg la = {.rd = rd};
    if (!rd->ntoks)
        return;
    la.by_id = calloc(rd->nlabels + 1, sizeof *la.by_id);
    if (!la.by_id)
        return;
    for (size_t i = 0; i < rd->labels.cap; i++) {
        struct label *l = hmap_slot(&rd->labels, i);
        if (l && l->id < rd->nlabels)
            la.by_id[l->id] = l;
    }
    qsort(rd->toks, rd->ntoks, sizeof *rd->toks, tok_cmp);
    uint32_t *ids = malloc(rd->ntoks * sizeof *ids);
    if (!ids) {
        free(la.by_id);
        return;
    }
    for (size_t i = 0; i < rd->ntoks;) {
        size_t j = i;
        while (j < rd->ntoks && rd->toks[j].step == rd->toks[i].step && rd->toks[j].comm == rd->toks[i].comm) {
            ids[j - i] = rd->toks[j].label;
            j++;
        }
        struct audit_stepcomm_key k;
        memset(&k, 0, sizeof k);
        k.comm = rd->toks[i].comm;
        k.step = rd->toks[i].step;
        struct audit_stepcomm *sc = hmap_get(&a->stepcomms, &k, 1);
        if (sc && !sc->pattern) {
            char *p = audit_compress(ids, j - i, label_text, &la);
            if (p && rd->toks_capped && j == rd->ntoks) {
                size_t l = strlen(p);
                char *q = realloc(p, l + 32);
                if (q) {
                    strcpy(q + l, ", ... (capped)");
                    p = q;
                }
            }
            sc->pattern = p;
        }
        i = j;
    }
    free(ids);
    free(la.by_id);
}

/* The reference rank's call stream, for the patterns (capped at max_tokens). */
void agg_keep_token(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site)
{
    if (rd->ntoks == rd->captoks && !rd->toks_capped) {
        size_t cap = rd->captoks ? rd->captoks * 2 : 4096;
        if (cap > rd->a->max_tokens)
            cap = rd->a->max_tokens;
        struct token *grown = cap > rd->captoks ? realloc(rd->toks, cap * sizeof *grown) : NULL;
        if (grown) {
            rd->toks = grown;
            rd->captoks = cap;
        } else {
            rd->toks_capped = 1;
        }
    }
    /* The patterns order a communicator's calls by sequence number (the
     * threads' records interleave chunk by chunk).  A call without one
     * (comm_init, comm_free: 0) goes where it came in the stream: after the
     * last sequenced call of its communicator before it, not first. */
    struct {
        uint64_t comm, seq;
    } lk = {r->comm, 0}, *last = hmap_get(&rd->last_seq, &lk, 1);
    uint64_t seq = r->seq;
    if (last && ccs_kind_sequenced(r->kind) && r->seq > last->seq)
        last->seq = r->seq;
    else if (last && !ccs_kind_sequenced(r->kind) && r->seq == 0)
        seq = last->seq;
    if (rd->ntoks < rd->captoks) {
        struct token *t = &rd->toks[rd->ntoks];
        t->comm = r->comm;
        t->seq = seq;
        t->order = rd->ntoks;
        t->step = step;
        t->label = intern_label(rd, r, site);
        rd->ntoks++;
    }
}
