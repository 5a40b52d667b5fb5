/*
 * desync_host.c - what this rank does for its host beside its own status:
 * the host's own search when no coordinator sees the job (one rank runs it
 * for all), and the coordinator's messages (verdicts, agreements, requests
 * for records, BYE) posted into the host's shared memory, where every rank
 * here reads them.
 */
#include "ccs_config.h"
#include "clock.h"
#include "desync_collect.h"
#include "desync_state.h"
#include "log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------ the coordinator's messages */

static void post_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_verdict(ccs_ds.shm, v);
}

/* The coordinator asks for the records of (COMM, SEQ): every rank of this
 * host publishes what it kept around SEQ. */
static void post_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ccs_ds.shm, comm, seq, ccs_clock_mono_ms());
}

static void post_bye(void *arg)
{
    (void)arg;
    ccs_dsx_shm_set_bye(ccs_ds.shm);
}

static void post_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_agreed(ccs_ds.shm, a);
}

uint64_t ccs_dsx_wanted_seq(uint64_t comm, int probe, void *arg)
{
    (void)arg;
    return ccs_ds.shm ? ccs_dsx_shm_wanted(ccs_ds.shm, comm, probe, ccs_clock_mono_ms()) : 0;
}

/* ------------------------------------------------ the tree: this leader relays
 *
 * The root appointed this host's leader the relay of its group (docs/
 * desync.md, "The tree"): a relay's coordinator (desync_tree_relay.c) runs
 * in this thread, pumped each period by forward_tcp, and what it hands up
 * goes to the root through this leader's own link. */

static int relay_verdict_up(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    return ccs_ds.client ? ccs_dsx_client_send(ccs_ds.client, CCS_DSX_M_VERDICT, v, sizeof *v) : -1;
}

static void relay_agree_up(const void *p, size_t n, void *arg)
{
    (void)arg;
    if (ccs_ds.client)
        (void)ccs_dsx_client_send(ccs_ds.client, CCS_DSX_M_AGREE, p, n); /* (lost with the link: fail open) */
}

/* What the relay sends its leaders, for this host's ranks too: a probe or
 * a request for records as if the root had sent it, a verdict that could
 * not go up. */
static void relay_local(uint16_t type, const void *p, size_t n, void *arg)
{
    (void)arg;
    if (type == CCS_DSX_M_VERDICT && n == sizeof(struct ccs_dsx_verdict)) {
        post_verdict(p, NULL);
    } else if (type == CCS_DSX_M_DETAIL && ccs_ds.client) {
        ccs_dsx_client_on_detail(ccs_ds.client, p, n); /* (its want callback: post_want) */
    }
}

static const struct ccs_dsx_relay_hooks relay_hooks = {
    .verdict = relay_verdict_up, .agree = relay_agree_up, .local = relay_local};

/* "[host:]port" (CCSHIM_DESYNC_RELAY_LISTEN, _ADDR) into HOST and *PORT:
 * 0, or -1 (said once). */
static int host_port(const char *name, const char *v, char *host, size_t n, int *port)
{
    const char *colon = strrchr(v, ':');
    char *end;
    long p = strtol(colon ? colon + 1 : v, &end, 10);
    if (*end || p < 1 || p > 65535 || (colon && (size_t)(colon - v) >= n)) {
        CCS_LOG(WARN, "desync tree: %s='%s' is not [host:]port with a port in 1..65535; ignored", name, v);
        return -1;
    }
    if (colon)
        snprintf(host, n, "%.*s", (int)(colon - v), v);
    *port = (int)p;
    return 0;
}

