/*
 * desync_rule_unreachable.c - the coordinator's own rule (docs/desync.md,
 * "A lost connection is not a dead rank"): a communicator whose reachable
 * members have all been blocked at one seq for the grace while the others'
 * host has been silent past it is a DESYNC naming those "unreachable ...
 * not known to be dead".  Beside the rules every rank runs
 * (desync_rule_*.c); only the coordinator knows which hosts it lost.
 */
#include "desync_coord.h"
#include "desync_rules_ctx.h"
#include "ccs_kinds.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The grace before anything is said about an unreachable rank: its
 * leader reconnects well within it after a reset (200 ms backoff). */
static uint64_t grace_ms(const struct ccs_dsx_coord *k)
{
    return k->t.heartbeat_ms > k->t.block_ms ? k->t.heartbeat_ms : k->t.block_ms;
}

/* The silence after which unreachable rank R may be named, counted from
 * the last word heard from it: the grace when its connection closed, twice
 * that when its host only fell silent (a process stopped a while, a link
 * that stalls: 12 to 18 s of it, with the default heartbeat, must pass
 * without a verdict, and the link is dropped a heartbeat into it). */
static uint64_t silence_ms(const struct ccs_dsx_coord *k, int32_t r)
{
    return k->unreach_silent[r] ? 2 * grace_ms(k) : grace_ms(k);
}

/* Unreachable ranks the rest of a communicator hangs on: every reachable
 * member of comm COMM (of SIZE) blocked at one seq for the grace period,
 * the others unreachable for as long.  A DESYNC naming them unreachable
 * (not dead: nothing says their process is gone). */
static void unreachable_verdict(struct ccs_dsx_coord *k, uint64_t comm, int32_t size, uint64_t now)
{
    uint64_t g = grace_ms(k), seq = 0;
    int32_t *wait = malloc((size_t)size * sizeof *wait), *lost = malloc((size_t)size * sizeof *lost);
    size_t nw = 0, nl = 0, seen_members = 0;
    const struct ccs_dsx_comm *wop = NULL;
    uint32_t wms = UINT32_MAX;
    int ok = wait && lost;
    struct ccs_dsx_verdict *v = ok ? calloc(1, sizeof *v) : NULL;
    ok = v != NULL;
    for (int32_t r = 0; ok && r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x)
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM && ok; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            if (e->id != comm)
                continue;
            seen_members++;
            if (k->away[r]) { /* not current here (its relay hears it): no verdict on it */
                ok = 0;
                break;
            }
            if (k->unreach_ms[r] && x->life == CCS_DSX_ALIVE) {
                ok = now - k->unreach_ms[r] >= silence_ms(k, r) && nl < (size_t)size;
                if (ok)
                    lost[nl++] = r;
            } else if (x->life == CCS_DSX_ALIVE && e->state == CCS_DSX_BLOCKED && e->blocked_ms >= g &&
                       (!wop || e->blocked.seq == seq) && nw < (size_t)size) {
                seq = e->blocked.seq;
                wop = wop ? wop : e;
                wms = e->blocked_ms < wms ? e->blocked_ms : wms;
                wait[nw++] = r;
            } else {
                ok = 0; /* a member that is not hanging on them: no verdict */
            }
        }
    }
    if (ok && nw && nl && seen_members == (size_t)size && ccs_dsx_seen_add(k->seen, CCS_DSX_DESYNC, comm, seq)) {
        char rw[256], ops[160], lt[400] = "";
        size_t o = 0;
        ccs_ranks_str(wait, nw, rw, sizeof rw);
        ccs_dsx_op_str(&wop->blocked, ops, sizeof ops);
        for (size_t j = 0; j < nl && j < 4 && o + 8 < sizeof lt; j++) {
            const struct ccs_dsx_status *x = k->st[lost[j]];
            uint64_t at = 0;
            for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++)
                if (x->comm[q].id == comm)
                    at = x->comm[q].issued;
            int w = snprintf(lt + o, sizeof lt - o,
                             "; rank %d unreachable (host '%.40s': no word from its leader for %.1f s; last seen "
                             "at seq %llu; not known to be dead)",
                             lost[j], x->host, (now - k->unreach_ms[lost[j]]) / 1000.0, (unsigned long long)at);
            o += w > 0 ? (size_t)w : 0;
        }
        v->cls = CCS_DSX_DESYNC;
        v->comm = comm;
        v->seq = seq;
        v->comm_size = size;
        snprintf(v->line, sizeof v->line,
                 "comm=%#llx size=%d seq=%llu: rank%s %s blocked in %s at seq %llu for %.1f s%s",
                 (unsigned long long)comm, size, (unsigned long long)seq, nw > 1 ? "s" : "", rw, ops,
                 (unsigned long long)seq, wms / 1000.0, lt);
        for (size_t j = 0; j < nl + nw && v->nparty < CCS_DSX_PARTIES; j++) {
            int32_t r = j < nl ? lost[j] : wait[j - nl];
            const struct ccs_dsx_status *x = k->st[r];
            struct ccs_dsx_party *p = &v->party[v->nparty++];
            p->wrank = r;
            p->role = j < nl ? CCS_DSX_R_BEHIND : CCS_DSX_R_WAITING;
            p->life = x->life;
            p->pid = x->pid;
            memcpy(p->host, x->host, sizeof p->host);
            for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++)
                if (x->comm[q].id == comm)
                    p->c = x->comm[q];
        }
        ccs_dsx_coord_verdict(v, k);
    }
    free(wait), free(lost), free(v);
}

/* Each communicator of a rank unreachable past the grace, once per pass
 * (a whole network blip leaves every host unreachable: the communicators,
 * not the ranks, are what is judged). */
#define MAX_LOST_COMMS 64
void ccs_dsx_rule_unreachable(struct ccs_dsx_coord *k, uint64_t now)
{
    uint64_t ids[MAX_LOST_COMMS];
    int32_t sizes[MAX_LOST_COMMS];
    size_t n = 0;
    for (int32_t r = 0; r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x || !k->unreach_ms[r] || x->life != CCS_DSX_ALIVE || now - k->unreach_ms[r] < silence_ms(k, r))
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            size_t j = 0;
            while (j < n && ids[j] != e->id)
                j++;
            if (j == n && n < MAX_LOST_COMMS && e->size > 1 && e->size <= k->wsize) {
                ids[n] = e->id;
                sizes[n++] = e->size;
            }
        }
    }
    for (size_t j = 0; j < n; j++)
        unreachable_verdict(k, ids[j], sizes[j], now);
}
