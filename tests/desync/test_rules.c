/* test_rules.c - the desync rules and the protocol's validation on
 * hand-built statuses (no processes, no clock). */
#include "ccs_config.h"
#include "desync.h"
#include "desync_proto.h"
#include "desync_report.h"
#include "desync_rules.h"
#include "desync_search.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "trace_format.h"
#include "unit_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define X 0x1111u
#define Y 0x2222u
#define NR 4

static struct ccs_dsx_status st[NR];
static const struct ccs_dsx_status *ptr[NR];
static uint8_t dead[NR];
static struct ccs_dsx_verdict got[16];
static int ngot, ndetail;
static const struct ccs_dsx_thresholds T = {.block_ms = 1000, .straggler_ms = 5000, .suspect_ms = 2000};

static void on_v(const struct ccs_dsx_verdict *v, void *a)
{
    (void)a;
    if (ngot < 16)
        got[ngot] = *v;
    ngot++;
}
static void on_d(uint64_t c, void *a)
{
    (void)a, (void)c;
    ndetail++;
}

static struct ccs_dsx_op op(uint64_t seq, unsigned kind, uint64_t count, unsigned dt, unsigned rop)
{
    struct ccs_dsx_op o;
    memset(&o, 0, sizeof o);
    o.seq = seq;
    o.kind = (uint16_t)kind;
    o.count = count;
    o.dtype = (uint8_t)dt;
    o.op = (uint8_t)rop;
    o.root = -1;
    o.fp = ccs_fingerprint(kind, 0, count, dt, rop, -1);
    return o;
}

static struct ccs_dsx_op ar(uint64_t seq)
{
    return op(seq, CCS_KIND_ALLREDUCE, 4, CCS_DT_FLOAT32, CCS_OP_SUM);
}

static void reset(void)
{
    memset(st, 0, sizeof st);
    memset(dead, 0, sizeof dead);
    ngot = ndetail = 0;
    for (int r = 0; r < NR; r++) {
        st[r].magic = CCS_DSX_MAGIC;
        st[r].version = CCS_DSX_VERSION;
        st[r].wrank = r;
        st[r].wsize = NR;
        st[r].pid = 100 + (uint32_t)r;
        strcpy(st[r].host, "h");
        ptr[r] = &st[r];
    }
}

/* Adds comm ID (rank = world rank unless CRANK >= 0) with ops 1..DONE. */
static struct ccs_dsx_comm *add(int r, uint64_t id, int32_t size, int32_t crank, uint64_t done)
{
    struct ccs_dsx_comm *c = &st[r].comm[st[r].ncomm++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->size = size;
    c->rank = crank >= 0 ? crank : r;
    c->issued = c->done = done;
    uint64_t first = done > CCS_DSX_HIST ? done - CCS_DSX_HIST + 1 : 1;
    for (uint64_t s = first; s <= done; s++)
        c->hist[c->nhist++] = ar(s);
    return c;
}

static void block(struct ccs_dsx_comm *c, struct ccs_dsx_op o, uint32_t ms)
{
    c->state = CCS_DSX_BLOCKED;
    c->blocked = o;
    c->blocked_ms = ms;
    c->issued = o.seq;
}

static int run(uint64_t now)
{
    struct ccs_dsx_view v = {.wsize = NR, .st = ptr, .dead = dead, .now_ms = now};
    struct ccs_dsx_sink s = {.verdict = on_v, .detail = on_d};
    static struct ccs_dsx_seen *seen;
    if (now == 0 || !seen) {
        ccs_dsx_seen_free(seen);
        seen = ccs_dsx_seen_new();
    }
    return ccs_dsx_rules_run(&v, &T, seen, &s);
}

/* The tree's folds (docs/desync.md, "The tree"): UNSEEN_AT for X's
 * members not in view, 0 for any other communicator. */
static uint64_t unseen_at;
static size_t unseen_seen;
static uint64_t unseen_x(uint64_t comm, int32_t size, size_t seen, void *arg)
{
    (void)arg, (void)size;
    unseen_seen = seen;
    return comm == X ? unseen_at : 0;
}

static int run_unseen(uint64_t now)
{
    struct ccs_dsx_view v = {
        .wsize = NR, .st = ptr, .dead = dead, .now_ms = now, .unseen = unseen_x, .unseen_arg = NULL};
    struct ccs_dsx_sink s = {.verdict = on_v, .detail = on_d};
    static struct ccs_dsx_seen *seen;
    if (now == 0 || !seen) {
        ccs_dsx_seen_free(seen);
        seen = ccs_dsx_seen_new();
    }
    return ccs_dsx_rules_run(&v, &T, seen, &s);
}

/* Ranks 2 and 3 of X are not in view, only counted (a relay's fold: blocked
 * at seq 5); rank 0 waits at 5, rank 1 (at 4) is blocked in Y {0, 1},
 * which rank 0 never reached. */
static void deadlock_half_in_view(void)
{
    reset();
    block(add(0, X, NR, -1, 4), ar(5), 2000);
    add(0, Y, 2, 0, 0);
    add(1, X, NR, -1, 4);
    block(add(1, Y, 2, 1, 0), ar(1), 2000);
    ptr[2] = ptr[3] = NULL;
}

START_TEST(unseen_members_counted_by_folds_complete_a_deadlock)
{
    /* Without the folds: X is not whole, nothing is certain. */
    deadlock_half_in_view();
    unseen_at = 0;
    for (uint64_t t = 0; t <= T.block_ms; t += T.block_ms / 4)
        run_unseen(t);
    ck_assert_int_eq(ngot, 0);
    ck_assert_uint_eq(unseen_seen, 2);
    /* Folds that say ranks 2 and 3 issued seq 5 and are blocked there. */
    deadlock_half_in_view();
    unseen_at = 5;
    for (uint64_t t = 0; t <= T.block_ms; t += T.block_ms / 4)
        run_unseen(t);
    ck_assert_int_eq(ngot, 2);
    ck_assert_str_eq(got[0].line, "comm=0x1111 size=4 seq=5: ranks 0 and 2 more blocked in allreduce(count=4, "
                                  "float32, sum) at seq 5 for 2.0 s; rank 1 at seq 4 (1 behind, blocked in "
                                  "allreduce(count=4, float32, sum) on comm=0x2222 seq 1)");
    ck_assert_str_eq(got[1].line, "comm=0x2222 size=2 seq=1: rank 1 blocked in allreduce(count=4, float32, sum) at "
                                  "seq 1 for 2.0 s; rank 0 at seq 0 (1 behind, blocked in allreduce(count=4, "
                                  "float32, sum) on comm=0x1111 seq 5)");
    /* Folds that know them at seq 4 only: they may be behind, no verdict. */
    deadlock_half_in_view();
    unseen_at = 4;
    for (uint64_t t = 0; t <= T.block_ms; t += T.block_ms / 4)
        run_unseen(t);
    ck_assert_int_eq(ngot, 0);
}
END_TEST

/* Ranks 0, 2 and 3 blocked 40 ms in the all-reduce at seq 5, rank 1 at
 * seq 4 in life state LIFE (in MPI_Finalize, exited, ...). */
static void blocked_behind_rank_1(uint32_t life)
{
    reset();
    for (int r = 0; r < NR; r++)
        if (r != 1)
            block(add(r, X, NR, -1, 4), ar(5), 40);
    add(1, X, NR, -1, 4);
    st[1].life = life;
}

/* A verdict on gone members holds without a break for a quarter of
 * block_ms before it is emitted: none on the first pass, one then. */
static int after_confirmation(void)
{
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms / 8), 0);
    return run(T.block_ms / 4);
}

START_TEST(mismatch_in_history)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 5);
    st[1].comm[0].hist[2] = op(3, CCS_KIND_ALLREDUCE, 4, CCS_DT_INT32, CCS_OP_SUM);
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(got[0].seq, 3);
    ck_assert_int_eq(got[0].party[0].wrank, 1);
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_DIFFERS);
    ck_assert_ptr_nonnull(strstr(got[0].line,
                                 "rank 1 issued allreduce(count=4, int32, sum) where ranks 0,2-3 issued "
                                 "allreduce(count=4, float32, sum)"));
    /* Once per communicator. */
    ck_assert_int_eq(run(10), 0);
}
END_TEST

/* Hashes that differ where no record in view does (the odd call is no
 * longer in any ring: a job of tens of thousands of calls a second): after
 * suspect_ms, a MISMATCH "at or before" the seq.  With every member's hash
 * there and a majority among them, the odd rank is named against the
 * others; two ranks, or no majority, name the two that differ.  (It named
 * the first two hashes in sorted order before, "ranks 2 and 1", where
 * rank 1 alone differed from three.) */
START_TEST(mismatch_from_the_hashes_names_the_odd_rank)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 100)->hash = r == 1 ? 0xbad : 0x900d;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(1999), 0); /* suspected for 2 s first */
    ck_assert_int_eq(run(2000), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(got[0].seq, 100);
    ck_assert_str_eq(got[0].line, "comm=0x1111 size=4 seq=100: rank 1 issued other operations than ranks 0,2-3 at "
                                  "or before seq 100 (fingerprint hashes differ; the records are no longer kept)");
    ck_assert_int_eq(got[0].party[0].wrank, 1);
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_DIFFERS);
    ck_assert_uint_eq(got[0].party[1].role, CCS_DSX_R_AGREES);
    /* Two against two: no majority. */
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 100)->hash = r >= 2 ? 0xbad : 0x900d;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(2000), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "seq=100: ranks "));
    ck_assert_ptr_nonnull(strstr(got[0].line, " issued different operations at or before seq 100"));
}
END_TEST

/* A gatherv at seq 3 on every rank: what each contributes (DT, SIG). */
static void gatherv_at3(int r, unsigned dt, uint32_t sig, uint64_t count)
{
    struct ccs_dsx_op *o = &st[r].comm[0].hist[2];
    *o = op(3, CCS_KIND_GATHERV, count, dt, CCS_OP_NONE);
    o->root = 0;
    o->sig = sig;
    o->fp = ccs_fingerprint_sig(CCS_KIND_GATHERV, 0, count, dt, CCS_OP_NONE, 0, sig);
}

/* Same size, other basic types: the fingerprints agree, the types do not. */
START_TEST(mismatch_basic_types_beside_size)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 5);
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_op *o = &st[r].comm[0].hist[2];
        *o = op(3, CCS_KIND_BCAST, 4, r == 2 ? CCS_DT_INT32 : CCS_DT_FLOAT32, CCS_OP_NONE);
        o->root = 0;
        o->fp = ccs_fingerprint(CCS_KIND_BCAST, 0, 4, o->dtype, CCS_OP_NONE, 0);
    }
    ck_assert_uint_eq(st[2].comm[0].hist[2].fp, st[0].comm[0].hist[2].fp);
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 issued bcast(count=4, int32, root=0) where ranks 0-1,3 issued "
                                              "bcast(count=4, float32, root=0)"));
}
END_TEST

