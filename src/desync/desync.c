/*
 * desync.c - early desync detection (docs/desync.md): start-up, the
 * background thread, the policy, and the agreement service.
 *
 * Every period the thread folds this rank's new records into its status
 * (desync_collect.c), publishes it in the host's shared memory
 * (desync_shm.c), reads the other local ranks' statuses, applies the rules
 * (desync_rules.c) and reports new verdicts (desync_report.c).  When the
 * job spans hosts, the host's leader also forwards the host's statuses to
 * the coordinator in rank 0 (desync_coord.c) and posts its verdicts into
 * shared memory (desync_client.c, over desync_conn.c).  The hot path is untouched: the thread only reads the
 * rings, their in-flight records and the comm table.
 */
#include "desync.h"
#include "ccs_config.h"
#include "desync_auth.h"
#include "desync_collect.h"
#include "desync_proto.h"
#include "desync_report.h"
#include "desync_rules.h"
#include "desync_shm.h"
#include "desync_tcp.h"
#include "log.h"
#include "registry.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { OFF = -1, IDLE = 0, STARTING = 1, RUNNING = 2 };

/* How long a MISMATCH waits for the records of every member at its seq
 * (asked from other hosts through the coordinator) before it names the
 * majority of the records in view: the answer takes two or three periods
 * of the hosts and the coordinator, well inside the 1 s target. */
#define RECORD_WAIT_MS 700
/* How long the coordinator's process waits at exit for the other ranks to
 * finish (the final exchange). */
#define FINAL_MS 5000

static atomic_int state;
static struct ccs_dsx_shm *shm;
static int32_t world_size = -1, world_rank = -1;
static char hostkey[CCS_DSX_HOST];
static char secret[80];    /* without MPI: the job's secret; under MPI: the job's random tag, in hex */
static char key_extra[32]; /* more of the segment's name, when the job has no id */
/* How the side channel authenticates (desync_tcp.h): the secret, or under
 * MPI this rank's X25519 key pair and the coordinator's public key (only
 * public halves cross MPI), with the job's tag. */
static struct ccs_dsx_cred cred;
static unsigned char coord_pk[CCS_DSX_PKBYTES];
#define MIN_SECRET 32 /* characters: 128 random bits written in hex */
static struct ccs_dsx_status me;
static struct ccs_dsx_status scratch;
/* Per world rank (the other ranks of this host): our copy of its status,
 * the slot's generation of that copy, its heartbeat and when it last
 * changed (ms); nonzero in PRESUMED_DEAD when the heartbeat stopped. */
static struct ccs_dsx_status **peer_status;
static uint64_t *peer_gen, *peer_beat, *peer_beat_ms;
static uint8_t *presumed_dead;
static const struct ccs_dsx_status **view;  /* per world rank: the statuses known this period */
static const struct ccs_dsx_status **local; /* the same, packed: this host's ranks */
static struct ccs_dsx_seen *seen, *reported;
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t agree_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int life;
static atomic_int abort_pending;
static uint64_t abort_comm;
static struct ccs_dsx_coord *coord;
static struct ccs_dsx_client *client;
static uint64_t vcursor;
static pthread_t th;
static uint64_t started_ms;
static int tcp_mode;    /* a coordinator sees the whole job */
static int spans_hosts; /* the job's ranks run on more than one host */
static char coord_host_s[256];
static int coord_port_s;
static int leaving; /* this process is exiting: never take the lead */
static int invalid_logged, tcp_logged, hooks_done;
static struct ccs_dsx_agree *agree_buf;
static size_t agree_cap;

int ccs_desync_active(void)
{
    return atomic_load(&state) == RUNNING;
}

/* ------------------------------------------------------------ verdicts */

/* Who writes the whole diagnosis of a verdict into the log (the others
 * write its line only; every rank still writes its full view to the trace
 * directory): for a verdict of this host's rules, the lowest rank of the
 * host still running (LOCAL_REPORTER, set every tick); for one from the
 * coordinator, rank 0, where the coordinator runs. */
static int32_t local_reporter = -1;
static atomic_int report_busy;   /* this process is writing a report */
static long abort_grace_ms = 60; /* before ending the job (see on_verdict) */
static char local_marker;
#define FROM_LOCAL_RULES ((void *)&local_marker)

/* The communicator of the first verdict this process reported under abort
 * (0: none yet). */
static _Atomic uint64_t ending_comm;

