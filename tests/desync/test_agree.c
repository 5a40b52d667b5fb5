/* test_agree.c - ccs_desync_agree_u64 over shared memory: three processes
 * (forked, each its own rank) agree on max and min; a member that never
 * calls makes the others time out with -1. */
#include "../test_ports.h"
#include "ccs_config.h"
#include "desync.h"
#include "desync_auth.h"
#include "desync_shm.h"
#include "log.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "process.h"
#include "runtime.h"
#include "unit_main.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 3

/* Child: rank R of N; returns its exit status (0 = as expected). */
static int child(int r, int absent)
{
    ccs_runtime_set_world(r, N);
    struct ccs_comm *c = ccs_comm_register(CCS_BE_MPI, 0x1000, 0xabcull, 0, r, N, CCS_KIND_COMM_INIT, -1);
    if (!c || ccs_desync_start() != 0)
        return 10;
    if (r == absent) {
        usleep(600 * 1000); /* stays attached but never agrees */
        return 0;
    }
    uint64_t mx = 0, mn = 0;
    int rc = ccs_desync_agree_u64(c, 7, (uint64_t)(r * 10 + 5), &mx, &mn, absent >= 0 ? 300 : 5000);
    if (absent >= 0)
        return rc == -1 ? 0 : 11;
    if (rc != 0)
        return 12;
    if (mx != 25 || mn != 5)
        return 13;
    /* A second round with another key. */
    rc = ccs_desync_agree_u64(c, 8, (uint64_t)(100 - r), &mx, &mn, 5000);
    return rc == 0 && mx == 100 && mn == 98 ? 0 : 14;
}

/* Child for many_answers_in_a_row: rank 0 puts its values on NCOMM
 * communicators at once without waiting (as a rank with nothing to defer
 * answers at a step marker), then stays; the others agree on each in
 * turn, which needs every one of rank 0's values to be still there. */
#define NCOMM 12
static int answers_child(int r, int unused)
{
    (void)unused;
    ccs_runtime_set_world(r, N);
    struct ccs_comm *c[NCOMM];
    for (int i = 0; i < NCOMM; i++)
        if (!(c[i] = ccs_comm_register(CCS_BE_MPI, 0x3000 + 8 * (uintptr_t)i, 0xc00ull + (uint64_t)i, 0, r, N,
                                       CCS_KIND_COMM_INIT, -1)))
            return 30;
    if (ccs_desync_start() != 0)
        return 31;
    uint64_t mx = 0, mn = 0;
    if (r == 0) {
        for (int i = 0; i < NCOMM; i++)
            ccs_desync_agree_u64(c[i], 9, (uint64_t)(1000 + i), &mx, &mn, 0);
        usleep(4000 * 1000); /* attached while the others look */
        return 0;
    }
    usleep(100 * 1000); /* rank 0 has put all of them (or soon will: the first wait covers it) */
    for (int i = 0; i < NCOMM; i++) {
        if (ccs_desync_agree_u64(c[i], 9, (uint64_t)(i + r), &mx, &mn, 3000) != 0)
            return 40 + i;
        if (mx != (uint64_t)(1000 + i) || mn != (uint64_t)i + 1)
            return 60 + i;
    }
    return 0;
}

/* Forks N ranks, each running FN(r, ARG) on a segment of its own (TAG),
 * and asserts that every one exits 0. */
static void run_children(int (*fn)(int, int), int arg, const char *tag)
{
    static char secret[64];
    snprintf(secret, sizeof secret, "agree-%d-%s-%d-0123456789abcdef0123456789", (int)getpid(), tag, arg);
    ccs_cfg.secret = secret; /* a segment of our own, whatever else runs */
    ccs_cfg.summary = 0;
    pid_t pid[N];
    for (int r = 0; r < N; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            int rc = fn(r, arg);
            ccs_desync_note_exit(CCS_DESYNC_EXITED); /* as at exit: leaves no segment behind */
            _exit(rc);
        }
    }
    for (int r = 0; r < N; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: exit status %d", r, WEXITSTATUS(st));
    }
}

