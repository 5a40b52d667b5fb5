/* test_sequence.c - sequence numbers, records and rings (the hot path). */
#include "ccshim.h"
#include "desync_collect.h"
#include "desync_device.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"
#include "unit_main.h"
#include <pthread.h>

static struct ccs_call coll(unsigned kind, uint64_t count)
{
    return (struct ccs_call){.kind = (uint16_t)kind, .dtype = CCS_DT_FLOAT32, .op = CCS_OP_SUM,
                             .backend = CCS_BE_MPI, .root = -1, .count = count, .bytes = count * 4};
}

static void one(struct ccs_comm *c, struct ccs_call call)
{
    ccs_call_end(ccs_call_begin(c, &call, __builtin_return_address(0)), 0);
}

START_TEST(per_comm_sequences)
{
    ck_assert_int_eq(atomic_load(&ccs_active), 1);
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0xa0, 1, 0, 0, 2, 0, -1);
    struct ccs_comm *b = ccs_comm_register(CCS_BE_MPI, 0xb0, 2, 0, 0, 2, 0, -1);
    struct ccs_ring *r = ccs_ring_self();
    uint64_t h0 = r ? atomic_load(&r->head) : 0;
    one(a, coll(CCS_KIND_ALLREDUCE, 10));
    one(a, coll(CCS_KIND_BCAST, 10));
    one(b, coll(CCS_KIND_ALLREDUCE, 10));
    one(a, coll(CCS_KIND_SEND, 10)); /* p2p: its own counter */
    one(a, coll(CCS_KIND_ALLREDUCE, 10));
    r = ccs_ring_self();
    ck_assert_uint_eq(atomic_load(&r->head) - h0, 5);
    struct ccs_record out[5];
    ck_assert_uint_eq(ccs_ring_last(r, out, 5), 5);
    ck_assert_uint_eq(out[0].seq, 1);
    ck_assert_uint_eq(out[1].seq, 2);
    ck_assert_uint_eq(out[2].seq, 1);
    ck_assert_uint_eq(out[2].comm, 2);
    ck_assert_uint_eq(out[3].seq, 1); /* first p2p on a */
    ck_assert_uint_eq(out[4].seq, 3);
    ck_assert_uint_eq(ccs_record_fingerprint(&out[4]), ccs_record_fingerprint(&out[0]));
    ck_assert_uint_ne(ccs_record_fingerprint(&out[1]), ccs_record_fingerprint(&out[0]));
    ck_assert_uint_eq(ccs_record_fingerprint(&out[0]),
                      ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 10, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
    ck_assert_uint_eq(out[0].bytes, 40);
    ck_assert_uint_eq(r->counts[CCS_KIND_ALLREDUCE], 3);
    ck_assert_uint_eq(r->counts[CCS_KIND_SEND], 1);
    ck_assert_ptr_null(atomic_load(&r->inflight));
}
END_TEST

START_TEST(steps_are_stamped)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0xc0, 3, 0, 0, 2, 0, -1);
    uint64_t s0 = ccshim_step_current();
    one(a, coll(CCS_KIND_ALLREDUCE, 1));
    ck_assert_uint_eq(ccshim_step_mark(), s0 + 1);
    one(a, coll(CCS_KIND_ALLREDUCE, 1));
    struct ccs_record out[3];
    ck_assert_uint_eq(ccs_ring_last(ccs_ring_self(), out, 3), 3);
    ck_assert_uint_eq(out[0].step, s0);
    ck_assert_uint_eq(out[1].kind, CCS_KIND_STEP);
    ck_assert_uint_eq(out[1].step, s0 + 1);
    ck_assert_uint_eq(out[2].step, s0 + 1);
}
END_TEST

START_TEST(inflight_visible_during_call_and_nested_not_counted)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0xd0, 4, 0, 0, 2, 0, -1);
    struct ccs_call c = coll(CCS_KIND_ALLREDUCE, 5);
    struct ccs_record *r = ccs_call_begin(a, &c, __builtin_return_address(0));
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_eq(atomic_load(&ccs_ring_self()->inflight), r);
    /* An intercepted call made from inside the real implementation. */
    ck_assert_ptr_null(ccs_call_begin(a, &c, __builtin_return_address(0)));
    ccs_call_end(r, 1);
    struct ccs_record out;
    ck_assert_uint_eq(ccs_ring_last(ccs_ring_self(), &out, 1), 1);
    ck_assert_uint_eq(out.seq, 1);
    ck_assert(out.flags & CCS_F_ERROR);
    ck_assert_uint_eq(atomic_load(&a->seq), 1);
}
END_TEST

