/*
 * desync_sim.c - the scale simulation: the real coordinator and the real
 * per-host clients (src/desync/desync_coord.c, desync_client.c,
 * desync_rules.c) with many simulated ranks, on loopback, in one process.
 *
 *   desync_sim RANKS [PER_HOST [SECONDS [SCENARIO [GROUP [links]]]]]
 *
 * GROUP > 0: the tree (docs/desync.md, "The tree"): one relay per GROUP
 * hosts sends the root one fold a period.  Without "links", the relay is
 * the real client in relay mode, given its group's ranks in-process (the
 * links of its leaders to it are not simulated).  With "links", the tree
 * as a job runs it: one client per host, every leader first reporting to
 * the root, which appoints a relay per group (the leader's real relay
 * coordinator, desync_tree_relay.c, pumped in the leader's turn) and sends
 * the group's other leaders there.  0 (the default): one client per host,
 * reporting to the root, as in a job below the tree's size.
 * Every simulated rank issues all-reduces on the world communicator at
 * RATE per second (statuses as desync_collect.c builds them); every host
 * has one client, driven by a few threads.  Halfway, SCENARIO happens:
 *   deadlock  rank 1 blocks on a second communicator {0, 1} that rank 0
 *             never reaches, while everyone else blocks at the next world
 *             all-reduce: a DESYNC after the block threshold (1 s)
 *   mismatch  rank 1's next all-reduce has count 8: a MISMATCH
 *   healthy   nothing: there must be no verdict
 * Prints one tab-separated line:
 *   ranks hosts scenario verdict latency_ms coord_cpu_pct coord_mem_mib in_kib_s evals eval_ms_max
 *   log_lines log_kib admit_ms relays ranks_logging full_reports
 * (relays: 0 without the tree).
 * log_lines, log_kib: what the job's combined log holds for the first
 * verdict, as each simulated rank decides it with the runtime's code when
 * its host's client receives the verdict (on_verdict): the line from one
 * rank of each host, the block from the one writing the full report (its
 * own stack not counted); ranks_logging: how many ranks logged it (one a
 * host), full_reports: how many wrote the block (one).
 * admit_ms: from the start until every host's leader was admitted (the
 * measure starts then).  DESYNC_SIM_SHOW set: the line of each
 * communicator's first verdict on stderr.
 * latency: from the moment the last rank is blocked (deadlock) or the odd
 * call is issued (mismatch) to the verdict reaching the first client.
 */
#include "../test_clock.h"
#include "ccs_config.h"
#include "desync_claim.h"
#include "desync_proto.h"
#include "desync_report.h"
#include "desync_tcp.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "log.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RATE 50 /* collectives per second per rank */
#define PERIOD 20
#define ADMIT_FULL_MS 500
#define WORLD 0xf00du
#define PAIR 0xbeefu

static int nranks, per_host, nhosts;
static int group;            /* hosts a relay (0: no tree) */
static int links;            /* the tree as a job runs it: leaders linked to real relays */
static struct ccs_dsx_coord **relays;               /* links: per host, its relay's coordinator (NULL: none) */
static const struct ccs_dsx_status ***relay_bufs;  /* ... and room for its group's statuses */
static uint32_t *relay_group;
static int *relay_port;
static struct ccs_dsx_thresholds thr;
static int nunits, per_unit; /* clients (hosts or relays) and the ranks each forwards */
static double secs;
static const char *scenario;
/* Each rank's status holds the one communicator it uses (ranks 0 and 1:
 * all eight places): 2.4 KB a rank, not the 17 KB of eight. */
static struct ccs_dsx_status **statuses;
static const struct ccs_dsx_status **status_ptrs;
static double *blocked_at; /* per rank: when it blocked (deadlock) */
static struct ccs_dsx_client **clients;
static double t_start, t_event = -1, t_verdict = -1;
static unsigned verdict_cls;
static double log_lines, log_bytes;
static struct ccs_dsx_claims *claims; /* per host: its shared segment's claims */
static uint64_t first_key;            /* the first verdict's (desync_claim.h) */
static int ranks_logging, full_reports;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static _Atomic int admitted; /* every host's leader is in: the measure runs */
static uint64_t fp_allreduce, fp_odd_count;

/* Host H's ranks decide what each logs of V, under the lock
 * (desync_claim.h: the host's claim, proposed as a rank proposes it;
 * desync_report.c's formatting): the rank the claim names logs the line,
 * or the line and the block where it writes the full report (rank 0, the
 * coordinator's). */
