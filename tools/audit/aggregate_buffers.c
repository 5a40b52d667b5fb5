/*
 * aggregate_buffers.c - the audit reader's reductions per buffer: each counted on its
 * buffer (address, size and operation) in its step; at a file's end its
 * buffers fold into the repeats (a buffer reduced k times in a step) and
 * the --expect rules per buffer.
 */
#include "aggregate.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One rank's most repeated buffer in one (step, comm), among one set of reductions. */
struct buffer_repeats {
    uint32_t max_k, repeated;
    uint64_t bytes, count;
    uint32_t kind, dtype, op, site;
};

/* One rank's repeats in one (step, comm): over all reductions and over
 * those coalescing could defer. */
struct rank_repeats {
    struct audit_stepcomm_key k;
    struct buffer_repeats all, coalescible;
};

/* Counts one buffer's real reductions against every --expect /buffer rule of its kind. */
static void check_buffer_expects(struct audit *a, int32_t rank, const struct buf_use *b)
{
    uint64_t real = b->count - b->deferred;
    for (size_t e = 0; e < a->nexpects; e++) {
        struct audit_expect *ex = &a->expects[e];
        if (ex->scope != EXPECT_BUFFER || (uint32_t)ex->kind != b->k.kind)
            continue;
        if (real > ex->limit)
            ex->violations++;
        if (real > ex->worst) {
            ex->worst = real;
            ex->worst_step = b->k.step;
            ex->worst_rank = rank;
            ex->worst_comm = b->k.comm;
        }
    }
}

/* Counts buffer B, reduced REAL times, in R. */
static void note_repeats(struct buffer_repeats *r, const struct buf_use *b, uint64_t real)
{
    if (real > 1)
        r->repeated++;
    if (real > r->max_k || (real == r->max_k && b->bytes > r->bytes)) { /* ties: the largest buffer */
        r->max_k = (uint32_t)real;
        r->bytes = b->bytes;
        r->count = b->k.count;
        r->kind = b->k.kind;
        r->dtype = b->k.dtype;
        r->op = b->k.op;
        r->site = b->site;
    }
}

/* Adds one reduced buffer to its (step, comm)'s repeats on this rank. */
static void note_buffer_repeats(struct rank_repeats *l, const struct buf_use *b)
{
    uint64_t real = b->count - b->deferred; /* deferred ones never reached the network */
    note_repeats(&l->all, b, real);
    if (audit_coalescible(b->k.kind, b->k.dtype, b->k.op, b->bytes))
        note_repeats(&l->coalescible, b, real);
}

/* Merges RANK's repeats R into the (step, comm)'s over all ranks. */
static void merge_repeats(struct audit_repeats *all, const struct buffer_repeats *r, int32_t rank)
{
    if (r->max_k > all->max_k || (r->max_k == all->max_k && r->bytes > all->bytes)) {
        all->max_k = r->max_k;
        all->rank = rank;
        all->bytes = r->bytes;
        all->count = r->count;
        all->kind = r->kind;
        all->dtype = r->dtype;
        all->op = r->op;
        all->site = r->site;
    }
    if (r->max_k > 1) {
        all->ranks_repeating++;
        if (all->min_k == 0 || r->max_k < all->min_k)
            all->min_k = r->max_k;
    }
    if (r->repeated > all->repeated_bufs)
        all->repeated_bufs = r->repeated;
}

/* Folds the file's per-buffer counts into the per-(step, comm) facts. */
void agg_fold_buffers(struct file_reading *rd)
{
    struct audit *a = rd->a;
    int32_t rank = rd->f->rank;
    struct hmap repeats; /* struct rank_repeats by (step, comm) */
    hmap_init(&repeats, sizeof(struct rank_repeats), sizeof(struct audit_stepcomm_key));
    for (size_t i = 0; i < rd->bufs.cap; i++) {
        struct buf_use *b = hmap_slot(&rd->bufs, i);
        if (!b)
            continue;
        check_buffer_expects(a, rank, b);
        if (!ccs_kind_reduces(b->k.kind))
            continue;
        struct audit_stepcomm_key k;
        memset(&k, 0, sizeof k);
        k.comm = b->k.comm;
        k.step = b->k.step;
        struct rank_repeats *l = hmap_get(&repeats, &k, 1);
        if (l)
            note_buffer_repeats(l, b);
    }
    for (size_t i = 0; i < repeats.cap; i++) {
        struct rank_repeats *l = hmap_slot(&repeats, i);
        struct audit_stepcomm *sc = l ? hmap_get(&a->stepcomms, &l->k, 1) : NULL;
        if (sc) {
            merge_repeats(&sc->all, &l->all, rank);
            merge_repeats(&sc->coalescible, &l->coalescible, rank);
        }
    }
    hmap_free(&repeats);
}

/* Per-buffer reuse within the step (reductions, and any --expect /buffer kind). */
void agg_count_buffer_use(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site,
                             int deferred)
{
    if (!r->buf || !(ccs_kind_reduces(r->kind) || rd->a->nexpects))
        return;
    struct buf_key bk;
    memset(&bk, 0, sizeof bk);
    bk.comm = r->comm;
    bk.buf = r->buf;
    bk.step = step;
    bk.kind = r->kind;
    bk.count = r->count;
    bk.dtype = r->dtype;
    bk.op = r->op;
    struct buf_use *b = hmap_get(&rd->bufs, &bk, 1);
    if (b) {
        b->count++;
        b->deferred += (uint64_t)deferred;
        b->bytes = r->bytes;
        b->site = site;
    }
}
