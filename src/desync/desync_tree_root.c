/*
 * desync_tree_root.c - the root's side of the tree in a job (docs/desync.md,
 * "The tree"): hosts grouped by their lowest rank, one relay appointed per
 * group among the leaders that report to the root, the group's other
 * leaders sent to it, a relay lost replaced by the next leader of its group
 * that comes back.  No election and no layout to exchange: every leader
 * first reports to the root (its address is the one the job already knows),
 * and the root, which sees every leader, decides.
 *
 * What keeps a verdict from coming of the tree itself: a leader sent to its
 * relay leaves quietly (its ranks are the relay's now, not unreachable);
 * a rank whose status here is not current (AWAY) is out of every rule's
 * view until a frame carries it again; a group whose relay is lost is not
 * accounted for by any fold, so nothing is judged from folds about its
 * communicators until its leaders report again, to the root or to a new
 * relay.
 */
#include "desync_coord.h"
#include "log.h"
#include "clock.h"
#include <sodium.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A leader told to relay that has not said where it listens within this
 * long is passed over (never appointed again). */
#define APPOINT_MS 5000

void ccs_dsx_coord_tree(struct ccs_dsx_coord *k, uint32_t relay_ranks)
{
    atomic_store(&k->relay_ranks, relay_ranks);
}

/* The groups for RELAY_RANKS ranks a group (at most CCS_DSX_AGG_MAX_RELAYS
 * of them: the folds the root keeps).  0, or -1 out of memory. */
static int make_groups(struct ccs_dsx_coord *k, uint32_t relay_ranks)
{
    uint32_t rr = relay_ranks;
    while (((uint64_t)k->wsize + rr - 1) / rr > CCS_DSX_AGG_MAX_RELAYS)
        rr++;
    size_t ng = ((size_t)k->wsize + rr - 1) / rr;
    struct ccs_dsx_tree_group *g = calloc(ng, sizeof *g);
    if (!g)
        return -1;
    for (size_t j = 0; j < ng; j++)
        g[j].relay = g[j].appointed = -1;
    free(k->groups);
    k->groups = g;
    k->ngroups = ng;
    k->tree_ranks = rr;
    if (rr != relay_ranks)
        CCS_LOG(INFO, "desync tree: %u ranks a group, not %u: at most %d relays", rr, relay_ranks,
                CCS_DSX_AGG_MAX_RELAYS);
    return 0;
}

static int authed(const struct ccs_dsx_conn *c)
{
    return c->fd >= 0 && c->state == CCS_DSX_C_AUTHED;
}

/* The lowest rank each connection reports (its host's, for a leader). */
static void lowest_ranks(struct ccs_dsx_coord *k)
{
    for (size_t i = 0; i < k->ncl; i++)
        k->cl[i].lowest = INT32_MAX;
    for (int32_t r = 0; r < k->wsize; r++) {
        int o = k->owner[r];
        if (o >= 0 && (size_t)o < k->ncl && r < k->cl[o].lowest)
            k->cl[o].lowest = r;
    }
}

/* Tells leader I to report through group G's relay. */
static void send_go(struct ccs_dsx_coord *k, size_t i, struct ccs_dsx_tree_group *g, uint32_t gi)
{
    struct ccs_dsx_go go = {.group = gi, .port = g->port, .relay_rank = g->rank};
    snprintf(go.host, sizeof go.host, "%s", g->host);
    memcpy(go.key, g->key.k, sizeof go.key);
    struct ccs_dsx_conn *c = &k->cl[i];
    int rc = ccs_dsx_conn_queue(c, CCS_DSX_M_GO, &go, sizeof go);
    ccs_dsx_auth_wipe((struct ccs_dsx_key *)go.key);
    if (rc != 0) {
        c->state = CCS_DSX_C_DROP;
        return;
    }
    c->tree = CCS_DSX_T_MOVED;
    c->sent_gen = g->gen;
    /* Its ranks are the relay's from now on: out of the root's view until
     * the relay lists them (not unreachable when the link closes). */
    for (int32_t r = 0; r < k->wsize; r++)
        if (k->owner[r] == (int)i)
            ccs_dsx_coord_away(k, r);
}