/* Types nobody can name (MPI_PACKED, too irregular) and empty contributions
 * are left out; named ones that agree are fine. */
START_TEST(unknown_and_empty_types_are_left_out)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 5);
    gatherv_at3(0, CCS_DT_FLOAT64, 0, 6);   /* root, in place: its receive type */
    gatherv_at3(1, CCS_DT_NONE, 0, 0);      /* sends nothing, any type */
    gatherv_at3(2, CCS_DT_DERIVED, 0, 16);  /* MPI_PACKED: not known */
    gatherv_at3(3, CCS_DT_FLOAT64, 0, 2);   /* another count: fine for gatherv */
    ck_assert_int_eq(run(0), 0);
    /* A named multi-type signature against doubles: a MISMATCH. */
    gatherv_at3(2, CCS_DT_DERIVED, 0x77, 16);
    ck_assert_int_eq(run(1), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 issued gatherv("));
}
END_TEST

/* Two ranks: no majority, both sides named, both "differ". */
START_TEST(two_ranks_no_majority)
{
    reset();
    ptr[2] = ptr[3] = NULL;
    for (int r = 0; r < 2; r++)
        add(r, X, 2, -1, 5);
    st[1].comm[0].hist[2] = op(3, CCS_KIND_ALLREDUCE, 4, CCS_DT_FLOAT32, CCS_OP_MAX);
    ck_assert_int_eq(run(0), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "seq=3: rank 0 issued allreduce(count=4, float32, sum), rank 1 issued "
                                              "allreduce(count=4, float32, max)"));
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_DIFFERS);
    ck_assert_uint_eq(got[0].party[1].role, CCS_DSX_R_DIFFERS);
    /* Out of step: rank 1 skipped one of 3 identical all-reduces of step 2. */
    reset();
    ptr[2] = ptr[3] = NULL;
    for (int r = 0; r < 2; r++) {
        struct ccs_dsx_comm *c = add(r, Y, 2, -1, 8);
        for (unsigned h = 0; h < c->nhist; h++) {
            uint64_t q = c->hist[h].seq; /* steps: 1,1,1 | 2,2,2 | 3,3 (rank 1: 1,1,1 | 2,2 | 3,3,3) */
            c->hist[h].step = (uint32_t)(q <= 3 ? 1 : r == 0 ? (q <= 6 ? 2 : 3) : (q <= 5 ? 2 : 3));
        }
    }
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "seq=6: ranks out of step: in step 2 rank 0 issued 3, rank 1 issued 2;"));
    /* The same with seq 5 missing from rank 0's history (a pass that read
     * only the newest records skipped it): its count in step 2 is a lower
     * bound, not 2. */
    struct ccs_dsx_comm *c0 = &st[0].comm[0];
    for (unsigned h = 4; h + 1 < c0->nhist; h++)
        c0->hist[h] = c0->hist[h + 1];
    c0->nhist--;
    ngot = ndetail = 0;
    ck_assert_int_eq(run(0), 1);
    ck_assert_ptr_nonnull(
        strstr(got[0].line, "seq=6: ranks out of step: in step 2 rank 0 issued at least 2, rank 1 issued 2;"));
}
END_TEST

START_TEST(mismatch_blocked_kind)
{
    reset();
    for (int r = 0; r < NR; r++)
        block(add(r, X, NR, -1, 4), ar(5), 30);
    st[2].comm[0].blocked = op(5, CCS_KIND_BCAST, 4, CCS_DT_FLOAT32, CCS_OP_NONE);
    st[2].comm[0].blocked.root = 0;
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(got[0].seq, 5);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 issued bcast"));
}
END_TEST

START_TEST(deferred_flag_differs)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 3);
    st[3].comm[0].hist[1].flags |= CCS_F_DEFERRED;
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(got[0].seq, 2);
    ck_assert_ptr_nonnull(strstr(got[0].line, "deferred"));
}
END_TEST

/* Blocked behind a rank in MPI_Finalize: before the block threshold (it
 * never comes), once that held a quarter of it. */
START_TEST(desync_behind_finalizing_after_confirmation)
{
    blocked_behind_rank_1(CCS_DSX_FINALIZING);
    ck_assert_int_eq(after_confirmation(), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_uint_eq(got[0].seq, 5);
    ck_assert_ptr_nonnull(strstr(got[0].line, "ranks 0,2-3 blocked in allreduce"));
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 1 at seq 4 (1 behind, in MPI_Finalize)"));
    ck_assert_int_eq(got[0].party[0].wrank, 1);
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_BEHIND);
}
END_TEST

/* Communicator churn (mpi4py's suite; tests/mpi-legal/churn.c): members
 * that freed X after every call on it, whose status still carries the
 * count of the last pass that saw X live (the collector's tail read left
 * their last calls out, and X had left the table before the next pass),
 * beside a rank's "blocked 0.0 s" in the last barrier.  Freed without its
 * final count known (no CCS_DSX_FINAL): neither behind nor gone, so no
 * verdict, however long; not a straggler either. */
START_TEST(freed_with_a_stale_count_is_not_behind)
{
    reset();
    block(add(2, X, 3, -1, 1706), ar(1707), 0);
    struct ccs_dsx_comm *a = add(0, X, 3, -1, 1578), *b = add(1, X, 3, -1, 1705);
    a->state = b->state = CCS_DSX_FREED;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(300), 0);
    st[2].comm[0].blocked_ms = 6000; /* past block_ms and straggler_ms */
    ck_assert_int_eq(run(6000), 0);
    ck_assert_int_eq(run(9000), 0);
}
END_TEST

/* Freed with the exact count kept at the free (CCS_DSX_FINAL): at or past
 * the seq the blocked rank is in, they made that call; no verdict. */
START_TEST(freed_with_its_final_count_at_or_past_the_seq_is_healthy)
{
    reset();
    block(add(2, X, 3, -1, 1706), ar(1707), 0);
    struct ccs_dsx_comm *a = add(0, X, 3, -1, 1944), *b = add(1, X, 3, -1, 1707);
    a->state = b->state = CCS_DSX_FREED;
    a->flags = b->flags = CCS_DSX_FINAL;
    ck_assert_int_eq(run(0), 0);
    st[2].comm[0].blocked_ms = 6000;
    ck_assert_int_eq(run(6000), 0);
}
END_TEST

/* Freed with the exact count below the seq another member is blocked at:
 * it never comes, a DESYNC naming it, before the block threshold but only
 * once that held a quarter of it. */
START_TEST(freed_with_its_final_count_behind_after_confirmation)
{
    reset();
    block(add(0, X, 3, -1, 9), ar(10), 40);
    block(add(2, X, 3, -1, 9), ar(10), 40);
    struct ccs_dsx_comm *b = add(1, X, 3, -1, 8);
    b->state = CCS_DSX_FREED;
    b->flags = CCS_DSX_FINAL;
    ck_assert_int_eq(after_confirmation(), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_uint_eq(got[0].seq, 10);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 1 at seq 8 (2 behind, freed the communicator)"));
}
END_TEST

/* A blocked status seen once and then not (the rank had left the call),
 * seen again much later: confirmation starts again from there. */
START_TEST(a_glimpse_of_a_blocked_status_is_not_confirmation)
{
    blocked_behind_rank_1(CCS_DSX_EXITED);
    ck_assert_int_eq(run(0), 0);
    for (int r = 0; r < NR; r++) /* the next pass: nobody blocked */
        if (r != 1)
            st[r].comm[0].state = CCS_DSX_IDLE;
    ck_assert_int_eq(run(T.block_ms / 8), 0);
    for (int r = 0; r < NR; r++)
        if (r != 1)
            st[r].comm[0].state = CCS_DSX_BLOCKED;
    uint64_t later = 3 * T.block_ms;
    ck_assert_int_eq(run(later), 0); /* a break longer than block_ms: not held since 0 */
    ck_assert_int_eq(run(later + T.block_ms / 8), 0);
    ck_assert_int_eq(run(later + T.block_ms / 4), 1);
}
END_TEST

/* A rank that exited, whose entry for a communicator it freed earlier has
 * a stale count: its exit does not make that count final. */
START_TEST(exited_with_a_stale_freed_count_is_not_behind)
{
    reset();
    block(add(0, X, 2, -1, 99), ar(100), 40);
    struct ccs_dsx_comm *b = add(1, X, 2, -1, 60);
    b->state = CCS_DSX_FREED;
    st[1].life = CCS_DSX_EXITED;
    ck_assert_int_eq(run(0), 0);
    st[0].comm[0].blocked_ms = 6000;
    ck_assert_int_eq(run(6000), 0);
    b->flags = CCS_DSX_FINAL; /* the same with its final count: it never issued 100 */
    ck_assert_int_eq(run(6100), 0);
    ck_assert_int_eq(run(6000 + T.block_ms / 4 + 100), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
}
END_TEST

START_TEST(computing_rank_is_a_straggler_not_a_desync)
{
    reset();
    for (int r = 0; r < NR; r++)
        if (r != 1)
            block(add(r, X, NR, -1, 4), ar(5), 4000);
    add(1, X, NR, -1, 4); /* alive, not blocked: computing */
    ck_assert_int_eq(run(0), 0);
    for (int r = 0; r < NR; r++)
        if (r != 1)
            st[r].comm[0].blocked_ms = 6000;
    ck_assert_int_eq(run(100), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_STRAGGLER);
    ck_assert_ptr_nonnull(strstr(got[0].line, "for rank 1"));
}
END_TEST

/* Ranks 0, 2 and 3 blocked BMS in the all-reduce at seq 5; rank 1, at
 * seq 4, inside a gloo all_gather (which ccshim does not intercept) for FMS. */
static void blocked_beside_a_foreign_call(uint32_t bms, uint32_t fms)
{
    reset();
    for (int r = 0; r < NR; r++)
        if (r != 1)
            block(add(r, X, NR, -1, 4), ar(5), bms);
    add(1, X, NR, -1, 4);
    strcpy(st[1].foreign, "torch.distributed.all_gather (gloo) at trainer.py:12 in main");
    st[1].foreign_ms = fms;
    st[1].foreign_size = NR;
}

START_TEST(foreign_call_past_the_threshold_is_a_desync)
{
    blocked_beside_a_foreign_call(1500, 1200);
    ck_assert_int_eq(run(0), 0); /* held for a quarter of block_ms first */
    ck_assert_int_eq(run(T.block_ms / 4), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_str_eq(got[0].line,
                     "comm=0x1111 size=4 seq=5: ranks 0,2-3 blocked in allreduce(count=4, float32, sum) at seq 5 "
                     "for 1.5 s; rank 1 at seq 4 (1 behind, not in it: in torch.distributed.all_gather (gloo) at "
                     "trainer.py:12 in main for 1.2 s)");
    ck_assert_uint_eq(got[0].nparty, 4);
    ck_assert_int_eq(got[0].party[0].wrank, 1);
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_BEHIND);
}
END_TEST

START_TEST(foreign_call_below_the_threshold_is_no_desync)
{
    /* Blocked past the threshold, but the gloo call began 0.9 s ago: it
     * may yet return (the others waiting briefly is normal). */
    blocked_beside_a_foreign_call(1500, 900);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 0);
    /* Past the straggler threshold it is named, not called computing. */
    for (int r = 0; r < NR; r++)
        if (r != 1)
            st[r].comm[0].blocked_ms = 6000;
    ck_assert_int_eq(run(T.block_ms + 100), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_STRAGGLER);
    ck_assert_str_eq(got[0].line, "comm=0x1111 size=4 seq=5: ranks 0,2-3 waited 6.0 s in allreduce(count=4, float32, "
                                  "sum) for rank 1 (rank 1 in torch.distributed.all_gather (gloo) at trainer.py:12 in "
                                  "main, which ccshim does not intercept, for 0.9 s); a warning, not a desync");
}
END_TEST

START_TEST(foreign_call_beside_a_computing_rank_is_no_desync)
{
    /* Rank 3 computes: it may be the member the gloo call waits for. */
    blocked_beside_a_foreign_call(1500, 1500);
    st[3].comm[0].state = CCS_DSX_IDLE;
    st[3].comm[0].issued = 4;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 0);
    ck_assert_int_eq(run(2 * T.block_ms), 0);
}
END_TEST

