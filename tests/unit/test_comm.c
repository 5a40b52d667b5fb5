/* test_comm.c - communicator table and identities. */
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "trace_format.h"
#include "unit_main.h"
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(register_lookup_retire)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x1000, 42, 0, 1, 4, CCS_KIND_COMM_INIT, -1);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(ccs_comm_lookup(CCS_BE_MPI, 0x1000), a);
    ck_assert_ptr_null(ccs_comm_lookup(CCS_BE_NCCL, 0x1000)); /* backends are separate namespaces */
    ck_assert_ptr_null(ccs_comm_lookup(CCS_BE_MPI, 0x2000));
    ck_assert_uint_eq(a->id, 42);
    ck_assert_int_eq(a->rank, 1);
    ck_assert_int_eq(a->size, 4);
    ck_assert_int_eq(a->agreed, 1);
    ccs_comm_retire(a);
    ck_assert_ptr_null(ccs_comm_lookup(CCS_BE_MPI, 0x1000));
    /* the handle value is reused for a new communicator */
    struct ccs_comm *b = ccs_comm_register(CCS_BE_MPI, 0x1000, 43, 0, 0, 2, CCS_KIND_COMM_DUP, -1);
    ck_assert_ptr_eq(ccs_comm_lookup(CCS_BE_MPI, 0x1000), b);
    ck_assert_uint_eq(b->id, 43);
    ck_assert_uint_eq(atomic_load(&b->seq), 0);
}
END_TEST

START_TEST(many_colliding_handles)
{
    /* More entries than one probe chain: all found, after retiring some too. */
    for (uintptr_t h = 1; h <= 600; h++)
        ck_assert_ptr_nonnull(ccs_comm_register(CCS_BE_NCCL, h * 4096, h, 0, 0, 1, 0, -1));
    for (uintptr_t h = 1; h <= 600; h += 2)
        ccs_comm_retire(ccs_comm_lookup(CCS_BE_NCCL, h * 4096));
    for (uintptr_t h = 1; h <= 600; h++) {
        struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, h * 4096);
        if (h % 2)
            ck_assert_ptr_null(c);
        else
            ck_assert_uint_eq(c->id, h);
    }
}
END_TEST

START_TEST(child_ids_agree_and_differ)
{
    /* Two "ranks" holding the same parent derive the same child ids in the
     * same order, and different ids for different colors or orders. */
    struct ccs_comm *p0 = ccs_comm_register(CCS_BE_MPI, 0x10, 7, 0, 0, 2, 0, -1);
    struct ccs_comm *p1 = ccs_comm_register(CCS_BE_MPI, 0x20, 7, 0, 1, 2, 0, -1);
    uint64_t a0 = ccs_comm_child_id(p0, CCS_KIND_COMM_SPLIT, 1);
    uint64_t a1 = ccs_comm_child_id(p1, CCS_KIND_COMM_SPLIT, 1);
    ck_assert_uint_eq(a0, a1);
    uint64_t b0 = ccs_comm_child_id(p0, CCS_KIND_COMM_SPLIT, 1); /* second split: differs from first */
    ck_assert_uint_ne(a0, b0);
    uint64_t c1 = ccs_comm_child_id(p1, CCS_KIND_COMM_SPLIT, 2); /* other color in the same call */
    ck_assert_uint_ne(b0, c1);
    ck_assert_uint_ne(a0, 0);
}
END_TEST

START_TEST(definitions_log_keeps_retired)
{
    struct ccs_trace_comm d[8];
    size_t before = ccs_comm_defs(0, d, 0);
    (void)before;
    size_t n0 = 0;
    while (ccs_comm_defs(n0, d, 1) == 1)
        n0++;
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0x777, 99, 5, 3, 8, CCS_KIND_COMM_SPLIT, 2);
    ccs_comm_retire(c);
    ck_assert_uint_eq(ccs_comm_defs(n0, d, 8), 1);
    ck_assert_uint_eq(d[0].id, 99);
    ck_assert_uint_eq(d[0].parent, 5);
    ck_assert_int_eq(d[0].rank, 3);
    ck_assert_int_eq(d[0].size, 8);
    ck_assert_int_eq(d[0].color, 2);
    ck_assert_int_eq(d[0].how, CCS_KIND_COMM_SPLIT);
}
END_TEST

/* A retired communicator's exact final counts stay readable after its
 * entry left the table (desync's collector sees it gone a period later),
 * for the last 1024 retired; older ones are "not known", never another's. */