static void on_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    if (!ccs_dsx_seen_add(reported, v->cls, v->comm, v->cls == CCS_DSX_MISMATCH ? 0 : v->seq))
        return;
    ccs_features_verdict(ccs_dsx_class_name(v->cls), v->comm, v->seq, v->line); /* e.g. metrics (registry.h) */
    if (v->cls != CCS_DSX_STRAGGLER)
        ccs_verdict_note(); /* a rank waiting at its step boundary stops waiting (registry.h) */
    /* Under abort the first verdict on a communicator ends the job; what
     * the ranks see on it while the job ends (the others now blocked behind
     * the departed rank, a rank in MPI_Finalize) follows from it.  Reporting
     * that would also race: the rank that writes the full report may be
     * gone before it sees it, leaving a verdict without its diagnosis.
     * Said once, at info level.  (Verdicts on other communicators, as the
     * two sides of a cross-communicator deadlock, are reported.) */
    if (ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT && v->cls != CCS_DSX_STRAGGLER) {
        uint64_t none = 0;
        if (!atomic_compare_exchange_strong(&ending_comm, &none, v->comm) && none == v->comm) {
            static int said;
            ccs_log_once(&said, CCS_LOG_INFO,
                         "desync: a later verdict (%s at seq %llu on comm %#llx) not reported: the job is "
                         "ending on the first",
                         ccs_dsx_class_name(v->cls), (unsigned long long)v->seq, (unsigned long long)v->comm);
            return;
        }
    }
    int full = arg == FROM_LOCAL_RULES ? (local_reporter < 0 || local_reporter == world_rank) : world_rank == 0;
    /* A rank in MPI_Finalize or exiting leaves the abort to the ranks still
     * running (they see the same verdict): MPI is being torn down under it.
     * Decided before the report, which may take a while (libdw). */
    atomic_store(&report_busy, 1);
    if (ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT && v->cls != CCS_DSX_STRAGGLER &&
        atomic_load(&life) == CCS_DSX_ALIVE && !atomic_load(&abort_pending)) {
        abort_comm = v->comm;
        /* The rank reporting in full ends the job once its report is out
         * (three periods later, as before: the others have written their
         * line by then, at once, and their files while it named frames);
         * the others give it time to, and end the job if it does not. */
        abort_grace_ms = full ? 3 * ccs_cfg.desync_period_ms : 1000;
        atomic_store(&abort_pending, 1);
    }
    ccs_dsx_report(v, full);
    atomic_store(&report_busy, 0);
}

/* After the diagnostics: give the other ranks a few periods to write
 * theirs, then end the job through what MPI or NCCL registered. */
/* If the abort function itself hangs (an MPI_Abort from a second thread of
 * a job that asked for MPI_THREAD_SINGLE is not guaranteed to return or to
 * end anything), the process ends on its own: the launcher then ends the job. */
static void *abort_watchdog(void *arg)
{
    (void)arg;
    ccs_sleep_ms(5000);
    ccs_log(CCS_LOG_ERROR,
            "CCSHIM_ON_DESYNC=abort: the job did not end within 5 s of the abort; ending this process "
            "(exit status 134)");
    _exit(134);
    return NULL;
}

static void do_abort(void)
{
    long grace = abort_grace_ms;
    ccs_sleep_ms(grace < 100 ? 100 : grace);
    /* This process's own report first (bounded: it is only text). */
    for (int i = 0; i < 300 && atomic_load(&report_busy); i++)
        ccs_sleep_ms(10);
    ccs_log(CCS_LOG_ERROR, "CCSHIM_ON_DESYNC=abort: aborting the job after the verdict on comm %#llx",
            (unsigned long long)abort_comm);
    pthread_t w;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&w, &a, abort_watchdog, NULL);
    pthread_attr_destroy(&a);
    if (ccs_abort_job(abort_comm) == 0) /* what MPI or NCCL registered (registry.h) */
        return;
    ccs_log(CCS_LOG_ERROR, "no abort function succeeded: ending this process (exit status 134)");
    _exit(134);
}

static void post_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_verdict(shm, v);
}

/* The coordinator asks for the records of (COMM, SEQ): every rank of this
 * host publishes what it kept around SEQ. */
static void post_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(shm, comm, seq, ccs_clock_mono_ms());
}

/* Records differ here at (COMM, SEQ) (or a member's record of it is not in
 * view): the local ranks publish what they kept around SEQ, and the leader
 * sends those records to the coordinator. */
static void local_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(shm, comm, seq, ccs_clock_mono_ms());
    if (client)
        ccs_dsx_client_detail(client, comm);
}

static void post_bye(void *arg)
{
    (void)arg;
    ccs_dsx_shm_set_bye(shm);
}

static uint64_t wanted_seq(uint64_t comm, int probe, void *arg)
{
    (void)arg;
    return shm ? ccs_dsx_shm_wanted(shm, comm, probe, ccs_clock_mono_ms()) : 0;
}

static void post_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_agreed(shm, a);
}

/* ------------------------------------------------------------ the period */

static void forward_tcp(size_t nlocal, uint64_t now)
{
    (void)now;
    size_t nag = 0;
    for (size_t i = 0; i < nlocal; i++) {
        if (agree_cap < nag + 4) {
            size_t nc = agree_cap ? agree_cap * 2 : 64;
            struct ccs_dsx_agree *nb = realloc(agree_buf, nc * sizeof *nb);
            if (!nb)
                break;
            agree_buf = nb;
            agree_cap = nc;
        }
        struct ccs_dsx_agree got[4];
        int k = ccs_dsx_shm_agree_get(shm, local[i]->wrank, got);
        for (int j = 0; j < k; j++)
            if (got[j].comm)
                agree_buf[nag++] = got[j];
    }
    char why[256];
    long to = ccs_cfg.desync_period_ms / 2;
    if (ccs_dsx_client_tick(client, local, nlocal, agree_buf, nag, to < 1 ? 1 : (int)to, why, sizeof why) != 0)
        ccs_log_once(&tcp_logged, CCS_LOG_WARN,
                     "desync side channel: %s; detection across hosts is off until the coordinator answers", why);
}

static struct ccs_dsx_thresholds thresholds(void);

/* Folds this rank's new records into its status and publishes it: what
 * changed at once, an unchanged status twice a second (the heartbeat);
 * readers skip slots that did not change. */