static void log_host(const struct ccs_dsx_verdict *v, int h)
{
    static char buf[65536];
    char where[512], host[CCS_DSX_HOST], host0[CCS_DSX_HOST];
    snprintf(host, sizeof host, "sim%d", h);
    snprintf(host0, sizeof host0, "sim0");
    int first = h * per_host, last = (h + 1) * per_host < nranks ? (h + 1) * per_host : nranks;
    /* The host's ranks in turn, the last first: a proposal of each (the
     * lowest rank still running, rank 0 on its host), one claim wins. */
    for (int r = last - 1; r >= first; r--) {
        int won;
        int32_t owner =
            ccs_dsx_claim(&claims[h], ccs_dsx_claim_key(v), ccs_dsx_claim_propose(1, h == 0, first), &won, NULL);
        struct ccs_dsx_say say = {
            .line = owner == r, .full = r == 0, .full_rank = 0, .host = host, .full_host = h == 0 ? host : host0};
        if (!say.line && !say.full)
            continue;
        ccs_dsx_where(&say, "/scratch/trace", "sim", where, sizeof where);
        size_t n = ccs_dsx_format_where(v, r, where, t_verdict, buf, sizeof buf), line = 0, lines = 0;
        for (size_t i = 0; i < n; i++)
            if (buf[i] == '\n') {
                lines++;
                if (!line)
                    line = i + 1;
            }
        ranks_logging++;
        if (say.full) {
            full_reports++;
            log_lines += (double)lines, log_bytes += (double)n;
        } else {
            log_lines += 1, log_bytes += (double)line;
        }
    }
}

/* The first verdict reaches client U: a host, or a relay that hands it on
 * to each host of its group.  Each host's ranks read it (from shared
 * memory, in a job) and decide with the runtime's code what they log
 * (log_host).  Counted: lines, bytes, the ranks that logged (one per host)
 * and the full reports. */
static void on_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    int u = (int)(intptr_t)arg; /* the client: a host, or a relay for GROUP hosts */
    pthread_mutex_lock(&lock);
    /* DESYNC_SIM_SHOW: the line of each communicator's first verdict. */
    static uint64_t shown[4];
    int fresh = 1;
    for (int i = 0; i < 4; i++)
        fresh &= shown[i] != v->comm;
    if (fresh && getenv("DESYNC_SIM_SHOW")) {
        for (int i = 0; i < 4; i++)
            if (!shown[i]) {
                shown[i] = v->comm;
                break;
            }
        fprintf(stderr, "ccshim %s %s\n", ccs_dsx_class_name(v->cls), v->line);
    }
    if (t_verdict < 0) {
        t_verdict = mono_ms();
        verdict_cls = v->cls;
        first_key = ccs_dsx_claim_key(v);
    }
    /* a relay hands the verdict on to each host of its group (with links,
     * each host's leader receives it, from its relay or the root) */
    int per = group && !links ? group : 1;
    for (int h = u * per; ccs_dsx_claim_key(v) == first_key && h < (u + 1) * per && h < nhosts; h++)
        log_host(v, h);
    pthread_mutex_unlock(&lock);
}

static struct ccs_dsx_op op_at(uint64_t seq, uint64_t fp, uint64_t count)
{
    struct ccs_dsx_op o;
    memset(&o, 0, sizeof o);
    o.seq = seq;
    o.fp = fp;
    o.count = count;
    o.kind = CCS_KIND_ALLREDUCE;
    o.dtype = CCS_DT_FLOAT32;
    o.op = CCS_OP_SUM;
    o.root = -1;
    return o;
}

/* Advances rank R's world entry to TARGET completed collectives. */
static void advance(int r, uint64_t target, int odd_at)
{
    struct ccs_dsx_comm *c = &statuses[r]->comm[0];
    while (c->done < target) {
        uint64_t s = c->done + 1;
        int odd = odd_at > 0 && (uint64_t)odd_at == s;
        struct ccs_dsx_op o = op_at(s, odd ? fp_odd_count : fp_allreduce, odd ? 8 : 4);
        c->hash = ccs_hash_mix(c->hash, o.fp);
        c->done = c->issued = s;
        if (s % CCS_DSX_CHECKPOINT == 0) {
            c->cp_seq[1] = c->cp_seq[0], c->cp_hash[1] = c->cp_hash[0];
            c->cp_seq[0] = s, c->cp_hash[0] = c->hash;
        }
        /* The newest 16 to 32 kept: the older half goes at once, so that
         * the simulation does not spend its cores moving records. */
        if (c->nhist == CCS_DSX_HIST) {
            memmove(c->hist, c->hist + CCS_DSX_HIST / 2, (CCS_DSX_HIST / 2) * sizeof c->hist[0]);
            c->nhist = CCS_DSX_HIST / 2;
        }
        c->hist[c->nhist++] = o;
    }
}