START_TEST(foreign_calls_as_many_as_their_group_are_no_desync)
{
    /* Ranks 1 and 2 in gloo calls of a group of 2: they may be in the same
     * one, which completes; nothing can be said. */
    blocked_beside_a_foreign_call(1500, 1500);
    st[1].foreign_size = 2;
    memset(&st[2].comm[0], 0, sizeof st[2].comm[0]);
    st[2].ncomm = 0;
    add(2, X, NR, -1, 4);
    strcpy(st[2].foreign, "torch.distributed.all_gather (gloo) at trainer.py:12 in main");
    st[2].foreign_ms = 1500;
    st[2].foreign_size = 2;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 0);
    /* With the group the world's (4), one member is missing: a DESYNC. */
    st[1].foreign_size = st[2].foreign_size = 0;
    ck_assert_int_eq(run(2 * T.block_ms), 0);
    ck_assert_int_eq(run(2 * T.block_ms + T.block_ms / 4), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 at seq 4 (1 behind, not in it: in torch.distributed.all_gather"));
}
END_TEST

START_TEST(foreign_call_fields_are_checked)
{
    char why[200];
    blocked_beside_a_foreign_call(10, 10);
    ck_assert_int_eq(ccs_dsx_check_status(&st[1], NR, why, sizeof why), 0);
    st[1].foreign_size = NR + 1;
    ck_assert_int_eq(ccs_dsx_check_status(&st[1], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "call not intercepted has a group of 5 ranks, the job 4");
    st[1].foreign_size = 0;
    st[1].foreign[0] = 0;
    ck_assert_int_eq(ccs_dsx_check_status(&st[1], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "in a call not intercepted for 10 ms without its name");
    memset(st[1].foreign, 'a', sizeof st[1].foreign);
    ck_assert_int_eq(ccs_dsx_check_status(&st[1], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "name of the call not intercepted not NUL-terminated");
}
END_TEST

/* Rank R inside torch.distributed call KIND (enum ccs_torch_call) of
 * group G (SIZE members) at the group's seq SEQ, PREV the kind of its call
 * before, for MS, at LINE of the job: what ccshim_foreign_call publishes. */
#define G1 0xa1u
#define G2 0xb2u
static void in_torch(int r, uint64_t g, uint32_t size, uint64_t seq, unsigned kind, unsigned prev, uint32_t ms,
                     int line)
{
    snprintf(st[r].foreign, sizeof st[r].foreign, "torch.distributed.%s (gloo) at job.py:%d in main",
             ccs_torch_call_name(kind), line);
    st[r].foreign_ms = ms;
    st[r].foreign_size = size;
    st[r].foreign_group = g;
    st[r].foreign_gseq = seq;
    st[r].foreign_kind = (uint16_t)kind;
    st[r].foreign_prev = (uint16_t)prev;
}

/* Only ranks 0 and 1 publish (the torch tests' jobs of 2). */
static void two_ranks(void)
{
    reset();
    ptr[2] = ptr[3] = NULL;
}

START_TEST(torch_calls_of_different_kinds_at_one_seq_are_a_desync)
{
    /* Rank 0 in all_reduce, rank 1 in gather, both the group's call 4. */
    two_ranks();
    in_torch(0, G1, 2, 4, CCS_TC_ALL_REDUCE, CCS_TC_ALL_REDUCE, 1200, 38);
    in_torch(1, G1, 2, 4, CCS_TC_GATHER, CCS_TC_ALL_REDUCE, 1100, 40);
    ck_assert_int_eq(run(0), 0); /* held for a quarter of block_ms first, as every DESYNC */
    ck_assert_int_eq(run(T.block_ms / 8), 0);
    ck_assert_int_eq(run(T.block_ms / 4), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_str_eq(got[0].line,
                     "comm=0xa1 size=2 seq=4: torch.distributed group, every member blocked past 1.0 s; rank 0 in "
                     "torch.distributed.all_reduce (gloo) at job.py:38 in main (call 4) for 1.2 s; rank 1 in "
                     "torch.distributed.gather (gloo) at job.py:40 in main (call 4) for 1.1 s: different "
                     "collectives at the group's call 4");
    ck_assert_uint_eq(got[0].nparty, 2);
    ck_assert_int_eq(got[0].party[1].wrank, 1);
    ck_assert_int_eq(got[0].party[1].c.rank, 1);
    ck_assert_uint_eq(got[0].party[1].role, CCS_DSX_R_DIFFERS);
    char why[200];
    ck_assert_int_eq(ccs_dsx_check_verdict(&got[0], NR, why, sizeof why), 0);
    ck_assert_int_eq(run(T.block_ms), 0); /* once */
}
END_TEST

START_TEST(torch_calls_at_different_seqs_are_a_desync_unless_matched)
{
    /* Rank 1 returned from the group's call 4 (a gather to rank 0: it only
     * sends) and waits in call 5, rank 0 is still in call 4, an all_reduce:
     * no member will come. */
    two_ranks();
    in_torch(0, G1, 2, 4, CCS_TC_ALL_REDUCE, CCS_TC_ALL_REDUCE, 1200, 38);
    in_torch(1, G1, 2, 5, CCS_TC_ALL_REDUCE, CCS_TC_GATHER, 1100, 41);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms / 4), 1);
    ck_assert_str_eq(got[0].line,
                     "comm=0xa1 size=2 seq=4: torch.distributed group, every member blocked past 1.0 s; rank 0 in "
                     "torch.distributed.all_reduce (gloo) at job.py:38 in main (call 4) for 1.2 s; rank 1 in "
                     "torch.distributed.all_reduce (gloo) at job.py:41 in main (call 5) for 1.1 s: the group's "
                     "members at different calls (4 to 5), none of them returning");
    ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_WAITING);
    ck_assert_uint_eq(got[0].party[1].role, CCS_DSX_R_AHEAD);
    /* Rank 1's call 4 was the all_reduce rank 0 is in: rank 1 finished its
     * part of a matched call, which completes for rank 0 too: slow, not
     * stuck, however long. */
    in_torch(1, G1, 2, 5, CCS_TC_ALL_REDUCE, CCS_TC_ALL_REDUCE, 1100, 41);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
    /* ... nor when it was not told what that call was. */
    in_torch(1, G1, 2, 5, CCS_TC_ALL_REDUCE, CCS_TC_NONE, 1100, 41);
    ngot = 0;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "at different calls (4 to 5)"));
    /* Two calls ahead: rank 1 left a call rank 0 never reached. */
    in_torch(1, G1, 2, 6, CCS_TC_ALL_REDUCE, CCS_TC_ALL_REDUCE, 1100, 41);
    ngot = 0;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "at different calls (4 to 6)"));
}
END_TEST

START_TEST(torch_calls_that_may_complete_are_no_desync)
{
    two_ranks();
    /* One collective spelled two ways (all_gather, all_gather_into_tensor). */
    in_torch(0, G1, 2, 4, CCS_TC_ALL_GATHER, CCS_TC_NONE, 3000, 38);
    in_torch(1, G1, 2, 4, CCS_TC_ALL_GATHER_INTO_TENSOR, CCS_TC_NONE, 3000, 40);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
    /* Different kinds, one rank in its call below the block threshold (it
     * may have entered it a moment ago, its status newer). */
    in_torch(1, G1, 2, 4, CCS_TC_GATHER, CCS_TC_NONE, 900, 40);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
    /* Different groups: rank 0 waits in group G1, rank 1 in G2, each for a
     * third member (a group of 3) that is slow: never compared. */
    reset();
    ptr[3] = NULL;
    in_torch(0, G1, 2, 1, CCS_TC_ALL_REDUCE, CCS_TC_NONE, 3000, 38);
    in_torch(1, G2, 2, 1, CCS_TC_BROADCAST, CCS_TC_NONE, 3000, 40);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
    /* A member not in the group's call (computing, or in an intercepted
     * one): the group is not whole, the other rules judge. */
    reset();
    ptr[3] = NULL;
    in_torch(0, G1, 3, 4, CCS_TC_ALL_REDUCE, CCS_TC_NONE, 3000, 38);
    in_torch(1, G1, 3, 4, CCS_TC_GATHER, CCS_TC_NONE, 3000, 40);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
    /* A call without an identity (another thread's, or the helper's own
     * averaging) is never compared. */
    two_ranks();
    in_torch(0, G1, 2, 4, CCS_TC_ALL_REDUCE, CCS_TC_NONE, 3000, 38);
    in_torch(1, 0, 2, 0, CCS_TC_NONE, CCS_TC_NONE, 3000, 40);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(3 * T.block_ms), 0);
}
END_TEST