static void publish_own_status(uint64_t now)
{
    ccs_dsx_collect(&me, now);
    me.magic = CCS_DSX_MAGIC;
    me.version = CCS_DSX_VERSION;
    me.wrank = world_rank;
    me.wsize = world_size;
    me.pid = (uint32_t)getpid();
    me.life = (uint32_t)atomic_load(&life);
    memcpy(me.host, hostkey, sizeof me.host);
    static uint64_t last_hash, last_pub;
    uint64_t beat = me.beat;
    me.beat = 0;
    uint64_t h =
        ccs_hash_bytes(&me, offsetof(struct ccs_dsx_status, comm) + me.ncomm * sizeof(struct ccs_dsx_comm), 0);
    me.beat = beat;
    if (h != last_hash || now - last_pub >= 500) {
        me.beat++;
        ccs_dsx_shm_publish(shm, &me);
        last_hash = h;
        last_pub = now;
    }
}

/* Local rank world_rank's status from its slot (our copy, read again only when the
 * slot changed), or NULL when there is none valid.  A rank whose process is
 * gone is marked dead in our copy, so the leader tells the coordinator at
 * once; one whose heartbeat stopped is presumed dead. */
static const struct ccs_dsx_status *read_peer(int32_t r, uint64_t now)
{
    char why[200];
    uint64_t g = peer_status[r] ? peer_gen[r] : 0;
    int rc = ccs_dsx_shm_read(shm, r, &scratch, &g, why, sizeof why);
    if (rc < 0)
        ccs_log_once(&invalid_logged, CCS_LOG_WARN, "desync: ignoring rank %d's shared status: %s", r, why);
    if (rc == 1) {
        if (!peer_status[r] && !(peer_status[r] = malloc(sizeof *peer_status[r])))
            return NULL;
        memcpy(peer_status[r], &scratch,
               offsetof(struct ccs_dsx_status, comm) + scratch.ncomm * sizeof(struct ccs_dsx_comm));
        peer_gen[r] = g;
    } else if (rc < 0 || !peer_status[r]) {
        return NULL;
    }
    /* rc 0 with a copy: the slot is being written, or was when its process
     * was killed (its generation then stays odd for good): the last copy
     * stands, so a rank killed while publishing is still seen to die. */
    const struct ccs_dsx_status *o = peer_status[r];
    if (o->beat != peer_beat[r] || !peer_beat_ms[r]) {
        peer_beat[r] = o->beat;
        peer_beat_ms[r] = now;
    }
    if (o->life == CCS_DSX_ALIVE && !ccs_dsx_pid_alive(o->pid))
        peer_status[r]->life = CCS_DSX_DIED;
    else if (o->life == CCS_DSX_ALIVE && now - peer_beat_ms[r] > (uint64_t)ccs_cfg.desync_heartbeat_ms)
        presumed_dead[r] = 1;
    return o;
}

/* The statuses of this host's ranks into VIEW (by world rank) and LOCAL
 * (packed); returns how many. */
static size_t read_local_statuses(uint64_t now)
{
    size_t nlocal = 0;
    for (int32_t r = 0; r < world_size; r++) {
        presumed_dead[r] = 0;
        view[r] = r == world_rank ? &me : read_peer(r, now);
        if (view[r])
            local[nlocal++] = view[r];
    }
    return nlocal;
}

/* The host's leader is gone (it exited first): take over its link to the
 * coordinator. */
static void lead_if_leader_gone(void)
{
    if (!tcp_mode || client || leaving || ccs_dsx_shm_bye(shm) || !ccs_dsx_shm_claim_leader(shm))
        return;
    struct ccs_dsx_client_cb cb = {
        .verdict = post_verdict, .agreed = post_agreed, .want = post_want, .bye = post_bye};
    client = ccs_dsx_client_new_cred(coord_host_s, coord_port_s, world_size, world_rank, &cred, hostkey, &cb);
    CCS_LOG(INFO, "desync: rank %d now leads host '%s' (the leader is gone)", world_rank, hostkey);
}

/* One period: publish, read the host's statuses, apply the rules to them,
 * forward them to the coordinator (the host's leader), and report the
 * verdicts posted into shared memory. */
static void tick(void)
{
    pthread_mutex_lock(&tick_lock);
    uint64_t now = ccs_clock_mono_ms();
    publish_own_status(now);
    size_t nlocal = read_local_statuses(now);
    ccs_dsx_device_align(view, world_size); /* NCCL completion on the device: agree on the first uncompleted seq */
    struct ccs_dsx_view v = {.wsize = world_size, .st = view, .dead = presumed_dead, .now_ms = now};
    struct ccs_dsx_thresholds t = thresholds();
    t.partial = tcp_mode || spans_hosts; /* members elsewhere: only the coordinator can judge */
    /* The lowest rank here still running reports in full (any rank if none is). */
    local_reporter = -1;
    for (int32_t r = 0; r < world_size && local_reporter < 0; r++)
        if (view[r] && view[r]->life == CCS_DSX_ALIVE && !presumed_dead[r])
            local_reporter = r;
    struct ccs_dsx_sink sink = {.verdict = on_verdict, .arg = FROM_LOCAL_RULES, .want = local_want};
    int nv = ccs_dsx_rules_run(&v, &t, seen, &sink);
    static uint64_t last_dbg;
    if (ccs_cfg.log_level >= CCS_LOG_DEBUG && now - last_dbg >= 1000) {
        last_dbg = now;
        CCS_LOG(DEBUG, "desync: %zu local statuses, %u comms here, %d new verdicts", nlocal, me.ncomm, nv);
    }
    lead_if_leader_gone();
    if (client)
        forward_tcp(nlocal, now);
    struct ccs_dsx_verdict *vd = malloc(sizeof *vd);
    while (vd && ccs_dsx_shm_next_verdict(shm, &vcursor, vd))
        on_verdict(vd, NULL);
    free(vd);
    ccs_detector_pass_note();
    pthread_mutex_unlock(&tick_lock);
}