/* ---- links: a host's leader the root appoints relays, as desync_host.c does */

static int relay_verdict_up(const struct ccs_dsx_verdict *v, void *arg)
{
    return ccs_dsx_client_send(clients[(intptr_t)arg], CCS_DSX_M_VERDICT, v, sizeof *v);
}

static void relay_agree_up(const void *p, size_t n, void *arg)
{
    (void)ccs_dsx_client_send(clients[(intptr_t)arg], CCS_DSX_M_AGREE, p, n);
}

/* What the relay sends its leaders, for its own host: the simulated ranks
 * do not answer probes; a verdict that could not go up is theirs. */
static void relay_local(uint16_t type, const void *p, size_t n, void *arg)
{
    if (type == CCS_DSX_M_VERDICT && n == sizeof(struct ccs_dsx_verdict))
        on_verdict(p, arg);
    else if (type == CCS_DSX_M_DETAIL)
        ccs_dsx_client_on_detail(clients[(intptr_t)arg], p, n);
}

static const struct ccs_dsx_relay_hooks relay_hooks = {
    .verdict = relay_verdict_up, .agree = relay_agree_up, .local = relay_local};

static int become_relay(uint32_t g, const unsigned char key[CCS_DSX_KEYBYTES], struct ccs_dsx_relay_at *at,
                        void *arg)
{
    int h = (int)(intptr_t)arg, port = 0;
    char why[256];
    static const unsigned char job[CCS_DSX_JOBTAG]; /* (the secret's jobs: tag zero) */
    if (relays[h]) {
        ccs_dsx_coord_rekey(relays[h], key);
    } else {
        relay_bufs[h] = calloc((size_t)nranks, sizeof *relay_bufs[h]);
        relays[h] = relay_bufs[h] ? ccs_dsx_coord_start_relay("127.0.0.1", 0, nranks, key, job, &thr, 5 * PERIOD,
                                                              &relay_hooks, arg, &port, why, sizeof why)
                                  : NULL;
        if (!relays[h] || ccs_dsx_client_relay(clients[h], g, 1, thr.block_ms / 2) != 0) {
            fprintf(stderr, "desync_sim: host %d cannot relay: %s\n", h, why);
            return -1;
        }
    }
    relay_group[h] = g;
    relay_port[h] = port ? port : relay_port[h]; /* (asked again: where it listens already) */
    memset(at, 0, sizeof *at);
    at->group = g;
    at->port = relay_port[h];
    return 0;
}

static void relay_down(uint16_t type, const void *p, size_t n, void *arg)
{
    int h = (int)(intptr_t)arg;
    if (relays[h])
        ccs_dsx_coord_forward(relays[h], type, p, n);
}

/* One thread's share of the hosts. */
struct worker {
    int first_host, hosts;
    _Atomic int connected; /* its hosts' leaders authenticated in its last pass */
    double full_ms;        /* its last pass over every host */
};

static uint64_t stop_seq = 0; /* deadlock: world seq everyone blocks at */
static int odd_seq = 0;       /* mismatch: the seq of rank 1's odd call */

