/* test_agg.c - the tree's fold (src/desync/desync_agg.c; docs/desync.md,
 * "The tree"): what a group of ranks folds to, who is listed, the AGG
 * frame's round trip and its decoder's refusals, the root's comparison. */
#include "ccs_kinds.h"
#include "desync_agg.h"
#include "fingerprint.h"
#include "unit_main.h"
#include <stdlib.h>
#include <string.h>

#define WORLD 0xf00du
#define PAIR 0xbeefu
#define G 8   /* ranks in the group under test */
#define WS 16 /* the job: two groups of 8 */
#define FP_OK 0x1111u
#define FP_ODD 0x2222u

static struct ccs_dsx_status st[WS];
static const struct ccs_dsx_status *sp[WS];
static struct ccs_dsx_agg agg, agg2;
static uint32_t listed[WS];

static struct ccs_dsx_op op_at(uint64_t seq, uint64_t fp)
{
    struct ccs_dsx_op o;
    memset(&o, 0, sizeof o);
    o.seq = seq;
    o.fp = fp;
    o.count = 4;
    o.kind = CCS_KIND_ALLREDUCE;
    o.dtype = CCS_DT_FLOAT32;
    o.op = CCS_OP_SUM;
    o.root = -1;
    return o;
}

/* Rank R's world entry at DONE completed calls, its call at ODD_AT (0:
 * none) of fingerprint FP_ODD. */
static void world_at(int r, uint64_t done, uint64_t odd_at)
{
    struct ccs_dsx_comm *c = &st[r].comm[0];
    c->id = WORLD;
    c->rank = r;
    c->size = WS;
    c->hash = 0;
    for (uint64_t s = 1; s <= done; s++) {
        c->hash = ccs_hash_mix(c->hash, s == odd_at ? FP_ODD : FP_OK);
        if (s % CCS_DSX_CHECKPOINT == 0) {
            c->cp_seq[1] = c->cp_seq[0], c->cp_hash[1] = c->cp_hash[0];
            c->cp_seq[0] = s, c->cp_hash[0] = c->hash;
        }
    }
    c->done = c->issued = done;
}

/* G ranks of a 16-rank job, ranks 0..7, each at 40 + r % 3 completed calls. */
static void group(uint64_t odd_rank_plus1, uint64_t odd_at)
{
    memset(st, 0, sizeof st);
    for (int r = 0; r < G; r++) {
        st[r].magic = CCS_DSX_MAGIC;
        st[r].version = CCS_DSX_VERSION;
        st[r].wrank = r;
        st[r].wsize = WS;
        st[r].ncomm = 1;
        world_at(r, 40 + (uint64_t)(r % 3), odd_rank_plus1 == (uint64_t)r + 1 ? odd_at : 0);
        sp[r] = &st[r];
    }
}

/* Everyone but rank 1 blocked at world seq 43 for MS; rank 1 done at 42,
 * blocked in PAIR {0, 1} (entirely in the group) instead. */
static void deadlock(uint32_t ms)
{
    group(0, 0);
    for (int r = 0; r < G; r++) {
        world_at(r, 42, 0);
        struct ccs_dsx_comm *c = &st[r].comm[0];
        if (r == 1)
            continue;
        c->issued = 43;
        c->state = CCS_DSX_BLOCKED;
        c->blocked = op_at(43, FP_OK);
        c->blocked_ms = ms + (uint32_t)r * 10;
    }
    for (int r = 0; r < 2; r++) {
        struct ccs_dsx_comm *p = &st[r].comm[1];
        st[r].ncomm = 2;
        p->id = PAIR;
        p->rank = r;
        p->size = 2;
        if (r == 1) {
            p->issued = 1;
            p->state = CCS_DSX_BLOCKED;
            p->blocked = op_at(1, FP_OK);
            p->blocked_ms = ms;
        }
    }
}