static void (*_Atomic poll_fn)(uint64_t now_ms);

void ccs_desync_set_poll(void (*fn)(uint64_t now_ms))
{
    atomic_store(&poll_fn, fn);
}

static void *thread_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* Below the job's threads: where ranks outnumber cores, this thread
     * takes its turn in their gaps rather than from them (nice 10 still gets
     * about a tenth of a contended core, so detection is never starved). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    while (atomic_load(&state) == RUNNING) {
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        if (atomic_load(&state) != RUNNING)
            break;
        void (*poll)(uint64_t) = atomic_load(&poll_fn);
        if (poll)
            poll(ccs_clock_mono_ms());
        tick();
        if (atomic_load(&abort_pending) == 1) {
            atomic_store(&abort_pending, 2);
            do_abort();
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ exit, fork */

void ccs_desync_note_exit(int how)
{
    if (atomic_load(&state) != RUNNING || (how != CCS_DESYNC_FINALIZING && how != CCS_DESYNC_EXITED))
        return;
    if (atomic_load(&life) >= how)
        return;
    atomic_store(&life, how);
    tick(); /* publish now: the others must not wait a period to know */
    if (how != CCS_DESYNC_EXITED)
        return;
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(th, &cid) == 0 && clock_gettime(cid, &ts) == 0) {
        double cpu_ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6, wall = (double)(ccs_clock_mono_ms() - started_ms);
        CCS_LOG(INFO, "desync: background thread used %.1f ms of CPU in %.1f s (%.3f%% of a core)", cpu_ms,
                wall / 1e3, wall > 0 ? cpu_ms * 100 / wall : 0.0);
    }
    /* Linger a few periods while local ranks are blocked: they (and we) can
     * then tell that they wait for a rank that is gone. */
    for (int i = 0; i < 3; i++) {
        int blocked = 0;
        for (int32_t r = 0; r < world_size; r++)
            for (uint32_t k = 0; view[r] && r != world_rank && k < view[r]->ncomm; k++)
                blocked |= view[r]->comm[k].state == CCS_DSX_BLOCKED;
        if (!blocked)
            break;
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        tick();
    }
    /* The coordinator's process: the final exchange.  The coordinator stays
     * until every rank has said it finishes (a fault in a short job is still
     * judged), then says BYE, so no host is left with a dead connection;
     * this process's thread keeps forwarding its host meanwhile. */
    if (coord && ccs_dsx_coord_finish(coord, FINAL_MS) != 1)
        CCS_LOG(INFO,
                "desync: ranks still running %d ms after the coordinator's rank finished; detection across "
                "hosts ends here",
                FINAL_MS);
    /* Hand the host's link to the coordinator over to a rank still running. */
    pthread_mutex_lock(&tick_lock);
    leaving = 1;
    ccs_dsx_shm_resign(shm);
    pthread_mutex_unlock(&tick_lock);
    ccs_dsx_shm_release(shm);
    if (atomic_load(&abort_pending) == 1) {
        atomic_store(&abort_pending, 2);
        do_abort();
    }
}

/* The end of the run (registry.h: before coalescing's finish, the trace's
 * flush and the summary): at the process's exit, say so and linger. */
static void finish_hook(int reason)
{
    if (reason == CCS_END_EXIT)
        ccs_desync_note_exit(CCS_DESYNC_EXITED);
}

static void atfork_child(void)
{
    /* The thread is the parent's; the slot is the parent's rank.  A forked
     * child is not a rank of the job: detection stays off in it. */
    atomic_store(&state, OFF);
    shm = NULL;
    client = NULL;
    coord = NULL;
    ccs_dsx_collect_reset();
}

static const struct ccs_feature desync_feature = {
    .name = "desync detection",
    .finish = finish_hook,
    .fork_child = atfork_child,
};

/* ------------------------------------------------------------ start-up */

static void say_off(const char *why)
{
    static int logged;
    ccs_log_once(&logged, CCS_LOG_WARN, "desync detection is off: %s; the job runs on without it", why);
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return -1;
    long x = strtol(v, &end, 10);
    return *end == 0 && x > 0 && x < (1L << 30) ? (int)x : -1;
}

static void host_key(char *out, size_t n)
{
    if (ccs_cfg.desync_host && *ccs_cfg.desync_host)
        snprintf(out, n, "%s", ccs_cfg.desync_host);
    else
        snprintf(out, n, "%s", ccs_hostname());
}

/* An IPv4 address of this host other peers can reach, or loopback. */
static void my_address(char *out, size_t n, int loopback_ok)
{
    snprintf(out, n, "127.0.0.1");
    if (loopback_ok)
        return;
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
            break;
        }
    freeifaddrs(ifa);
}

/* Parses CCSHIM_COORD ("host:port", port 0 allowed when ANY_PORT: the
 * coordinator picks one and MPI tells the others).  0, or -1 after one
 * warning naming the value (cut to a readable length) and what was
 * expected. */
static int parse_coord(const char *c, int any_port, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(c, ':');
    char *end = NULL;
    long p = -1;
    if (colon && colon > c && colon[1]) {
        errno = 0;
        p = strtol(colon + 1, &end, 10);
        if (errno || *end)
            p = -1;
    }
    if (p < (any_port ? 0 : 1) || p > 65535 || (size_t)(colon - c) >= hn) {
        static int logged;
        ccs_log_once(&logged, CCS_LOG_WARN,
                     "CCSHIM_COORD='%.200s%s' ignored: expected host:port with a port in %d..65535", c,
                     strlen(c) > 200 ? "...[truncated]" : "", any_port ? 0 : 1);
        return -1;
    }
    snprintf(host, hn, "%.*s", (int)(colon - c), c);
    *port = (int)p;
    return 0;
}

