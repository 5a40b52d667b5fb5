/*
 * desync_coord.c - the coordinator of the TCP side channel (docs/desync.md,
 * "Transport"): a thread in rank 0's process that accepts one connection
 * per host (desync_conn.c), keeps the statuses of every rank of the job,
 * applies the rules to the whole job, broadcasts their verdicts, searches
 * for the first seq where a communicator's members differ, and folds
 * agreement values.  Every frame is checked (desync_proto.c) before use;
 * a peer that fails the handshake or sends anything malformed is dropped.
 *
 * Its connections (listening, admission, buffers) are in
 * desync_coord_net.c, its own rule about hosts cut off in
 * desync_rule_unreachable.c; the state they share in desync_coord.h.
 */
#include "desync_coord.h"
#include "log.h"
#include "ccs_kinds.h"
#include "clock.h"
#include "thread.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

void ccs_dsx_coord_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    /* A relay's verdict goes to the root, which gives it to the whole job
     * (and back down here); only when it cannot go up, to its group. */
    if (!k->hooks || k->hooks->verdict(v, k->hooks_arg) != 0)
        ccs_dsx_coord_broadcast(k, CCS_DSX_M_VERDICT, v, sizeof *v);
    /* A MISMATCH leaves the hashes apart for good: its odd ranks are not
     * narrowed to again (a hang after it still is). */
    if (v->cls == CCS_DSX_MISMATCH)
        k->judged[k->njudged++ % 16] = v->comm;
    if (k->recent)
        k->recent[k->nrecent++ % NRECENT] = *v;
    k->stats.verdicts++;
}

static void coord_detail(uint64_t comm, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    uint64_t now = ccs_clock_mono_ms();
    for (int i = 0; i < 16; i++)
        if (k->detail_id[i] == comm && now - k->detail_ms[i] < 1000)
            return;
    int slot = 0;
    for (int i = 1; i < 16; i++)
        if (k->detail_ms[i] < k->detail_ms[slot])
            slot = i;
    k->detail_id[slot] = comm;
    k->detail_ms[slot] = now;
    ccs_dsx_coord_broadcast(k, CCS_DSX_M_DETAIL, &comm, sizeof comm);
}

/* Wipes the coordinator's secret key and the keys derived from it. */
static void sodium_memzero_keys(struct ccs_dsx_coord *k)
{
    struct ccs_dsx_key sk;
    memcpy(sk.k, k->sk, sizeof sk.k);
    ccs_dsx_auth_wipe(&sk);
    memset(k->sk, 0, sizeof k->sk);
    for (int32_t r = 0; k->rkeys && r < k->wsize; r++)
        ccs_dsx_auth_wipe(&k->rkeys[r]);
}

/* Records differ at (COMM, SEQ): every host's ranks publish what they kept
 * around SEQ (asked again at most every 300 ms while the rules wait). */
static void coord_want(uint64_t comm, uint64_t seq, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    uint64_t now = ccs_clock_mono_ms();
    for (int i = 0; i < 16; i++)
        if (k->want_id[i] == comm && k->want_seq[i] == seq && now - k->want_ms[i] < 300)
            return;
    int slot = 0;
    for (int i = 1; i < 16; i++)
        if (k->want_ms[i] < k->want_ms[slot])
            slot = i;
    k->want_id[slot] = comm;
    k->want_seq[slot] = seq;
    k->want_ms[slot] = now;
    /* Only the hosts of members whose record of SEQ is not here: at scale
     * one host holds the odd record and a few others are asked. */
    uint64_t p[2] = {comm, seq};
    uint8_t *ask = calloc(k->ncl ? k->ncl : 1, 1);
    for (int32_t r = 0; r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        /* (Finished members too: they linger until BYE and answer; a
         * MISMATCH in a job's last calls needs their records.) */
        if (!x || k->owner[r] < 0 || (size_t)k->owner[r] >= k->ncl || x->life == CCS_DSX_DIED)
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            if (e->id != comm)
                continue;
            int have = e->state == CCS_DSX_BLOCKED && e->blocked.seq == seq;
            for (unsigned h = 0; h < e->nhist && !have; h++)
                have = e->hist[h].seq == seq;
            if (!have && ask)
                ask[k->owner[r]] = 1;
        }
    }
    /* Relays too: the ranks they do not list are not in view here. */
    for (size_t i = 0; ask && i < k->ncl && i < k->capfold; i++)
        ask[i] |= k->cfold[i] != NULL || k->cl[i].tree == CCS_DSX_T_RELAY;
    if (k->hooks)
        k->hooks->local(CCS_DSX_M_DETAIL, p, sizeof p, k->hooks_arg);
    for (size_t i = 0; i < k->ncl; i++)
        if ((!ask || ask[i]) && k->cl[i].fd >= 0 && k->cl[i].state == CCS_DSX_C_AUTHED &&
            ccs_dsx_conn_queue(&k->cl[i], CCS_DSX_M_DETAIL, p, sizeof p) != 0)
            k->cl[i].state = CCS_DSX_C_DROP; /* dropped below */
    free(ask);
}