/* Tells leader I to relay group GI, with a fresh key. */
static void appoint(struct ccs_dsx_coord *k, size_t i, struct ccs_dsx_tree_group *g, uint32_t gi, uint64_t now)
{
    struct ccs_dsx_relay rl = {.group = gi};
    ccs_dsx_auth_nonce(rl.key); /* 256 random bits (CCS_DSX_NONCE == CCS_DSX_KEYBYTES) */
    memcpy(g->key.k, rl.key, sizeof g->key.k);
    struct ccs_dsx_conn *c = &k->cl[i];
    int rc = ccs_dsx_conn_queue(c, CCS_DSX_M_RELAY, &rl, sizeof rl);
    ccs_dsx_auth_wipe((struct ccs_dsx_key *)rl.key);
    if (rc != 0) {
        c->state = CCS_DSX_C_DROP;
        return;
    }
    c->tree = CCS_DSX_T_APPOINTED;
    c->group = gi;
    g->appointed = (int)i;
    g->appointed_ms = now;
}

void ccs_dsx_tree_pass(struct ccs_dsx_coord *k, uint64_t now)
{
    uint32_t rr = atomic_load(&k->relay_ranks);
    if (!rr)
        return;
    if (rr != k->tree_ranks && make_groups(k, rr) != 0)
        return;
    lowest_ranks(k);
    for (size_t j = 0; j < k->ngroups; j++) {
        struct ccs_dsx_tree_group *g = &k->groups[j];
        if (g->appointed >= 0 && now - g->appointed_ms > APPOINT_MS) {
            struct ccs_dsx_conn *c = &k->cl[g->appointed];
            if (c->tree == CCS_DSX_T_APPOINTED)
                c->tree = CCS_DSX_T_NORELAY;
            g->appointed = -1;
        }
    }
    /* Each leader reporting here, by its host's lowest rank, goes to its
     * group's relay (once per registration: one that came back from it, its
     * link to the relay lost, stays here), or the lowest becomes the relay
     * where the group has none.  Group 0 too: the root then receives folds
     * only, not the statuses of a group of hosts beside them. */
    int *cand = calloc(k->ngroups, sizeof *cand);
    if (!cand)
        return;
    for (size_t j = 0; j < k->ngroups; j++)
        cand[j] = -1;
    for (size_t i = 0; i < k->ncl; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        if (!authed(c) || c->lowest == INT32_MAX || (c->tree != CCS_DSX_T_LEADER && c->tree != CCS_DSX_T_NORELAY) ||
            (i < k->capfold && k->cfold[i]))
            continue;
        uint32_t gi = (uint32_t)c->lowest / k->tree_ranks;
        c->group = gi;
        if (gi >= k->ngroups)
            continue;
        struct ccs_dsx_tree_group *g = &k->groups[gi];
        if (g->relay >= 0) {
            if (c->sent_gen != g->gen)
                send_go(k, i, g, gi);
        } else if (g->appointed < 0 && c->tree == CCS_DSX_T_LEADER &&
                   (cand[gi] < 0 || c->lowest < k->cl[cand[gi]].lowest)) {
            cand[gi] = (int)i;
        }
    }
    for (size_t j = 0; j < k->ngroups; j++)
        if (cand[j] >= 0)
            appoint(k, (size_t)cand[j], &k->groups[j], (uint32_t)j, now);
    free(cand);
}