START_TEST(healthy_group_folds_to_one_entry_and_lists_no_one)
{
    group(0, 0);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.head.nranks, G);
    ck_assert_uint_eq(agg.head.ncomm, 1);
    ck_assert_uint_eq(agg.head.nlisted, 0);
    const struct ccs_dsx_agg_comm *c = &agg.comm[0];
    ck_assert_uint_eq(c->id, WORLD);
    ck_assert_int_eq(c->size, WS);
    ck_assert_uint_eq(c->members, G);
    ck_assert_uint_eq(c->done_min, 40);
    ck_assert_uint_eq(c->done_max, 42);
    ck_assert_uint_eq(c->nblocked, 0);
    /* Every member holds the checkpoints at 32 and 16 (8 each); their
     * completed calls: 40 (3: ranks 0, 3, 6), 41 (3), 42 (2).  Kept: the
     * seqs most members hold, 4 of them, in seq order. */
    ck_assert_uint_eq(c->nhash, 4);
    ck_assert_uint_eq(c->hash[0].seq, 16);
    ck_assert_uint_eq(c->hash[0].n, 8);
    ck_assert_uint_eq(c->hash[1].seq, 32);
    ck_assert_uint_eq(c->hash[1].n, 8);
    ck_assert_uint_eq(c->hash[2].seq, 40);
    ck_assert_uint_eq(c->hash[2].n, 3);
    ck_assert_uint_eq(c->hash[3].seq, 41);
    ck_assert_uint_eq(c->hash[3].n, 3);
    /* The frame does not grow with the ranks: head and one fold. */
    ck_assert_uint_eq(ccs_dsx_agg_encoded_size(&agg, sp, listed), 40 + 192);
}
END_TEST

START_TEST(odd_hash_lists_the_odd_rank_only)
{
    group(3 + 1, 20); /* rank 3's call at seq 20 differs */
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.head.nlisted, 1);
    ck_assert_uint_eq(listed[0], 3);
    ck_assert_uint_eq(agg.comm[0].listed, 1);
    ck_assert_uint_eq(agg.comm[0].odd, 1);
    /* The majority's hash is kept at the checkpoint: 7 of 8. */
    ck_assert_uint_eq(agg.comm[0].hash[1].seq, 32);
    ck_assert_uint_eq(agg.comm[0].hash[1].n, 7);
    ck_assert_uint_eq(agg.comm[0].hash[1].hash, st[0].comm[0].cp_hash[0]);
}
END_TEST

START_TEST(long_wait_lists_the_rank_blocked_elsewhere)
{
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    /* PAIR is entirely in the group: not folded, the relay judges it. */
    ck_assert_uint_eq(agg.head.ncomm, 1);
    ck_assert_uint_eq(agg.comm[0].id, WORLD);
    ck_assert_uint_eq(agg.comm[0].nblocked, 7);
    ck_assert_uint_eq(agg.comm[0].block_seq, 43);
    ck_assert_uint_eq(agg.comm[0].block_fp, FP_OK);
    ck_assert_uint_eq(agg.comm[0].block_ms, 1270);
    ck_assert_uint_eq(agg.comm[0].block_ms_min, 1200);
    ck_assert_uint_eq(agg.head.nlisted, 1);
    ck_assert_uint_eq(listed[0], 1);
    /* A short wait (calls in flight in a healthy job) lists no one. */
    deadlock(100);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.comm[0].nblocked, 7);
    ck_assert_uint_eq(agg.head.nlisted, 0);
}
END_TEST

START_TEST(other_blocked_operation_or_life_is_listed)
{
    deadlock(100);
    st[5].comm[0].blocked = op_at(43, FP_ODD); /* another operation at the seq */
    st[6].life = CCS_DSX_EXITED;
    st[7].boundary = 1;
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.comm[0].nblocked, 6);
    ck_assert_uint_eq(agg.head.nlisted, 3);
    ck_assert_uint_eq(listed[0], 5);
    ck_assert_uint_eq(listed[1], 6);
    ck_assert_uint_eq(listed[2], 7);
}
END_TEST