static void send_probe(uint64_t comm, uint64_t seq, void *arg)
{
    uint64_t p[2] = {comm, seq | CCS_DSX_PROBE_BIT};
    ccs_dsx_coord_broadcast(arg, CCS_DSX_M_DETAIL, p, sizeof p);
}

/* One pass of the search over every communicator in view. */
void ccs_dsx_coord_probe(struct ccs_dsx_coord *k, uint64_t now)
{
    struct ccs_dsx_search_out out = {.probe = send_probe, .want = coord_want, .arg = k};
    /* Not the statuses that are not current here (the tree: a relay folds
     * them and does not pass probes' answers up): a communicator with such
     * members is left to the folds and the rules. */
    for (int32_t r = 0; r < k->wsize; r++)
        k->search_st[r] = k->away[r] ? NULL : k->st[r];
    ccs_dsx_search_pass(k->srch, k->wsize, k->search_st, k->dead, k->seen, now, &out);
    k->pass_ms = now;
}

static void fold_agree(struct ccs_dsx_coord *k, int32_t peer, const char *host, const struct ccs_dsx_agree *a)
{
    struct ccs_dsx_agree res;
    uint64_t now = ccs_clock_mono_ms();
    int rc = ccs_dsx_folds_add(k->folds, a, k->wsize, peer, now, &res);
    if (rc == 1) {
        ccs_dsx_coord_broadcast(k, CCS_DSX_M_AGREE, &res, sizeof res);
    } else if (rc < 0) { /* said at once, then once per REFUSED_LOG_MS with the count */
        k->folds_refused++;
        if (k->folds_log_ms && now - k->folds_log_ms < REFUSED_LOG_MS)
            return;
        CCS_LOG(WARN,
                "desync coordinator: the leader of host '%.64s' (rank %d) opened more agreements than its share "
                "(%d pending, of %d in all) or the table is full: %llu new ones refused%s; their ranks time out "
                "and go on without them",
                host, peer, CCS_DSX_FOLDS_PER_PEER, CCS_DSX_FOLDS_PENDING, (unsigned long long)k->folds_refused,
                k->folds_log_ms ? " in the last 5 s" : "");
        k->folds_log_ms = now;
        k->folds_refused = 0;
    }
}

void ccs_dsx_coord_away(struct ccs_dsx_coord *k, int32_t r)
{
    k->away[r] = 1;
    /* Not kept: every leader reports to the root first, so at 131,072
     * ranks these would be every rank's (300 MB); a frame that carries the
     * rank again stores it afresh. */
    free(k->st[r]);
    k->st[r] = NULL;
    k->stsize[r] = 0;
    k->view[r] = NULL;
}

/* Stores rank R's status, just decoded into k->scratch, from client I:
 * with only the entries in use (most ranks use one or two communicators:
 * the table of a 4096-rank job stays small), and the records the rank sent
 * before if it sent none now. */
static void store_status(struct ccs_dsx_coord *k, size_t i)
{
    struct ccs_dsx_status *in = k->scratch;
    int32_t r = in->wrank;
    size_t need = offsetof(struct ccs_dsx_status, comm) + in->ncomm * sizeof(struct ccs_dsx_comm);
    if (!k->st[r] || k->stsize[r] < need) {
        struct ccs_dsx_status *ns = realloc(k->st[r], need);
        if (!ns)
            return;
        if (!k->st[r])
            ns->ncomm = 0;
        k->st[r] = ns;
        k->stsize[r] = need;
    }
    uint64_t now = ccs_clock_mono_ms();
    if (in->beat != k->beat[r] || !k->beat_ms[r]) {
        k->beat[r] = in->beat;
        k->beat_ms[r] = now;
    }
    const struct ccs_dsx_status *old = k->st[r];
    for (uint32_t e = 0; e < in->ncomm; e++) {
        struct ccs_dsx_comm *ne = &in->comm[e];
        if (ne->nhist)
            continue;
        for (uint32_t q = 0; q < old->ncomm && q < CCS_DSX_MAXCOMM; q++)
            if (old->comm[q].id == ne->id && old->comm[q].nhist &&
                old->comm[q].hist[old->comm[q].nhist - 1].seq <= ne->issued) {
                ne->nhist = old->comm[q].nhist;
                memcpy(ne->hist, old->comm[q].hist, sizeof ne->hist);
            }
    }
    memcpy(k->st[r], in, need);
    k->owner[r] = (int)i;
    k->away[r] = 0;
    k->dead[r] = 0;
    k->unreach_ms[r] = 0;
    k->unreach_silent[r] = 0;
    k->stats.statuses++;
}