START_TEST(disabled_records_nothing)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0xe0, 5, 0, 0, 2, 0, -1);
    atomic_store(&ccs_active, 0);
    struct ccs_call c = coll(CCS_KIND_ALLREDUCE, 5);
    ck_assert_ptr_null(ccs_call_begin(a, &c, NULL));
    ccs_call_end(NULL, 0);
    ck_assert_uint_eq(atomic_load(&a->seq), 0);
    atomic_store(&ccs_active, 1);
}
END_TEST

static void *thread_body(void *arg)
{
    struct ccs_comm *c = arg;
    for (int i = 0; i < 1000; i++)
        one(c, coll(CCS_KIND_ALLREDUCE, 1));
    return ccs_ring_self();
}

START_TEST(threads_get_own_rings)
{
    struct ccs_comm *c1 = ccs_comm_register(CCS_BE_NCCL, 0xf0, 6, 0, 0, 2, 0, -1);
    struct ccs_comm *c2 = ccs_comm_register(CCS_BE_NCCL, 0xf8, 7, 0, 0, 2, 0, -1);
    pthread_t t1, t2;
    void *r1, *r2;
    pthread_create(&t1, NULL, thread_body, c1);
    pthread_create(&t2, NULL, thread_body, c2);
    pthread_join(t1, &r1);
    pthread_join(t2, &r2);
    ck_assert_ptr_ne(r1, r2);
    ck_assert_uint_eq(atomic_load(&((struct ccs_ring *)r1)->head), 1000);
    ck_assert_uint_eq(atomic_load(&c1->seq), 1000);
    ck_assert_uint_eq(atomic_load(&c2->seq), 1000);
}
END_TEST

START_TEST(ring_overflow_counts_drops)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x1f0, 8, 0, 0, 2, 0, -1);
    struct ccs_ring *r = ccs_ring_self();
    if (!r) {
        one(a, coll(CCS_KIND_BARRIER, 0));
        r = ccs_ring_self();
    }
    uint64_t cap = r->mask + 1;
    static struct ccs_record buf[4096];
    while (ccs_ring_drain(r, buf, 4096) > 0)
        ;
    for (uint64_t i = 0; i < cap + 100; i++)
        one(a, coll(CCS_KIND_ALLREDUCE, 1));
    uint64_t got = 0, n;
    uint64_t first_seq = 0;
    while ((n = ccs_ring_drain(r, buf, 4096)) > 0) {
        if (!got)
            first_seq = buf[0].seq;
        got += n;
    }
    /* cap - 1 usable slots (one guard): the oldest 101 records were lost */
    ck_assert_uint_eq(got, cap - 1);
    ck_assert_uint_eq(atomic_load(&r->drain.lost), 101);
    ck_assert_uint_eq(first_seq, atomic_load(&a->seq) - (cap - 1) + 1);
}
END_TEST

/* Reads R through C until nothing is new; the first and last seq read. */
static uint64_t read_all(struct ccs_ring *r, struct ccs_ring_cursor *c, uint64_t *first, uint64_t *last)
{
    static struct ccs_record buf[4096];
    uint64_t got = 0;
    size_t n;
    while ((n = ccs_ring_read(r, c, buf, 4096)) > 0) {
        if (!got)
            *first = buf[0].seq;
        *last = buf[n - 1].seq;
        got += n;
    }
    return got;
}