START_TEST(full_table_lists_the_rank_and_stays_bounded)
{
    /* 9 ranks of 8 communicators each, every id their own (all spanning
     * the group): 72 ids for 64 places.  Ranks 0..7 fill the table; rank
     * 8 finds no room and is listed whole. */
    group(0, 0);
    for (int r = 0; r < 9; r++) {
        if (r == G) {
            st[r] = st[0];
            st[r].wrank = r;
            sp[r] = &st[r];
        }
        st[r].ncomm = CCS_DSX_MAXCOMM;
        for (int k = 0; k < CCS_DSX_MAXCOMM; k++) {
            st[r].comm[k] = st[r].comm[0];
            st[r].comm[k].id = 0x100u + (uint64_t)(r * CCS_DSX_MAXCOMM + k);
        }
    }
    ccs_dsx_agg_fold(sp, 9, 500, &agg, listed);
    ck_assert_uint_eq(agg.head.ncomm, CCS_DSX_AGG_MAXCOMM);
    ck_assert_uint_eq(agg.head.nlisted, 1);
    ck_assert_uint_eq(listed[0], G);
    for (uint32_t i = 1; i < agg.head.ncomm; i++)
        ck_assert_uint_gt(agg.comm[i].id, agg.comm[i - 1].id);
    /* With one id in common (the world), all 9 fit: 1 + 9 x 7. */
    for (int r = 0; r < 9; r++)
        st[r].comm[0].id = WORLD;
    ccs_dsx_agg_fold(sp, 9, 500, &agg, listed);
    ck_assert_uint_eq(agg.head.ncomm, 1 + 9 * 7);
    ck_assert_uint_eq(agg.head.nlisted, 0);
}
END_TEST

START_TEST(odd_completed_seq_is_listed_before_a_checkpoint)
{
    /* Rank 4 (41 completed) made another call at seq 41: its checkpoints
     * agree, its hash at 41 is 1 against ranks 1 and 7's 2. */
    group(4 + 1, 41);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.head.nlisted, 1);
    ck_assert_uint_eq(listed[0], 4);
    ck_assert_uint_eq(agg.comm[0].odd, 1);
}
END_TEST

static int want_world(uint64_t comm, void *arg)
{
    (void)arg;
    return comm == WORLD;
}

static int want_none(uint64_t comm, void *arg)
{
    (void)arg, (void)comm;
    return 0;
}

START_TEST(asked_communicator_lists_a_reference)
{
    static uint8_t mark[WS];
    /* Hashes differ: the odd rank and one reference (the lowest other). */
    group(3 + 1, 20);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ccs_dsx_agg_list_asked(&agg, sp, G, listed, mark, want_world, NULL);
    ck_assert_uint_eq(agg.head.nlisted, 2);
    ck_assert_uint_eq(listed[0], 3);
    ck_assert_uint_eq(listed[1], 0);
    ck_assert_uint_eq(mark[3], CCS_DSX_AGG_ODD);
    ck_assert_uint_eq(mark[0], CCS_DSX_AGG_REF);
    ck_assert_uint_eq(agg.comm[0].listed, 2);
    ck_assert_uint_eq(agg.comm[0].odd, 1);
    /* Not asked: nothing more. */
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ccs_dsx_agg_list_asked(&agg, sp, G, listed, mark, want_none, NULL);
    ck_assert_uint_eq(agg.head.nlisted, 1);
    /* The group has waited 1.2 s: rank 1 (not waiting) and rank 0, the
     * reference; the 6 others counted as blocked in the fold's call. */
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ck_assert_uint_eq(agg.comm[0].rest_blocked, 7);
    ccs_dsx_agg_list_asked(&agg, sp, G, listed, mark, want_world, NULL);
    ck_assert_uint_eq(agg.head.nlisted, 2);
    ck_assert_uint_eq(listed[0], 1);
    ck_assert_uint_eq(listed[1], 0);
    ck_assert_uint_eq(agg.comm[0].listed, 2);
    ck_assert_uint_eq(agg.comm[0].rest_blocked, 6);
}
END_TEST

