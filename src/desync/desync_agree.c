/*
 * desync_agree.c - the agreement service the side channel offers the core
 * (agree.h's ccs_agree_register; coalescing's auto mode asks it): every
 * member of a communicator puts its value into the host's shared memory,
 * reads the others' there, and takes the maximum and minimum once all are
 * in; across hosts the leaders forward the values to the coordinator,
 * which folds them and posts the result back (desync_coord.c).
 */
#include "desync.h"
#include "desync_state.h"
#include "verdicts.h"
#include "clock.h"
#include "comm.h"
#include <stdlib.h>
#include <string.h>

size_t ccs_dsx_agree_gather(size_t nlocal)
{
    size_t nag = 0;
    for (size_t i = 0; i < nlocal; i++) {
        if (ccs_ds.agree_cap < nag + CCS_DSX_SHM_NAGREE) {
            size_t nc = ccs_ds.agree_cap ? ccs_ds.agree_cap * 2 : 64;
            struct ccs_dsx_agree *nb = realloc(ccs_ds.agree_buf, nc * sizeof *nb);
            if (!nb)
                break;
            ccs_ds.agree_buf = nb;
            ccs_ds.agree_cap = nc;
        }
        struct ccs_dsx_agree got[CCS_DSX_SHM_NAGREE];
        int k = ccs_dsx_shm_agree_get(ccs_ds.shm, ccs_ds.local[i]->wrank, got);
        for (int j = 0; j < k; j++)
            if (got[j].comm)
                ccs_ds.agree_buf[nag++] = got[j];
    }
    return nag;
}

/* The values of (C, KEY) the host's ranks put into shared memory, folded:
 * 1 with *MAX and *MIN when every member's is there (each counted once:
 * BITS, a word per 64 members, marks those seen), else 0. */
static int fold_host_values(const struct ccs_comm *c, uint64_t key, uint64_t *bits, size_t words, uint64_t *max,
                            uint64_t *min)
{
    struct ccs_dsx_agree got[CCS_DSX_SHM_NAGREE];
    memset(bits, 0, words * sizeof *bits);
    int32_t n = 0;
    uint64_t mx = 0, mn = UINT64_MAX;
    for (int32_t r = 0; r < ccs_ds.world_size; r++) {
        int k = ccs_dsx_shm_agree_get(ccs_ds.shm, r, got);
        for (int j = 0; j < k; j++) {
            const struct ccs_dsx_agree *g = &got[j];
            if (g->comm != c->id || g->key != key || g->size != c->size || g->crank < 0 || g->crank >= c->size ||
                (bits[g->crank / 64] >> (g->crank % 64) & 1))
                continue;
            bits[g->crank / 64] |= 1ull << (g->crank % 64);
            n++;
            mx = g->max > mx ? g->max : mx;
            mn = g->min < mn ? g->min : mn;
        }
    }
    if (n != c->size)
        return 0;
    *max = mx;
    *min = mn;
    return 1;
}

int ccs_desync_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                         uint64_t *agreed_min, int timeout_ms)
{
    if (atomic_load(&ccs_ds.state) != CCS_DSX_DET_RUNNING || !c || !c->agreed || c->size <= 0 || c->rank < 0 ||
        c->rank >= c->size)
        return -1;
    if (c->size == 1) {
        *agreed_max = *agreed_min = mine;
        return 0;
    }
    struct ccs_dsx_agree a = {
        .comm = c->id, .key = key, .max = mine, .min = mine, .crank = c->rank, .size = c->size, .n = 1};
    pthread_mutex_lock(&ccs_ds.agree_lock);
    ccs_dsx_shm_agree_put(ccs_ds.shm, &a);
    pthread_mutex_unlock(&ccs_ds.agree_lock);
    size_t words = ((size_t)c->size + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    if (!bits)
        return -1;
    uint64_t deadline = ccs_clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    uint64_t verdicts = ccs_verdicts_seen();
    int rc = -1;
    for (;;) {
        /* A verdict means the job is desynchronised: what is waited for may
         * never come (a rank at its step boundary, docs/coalescing.md). */
        if (atomic_load(&ccs_ds.state) != CCS_DSX_DET_RUNNING || ccs_verdicts_seen() != verdicts)
            break;
        struct ccs_dsx_agree res;
        if (ccs_dsx_shm_find_agreed(ccs_ds.shm, c->id, key, &res) && (int32_t)res.n == c->size) {
            *agreed_max = res.max;
            *agreed_min = res.min;
            rc = 0;
            break;
        }
        if (fold_host_values(c, key, bits, words, agreed_max, agreed_min)) {
            rc = 0;
            /* For a member that looks later, when this rank's own value
             * may have made room for newer ones. */
            struct ccs_dsx_agree done = {.comm = c->id,
                                         .key = key,
                                         .max = *agreed_max,
                                         .min = *agreed_min,
                                         .crank = c->rank,
                                         .size = c->size,
                                         .n = (uint32_t)c->size};
            if (!ccs_ds.client && !ccs_dsx_shm_find_agreed(ccs_ds.shm, c->id, key, &res)) /* once */
                ccs_dsx_shm_post_agreed(ccs_ds.shm, &done);
            break;
        }
        if (ccs_clock_mono_ms() >= deadline)
            break;
        ccs_sleep_ms(1);
    }
    free(bits);
    return rc;
}
