/*
 * desync_agg.c - the tree's fold of a group's statuses, its wire form and
 * the root's comparison of the folds (desync_agg.h; docs/desync.md, "The
 * tree").  Everything a peer sends is checked as in desync_proto.c;
 * fuzzed by tests/fuzz/fuzz_dsx_proto.c.
 */
#include "desync_agg.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct ccs_dsx_agg_comm) == 192, "the fold's wire size (docs/desync.md)");
_Static_assert(sizeof(struct ccs_dsx_agg_head) == 40, "the AGG head's wire size (docs/desync.md)");

/* The index of the fold's entry of communicator ID, made when there is
 * room; -1 when the table is full. */
static int slot_of(struct ccs_dsx_agg *a, uint64_t id)
{
    for (uint32_t i = 0; i < a->head.ncomm; i++)
        if (a->comm[i].id == id)
            return (int)i;
    if (a->head.ncomm == CCS_DSX_AGG_MAXCOMM)
        return -1;
    int i = (int)a->head.ncomm++;
    memset(&a->comm[i], 0, sizeof a->comm[i]);
    a->comm[i].id = id;
    a->comm[i].done_min = a->comm[i].issued_min = UINT64_MAX;
    a->w[i].nh = a->w[i].nb = 0;
    return i;
}

/* The fold of COMM in A (folds in increasing id order), or NULL. */
static struct ccs_dsx_agg_comm *find_mut(struct ccs_dsx_agg *a, uint64_t comm)
{
    uint32_t lo = 0, hi = a->head.ncomm;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a->comm[mid].id < comm)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->head.ncomm && a->comm[lo].id == comm ? &a->comm[lo] : NULL;
}

static void count_hash(struct ccs_dsx_agg *a, int i, uint64_t seq, uint64_t hash)
{
    if (!seq)
        return;
    for (uint32_t j = 0; j < a->w[i].nh; j++)
        if (a->w[i].h[j].seq == seq && a->w[i].h[j].hash == hash) {
            a->w[i].h[j].n++;
            return;
        }
    /* Beyond CCS_DSX_AGG_CAND distinct pairs (members far apart) the rest
     * is not counted this period: a member judged against none of the
     * kept seqs is neither listed nor counted in the hashes. */
    if (a->w[i].nh < CCS_DSX_AGG_CAND)
        a->w[i].h[a->w[i].nh++] = (struct ccs_dsx_agg_hash){.seq = seq, .hash = hash, .n = 1};
}

static void count_blocked(struct ccs_dsx_agg *a, int i, const struct ccs_dsx_comm *e)
{
    for (uint32_t j = 0; j < a->w[i].nb; j++)
        if (a->w[i].b[j].seq == e->blocked.seq && a->w[i].b[j].fp == e->blocked.fp) {
            a->w[i].b[j].n++;
            a->w[i].b[j].ms = e->blocked_ms > a->w[i].b[j].ms ? e->blocked_ms : a->w[i].b[j].ms;
            return;
        }
    if (a->w[i].nb < CCS_DSX_AGG_BCAND) {
        a->w[i].b[a->w[i].nb].seq = e->blocked.seq;
        a->w[i].b[a->w[i].nb].fp = e->blocked.fp;
        a->w[i].b[a->w[i].nb].n = 1;
        a->w[i].b[a->w[i].nb].ms = e->blocked_ms;
        a->w[i].nb++;
    }
}

/* Pass 1 over one rank's entries.  0, or -1 when an entry found no room
 * (the rank is then listed). */
/* Whether entry K of ST is folded: not a second entry of one id (each
 * member counted once) nor a communicator larger than the world (its
 * members publish nowhere here; the rules leave it out too). */
static int foldable(const struct ccs_dsx_status *st, uint32_t k)
{
    if (st->comm[k].size > st->wsize)
        return 0;
    for (uint32_t j = 0; j < k; j++)
        if (st->comm[j].id == st->comm[k].id)
            return 0;
    return 1;
}