START_TEST(unseen_members_known_blocked)
{
    static uint8_t mark[WS];
    const struct ccs_dsx_agg *f[2] = {&agg, &agg2};
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    ccs_dsx_agg_list_asked(&agg, sp, G, listed, mark, want_world, NULL);
    agg2 = agg;
    /* 16 members, 4 in view (two listed a group): the 12 others blocked at 43. */
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 2, WORLD, WS, 12, 0), 43);
    /* Another count (a listed status out of view): not known. */
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 2, WORLD, WS, 11, 0), 0);
    /* A group missing. */
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 1, WORLD, WS, 6, 0), 0);
    /* ... or its 8 members in the root's view, their leaders reporting to
     * it directly (group 0's): accounted for; one short of that is not. */
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 1, WORLD, WS, 6, 8), 43);
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 1, WORLD, WS, 6, 7), 0);
    /* A member neither listed nor blocked in the fold's call (a relay's
     * fold that says so is not counted). */
    agg2.comm[0].rest_blocked = 5;
    ck_assert_uint_eq(ccs_dsx_agg_unseen(f, 2, WORLD, WS, 11, 0), 0);
}
END_TEST

static unsigned char buf[1 << 16];
static struct ccs_dsx_status back[WS];
static char why[256];

START_TEST(frame_round_trip)
{
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    agg.head.group = 3;
    agg.head.nhosts = 1;
    agg.head.frame = 77;
    size_t n = ccs_dsx_agg_encode(&agg, sp, listed, NULL, NULL, buf, sizeof buf);
    ck_assert_uint_eq(n, ccs_dsx_agg_encoded_size(&agg, sp, listed));
    ck_assert_uint_eq(n, 40 + 192 + ccs_dsx_encoded_size(&st[1]));
    ck_assert_uint_eq(ccs_dsx_agg_encode(&agg, sp, listed, NULL, NULL, buf, n - 1), 0);
    memset(&agg2, 0xa5, sizeof agg2);
    ck_assert_int_eq(ccs_dsx_agg_decode(buf, n, WS, &agg2, back, G, why, sizeof why), 0);
    ck_assert_mem_eq(&agg2.head, &agg.head, sizeof agg.head);
    ck_assert_mem_eq(agg2.comm, agg.comm, sizeof agg.comm[0]);
    ck_assert_int_eq(back[0].wrank, 1);
    ck_assert_uint_eq(back[0].comm[1].state, CCS_DSX_BLOCKED);
}
END_TEST

/* Encodes the deadlock's fold, lets EDIT change it, and expects the
 * decoder to refuse with WANT. */