START_TEST(readers_keep_their_own_cursors)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x2f0, 9, 0, 0, 2, 0, -1);
    one(a, coll(CCS_KIND_BARRIER, 0));
    struct ccs_ring *r = ccs_ring_self();
    uint64_t cap = r->mask + 1;
    static struct ccs_record buf[4096];
    struct ccs_ring_cursor early, late;
    ccs_ring_cursor_at_end(r, &early);
    for (int i = 0; i < 10; i++)
        one(a, coll(CCS_KIND_ALLREDUCE, 1));
    ccs_ring_cursor_at_end(r, &late);
    ck_assert_uint_eq(ccs_ring_read(r, &late, buf, 4096), 0); /* nothing new for it */
    /* Read in pieces: 4 then 6, in order, then nothing. */
    ck_assert_uint_eq(ccs_ring_read(r, &early, buf, 4), 4);
    ck_assert_uint_eq(buf[0].seq, 2);
    ck_assert_uint_eq(buf[3].seq, 5);
    ck_assert_uint_eq(ccs_ring_read(r, &early, buf, 4096), 6);
    ck_assert_uint_eq(buf[5].seq, 11);
    ck_assert_uint_eq(ccs_ring_read(r, &early, buf, 4096), 0);
    /* The producer laps LATE only: it loses the oldest, EARLY loses nothing
     * more, and the ring's own draining cursor is not moved by either. */
    uint64_t drained = atomic_load(&r->drain.next);
    for (uint64_t i = 0; i < cap + 7; i++)
        one(a, coll(CCS_KIND_ALLREDUCE, 1));
    uint64_t first = 0, last = 0, got = read_all(r, &early, &first, &last);
    ck_assert_uint_eq(got, cap - 1);
    ck_assert_uint_eq(atomic_load(&early.lost), 8); /* cap + 7 new, cap - 1 intact */
    ck_assert_uint_eq(first, 11 + 8 + 1);
    ck_assert_uint_eq(last, atomic_load(&a->seq));
    ck_assert_uint_eq(atomic_load(&late.lost), 0);
    ck_assert_uint_eq(read_all(r, &late, &first, &last), cap - 1);
    ck_assert_uint_eq(atomic_load(&late.lost), 8);
    ck_assert_uint_eq(first, 11 + 8 + 1);
    ck_assert_uint_eq(atomic_load(&r->drain.next), drained);
}
END_TEST

static const struct ccs_dsx_comm *status_of(const struct ccs_dsx_status *st, uint64_t id)
{
    for (uint32_t i = 0; i < st->ncomm; i++)
        if (st->comm[i].id == id)
            return &st->comm[i];
    return NULL;
}

/* The running hash the hot path should have for N calls of CALL after H. */
static uint64_t hash_after(uint64_t h, struct ccs_call call, uint64_t n)
{
    struct ccs_fp_words key =
        ccs_fp_words(call.kind, call.flags, call.count, call.dtype, call.op, call.root, call.sig);
    while (n--)
        h = ccs_running_hash(h, key, (call.flags & CCS_F_DEFERRED) != 0);
    return h;
}

static uint64_t probe_seq, want_seq;
static uint64_t want(uint64_t comm, int probe, void *arg)
{
    (void)arg;
    return comm == 10 ? (probe ? probe_seq : want_seq) : 0;
}

/* The desync collector reads the rings through cursors of its own (the
 * trace writer's drain is not moved), and of a ring at most its newest
 * records: the hash of a communicator is its newest record's, which the
 * hot path computed for every call, so a lap loses nothing of it; a probe
 * and the records around a seq are read back from the ring. */