static int accumulate(struct ccs_dsx_agg *a, const struct ccs_dsx_status *st)
{
    int full = 0;
    for (uint32_t k = 0; k < st->ncomm && k < CCS_DSX_MAXCOMM; k++) {
        const struct ccs_dsx_comm *e = &st->comm[k];
        if (!foldable(st, k))
            continue;
        int i = slot_of(a, e->id);
        if (i < 0) {
            full = 1;
            continue;
        }
        struct ccs_dsx_agg_comm *c = &a->comm[i];
        c->size = e->size > c->size ? e->size : c->size;
        c->members++;
        c->done_min = e->done < c->done_min ? e->done : c->done_min;
        c->done_max = e->done > c->done_max ? e->done : c->done_max;
        c->issued_min = e->issued < c->issued_min ? e->issued : c->issued_min;
        c->issued_max = e->issued > c->issued_max ? e->issued : c->issued_max;
        /* One pair per seq and member (a completed seq on a checkpoint is
         * that checkpoint). */
        count_hash(a, i, e->done, e->hash);
        if (e->cp_seq[0] != e->done)
            count_hash(a, i, e->cp_seq[0], e->cp_hash[0]);
        if (e->cp_seq[1] != e->cp_seq[0] && e->cp_seq[1] != e->done)
            count_hash(a, i, e->cp_seq[1], e->cp_hash[1]);
        if (e->state == CCS_DSX_BLOCKED)
            count_blocked(a, i, e);
    }
    return full ? -1 : 0;
}

/* Members holding a pair at SEQ among W's candidates. */
static uint32_t at_seq(const struct ccs_dsx_agg_hash *h, uint32_t nh, uint64_t seq)
{
    uint32_t n = 0;
    for (uint32_t j = 0; j < nh; j++)
        n += h[j].seq == seq ? h[j].n : 0;
    return n;
}

/* Keeps the seqs most members share (the newest among equals), each with
 * the hash most members hold there, and the most common blocked
 * operation. */
static void settle(struct ccs_dsx_agg *a, int i)
{
    struct ccs_dsx_agg_comm *c = &a->comm[i];
    const struct ccs_dsx_agg_hash *h = a->w[i].h;
    uint32_t nh = a->w[i].nh;
    uint64_t kept[CCS_DSX_AGG_HASHES];
    uint32_t nk = 0;
    while (nk < CCS_DSX_AGG_HASHES) {
        uint64_t best = 0;
        uint32_t bn = 0;
        for (uint32_t j = 0; j < nh; j++) {
            int taken = 0;
            for (uint32_t q = 0; q < nk; q++)
                taken |= kept[q] == h[j].seq;
            uint32_t n = taken ? 0 : at_seq(h, nh, h[j].seq);
            if (n > bn || (n == bn && n && h[j].seq > best))
                best = h[j].seq, bn = n;
        }
        if (!bn)
            break;
        kept[nk++] = best;
    }
    /* In increasing seq order on the wire. */
    for (uint32_t x = 1; x < nk; x++)
        for (uint32_t y = x; y > 0 && kept[y - 1] > kept[y]; y--) {
            uint64_t t = kept[y];
            kept[y] = kept[y - 1], kept[y - 1] = t;
        }
    c->nhash = nk;
    for (uint32_t q = 0; q < nk; q++) {
        struct ccs_dsx_agg_hash m = {.seq = kept[q]};
        for (uint32_t j = 0; j < nh; j++)
            if (h[j].seq == kept[q] && (h[j].n > m.n || (h[j].n == m.n && h[j].hash < m.hash)))
                m.hash = h[j].hash, m.n = h[j].n;
        c->hash[q] = m;
    }
    for (uint32_t j = 0; j < a->w[i].nb; j++) {
        if (a->w[i].b[j].n > c->nblocked || (a->w[i].b[j].n == c->nblocked && a->w[i].b[j].seq < c->block_seq)) {
            c->nblocked = a->w[i].b[j].n;
            c->block_seq = a->w[i].b[j].seq;
            c->block_fp = a->w[i].b[j].fp;
            c->block_ms = a->w[i].b[j].ms;
        }
    }
    c->block_ms_min = c->nblocked ? UINT32_MAX : 0;
    if (c->done_min == UINT64_MAX)
        c->done_min = c->issued_min = 0;
}

/* E is blocked in its fold C's operation. */
static int in_mode(const struct ccs_dsx_agg_comm *c, const struct ccs_dsx_comm *e)
{
    return e->state == CCS_DSX_BLOCKED && c->nblocked && e->blocked.seq == c->block_seq &&
           e->blocked.fp == c->block_fp;
}

/* Whether, at SEQ, another hash than HASH is held by more members (or as
 * many, and is the lower: the one settle keeps) among the candidates. */