static void refused(void (*edit)(struct ccs_dsx_agg *), size_t cut, const char *want)
{
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    edit(&agg);
    size_t n = ccs_dsx_agg_encode(&agg, sp, listed, NULL, NULL, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    why[0] = 0;
    ck_assert_int_eq(ccs_dsx_agg_decode(buf, n - cut, WS, &agg2, back, G, why, sizeof why), -1);
    ck_assert_str_eq(why, want);
}

static void no_edit(struct ccs_dsx_agg *a)
{
    (void)a;
}
static void members_all(struct ccs_dsx_agg *a)
{
    a->comm[0].members = WS;
}
static void hash_ahead(struct ccs_dsx_agg *a)
{
    a->comm[0].hash[0].seq = 99;
}
static void blocked_none(struct ccs_dsx_agg *a)
{
    a->comm[0].nblocked = a->comm[0].rest_blocked = 0;
}
static void rest_too_many(struct ccs_dsx_agg *a)
{
    a->comm[0].rest_blocked = 8;
}
static void too_many(struct ccs_dsx_agg *a)
{
    a->head.nranks = WS + 1;
}
static void two_folds_same_id(struct ccs_dsx_agg *a)
{
    a->comm[1] = a->comm[0];
    a->head.ncomm = 2;
}

START_TEST(decoder_refuses_what_does_not_hold)
{
    refused(no_edit, 1, "call sites of entry 1 truncated (191 bytes left)");
    refused(members_all, 0, "fold of 16 members for a communicator of 16 (1..size-1, at most the ranks folded)");
    refused(hash_ahead, 0, "fold's hash group at seq 99 held by 8 members is out of range");
    refused(blocked_none, 0, "fold names a blocked operation at seq 43 with 0 members blocked");
    refused(too_many, 0, "AGG frame folds 17 ranks (job of 16) with more hosts or listed ranks");
    refused(rest_too_many, 0,
            "fold counts 8 members blocked and not listed, beyond those blocked or not listed (7)");
    refused(two_folds_same_id, 0, "AGG frame's folds not in increasing id order (0xf00d after 0xf00d)");
    /* Bytes after the listed statuses. */
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    size_t n = ccs_dsx_agg_encode(&agg, sp, listed, NULL, NULL, buf, sizeof buf);
    ck_assert_int_eq(ccs_dsx_agg_decode(buf, n + 3, WS, &agg2, back, G, why, sizeof why), -1);
    ck_assert_str_eq(why, "AGG frame has 3 bytes after its 1 listed statuses");
    /* More listed than the caller has room for. */
    ck_assert_int_eq(ccs_dsx_agg_decode(buf, n, WS, &agg2, back, 0, why, sizeof why), -1);
    ck_assert_str_eq(why, "AGG frame lists 1 ranks, room for 0");
}
END_TEST

START_TEST(root_compares_groups)
{
    const struct ccs_dsx_agg *f[2] = {&agg, &agg2};
    struct ccs_dsx_agg_cmp cmp;
    /* Two healthy groups (the second: the same calls, ranks 8..15). */
    group(0, 0);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    agg2 = agg;
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 2, WORLD, 1000, &cmp), 1);
    ck_assert_uint_eq(cmp.members, WS);
    ck_assert_uint_eq(cmp.differ_seq, 0);
    ck_assert_uint_eq(cmp.ndiffer, 0);
    ck_assert_int_eq(cmp.blocked_all, 0);
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 2, PAIR, 1000, &cmp), 0);
    /* The second group all made another call at seq 20: its hashes differ
     * from 32 on; 16 holds 8 alike on each side. */
    group(0, 0);
    for (int r = 0; r < G; r++)
        world_at(r, 40 + (uint64_t)(r % 3), 20);
    ccs_dsx_agg_fold(sp, G, 500, &agg2, listed);
    ck_assert_uint_eq(agg2.head.nlisted, 0);
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 2, WORLD, 1000, &cmp), 1);
    ck_assert_uint_eq(cmp.differ_seq, 32);
    ck_assert_uint_eq(cmp.majority_n, 8); /* a tie: the lower hash */
    ck_assert_uint_eq(cmp.ndiffer, 1);
    /* Blocked throughout, each group's member 1 listed. */
    deadlock(1200);
    ccs_dsx_agg_fold(sp, G, 500, &agg, listed);
    agg2 = agg;
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 2, WORLD, 1000, &cmp), 1);
    ck_assert_int_eq(cmp.blocked_all, 1);
    ck_assert_uint_eq(cmp.block_seq, 43);
    ck_assert_uint_eq(cmp.listed, 2);
    /* Not yet the threshold: no. */
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 2, WORLD, 1300, &cmp), 1);
    ck_assert_int_eq(cmp.blocked_all, 0);
    /* A group missing: not every member accounted for. */
    ck_assert_int_eq(ccs_dsx_agg_compare(f, 1, WORLD, 1000, &cmp), 1);
    ck_assert_int_eq(cmp.blocked_all, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("desync_agg");
    TCase *t = tcase_create("fold");
    tcase_add_test(t, healthy_group_folds_to_one_entry_and_lists_no_one);
    tcase_add_test(t, odd_hash_lists_the_odd_rank_only);
    tcase_add_test(t, long_wait_lists_the_rank_blocked_elsewhere);
    tcase_add_test(t, other_blocked_operation_or_life_is_listed);
    tcase_add_test(t, full_table_lists_the_rank_and_stays_bounded);
    tcase_add_test(t, odd_completed_seq_is_listed_before_a_checkpoint);
    tcase_add_test(t, asked_communicator_lists_a_reference);
    tcase_add_test(t, unseen_members_known_blocked);
    tcase_add_test(t, frame_round_trip);
    tcase_add_test(t, decoder_refuses_what_does_not_hold);
    tcase_add_test(t, root_compares_groups);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