/* A STATUS frame (P, LEN bytes) from client I: a count, then the statuses
 * of its host's ranks.  0, or -1 when malformed (WHY). */
static int on_statuses(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why, size_t n)
{
    uint32_t cnt;
    if (len < 4) {
        snprintf(why, n, "STATUS frame of %u bytes", len);
        return -1;
    }
    memcpy(&cnt, p, 4);
    size_t o = 4;
    for (uint32_t j = 0; j < cnt; j++) {
        size_t used = ccs_dsx_decode_status(p + o, len - o, k->wsize, k->scratch, why, n);
        if (!used)
            return -1;
        o += used;
        store_status(k, i);
    }
    if (o != len) {
        snprintf(why, n, "STATUS frame has %zu bytes after its %u statuses", len - o, cnt);
        return -1;
    }
    return 0;
}

static int judged(const struct ccs_dsx_coord *k, uint64_t comm)
{
    for (unsigned j = 0; j < 16 && j < k->njudged; j++)
        if (k->judged[j] == comm)
            return 1;
    return 0;
}

/* An AGG frame (P, LEN bytes) from relay I: its fold kept, its listed
 * statuses stored as a STATUS frame's, and a communicator with members
 * that differ narrowed to (DETAIL: its relays list a reference beside
 * their odd members).  0, or -1 when malformed (WHY). */
static int on_agg(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why, size_t n)
{
    if (i >= k->capfold) {
        size_t nc = k->capfold ? k->capfold * 2 : 16;
        while (nc <= i)
            nc *= 2;
        struct ccs_dsx_agg **nf = realloc(k->cfold, nc * sizeof *nf);
        if (!nf) {
            snprintf(why, n, "out of memory for a relay's fold");
            return -1;
        }
        memset(nf + k->capfold, 0, (nc - k->capfold) * sizeof *nf);
        k->cfold = nf;
        k->capfold = nc;
    }
    /* At most CCS_DSX_AGG_MAX_RELAYS folds (53 KB each) whatever
     * authenticated peers send: the tree of the largest job has a few
     * hundred relays. */
    if (!k->cfold[i] && k->nfold >= CCS_DSX_AGG_MAX_RELAYS) {
        snprintf(why, n, "an AGG frame from a relay beyond the %d the coordinator keeps", CCS_DSX_AGG_MAX_RELAYS);
        return -1;
    }
    if (!k->cfold[i]) {
        if (!(k->cfold[i] = malloc(sizeof *k->cfold[i]))) {
            snprintf(why, n, "out of memory for a relay's fold");
            return -1;
        }
        k->nfold++;
    }
    struct ccs_dsx_agg *a = k->cfold[i];
    size_t o;
    if (ccs_dsx_agg_decode_folds(p, len, k->wsize, a, &o, why, n) != 0)
        return -1;
    for (uint32_t j = 0; j < a->head.nlisted; j++) {
        size_t used = ccs_dsx_decode_status(p + o, len - o, k->wsize, k->scratch, why, n);
        if (!used)
            return -1;
        o += used;
        k->aggframe[k->scratch->wrank] = a->head.frame;
        store_status(k, i);
    }
    if (o != len) {
        snprintf(why, n, "AGG frame has %zu bytes after its %u listed statuses", len - o, a->head.nlisted);
        return -1;
    }
    for (uint32_t c = 0; c < a->head.ncomm; c++)
        if (a->comm[c].odd && !judged(k, a->comm[c].id))
            coord_detail(a->comm[c].id, k);
    return 0;
}

/* The view's hook (ccs_dsx_view.unseen) over the relays' folds. */
static uint64_t agg_unseen(uint64_t comm, int32_t size, size_t seen, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    const struct ccs_dsx_agg **f = malloc((k->capfold + 1) * sizeof *f);
    size_t nf = 0;
    for (size_t i = 0; f && i < k->capfold && i < k->ncl; i++)
        if (k->cfold[i] && k->cl[i].fd >= 0)
            f[nf++] = k->cfold[i];
    /* Members in view whose leaders report here directly (no fold holds
     * them: a leader not yet sent to its relay, or back from one). */
    uint64_t direct = 0;
    for (int32_t r = 0; f && nf && seen < (size_t)size && r < k->wsize; r++) {
        int o = k->owner[r];
        const struct ccs_dsx_status *x = k->view[r];
        if (!x || o < 0 || ((size_t)o < k->capfold && k->cfold[o]))
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++)
            direct += x->comm[q].id == comm;
    }
    uint64_t r = f && seen < (size_t)size ? ccs_dsx_agg_unseen(f, nf, comm, size, (uint64_t)size - seen, direct) : 0;
    free(f);
    return r;
}

