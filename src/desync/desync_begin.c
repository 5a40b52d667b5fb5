/*
 * desync_begin.c - the hand-over from start-up (desync_start.h): the plan
 * desync_start.c made (the host's identity and shared memory, the
 * coordinator's address, the credentials) run by ccs_dsx_begin, which
 * opens the host's segment, connects the host's leader and starts the
 * threads; and the coordinator in rank 0, started for start-up and tried
 * again while it cannot listen.
 */
#include "ccs_config.h"
#include "desync.h"
#include "desync_collect.h"
#include "desync_start.h"
#include "desync_state.h"
#include "log.h"
#include "agree.h"
#include "clock.h"
#include "process.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ccs_dsx_say_off(const char *why)
{
    ccs_log_once(&ccs_ds.off_logged, CCS_LOG_WARN, "desync detection is off: %s; the job runs on without it", why);
}

int ccs_dsx_start_coordinator(const char *bind_host, int port, int32_t wsize, const struct ccs_dsx_cred *cc,
                              char *why, size_t n)
{
    struct ccs_dsx_thresholds t = ccs_dsx_thresholds_now();
    int got = 0;
    /* The coordinator evaluates less often than ranks publish: it sees the
     * whole job, and its targets (1 s, 2 s) leave room. */
    long cp = 5 * ccs_cfg.desync_period_ms;
    ccs_ds.coord =
        ccs_dsx_coord_start_cred(bind_host, port, wsize, cc, &t, (int)(cp < 100 ? 100 : cp), &got, why, n);
    if (ccs_ds.coord)
        ccs_dsx_coord_tree(ccs_ds.coord, ccs_dsx_tree_ranks(wsize, ccs_ds.per_host_hint));
    return ccs_ds.coord ? got : -1;
}

uint32_t ccs_dsx_tree_ranks(int32_t wsize, int per_host)
{
    if (ccs_cfg.desync_tree == CCS_DESYNC_TREE_OFF ||
        (ccs_cfg.desync_tree == CCS_DESYNC_TREE_AUTO && wsize <= CCS_DSX_TREE_FROM - 1))
        return 0;
    if (ccs_cfg.desync_relay_ranks > 0)
        return (uint32_t)ccs_cfg.desync_relay_ranks;
    /* G = ceil(sqrt(hosts)) hosts a group: the root's and a relay's fan-in
     * alike; in ranks, sqrt(ranks x ranks a host). */
    double per = per_host > 0 ? per_host : 8;
    uint32_t r = (uint32_t)ceil(sqrt((double)wsize * per));
    return r ? r : 1;
}

/* How often a coordinator that could not listen tries again, and how
 * often it says it still cannot. */
#define COORD_RETRY_MS 2000
#define COORD_RETRY_SAY_MS 30000

/* The coordinator's address as a log line shows it. */
static const char *port_text(int port, char *buf, size_t n)
{
    if (port == CCS_DSX_PORT_KEYED)
        snprintf(buf, n, "a port keyed by the secret");
    else
        snprintf(buf, n, "port %d", port);
    return buf;
}

void ccs_dsx_retry_coordinator(const char *bind_host, int port, int32_t wsize, const struct ccs_dsx_cred *cc,
                               const char *why)
{
    char pt[64];
    snprintf(ccs_ds.cretry.host, sizeof ccs_ds.cretry.host, "%s", bind_host ? bind_host : "");
    ccs_ds.cretry.port = port;
    ccs_ds.cretry.wsize = wsize;
    ccs_ds.cretry.cred = cc;
    ccs_ds.cretry.since_ms = ccs_ds.cretry.said_ms = ccs_clock_mono_ms();
    ccs_ds.cretry.next_ms = ccs_ds.cretry.since_ms + COORD_RETRY_MS;
    ccs_ds.cretry.tries = 1;
    ccs_ds.cretry.on = 1;
    CCS_LOG(WARN,
            "desync: cannot start the coordinator on %s (%s): %s; trying again every %d s (detection across hosts "
            "waits for it; within each host it is on)",
            ccs_ds.cretry.host, port_text(port, pt, sizeof pt), why, COORD_RETRY_MS / 1000);
}

/* From the detection thread: the coordinator that could not listen, tried
 * again when due; said when it listens, and every COORD_RETRY_SAY_MS while
 * it cannot. */