static int minority(const struct ccs_dsx_agg_hash *h, uint32_t nh, uint64_t seq, uint64_t hash)
{
    uint32_t mine = 0;
    for (uint32_t j = 0; j < nh; j++)
        if (h[j].seq == seq && h[j].hash == hash)
            mine = h[j].n;
    for (uint32_t j = 0; j < nh; j++)
        if (h[j].seq == seq && h[j].hash != hash && (h[j].n > mine || (h[j].n == mine && h[j].hash < hash)))
            return 1;
    return 0;
}

/* Whether E differs from its communicator's fold C (pass 2; W: its
 * candidates): a hash that is not the majority's at any of its seqs (not
 * only the kept ones: the odd rank is listed in the period its completed
 * seq shows it), blocked elsewhere or long not blocked with the group. */
static int differs(const struct ccs_dsx_agg_comm *c, const struct ccs_dsx_agg_hash *h, uint32_t nh,
                   const struct ccs_dsx_comm *e, uint32_t list_ms)
{
    uint64_t seq[3] = {e->done, e->cp_seq[0], e->cp_seq[1]}, hash[3] = {e->hash, e->cp_hash[0], e->cp_hash[1]};
    for (int p = 0; p < 3; p++)
        if (seq[p] && minority(h, nh, seq[p], hash[p]))
            return 1;
    int waits = in_mode(c, e);
    if (e->state == CCS_DSX_BLOCKED && !waits)
        return 1;
    /* The group has waited long in this communicator: those not waiting
     * with it are what the root's blocked rule must see (behind, or
     * blocked elsewhere). */
    return !waits && c->nblocked && c->block_ms >= list_ms;
}

void ccs_dsx_agg_fold(const struct ccs_dsx_status *const *st, size_t n, uint32_t list_ms, struct ccs_dsx_agg *a,
                      uint32_t *listed)
{
    a->head.ncomm = a->head.nlisted = a->head.nranks = 0;
    size_t nl = 0;
    for (size_t r = 0; r < n; r++) {
        if (!st[r])
            continue;
        a->head.nranks++;
        if (accumulate(a, st[r]) != 0)
            listed[nl++] = (uint32_t)r;
    }
    for (uint32_t i = 0; i < a->head.ncomm; i++)
        settle(a, (int)i);
    size_t full = nl, cur = 0; /* listed[0..full): no room for an entry (increasing) */
    for (size_t r = 0; r < n; r++) {
        const struct ccs_dsx_status *s = st[r];
        if (cur < full && listed[cur] == r) {
            cur++;
            continue;
        }
        if (!s)
            continue;
        int list = s->life != CCS_DSX_ALIVE || s->boundary || s->foreign_ms;
        for (uint32_t k = 0; k < s->ncomm && k < CCS_DSX_MAXCOMM; k++) {
            if (!foldable(s, k))
                continue;
            int i = slot_of(a, s->comm[k].id); /* found: pass 1 made it */
            struct ccs_dsx_agg_comm *c = &a->comm[i];
            if (c->members >= (uint32_t)c->size) /* entirely in the group: not folded */
                continue;
            int odd = differs(c, a->w[i].h, a->w[i].nh, &s->comm[k], list_ms);
            c->odd += odd;
            list |= odd;
            const struct ccs_dsx_comm *e = &s->comm[k];
            if (e->state == CCS_DSX_BLOCKED && c->nblocked && e->blocked.seq == c->block_seq &&
                e->blocked.fp == c->block_fp && e->blocked_ms < c->block_ms_min)
                c->block_ms_min = e->blocked_ms;
        }
        if (list) {
            listed[nl++] = (uint32_t)r;
            continue;
        }
        for (uint32_t k = 0; k < s->ncomm && k < CCS_DSX_MAXCOMM; k++) {
            struct ccs_dsx_agg_comm *c = foldable(s, k) ? &a->comm[slot_of(a, s->comm[k].id)] : NULL;
            if (c && in_mode(c, &s->comm[k]))
                c->rest_blocked++;
        }
    }
    /* Listed ranks of a full table were passed over above: their mode
     * members' shortest block is still counted. */
    for (size_t x = 0; x < nl; x++) {
        const struct ccs_dsx_status *s = st[listed[x]];
        for (uint32_t k = 0; k < s->ncomm && k < CCS_DSX_MAXCOMM; k++)
            for (uint32_t i = 0; foldable(s, k) && i < a->head.ncomm; i++)
                if (a->comm[i].id == s->comm[k].id) {
                    struct ccs_dsx_agg_comm *c = &a->comm[i];
                    const struct ccs_dsx_comm *e = &s->comm[k];
                    c->listed++;
                    if (e->state == CCS_DSX_BLOCKED && c->nblocked && e->blocked.seq == c->block_seq &&
                        e->blocked.fp == c->block_fp && e->blocked_ms < c->block_ms_min)
                        c->block_ms_min = e->blocked_ms;
                }
    }
    /* Only communicators with members outside the group travel, in
     * increasing id order (the decoder insists: no id twice). */
    uint32_t m = 0;
    for (uint32_t i = 0; i < a->head.ncomm; i++)
        if (a->comm[i].members < (uint32_t)a->comm[i].size)
            a->comm[m++] = a->comm[i];
    a->head.ncomm = m;
    for (uint32_t x = 1; x < m; x++)
        for (uint32_t y = x; y > 0 && a->comm[y - 1].id > a->comm[y].id; y--) {
            struct ccs_dsx_agg_comm t = a->comm[y];
            a->comm[y] = a->comm[y - 1], a->comm[y - 1] = t;
        }
    a->head.nlisted = (uint32_t)nl;
}