static int become_relay(uint32_t group, const unsigned char key[CCS_DSX_KEYBYTES], struct ccs_dsx_relay_at *at,
                        void *arg)
{
    (void)arg;
    if (ccs_ds.relay) { /* asked again (our link to the root was lost meanwhile): the new key for new leaders */
        ccs_dsx_coord_rekey(ccs_ds.relay, key);
        *at = ccs_ds.relay_at;
        at->group = group;
        return 0;
    }
    char host[64] = "", why[256] = "";
    int port = 0;
    const char *lv = ccs_cfg.desync_relay_listen;
    if (!(lv && *lv && host_port("CCSHIM_DESYNC_RELAY_LISTEN", lv, host, sizeof host, &port) == 0))
        port = 0;
    /* By default where this host reaches the root from: its leaders reach
     * that address too. */
    if (!host[0] && ccs_dsx_client_local_addr(ccs_ds.client, host, sizeof host) != 0)
        host[0] = 0;
    struct ccs_dsx_thresholds t = ccs_dsx_thresholds_now();
    long cp = 5 * ccs_cfg.desync_period_ms;
    int got = 0;
    if (!ccs_ds.relay_buf)
        ccs_ds.relay_buf = calloc((size_t)ccs_ds.world_size, sizeof *ccs_ds.relay_buf);
    if (ccs_ds.relay_buf)
        ccs_ds.relay = ccs_dsx_coord_start_relay(host, port, ccs_ds.world_size, key, ccs_ds.cred->job, &t,
                                                 (int)(cp < 100 ? 100 : cp), &relay_hooks, NULL, &got, why,
                                                 sizeof why);
    if (!ccs_ds.relay || ccs_dsx_client_relay(ccs_ds.client, group, 1, t.block_ms / 2) != 0) {
        CCS_LOG(WARN, "desync tree: rank %d cannot relay group %u: %s; host '%s' reports to the coordinator as before",
                ccs_ds.world_rank, group, why[0] ? why : "out of memory", ccs_ds.hostkey);
        if (ccs_ds.relay)
            ccs_dsx_coord_stop(ccs_ds.relay);
        ccs_ds.relay = NULL;
        return -1;
    }
    memset(at, 0, sizeof *at);
    at->group = group;
    at->port = got;
    const char *av = ccs_cfg.desync_relay_addr;
    if (av && *av) {
        char ah[64] = "";
        int ap = 0;
        if (host_port("CCSHIM_DESYNC_RELAY_ADDR", av, ah, sizeof ah, &ap) == 0 && ah[0]) {
            snprintf(at->host, sizeof at->host, "%s", ah);
            at->port = ap;
        }
    }
    ccs_ds.relay_group = group;
    ccs_ds.relay_at = *at;
    CCS_LOG(INFO,
            "desync tree: rank %d (host '%s', pid %ld) relays group %u: its hosts' leaders report here, on %s:%d%s%s",
            ccs_ds.world_rank, ccs_ds.hostkey, (long)getpid(), group, host[0] ? host : "*", got,
            at->host[0] ? ", announced as " : "", at->host);
    return 0;
}

static void relay_down(uint16_t type, const void *p, size_t n, void *arg)
{
    (void)arg;
    if (ccs_ds.relay)
        ccs_dsx_coord_forward(ccs_ds.relay, type, p, n);
}

size_t ccs_dsx_relay_pump(size_t nlocal)
{
    size_t n = ccs_dsx_coord_pump(ccs_ds.relay, ccs_ds.local, nlocal, ccs_ds.relay_buf, (size_t)ccs_ds.world_size);
    struct ccs_dsx_thresholds t = ccs_dsx_thresholds_now();
    (void)ccs_dsx_client_relay(ccs_ds.client, ccs_ds.relay_group, 1 + ccs_dsx_coord_leaders(ccs_ds.relay),
                               t.block_ms / 2);
    return n;
}

struct ccs_dsx_client *ccs_dsx_host_client(const char *host, int port)
{
    struct ccs_dsx_client_cb cb = {.verdict = post_verdict,
                                   .agreed = post_agreed,
                                   .want = post_want,
                                   .bye = post_bye,
                                   .relay = become_relay,
                                   .down = relay_down};
    return ccs_dsx_client_new_cred(host, port, ccs_ds.world_size, ccs_ds.world_rank, ccs_ds.cred, ccs_ds.hostkey,
                                   &cb);
}

/* ------------------------------------------------ the host's own search
 *
 * Without a coordinator (every rank of the job on this host) the search for
 * the seq where a communicator's members differ (desync_search.c) runs
 * here, in one rank: the lowest whose process is still there (also while
 * it lingers at its exit).  Its probes and requests for records go into
 * shared memory, where every rank here reads them, and every rank's rules
 * then compare the records it asked for.  Before, a silent MISMATCH (a
 * count the collective lets complete) was named only where one rank's view
 * happened to hold every member's record of the odd seq, or 2 s later from
 * the hashes alone, without the operations, or not at all in a shorter job
 * (the test NCCL's 1000-step job: 4 runs in 10). */
static void local_probe(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ccs_ds.shm, comm, seq | CCS_DSX_PROBE_BIT, ccs_clock_mono_ms());
}

/* The search runs in the lowest rank here whose process is still there. */
void ccs_dsx_host_search(uint64_t now)
{
    int32_t owner = -1;
    for (int32_t r = 0; r < ccs_ds.world_size; r++) {
        const struct ccs_dsx_status *o = ccs_ds.view[r];
        ccs_ds.search_gone[r] = !o || (r != ccs_ds.world_rank && ccs_dsx_peer_gone(r, now));
        if (owner < 0 && o && !ccs_ds.search_gone[r])
            owner = r;
    }
    if (owner != ccs_ds.world_rank) {
        memset(ccs_ds.srch, 0, sizeof ccs_ds.srch); /* (a search this rank ran is the new owner's to start again) */
        return;
    }
    struct ccs_dsx_search_out out = {.probe = local_probe, .want = post_want};
    ccs_dsx_search_pass(ccs_ds.srch, ccs_ds.world_size, ccs_ds.view, ccs_ds.search_gone, ccs_ds.seen, now, &out);
    ccs_dsx_shm_set_search(ccs_ds.shm, now, ccs_dsx_search_settled(ccs_ds.srch, now));
}