START_TEST(torch_call_identity_is_checked)
{
    char why[200];
    two_ranks();
    in_torch(0, G1, 2, 4, CCS_TC_ALL_REDUCE, CCS_TC_GATHER, 10, 38);
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), 0);
    st[0].foreign_kind = CCS_TC_LIMIT;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "torch.distributed call kind 26 is not a known kind (0..25)");
    st[0].foreign_kind = CCS_TC_ALL_REDUCE;
    st[0].foreign_prev = 300;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "torch.distributed call kind 300 is not a known kind (0..25)");
    st[0].foreign_prev = CCS_TC_NONE;
    st[0].foreign_gseq = CCS_DSX_MAX_SEQ + 1;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "torch.distributed call seq 281474976710657 beyond 281474976710656");
    st[0].foreign_gseq = 4;
    st[0].foreign_group = 0;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "identity of the call not intercepted incomplete: seq 4, kind 1, and its group must all "
                          "be nonzero");
    st[0].foreign_group = G1;
    st[0].foreign_kind = CCS_TC_NONE;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "identity of the call not intercepted incomplete: seq 4, kind 0, and its group must all "
                          "be nonzero");
    st[0].foreign_kind = CCS_TC_BARRIER;
    st[0].foreign_ms = 0;
    st[0].foreign[0] = 0;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "identity of a call not intercepted (seq 4, kind 25) while in none");
    in_torch(0, G1, 2, 1, CCS_TC_ALL_REDUCE, CCS_TC_GATHER, 10, 38);
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "the first call on its group (seq 1) names a call before it, of kind 21");
    in_torch(0, G1, 2, 1, CCS_TC_ALL_REDUCE, CCS_TC_NONE, 10, 38);
    st[0].foreign_pad = 7;
    ck_assert_int_eq(ccs_dsx_check_status(&st[0], NR, why, sizeof why), -1);
    ck_assert_str_eq(why, "reserved word after the call's kinds is 7, expected 0");
}
END_TEST

START_TEST(chain_to_a_computing_rank_is_healthy)
{
    reset();
    /* 0 waits on X for 1; 1 waits on Y for 2; 2 computes. */
    block(add(0, X, 2, 0, 3), ar(4), 3000);
    add(1, X, 2, 1, 3);
    block(add(1, Y, 2, 0, 1), ar(2), 3000);
    add(2, Y, 2, 1, 1);
    ptr[3] = NULL;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(5000), 0);
}
END_TEST

/* Every member has issued seq 5 (one all-reduce on all, alike): ranks 0
 * and 2 blocked in it past the threshold, ranks 1 and 3 past it, blocked
 * at 6 past the threshold too (churn-load.sh at np 5 in CI, on 2 loaded
 * cores: 3 ranks 1.8 s in an all-gather, 2 in the next).  Seq 5 is
 * matched and completes by MPI's progress rule; no rank left anything out:
 * no verdict, however long. */
START_TEST(matched_call_beside_ranks_ahead_is_no_desync)
{
    reset();
    block(add(0, X, NR, -1, 4), ar(5), 1800);
    block(add(2, X, NR, -1, 4), ar(5), 1800);
    block(add(1, X, NR, -1, 5), ar(6), 1500);
    block(add(3, X, NR, -1, 5), ar(6), 1500);
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(400), 0);
    ck_assert_int_eq(run(3000), 0);
}
END_TEST

START_TEST(cross_comm_deadlock)
{
    reset();
    /* 0 blocked on X waiting for 1; 1 blocked on Y waiting for 0. */
    struct ccs_dsx_comm *c0 = add(0, X, 2, 0, 3);
    block(c0, ar(4), 1500);
    add(0, Y, 2, 0, 1);
    add(1, X, 2, 1, 3);
    block(add(1, Y, 2, 1, 1), ar(2), 1500);
    st[1].comm[1].issued = 2;
    st[1].comm[1].blocked.seq = 2;
    st[0].comm[1].issued = 1;
    ptr[2] = ptr[3] = NULL;
    /* X: 0 at seq 4, 1 issued 3 (blocked elsewhere) */
    st[1].comm[0].issued = 3;
    ck_assert_int_eq(run(0), 0); /* must hold for a while first */
    ck_assert_int_eq(run(400), 2);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_uint_eq(got[1].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "blocked in allreduce(count=4, float32, sum) on comm="));
}
END_TEST

START_TEST(dead_rank)
{
    reset();
    for (int r = 0; r < NR; r++)
        if (r != 2)
            block(add(r, X, NR, -1, 7), ar(8), 20);
    add(2, X, NR, -1, 6);
    dead[2] = 1;
    ck_assert_int_eq(after_confirmation(), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DEAD);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 at seq 6 (2 behind, died)"));
}
END_TEST

/* A rank killed inside the seq the others wait at (it issued it, its part
 * never completed) is named DEAD once they have been blocked block_ms, and
 * not before (its last status may be a period old); one that finished the
 * seq before it died, or one alive in it (a slow collective), is not. */
START_TEST(dead_rank_inside_the_seq)
{
    for (int how = 0; how < 4; how++) {
        reset();
        for (int r = 0; r < NR; r++)
            if (r != 2)
                block(add(r, X, NR, -1, 7), ar(8), 20);
        struct ccs_dsx_comm *c2 = add(2, X, NR, -1, 7);
        if (how == 0) {
            block(c2, ar(8), 5); /* host side: blocked in it */
        } else {
            c2->issued = c2->done = 8; /* returned from 8 */
            c2->hist[c2->nhist++] = ar(8);
            if (how == 1) {
                c2->flags = CCS_DSX_DEVICE; /* enqueued 8, completed 7 on the device */
                c2->dev_pending = 1;
            }
        }
        dead[2] = how != 3;
        if (how == 3)
            block(c2, ar(8), 5);     /* alive, in it */
        ck_assert_int_eq(run(0), 0); /* the others blocked 20 ms: not yet */
        for (int r = 0; r < NR; r++)
            if (r != 2)
                st[r].comm[0].blocked_ms = 1500;
        run(1500);
        int n = run(1800);
        if (how == 2 || how == 3) {
            ck_assert_int_eq(ngot, 0);
            continue;
        }
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(ngot, 1);
        ck_assert_uint_eq(got[0].cls, CCS_DSX_DEAD);
        ck_assert_uint_eq(got[0].seq, 8);
        ck_assert_ptr_nonnull(
            strstr(got[0].line, "ranks 0-1,3 blocked in allreduce(count=4, float32, sum) at seq 8 "));
        ck_assert_ptr_nonnull(strstr(got[0].line, "; rank 2 at seq 8 (issued it, died)"));
        ck_assert_int_eq(got[0].party[0].wrank, 2);
        ck_assert_uint_eq(got[0].party[0].role, CCS_DSX_R_BEHIND);
    }
}
END_TEST

START_TEST(unknown_member_is_never_stuck)
{
    reset();
    for (int r = 0; r < NR; r++)
        if (r != 1)
            block(add(r, X, NR, -1, 4), ar(5), 9000);
    ptr[1] = NULL; /* nothing known of rank 1 */
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(5000), 0);
}
END_TEST

START_TEST(hash_only_mismatch_asks_for_records)
{
    reset();
    for (int r = 0; r < 2; r++) {
        struct ccs_dsx_comm *c = add(r, X, 2, r, 0);
        c->done = c->issued = 100;
        c->hash = r ? 0xbad : 0x900d;
    }
    ptr[2] = ptr[3] = NULL;
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(ndetail, 1);
    ck_assert_int_eq(run(2500), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_MISMATCH);
    ck_assert_ptr_nonnull(strstr(got[0].line, "at or before seq 100"));
}
END_TEST

START_TEST(proto_roundtrip_and_rejects)
{
    reset();
    block(add(0, X, NR, -1, 20), ar(21), 5);
    strcpy(st[0].comm[0].site_blocked, "main+0x10");
    add(0, Y, 2, 1, 3);
    unsigned char buf[65536];
    size_t n = ccs_dsx_encode_status(&st[0], NULL, NULL, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(n, ccs_dsx_encoded_size(&st[0]));
    struct ccs_dsx_status out;
    char why[256];
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), n);
    ck_assert_uint_eq(out.comm[0].nhist, 20 < CCS_DSX_HIST ? 20 : CCS_DSX_HIST);
    ck_assert_str_eq(out.comm[0].site_blocked, "main+0x10");
    ck_assert_uint_eq(out.comm[1].hist[2].seq, 3);
    /* Truncated anywhere: refused. */
    for (size_t k = 0; k < n; k += 7)
        ck_assert_uint_eq(ccs_dsx_decode_status(buf, k, NR, &out, why, sizeof why), 0);
    /* Wrong world size, out-of-range kind, too many comms. */
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, 2, &out, why, sizeof why), 0);
    struct ccs_dsx_status bad = st[0];
    bad.comm[1].hist[0].kind = 999;
    n = ccs_dsx_encode_status(&bad, NULL, NULL, buf, sizeof buf);
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "kind 999"));
    bad = st[0];
    bad.ncomm = 3;
    bad.comm[2] = bad.comm[1];
    bad.comm[2].rank = 5; /* outside its size */
    n = ccs_dsx_encode_status(&bad, NULL, NULL, buf, sizeof buf);
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), 0);
    /* Blocked in an operation beyond what it issued: refused (tests/fuzz/
     * corpus/fuzz_dsx_coord/regress-blocked-beyond-issued). */
    bad = st[0];
    ck_assert_uint_eq(bad.comm[0].state, CCS_DSX_BLOCKED);
    bad.comm[0].blocked.seq = bad.comm[0].issued + 1;
    n = ccs_dsx_encode_status(&bad, NULL, NULL, buf, sizeof buf);
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "beyond issued"));
    /* History dropped where not wanted. */
    n = ccs_dsx_encode_status(&st[0], NULL, NULL, buf, sizeof buf);
    size_t m = ccs_dsx_encode_status(&st[0], NULL, NULL, buf, 10);
    ck_assert_uint_eq(m, 0);
}
END_TEST

/* A seq near 2^64 from a peer (issue 23, item 8): refused by the checks,
 * and a verdict holding one (made before any check) formats in bounded
 * time, at most 10 rows, instead of looping forever. */
START_TEST(peer_seq_is_bounded)
{
    reset();
    block(add(0, X, NR, -1, 4), ar(5), 40);
    struct ccs_dsx_status bad = st[0];
    bad.comm[0].blocked.seq = UINT64_MAX;
    char why[256] = "";
    ck_assert_int_eq(ccs_dsx_check_status(&bad, NR, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "sequence number beyond") != NULL, "%s", why);
    unsigned char buf[65536];
    size_t n = ccs_dsx_encode_status(&bad, NULL, NULL, buf, sizeof buf);
    struct ccs_dsx_status out;
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), 0);
    bad = st[0];
    bad.comm[0].issued = CCS_DSX_MAX_SEQ + 1;
    ck_assert_int_eq(ccs_dsx_check_status(&bad, NR, why, sizeof why), -1);
    /* The formatter on its own. */
    blocked_behind_rank_1(CCS_DSX_EXITED);
    ck_assert_int_eq(after_confirmation(), 1);
    struct ccs_dsx_comm *c = &got[0].party[1].c;
    c->state = CCS_DSX_BLOCKED;
    c->blocked.seq = UINT64_MAX;
    c->issued = UINT64_MAX;
    char text[16384];
    ck_assert_uint_gt(ccs_dsx_format(&got[0], 2, 1.0, text, sizeof text), 0);
    int rows = 0;
    for (const char *p = text; (p = strstr(p, "ccshim desync| ")) != NULL; p++)
        rows += p[15] == ' ' && p[16] == ' ';
    ck_assert_int_le(rows, 10);
    ck_assert_ptr_nonnull(strstr(text, "18446744073709551615"));
}
END_TEST