void ccs_dsx_agg_list_asked(struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st, size_t n,
                            uint32_t *listed, uint8_t *mark, int (*want)(uint64_t, void *), void *arg)
{
    memset(mark, 0, n);
    for (uint32_t x = 0; x < a->head.nlisted; x++)
        mark[listed[x]] = CCS_DSX_AGG_ODD;
    for (uint32_t i = 0; i < a->head.ncomm; i++) {
        uint64_t id = a->comm[i].id;
        if (!want(id, arg))
            continue;
        for (size_t r = 0; r < n; r++) {
            const struct ccs_dsx_status *s = st[r];
            int holds = 0;
            for (uint32_t k = 0; s && k < s->ncomm && k < CCS_DSX_MAXCOMM && !holds; k++)
                holds = s->comm[k].id == id && foldable(s, k);
            if (!holds || mark[r])
                continue;
            mark[r] = CCS_DSX_AGG_REF;
            listed[a->head.nlisted++] = (uint32_t)r;
            for (uint32_t k = 0; k < s->ncomm && k < CCS_DSX_MAXCOMM; k++) {
                struct ccs_dsx_agg_comm *c = foldable(s, k) ? find_mut(a, s->comm[k].id) : NULL;
                if (!c)
                    continue;
                c->listed++;
                c->rest_blocked -= in_mode(c, &s->comm[k]);
            }
            break;
        }
    }
}

size_t ccs_dsx_agg_encoded_size(const struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st,
                                const uint32_t *listed)
{
    size_t n = sizeof a->head + a->head.ncomm * sizeof a->comm[0];
    for (uint32_t i = 0; i < a->head.nlisted; i++)
        n += ccs_dsx_encoded_size(st[listed[i]]);
    return n;
}

size_t ccs_dsx_agg_encode(const struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st,
                          const uint32_t *listed, int (*keep_hist)(uint64_t, void *), void *arg, unsigned char *buf,
                          size_t cap)
{
    size_t o = sizeof a->head + a->head.ncomm * sizeof a->comm[0];
    if (cap < o)
        return 0;
    memcpy(buf, &a->head, sizeof a->head);
    memcpy(buf + sizeof a->head, a->comm, a->head.ncomm * sizeof a->comm[0]);
    for (uint32_t i = 0; i < a->head.nlisted; i++) {
        size_t w = ccs_dsx_encode_status(st[listed[i]], keep_hist, arg, buf + o, cap - o);
        if (!w)
            return 0;
        o += w;
    }
    return o;
}

static int fail(char *why, size_t n, const char *fmt, long long a, long long b)
{
    if (why && n)
        snprintf(why, n, fmt, a, b);
    return -1;
}