/* Four ranks on two host identities, started from the environment as
 * under torchrun (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
 * MASTER_PORT): rank 0 runs the coordinator on MASTER_ADDR at a port keyed
 * by the secret, each host's
 * leader forwards its ranks' values, the coordinator folds them. */
static int tcp_child(int r, int port)
{
    static char host[16];
    char ps[16];
    snprintf(host, sizeof host, "h%d", r / 2);
    snprintf(ps, sizeof ps, "%d", port);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", ps, 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    ccs_cfg.desync_host = host;
    ccs_runtime_set_world(r, 4);
    struct ccs_comm *c = ccs_comm_register(CCS_BE_NCCL, 0x2000, 0xdefull, 0, r, 4, CCS_KIND_COMM_INIT, -1);
    if (!c || ccs_desync_start() != 0)
        return 20;
    uint64_t mx = 0, mn = 0;
    int rc = ccs_desync_agree_u64(c, 5, (uint64_t)(r + 1) * 7, &mx, &mn, 15000);
    if (rc != 0)
        return 21;
    if (mx != 28 || mn != 7)
        return 22;
    usleep(300 * 1000); /* the others get the result before the coordinator (rank 0) goes */
    return 0;
}

START_TEST(agree_across_hosts_over_tcp)
{
    static char secret[64];
    snprintf(secret, sizeof secret, "agree-tcp-%d-0123456789abcdef0123456789", (int)getpid());
    ccs_cfg.secret = secret;
    ccs_cfg.summary = 0;
    int port = ccs_test_ports(2); /* MASTER_PORT and MASTER_PORT + 1 */
    ck_assert_int_gt(port, 0);
    /* Another local user listening on MASTER_PORT + 1 first, where the
     * coordinator listened before: detection across hosts went off and the
     * leaders' tickets came to it.  Now nothing comes to it. */
    int squat = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(squat, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(squat, 16), 0);
    pid_t pid[4];
    for (int r = 0; r < 4; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            int rc = tcp_child(r, port);
            ccs_desync_note_exit(CCS_DESYNC_EXITED);
            _exit(rc);
        }
    }
    for (int r = 0; r < 4; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: exit status %d", r, WEXITSTATUS(st));
    }
    ck_assert_int_eq(accept(squat, NULL, NULL), -1);
    ck_assert_int_eq(errno, EAGAIN);
    close(squat);
}
END_TEST

/* The start-up of rank 0 of 4 ranks on two host identities with
 * CCSHIM_SECRET set to SECRET: the lines it logs (into LINES, counted) and
 * whether the coordinator's port was open (returned). */
static int start_rank0(const char *secret, int port, char lines[4][1024], int *nlines)
{
    char log[256], ps[16];
    snprintf(log, sizeof log, "/tmp/ccshim-test-secret-%d.log", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        ccs_cfg.secret = secret;
        ccs_cfg.summary = 0;
        ccs_cfg.log = log;
        ccs_log_open();
        snprintf(ps, sizeof ps, "%d", port);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", ps, 1);
        setenv("LOCAL_WORLD_SIZE", "2", 1);
        ccs_cfg.desync_host = "h0";
        ccs_runtime_set_world(0, 4);
        struct ccs_comm *c = ccs_comm_register(CCS_BE_NCCL, 0x2000, 0xdeeull, 0, 0, 4, CCS_KIND_COMM_INIT, -1);
        if (!c || ccs_desync_start() != 0)
            _exit(30);
        usleep(200 * 1000);
        /* Where the coordinator listens: not MASTER_PORT + 1 (any local user
         * could take it first) but the first port keyed by the secret and
         * the job's tag (desync_start.c), free here. */
        char tagtext[256], kwhy[128];
        unsigned char job[CCS_DSX_JOBTAG];
        snprintf(tagtext, sizeof tagtext, "job:%s|4|comm%llx", ccs_job_id(), 0xdeeull);
        ccs_dsx_auth_jobtag(tagtext, job);
        struct ccs_dsx_key key;
        int keyed = 0;
        if (strlen(secret) >= 32 && ccs_dsx_auth_key_job(secret, job, &key, kwhy, sizeof kwhy) == 0)
            keyed = ccs_dsx_auth_port(&key, 0);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(keyed ? keyed : port + 1))};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int listening = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        ccs_desync_note_exit(CCS_DESYNC_EXITED);
        _exit(listening ? 31 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 31), "exit status %d",
                  WEXITSTATUS(st));
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    *nlines = 0;
    while (fgets(line, sizeof line, f)) {
        if (*nlines < 4)
            snprintf(lines[*nlines], sizeof lines[0], "%s", line);
        (*nlines)++;
    }
    fclose(f);
    unlink(log);
    return WEXITSTATUS(st) == 31;
}

