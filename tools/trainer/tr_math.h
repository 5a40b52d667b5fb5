/*
 * tr_math.h - the trainer's numerics as pure functions: the encoder, the L2
 * normalisation, the losses with their gradients with respect to the
 * embeddings, the optimizers.  No communication, no global state, so the
 * Check unit tests link this library alone (no MPI) and compare every
 * analytic gradient with finite differences.
 *
 * Every function exists twice: name_d (double) and name_f (float), from one
 * source, tr_math.inc.  Matrices are row-major; "rows" are samples.
 */
#ifndef TR_MATH_H
#define TR_MATH_H

#include <stddef.h>
#include <stdint.h>

/* Encoder sizes: x (din) -> h = tanh(W1 x + b1) (dhid) -> z = W2 h + b2
 * (dout) -> e = z / max(|z|, TR_NORM_EPS). */
struct tr_shape {
    int din, dhid, dout;
};
#define TR_NORM_EPS 1e-12

/* Offsets of the encoder's tensors in the flat parameter vector, in the
 * order they are registered (W1, b1, W2, b2); the count is the total. */
struct tr_layout {
    size_t w1, b1, w2, b2, count;
};
void tr_layout_of(const struct tr_shape *sh, struct tr_layout *out);

/* Counter-based random numbers: the same key gives the same number on any
 * rank, so a row of data or a parameter is a function of its indices. */
uint64_t tr_mix(uint64_t h, uint64_t v);
double tr_uniform(uint64_t key);  /* in (0, 1) */
double tr_gaussian(uint64_t key); /* N(0, 1) */

/* Row ROW (global index) of column COL at step STEP: the anchor (col 0) is
 * Gaussian, the positive (col 1) a noisy cyclic shift of the anchor, a hard
 * negative (col >= 2) a weaker shift of it plus more noise. */
void tr_data_row(uint64_t seed, uint64_t step, uint64_t row, int col, int din, double *out);

/* Initial encoder parameters as torch.nn.Linear draws them: U(-k, k) with
 * k = 1/sqrt(fan_in).  Writes the layout's count values. */
void tr_param_init(uint64_t seed, const struct tr_shape *sh, double *p);

#define TR_MATH_DECLARE(R, S)                                                                                      \
    /* Forward of M rows X (m x din): H (m x dhid) after tanh, E (m x dout)                                        \
     * normalised, NORM (m) the clamped norms of z.  H, E, NORM are kept for                                       \
     * the backward; a caller that does not back-propagate passes scratch. */                                      \
    void tr_enc_forward##S(const struct tr_shape *sh, const R *p, int m, const R *x, R *h, R *e, R *norm);         \
    /* dZ from dE through e = z/|z|: dz = (de - e (e.de)) / |z|.  DZ may alias DE. */                              \
    void tr_l2norm_backward##S(int m, int d, const R *e, const R *norm, const R *de, R *dz);                       \
    /* Accumulates into G (flat, layout order) the parameter gradient of                                           \
     * sum(E * DE) for the rows X, given the kept H, E, NORM.  WORK holds at                                       \
     * least m*(dout+dhid) values.  Returns 0. */                                                                  \
    int tr_enc_backward##S(const struct tr_shape *sh, const R *p, int m, const R *x, const R *h, const R *e,       \
                           const R *norm, const R *de, R *g, R *work);                                             \
    /* MNRL / InfoNCE: query i's positive is document POS_OFF + i; loss =                                          \
     * sum_i (logsumexp_j s_ij - s_i,pos) / DENOM with s = SCALE q.d.                                              \
     * Writes dL/dQ (nq x d) and dL/dD (nd x d) (either may be NULL) and the                                       \
     * loss.  Returns 0, or -1 when out of memory. */                                                              \
    int tr_mnrl##S(int nq, int nd, int d, const R *q, const R *docs, int pos_off, double scale, double denom,      \
                   double *loss, R *dq, R *dd);                                                                    \
    /* SigLIP block: z_ij = exp(TP) q_i.d_j + BIAS, label +1 when j = POS_OFF + i                                  \
     * (POS_OFF < 0: none), loss = sum_ij softplus(-y z) / DENOM.  ADDS to                                         \
     * *LOSS, DQ, DD, *DTP, *DB (each may be NULL).  Returns 0 or -1. */                                           \
    int tr_siglip##S(int nq, int nd, int d, const R *q, const R *docs, int pos_off, double tp, double bias,        \
                     double denom, double *loss, R *dq, R *dd, double *dtp, double *db);                           \
    /* SGD with momentum: v = mu v + g; p -= lr v. */                                                              \
    void tr_sgd##S(size_t n, R *p, const R *g, R *v, double lr, double mu);                                        \
    /* Adam (Kingma & Ba) with bias correction; T is the 1-based step. */                                          \
    void tr_adam##S(size_t n, R *p, const R *g, R *m, R *v, double lr, double b1, double b2, double eps, long t);  \
    /* Euclidean norm and weighted checksum (sum p_i (1 + i mod 7)), in double. */                                 \
    double tr_norm##S(size_t n, const R *x);                                                                       \
    double tr_checksum##S(size_t n, const R *x);

TR_MATH_DECLARE(double, _d)
TR_MATH_DECLARE(float, _f)

#endif /* TR_MATH_H */
