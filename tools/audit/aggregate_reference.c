/*
 * aggregate_reference.c - each rank against the reference rank: a sequenced call
 * compared with the reference's at the same seq (the first difference per
 * communicator), and at the end the first difference of a rank whose
 * stream is shorter or longer than the reference's.
 */
#include "aggregate.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grows the reference arrays of CM to hold sequence index I, unless that
 * passes MAX_REF (then the reference stays shorter). */
static void grow_reference(struct audit_comm *cm, uint64_t i, uint64_t max_ref)
{
    if (i < cm->ref_cap || i >= max_ref)
        return;
    uint64_t cap = cm->ref_cap ? cm->ref_cap : 1024;
    while (cap <= i)
        cap *= 2;
    uint64_t *fingerprints = realloc(cm->ref_fp, cap * sizeof *fingerprints);
    if (fingerprints)
        cm->ref_fp = fingerprints;
    uint32_t *steps = fingerprints ? realloc(cm->ref_step, cap * sizeof *steps) : NULL;
    if (steps) {
        cm->ref_step = steps;
        memset(fingerprints + cm->ref_cap, 0, (cap - cm->ref_cap) * sizeof *fingerprints);
        memset(steps + cm->ref_cap, 0, (cap - cm->ref_cap) * sizeof *steps);
        cm->ref_cap = cap;
    }
}

/* The first rank seen on a communicator writes its reference fingerprints
 * and steps; every other rank is compared with them and its first
 * departure kept. */
void agg_compare_with_reference(struct file_reading *rd, const struct ccs_record *r, uint32_t step)
{
    struct audit *a = rd->a;
    int32_t rank = rd->f->rank;
    struct audit_comm *cm = audit_comm_get(a, r->comm, 1);
    struct audit_rankcomm_key rk;
    memset(&rk, 0, sizeof rk);
    rk.comm = r->comm;
    rk.rank = rank;
    struct audit_rankcomm *rc = hmap_get(&a->rankcomms, &rk, 1);
    if (!cm || !rc)
        return;
    if (cm->ref_rank < 0)
        cm->ref_rank = rank;
    if (r->seq > rc->max_seq) {
        rc->max_seq = r->seq;
        rc->max_seq_step = step;
    }
    uint64_t i = r->seq - 1;
    if (cm->ref_rank == rank) {
        grow_reference(cm, i, a->max_ref_fp);
        if (i < cm->ref_cap) {
            cm->ref_fp[i] = r->fingerprint;
            cm->ref_step[i] = step;
            if (i + 1 > cm->ref_len)
                cm->ref_len = i + 1;
        } else {
            cm->ref_capped = 1;
        }
    } else if (i < cm->ref_len && (cm->ref_fp[i] != r->fingerprint || cm->ref_step[i] != step) &&
               (rc->first_diff == 0 || r->seq < rc->first_diff)) {
        rc->first_diff = r->seq;
        rc->first_diff_step = step;
    }
}

static int i32_cmp(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* Each communicator's members (ranks with sequenced calls on it), sorted. */
static void index_members(struct audit *a)
{
    for (size_t i = 0; i < a->rankcomms.cap; i++) {
        struct audit_rankcomm *rc = hmap_slot(&a->rankcomms, i);
        struct audit_comm *cm = rc ? audit_comm_get(a, rc->k.comm, 0) : NULL;
        if (!cm)
            continue;
        int32_t *n = realloc(cm->members, (cm->nmembers + 1) * sizeof *n);
        if (!n)
            continue;
        cm->members = n;
        cm->members[cm->nmembers++] = rc->k.rank;
    }
    for (size_t i = 0; i < a->ncomms; i++)
        if (a->comms[i].nmembers)
            qsort(a->comms[i].members, a->comms[i].nmembers, sizeof(int32_t), i32_cmp);
}

/* A rank that stops early or runs on departs from the reference where the
 * shorter of the two ends. */
void agg_finish_first_diffs(struct audit *a)
{
    index_members(a);
    for (size_t i = 0; i < a->rankcomms.cap; i++) {
        struct audit_rankcomm *rc = hmap_slot(&a->rankcomms, i);
        if (!rc)
            continue;
        struct audit_comm *cm = audit_comm_get(a, rc->k.comm, 0);
        if (!cm || cm->ref_rank == rc->k.rank)
            continue;
        struct audit_rankcomm_key rk;
        memset(&rk, 0, sizeof rk);
        rk.comm = rc->k.comm;
        rk.rank = cm->ref_rank;
        struct audit_rankcomm *ref = hmap_get(&a->rankcomms, &rk, 0);
        if (!ref || ref->max_seq == rc->max_seq)
            continue;
        uint64_t end = (ref->max_seq < rc->max_seq ? ref->max_seq : rc->max_seq) + 1;
        if (rc->first_diff == 0 || end < rc->first_diff) {
            rc->first_diff = end;
            rc->first_diff_step = ref->max_seq < rc->max_seq ? rc->max_seq_step : ref->max_seq_step;
        }
    }
}