/* Statuses that contradict themselves (blocked beyond the seq they issued;
 * the decoder refuses them) give no verdict rather than a NULL read
 * (tests/fuzz/corpus/fuzz_dsx_coord/regress-blocked-beyond-issued). */
START_TEST(blocked_beyond_issued_gives_no_verdict)
{
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, 4);
        if (r < NR - 1) {
            block(c, ar(5), 5000);
            c->issued = 4;
        }
    }
    dead[NR - 1] = 1; /* waiting only for a rank that is gone: a verdict at once */
    ck_assert_int_eq(run(0), 0); /* was a NULL read (SIGSEGV) naming the waiting operation */
    ck_assert_int_eq(run(5000), 0);
    ck_assert_int_eq(ngot, 0);
}
END_TEST

/* A communicator larger than the world (spawned processes merged in): its
 * members elsewhere publish nowhere here, so no verdict about it, which
 * every client would refuse (tests/fuzz/corpus/fuzz_dsx_coord/
 * regress-comm-larger-than-world).  The same job with the world's size
 * gives its verdict. */
START_TEST(comm_larger_than_world_gives_no_verdict)
{
    for (int32_t size = NR + 1; size >= NR; size--) {
        reset();
        for (int r = 0; r < NR; r++) {
            struct ccs_dsx_comm *c = add(r, X, size, -1, 4);
            if (r < NR - 1)
                block(c, r == 1 ? op(5, CCS_KIND_BCAST, 4, CCS_DT_FLOAT32, CCS_OP_NONE) : ar(5), 5000);
        }
        dead[NR - 1] = 1;
        run(0);
        run(5000);
        if (size > NR) {
            ck_assert_int_eq(ngot, 0);
        } else {
            ck_assert_int_gt(ngot, 0);
            for (int i = 0; i < ngot && i < 16; i++)
                ck_assert_int_eq(got[i].comm_size, NR);
        }
    }
}
END_TEST

/* The line of the rank that logs a verdict for its host says where the
 * full report is (issue 45): below, or which rank on which host, and each
 * rank's file when there is a trace directory. */
START_TEST(line_says_where_the_full_report_is)
{
    blocked_behind_rank_1(CCS_DSX_EXITED);
    ck_assert_int_eq(after_confirmation(), 1);
    char where[512], buf[16384];
    struct ccs_dsx_say say = {.line = 1, .full = 1, .full_rank = 0, .host = "n1", .full_host = "n1"};
    ccs_dsx_where(&say, "/t", "job", where, sizeof where);
    ck_assert_str_eq(where, " for host 'n1'; full report below; each rank's: /t/ccshim-desync-job-r<rank>.txt;");
    say.full = 0;
    say.host = "n2";
    ccs_dsx_where(&say, NULL, "job", where, sizeof where);
    ck_assert_str_eq(where, " for host 'n2'; full report: rank 0 on host 'n1';");
    say.full_host = NULL;
    ccs_dsx_where(&say, "", "job", where, sizeof where);
    ck_assert_str_eq(where, " for host 'n2'; full report: rank 0, on the coordinator's host;");
    size_t n = ccs_dsx_format_where(&got[0], 8, where, 1.5, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_nonnull(
        strstr(buf, " [seen by rank 8 for host 'n2'; full report: rank 0, on the coordinator's host; at=1.500]\n"));
}
END_TEST

START_TEST(format_has_the_greppable_line)
{
    blocked_behind_rank_1(CCS_DSX_EXITED);
    ck_assert_int_eq(after_confirmation(), 1);
    char buf[16384];
    size_t n = ccs_dsx_format(&got[0], 2, 1234.5, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_nonnull(strstr(buf, "ccshim DESYNC comm=0x1111 size=4 seq=5: "));
    ck_assert_ptr_nonnull(strstr(buf, "[seen by rank 2 at=1234.500]\n"));
    ck_assert_ptr_nonnull(strstr(buf, "ccshim desync|        5 | -"));
    /* One word per life state, the same in the line and in the block. */
    ck_assert_ptr_nonnull(strstr(buf, "rank 1 at seq 4 (1 behind, exited)"));
    ck_assert_ptr_nonnull(strstr(buf, "| r1 c1 behind exited "));
    ck_assert_ptr_nonnull(strstr(buf, "(comm rank 1, pid 101 on h, behind, exited)"));
    ck_assert_ptr_nonnull(strstr(buf, "(comm rank 0, pid 100 on h, waiting, alive)"));
    ck_assert_uint_eq(got[0].party[0].wrank, 1);
    got[0].party[0].life = CCS_DSX_FINALIZING;
    ccs_dsx_format(&got[0], 2, 1234.5, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "| r1 c1 behind in MPI_Finalize "));
    ck_assert_ptr_nonnull(strstr(buf, "(comm rank 1, pid 101 on h, behind, in MPI_Finalize)"));
    char why[128];
    ck_assert_int_eq(ccs_dsx_check_verdict(&got[0], NR, why, sizeof why), 0);
    got[0].nparty = 99;
    ck_assert_int_eq(ccs_dsx_check_verdict(&got[0], NR, why, sizeof why), -1);
}
END_TEST

/* What happens next (warn mode): a member that finished before the seq the
 * others are blocked at left the call out; the call the job waits in; the
 * report files, or how to get them.  Nothing for a MISMATCH. */
START_TEST(next_words_name_the_call_left_out)
{
    blocked_behind_rank_1(CCS_DSX_FINALIZING);
    ck_assert_int_eq(after_confirmation(), 1);
    char buf[4096];
    ck_assert_uint_gt(ccs_dsx_next_words(&got[0], "/tr", "job1", buf, sizeof buf), 0);
    ck_assert_str_eq(buf,
                     "desync: rank 1 left out allreduce(count=4, float32, sum) at ? (went on to MPI_Finalize after "
                     "seq 4); ranks 0,2-3 are in it\n"
                     "desync: this job will now wait in allreduce(count=4, float32, sum) at ? until the "
                     "launcher's timeout; --on-desync abort (CCSHIM_ON_DESYNC=abort) ends it at once; each "
                     "rank's report: /tr/ccshim-desync-job1-r<rank>.txt, its last calls: "
                     "/tr/ccshim-flight-job1-r<rank>.flight\n");
    /* A site inside inlined code: its outermost line, in the caller, as the audit names it. */
    for (uint32_t i = 0; i < got[0].nparty; i++)
        snprintf(got[0].party[i].c.site_blocked, sizeof got[0].party[i].c.site_blocked, "%s",
                 "main+0x402 at /src/app.c:214 (inlined step at /src/app.c:167) (app+0x1612)");
    ck_assert_uint_gt(ccs_dsx_next_words(&got[0], "/tr", "job1", buf, sizeof buf), 0);
    ck_assert_ptr_nonnull(strstr(buf, "left out allreduce(count=4, float32, sum) at /src/app.c:214 (went on"));
    /* Computing, not finished: nothing is said to be left out. */
    got[0].party[0].life = CCS_DSX_ALIVE;
    ck_assert_uint_gt(ccs_dsx_next_words(&got[0], "", "job1", buf, sizeof buf), 0);
    ck_assert_str_eq(buf,
                     "desync: this job will now wait in allreduce(count=4, float32, sum) at /src/app.c:214 until the "
                     "launcher's timeout; --on-desync abort (CCSHIM_ON_DESYNC=abort) ends it at once; no report "
                     "files (give --trace-dir DIR to keep each rank's report and last calls)\n");
    got[0].cls = CCS_DSX_MISMATCH;
    ck_assert_uint_eq(ccs_dsx_next_words(&got[0], "/tr", "job1", buf, sizeof buf), 0);
}
END_TEST

static uint64_t want_comm, want_seq;
static int nwant;
static void on_want(uint64_t c, uint64_t seq, void *a)
{
    (void)a;
    want_comm = c, want_seq = seq;
    nwant++;
}

/* Records that differ where some members' records of the seq are not in
 * view: the rules ask for them (want) and wait record_wait_ms before naming
 * a majority; one host's view (partial) only asks. */
START_TEST(mismatch_waits_for_every_record)
{
    static const struct ccs_dsx_thresholds t = {
        .block_ms = 1000, .straggler_ms = 5000, .suspect_ms = 2000, .mismatch_wait_ms = 40, .record_wait_ms = 700};
    struct ccs_dsx_sink s = {.verdict = on_v, .detail = on_d, .want = on_want};
    reset();
    nwant = 0;
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 40);
    /* Rank 1 differs at seq 13; ranks 2 and 3 (elsewhere) moved on: their
     * newest records start at seq 9 for rank 2 and 20 for rank 3. */
    st[1].comm[0].hist[12 - 8] = op(13, CCS_KIND_ALLREDUCE, 3, CCS_DT_FLOAT32, CCS_OP_SUM);
    struct ccs_dsx_comm *c3 = &st[3].comm[0];
    memmove(c3->hist, c3->hist + 11, (CCS_DSX_HIST - 11) * sizeof c3->hist[0]);
    c3->nhist = CCS_DSX_HIST - 11;
    struct ccs_dsx_seen *seen = ccs_dsx_seen_new();
    struct ccs_dsx_view v = {.wsize = NR, .st = ptr, .dead = dead, .now_ms = 1000};
    ck_assert_int_eq(ccs_dsx_rules_run(&v, &t, seen, &s), 0);
    ck_assert_int_eq(nwant, 1);
    ck_assert_uint_eq(want_comm, X);
    ck_assert_uint_eq(want_seq, 13);
    /* Rank 3's record arrives: the verdict at once, with the whole majority. */
    memcpy(c3->hist, st[0].comm[0].hist, sizeof c3->hist);
    c3->nhist = st[0].comm[0].nhist;
    v.now_ms = 1100;
    ck_assert_int_eq(ccs_dsx_rules_run(&v, &t, seen, &s), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "seq=13: rank 1 issued allreduce(count=3, float32, sum) where ranks "
                                              "0,2-3 issued allreduce(count=4, float32, sum)"));
    ccs_dsx_seen_free(seen);

    /* Never arrives: after record_wait_ms, the majority of what is in view. */
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 40);
    st[1].comm[0].hist[12 - 8] = op(13, CCS_KIND_ALLREDUCE, 3, CCS_DT_FLOAT32, CCS_OP_SUM);
    c3 = &st[3].comm[0];
    memmove(c3->hist, c3->hist + 11, (CCS_DSX_HIST - 11) * sizeof c3->hist[0]);
    c3->nhist = CCS_DSX_HIST - 11;
    seen = ccs_dsx_seen_new();
    v.now_ms = 1000;
    ck_assert_int_eq(ccs_dsx_rules_run(&v, &t, seen, &s), 0);
    v.now_ms = 1600;
    ck_assert_int_eq(ccs_dsx_rules_run(&v, &t, seen, &s), 0);
    v.now_ms = 1701;
    ck_assert_int_eq(ccs_dsx_rules_run(&v, &t, seen, &s), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "seq=13: rank 1 issued allreduce(count=3, float32, sum) where ranks "
                                              "0,2 issued allreduce(count=4, float32, sum)"));
    ccs_dsx_seen_free(seen);

    /* One host's view (ranks 0 and 1 only, partial): asks, never judges. */
    reset();
    nwant = 0;
    for (int r = 0; r < 2; r++)
        add(r, X, NR, -1, 40);
    st[1].comm[0].hist[12 - 8] = op(13, CCS_KIND_ALLREDUCE, 3, CCS_DT_FLOAT32, CCS_OP_SUM);
    ptr[2] = ptr[3] = NULL;
    struct ccs_dsx_thresholds tp = t;
    tp.partial = 1;
    seen = ccs_dsx_seen_new();
    for (uint64_t now = 1000; now < 5000; now += 500) {
        v.now_ms = now;
        ck_assert_int_eq(ccs_dsx_rules_run(&v, &tp, seen, &s), 0);
    }
    ck_assert_int_ge(nwant, 1);
    ck_assert_uint_eq(want_seq, 13);
    ccs_dsx_seen_free(seen);
}
END_TEST