/* CCSHIM_SECRET_FILE: the secret from PATH, a regular file of this user
 * that nobody else may read or write (mode 0600 or stricter), holding 16 to
 * 79 printable characters (a trailing newline is dropped).  0, or -1 with
 * WHY naming the file and what was expected. */
static int read_secret_file(const char *path, char *why, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (fd < 0) {
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' cannot be opened: %s", path, strerror(errno));
        return -1;
    }
    char buf[sizeof secret + 2];
    ssize_t got = -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' is not a regular file", path);
    else if (sb.st_uid != geteuid() || (sb.st_mode & 077))
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' must be yours and private (mode 0600), is uid %u mode %04o", path,
                 (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
    else
        got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got < 0)
        return -1;
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
        got--;
    buf[got] = 0;
    int printable = 1;
    for (ssize_t i = 0; i < got; i++)
        printable &= buf[i] > ' ' && buf[i] < 127;
    if (got < MIN_SECRET || got >= (ssize_t)sizeof secret || !printable) {
        snprintf(why, n,
                 "CCSHIM_SECRET_FILE='%s' holds %zd characters; expected %d to %zu printable ones (at least 128 "
                 "random bits: od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')",
                 path, got, MIN_SECRET, sizeof secret - 1);
        return -1;
    }
    memcpy(secret, buf, (size_t)got + 1);
    return 0;
}

static struct ccs_dsx_thresholds thresholds(void)
{
    return (struct ccs_dsx_thresholds){.block_ms = (uint32_t)ccs_cfg.desync_block_ms,
                                       .straggler_ms = (uint32_t)ccs_cfg.desync_straggler_ms,
                                       .suspect_ms = (uint32_t)(ccs_cfg.desync_block_ms * 2),
                                       .heartbeat_ms = (uint32_t)ccs_cfg.desync_heartbeat_ms,
                                       .mismatch_wait_ms = (uint32_t)(2 * ccs_cfg.desync_period_ms),
                                       .record_wait_ms = RECORD_WAIT_MS};
}

static int start_coordinator(const char *bind_host, int port, const struct ccs_dsx_cred *cc, char *why, size_t n)
{
    struct ccs_dsx_thresholds t = thresholds();
    int got = 0;
    /* The coordinator evaluates less often than ranks publish: it sees the
     * whole job, and its targets (1 s, 2 s) leave room. */
    long cp = 5 * ccs_cfg.desync_period_ms;
    coord = ccs_dsx_coord_start_cred(bind_host, port, world_size, cc, &t, (int)(cp < 100 ? 100 : cp), &got, why, n);
    return coord ? got : -1;
}

/* Shared by both start-ups: COORD_HOST/PORT empty/<= 0 when no TCP. */
static int start_common(int local_size, const char *coord_host, int coord_port)
{
    char why[512];
    host_key(hostkey, sizeof hostkey);
    char key[600];
    snprintf(key, sizeof key, "%s|%s|%s|%s", ccs_job_id(), hostkey, secret, key_extra);
    shm = ccs_dsx_shm_open(key, world_size, world_rank, local_size, why, sizeof why);
    int can_tcp = coord_host && *coord_host && coord_port > 0 && (cred.secret || cred.peers);
    if (!shm && ccs_dsx_shm_taken(key, world_size) && can_tcp) {
        /* Another user holds the segment's name (it carries the job's
         * random tag or secret, so it had to be learnt): this rank stands
         * alone, as a host of its own, in a private segment of a random
         * name, and talks to the coordinator over TCP. */
        unsigned char rnd[CCS_DSX_NONCE];
        ccs_dsx_auth_nonce(rnd);
        size_t o = strlen(key);
        o += (size_t)snprintf(key + o, sizeof key - o, "|alone%d|", world_rank);
        for (int i = 0; i < 16 && o + 3 < sizeof key; i++)
            o += (size_t)snprintf(key + o, sizeof key - o, "%02x", rnd[i]);
        char alone[CCS_DSX_HOST];
        snprintf(alone, sizeof alone, "%.48s/r%d", hostkey, world_rank);
        CCS_LOG(WARN,
                "desync: %s; rank %d talks to the coordinator over TCP instead, as host '%s' (detection stays on)",
                why, world_rank, alone);
        memcpy(hostkey, alone, sizeof hostkey);
        shm = ccs_dsx_shm_open(key, world_size, world_rank, 1, why, sizeof why);
    } else if (!shm && ccs_dsx_shm_taken(key, world_size)) {
        size_t o = strlen(why);
        snprintf(why + o, sizeof why - o,
                 " (another user holds the name; without a coordinator to fall back to, detection on this host "
                 "is off)");
    }
    if (!shm) {
        say_off(why);
        atomic_store(&state, OFF);
        return -1;
    }
    size_t w = (size_t)world_size;
    peer_status = calloc(w, sizeof *peer_status);
    view = calloc(w, sizeof *view);
    local = calloc(w, sizeof *local);
    presumed_dead = calloc(w, 1);
    peer_beat = calloc(w, sizeof *peer_beat);
    peer_gen = calloc(w, sizeof *peer_gen);
    peer_beat_ms = calloc(w, sizeof *peer_beat_ms);
    seen = ccs_dsx_seen_new();
    reported = ccs_dsx_seen_new();
    if (!peer_status || !view || !local || !presumed_dead || !peer_beat || !peer_gen || !peer_beat_ms || !seen ||
        !reported) {
        say_off("out of memory");
        atomic_store(&state, OFF);
        return -1;
    }
    tcp_mode = coord_host && *coord_host && coord_port > 0;
    if (tcp_mode) {
        snprintf(coord_host_s, sizeof coord_host_s, "%s", coord_host);
        coord_port_s = coord_port;
    }
    if (tcp_mode && ccs_dsx_shm_is_leader(shm)) {
        struct ccs_dsx_client_cb cb = {
            .verdict = post_verdict, .agreed = post_agreed, .want = post_want, .bye = post_bye};
        client = ccs_dsx_client_new_cred(coord_host, coord_port, world_size, world_rank, &cred, hostkey, &cb);
        if (!client)
            say_off("cannot create the TCP client (out of memory)");
    }
    ccs_dsx_collect_want(wanted_seq, NULL);
    if (!hooks_done) {
        hooks_done = 1;
        ccs_feature_register(&desync_feature);
    }
    atomic_store(&state, RUNNING);
    ccs_agree_register(ccs_desync_agree_u64); /* for coalescing's auto (registry.h) */
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 512 * 1024);
    started_ms = ccs_clock_mono_ms();
    if (pthread_create(&th, &a, thread_main, NULL) != 0) {
        pthread_attr_destroy(&a);
        say_off("cannot start the background thread");
        atomic_store(&state, OFF);
        return -1;
    }
    pthread_attr_destroy(&a);
    if (client)
        CCS_LOG(INFO,
                "desync detection on: rank %d of %d, host '%s', host leader, coordinator at %s:%d, period %ld ms",
                world_rank, world_size, hostkey, coord_host, coord_port, ccs_cfg.desync_period_ms);
    else
        CCS_LOG(DEBUG, "desync detection on: rank %d of %d, host '%s', shared memory%s, period %ld ms", world_rank,
                world_size, hostkey, tcp_mode ? " (the host leader talks to the coordinator)" : "",
                ccs_cfg.desync_period_ms);
    return 0;
}