static void *work(void *arg)
{
    struct worker *w = arg;
    char why[256];
    /* At the coordinator's priority, as the leaders' detection threads run
     * in a job: at nice 0 the simulated hosts took the coordinator's turns
     * (theirs are on other machines in a job). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    while (!stop) {
        double t = mono_ms() - t_start;
        uint64_t target = (uint64_t)(t * RATE / 1000.0) + 1;
        /* (While leaders come in, the others' statuses only as often as a
         * heartbeat needs: a pass over them all took longer under load
         * than a leader's handshake may.) */
        int connected = 0, admitting = !admitted,
            full = mono_ms() - w->full_ms >= (admitting ? ADMIT_FULL_MS : PERIOD);
        if (full)
            w->full_ms = mono_ms();
        for (int h = w->first_host; h < w->first_host + w->hosts; h++) {
            int lo = h * per_unit, hi = (h + 1) * per_unit < nranks ? (h + 1) * per_unit : nranks;
            /* Until every leader is in, those not yet in are ticked every
             * few ms, as leaders of their own would be (a pass of a thread
             * over 4,096 hosts takes longer than the coordinator waits for
             * a ticket). */
            if (admitting && !full && ccs_dsx_client_connected(clients[h])) {
                connected++;
                continue;
            }
            for (int r = lo; r < hi; r++) {
                struct ccs_dsx_comm *c = &statuses[r]->comm[0];
                uint64_t tg = target;
                if (stop_seq && tg >= stop_seq - 1)
                    tg = stop_seq - 1;
                advance(r, tg, r == 1 ? odd_seq : 0);
                if (stop_seq && c->done == stop_seq - 1) {
                    /* How long blocked, from the clock as the collector
                     * says it (a pass over many hosts can take longer than
                     * a period on a loaded machine). */
                    double now = mono_ms();
                    if (r == 1) { /* blocked on the pair comm instead */
                        struct ccs_dsx_comm *p = &statuses[r]->comm[1];
                        if (p->state != CCS_DSX_BLOCKED) {
                            p->state = CCS_DSX_BLOCKED;
                            p->issued = 1;
                            p->blocked = op_at(1, fp_allreduce, 4);
                            blocked_at[r] = now;
                        }
                        p->blocked_ms = (uint32_t)(now - blocked_at[r]);
                    } else {
                        if (c->state != CCS_DSX_BLOCKED) {
                            c->state = CCS_DSX_BLOCKED;
                            c->issued = stop_seq;
                            c->blocked = op_at(stop_seq, fp_allreduce, 4);
                            blocked_at[r] = now;
                        }
                        c->blocked_ms = (uint32_t)(now - blocked_at[r]);
                    }
                }
                statuses[r]->beat++;
            }
            if (links && relays[h]) { /* this leader relays: its group's statuses, its own among them */
                size_t n = ccs_dsx_coord_pump(relays[h], status_ptrs + lo, (size_t)(hi - lo), relay_bufs[h],
                                              (size_t)nranks);
                ccs_dsx_client_relay(clients[h], relay_group[h], 1 + ccs_dsx_coord_leaders(relays[h]),
                                     thr.block_ms / 2);
                ccs_dsx_client_tick(clients[h], relay_bufs[h], n, NULL, 0, 0, why, sizeof why);
            } else {
                ccs_dsx_client_tick(clients[h], status_ptrs + lo, (size_t)(hi - lo), NULL, 0, 0, why, sizeof why);
            }
            connected += ccs_dsx_client_connected(clients[h]);
        }
        w->connected = connected;
        sleep_ms(admitting ? 2 : PERIOD);
    }
    return NULL;
}

/* Every simulated rank's status: the world communicator, and {0, 1} for ranks 0 and 1. */
static void init_statuses(void)
{
    for (int r = 0; r < nranks; r++) {
        struct ccs_dsx_status *s = statuses[r] =
            calloc(1, r < 2 ? sizeof *s : offsetof(struct ccs_dsx_status, comm) + sizeof(struct ccs_dsx_comm));
        s->magic = CCS_DSX_MAGIC;
        s->version = CCS_DSX_VERSION;
        s->wrank = r;
        s->wsize = nranks;
        s->pid = 100000u + (uint32_t)r;
        snprintf(s->host, sizeof s->host, "sim%d", r / per_host);
        s->ncomm = r < 2 ? 2 : 1;
        s->comm[0].id = WORLD;
        s->comm[0].rank = r;
        s->comm[0].size = nranks;
        if (r < 2) {
            s->comm[1].id = PAIR;
            s->comm[1].rank = r;
            s->comm[1].size = 2;
        }
        status_ptrs[r] = s;
    }
}