/* desync_verdict.c compares the parsed settings with these names: each must be
 * the index of its word in the settings table. */
static int word_index(const char *var, const char *word)
{
    for (size_t i = 0; i < ccs_config_nrows; i++)
        if (strcmp(ccs_config_rows[i].name, var) == 0)
            return ccs_config_enum_index(ccs_config_rows[i].help, word);
    return -2;
}

/* Coalescing's step boundary (docs/coalescing.md): comm X, 4 ranks, step 5
 * began after seq 100; 16 calls per step. */
static void in_step(struct ccs_dsx_comm *c, uint32_t step, uint32_t calls)
{
    c->step_now = step;
    c->step_calls = calls;
    c->step_kind = CCS_KIND_ALLREDUCE;
    for (unsigned h = 0; h < c->nhist; h++)
        c->hist[h].step = step;
}

static void at_boundary(int r, struct ccs_dsx_comm *c, uint32_t step)
{
    st[r].step = step;
    st[r].boundary = step + 1;
    c->flags |= CCS_DSX_BOUNDARY;
}

/* Issue 41's two datasets: rank 0 runs a cached loss (8 backward passes,
 * 24 reductions a step) and is still in step 0 at seq 18, its helper
 * counting backward passes; rank 1 runs a plain loss (3 a step) and has
 * marked 6 steps by then.  The reductions match by order, so nothing hangs
 * at first: the ranks average different steps' gradients.  A DESYNC naming
 * both, at the first seq whose steps differ. */
START_TEST(marked_steps_beside_a_rank_still_in_step_zero)
{
    reset();
    struct ccs_dsx_comm *a = add(0, X, 2, 0, 18), *b = add(1, X, 2, 1, 18);
    for (unsigned h = 0; h < b->nhist; h++)
        b->hist[h].step = (uint32_t)((b->hist[h].seq - 1) / 3); /* seqs 4-6 in step 1, ..., 16-18 in step 5 */
    st[0].step = 0;
    st[0].units = 8;
    st[1].step = 6;
    st[0].wsize = st[1].wsize = 2;
    (void)a;
    ptr[2] = ptr[3] = NULL;
    int got_n = run(0) + run(50) + run(T.block_ms);
    ck_assert_int_eq(got_n, 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_uint_eq(got[0].seq, 4);
    ck_assert_msg(strstr(got[0].line, "rank 1 marked 6 steps by seq 18 where rank 0 is still in step 0 (8 backward "
                                      "passes in it so far); in step 0 rank 0 issued at least 18, rank 1 issued 3; "
                                      "seq 4 is in step 1 on rank 1 and in step 0 on rank 0") != NULL,
                  "%s", got[0].line);
    /* Without coalescing the torch helper counts no backward passes; it
     * says it marks steps (ccshim_step_marking): the same verdict. */
    st[0].units = 0;
    st[0].flags = CCS_DSX_ST_MARKS;
    ngot = 0;
    ck_assert_int_eq(run(0) + run(50) + run(T.block_ms), 1);
    ck_assert_msg(strstr(got[0].line, "rank 1 marked 6 steps by seq 18 where rank 0 is still in step 0; in step 0") !=
                      NULL,
                  "%s", got[0].line);
    /* One step apart at their newest common seq (a mini-batch skipped in
     * step 0, rank 1 now in step 1 as rank 0 will be): the counts, as before. */
    for (unsigned h = 0; h < st[1].comm[0].nhist; h++)
        st[1].comm[0].hist[h].step = st[1].comm[0].hist[h].seq >= 4;
    st[1].step = 1;
    ngot = 0;
    ck_assert_int_eq(run(0) + run(50) + run(T.block_ms), 1);
    ck_assert_msg(strstr(got[0].line, "ranks out of step: in step 0 rank 0 issued at least 18, rank 1 issued 3") != NULL,
                  "%s", got[0].line);
}
END_TEST

/* The same records where rank 0 shows no sign of marking steps (step 0,
 * no backward passes counted: a rank without the helper, or a program that
 * marks steps on some ranks only): its step 0 says nothing, no verdict. */
START_TEST(step_zero_of_a_rank_that_marks_none_is_no_evidence)
{
    reset();
    struct ccs_dsx_comm *b;
    add(0, X, 2, 0, 18);
    b = add(1, X, 2, 1, 18);
    for (unsigned h = 0; h < b->nhist; h++)
        b->hist[h].step = (uint32_t)((b->hist[h].seq - 1) / 3);
    st[1].step = 6;
    st[0].wsize = st[1].wsize = 2;
    ptr[2] = ptr[3] = NULL;
    ck_assert_int_eq(run(0) + run(50) + run(T.block_ms) + run(10 * T.block_ms), 0);
}
END_TEST

START_TEST(boundary_skip_is_a_desync_not_a_straggler)
{
    reset();
    for (int r = 0; r < NR; r++) {
        st[r].step = 5;
        if (r == 1)
            continue;
        struct ccs_dsx_comm *c = add(r, X, NR, -1, 115);
        in_step(c, 5, 15);
        struct ccs_dsx_op o = ar(116);
        o.step = 5;
        block(c, o, 100);
    }
    struct ccs_dsx_comm *c1 = add(1, X, NR, -1, 115);
    in_step(c1, 5, 15);
    at_boundary(1, c1, 5);
    /* Must hold for a quarter of block_ms: the statuses are not one instant. */
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(200), 0);
    ck_assert_int_eq(run(300), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_uint_eq(got[0].seq, 116);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 1 ended step 5 after 15 all-reduces where the others made 16"));
    ck_assert_ptr_nonnull(strstr(got[0].line, "ranks 0,2-3 blocked in allreduce"));
    /* Reported once; never a straggler afterwards. */
    for (int r = 0; r < NR; r++)
        if (r != 1)
            st[r].comm[0].blocked_ms = 60000;
    ck_assert_int_eq(run(70000), 0);
}
END_TEST

START_TEST(boundary_extra_with_others_gone_on)
{
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, r == 2 ? 117 : 118);
        if (r == 2) {
            in_step(c, 5, 17);
            at_boundary(2, c, 5);
        } else { /* went on: 16 in step 5, one (deferred) in step 6 */
            in_step(c, 6, 1);
            c->step_prev = 5;
            c->prev_calls = 16;
            c->prev_kind = CCS_KIND_ALLREDUCE;
            st[r].step = 6;
        }
    }
    ck_assert_int_eq(run(0), 1); /* certain at once: they can never come back */
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 ended step 5 after 17 all-reduces where the others made 16"));
    ck_assert_ptr_nonnull(strstr(got[0].line, "went on to step 6"));
}
END_TEST

/* Ranks 1 and 3 not heard from since step 3 (their threads did not run for
 * a while: statuses are not one instant): they have no count of step 5
 * yet, and the line gives the count of the rank that went on, not their 0. */
START_TEST(boundary_extra_beside_ranks_not_heard_from)
{
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, r == 2 ? 117 : r == 0 ? 118 : 90);
        if (r == 2) {
            in_step(c, 5, 17);
            at_boundary(2, c, 5);
        } else if (r == 0) { /* went on: 16 in step 5, one (deferred) in step 6 */
            in_step(c, 6, 1);
            c->step_prev = 5;
            c->prev_calls = 16;
            c->prev_kind = CCS_KIND_ALLREDUCE;
            st[r].step = 6;
        } else {
            in_step(c, 3, 10);
            st[r].step = 3;
        }
    }
    ck_assert_int_eq(run(0), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 2 ended step 5 after 17 all-reduces where the others made 16"));
}
END_TEST

START_TEST(boundary_alike_or_computing_is_healthy)
{
    reset();
    /* Ranks 0 and 1 at the boundary with 15 calls each (a short last batch),
     * 2 still computing in step 5, 3 at the boundary too. */
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, r == 2 ? 110 : 115);
        in_step(c, 5, r == 2 ? 10 : 15);
        st[r].step = 5;
        if (r != 2)
            at_boundary(r, c, 5);
    }
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(60000), 0);
    /* Rank 2 arrives with 15 as well: still nothing. */
    in_step(&st[2].comm[0], 5, 15);
    st[2].comm[0].issued = st[2].comm[0].done = 115;
    at_boundary(2, &st[2].comm[0], 5);
    ck_assert_int_eq(run(61000), 0);
}
END_TEST

/* At the boundary beside members that exited: one status a period old
 * beside the others' exits must not be a verdict at once (they may have
 * ended the step with it); once it held a quarter of block_ms, it is. */
START_TEST(boundary_beside_a_member_gone_after_confirmation)
{
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, 117);
        in_step(c, 5, 17);
        if (r == 1)
            at_boundary(1, c, 5);
        else
            st[r].life = CCS_DSX_EXITED;
    }
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(T.block_ms / 8), 0);
    ck_assert_int_eq(run(T.block_ms / 4), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
}
END_TEST

START_TEST(boundary_agreed_and_gone_on_is_healthy)
{
    /* Every rank ended step 5 with 17 (an extra mini-batch everywhere): they
     * agreed, 0, 2 and 3 went on, 1 has not yet published its leaving. */
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, r == 1 ? 117 : 118);
        if (r == 1) {
            in_step(c, 5, 17);
            at_boundary(1, c, 5);
        } else {
            in_step(c, 6, 1);
            c->step_prev = 5, c->prev_calls = 17, c->prev_kind = CCS_KIND_ALLREDUCE;
            st[r].step = 6;
        }
    }
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(5000), 0);
    /* Gone on so far that its count in step 5 is not known any more: a
     * verdict only once that held for the whole block threshold. */
    for (int r = 0; r < NR; r++)
        if (r != 1) {
            st[r].comm[0].step_prev = 6;
            st[r].step = 7;
        }
    ck_assert_int_eq(run(6000), 0);
    ck_assert_int_eq(run(6500), 0);
    ck_assert_int_eq(run(7100), 1);
}
END_TEST