/* Claims the start-up of detection for this call: 1 (state STARTING; the
 * world rank and size are taken), 0 when it is running already, -1 when it
 * is off, the world is not known yet (maybe later), or another call is
 * starting it. */
static int claim_start(void)
{
    if (!ccs_cfg.desync || !atomic_load(&ccs_active))
        return -1;
    if (ccs_world_rank() < 0 || ccs_world_size() <= 1)
        return -1; /* not yet known (or nothing to compare): maybe later */
    int expect = IDLE;
    if (!atomic_compare_exchange_strong(&state, &expect, STARTING))
        return expect == RUNNING ? 0 : -1;
    world_size = ccs_world_size();
    world_rank = ccs_world_rank();
    return 1;
}

/* The earliest-created agreed communicator with every rank of the world. */
static void world_comm(struct ccs_comm *c, void *arg)
{
    static uint64_t best_t;
    uint64_t *id = arg;
    if (!c->agreed || c->size != world_size)
        return;
    if (!*id || c->t_created < best_t) {
        *id = c->id;
        best_t = c->t_created;
    }
}

int ccs_desync_start(void)
{
    int claim = claim_start();
    if (claim <= 0)
        return claim;
    /* Not MPI: the launcher's environment (torchrun, Slurm) says the rest. */
    int local_size = env_int("LOCAL_WORLD_SIZE");
    if (local_size < 0)
        local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    /* Ranks span hosts when the launcher says fewer run here than in all. */
    int spans = local_size > 0 && local_size < world_size;
    if (ccs_cfg.desync_host && *ccs_cfg.desync_host)
        local_size = 0; /* ranks per host identity: unknown, for removing the segment */
    char host[256] = "";
    int port = -1;
    const char *c = ccs_cfg.coord;
    if (c && *c) {
        if (parse_coord(c, 0, host, sizeof host, &port) != 0)
            port = -1;
    } else if (getenv("MASTER_ADDR") && env_int("MASTER_PORT") > 0 && env_int("MASTER_PORT") < 65535) {
        snprintf(host, sizeof host, "%s", getenv("MASTER_ADDR"));
        port = env_int("MASTER_PORT") + 1;
    }
    int tcp = ccs_cfg.desync_transport == CCS_DESYNC_TCP || (ccs_cfg.desync_transport == CCS_DESYNC_AUTO && spans);
    spans_hosts = spans;
    char fwhy[400] = "";
    /* The identity of the job's first communicator spanning the world (from
     * the ncclUniqueId, the same on every rank and new per job) tells it
     * apart from others, in the segment's name and the job's tag, also
     * where nothing names the job (no launcher's id, or torchrun's default
     * "none") and where a launcher's id is there for anyone to read. */
    uint64_t first = 0;
    ccs_comm_foreach(world_comm, &first); /* also where a job id names the job: that id is predictable */
    if (first)
        snprintf(key_extra, sizeof key_extra, "comm%llx", (unsigned long long)first);
    char tagtext[400];
    snprintf(tagtext, sizeof tagtext, "job:%s|%d|%s", ccs_job_id(), world_size, key_extra);
    ccs_dsx_auth_jobtag(tagtext, cred.job);
    size_t slen = ccs_cfg.secret ? strlen(ccs_cfg.secret) : 0;
    if (slen && slen < MIN_SECRET) {
        snprintf(fwhy, sizeof fwhy,
                 "CCSHIM_SECRET holds %zu characters; at least %d expected (128 random bits: od -An -N16 -tx1 "
                 "/dev/urandom | tr -d ' \\n')",
                 slen, MIN_SECRET);
    } else if (slen) {
        snprintf(secret, sizeof secret, "%s", ccs_cfg.secret);
        if (slen >= sizeof secret)
            CCS_LOG(WARN, "CCSHIM_SECRET is longer than %zu characters; its first %zu are used", sizeof secret - 1,
                    sizeof secret - 1);
    } else if (ccs_cfg.secret_file && *ccs_cfg.secret_file) {
        (void)read_secret_file(ccs_cfg.secret_file, fwhy, sizeof fwhy);
    }
    if (secret[0]) {
        cred.secret = secret; /* the key: the secret stretched, salted by the job's tag */
    } else {
        /* Names this job's shared memory only (mode 0600, this user's):
         * anyone can compute it, so it never authenticates TCP. */
        snprintf(secret, sizeof secret, "job:%s@%s:%d/%s", ccs_job_id(), host, port, key_extra);
        if (tcp) {
            if (*fwhy)
                CCS_LOG(WARN,
                        "desync: %s; TCP between hosts refused, detection across hosts is off (within each "
                        "host it stays on)",
                        fwhy);
            else
                CCS_LOG(WARN, "desync: ranks span hosts but neither CCSHIM_SECRET nor CCSHIM_SECRET_FILE is set; "
                              "unauthenticated TCP refused, detection across hosts is off (within each host it "
                              "stays on)");
            tcp = 0;
            port = -1;
        }
    }
    if (tcp && port <= 0) {
        say_off("ranks span hosts but no coordinator address (set CCSHIM_COORD=host:port, or MASTER_ADDR and "
                "MASTER_PORT)");
        tcp = 0;
    }
    if (tcp && world_rank == 0) {
        char why[256];
        /* Listen on the announced address only (MASTER_ADDR or CCSHIM_COORD). */
        if (start_coordinator(host, port, &cred, why, sizeof why) < 0) {
            CCS_LOG(WARN, "desync: cannot start the coordinator on port %d: %s; detection across hosts is off",
                    port, why);
        }
    }
    return start_common(local_size, tcp ? host : NULL, tcp ? port : -1);
}