void ccs_dsx_coord_retry(uint64_t now)
{
    if (!ccs_ds.cretry.on || now < ccs_ds.cretry.next_ms)
        return;
    if (atomic_load(&ccs_ds.life) != CCS_DSX_ALIVE) {
        ccs_ds.cretry.on = 0;
        return;
    }
    char why[256], pt[64];
    ccs_ds.cretry.tries++;
    ccs_ds.cretry.next_ms = now + COORD_RETRY_MS;
    int got = ccs_dsx_start_coordinator(ccs_ds.cretry.host, ccs_ds.cretry.port, ccs_ds.cretry.wsize,
                                        ccs_ds.cretry.cred, why, sizeof why);
    double secs = (double)(ccs_clock_mono_ms() - ccs_ds.cretry.since_ms) / 1e3;
    if (got > 0) {
        ccs_ds.cretry.on = 0;
        CCS_LOG(WARN,
                "desync: the coordinator listens on %s:%d after %.1f s (%u attempts); detection across hosts is on",
                ccs_ds.cretry.host, got, secs, ccs_ds.cretry.tries);
    } else if (now - ccs_ds.cretry.said_ms >= COORD_RETRY_SAY_MS) {
        ccs_ds.cretry.said_ms = now;
        CCS_LOG(WARN, "desync: still cannot start the coordinator on %s (%s) after %.0f s: %s; trying again",
                ccs_ds.cretry.host, port_text(ccs_ds.cretry.port, pt, sizeof pt), secs, why);
    }
}

/* The host's shared segment under KEY (the plan's, KEY_CAP bytes) into
 * CCS_DS.shm; NULL there, and WHY (N bytes) saying why, when it cannot be
 * had.  Another user holding the segment's name (it carries the job's
 * random tag or secret, so it had to be learnt) leaves this rank alone, as
 * a host of its own, in a private segment of a random name, talking to the
 * coordinator over TCP (CAN_TCP: it has one to talk to). */
