/*
 * desync_fold.c - the coordinator's agreements: each (communicator, key) a
 * slot of an open-addressing table (linear probing, tombstones), holding
 * the bitmap of the members that gave their value and the max and min so
 * far.  Finished agreements are kept a while (a member's value that comes
 * again is then a repeat, not a new agreement) and forgotten when room is
 * needed; pending ones are bounded (CCS_DSX_FOLDS_PENDING).  Only the
 * coordinator's thread uses it.
 */
#include "desync_fold.h"
#include "fingerprint.h"
#include <stdlib.h>
#include <string.h>

struct fold {
    uint64_t comm, key, max, min;
    uint64_t touched_ms;
    int32_t size, n;
    int32_t opener; /* the peer that opened it (its share, CCS_DSX_FOLDS_PER_PEER) */
    uint64_t *bits; /* NULL: free slot (tomb: freed slot in a probe chain) */
    uint8_t done, tomb;
};

/* Slots: a power of two, at most half of them in use or tombs. */
#define SLOTS_MIN 64
#define FINISHED_KEPT 1024 /* finished agreements kept at most (the oldest go first) */

struct ccs_dsx_folds {
    struct fold *s;
    size_t cap, used, tombs, pending, finished;
    size_t bits_bytes;
    uint16_t *opened; /* [npeers] pending agreements each peer opened */
    int32_t npeers;
};

struct ccs_dsx_folds *ccs_dsx_folds_new(void)
{
    return calloc(1, sizeof(struct ccs_dsx_folds));
}

static void drop(struct ccs_dsx_folds *t, struct fold *f)
{
    t->bits_bytes -= ((size_t)f->size + 63) / 64 * 8;
    free(f->bits);
    f->bits = NULL;
    f->tomb = 1;
    t->used--;
    t->tombs++;
    if (f->done) {
        t->finished--;
    } else {
        t->pending--;
        t->opened[f->opener]--;
    }
}

void ccs_dsx_folds_free(struct ccs_dsx_folds *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->s[i].bits);
    free(t->s);
    free(t->opened);
    free(t);
}

static size_t slot_of(const struct ccs_dsx_folds *t, uint64_t comm, uint64_t key)
{
    return (size_t)(ccs_hash_mix(comm, key) & (t->cap - 1));
}

/* The slot of (COMM, KEY), or NULL. */
static struct fold *find(struct ccs_dsx_folds *t, uint64_t comm, uint64_t key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = slot_of(t, comm, key), n = 0; n < t->cap; n++, i = (i + 1) & (t->cap - 1)) {
        struct fold *f = &t->s[i];
        if (!f->bits && !f->tomb)
            return NULL;
        if (f->bits && f->comm == comm && f->key == key)
            return f;
    }
    return NULL;
}

/* Rebuilds the table with NC slots (tombs gone).  0, or -1 (no memory). */
static int rehash(struct ccs_dsx_folds *t, size_t nc)
{
    struct fold *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        struct fold *f = &t->s[i];
        if (!f->bits)
            continue;
        size_t j = (size_t)(ccs_hash_mix(f->comm, f->key) & (nc - 1));
        while (ns[j].bits)
            j = (j + 1) & (nc - 1);
        ns[j] = *f;
    }
    free(t->s);
    t->s = ns;
    t->cap = nc;
    t->tombs = 0;
    return 0;
}

/* Forgets finished agreements beyond FINISHED_KEPT, the oldest first, and
 * pending ones untouched since STALE_MS before NOW when WANT_ROOM. */
static int u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void forget(struct ccs_dsx_folds *t, uint64_t now, int want_room)
{
    /* One pass: the time of the newest agreement to go is the excess-th
     * oldest finished one's (of equal times, any go); without memory for
     * the times, one at a time below. */
    size_t excess = t->finished > FINISHED_KEPT ? t->finished - FINISHED_KEPT : 0;
    uint64_t *times = excess ? malloc(t->finished * sizeof *times) : NULL;
    if (times) {
        size_t n = 0;
        for (size_t i = 0; i < t->cap && n < t->finished; i++)
            if (t->s[i].bits && t->s[i].done)
                times[n++] = t->s[i].touched_ms;
        if (n >= excess) {
            qsort(times, n, sizeof *times, u64_cmp);
            uint64_t cut = times[excess - 1];
            for (size_t i = 0; i < t->cap && t->finished > FINISHED_KEPT; i++)
                if (t->s[i].bits && t->s[i].done && t->s[i].touched_ms <= cut) /* ties: any of them */
                    drop(t, &t->s[i]);
        }
        free(times);
    }
    while (t->finished > FINISHED_KEPT) {
        struct fold *old = NULL;
        for (size_t i = 0; i < t->cap; i++)
            if (t->s[i].bits && t->s[i].done && (!old || t->s[i].touched_ms < old->touched_ms))
                old = &t->s[i];
        if (!old)
            break;
        drop(t, old);
    }
    if (!want_room)
        return;
    for (size_t i = 0; i < t->cap; i++) {
        struct fold *f = &t->s[i];
        if (f->bits && !f->done && now - f->touched_ms >= CCS_DSX_FOLD_STALE_MS)
            drop(t, f);
    }
}