START_TEST(collector_reads_with_its_own_cursor)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x3f0, 10, 0, 0, 2, 0, -1);
    struct ccs_comm *b = ccs_comm_register(CCS_BE_MPI, 0x3f8, 11, 0, 0, 2, 0, -1);
    struct ccs_call ar = coll(CCS_KIND_ALLREDUCE, 1), bc = coll(CCS_KIND_BCAST, 1);
    for (int i = 0; i < 5; i++)
        one(a, ar);
    one(a, coll(CCS_KIND_SEND, 1)); /* not sequenced: not folded */
    one(b, bc);
    struct ccs_ring *r = ccs_ring_self();
    uint64_t drained = atomic_load(&r->drain.next);
    static struct ccs_dsx_status st;
    ccs_dsx_collect(&st, 1);
    const struct ccs_dsx_comm *e = status_of(&st, 10);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->done, 5);
    ck_assert_uint_eq(e->issued, 5);
    ck_assert_uint_eq(e->nhist, 5);
    ck_assert_uint_eq(e->hist[4].seq, 5);
    ck_assert_uint_eq(e->hash, hash_after(0, ar, 5));
    ck_assert_uint_eq(e->hash, atomic_load(&a->hash));
    ck_assert_uint_eq(e->flags & CCS_DSX_HASH_LOST, 0);
    ck_assert_uint_eq(status_of(&st, 11)->done, 1);
    ck_assert_uint_eq(status_of(&st, 11)->hash, hash_after(0, bc, 1));
    ck_assert_uint_eq(atomic_load(&r->drain.next), drained); /* the writer's cursor is its own */
    /* B's second call is overwritten before the collector reads it: B
     * stays at done 1 with the hash through 1, A's hash is whole. */
    one(b, bc);
    uint64_t cap = r->mask + 1;
    for (uint64_t i = 0; i < cap; i++)
        one(a, ar);
    uint64_t read0 = ccs_dsx_collect_records_read();
    ccs_dsx_collect(&st, 2);
    /* The pass copied the newest 512 records of the ring, not the cap new ones. */
    ck_assert_uint_eq(ccs_dsx_collect_records_read() - read0, 512);
    e = status_of(&st, 10);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->done, 5 + cap);
    ck_assert_uint_eq(e->hash, hash_after(0, ar, 5 + cap));
    ck_assert_uint_eq(e->flags & CCS_DSX_HASH_LOST, 0);
    ck_assert_uint_eq(e->nhist, CCS_DSX_HIST);
    ck_assert_uint_eq(e->hist[CCS_DSX_HIST - 1].seq, 5 + cap);
    ck_assert_uint_eq(e->cp_seq[0], (5 + cap) / CCS_DSX_CHECKPOINT * CCS_DSX_CHECKPOINT);
    ck_assert_uint_eq(e->cp_hash[0], hash_after(0, ar, e->cp_seq[0]));
    ck_assert_uint_eq(status_of(&st, 11)->done, 1);
    ck_assert_uint_eq(status_of(&st, 11)->hash, hash_after(0, bc, 1));
    /* A probe 1000 seqs back and the records around a seq 3000 back: read
     * back from the ring. */
    probe_seq = 5 + cap - 1000;
    want_seq = 5 + cap - 3000;
    ccs_dsx_collect_want(want, NULL);
    one(a, ar);
    ccs_dsx_collect(&st, 3);
    e = status_of(&st, 10);
    ck_assert_uint_ne(e->flags & CCS_DSX_PROBED, 0);
    ck_assert_uint_eq(e->cp_seq[1], probe_seq);
    ck_assert_uint_eq(e->cp_hash[1], hash_after(0, ar, probe_seq));
    ck_assert_uint_ne(e->flags & CCS_DSX_PINNED, 0);
    ck_assert_uint_eq(e->nhist, CCS_DSX_HIST);
    ck_assert_uint_eq(e->hist[0].seq, want_seq - CCS_DSX_HIST / 2 + 1);
    ck_assert_uint_eq(e->hist[CCS_DSX_HIST - 1].seq, want_seq + CCS_DSX_HIST / 2);
    /* Overwritten long ago: not answered. */
    probe_seq = 3;
    want_seq = 0;
    ccs_dsx_collect(&st, 4);
    ck_assert_uint_eq(status_of(&st, 10)->flags & (CCS_DSX_PROBED | CCS_DSX_PINNED), 0);
    ccs_dsx_collect_want(NULL, NULL);
}
END_TEST

/* Calls per step come from the communicator's turns, exact although the
 * collector read only the newest records: a step of 3 calls, then one of
 * 2 * ring size, then the current one. */
START_TEST(collector_counts_steps_from_turns)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x4f0, 12, 0, 0, 2, 0, -1);
    struct ccs_ring *r = ccs_ring_self();
    uint64_t cap = r->mask + 1;
    static struct ccs_dsx_status st;
    ccshim_step_mark();
    for (int i = 0; i < 3; i++)
        one(a, coll(CCS_KIND_ALLREDUCE, 1));
    one(a, coll(CCS_KIND_BCAST, 1));
    uint32_t s1 = (uint32_t)ccshim_step_current();
    ccshim_step_mark();
    for (uint64_t i = 0; i < 2 * cap; i++)
        one(a, coll(CCS_KIND_ALLREDUCE, 1));
    uint32_t s2 = (uint32_t)ccshim_step_current();
    ccs_dsx_collect(&st, 1);
    const struct ccs_dsx_comm *e = status_of(&st, 12);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->step_now, s2);
    ck_assert_uint_eq(e->step_calls, 2 * cap);
    ck_assert_uint_eq(e->step_kind, CCS_KIND_ALLREDUCE);
    ck_assert_uint_eq(e->step_prev, s1);
    ck_assert_uint_eq(e->prev_calls, 4);
    ck_assert_uint_eq(e->prev_kind, CCS_KIND_MAX); /* all-reduces and a bcast */
    ccshim_step_mark();
    one(a, coll(CCS_KIND_BARRIER, 0));
    ccs_dsx_collect(&st, 2);
    e = status_of(&st, 12);
    ck_assert_uint_eq(e->step_now, s2 + 1);
    ck_assert_uint_eq(e->step_calls, 1);
    ck_assert_uint_eq(e->step_kind, CCS_KIND_BARRIER);
    ck_assert_uint_eq(e->step_prev, s2);
    ck_assert_uint_eq(e->prev_calls, 2 * cap);
    ck_assert_uint_eq(e->prev_kind, CCS_KIND_ALLREDUCE);
}
END_TEST