/* The same start-up without CCSHIM_SECRET: the job id, which anyone can
 * guess, must not authenticate peers across hosts.  Rank 0 says so in one
 * line, starts no coordinator (its port stays closed), and detection within
 * the host still starts. */
START_TEST(no_secret_no_tcp_across_hosts)
{
    char lines[4][1024];
    int n;
    int port = ccs_test_ports(2);
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(start_rank0("", port, lines, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(lines[0], "neither CCSHIM_SECRET nor CCSHIM_SECRET_FILE is set; unauthenticated TCP "
                                           "refused, detection across hosts is off (within each host it stays on)"));
}
END_TEST

/* A secret shorter than 128 bits written in hex (32 characters) is refused
 * the same way, saying how long it is and what is expected: "k9x" fell to
 * 15,576 guesses. */
START_TEST(short_secret_refused)
{
    char lines[4][1024];
    int n;
    int port = ccs_test_ports(2);
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(start_rank0("k9x", port, lines, &n), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_msg(strstr(lines[0], "desync: CCSHIM_SECRET holds 3 characters; at least 32 expected (128 random "
                                   "bits: od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'); TCP between hosts "
                                   "refused, detection across hosts is off (within each host it stays on)") != NULL,
                  "%s", lines[0]);
    /* 31 characters: still refused; 32: the coordinator listens. */
    ck_assert_int_eq(start_rank0("0123456789abcdef0123456789abcde", port, lines, &n), 0);
    ck_assert_ptr_nonnull(strstr(lines[0], "CCSHIM_SECRET holds 31 characters"));
    ck_assert_int_eq(start_rank0("0123456789abcdef0123456789abcdef", port, lines, &n), 1);
}
END_TEST

/* Another user created host h0's segment name first (squatting it): the
 * ranks of h0 each talk to the coordinator over TCP as a host of their
 * own, say so, and the agreement across all four still completes. */
START_TEST(squatted_segment_falls_back_to_tcp)
{
    static char secret[80], log[128];
    snprintf(secret, sizeof secret, "squat-%d-0123456789abcdef0123456789", (int)getpid());
    snprintf(log, sizeof log, "/tmp/ccshim-test-squat-%d-%%r.log", (int)getpid());
    ccs_cfg.secret = secret;
    ccs_cfg.summary = 0;
    int port = ccs_test_ports(2); /* MASTER_PORT and MASTER_PORT + 1 */
    ck_assert_int_gt(port, 0);
    /* The name h0's ranks will use (desync.c: job|host|secret|first world
     * communicator), created by "another user": not private to us. */
    char key[400], path[256];
    snprintf(key, sizeof key, "%s|h0|%s|comm%llx", ccs_job_id(), secret, 0xdefull);
    ccs_dsx_shm_path(key, 4, path, sizeof path);
    int sq = open(path, O_CREAT | O_EXCL | O_RDWR, 0644);
    ck_assert_msg(sq >= 0, "cannot create %s: %s", path, strerror(errno));
    if (geteuid() == 0)
        ck_assert_int_eq(fchown(sq, 65534, 65534), 0); /* nobody's */
    close(sq);
    ck_assert_int_eq(ccs_dsx_shm_taken(key, 4), 1);
    pid_t pid[4];
    for (int r = 0; r < 4; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            ccs_cfg.log = log;
            ccs_log_open();
            int rc = tcp_child(r, port);
            ccs_desync_note_exit(CCS_DESYNC_EXITED);
            _exit(rc);
        }
    }
    int ok = 1;
    for (int r = 0; r < 4; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    unlink(path);
    int said = 0;
    for (int r = 0; r < 2; r++) {
        char lp[160], line[1024], want[128];
        snprintf(lp, sizeof lp, "/tmp/ccshim-test-squat-%d-%d.log", (int)getpid(), r);
        snprintf(want, sizeof want, "rank %d talks to the coordinator over TCP instead, as host 'h0/r%d'", r, r);
        FILE *f = fopen(lp, "r");
        while (f && fgets(line, sizeof line, f))
            said += strstr(line, "exists but is not private to this user") != NULL && strstr(line, want) != NULL;
        if (f)
            fclose(f);
    }
    for (int r = 0; r < 4; r++) {
        char lp[160];
        snprintf(lp, sizeof lp, "/tmp/ccshim-test-squat-%d-%d.log", (int)getpid(), r);
        unlink(lp);
    }
    ck_assert_msg(ok, "a rank failed to agree");
    ck_assert_int_eq(said, 2);
}
END_TEST

START_TEST(three_ranks_agree)
{
    run_children(child, -1, "agree");
}
END_TEST

START_TEST(absent_member_times_out)
{
    run_children(child, 1, "agree");
}
END_TEST

/* Twelve communicators' values put in a row by one rank all stay readable
 * (a ring of 4 lost the first 8: the others waited for their timeout). */
START_TEST(many_answers_in_a_row)
{
    run_children(answers_child, 0, "many");
}
END_TEST

/* A private segment of SIZE slots for one test, named after NAME and this
 * process (the key goes into KEY), and its removal: closed, then its name
 * unlinked. */
static struct ccs_dsx_shm *test_segment(const char *name, int32_t size, char *key, size_t n)
{
    char why[256];
    snprintf(key, n, "%s-%d-0123456789abcdef", name, (int)getpid());
    struct ccs_dsx_shm *s = ccs_dsx_shm_open(key, size, 0, 0, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    return s;
}

static void drop_segment(struct ccs_dsx_shm *s, const char *key, int32_t size)
{
    char path[256];
    ccs_dsx_shm_close(s);
    ccs_dsx_shm_path(key, size, path, sizeof path);
    unlink(path);
}

/* Completed agreements posted by several processes at once (every rank of
 * a host posts one, the leader others' too): no two take one place, and no
 * place is left half-written.  Three processes post 100000 each at the
 * same time into one segment; then 32 (NAGREED) posted one after another are
 * all found.  A place two writers had shared kept an odd generation, and
 * what was posted there later was never found. */
START_TEST(agreed_posts_from_many_processes)
{
    char key[128];
    struct ccs_dsx_shm *s = test_segment("posts", N + 1, key, sizeof key);
    _Atomic int *go = mmap(NULL, sizeof *go, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(go != MAP_FAILED);
    atomic_init(go, 0);
    pid_t pid[N];
    for (int r = 0; r < N; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            while (!atomic_load(go)) /* all start together */
                ;
            for (uint64_t i = 0; i < 100000; i++) {
                struct ccs_dsx_agree a = {.comm = 0x100 + (uint64_t)r, .key = i, .max = i, .min = i, .crank = r,
                                          .size = N, .n = N};
                ccs_dsx_shm_post_agreed(s, &a);
            }
            _exit(0);
        }
    }
    atomic_store(go, 1);
    for (int r = 0; r < N; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    munmap(go, sizeof *go);
    for (uint64_t i = 0; i < 32; i++) {
        struct ccs_dsx_agree a = {.comm = 0x900, .key = i, .max = 7 * i, .min = i, .size = N, .n = N};
        ccs_dsx_shm_post_agreed(s, &a);
    }
    int found = 0;
    for (uint64_t i = 0; i < 32; i++) {
        struct ccs_dsx_agree got;
        if (ccs_dsx_shm_find_agreed(s, 0x900, i, &got) && got.max == 7 * i && got.min == i)
            found++;
    }
    drop_segment(s, key, N + 1);
    ck_assert_int_eq(found, 32);
}
END_TEST

/* Verdicts posted by two leaders at once (a handover: the one that resigned
 * still had one in hand): none lost, none torn, each writer's in its order.
 * Two processes post 8 each at the same moment, 16 in all (what the
 * segment keeps), in each of 2000 rounds, and after each round the reader
 * takes exactly those 16.  Before the index was claimed by a fetch-and-add,
 * two writers read the same count, wrote one place, and one verdict of the
 * pair was gone. */
#define VERDICT_WRITERS 2
#define VERDICTS_EACH 8
#define VERDICT_ROUNDS 2000

static void wait_until(_Atomic int *v, int want)
{
    while (atomic_load(v) < want)
        sched_yield();
}

START_TEST(verdicts_posted_by_two_leaders_at_once)
{
    char key[128];
    struct ccs_dsx_shm *s = test_segment("verdicts", N, key, sizeof key);
    _Atomic int *sync = mmap(NULL, 2 * sizeof *sync, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(sync != MAP_FAILED);
    _Atomic int *go = &sync[0], *done = &sync[1];
    atomic_init(go, 0);
    atomic_init(done, 0);
    pid_t pid[VERDICT_WRITERS];
    for (int w = 0; w < VERDICT_WRITERS; w++) {
        pid[w] = fork();
        if (pid[w] == 0) {
            alarm(120);
            for (int round = 1; round <= VERDICT_ROUNDS; round++) {
                wait_until(go, round);
                for (int i = 0; i < VERDICTS_EACH; i++) {
                    struct ccs_dsx_verdict v = {.cls = CCS_DSX_MISMATCH, .comm = 0x100 + (uint64_t)w,
                                                .seq = (uint64_t)round * VERDICTS_EACH + (uint64_t)i, .comm_size = N};
                    snprintf(v.line, sizeof v.line, "writer %d verdict %llu", w, (unsigned long long)v.seq);
                    ccs_dsx_shm_post_verdict(s, &v);
                }
                atomic_fetch_add(done, 1);
            }
            _exit(0);
        }
    }
    struct ccs_dsx_vcursor c = {0, 0};
    uint64_t last[VERDICT_WRITERS] = {0};
    int short_rounds = 0, torn = 0, disorder = 0;
    for (int round = 1; round <= VERDICT_ROUNDS; round++) {
        atomic_store(go, round);
        wait_until(done, round * VERDICT_WRITERS);
        struct ccs_dsx_verdict v;
        int got = 0;
        while (ccs_dsx_shm_next_verdict(s, &c, &v)) {
            got++;
            int w = (int)(v.comm - 0x100);
            char want[sizeof v.line];
            snprintf(want, sizeof want, "writer %d verdict %llu", w, (unsigned long long)v.seq);
            if (w < 0 || w >= VERDICT_WRITERS || strcmp(v.line, want) != 0) {
                torn++;
                continue;
            }
            disorder += v.seq <= last[w];
            last[w] = v.seq;
        }
        short_rounds += got != VERDICT_WRITERS * VERDICTS_EACH;
    }
    for (int w = 0; w < VERDICT_WRITERS; w++) {
        int st = 0;
        waitpid(pid[w], &st, 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    munmap(sync, 2 * sizeof *sync);
    drop_segment(s, key, N);
    ck_assert_int_eq(torn, 0);
    ck_assert_int_eq(disorder, 0);
    ck_assert_msg(short_rounds == 0, "%d of %d rounds lost verdicts", short_rounds, VERDICT_ROUNDS);
    for (int w = 0; w < VERDICT_WRITERS; w++)
        ck_assert_uint_eq(last[w], (uint64_t)VERDICT_ROUNDS * VERDICTS_EACH + VERDICTS_EACH - 1);
}
END_TEST

/* Who of a host logs a verdict (issue 45): CLAIMERS processes, each a
 * rank of the host, see each of CLAIM_ROUNDS verdicts at the same moment
 * and each proposes another rank (itself): exactly one claim is made per
 * verdict, and every process gets the same owner, the one its maker
 * proposed.  A class judged once per communicator (MISMATCH) has one claim
 * whatever the seq, and its owner marks the claim seen for its maker; the
 * table full, -1 (the caller's own view decides). */
#define CLAIMERS 8
#define CLAIM_ROUNDS 200
START_TEST(verdict_claimed_by_one_rank_of_the_host)
{
    char key[128];
    struct ccs_dsx_shm *s = test_segment("claims", CLAIMERS, key, sizeof key);
    size_t bytes = sizeof(_Atomic int) * 2 + sizeof(int32_t) * 2 * CLAIMERS * CLAIM_ROUNDS;
    _Atomic int *sync = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(sync != MAP_FAILED);
    _Atomic int *go = &sync[0], *ready = &sync[1];
    int32_t *owner = (int32_t *)(sync + 2), *won = owner + CLAIMERS * CLAIM_ROUNDS;
    atomic_init(go, 0);
    atomic_init(ready, 0);
    pid_t pid[CLAIMERS];
    for (int r = 0; r < CLAIMERS; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(60);
            for (int round = 1; round <= CLAIM_ROUNDS; round++) {
                atomic_fetch_add(ready, 1);
                wait_until(go, round);
                struct ccs_dsx_verdict v = {.cls = CCS_DSX_DESYNC, .comm = 0x4545, .seq = (uint64_t)round};
                int w = 0;
                owner[(round - 1) * CLAIMERS + r] = ccs_dsx_shm_claim_verdict(s, &v, r, &w, NULL);
                won[(round - 1) * CLAIMERS + r] = w;
            }
            _exit(0);
        }
    }
    for (int round = 1; round <= CLAIM_ROUNDS; round++) {
        wait_until(ready, round * CLAIMERS);
        atomic_store(go, round);
    }
    for (int r = 0; r < CLAIMERS; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    int not_one = 0, disagree = 0, not_proposed = 0;
    for (int round = 0; round < CLAIM_ROUNDS; round++) {
        int nwon = 0, maker = -1;
        for (int r = 0; r < CLAIMERS; r++) {
            if (won[round * CLAIMERS + r])
                nwon++, maker = r;
            disagree += owner[round * CLAIMERS + r] != owner[round * CLAIMERS];
        }
        not_one += nwon != 1;
        not_proposed += owner[round * CLAIMERS] != maker;
    }
    ck_assert_int_eq(not_one, 0);
    ck_assert_int_eq(disagree, 0);
    ck_assert_int_eq(not_proposed, 0);
    /* Once per communicator: one claim for every seq. */
    struct ccs_dsx_verdict m = {.cls = CCS_DSX_MISMATCH, .comm = 0x4646, .seq = 3};
    int w = 0;
    unsigned slot = 999, slot2 = 998;
    ck_assert_int_eq(ccs_dsx_shm_claim_verdict(s, &m, 5, &w, &slot), 5);
    ck_assert_int_eq(w, 1);
    m.seq = 9;
    ck_assert_int_eq(ccs_dsx_shm_claim_verdict(s, &m, 2, &w, &slot2), 5);
    ck_assert_int_eq(w, 0);
    /* The owner marks the claim seen; its maker, at the same place, reads it. */
    ck_assert_uint_eq(slot, slot2);
    ck_assert_int_eq(ccs_dsx_shm_claim_was_seen(s, slot), 0);
    ccs_dsx_shm_claim_seen(s, slot2);
    ck_assert_int_eq(ccs_dsx_shm_claim_was_seen(s, slot), 1);
    /* The table full (CCS_DSX_NCLAIM verdicts on one host): -1. */
    int full = 0;
    for (int i = 0; i < 300 && !full; i++) {
        struct ccs_dsx_verdict v = {.cls = CCS_DSX_DESYNC, .comm = 0x4747, .seq = (uint64_t)i};
        full = ccs_dsx_shm_claim_verdict(s, &v, 1, &w, NULL) == -1;
    }
    ck_assert_int_eq(full, 1);
    munmap(sync, bytes);
    drop_segment(s, key, CLAIMERS);
}
END_TEST

/* A writer that dies between claiming a verdict's place and finishing it
 * (here: its copy runs into an unmapped page) leaves the place odd for
 * good: readers wait CCS_DSX_VERDICT_STALLS calls (periods) for it, then
 * pass it by, and the verdict posted after it is read. */
START_TEST(verdict_of_a_dead_writer_is_passed_by)
{
    char key[128];
    struct ccs_dsx_shm *s = test_segment("deadwriter", N, key, sizeof key);
    long page = sysconf(_SC_PAGESIZE);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core); /* the crash below is the test's */
        /* A verdict whose second half lies in a page that is not there. */
        size_t before = (sizeof(struct ccs_dsx_verdict) / (size_t)page + 1) * (size_t)page;
        char *m = mmap(NULL, before + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m + before, (size_t)page, PROT_NONE) != 0)
            _exit(2);
        struct ccs_dsx_verdict *v = (struct ccs_dsx_verdict *)(m + before - (sizeof *v / 2 & ~(size_t)7));
        v->cls = CCS_DSX_MISMATCH;
        ccs_dsx_shm_post_verdict(s, v);
        _exit(3); /* not reached */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "the writer ended with status %#x", st);
    struct ccs_dsx_verdict v = {.cls = CCS_DSX_DEAD, .comm = 0x77, .seq = 5, .comm_size = N};
    snprintf(v.line, sizeof v.line, "after the dead writer's");
    ccs_dsx_shm_post_verdict(s, &v);
    struct ccs_dsx_vcursor c = {0, 0};
    struct ccs_dsx_verdict got;
    for (int i = 1; i < CCS_DSX_VERDICT_STALLS; i++)
        ck_assert_msg(ccs_dsx_shm_next_verdict(s, &c, &got) == 0, "a verdict at call %d (comm %#llx): the dead "
                      "writer's place was not waited for", i, (unsigned long long)got.comm);
    ck_assert_msg(ccs_dsx_shm_next_verdict(s, &c, &got) == 1, "no verdict after %d calls",
                  CCS_DSX_VERDICT_STALLS);
    ck_assert_uint_eq(got.comm, 0x77);
    ck_assert_str_eq(got.line, "after the dead writer's");
    ck_assert_msg(ccs_dsx_shm_next_verdict(s, &c, &got) == 0, "a third verdict (comm %#llx)",
                  (unsigned long long)got.comm);
    drop_segment(s, key, N);
}
END_TEST

/* Rank R of 2 (host identity hR, CCSHIM_COORD at PORT) with SECRET, its
 * log in LOG: starts detection, runs MS, exits (lingering as ranks do). */
static void linger_rank(int r, int port, const char *secret, const char *log, int ms)
{
    static char coord[64], host[8];
    snprintf(coord, sizeof coord, "127.0.0.1:%d", port);
    snprintf(host, sizeof host, "h%d", r);
    ccs_cfg.secret = secret;
    ccs_cfg.coord = coord;
    ccs_cfg.summary = 0;
    ccs_cfg.log = log;
    ccs_cfg.log_level = CCS_LOG_INFO;
    ccs_log_open();
    setenv("LOCAL_WORLD_SIZE", "1", 1);
    ccs_cfg.desync_host = host;
    ccs_runtime_set_world(r, 2);
    struct ccs_comm *c = ccs_comm_register(CCS_BE_NCCL, 0x2000, 0xd1eull, 0, r, 2, CCS_KIND_COMM_INIT, -1);
    if (!c || ccs_desync_start() != 0)
        _exit(40);
    usleep((useconds_t)ms * 1000);
    ccs_desync_note_exit(CCS_DESYNC_EXITED);
    _exit(0);
}

/* A host's leader that the coordinator refuses (another secret) lingers at
 * its exit: it says once that the link ended, and once how many more times
 * it failed meanwhile.  (Before: 78 lines in 1.5 s, one per period.) */
START_TEST(refused_leader_lingering_says_it_twice)
{
    static char s0[80], s1[80], log0[128], log1[128];
    snprintf(s0, sizeof s0, "linger-%d-0123456789abcdef0123456789", (int)getpid());
    snprintf(s1, sizeof s1, "other-%d-0123456789abcdef0123456789", (int)getpid());
    snprintf(log0, sizeof log0, "/tmp/ccshim-test-linger-%d-0.log", (int)getpid());
    snprintf(log1, sizeof log1, "/tmp/ccshim-test-linger-%d-1.log", (int)getpid());
    int port = ccs_test_ports(1);
    ck_assert_int_gt(port, 0);
    pid_t p0 = fork();
    if (p0 == 0)
        linger_rank(0, port, s0, log0, 2500);
    usleep(300 * 1000);
    pid_t p1 = fork();
    if (p1 == 0)
        linger_rank(1, port, s1, log1, 500);
    int st = 0;
    waitpid(p1, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1: exit status %d", WEXITSTATUS(st));
    waitpid(p0, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0: exit status %d", WEXITSTATUS(st));
    FILE *f = fopen(log1, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024], all[4096] = "";
    int ended = 0, more = 0, other = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "link to the coordinator"))
            continue;
        n++;
        ended += strstr(line, "]: desync side channel: the link to the coordinator ended while this rank was "
                              "exiting (the coordinator at 127.0.0.1:") != NULL;
        more += strstr(line, "]: desync side channel: the link to the coordinator failed ") != NULL &&
                strstr(line, " more times while this rank was exiting (the last: the coordinator at 127.0.0.1:") !=
                    NULL;
        if (strlen(all) + strlen(line) < sizeof all)
            strcat(all, line), all[strlen(all) - 1] = '|';
    }
    fclose(f);
    other = n - ended - more;
    unlink(log0);
    unlink(log1);
    ck_assert_msg(ended == 1 && more == 1 && other == 0, "%d lines: %s", n, all);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("desync_agree");
    TCase *t = tcase_create("agree");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, three_ranks_agree);
    tcase_add_test(t, absent_member_times_out);
    tcase_add_test(t, many_answers_in_a_row);
    tcase_add_test(t, agreed_posts_from_many_processes);
    tcase_add_test(t, verdicts_posted_by_two_leaders_at_once);
    tcase_add_test(t, verdict_of_a_dead_writer_is_passed_by);
    tcase_add_test(t, agree_across_hosts_over_tcp);
    tcase_add_test(t, no_secret_no_tcp_across_hosts);
    tcase_add_test(t, short_secret_refused);
    tcase_add_test(t, squatted_segment_falls_back_to_tcp);
    tcase_add_test(t, verdict_claimed_by_one_rank_of_the_host);
    tcase_add_test(t, refused_leader_lingering_says_it_twice);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