/* Checks fold C of a frame folding NRANKS statuses. */
static int check_fold(const struct ccs_dsx_agg_comm *c, uint32_t nranks, char *why, size_t n)
{
    if (c->size <= 0 || c->size > CCS_DSX_MAX_RANKS)
        return fail(why, n, "fold of communicator size %lld (1..%lld expected)", c->size, CCS_DSX_MAX_RANKS);
    /* Only communicators with members outside the group are folded. */
    if (!c->members || c->members >= (uint32_t)c->size || c->members > nranks)
        return fail(why, n, "fold of %lld members for a communicator of %lld (1..size-1, at most the ranks folded)",
                    c->members, c->size);
    if (c->issued_max > CCS_DSX_MAX_SEQ || c->done_min > c->done_max || c->issued_min > c->issued_max ||
        c->done_min > c->issued_min || c->done_max > c->issued_max)
        return fail(why, n, "fold's seqs inconsistent (done %lld..%lld, or beyond issued, or beyond 2^48)",
                    (long long)c->done_min, (long long)c->done_max);
    if (c->nblocked > c->members || c->listed > c->members || c->odd > c->listed)
        return fail(why, n, "fold has %lld blocked or listed of %lld members",
                    c->nblocked > c->listed ? c->nblocked : c->listed, c->members);
    if (c->rest_blocked > c->members - c->listed || c->rest_blocked > c->nblocked)
        return fail(why, n,
                    "fold counts %lld members blocked and not listed, beyond those blocked or not listed (%lld)",
                    c->rest_blocked, c->nblocked < c->members - c->listed ? c->nblocked : c->members - c->listed);
    if (!c->nblocked && (c->block_seq || c->block_fp || c->block_ms || c->block_ms_min))
        return fail(why, n, "fold names a blocked operation at seq %lld with %lld members blocked",
                    (long long)c->block_seq, c->nblocked);
    if (c->nblocked && (c->block_seq > c->issued_max || c->block_ms_min > c->block_ms))
        return fail(why, n, "fold's blocked operation at seq %lld beyond issued %lld (or its times inverted)",
                    (long long)c->block_seq, (long long)c->issued_max);
    if (c->nhash > CCS_DSX_AGG_HASHES)
        return fail(why, n, "fold of %lld hash groups, at most %lld", c->nhash, CCS_DSX_AGG_HASHES);
    for (uint32_t q = 0; q < c->nhash; q++) {
        const struct ccs_dsx_agg_hash *h = &c->hash[q];
        if (!h->seq || h->seq > c->done_max || !h->n || h->n > c->members)
            return fail(why, n, "fold's hash group at seq %lld held by %lld members is out of range",
                        (long long)h->seq, h->n);
        if (q && h->seq <= c->hash[q - 1].seq)
            return fail(why, n, "fold's hash groups not in increasing seq order (%lld after %lld)",
                        (long long)h->seq, (long long)c->hash[q - 1].seq);
    }
    return 0;
}

int ccs_dsx_agg_decode_folds(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_agg *a,
                             size_t *off, char *why, size_t whylen)
{
    if (len < sizeof a->head)
        return fail(why, whylen, "AGG frame of %lld bytes, at least %lld needed", (long long)len,
                    (long long)sizeof a->head);
    memcpy(&a->head, buf, sizeof a->head);
    const struct ccs_dsx_agg_head *h = &a->head;
    if (h->nranks > (uint32_t)wsize || h->nhosts > h->nranks || h->nlisted > h->nranks)
        return fail(why, whylen, "AGG frame folds %lld ranks (job of %lld) with more hosts or listed ranks",
                    h->nranks, wsize);
    if (h->ncomm > CCS_DSX_AGG_MAXCOMM)
        return fail(why, whylen, "AGG frame of %lld folds, at most %lld", h->ncomm, CCS_DSX_AGG_MAXCOMM);
    size_t o = sizeof a->head;
    if (len - o < (size_t)h->ncomm * sizeof a->comm[0])
        return fail(why, whylen, "AGG frame's %lld folds truncated (%lld bytes left)", h->ncomm,
                    (long long)(len - o));
    memcpy(a->comm, buf + o, (size_t)h->ncomm * sizeof a->comm[0]);
    o += (size_t)h->ncomm * sizeof a->comm[0];
    for (uint32_t i = 0; i < h->ncomm; i++) {
        if (check_fold(&a->comm[i], h->nranks, why, whylen) != 0)
            return -1;
        if (i && a->comm[i].id <= a->comm[i - 1].id)
            return fail(why, whylen, "AGG frame's folds not in increasing id order (%#llx after %#llx)",
                        (long long)a->comm[i].id, (long long)a->comm[i - 1].id);
        if (a->comm[i].size > wsize)
            return fail(why, whylen, "fold of a communicator of %lld ranks in a job of %lld", a->comm[i].size,
                        wsize);
    }
    *off = o;
    return 0;
}