/* The coordinator and one client per host.  Returns the coordinator, or NULL after the message. */
static struct ccs_dsx_coord *start_coordinator_and_clients(void)
{
    struct ccs_dsx_thresholds t = {.block_ms = 1000,
                                   .straggler_ms = 600000,
                                   .suspect_ms = 2000,
                                   .heartbeat_ms = 10000,
                                   .mismatch_wait_ms = 2 * PERIOD};
    thr = t;
    int port = 0;
    char why[256];
    struct ccs_dsx_coord *coord =
        ccs_dsx_coord_start("127.0.0.1", 0, nranks, "simsecret", &t, 5 * PERIOD, &port, why, sizeof why);
    if (!coord) {
        fprintf(stderr, "desync_sim: %s\n", why);
        return NULL;
    }
    if (links) /* the root appoints relays of GROUP hosts, as a job's does */
        ccs_dsx_coord_tree(coord, (uint32_t)(group * per_host));
    for (int h = 0; h < nunits; h++) {
        char name[32];
        struct ccs_dsx_client_cb cb = {.verdict = on_verdict, .arg = (void *)(intptr_t)h};
        if (links)
            cb.relay = become_relay, cb.down = relay_down;
        snprintf(name, sizeof name, "sim%d", h * (group ? group : 1));
        clients[h] = ccs_dsx_client_new("127.0.0.1", port, nranks, h * per_unit, "simsecret", name, &cb);
        /* A relay lists a rank not waiting with its group after half the
         * block threshold. */
        if (clients[h] && group && !links &&
            ccs_dsx_client_relay(clients[h], (uint32_t)h,
                                 (uint32_t)((h + 1) * group < nhosts ? group : nhosts - h * group),
                                 t.block_ms / 2) != 0)
            clients[h] = NULL;
        if (!clients[h]) {
            fprintf(stderr, "desync_sim: out of memory for client %d\n", h);
            return NULL;
        }
    }
    return coord;
}

/* Halfway: the scenario's event a few collectives ahead of NOW_MS. */
static void schedule_event(double now_ms)
{
    uint64_t cur = (uint64_t)((now_ms - t_start) * RATE / 1000.0) + 1;
    if (strcmp(scenario, "deadlock") == 0) {
        stop_seq = cur + 2;
        t_event = t_start + (double)(stop_seq - 1) * 1000.0 / RATE; /* the last rank blocks by then */
    } else if (strcmp(scenario, "mismatch") == 0) {
        odd_seq = (int)cur + 2;
        t_event = t_start + (double)(odd_seq - 1) * 1000.0 / RATE;
    }
}

/* Relays: the clients in relay mode, or with links the leaders appointed. */
static int nrelays(void)
{
    int n = 0;
    for (int h = 0; links && h < nhosts; h++)
        n += relays[h] != NULL;
    return links ? n : nunits;
}

/* The result line (see the header), the coordinator's costs measured
 * between S0 and S1 over SPAN seconds. */
static void print_result(const struct ccs_dsx_coord_stats *s0, const struct ccs_dsx_coord_stats *s1, double span,
                         double admit_ms)
{
    double lat = t_verdict >= 0 && t_event >= 0 ? t_verdict - t_event : -1;
    pthread_mutex_lock(&lock);
    printf("%d\t%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%llu\t%.2f\t%.0f\t%.1f\t%.0f\t%d\t%d\t%d\n", nranks, nhosts,
           scenario, t_verdict >= 0 ? ccs_dsx_class_name(verdict_cls) : "none", lat,
           (s1->cpu_s - s0->cpu_s) * 100 / span, s1->bytes_held / 1048576.0,
           (double)(s1->bytes_in - s0->bytes_in) / 1024 / span, (unsigned long long)s1->evals, s1->eval_ms_max,
           log_lines, log_bytes / 1024, admit_ms, group ? nrelays() : 0, ranks_logging, full_reports);
    pthread_mutex_unlock(&lock);
}

/* 1 when the verdict is the scenario's: none when healthy, else its class. */
static int verdict_expected(void)
{
    if (strcmp(scenario, "healthy") == 0)
        return t_verdict < 0;
    return t_verdict >= 0 && verdict_cls == (strcmp(scenario, "mismatch") == 0 ? CCS_DSX_MISMATCH : CCS_DSX_DESYNC);
}