START_TEST(final_counts_outlive_the_entry)
{
    struct ccs_comm *a = ccs_comm_register(CCS_BE_MPI, 0x7000, 0x5151, 0, 0, 3, CCS_KIND_COMM_DUP, -1);
    ck_assert_ptr_nonnull(a);
    atomic_store(&a->seq, 1944);
    atomic_store(&a->hash, 0xabcdef);
    ccs_comm_retire(a);
    uint64_t seq = 0, hash = 0;
    ck_assert_int_eq(ccs_comm_final(0x5151, &seq, &hash), 0);
    ck_assert_uint_eq(seq, 1944);
    ck_assert_uint_eq(hash, 0xabcdef);
    ck_assert_int_eq(ccs_comm_final(0x5152, &seq, &hash), -1);
    /* the handle reused: the new one's counts are its own */
    struct ccs_comm *b = ccs_comm_register(CCS_BE_MPI, 0x7000, 0x5153, 0, 0, 3, CCS_KIND_COMM_DUP, -1);
    atomic_store(&b->seq, 7);
    ccs_comm_retire(b);
    ck_assert_int_eq(ccs_comm_final(0x5153, &seq, &hash), 0);
    ck_assert_uint_eq(seq, 7);
    ck_assert_int_eq(ccs_comm_final(0x5151, &seq, &hash), 0);
    ck_assert_uint_eq(seq, 1944);
    for (uint64_t i = 0; i < 1024; i++) {
        struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0x8000 + 64 * i, 0x100000 + i, 0, 0, 2, 0, -1);
        ck_assert_ptr_nonnull(c);
        atomic_store(&c->seq, i);
        ccs_comm_retire(c);
    }
    ck_assert_int_eq(ccs_comm_final(0x5151, &seq, &hash), -1); /* 1024 retired since */
    ck_assert_int_eq(ccs_comm_final(0x100000 + 1023, &seq, &hash), 0);
    ck_assert_uint_eq(seq, 1023);
}
END_TEST

START_TEST(adopted_is_local)
{
    struct ccs_comm *c = ccs_comm_adopt(CCS_BE_NCCL, 0x5550, 0, 2);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->agreed, 0);
    ck_assert_ptr_eq(ccs_comm_lookup(CCS_BE_NCCL, 0x5550), c);
}
END_TEST

/* An intercommunicator's entry holds its remote group's size from the
 * moment it can be found, and is never compared across ranks. */
START_TEST(intercommunicator_entries)
{
    struct ccs_comm *c = ccs_comm_register_inter(CCS_BE_MPI, 0x6660, 77, 0, 1, 3, 2, CCS_KIND_COMM_DUP, -1);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->size, 3);
    ck_assert_int_eq(c->remote_size, 2);
    ck_assert_int_eq(c->agreed, 0);
    struct ccs_comm *a = ccs_comm_adopt_inter(CCS_BE_MPI, 0x6670, 0, 1, 4);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->remote_size, 4);
    ck_assert_int_eq(a->agreed, 0);
    /* The same slot reused by an intracommunicator forgets it. */
    ccs_comm_retire(c);
    struct ccs_comm *d = ccs_comm_register(CCS_BE_MPI, 0x6660, 78, 0, 0, 5, CCS_KIND_COMM_DUP, -1);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->remote_size, 0);
    ck_assert_int_eq(d->agreed, 1);
}
END_TEST

/* A process forked while another thread of the parent was inside a step
 * turn (turn_gen odd, with no thread left in the child to finish it): the
 * child reads "no turn known" at once instead of giving up on every read,
 * and its next turn is read back whole. */
START_TEST(fork_in_a_step_turn)
{
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0x7700, 0x77, 0, 0, 2, 0, -1);
    ck_assert_ptr_nonnull(c);
    ccs_comm_step_turn(c, 5, 10);
    struct ccs_comm_turns tu;
    ccs_comm_turns(c, &tu);
    ck_assert_uint_eq(tu.step[0], 5);
    ck_assert_uint_eq(tu.seq0[0], 10);
    uint32_t g = atomic_load(&c->turn_gen);
    atomic_store(&c->turn_gen, g + 1); /* as a writer in the middle of a turn leaves it */
    pid_t pid = fork();
    if (pid == 0) {
        ccs_comm_turns(c, &tu);
        if ((atomic_load(&c->turn_gen) & 1) || tu.seq0[0] || tu.seq0[1] || tu.seq0[2])
            _exit(1);
        ccs_comm_step_turn(c, 6, 11);
        ccs_comm_turns(c, &tu);
        _exit(tu.step[0] == 6 && tu.seq0[0] == 11 ? 0 : 2);
    }
    atomic_store(&c->turn_gen, g); /* the parent's writer "finished" */
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit status %d", WEXITSTATUS(st));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("comm");
    TCase *t = tcase_create("table");
    tcase_add_test(t, register_lookup_retire);
    tcase_add_test(t, many_colliding_handles);
    tcase_add_test(t, child_ids_agree_and_differ);
    tcase_add_test(t, definitions_log_keeps_retired);
    tcase_add_test(t, final_counts_outlive_the_entry);
    tcase_add_test(t, adopted_is_local);
    tcase_add_test(t, intercommunicator_entries);
    tcase_add_test(t, fork_in_a_step_turn);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
