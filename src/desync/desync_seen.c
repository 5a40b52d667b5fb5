/*
 * desync_seen.c - the set of verdicts already reported (desync_rules.h), and
 * the rules' timers: since when a (class, communicator, seq) was first
 * noted.  An open-addressing table that grows as needed.
 */
#include "desync_rules.h"
#include "desync_rules_ctx.h"
#include "fingerprint.h"
#include <stdlib.h>

struct ccs_dsx_seen {
    uint64_t *key, *val;
    size_t cap, n;
};

struct ccs_dsx_seen *ccs_dsx_seen_new(void)
{
    return calloc(1, sizeof(struct ccs_dsx_seen));
}

void ccs_dsx_seen_free(struct ccs_dsx_seen *s)
{
    if (!s)
        return;
    free(s->key);
    free(s->val);
    free(s);
}

static uint64_t seen_key(uint32_t cls, uint64_t comm, uint64_t seq)
{
    return ccs_hash_mix(ccs_hash_mix(cls, comm), seq) | 1;
}

/* Slot of KEY (inserting it with VAL when absent); NULL when out of memory. */
static uint64_t *seen_slot(struct ccs_dsx_seen *s, uint64_t key, uint64_t val, int *inserted)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        uint64_t *nk = calloc(nc, sizeof *nk), *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->key[i]) {
                size_t j = s->key[i] & (nc - 1);
                while (nk[j])
                    j = (j + 1) & (nc - 1);
                nk[j] = s->key[i];
                nv[j] = s->val[i];
            }
        free(s->key);
        free(s->val);
        s->key = nk;
        s->val = nv;
        s->cap = nc;
    }
    size_t j = key & (s->cap - 1);
    while (s->key[j] && s->key[j] != key)
        j = (j + 1) & (s->cap - 1);
    *inserted = !s->key[j];
    if (!s->key[j]) {
        s->key[j] = key;
        s->val[j] = val;
        s->n++;
    }
    return &s->val[j];
}

int ccs_dsx_seen_has(const struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq)
{
    if (!s->cap)
        return 0;
    uint64_t key = seen_key(cls, comm, seq);
    size_t j = key & (s->cap - 1);
    while (s->key[j] && s->key[j] != key)
        j = (j + 1) & (s->cap - 1);
    return s->key[j] == key;
}

int ccs_dsx_seen_add(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq)
{
    int ins = 0;
    return seen_slot(s, seen_key(cls, comm, seq), 0, &ins) ? ins : 0;
}

/* First time (CLS, COMM, SEQ) was noted; notes NOW if never. */
uint64_t ccs_dsx_seen_since(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq, uint64_t now)
{
    int ins = 0;
    uint64_t *v = seen_slot(s, seen_key(cls, comm, seq), now, &ins);
    return v ? *v : now;
}

/* Key class of the last time a held (CLS, COMM, SEQ) was noted. */
#define HELD_LAST 0x80000000u

uint64_t ccs_dsx_seen_held(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq, uint64_t now,
                           uint64_t gap_ms)
{
    int ins = 0;
    uint64_t *first = seen_slot(s, seen_key(cls, comm, seq), now, &ins);
    if (!first)
        return now;
    uint64_t *last = seen_slot(s, seen_key(cls | HELD_LAST, comm, seq), now, &ins);
    if (!last)
        return now;
    /* (seen_slot may have grown the table: FIRST is looked up again) */
    first = seen_slot(s, seen_key(cls, comm, seq), now, &ins);
    if (!first)
        return now;
    if (now - *last > gap_ms)
        *first = now; /* not noted for a while: it held no longer, and starts again */
    *last = now;
    return *first;
}