int main(int argc, char **argv)
{
    nranks = argc > 1 ? atoi(argv[1]) : 64;
    per_host = argc > 2 ? atoi(argv[2]) : 8;
    secs = argc > 3 ? atof(argv[3]) : 4;
    scenario = argc > 4 ? argv[4] : "deadlock";
    group = argc > 5 ? atoi(argv[5]) : 0;
    links = argc > 6 && strcmp(argv[6], "links") == 0;
    if (nranks < 2 || per_host < 1 || group < 0 || (argc > 6 && (!links || !group))) {
        fprintf(stderr, "usage: desync_sim RANKS [PER_HOST [SECONDS [deadlock|mismatch|healthy [GROUP [links]]]]]\n");
        return 2;
    }
    nhosts = (nranks + per_host - 1) / per_host;
    nunits = group && !links ? (nhosts + group - 1) / group : nhosts;
    per_unit = group && !links ? group * per_host : per_host;
    /* One descriptor per leader and one per coordinator's end of its link:
     * said before anything starts, not found as a wave of refusals. */
    struct rlimit rl;
    /* (links: a leader's socket, its relay's end, the root's end while it
     * reports there first) */
    rlim_t need = (links ? 3 : 2) * (rlim_t)nunits + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
            fprintf(stderr,
                    "desync_sim: %d %s need %llu file descriptors (%s per %s); the limit is %llu (ulimit -n)\n",
                    nunits, group && !links ? "relays" : "hosts", (unsigned long long)need,
                    links ? "a leader's socket, its relay's end and the root's while it reports there first"
                          : "a client's socket and the coordinator's",
                    group && !links ? "relay" : "host", (unsigned long long)rl.rlim_cur);
            return 2;
        }
    }
    /* CCSHIM_LOG_LEVEL and CCSHIM_LOG as in a job: the coordinator's lines. */
    ccs_config_load(&ccs_cfg, (const char *(*)(const char *))getenv, NULL);
    ccs_log_open();
    fp_allreduce = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 4, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
    fp_odd_count = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 8, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
    statuses = calloc((size_t)nranks, sizeof *statuses);
    status_ptrs = calloc((size_t)nranks, sizeof *status_ptrs);
    blocked_at = calloc((size_t)nranks, sizeof *blocked_at);
    clients = calloc((size_t)nunits, sizeof *clients);
    relays = calloc((size_t)nunits, sizeof *relays);
    relay_bufs = calloc((size_t)nunits, sizeof *relay_bufs);
    relay_group = calloc((size_t)nunits, sizeof *relay_group);
    relay_port = calloc((size_t)nunits, sizeof *relay_port);
    claims = calloc((size_t)nhosts, sizeof *claims);
    init_statuses();
    struct ccs_dsx_coord *coord = start_coordinator_and_clients();
    if (!coord)
        return 1;
    int nthreads = nunits < 4 ? nunits : 4;
    pthread_t th[4];
    struct worker w[4];
    t_start = mono_ms();
    for (int i = 0; i < nthreads; i++) {
        w[i].first_host = i * nunits / nthreads;
        w[i].hosts = (i + 1) * nunits / nthreads - w[i].first_host;
        w[i].connected = 0;
        w[i].full_ms = 0;
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    /* Every host's leader admitted before the clock of the measure starts:
     * 16,384 simulated leaders ticked by 4 threads are slower to show
     * their tickets than leaders of their own would be. */
    double t_admit = mono_ms();
    for (int all = 0; !all && mono_ms() - t_admit < 120000; sleep_ms(50)) {
        int n = 0;
        for (int i = 0; i < nthreads; i++)
            n += w[i].connected;
        all = n == nunits;
    }
    t_admit = mono_ms() - t_admit;
    admitted = 1;
    struct ccs_dsx_coord_stats s0, s1;
    struct timespec half = {(time_t)(secs / 2), (long)((secs / 2 - (time_t)(secs / 2)) * 1e9)};
    nanosleep(&half, NULL);
    ccs_dsx_coord_stats(coord, &s0);
    double ta = mono_ms();
    schedule_event(ta);
    nanosleep(&half, NULL);
    ccs_dsx_coord_stats(coord, &s1);
    double tb = mono_ms();
    stop = 1;
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    print_result(&s0, &s1, (tb - ta) / 1000.0, t_admit);
    for (int h = 0; h < nunits; h++) {
        ccs_dsx_client_free(clients[h]);
        if (relays[h])
            ccs_dsx_coord_stop(relays[h]);
        free(relay_bufs[h]);
    }
    ccs_dsx_coord_stop(coord);
    for (int r = 0; r < nranks; r++)
        free(statuses[r]);
    free(statuses), free(status_ptrs), free(clients), free(blocked_at), free(claims), free(relays), free(relay_bufs),
        free(relay_group), free(relay_port);
    return verdict_expected() ? 0 : 1;
}