/* What crosses MPI at start-up: public values only (an eavesdropper on
 * the MPI traffic learns nothing to authenticate with). */
struct gather_item {
    char host[CCS_DSX_HOST];
    int32_t enabled;
    int32_t pad;
    unsigned char pk[CCS_DSX_PKBYTES]; /* the rank's X25519 public key */
};

struct bcast_item {
    uint32_t magic;
    int32_t port; /* coordinator port, or <= 0: no TCP */
    char host[64];
    unsigned char coord_pk[CCS_DSX_PKBYTES]; /* the coordinator's public key */
    unsigned char job[CCS_DSX_JOBTAG];       /* the job's tag, drawn by rank 0 */
};

int ccs_desync_start_mpi(const struct ccs_dsx_mpi_ops *ops)
{
    int32_t w = ccs_world_size(), r = ccs_world_rank();
    if (w <= 0 || r < 0)
        return -1;
    /* Both collectives run on every rank whatever is decided below. */
    struct gather_item mine;
    memset(&mine, 0, sizeof mine);
    host_key(mine.host, sizeof mine.host);
    mine.enabled = ccs_cfg.desync && atomic_load(&ccs_active) && ccs_dsx_auth_keypair(cred.pk, cred.sk) == 0;
    memcpy(mine.pk, cred.pk, sizeof mine.pk);
    struct gather_item *all = calloc((size_t)w, sizeof *all);
    static struct gather_item one; /* fallback so the collective still runs */
    int ok = all != NULL;
    if (ops->allgather(&mine, ok ? (void *)all : (void *)&one, ok ? (int)sizeof mine : 0, ops->arg) != 0)
        ok = 0;
    int local_size = 0, enabled = ok, hosts = 0;
    /* The coordinator (rank 0) keeps every rank's public key: any rank may
     * come to lead its host. */
    unsigned char *pks = r == 0 && ok ? malloc((size_t)w * CCS_DSX_PKBYTES) : NULL;
    for (int32_t i = 0; ok && i < w; i++) {
        if (pks)
            memcpy(pks + (size_t)i * CCS_DSX_PKBYTES, all[i].pk, CCS_DSX_PKBYTES);
        all[i].host[CCS_DSX_HOST - 1] = 0;
        local_size += strcmp(all[i].host, mine.host) == 0;
        enabled &= all[i].enabled != 0;
        int first = 1;
        for (int32_t j = 0; j < i && first; j++)
            first = strcmp(all[i].host, all[j].host) != 0;
        hosts += first;
    }
    free(all);
    int tcp = enabled && (ccs_cfg.desync_transport == CCS_DESYNC_TCP ||
                          (ccs_cfg.desync_transport == CCS_DESYNC_AUTO && hosts > 1));
    spans_hosts = hosts > 1;
    struct bcast_item bc;
    memset(&bc, 0, sizeof bc);
    if (r == 0 && enabled) {
        bc.magic = CCS_DSX_MAGIC;
        unsigned char rnd[CCS_DSX_NONCE];
        ccs_dsx_auth_nonce(rnd); /* the job's tag: 128 random bits */
        memcpy(bc.job, rnd, sizeof bc.job);
        struct ccs_dsx_cred cc = {.secret = NULL, .peers = pks};
        memcpy(cc.job, bc.job, sizeof cc.job);
        if (ccs_dsx_auth_keypair(cc.pk, cc.sk) != 0 || !pks)
            tcp = 0;
        memcpy(bc.coord_pk, cc.pk, sizeof bc.coord_pk);
        char chk[64];
        int chkport;
        if (ccs_cfg.coord && *ccs_cfg.coord) /* a malformed value is said once, used or not */
            (void)parse_coord(ccs_cfg.coord, 1, chk, sizeof chk, &chkport);
        if (tcp) {
            world_size = w;
            char why[256];
            int port = 0;
            const char *c = ccs_cfg.coord;
            if (!(c && *c && parse_coord(c, 1, bc.host, sizeof bc.host, &port) == 0)) {
                port = 0;
                my_address(bc.host, sizeof bc.host, hosts <= 1); /* loopback when one host */
            }
            /* Listen on the announced address only. */
            bc.port = start_coordinator(bc.host, port, &cc, why, sizeof why);
            if (bc.port < 0)
                CCS_LOG(WARN, "desync: cannot start the coordinator: %s; detection across hosts is off", why);
        }
        struct ccs_dsx_key wipe;
        memcpy(wipe.k, cc.sk, sizeof wipe.k);
        ccs_dsx_auth_wipe(&wipe);
        memset(cc.sk, 0, sizeof cc.sk);
    }
    free(pks);
    if (ops->bcast(&bc, sizeof bc, ops->arg) != 0 || bc.magic != CCS_DSX_MAGIC)
        return -1;
    if (!enabled)
        return -1;
    int claim = claim_start();
    if (claim <= 0)
        return claim;
    bc.host[sizeof bc.host - 1] = 0;
    /* This rank's side: its key pair, the coordinator's public key, the
     * job's tag (also, in hex, in the shared segment's name: random, so no
     * other user can predict it). */
    memcpy(coord_pk, bc.coord_pk, sizeof coord_pk);
    memcpy(cred.job, bc.job, sizeof cred.job);
    cred.secret = NULL;
    cred.peers = coord_pk;
    for (size_t i = 0; i < sizeof bc.job; i++)
        snprintf(secret + 2 * i, sizeof secret - 2 * i, "%02x", bc.job[i]);
    /* CCSHIM_COORD with a port, on a rank other than 0: the address this
     * rank reaches the coordinator at (behind NAT, or through a proxy). */
    const char *via = ccs_cfg.coord, *colon = via ? strrchr(via, ':') : NULL;
    if (r != 0 && tcp && bc.port > 0 && colon && atoi(colon + 1) > 0)
        (void)parse_coord(via, 0, bc.host, sizeof bc.host, &bc.port);
    return start_common(local_size, tcp && bc.port > 0 ? bc.host : NULL, tcp ? bc.port : -1);
}