/* Issue 41's two datasets under coalescing: rank 1 (a plain loss, 2
 * forwards, one backward) waits at the boundary of step 0 with 2 backward
 * passes counted; the others (a cached loss) are blocked in the reduction
 * of their 2nd mini-batch, 2 passes counted so far.  Alike by count for a
 * moment; blocked past the block threshold in a call rank 1 never issued,
 * they wait for it: a DESYNC.  Blocked less than that, it may be the
 * mutual agreement's last moment: nothing. */
START_TEST(boundary_alike_by_units_but_blocked_past_the_threshold)
{
    reset();
    for (int r = 0; r < NR; r++) {
        st[r].step = 0;
        st[r].units = 2;
        struct ccs_dsx_comm *c = add(r, X, NR, -1, 7);
        in_step(c, 0, 7);
        if (r == 1) {
            at_boundary(1, c, 0);
            continue;
        }
        struct ccs_dsx_op o = ar(8);
        block(c, o, 100);
    }
    ck_assert_int_eq(run(0), 0);
    ck_assert_int_eq(run(60000), 0);
    for (int r = 0; r < NR; r++)
        if (r != 1)
            st[r].comm[0].blocked_ms = T.block_ms;
    ck_assert_int_eq(run(61000), 0);
    ck_assert_int_eq(run(61000 + T.block_ms / 4), 1);
    ck_assert_uint_eq(got[0].cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 1 ended step 0 after 2 backward passes"));
    ck_assert_ptr_nonnull(strstr(got[0].line, "ranks 0,2-3 blocked in allreduce"));
}
END_TEST

START_TEST(boundary_counts_differ)
{
    reset();
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = add(r, X, NR, -1, r == 3 ? 114 : 115);
        in_step(c, 5, r == 3 ? 14 : 15);
        at_boundary(r, c, 5);
    }
    ck_assert_int_eq(run(0), 1);
    ck_assert_ptr_nonnull(strstr(got[0].line, "rank 3 ended step 5 after 14 all-reduces where the others made 15"));
}
END_TEST

START_TEST(boundary_protocol_roundtrip)
{
    reset();
    struct ccs_dsx_comm *c = add(1, X, NR, -1, 115);
    in_step(c, 5, 15);
    c->step_prev = 4, c->prev_calls = 16, c->prev_kind = CCS_KIND_ALLREDUCE;
    at_boundary(1, c, 5);
    unsigned char buf[1 << 16];
    size_t n = ccs_dsx_encode_status(&st[1], NULL, NULL, buf, sizeof buf);
    ck_assert_uint_gt(n, 0);
    static struct ccs_dsx_status out;
    char why[200];
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), n);
    ck_assert_uint_eq(out.boundary, 6);
    ck_assert_uint_eq(out.step, 5);
    ck_assert_uint_eq(out.comm[0].flags & CCS_DSX_BOUNDARY, CCS_DSX_BOUNDARY);
    ck_assert_uint_eq(out.comm[0].step_calls, 15);
    ck_assert_uint_eq(out.comm[0].prev_calls, 16);
    /* A kind beyond the list is refused, naming it. */
    c->step_kind = CCS_KIND_MAX + 1;
    n = ccs_dsx_encode_status(&st[1], NULL, NULL, buf, sizeof buf);
    ck_assert_uint_eq(ccs_dsx_decode_status(buf, n, NR, &out, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "step call kind"));
}
END_TEST

START_TEST(setting_names_match_the_table)
{
    ck_assert_int_eq(word_index("CCSHIM_ON_DESYNC", "warn"), CCS_ON_DESYNC_WARN);
    ck_assert_int_eq(word_index("CCSHIM_ON_DESYNC", "abort"), CCS_ON_DESYNC_ABORT);
    ck_assert_int_eq(word_index("CCSHIM_DESYNC_TRANSPORT", "auto"), CCS_DESYNC_AUTO);
    ck_assert_int_eq(word_index("CCSHIM_DESYNC_TRANSPORT", "shm"), CCS_DESYNC_SHM);
    ck_assert_int_eq(word_index("CCSHIM_DESYNC_TRANSPORT", "tcp"), CCS_DESYNC_TCP);
}
END_TEST

/* The coordinator's search (desync_search.c) on two hosts' statuses: rank
 * 1 differs from seq 13 on; probes halve (0, 100] until at most 32 seqs
 * are left, and the records of that interval are asked for in the very
 * pass that narrows it, then every 300 ms.  (They were first asked for 300
 * ms after the last probe: most of a two-host MISMATCH's half-second, and
 * a short job could end first, desync-twohost.sh n-count.) */
static uint64_t probe_seq, probe_comm;
static int nprobe, probe_narrows;
static void on_probe(uint64_t c, uint64_t seq, void *a)
{
    (void)a;
    probe_comm = c;
    probe_seq = seq & ~CCS_DSX_NARROW_BIT;
    probe_narrows = (seq & CCS_DSX_NARROW_BIT) != 0;
    nprobe++;
}

/* Every member's answer to the probe at SEQ (rank 1's differs past 12). */
static void answer(uint64_t seq)
{
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = &st[r].comm[0];
        c->flags |= CCS_DSX_PROBED;
        c->cp_seq[1] = seq;
        c->cp_hash[1] = r == 1 && seq > 12 ? 0xbad0000 + seq : 0x900d0000 + seq;
    }
}

/* Every member's communicator X at SEQ with the same hash, nothing probed. */
static void all_at(uint64_t seq)
{
    for (int r = 0; r < NR; r++) {
        st[r].comm[0].done = st[r].comm[0].issued = seq;
        st[r].comm[0].hash = 0x900d0000 + seq;
        st[r].comm[0].cp_seq[1] = 0;
    }
}

/* The search tests' coordinator: its searches, what it judged, its outputs. */
static struct ccs_dsx_search srch[CCS_DSX_NSEARCH];
static struct ccs_dsx_seen *seen;
static const struct ccs_dsx_search_out out = {.probe = on_probe, .want = on_want};

/* Fresh statuses, every rank a member of X at SEQ with one hash, and a
 * new search with nothing probed or asked yet; returns its start (ms). */
static uint64_t search_start(uint64_t seq)
{
    reset();
    for (int r = 0; r < NR; r++)
        add(r, X, NR, -1, 0);
    all_at(seq);
    memset(srch, 0, sizeof srch);
    seen = ccs_dsx_seen_new();
    nprobe = nwant = 0;
    return 1000;
}

/* One pass of the search a probe tick after NOW; returns its time. */
static uint64_t next_pass(uint64_t now)
{
    now += CCS_DSX_PROBE_TICK_MS;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    return now;
}

/* A new search over the same statuses: nothing judged, nothing under way. */
static void fresh_search(void)
{
    ccs_dsx_seen_free(seen);
    seen = ccs_dsx_seen_new();
    memset(srch, 0, sizeof srch);
}

START_TEST(search_asks_for_the_records_once_narrowed)
{
    uint64_t now = search_start(100);
    st[1].comm[0].hash = 0xbad;
    /* Every status answers for seq 100, their last, and rank 1's hash
     * differs there: (0, 100] is halved at once, without a probe of 100. */
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    ck_assert_int_eq(nprobe, 1);
    ck_assert_uint_eq(probe_seq, 50);
    ck_assert_int_eq(probe_narrows, 1); /* the members keep X in view meanwhile */
    answer(50);
    now += CCS_DSX_PROBE_TICK_MS;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    ck_assert_int_eq(nprobe, 2);
    ck_assert_uint_eq(probe_seq, 25);
    ck_assert_int_eq(nwant, 0);
    answer(25);
    now += CCS_DSX_PROBE_TICK_MS;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out); /* (0, 25]: within a history */
    ck_assert_int_eq(nprobe, 2);
    ck_assert_int_eq(nwant, 1);
    ck_assert_uint_eq(want_comm, X);
    ck_assert_uint_eq(want_seq, CCS_DSX_HIST / 2);
    now += 299;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    ck_assert_int_eq(nwant, 1);
    now += 1;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    ck_assert_int_eq(nwant, 2);
    ck_assert_int_eq(nprobe, 2);
    ccs_dsx_seen_free(seen);
}
END_TEST

/* At the job's end (desync_exit.c, exit_linger): members that freed the
 * communicator or exited linger until the coordinator's BYE, and the
 * search goes on with them.  Once every member finished, their last seq
 * is probed at once, not PROBE_EVERY_MS later; the search is settled (the
 * coordinator may say BYE) only when the hashes agree through it, or once
 * a MISMATCH is judged.  (The search once stopped at the first member
 * that finished: a MISMATCH in a job's last 0.2-0.3 s went unreported.) */