int ccs_dsx_tree_on_relay_at(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why,
                             size_t n)
{
    struct ccs_dsx_relay_at at;
    if (len != sizeof at) {
        snprintf(why, n, "RELAY_AT of %u bytes, expected %zu", len, sizeof at);
        return -1;
    }
    memcpy(&at, p, sizeof at);
    if (ccs_dsx_check_relay_at(&at, why, n) != 0)
        return -1;
    struct ccs_dsx_conn *c = &k->cl[i];
    if (!k->tree_ranks || at.group >= k->ngroups) {
        snprintf(why, n, "RELAY_AT for group %u, of %zu", at.group, k->ngroups);
        return -1;
    }
    struct ccs_dsx_tree_group *g = &k->groups[at.group];
    int told = c->tree == CCS_DSX_T_APPOINTED && c->group == at.group && g->appointed == (int)i;
    if (told)
        g->appointed = -1;
    if (!at.port) { /* it cannot listen: a leader like the others, never asked again */
        c->tree = CCS_DSX_T_NORELAY;
        ccs_dsx_auth_wipe((struct ccs_dsx_key *)at.key);
        return 0;
    }
    /* Unasked: a relay that reconnects says it again, with the key the
     * root gave it (only it and the leaders sent to it hold that key).  It
     * becomes the group's relay again where there is none; where another
     * was appointed meanwhile it relays the leaders it has, new ones go to
     * the other.  Any other member claiming a group is a leader as before:
     * no leader is ever sent to an address the root did not appoint. */
    if (!told) {
        int holds = g->gen && sodium_memcmp(at.key, g->key.k, sizeof g->key.k) == 0;
        ccs_dsx_auth_wipe((struct ccs_dsx_key *)at.key);
        if (!holds || g->relay >= 0 || g->appointed >= 0) {
            if (holds) {
                c->tree = CCS_DSX_T_RELAY;
                c->group = at.group;
            }
            return 0;
        }
    }
    c->tree = CCS_DSX_T_RELAY;
    c->group = at.group;
    g->relay = (int)i;
    g->gen++;
    g->rank = c->peer_rank;
    g->port = at.port;
    if (told) /* (the key it was given: appoint() kept it) */
        ccs_dsx_auth_wipe((struct ccs_dsx_key *)at.key);
    if (at.host[0]) {
        snprintf(g->host, sizeof g->host, "%s", at.host);
    } else {
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        if (getpeername(c->fd, (struct sockaddr *)&sa, &sl) != 0 || sa.sin_family != AF_INET ||
            !inet_ntop(AF_INET, &sa.sin_addr, g->host, sizeof g->host))
            snprintf(g->host, sizeof g->host, "%s", c->peer);
    }
    /* Its own host's ranks are in its folds from now on. */
    for (int32_t r = 0; r < k->wsize; r++)
        if (k->owner[r] == (int)i)
            ccs_dsx_coord_away(k, r);
    CCS_LOG(INFO, "desync tree: rank %d (host '%s') relays group %u (hosts whose lowest rank is in %llu..%llu) at %s:%d",
            c->peer_rank, c->host, at.group, (unsigned long long)at.group * k->tree_ranks,
            (unsigned long long)(at.group + 1) * k->tree_ranks - 1, g->host, g->port);
    return 0;
}

int ccs_dsx_tree_on_verdict(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why,
                            size_t n)
{
    struct ccs_dsx_conn *c = &k->cl[i];
    if (c->tree != CCS_DSX_T_RELAY && !(i < k->capfold && k->cfold[i])) {
        snprintf(why, n, "a VERDICT from a leader that does not relay");
        return -1;
    }
    struct ccs_dsx_verdict *v = malloc(sizeof *v);
    if (!v || len != sizeof *v) {
        snprintf(why, n, v ? "VERDICT of %u bytes from a relay" : "out of memory for a relay's VERDICT", len);
        free(v);
        return -1;
    }
    memcpy(v, p, sizeof *v);
    int rc = ccs_dsx_check_verdict(v, k->wsize, why, n);
    v->local = 0;
    /* Once per (class, communicator, seq), as the root's own rules. */
    if (rc == 0 && ccs_dsx_seen_add(k->seen, v->cls, v->comm, v->seq))
        ccs_dsx_coord_verdict(v, k);
    free(v);
    return rc;
}

void ccs_dsx_tree_dropped(struct ccs_dsx_coord *k, size_t i)
{
    struct ccs_dsx_conn *c = &k->cl[i];
    if (c->tree == CCS_DSX_T_MOVED) {
        /* Gone to its relay, as told: its ranks are the relay's. */
        for (int32_t r = 0; r < k->wsize; r++)
            if (k->owner[r] == (int)i) {
                k->owner[r] = -1;
                ccs_dsx_coord_away(k, r);
            }
        return;
    }
    for (size_t j = 0; j < k->ngroups; j++) {
        struct ccs_dsx_tree_group *g = &k->groups[j];
        if (g->appointed == (int)i)
            g->appointed = -1;
        if (g->relay == (int)i) {
            /* Its leaders come back here and the next relay is appointed
             * among them; meanwhile its group is accounted for by no fold
             * (nothing is judged from folds about it) and the ranks it
             * listed are unreachable, counted as computing. */
            CCS_LOG(INFO, "desync tree: the relay of group %zu (rank %d, host '%s') is lost; its leaders report here "
                    "until another is appointed", j, c->peer_rank, c->host);
            g->relay = -1; /* (its key kept: the relay may come back with it) */
        }
    }
}