/* ------------------------------------------------------------ agreement */

int ccs_desync_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                         uint64_t *agreed_min, int timeout_ms)
{
    if (atomic_load(&state) != RUNNING || !c || !c->agreed || c->size <= 0 || c->rank < 0 || c->rank >= c->size)
        return -1;
    if (c->size == 1) {
        *agreed_max = *agreed_min = mine;
        return 0;
    }
    struct ccs_dsx_agree a = {
        .comm = c->id, .key = key, .max = mine, .min = mine, .crank = c->rank, .size = c->size, .n = 1};
    pthread_mutex_lock(&agree_lock);
    ccs_dsx_shm_agree_put(shm, &a);
    pthread_mutex_unlock(&agree_lock);
    size_t words = ((size_t)c->size + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    if (!bits)
        return -1;
    uint64_t deadline = ccs_clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    uint64_t verdicts = ccs_verdicts_seen();
    int rc = -1;
    for (;;) {
        /* A verdict means the job is desynchronised: what is waited for may
         * never come (a rank at its step boundary, docs/coalescing.md). */
        if (atomic_load(&state) != RUNNING || ccs_verdicts_seen() != verdicts)
            break;
        struct ccs_dsx_agree res, got[4];
        if (client || ccs_dsx_shm_find_agreed(shm, c->id, key, &res)) {
            if (ccs_dsx_shm_find_agreed(shm, c->id, key, &res) && (int32_t)res.n == c->size) {
                *agreed_max = res.max;
                *agreed_min = res.min;
                rc = 0;
                break;
            }
        }
        memset(bits, 0, words * sizeof *bits);
        int32_t n = 0;
        uint64_t mx = 0, mn = UINT64_MAX;
        for (int32_t r = 0; r < world_size; r++) {
            int k = ccs_dsx_shm_agree_get(shm, r, got);
            for (int j = 0; j < k; j++) {
                const struct ccs_dsx_agree *g = &got[j];
                if (g->comm != c->id || g->key != key || g->size != c->size || g->crank < 0 ||
                    g->crank >= c->size || (bits[g->crank / 64] >> (g->crank % 64) & 1))
                    continue;
                bits[g->crank / 64] |= 1ull << (g->crank % 64);
                n++;
                mx = g->max > mx ? g->max : mx;
                mn = g->min < mn ? g->min : mn;
            }
        }
        if (n == c->size) {
            *agreed_max = mx;
            *agreed_min = mn;
            rc = 0;
            break;
        }
        if (ccs_clock_mono_ms() >= deadline)
            break;
        ccs_sleep_ms(1);
    }
    free(bits);
    return rc;
}

void ccs_desync_nccl_done(struct ccs_comm *c, uint64_t seq_done)
{
    if (c && c->agreed)
        ccs_dsx_collect_nccl_done(c->id, seq_done);
}