START_TEST(search_goes_on_while_the_members_finish)
{
    uint64_t now = search_start(30);
    /* Rank 0 two calls ahead: beyond their common checkpoint 16 (which
     * agrees, seen in the statuses) no seq every status answers for, so
     * 30, the last they all completed, is probed. */
    for (int r = 0; r < NR; r++) {
        st[r].comm[0].cp_seq[0] = 16;
        st[r].comm[0].cp_hash[0] = 0x900d0000 + 16;
    }
    st[0].comm[0].done = st[0].comm[0].issued = 32;
    st[0].comm[0].hash = 0x900d0000 + 32;
    ccs_dsx_search_pass(srch, NR, ptr, dead, seen, now, &out);
    ck_assert_int_eq(nprobe, 1);
    ck_assert_uint_eq(probe_seq, 30);
    ck_assert_int_eq(probe_narrows, 0); /* a look, not a search that narrows */
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 0); /* a probe out */
    st[0].comm[0].cp_seq[1] = 30; /* rank 0's answer */
    st[0].comm[0].cp_hash[1] = 0x900d0000 + 30;
    now = next_pass(now); /* 30 agrees */
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1);
    /* 70 more calls each, rank 1's different, and everyone finishes: one
     * frees the communicator, one finalizes, two exit. */
    for (int r = 0; r < NR; r++) {
        struct ccs_dsx_comm *c = &st[r].comm[0];
        c->done = c->issued = 100;
        c->hash = r == 1 ? 0xbad0000 + 100 : 0x900d0000 + 100;
        st[r].life = r == 1 ? CCS_DSX_FINALIZING : CCS_DSX_EXITED;
    }
    st[2].life = CCS_DSX_ALIVE;
    st[2].comm[0].state = CCS_DSX_FREED;
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1); /* (a pass that saw them is needed) */
    /* One member still one call short: its last seq is probed at once,
     * though 30 was probed 20 ms ago. */
    st[3].comm[0].done = st[3].comm[0].issued = 99;
    st[3].life = CCS_DSX_EXITED;
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 2);
    ck_assert_uint_eq(probe_seq, 99);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 0);
    /* All at 100: their last hashes answer (rank 1's differs), and the
     * interval (30, 100] is halved in the same pass. */
    st[3].comm[0].done = st[3].comm[0].issued = 100;
    answer(99);
    now = next_pass(now); /* 99 differs: halve (30, 99] */
    ck_assert_int_eq(nprobe, 3);
    ck_assert_uint_eq(probe_seq, 64);
    ck_assert_int_eq(probe_narrows, 1);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 0);
    answer(64);
    now = next_pass(now); /* (30, 64] */
    ck_assert_int_eq(nprobe, 4);
    ck_assert_uint_eq(probe_seq, 47);
    answer(47);
    now = next_pass(now); /* (30, 47]: the records */
    ck_assert_int_eq(nwant, 1);
    ck_assert_uint_eq(want_seq, 30 + CCS_DSX_HIST / 2);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 0); /* until the rules judge */
    ccs_dsx_seen_add(seen, CCS_DSX_MISMATCH, X, 0); /* (as the rules record it: once per communicator) */
    now = next_pass(now);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1);
    ck_assert_int_eq(nprobe, 4);
    /* A healthy end: every member finished at seq 120 with one hash,
     * settled in the pass that sees it, with no probe. */
    fresh_search();
    all_at(120);
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 4);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1);
    /* A probe the members' rings no longer answer (seq 120 while rank 0
     * is there and the others have moved on) is moot once they all end at
     * one seq with one hash: settled then, not PROBE_GIVE_UP_MS later. */
    memset(srch, 0, sizeof srch);
    for (int r = 0; r < NR; r++) {
        st[r].life = CCS_DSX_ALIVE;
        st[r].comm[0].state = 0;
        st[r].comm[0].done = st[r].comm[0].issued = r == 0 ? 120 : 150;
        st[r].comm[0].hash = 0x900d0000 + st[r].comm[0].done;
    }
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 5);
    ck_assert_uint_eq(probe_seq, 120);
    now = next_pass(now); /* rank 0 alone answers */
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 0);
    all_at(160);
    for (int r = 0; r < NR; r++)
        st[r].life = CCS_DSX_EXITED;
    now = next_pass(now);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1);
    ck_assert_int_eq(nprobe, 5);
    /* A member that died is gone: nothing to wait for. */
    fresh_search();
    st[3].life = CCS_DSX_DIED;
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 5);
    ck_assert_int_eq(ccs_dsx_search_settled(srch, now), 1);
    ccs_dsx_seen_free(seen);
}
END_TEST

/* A look at the members' last common seq still out when their hashes are
 * found to differ (at a high call rate the rings no longer hold its seq
 * when it arrives) is dropped: the halving starts in that pass.  (It was
 * waited out, PROBE_GIVE_UP_MS, first: a silent MISMATCH on one of 12
 * communicators at 480,000 calls a second was named 0.9 s after the call
 * instead of 0.3 s.) */
START_TEST(search_drops_a_look_once_the_hashes_differ)
{
    uint64_t now = search_start(30);
    now = next_pass(now); /* agree through 30, from the statuses */
    ck_assert_int_eq(nprobe, 0);
    for (int r = 0; r < NR; r++) { /* rank 0 ahead: 35 is looked at */
        st[r].comm[0].done = st[r].comm[0].issued = r == 0 ? 40 : 35;
        st[r].comm[0].hash = 0x900d0000 + st[r].comm[0].done;
    }
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 1);
    ck_assert_uint_eq(probe_seq, 35);
    ck_assert_int_eq(probe_narrows, 0);
    /* No answer; every member at 100, rank 1's hash different there. */
    all_at(100);
    st[1].comm[0].hash = 0xbad;
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 2);
    ck_assert_uint_eq(probe_seq, 65); /* (30, 100] halved */
    ck_assert_int_eq(probe_narrows, 1);
    ccs_dsx_seen_free(seen);
}
END_TEST

/* More communicators than a search has slots (CCS_DSX_NSEARCH): ranks
 * with more than CCS_DSX_MAXCOMM take turns publishing them, so new ones
 * keep coming into view.  A slot whose search only knows where the hashes
 * agree goes to a newcomer; one that narrows an interval is kept.  (The
 * first 8 communicators seen kept every slot before: a MISMATCH on a
 * ninth was never searched for, in a job of 12 communicators.) */
START_TEST(search_slots_go_round)
{
    uint64_t now = search_start(40);
    /* Eight communicators in view, every member at seq 40 with one hash:
     * each search agrees through 40 from the statuses, no probe. */
    for (int r = 0; r < NR; r++) {
        st[r].ncomm = 0;
        for (uint64_t k = 0; k < CCS_DSX_NSEARCH; k++)
            add(r, X + k, NR, -1, 40)->hash = 0x900d0000 + 40;
    }
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 0);
    /* Their turn ends; the ninth comes into view, rank 1's hash differing
     * at its last seq: its search takes a slot and halves (0, 40] at once,
     * a probe that narrows. */
    for (int r = 0; r < NR; r++) {
        st[r].ncomm = 0;
        add(r, X + 100, NR, -1, 40)->hash = r == 1 ? 0xbad : 0x900d0000 + 40;
    }
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 1);
    ck_assert_uint_eq(probe_comm, X + 100);
    ck_assert_uint_eq(probe_seq, 20);
    ck_assert_int_eq(probe_narrows, 1);
    /* Eight more newcomers while it narrows (its probe unanswered, and it
     * out of view): seven take the idle slots; the narrowing search keeps
     * its own, so the eighth finds none. */
    for (int r = 0; r < NR; r++) {
        st[r].ncomm = 0;
        for (uint64_t k = 0; k < CCS_DSX_NSEARCH; k++)
            add(r, X + 200 + k, NR, -1, 40)->hash = k == CCS_DSX_NSEARCH - 1 && r == 1 ? 0xbad : 0x900d0000 + 40;
    }
    now = next_pass(now);
    ck_assert_int_eq(nprobe, 1); /* X + 207, which differs, is not searched yet */
    int narrowing = 0, newcomers = 0;
    for (int i = 0; i < CCS_DSX_NSEARCH; i++) {
        narrowing += srch[i].comm == X + 100 && srch[i].hi == 40 && srch[i].probe == 20;
        newcomers += srch[i].comm >= X + 200 && srch[i].comm < X + 207;
    }
    ck_assert_int_eq(narrowing, 1);
    ck_assert_int_eq(newcomers, CCS_DSX_NSEARCH - 1);
    ccs_dsx_seen_free(seen);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("desync_rules");
    TCase *t = tcase_create("rules");
    tcase_add_test(t, mismatch_in_history);
    tcase_add_test(t, mismatch_blocked_kind);
    tcase_add_test(t, deferred_flag_differs);
    tcase_add_test(t, desync_behind_finalizing_after_confirmation);
    tcase_add_test(t, freed_with_a_stale_count_is_not_behind);
    tcase_add_test(t, marked_steps_beside_a_rank_still_in_step_zero);
    tcase_add_test(t, step_zero_of_a_rank_that_marks_none_is_no_evidence);
    tcase_add_test(t, freed_with_its_final_count_at_or_past_the_seq_is_healthy);
    tcase_add_test(t, freed_with_its_final_count_behind_after_confirmation);
    tcase_add_test(t, a_glimpse_of_a_blocked_status_is_not_confirmation);
    tcase_add_test(t, exited_with_a_stale_freed_count_is_not_behind);
    tcase_add_test(t, boundary_beside_a_member_gone_after_confirmation);
    tcase_add_test(t, computing_rank_is_a_straggler_not_a_desync);
    tcase_add_test(t, foreign_call_past_the_threshold_is_a_desync);
    tcase_add_test(t, foreign_call_below_the_threshold_is_no_desync);
    tcase_add_test(t, foreign_call_beside_a_computing_rank_is_no_desync);
    tcase_add_test(t, foreign_calls_as_many_as_their_group_are_no_desync);
    tcase_add_test(t, torch_calls_of_different_kinds_at_one_seq_are_a_desync);
    tcase_add_test(t, torch_calls_at_different_seqs_are_a_desync_unless_matched);
    tcase_add_test(t, torch_calls_that_may_complete_are_no_desync);
    tcase_add_test(t, torch_call_identity_is_checked);
    tcase_add_test(t, foreign_call_fields_are_checked);
    tcase_add_test(t, chain_to_a_computing_rank_is_healthy);
    tcase_add_test(t, cross_comm_deadlock);
    tcase_add_test(t, matched_call_beside_ranks_ahead_is_no_desync);
    tcase_add_test(t, dead_rank);
    tcase_add_test(t, dead_rank_inside_the_seq);
    tcase_add_test(t, unknown_member_is_never_stuck);
    tcase_add_test(t, search_asks_for_the_records_once_narrowed);
    tcase_add_test(t, search_goes_on_while_the_members_finish);
    tcase_add_test(t, search_slots_go_round);
    tcase_add_test(t, mismatch_from_the_hashes_names_the_odd_rank);
    tcase_add_test(t, search_drops_a_look_once_the_hashes_differ);
    tcase_add_test(t, hash_only_mismatch_asks_for_records);
    tcase_add_test(t, proto_roundtrip_and_rejects);
    tcase_add_test(t, blocked_beyond_issued_gives_no_verdict);
    tcase_add_test(t, comm_larger_than_world_gives_no_verdict);
    tcase_add_test(t, format_has_the_greppable_line);
    tcase_add_test(t, next_words_name_the_call_left_out);
    tcase_add_test(t, peer_seq_is_bounded);
    tcase_add_test(t, mismatch_basic_types_beside_size);
    tcase_add_test(t, unknown_and_empty_types_are_left_out);
    tcase_add_test(t, two_ranks_no_majority);
    tcase_add_test(t, mismatch_waits_for_every_record);
    tcase_add_test(t, setting_names_match_the_table);
    tcase_add_test(t, boundary_skip_is_a_desync_not_a_straggler);
    tcase_add_test(t, boundary_extra_with_others_gone_on);
    tcase_add_test(t, boundary_extra_beside_ranks_not_heard_from);
    tcase_add_test(t, boundary_alike_or_computing_is_healthy);
    tcase_add_test(t, boundary_counts_differ);
    tcase_add_test(t, boundary_alike_by_units_but_blocked_past_the_threshold);
    tcase_add_test(t, boundary_agreed_and_gone_on_is_healthy);
    tcase_add_test(t, boundary_protocol_roundtrip);
    tcase_add_test(t, unseen_members_counted_by_folds_complete_a_deadlock);
    tcase_add_test(t, line_says_where_the_full_report_is);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
