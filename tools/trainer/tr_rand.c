/*
 * tr_rand.c - deterministic synthetic data and initial parameters.
 *
 * Every number is a hash of its indices (seed, step, global row, column,
 * feature), so each rank generates exactly its own rows of the global batch,
 * and a one-process reference generates the same rows, in any order.
 */
#include "tr_math.h"

#include <math.h>

void tr_layout_of(const struct tr_shape *sh, struct tr_layout *out)
{
    out->w1 = 0;
    out->b1 = out->w1 + (size_t)sh->dhid * sh->din;
    out->w2 = out->b1 + (size_t)sh->dhid;
    out->b2 = out->w2 + (size_t)sh->dout * sh->dhid;
    out->count = out->b2 + (size_t)sh->dout;
}

/* splitmix64's finaliser over h + v: a cheap hash with full avalanche. */
uint64_t tr_mix(uint64_t h, uint64_t v)
{
    uint64_t z = h + 0x9e3779b97f4a7c15ULL * (v + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tr_uniform(uint64_t key)
{
    /* 53 random bits, shifted by half a unit so 0 and 1 never occur. */
    return ((double)(tr_mix(key, 0x55) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double tr_gaussian(uint64_t key)
{
    /* Box-Muller from two independent uniforms of the same key. */
    double u1 = tr_uniform(tr_mix(key, 1)), u2 = tr_uniform(tr_mix(key, 2));
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static uint64_t key_of(uint64_t seed, uint64_t step, uint64_t row, int col, int k)
{
    return tr_mix(tr_mix(tr_mix(tr_mix(seed, step), row), (uint64_t)col), (uint64_t)k);
}

void tr_data_row(uint64_t seed, uint64_t step, uint64_t row, int col, int din, double *out)
{
    for (int k = 0; k < din; k++) {
        double anchor_shifted = tr_gaussian(key_of(seed, step, row, 0, (k + (col > 0 ? col : 0)) % din));
        double noise = tr_gaussian(key_of(seed, step, row, col, k));
        if (col == 0)
            out[k] = noise;
        else if (col == 1)
            out[k] = 0.9 * anchor_shifted + 0.3 * noise;
        else
            out[k] = 0.5 * anchor_shifted + 0.9 * noise;
    }
}

void tr_param_init(uint64_t seed, const struct tr_shape *sh, double *p)
{
    struct tr_layout L;
    tr_layout_of(sh, &L);
    uint64_t base = tr_mix(seed, 0x1417);
    double k1 = 1.0 / sqrt((double)sh->din), k2 = 1.0 / sqrt((double)sh->dhid);
    for (size_t i = 0; i < L.count; i++) {
        double k = i < L.w2 ? k1 : k2;
        p[i] = k * (2.0 * tr_uniform(tr_mix(base, i)) - 1.0);
    }
}