/* The folds' checks, each pass: a communicator whose groups' hashes differ
 * where they overlap (not once a MISMATCH named it), or whose members are
 * all blocked in one operation past the threshold, is narrowed to
 * (DETAIL, at most once a second: its relays list a reference each, and
 * the rules judge them with the folds' counts). */
static void agg_eval(struct ccs_dsx_coord *k)
{
    const struct ccs_dsx_agg **f = malloc((k->capfold + 1) * sizeof *f);
    size_t nf = 0;
    for (size_t i = 0; f && i < k->capfold && i < k->ncl; i++)
        if (k->cfold[i] && k->cl[i].fd >= 0)
            f[nf++] = k->cfold[i];
    for (size_t x = 0; x < nf; x++)
        for (uint32_t c = 0; c < f[x]->head.ncomm; c++) {
            uint64_t id = f[x]->comm[c].id;
            int before = 0; /* compared at an earlier fold that holds it */
            for (size_t y = 0; y < x && !before; y++)
                for (uint32_t d = 0; d < f[y]->head.ncomm && !before; d++)
                    before = f[y]->comm[d].id == id;
            struct ccs_dsx_agg_cmp cmp;
            if (before || !ccs_dsx_agg_compare(f, nf, id, k->t.block_ms, &cmp))
                continue;
            if ((cmp.differ_seq && !judged(k, id)) || cmp.blocked_all)
                coord_detail(id, k);
        }
    free(f);
}

/* An AGREE frame: whole agreement values, each folded.  0 or -1 (WHY). */
static int on_agree(struct ccs_dsx_coord *k, const struct ccs_dsx_conn *c, const unsigned char *p, uint32_t len,
                    char *why, size_t n)
{
    if (len % sizeof(struct ccs_dsx_agree)) {
        snprintf(why, n, "AGREE frame of %u bytes is not a whole number of values", len);
        return -1;
    }
    if (len / sizeof(struct ccs_dsx_agree) > CCS_DSX_AGREE_PER_FRAME) { /* each frame's work bounded */
        snprintf(why, n, "AGREE frame of %zu values (at most %d)", len / sizeof(struct ccs_dsx_agree),
                 CCS_DSX_AGREE_PER_FRAME);
        return -1;
    }
    if (k->hooks) { /* a relay's: the root folds them */
        k->hooks->agree(p, len, k->hooks_arg);
        return 0;
    }
    for (size_t o = 0; o < len; o += sizeof(struct ccs_dsx_agree)) {
        struct ccs_dsx_agree a;
        memcpy(&a, p + o, sizeof a);
        fold_agree(k, c->peer_rank, c->host, &a);
    }
    return 0;
}

/* The key rank R's leader proves: the job's (shared secret), or the one
 * from the key exchange with R's public key, derived once. */
static const struct ccs_dsx_key *key_of_rank(int32_t r, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    if (k->hooks)
        return &k->rkey; /* a relay's: the key the root gave it and its leaders */
    if (!k->kx)
        return &k->key;
    if (r < 0 || r >= k->wsize)
        return NULL;
    if (!k->rkey_ok[r]) {
        if (ccs_dsx_auth_key_kx(k->pk, k->sk, k->peers + (size_t)r * CCS_DSX_PKBYTES, 1, k->job, &k->rkeys[r]) != 0)
            return NULL;
        k->rkey_ok[r] = 1;
    }
    return &k->rkeys[r];
}