/* A new slot for (COMM, KEY), or NULL (no room, no memory). */
static struct fold *insert(struct ccs_dsx_folds *t, uint64_t comm, uint64_t key, uint64_t now)
{
    if (t->pending >= CCS_DSX_FOLDS_PENDING) {
        forget(t, now, 1);
        if (t->pending >= CCS_DSX_FOLDS_PENDING)
            return NULL;
    }
    if ((t->used + t->tombs + 1) * 2 > t->cap) {
        size_t nc = t->cap ? t->cap : SLOTS_MIN; /* the same size when tombs made it full */
        while ((t->used + 1) * 4 > nc)
            nc *= 2;
        if (rehash(t, nc) != 0)
            return NULL;
    }
    size_t i = slot_of(t, comm, key);
    while (t->s[i].bits)
        i = (i + 1) & (t->cap - 1);
    struct fold *f = &t->s[i];
    if (f->tomb)
        t->tombs--;
    memset(f, 0, sizeof *f);
    return f;
}

int ccs_dsx_folds_add(struct ccs_dsx_folds *t, const struct ccs_dsx_agree *a, int32_t wsize, int32_t peer,
                      uint64_t now, struct ccs_dsx_agree *res)
{
    if (a->size <= 0 || a->size > wsize || a->crank < 0 || a->crank >= a->size || a->n != 1 || peer < 0 ||
        peer >= wsize)
        return 0;
    if (!t->opened) {
        if (!(t->opened = calloc((size_t)wsize, sizeof *t->opened)))
            return -1;
        t->npeers = wsize;
    }
    if (peer >= t->npeers)
        return 0;
    struct fold *f = find(t, a->comm, a->key);
    if (!f) {
        if (t->opened[peer] >= CCS_DSX_FOLDS_PER_PEER) {
            forget(t, now, 1);
            if (t->opened[peer] >= CCS_DSX_FOLDS_PER_PEER)
                return -1;
        }
        f = insert(t, a->comm, a->key, now);
        if (!f)
            return -1;
        size_t nb = ((size_t)a->size + 63) / 64 * 8;
        f->bits = calloc(1, nb);
        if (!f->bits)
            return -1;
        t->bits_bytes += nb;
        t->used++;
        t->pending++;
        t->opened[peer]++;
        f->opener = peer;
        f->comm = a->comm;
        f->key = a->key;
        f->size = a->size;
        f->min = UINT64_MAX;
    }
    f->touched_ms = now;
    if (f->done || a->size != f->size || (f->bits[a->crank / 64] >> (a->crank % 64) & 1))
        return 0;
    f->bits[a->crank / 64] |= 1ull << (a->crank % 64);
    f->n++;
    f->max = a->max > f->max ? a->max : f->max;
    f->min = a->min < f->min ? a->min : f->min;
    if (f->n < f->size)
        return 0;
    f->done = 1;
    t->pending--;
    t->opened[f->opener]--;
    t->finished++;
    *res = (struct ccs_dsx_agree){.comm = f->comm, .key = f->key, .max = f->max, .min = f->min, .crank = 0,
                                  .size = f->size, .n = (uint32_t)f->n};
    if (t->finished > FINISHED_KEPT + FINISHED_KEPT / 4) /* now and then, not per value */
        forget(t, now, 0);
    return 1;
}

size_t ccs_dsx_folds_count(const struct ccs_dsx_folds *t) { return t->used; }
size_t ccs_dsx_folds_pending(const struct ccs_dsx_folds *t) { return t->pending; }
size_t ccs_dsx_folds_bytes(const struct ccs_dsx_folds *t) { return sizeof *t + t->cap * sizeof *t->s + t->bits_bytes; }