/* A communicator whose last call was followed, within one period, by more
 * than a pass reads of another's (512), and then stopped: the pass skipped
 * its last record, and once its calls stop that record is read back, so
 * that its DONE, hash and history reach its last call (the ring did not
 * lap).  While a communicator keeps calling, nothing is read back. */
START_TEST(collector_catches_up_a_quiet_comm)
{
    struct ccs_comm *x = ccs_comm_register(CCS_BE_MPI, 0x5f0, 20, 0, 0, 2, 0, -1);
    struct ccs_comm *y = ccs_comm_register(CCS_BE_MPI, 0x5f8, 21, 0, 0, 2, 0, -1);
    struct ccs_call ar = coll(CCS_KIND_ALLREDUCE, 1), bc = coll(CCS_KIND_BCAST, 1);
    static struct ccs_dsx_status st;
    one(x, ar);
    ccs_dsx_collect(&st, 1);
    one(x, bc); /* X's last call, seq 2 */
    for (int i = 0; i < 600; i++)
        one(y, ar);
    ccs_dsx_collect(&st, 2); /* X's seq 2 skipped; X moved this pass */
    const struct ccs_dsx_comm *e = status_of(&st, 20);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->done, 1);
    ck_assert_uint_eq(e->issued, 2);
    for (int i = 0; i < 600; i++)
        one(y, ar);
    ccs_dsx_collect(&st, 3); /* X quiet: read back */
    e = status_of(&st, 20);
    ck_assert_uint_eq(e->done, 2);
    ck_assert_uint_eq(e->issued, 2);
    ck_assert_uint_eq(e->hash, atomic_load(&x->hash));
    ck_assert_uint_eq(e->hash, hash_after(hash_after(0, ar, 1), bc, 1));
    ck_assert_uint_eq(e->nhist, 2);
    ck_assert_uint_eq(e->hist[1].seq, 2);
    ck_assert_uint_eq(e->hist[1].kind, CCS_KIND_BCAST);
    ck_assert_uint_eq(status_of(&st, 21)->done, 1200);
}
END_TEST

/* The same for an NCCL communicator whose last enqueued call never
 * completes on the device while another communicator goes on: it is
 * blocked at that call, as with fewer calls after it. */
START_TEST(collector_sees_a_device_hang_behind_a_busy_comm)
{
    for (int variant = 0; variant < 2; variant++) {
        uint64_t xid = 30 + (uint64_t)variant * 2;
        struct ccs_comm *x = ccs_comm_register(CCS_BE_NCCL, 0x6f0 + (uintptr_t)variant * 16, xid, 0, 0, 2, 0, -1);
        struct ccs_comm *y = ccs_comm_register(CCS_BE_NCCL, 0x6f8 + (uintptr_t)variant * 16, xid + 1, 0, 0, 2, 0, -1);
        static struct ccs_dsx_status st;
        struct ccs_call ar = coll(CCS_KIND_ALLREDUCE, 1);
        ar.backend = CCS_BE_NCCL;
        one(x, ar);
        ccs_dsx_collect(&st, 1);
        one(x, ar); /* enqueued; the device completes seq 1 only */
        ccs_dsx_collect_nccl_done(xid, 1);
        for (int i = 0; i < (variant ? 600 : 100); i++)
            one(y, ar);
        for (int pass = 2; pass < 5; pass++)
            ccs_dsx_collect(&st, (uint64_t)pass);
        const struct ccs_dsx_comm *e = status_of(&st, xid);
        ck_assert_ptr_nonnull(e);
        ck_assert_msg(e->state == CCS_DSX_BLOCKED, "variant %d: state %d", variant, e->state);
        ck_assert_uint_eq(e->blocked.seq, 2);
        ck_assert_uint_eq(e->done, 2);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sequence");
    TCase *t = tcase_create("record");
    tcase_add_test(t, per_comm_sequences);
    tcase_add_test(t, steps_are_stamped);
    tcase_add_test(t, inflight_visible_during_call_and_nested_not_counted);
    tcase_add_test(t, disabled_records_nothing);
    tcase_add_test(t, threads_get_own_rings);
    tcase_add_test(t, ring_overflow_counts_drops);
    tcase_add_test(t, readers_keep_their_own_cursors);
    tcase_add_test(t, collector_reads_with_its_own_cursor);
    tcase_add_test(t, collector_counts_steps_from_turns);
    tcase_add_test(t, collector_catches_up_a_quiet_comm);
    tcase_add_test(t, collector_sees_a_device_hang_behind_a_busy_comm);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