/* Handles the buffered frames of client I; -1 to drop it (WHY). */
int ccs_dsx_coord_frames(struct ccs_dsx_coord *k, size_t i, char *why, size_t n)
{
    struct ccs_dsx_conn *c = &k->cl[i];
    struct ccs_dsx_frame f;
    const unsigned char *p;
    int rc;
    while ((rc = ccs_dsx_conn_next_frame(c, &f, &p, why, n)) == 1) {
        if (!c->sealed) {
            int hs = ccs_dsx_conn_on_hello(c, key_of_rank, k, k->wsize, k->job, &f, p, why, n);
            if (hs < 0)
                return -1;
            if (hs == 0 && k->nprio < MAX_TICKETED) { /* a member's ticket: out of the unknown peers' slots */
                c->prio = 1;
                k->nunauth--;
                k->nprio++;
            }
            if (hs == 1) { /* authenticated */
                if (c->prio)
                    k->nprio--;
                else
                    k->nunauth--;
                c->prio = 0;
                unsigned nr = k->nrecent < NRECENT ? k->nrecent : NRECENT;
                for (unsigned j = 0; k->recent && j < nr; j++)
                    if (ccs_dsx_conn_queue(c, CCS_DSX_M_VERDICT, &k->recent[(k->nrecent - nr + j) % NRECENT],
                                           sizeof *k->recent) != 0)
                        c->state = CCS_DSX_C_DROP;
                pthread_mutex_lock(&k->lock);
                k->stats.clients++;
                pthread_mutex_unlock(&k->lock);
            }
        } else if (f.type == CCS_DSX_M_STATUS) {
            if (on_statuses(k, i, p, f.length, why, n) != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_AGG) {
            if (on_agg(k, i, p, f.length, why, n) != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_AGREE) {
            if (on_agree(k, c, p, f.length, why, n) != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_RELAY_AT && !k->hooks) {
            if (ccs_dsx_tree_on_relay_at(k, i, p, f.length, why, n) != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_VERDICT && !k->hooks) {
            if (ccs_dsx_tree_on_verdict(k, i, p, f.length, why, n) != 0)
                return -1;
        } else {
            snprintf(why, n, "unexpected frame type %u from a client", f.type);
            return -1;
        }
        ccs_dsx_conn_consume(c);
    }
    return rc < 0 ? -1 : 0;
}

void ccs_dsx_coord_eval(struct ccs_dsx_coord *k)
{
    uint64_t now = ccs_clock_mono_ms();
    if (!k->hooks)
        ccs_dsx_tree_pass(k, now);
    for (int32_t r = 0; r < k->wsize; r++) {
        /* Listed by a relay that has not listed it for 10 frames (1 s; a
         * relay lists its odd members and the references asked for in
         * every frame), or never since it became a relay: what it was is
         * not what it is (its group's fold counts it now). */
        int o = k->owner[r];
        if (o >= 0 && (size_t)o < k->capfold && k->cfold[o] &&
            (!k->aggframe[r] || k->aggframe[r] + 10 < k->cfold[o]->head.frame))
            ccs_dsx_coord_away(k, r);
        /* A status that stopped coming (a stalled link) is unreachable too
         * (not one that is not current here: its relay hears it). */
        if (k->st[r] && !k->away[r] && k->st[r]->life == CCS_DSX_ALIVE && k->beat_ms[r] && !k->unreach_ms[r] &&
            now - k->beat_ms[r] > (uint64_t)k->t.heartbeat_ms) {
            k->unreach_ms[r] = k->beat_ms[r]; /* its last word */
            k->unreach_silent[r] = 1;
        }
        /* Unreachable ranks count as computing (nothing known of them), and
         * so does a rank whose status stopped changing for longer than four
         * of its republications (every rank republishes at least every
         * 500 ms): a stalled link delivers old statuses late, and an old
         * "blocked at seq 4" beside a fresh "blocked at seq 5" is no hang. */
        uint64_t stale_ms = 2000 + 4 * (uint64_t)k->t.mismatch_wait_ms;
        int stale = k->beat_ms[r] && now - k->beat_ms[r] > stale_ms;
        k->view[r] = (k->unreach_ms[r] || stale) && k->st[r] && k->st[r]->life == CCS_DSX_ALIVE ? NULL : k->st[r];
        if (k->away[r])
            k->view[r] = NULL;
    }
    struct ccs_dsx_view v = {.wsize = k->wsize,
                             .st = k->view,
                             .dead = k->dead,
                             .now_ms = now,
                             .unseen = k->capfold ? agg_unseen : NULL,
                             .unseen_arg = k};
    struct ccs_dsx_sink s = {
        .verdict = ccs_dsx_coord_verdict, .detail = coord_detail, .want = coord_want, .arg = k};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ccs_dsx_rules_run(&v, &k->t, k->seen, &s);
    ccs_dsx_rule_unreachable(k, now);
    if (k->capfold)
        agg_eval(k);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    size_t held = sizeof *k + (size_t)k->wsize * (sizeof *k->st + sizeof *k->stsize + sizeof *k->view + 1 +
                                                  2 * sizeof *k->beat + sizeof *k->owner);
    for (int32_t r = 0; r < k->wsize; r++)
        held += k->st[r] ? k->stsize[r] : 0;
    for (size_t i = 0; i < k->ncl; i++)
        held += sizeof k->cl[i] + k->cl[i].incap + k->cl[i].outcap;
    held += ccs_dsx_folds_bytes(k->folds) + (size_t)k->wsize * sizeof *k->aggframe + k->capfold * sizeof *k->cfold;
    for (size_t i = 0; i < k->capfold; i++)
        held += k->cfold[i] ? sizeof *k->cfold[i] : 0;
    pthread_mutex_lock(&k->lock);
    k->stats.bytes_held = held;
    k->stats.evals++;
    if (ms > k->stats.eval_ms_max)
        k->stats.eval_ms_max = ms;
    pthread_mutex_unlock(&k->lock);
}

/* The final exchange (ccs_dsx_coord_finish): once every rank has finished
 * (exited, finalizing or dead) or the deadline passed, BYE to every host.
 * Also to a host whose link is made after that, until this process exits:
 * a rank that took its host's link over from a leader that left first,
 * while every rank was finishing, would otherwise find the connection
 * closed without a word and warn of a failure at the job's normal end. */
void ccs_dsx_coord_final_exchange(struct ccs_dsx_coord *k, uint64_t now)
{
    if (!atomic_load(&k->finishing))
        return;
    if (atomic_load(&k->finished)) {
        ccs_dsx_coord_say_bye(k);
        return;
    }
    if (!k->finish_by)
        k->finish_by = now + (uint64_t)atomic_load(&k->finishing);
    int all = 1;
    for (int32_t r = 0; r < k->wsize && all; r++)
        all = k->dead[r] || (k->st[r] && k->st[r]->life != CCS_DSX_ALIVE);
    if (all && !k->all_finished_ms)
        k->all_finished_ms = now;
    /* Every rank finished: BYE once no search is under way, judged by a
     * pass that saw their last statuses (a MISMATCH in a job's last calls
     * is still found: the ranks linger and answer until BYE), or
     * CCS_DSX_EXIT_SEARCH_MS later, when the ranks stop lingering. */
    int settled = all && k->pass_ms > k->all_finished_ms && ccs_dsx_search_settled(k->srch, k->pass_ms);
    /* Nor while records asked for a MISMATCH not yet reported are on their
     * way (for as long as the rules wait for them): the ranks that hold
     * them leave at BYE. */
    for (int i = 0; i < 16 && settled; i++)
        settled = !(k->want_ms[i] && now - k->want_ms[i] < k->t.record_wait_ms + 200 &&
                    !ccs_dsx_seen_has(k->seen, CCS_DSX_MISMATCH, k->want_id[i], 0));
    if ((all && (settled || now >= k->all_finished_ms + CCS_DSX_EXIT_SEARCH_MS)) || now >= k->finish_by) {
        ccs_dsx_coord_say_bye(k);
        atomic_store(&k->finished, all ? 1 : 2);
    }
}

/* How long poll(2) may wait at NOW: until the next evaluation or probe,
 * the end of an accept pause, or (no room for a new peer) 20 ms, when a
 * slot may be evicted. */
static int poll_timeout(const struct ccs_dsx_coord *k, uint64_t now, uint64_t next_eval, int room)
{
    uint64_t wake = next_eval < k->probe_next ? next_eval : k->probe_next;
    int to = wake > now ? (int)(wake - now) : 0;
    if (now < k->accept_after && (int)(k->accept_after - now) < to)
        to = (int)(k->accept_after - now);
    if (!room && to > 20)
        to = 20;
    return to;
}

static void *coord_main(void *arg)
{
    struct ccs_dsx_coord *k = arg; /* (started with every signal blocked: ccs_thread_start_joinable) */
    /* Below the job's threads, as the ranks' detection threads: a flood of
     * handshakes takes its turn in the job's gaps. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    prctl(PR_SET_NAME, "ccs-coord", 0, 0, 0); /* top -H, /proc/PID/task/TID/comm */
    uint64_t next_eval = ccs_clock_mono_ms() + (uint64_t)k->period_ms;
    while (!atomic_load(&k->stop)) {
        uint64_t now = ccs_clock_mono_ms();
        int room = ccs_dsx_coord_make_room(k, now, 0);
        ccs_dsx_coord_io(k, poll_timeout(k, now, next_eval, room), now >= k->accept_after && room);
        now = ccs_clock_mono_ms();
        if (now >= k->probe_next) {
            ccs_dsx_coord_probe(k, now);
            k->probe_next = now + CCS_DSX_PROBE_TICK_MS;
            ccs_dsx_coord_final_exchange(k, now); /* (once finishing: BYE as soon as the search settles) */
            ccs_dsx_coord_flush_all(k, now, 0);
        }
        if (now >= next_eval) {
            ccs_dsx_coord_eval(k);
            ccs_dsx_coord_count_io(k);
            ccs_dsx_coord_final_exchange(k, now);
            ccs_dsx_coord_flush_all(k, now, 1);
            ccs_dsx_coord_refused_log(k, NULL, NULL, 0, 1);
            next_eval = now + (uint64_t)k->period_ms;
        }
    }
    return NULL;
}

struct ccs_dsx_coord *ccs_dsx_coord_start(const char *host, int port, int32_t wsize, const char *secret,
                                          const struct ccs_dsx_thresholds *t, int period_ms, int *port_out,
                                          char *why, size_t n)
{
    struct ccs_dsx_cred cred = {.secret = secret};
    return ccs_dsx_coord_start_cred(host, port, wsize, &cred, t, period_ms, port_out, why, n);
}

/* Gives back everything of K, whatever part of its start it got through
 * (its tables zeroed or NULL until made, its descriptors -1), keys wiped. */
void ccs_dsx_coord_free(struct ccs_dsx_coord *k)
{
    for (size_t i = 0; i < k->ncl; i++)
        ccs_dsx_conn_close(&k->cl[i]);
    if (k->lfd >= 0)
        close(k->lfd);
    if (k->epfd >= 0)
        close(k->epfd);
    ccs_dsx_auth_wipe(&k->key);
    sodium_memzero_keys(k);
    for (int32_t r = 0; k->st && r < k->wsize; r++)
        free(k->st[r]);
    ccs_dsx_folds_free(k->folds);
    free(k->cl), free(k->st), free(k->stsize), free(k->view), free(k->dead), free(k->beat), free(k->beat_ms);
    free(k->owner), free(k->scratch), free(k->unreach_ms), free(k->unreach_silent), free(k->recent), free(k->peers),
        free(k->rkeys), free(k->rkey_ok), free(k->aggframe), free(k->away), free(k->groups), free(k->search_st);
    ccs_dsx_auth_wipe(&k->rkey);
    for (size_t i = 0; i < k->capfold; i++)
        free(k->cfold[i]);
    free(k->cfold);
    ccs_dsx_seen_free(k->seen);
    pthread_mutex_destroy(&k->lock);
    free(k);
}

/* K's keys from CRED: the job's key from its secret, or this side's key
 * pair and every rank's public key.  0, or -1 with WHY. */
static int coord_keys(struct ccs_dsx_coord *k, const struct ccs_dsx_cred *cred, char *why, size_t n)
{
    if (cred->secret)
        return ccs_dsx_auth_key_job(cred->secret, cred->job, &k->key, why, n);
    k->kx = 1;
    memcpy(k->pk, cred->pk, sizeof k->pk);
    memcpy(k->sk, cred->sk, sizeof k->sk);
    k->peers = malloc((size_t)k->wsize * CCS_DSX_PKBYTES);
    k->rkeys = calloc((size_t)k->wsize, sizeof *k->rkeys);
    k->rkey_ok = calloc((size_t)k->wsize, 1);
    if (!cred->peers || !k->peers || !k->rkeys || !k->rkey_ok) {
        snprintf(why, n, "out of memory for %d public keys", k->wsize);
        return -1;
    }
    memcpy(k->peers, cred->peers, (size_t)k->wsize * CCS_DSX_PKBYTES);
    return 0;
}

/* K's tables, one entry per rank of the job and the bounded ones.  0, or
 * -1 with WHY. */
int ccs_dsx_coord_tables(struct ccs_dsx_coord *k, char *why, size_t n)
{
    size_t w = (size_t)k->wsize;
    k->st = calloc(w, sizeof *k->st);
    k->stsize = calloc(w, sizeof *k->stsize);
    k->view = calloc(w, sizeof *k->view);
    k->dead = calloc(w, 1);
    k->beat = calloc(w, sizeof *k->beat);
    k->beat_ms = calloc(w, sizeof *k->beat_ms);
    k->unreach_ms = calloc(w, sizeof *k->unreach_ms);
    k->unreach_silent = calloc(w, 1);
    k->recent = calloc(NRECENT, sizeof *k->recent);
    k->owner = malloc(w * sizeof *k->owner);
    k->seen = ccs_dsx_seen_new();
    k->folds = ccs_dsx_folds_new();
    k->scratch = malloc(sizeof *k->scratch);
    k->aggframe = calloc(w, sizeof *k->aggframe);
    k->away = calloc(w, 1);
    k->search_st = calloc(w, sizeof *k->search_st);
    if (!k->away || !k->search_st || !k->st || !k->stsize || !k->view || !k->dead || !k->beat || !k->beat_ms || !k->unreach_ms ||
        !k->unreach_silent || !k->recent || !k->owner || !k->seen || !k->folds || !k->scratch || !k->aggframe) {
        snprintf(why, n, "out of memory for %d ranks", k->wsize);
        return -1;
    }
    for (int32_t r = 0; r < k->wsize; r++)
        k->owner[r] = -1;
    return 0;
}

/* K listening on HOST at PORT, or at the first free one of the ports keyed
 * by the secret (CCS_DSX_PORT_KEYED), non-blocking.  0, or -1 with WHY. */
int ccs_dsx_coord_listen_port(struct ccs_dsx_coord *k, const char *host, int port, int secret, char *why, size_t n)
{
    if (port == CCS_DSX_PORT_KEYED && !secret) {
        snprintf(why, n, "a port keyed by the secret needs CCSHIM_SECRET");
        return -1;
    }
    int tries = port == CCS_DSX_PORT_KEYED ? CCS_DSX_PORT_TRIES : 1;
    char taken[CCS_DSX_PORT_TRIES * 7 + 1] = "";
    for (int i = 0; i < tries && k->lfd < 0; i++) {
        int p = port == CCS_DSX_PORT_KEYED ? ccs_dsx_auth_port(&k->key, (unsigned)i) : port;
        int e = ccs_dsx_coord_listen(k, host, p, why, n);
        if (e == EADDRINUSE && port == CCS_DSX_PORT_KEYED)
            snprintf(taken + strlen(taken), sizeof taken - strlen(taken), "%s%d", i ? ", " : "", p);
        else if (e != 0)
            return -1;
    }
    if (k->lfd < 0) {
        snprintf(why, n, "cannot listen on %s: the %d ports keyed by the secret (%s) are all in use",
                 host && *host ? host : "*", tries, taken);
        return -1;
    }
    ccs_dsx_socket_nonblock(k->lfd);
    return 0;
}

struct ccs_dsx_coord *ccs_dsx_coord_new(int32_t wsize, const unsigned char job[CCS_DSX_JOBTAG],
                                        const struct ccs_dsx_thresholds *t, int period_ms, char *why, size_t n)
{
    struct ccs_dsx_coord *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    k->wsize = wsize;
    k->lfd = -1;
    k->epfd = -1;
    memcpy(k->job, job, sizeof k->job);
    k->t = *t;
    k->period_ms = period_ms < 10 ? 10 : period_ms;
    pthread_mutex_init(&k->lock, NULL);
    return k;
}

int ccs_dsx_coord_open(struct ccs_dsx_coord *k, const char *host, int port, int secret, int *port_out, char *why,
                       size_t n)
{
    if (ccs_dsx_coord_tables(k, why, n) != 0 || ccs_dsx_coord_listen_port(k, host, port, secret, why, n) != 0 ||
        ccs_dsx_coord_io_init(k, why, n) != 0)
        return -1;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(k->lfd, (struct sockaddr *)&sa, &sl);
    *port_out = ntohs(sa.sin_port);
    return 0;
}

struct ccs_dsx_coord *ccs_dsx_coord_start_cred(const char *host, int port, int32_t wsize,
                                               const struct ccs_dsx_cred *cred, const struct ccs_dsx_thresholds *t,
                                               int period_ms, int *port_out, char *why, size_t n)
{
    struct ccs_dsx_coord *k = ccs_dsx_coord_new(wsize, cred->job, t, period_ms, why, n);
    if (!k)
        return NULL;
    if (coord_keys(k, cred, why, n) != 0 ||
        ccs_dsx_coord_open(k, host, port, cred->secret != NULL, port_out, why, n) != 0)
        goto fail;
    if (ccs_thread_start_joinable(coord_main, k, &k->th) != 0) {
        snprintf(why, n, "cannot start the coordinator thread");
        goto fail;
    }
    k->threaded = 1;
    return k;
fail:
    ccs_dsx_coord_free(k);
    return NULL;
}

void ccs_dsx_coord_stats(struct ccs_dsx_coord *k, struct ccs_dsx_coord_stats *out)
{
    pthread_mutex_lock(&k->lock);
    *out = k->stats;
    pthread_mutex_unlock(&k->lock);

    clockid_t cid;
    struct timespec ts;
    if (k->threaded && pthread_getcpuclockid(k->th, &cid) == 0 && clock_gettime(cid, &ts) == 0)
        out->cpu_s = ts.tv_sec + ts.tv_nsec / 1e9;
}

int ccs_dsx_coord_finish(struct ccs_dsx_coord *k, int timeout_ms)
{
    atomic_store(&k->finishing, timeout_ms > 1 ? timeout_ms : 1);
    /* The thread answers within an evaluation period after the deadline. */
    uint64_t give_up = ccs_clock_mono_ms() + (uint64_t)timeout_ms + 2u * (uint64_t)k->period_ms + 100u;
    while (!atomic_load(&k->finished) && ccs_clock_mono_ms() < give_up)
        ccs_sleep_ms(5);
    return atomic_load(&k->finished) == 1;
}

void ccs_dsx_coord_stop(struct ccs_dsx_coord *k)
{
    if (!k)
        return;
    atomic_store(&k->stop, 1);
    if (k->threaded)
        pthread_join(k->th, NULL);
    ccs_dsx_coord_refused_log(k, NULL, NULL, 0, 2);
    ccs_dsx_coord_free(k);
}
