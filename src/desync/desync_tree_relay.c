/*
 * desync_tree_relay.c - a relay of the tree in a job (docs/desync.md, "The
 * tree"): the coordinator's code in relay mode, in the process of the host
 * leader the root appointed, run by that leader's detection thread (no
 * thread of its own, so nothing in it is shared across threads).  It
 * accepts its group's leaders (the handshake with the key the root gave
 * it), keeps their ranks' statuses, judges the communicators entirely
 * inside its group with the coordinator's rules (partial: one with members
 * elsewhere is the root's), and gives the leader's client the statuses its
 * group's fold is made of.  Its verdicts and its leaders' agreement values
 * go up to the root; the root's frames come down to its leaders
 * (ccs_dsx_coord_forward).
 */
#include "desync_coord.h"
#include "log.h"
#include "clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ccs_dsx_coord *ccs_dsx_coord_start_relay(const char *host, int port, int32_t wsize,
                                                const unsigned char key[CCS_DSX_KEYBYTES],
                                                const unsigned char job[CCS_DSX_JOBTAG],
                                                const struct ccs_dsx_thresholds *t, int period_ms,
                                                const struct ccs_dsx_relay_hooks *hooks, void *arg, int *port_out,
                                                char *why, size_t n)
{
    struct ccs_dsx_coord *k = ccs_dsx_coord_new(wsize, job, t, period_ms, why, n);
    if (!k)
        return NULL;
    memcpy(k->rkey.k, key, sizeof k->rkey.k);
    k->hooks = hooks;
    k->hooks_arg = arg;
    k->t.partial = 1; /* a communicator with members outside the group is the root's to judge */
    if (ccs_dsx_coord_open(k, host, port, 0, port_out, why, n) != 0) {
        ccs_dsx_coord_free(k);
        return NULL;
    }
    k->next_eval = ccs_clock_mono_ms() + (uint64_t)k->period_ms;
    return k;
}

void ccs_dsx_coord_rekey(struct ccs_dsx_coord *k, const unsigned char key[CCS_DSX_KEYBYTES])
{
    memcpy(k->rkey.k, key, sizeof k->rkey.k);
}

/* This host's statuses into the relay's table, as if its own leader had
 * sent them (no connection owns them: OWNER -2). */
static void take_local(struct ccs_dsx_coord *k, const struct ccs_dsx_status *const *local, size_t nlocal,
                       uint64_t now)
{
    for (size_t j = 0; j < nlocal; j++) {
        const struct ccs_dsx_status *in = local[j];
        int32_t r = in->wrank;
        if (r < 0 || r >= k->wsize)
            continue;
        size_t need = offsetof(struct ccs_dsx_status, comm) + in->ncomm * sizeof(struct ccs_dsx_comm);
        if (!k->st[r] || k->stsize[r] < need) {
            struct ccs_dsx_status *ns = realloc(k->st[r], need);
            if (!ns)
                continue;
            k->st[r] = ns;
            k->stsize[r] = need;
        }
        if (in->beat != k->beat[r] || !k->beat_ms[r]) {
            k->beat[r] = in->beat;
            k->beat_ms[r] = now;
        }
        memcpy(k->st[r], in, need);
        k->owner[r] = -2;
        k->dead[r] = in->life == CCS_DSX_DIED;
        k->unreach_ms[r] = 0;
        k->away[r] = 0;
    }
}

size_t ccs_dsx_coord_pump(struct ccs_dsx_coord *k, const struct ccs_dsx_status *const *local, size_t nlocal,
                          const struct ccs_dsx_status **out, size_t cap)
{
    uint64_t now = ccs_clock_mono_ms();
    take_local(k, local, nlocal, now);
    int room = ccs_dsx_coord_make_room(k, now, 0);
    ccs_dsx_coord_io(k, 0, now >= k->accept_after && room);
    now = ccs_clock_mono_ms();
    if (now >= k->probe_next) {
        ccs_dsx_coord_probe(k, now);
        k->probe_next = now + CCS_DSX_PROBE_TICK_MS;
    }
    if (now >= k->next_eval) {
        ccs_dsx_coord_eval(k);
        ccs_dsx_coord_count_io(k);
        ccs_dsx_coord_final_exchange(k, now); /* (BYE to a leader that comes after the root's) */
        ccs_dsx_coord_flush_all(k, now, 1);
        ccs_dsx_coord_refused_log(k, NULL, NULL, 0, 1);
        k->next_eval = now + (uint64_t)k->period_ms;
    } else {
        ccs_dsx_coord_flush_all(k, now, 0);
    }
    /* The group's fold: this host's ranks and those of leaders heard within
     * the heartbeat (a leader cut off is not folded as it last was: its
     * group's fold then accounts for fewer members, and the root judges
     * nothing from folds about its communicators). */
    size_t n = 0;
    for (size_t i = 0; i < k->ncl; i++)
        k->cl[i].lowest = INT32_MAX;
    for (int32_t r = 0; r < k->wsize && n < cap; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x || k->unreach_ms[r] || (k->owner[r] == -1 && x->life == CCS_DSX_ALIVE))
            continue;
        if (k->owner[r] >= 0 && (size_t)k->owner[r] < k->ncl)
            k->cl[k->owner[r]].lowest = r; /* (marks the leaders folded) */
        out[n++] = x;
    }
    return n;
}

void ccs_dsx_coord_forward(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n)
{
    if (type == CCS_DSX_M_BYE) { /* every rank finished: said to every leader, now and later */
        atomic_store(&k->finishing, 1);
        atomic_store(&k->finished, 1);
        ccs_dsx_coord_say_bye(k);
        return;
    }
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && k->cl[i].state == CCS_DSX_C_AUTHED && ccs_dsx_conn_queue(&k->cl[i], type, p, n) != 0)
            k->cl[i].state = CCS_DSX_C_DROP; /* dropped at the next flush */
    ccs_dsx_coord_flush_all(k, ccs_clock_mono_ms(), 0);
}

unsigned ccs_dsx_coord_leaders(const struct ccs_dsx_coord *k)
{
    unsigned n = 0;
    for (size_t i = 0; i < k->ncl; i++)
        n += k->cl[i].lowest != INT32_MAX;
    return n;
}