int ccs_dsx_agg_decode(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_agg *a,
                       struct ccs_dsx_status *listed, size_t cap, char *why, size_t whylen)
{
    size_t o;
    if (ccs_dsx_agg_decode_folds(buf, len, wsize, a, &o, why, whylen) != 0)
        return -1;
    const struct ccs_dsx_agg_head *h = &a->head;
    if (h->nlisted > cap)
        return fail(why, whylen, "AGG frame lists %lld ranks, room for %lld", h->nlisted, (long long)cap);
    for (uint32_t i = 0; i < h->nlisted; i++) {
        size_t used = ccs_dsx_decode_status(buf + o, len - o, wsize, &listed[i], why, whylen);
        if (!used)
            return -1;
        o += used;
    }
    if (o != len)
        return fail(why, whylen, "AGG frame has %lld bytes after its %lld listed statuses", (long long)(len - o),
                    h->nlisted);
    return 0;
}

struct pair {
    uint64_t seq, hash, n;
    uint32_t fold;
};

static int cmp_pair(const void *x, const void *y)
{
    const struct pair *a = x, *b = y;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    return a->fold < b->fold ? -1 : a->fold > b->fold;
}

static const struct ccs_dsx_agg_comm *find(const struct ccs_dsx_agg *a, uint64_t comm)
{
    return find_mut((struct ccs_dsx_agg *)a, comm);
}

/* Hashes of the folds (P, NP pairs, sorted): the lowest seq where two
 * differ, its majority and the folds off it. */
static void compare_hashes(const struct pair *p, size_t np, struct ccs_dsx_agg_cmp *out)
{
    for (size_t i = 0; i < np;) {
        size_t j = i;
        while (j < np && p[j].seq == p[i].seq)
            j++;
        if (p[j - 1].hash != p[i].hash) {
            uint64_t best = 0, bn = 0;
            for (size_t x = i; x < j;) {
                size_t y = x;
                uint64_t n = 0;
                while (y < j && p[y].hash == p[x].hash)
                    n += p[y++].n;
                if (n > bn)
                    best = p[x].hash, bn = n;
                x = y;
            }
            out->differ_seq = p[i].seq;
            out->majority_hash = best;
            out->majority_n = bn;
            for (size_t x = i; x < j; x++)
                if (p[x].hash != best && out->ndiffer < CCS_DSX_AGG_DIFFER)
                    out->differ[out->ndiffer++] = p[x].fold;
            return;
        }
        i = j;
    }
}

int ccs_dsx_agg_compare(const struct ccs_dsx_agg *const *f, size_t nf, uint64_t comm, uint32_t block_ms,
                        struct ccs_dsx_agg_cmp *out)
{
    memset(out, 0, sizeof *out);
    struct pair *p = malloc((nf * CCS_DSX_AGG_HASHES + 1) * sizeof *p);
    size_t np = 0, held = 0;
    int blocked = 1, first = 1;
    uint64_t bseq = 0, bfp = 0;
    for (size_t i = 0; i < nf; i++) {
        const struct ccs_dsx_agg_comm *c = f[i] ? find(f[i], comm) : NULL;
        if (!c)
            continue;
        held++;
        out->members += c->members;
        out->listed += c->listed;
        out->size = c->size > out->size ? c->size : out->size;
        for (uint32_t q = 0; p && q < c->nhash; q++)
            p[np++] = (struct pair){c->hash[q].seq, c->hash[q].hash, c->hash[q].n, (uint32_t)i};
        /* Every member not listed blocked in one operation, long enough. */
        if (c->members - c->listed > c->nblocked || !c->nblocked || c->block_ms_min < block_ms ||
            (!first && (c->block_seq != bseq || c->block_fp != bfp)))
            blocked = 0;
        bseq = c->block_seq, bfp = c->block_fp, first = 0;
    }
    if (p) {
        qsort(p, np, sizeof *p, cmp_pair);
        compare_hashes(p, np, out);
        free(p);
    }
    out->blocked_all = held && blocked && out->members == (uint64_t)out->size;
    out->block_seq = out->blocked_all ? bseq : 0;
    return held > 0;
}

uint64_t ccs_dsx_agg_unseen(const struct ccs_dsx_agg *const *f, size_t nf, uint64_t comm, int32_t size,
                            uint64_t unseen, uint64_t direct)
{
    uint64_t members = 0, rest = 0, lo = UINT64_MAX;
    for (size_t i = 0; i < nf; i++) {
        const struct ccs_dsx_agg_comm *c = f[i] ? find(f[i], comm) : NULL;
        if (!c)
            continue;
        if (c->rest_blocked != c->members - c->listed)
            return 0;
        members += c->members;
        rest += c->rest_blocked;
        if (c->rest_blocked && c->block_seq < lo)
            lo = c->block_seq;
    }
    return members + direct == (uint64_t)size && rest == unseen && rest && lo != UINT64_MAX ? lo : 0;
}