static void open_host_segment(char *key, size_t key_cap, int local_size, int can_tcp, char *why, size_t n)
{
    ccs_ds.shm = ccs_dsx_shm_open(key, ccs_ds.world_size, ccs_ds.world_rank, local_size, why, n);
    if (ccs_ds.shm || !ccs_dsx_shm_taken(key, ccs_ds.world_size))
        return;
    if (!can_tcp) {
        size_t o = strlen(why);
        snprintf(why + o, n - o,
                 " (another user holds the name; without a coordinator to fall back to, detection on this host "
                 "is off)");
        return;
    }
    unsigned char rnd[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(rnd);
    size_t o = strlen(key);
    o += (size_t)snprintf(key + o, key_cap - o, "|alone%d|", ccs_ds.world_rank);
    for (int i = 0; i < 16 && o + 3 < key_cap; i++)
        o += (size_t)snprintf(key + o, key_cap - o, "%02x", rnd[i]);
    char alone[CCS_DSX_HOST];
    snprintf(alone, sizeof alone, "%.48s/r%d", ccs_ds.hostkey, ccs_ds.world_rank);
    CCS_LOG(WARN,
            "desync: %s; rank %d talks to the coordinator over TCP instead, as host '%s' (detection stays on)", why,
            ccs_ds.world_rank, alone);
    memcpy(ccs_ds.hostkey, alone, sizeof ccs_ds.hostkey);
    ccs_ds.local_size = 1; /* a host of its own */
    ccs_ds.shm = ccs_dsx_shm_open(key, ccs_ds.world_size, ccs_ds.world_rank, 1, why, n);
}

/* The per-rank views of the period (desync_state.h); 0, or -1 when out of
 * memory. */
static int alloc_views(void)
{
    size_t w = (size_t)ccs_ds.world_size;
    ccs_ds.peer_status = calloc(w, sizeof *ccs_ds.peer_status);
    ccs_ds.view = calloc(w, sizeof *ccs_ds.view);
    ccs_ds.local = calloc(w, sizeof *ccs_ds.local);
    ccs_ds.presumed_dead = calloc(w, 1);
    ccs_ds.search_gone = calloc(w, 1);
    memset(ccs_ds.srch, 0, sizeof ccs_ds.srch);
    ccs_ds.peer_beat = calloc(w, sizeof *ccs_ds.peer_beat);
    ccs_ds.peer_gen = calloc(w, sizeof *ccs_ds.peer_gen);
    ccs_ds.peer_beat_ms = calloc(w, sizeof *ccs_ds.peer_beat_ms);
    ccs_ds.seen = ccs_dsx_seen_new();
    ccs_ds.reported = ccs_dsx_seen_new();
    int ok = ccs_ds.peer_status && ccs_ds.view && ccs_ds.local && ccs_ds.presumed_dead && ccs_ds.search_gone &&
             ccs_ds.peer_beat && ccs_ds.peer_gen && ccs_ds.peer_beat_ms && ccs_ds.seen && ccs_ds.reported;
    return ok ? 0 : -1;
}

/* The coordinator's address kept (a rank may come to lead the host), and
 * the link to it when this rank leads the host. */
static void connect_host(const char *coord_host, int coord_port)
{
    ccs_ds.tcp_mode = coord_host && *coord_host && coord_port > 0;
    if (!ccs_ds.tcp_mode)
        return;
    snprintf(ccs_ds.coord_host_s, sizeof ccs_ds.coord_host_s, "%s", coord_host);
    ccs_ds.coord_port_s = coord_port;
    if (!ccs_dsx_shm_is_leader(ccs_ds.shm))
        return;
    ccs_ds.client = ccs_dsx_host_client(coord_host, coord_port);
    if (!ccs_ds.client)
        ccs_dsx_say_off("cannot create the TCP client (out of memory)");
}

/* Detection is on: said at info level by a host's leader, at debug level
 * by the others. */
static void say_on(const char *coord_host, int coord_port)
{
    char at[300];
    if (coord_port == CCS_DSX_PORT_KEYED)
        snprintf(at, sizeof at, "%s (a port keyed by the secret)", coord_host);
    else if (coord_host)
        snprintf(at, sizeof at, "%s:%d", coord_host, coord_port);
    if (ccs_ds.client)
        CCS_LOG(INFO,
                "desync detection on: rank %d of %d, host '%s', host leader, coordinator at %s, period %ld ms",
                ccs_ds.world_rank, ccs_ds.world_size, ccs_ds.hostkey, at, ccs_cfg.desync_period_ms);
    else
        CCS_LOG(DEBUG, "desync detection on: rank %d of %d, host '%s', shared memory%s, period %ld ms",
                ccs_ds.world_rank, ccs_ds.world_size, ccs_ds.hostkey,
                ccs_ds.tcp_mode ? " (the host leader talks to the coordinator)" : "", ccs_cfg.desync_period_ms);
}

/* Detection off in this process (WHY said once); returns -1. */
static int turn_off(const char *why)
{
    ccs_dsx_say_off(why);
    atomic_store(&ccs_ds.state, CCS_DSX_DET_OFF);
    return -1;
}

int ccs_dsx_begin(const struct ccs_dsx_plan *plan)
{
    char why[512];
    ccs_ds.local_size = plan->local_size;
    ccs_ds.local_checked = 0;
    memcpy(ccs_ds.hostkey, plan->hostkey, sizeof ccs_ds.hostkey);
    ccs_ds.cred = plan->cred;
    ccs_ds.spans_hosts = plan->spans_hosts;
    char key[sizeof plan->shm_key];
    memcpy(key, plan->shm_key, sizeof key);
    int can_tcp = plan->coord_host && *plan->coord_host && plan->coord_port > 0 &&
                  (ccs_ds.cred->secret || ccs_ds.cred->peers);
    open_host_segment(key, sizeof key, plan->local_size, can_tcp, why, sizeof why);
    if (!ccs_ds.shm)
        return turn_off(why);
    if (alloc_views() != 0)
        return turn_off("out of memory");
    connect_host(plan->coord_host, plan->coord_port);
    ccs_dsx_collect_want(ccs_dsx_wanted_seq, NULL);
    ccs_dsx_exit_hooks();
    atomic_store(&ccs_ds.state, CCS_DSX_DET_RUNNING);
    ccs_agree_register(ccs_desync_agree_u64); /* for coalescing's auto (agree.h) */
    ccs_ds.started_ms = ccs_clock_mono_ms();
    ccs_dsx_reporter_start();
    if (ccs_dsx_period_start() != 0)
        return turn_off("cannot start the background thread");
    say_on(plan->coord_host, plan->coord_port);
    return 0;
}

/* State CCS_DSX_DET_STARTING on success. */
int ccs_dsx_claim_start(void)
{
    if (!ccs_cfg.desync || !atomic_load(&ccs_active))
        return -1;
    if (ccs_world_rank() < 0 || ccs_world_size() <= 1)
        return -1; /* not yet known (or nothing to compare): maybe later */
    int expect = CCS_DSX_DET_IDLE;
    if (!atomic_compare_exchange_strong(&ccs_ds.state, &expect, CCS_DSX_DET_STARTING))
        return expect == CCS_DSX_DET_RUNNING ? 0 : -1;
    ccs_ds.world_size = ccs_world_size();
    ccs_ds.world_rank = ccs_world_rank();
    return 1;
}
