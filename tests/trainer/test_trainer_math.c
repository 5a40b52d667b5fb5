/*
 * test_trainer_math.c - Check tests of the trainer's numeric kernels
 * (tools/trainer/tr_math.h): every analytic gradient against central finite
 * differences in double, the float kernels against the double ones, the
 * optimizers against hand-computed steps, the data generator's determinism.
 */
#include "tr_math.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 1e-6

static void fill(double *x, size_t n, uint64_t seed, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * tr_gaussian(tr_mix(seed, i));
}

/* max |a - b| / max(max |b|, 1e-300) */
static double rel_err(const double *a, const double *b, size_t n)
{
    double num = 0, den = 1e-300;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / den;
}

/* ---------------------------------------------------------------- L2 norm */

static double l2_objective(int m, int d, const double *z, const double *w)
{
    double s = 0;
    for (int i = 0; i < m; i++) {
        double n = 0;
        for (int j = 0; j < d; j++)
            n += z[i * d + j] * z[i * d + j];
        n = sqrt(n);
        for (int j = 0; j < d; j++)
            s += z[i * d + j] / n * w[i * d + j];
    }
    return s;
}

START_TEST(l2norm_backward_matches_fd)
{
    enum { M = 3, D = 5 };
    double z[M * D], w[M * D], e[M * D], nrm[M], dz[M * D], fd[M * D];
    fill(z, M * D, 11, 1.0);
    fill(w, M * D, 12, 1.0);
    for (int i = 0; i < M; i++) {
        double n = 0;
        for (int j = 0; j < D; j++)
            n += z[i * D + j] * z[i * D + j];
        nrm[i] = sqrt(n);
        for (int j = 0; j < D; j++)
            e[i * D + j] = z[i * D + j] / nrm[i];
    }
    tr_l2norm_backward_d(M, D, e, nrm, w, dz);
    for (int k = 0; k < M * D; k++) {
        double keep = z[k];
        z[k] = keep + FD_H;
        double up = l2_objective(M, D, z, w);
        z[k] = keep - FD_H;
        double dn = l2_objective(M, D, z, w);
        z[k] = keep;
        fd[k] = (up - dn) / (2 * FD_H);
    }
    ck_assert_double_lt(rel_err(dz, fd, M * D), 1e-7);
}
END_TEST

/* ---------------------------------------------------------------- encoder */

static const struct tr_shape SH = {7, 9, 4};

static double enc_objective(const double *p, int m, const double *x, const double *w)
{
    double h[16 * 9], e[16 * 4], n[16], s = 0;
    tr_enc_forward_d(&SH, p, m, x, h, e, n);
    for (int i = 0; i < m * SH.dout; i++)
        s += e[i] * w[i];
    return s;
}

START_TEST(encoder_backward_matches_fd)
{
    enum { M = 6 };
    struct tr_layout L;
    tr_layout_of(&SH, &L);
    double *p = malloc(sizeof(double) * L.count), *g = calloc(L.count, sizeof(double));
    double *fd = malloc(sizeof(double) * L.count);
    double x[M * 7], w[M * 4], h[M * 9], e[M * 4], n[M], work[M * (9 + 4)];
    tr_param_init(5, &SH, p);
    fill(x, M * 7, 21, 1.0);
    fill(w, M * 4, 22, 1.0);
    tr_enc_forward_d(&SH, p, M, x, h, e, n);
    /* the output rows are unit vectors */
    for (int i = 0; i < M; i++) {
        double s = 0;
        for (int j = 0; j < 4; j++)
            s += e[i * 4 + j] * e[i * 4 + j];
        ck_assert_double_eq_tol(s, 1.0, 1e-12);
    }
    ck_assert_int_eq(tr_enc_backward_d(&SH, p, M, x, h, e, n, w, g, work), 0);
    for (size_t k = 0; k < L.count; k++) {
        double keep = p[k];
        p[k] = keep + FD_H;
        double up = enc_objective(p, M, x, w);
        p[k] = keep - FD_H;
        double dn = enc_objective(p, M, x, w);
        p[k] = keep;
        fd[k] = (up - dn) / (2 * FD_H);
    }
    ck_assert_double_lt(rel_err(g, fd, L.count), 1e-7);
    /* backward accumulates: a second call doubles the gradient */
    ck_assert_int_eq(tr_enc_backward_d(&SH, p, M, x, h, e, n, w, g, work), 0);
    for (size_t k = 0; k < L.count; k++)
        fd[k] *= 2;
    ck_assert_double_lt(rel_err(g, fd, L.count), 1e-7);
    free(p);
    free(g);
    free(fd);
}
END_TEST

/* ------------------------------------------------------------------- MNRL */

enum { NQ = 5, ND = 15, DD = 4 }; /* 5 queries, positive + 2 hard-negative columns */

static double mnrl_value(const double *q, const double *docs, int pos_off, double scale)
{
    double loss;
    ck_assert_int_eq(tr_mnrl_d(NQ, ND, DD, q, docs, pos_off, scale, NQ, &loss, NULL, NULL), 0);
    return loss;
}

/* The loss written out directly: mean of logsumexp_j s_ij - s_i,pos. */
static double mnrl_naive(const double *q, const double *docs, int pos_off, double scale)
{
    double total = 0;
    for (int i = 0; i < NQ; i++) {
        double s[ND], sum = 0;
        for (int j = 0; j < ND; j++) {
            s[j] = 0;
            for (int k = 0; k < DD; k++)
                s[j] += scale * q[i * DD + k] * docs[j * DD + k];
            sum += exp(s[j]);
        }
        total += log(sum) - s[pos_off + i];
    }
    return total / NQ;
}

static void check_fd(double *v, size_t n, double (*f)(void *), void *ctx, const double *analytic, double tol)
{
    double *fd = malloc(sizeof(double) * n);
    for (size_t k = 0; k < n; k++) {
        double keep = v[k];
        v[k] = keep + FD_H;
        double up = f(ctx);
        v[k] = keep - FD_H;
        double dn = f(ctx);
        v[k] = keep;
        fd[k] = (up - dn) / (2 * FD_H);
    }
    ck_assert_double_lt(rel_err(analytic, fd, n), tol);
    free(fd);
}

struct mnrl_ctx {
    double *q, *docs;
    int pos_off;
};
static double mnrl_f(void *p)
{
    struct mnrl_ctx *c = p;
    return mnrl_value(c->q, c->docs, c->pos_off, 20.0);
}

START_TEST(mnrl_value_and_gradient)
{
    double q[NQ * DD], docs[ND * DD], dq[NQ * DD], dd[ND * DD], loss;
    fill(q, NQ * DD, 31, 0.5);
    fill(docs, ND * DD, 32, 0.5);
    ck_assert_int_eq(tr_mnrl_d(NQ, ND, DD, q, docs, 0, 20.0, NQ, &loss, dq, dd), 0);
    ck_assert_double_eq_tol(loss, mnrl_naive(q, docs, 0, 20.0), 1e-12);
    struct mnrl_ctx c = {q, docs, 0};
    check_fd(q, NQ * DD, mnrl_f, &c, dq, 1e-6);
    check_fd(docs, ND * DD, mnrl_f, &c, dd, 1e-6);
    /* positives elsewhere (as in a gathered block) */
    c.pos_off = 7;
    ck_assert_int_eq(tr_mnrl_d(NQ, ND, DD, q, docs, 7, 20.0, NQ, &loss, dq, dd), 0);
    ck_assert_double_eq_tol(loss, mnrl_naive(q, docs, 7, 20.0), 1e-12);
    check_fd(q, NQ * DD, mnrl_f, &c, dq, 1e-6);
    check_fd(docs, ND * DD, mnrl_f, &c, dd, 1e-6);
}
END_TEST

/* Equal embeddings everywhere: every score equal, loss = log(number of docs). */
START_TEST(mnrl_uniform_scores_give_log_n)
{
    double q[NQ * DD], docs[ND * DD], loss;
    for (int i = 0; i < NQ * DD; i++)
        q[i] = 0.5;
    for (int i = 0; i < ND * DD; i++)
        docs[i] = 0.5;
    ck_assert_int_eq(tr_mnrl_d(NQ, ND, DD, q, docs, 0, 20.0, NQ, &loss, NULL, NULL), 0);
    ck_assert_double_eq_tol(loss, log((double)ND), 1e-12);
}
END_TEST

/* ----------------------------------------------------------------- SigLIP */

struct sig_ctx {
    double *q, *docs, tb[2];
    int pos_off;
};
static double sig_f(void *p)
{
    struct sig_ctx *c = p;
    double loss = 0;
    ck_assert_int_eq(
        tr_siglip_d(NQ, ND, DD, c->q, c->docs, c->pos_off, c->tb[0], c->tb[1], NQ, &loss, NULL, NULL, NULL, NULL),
        0);
    return loss;
}

static double sig_naive(const struct sig_ctx *c)
{
    double total = 0, t = exp(c->tb[0]);
    for (int i = 0; i < NQ; i++)
        for (int j = 0; j < ND; j++) {
            double dot = 0;
            for (int k = 0; k < DD; k++)
                dot += c->q[i * DD + k] * c->docs[j * DD + k];
            double y = (c->pos_off >= 0 && j == c->pos_off + i) ? 1 : -1;
            total += -log(1 / (1 + exp(-y * (t * dot + c->tb[1]))));
        }
    return total / NQ;
}

static void siglip_case(int pos_off, double tp, double bias)
{
    double q[NQ * DD], docs[ND * DD], dq[NQ * DD] = {0}, dd[ND * DD] = {0}, loss = 0, g[2] = {0, 0};
    fill(q, NQ * DD, 41, 0.5);
    fill(docs, ND * DD, 42, 0.5);
    struct sig_ctx c = {q, docs, {tp, bias}, pos_off};
    ck_assert_int_eq(tr_siglip_d(NQ, ND, DD, q, docs, pos_off, tp, bias, NQ, &loss, dq, dd, &g[0], &g[1]), 0);
    ck_assert_double_eq_tol(loss, sig_naive(&c), 1e-10 * fmax(1, loss));
    check_fd(q, NQ * DD, sig_f, &c, dq, 1e-6);
    check_fd(docs, ND * DD, sig_f, &c, dd, 1e-6);
    check_fd(c.tb, 2, sig_f, &c, g, 1e-6);
}

START_TEST(siglip_value_and_gradient)
{
    siglip_case(0, log(10.0), -10.0); /* SigLIP's initial temperature and bias */
    siglip_case(5, 0.3, 0.7);
    siglip_case(-1, 1.0, -2.0); /* a block without positives */
}
END_TEST

/* The block form adds: two half blocks of documents give the whole. */
START_TEST(siglip_blocks_add_up)
{
    double q[NQ * DD], docs[ND * DD], dq1[NQ * DD] = {0}, dq2[NQ * DD] = {0}, dd[ND * DD] = {0};
    double dd2[ND * DD] = {0}, l1 = 0, l2 = 0, t1 = 0, t2 = 0, b1 = 0, b2 = 0;
    fill(q, NQ * DD, 51, 0.5);
    fill(docs, ND * DD, 52, 0.5);
    tr_siglip_d(NQ, ND, DD, q, docs, 0, 0.5, -1.0, NQ, &l1, dq1, dd, &t1, &b1);
    tr_siglip_d(NQ, 5, DD, q, docs, 0, 0.5, -1.0, NQ, &l2, dq2, dd2, &t2, &b2);
    tr_siglip_d(NQ, ND - 5, DD, q, docs + 5 * DD, -1, 0.5, -1.0, NQ, &l2, dq2, dd2 + 5 * DD, &t2, &b2);
    ck_assert_double_eq_tol(l1, l2, 1e-12);
    ck_assert_double_eq_tol(t1, t2, 1e-12);
    ck_assert_double_eq_tol(b1, b2, 1e-12);
    ck_assert_double_lt(rel_err(dq2, dq1, NQ * DD), 1e-12);
    ck_assert_double_lt(rel_err(dd2, dd, ND * DD), 1e-12);
}
END_TEST

/* ------------------------------------------------------- float vs double */

START_TEST(float_kernels_follow_double)
{
    struct tr_layout L;
    tr_layout_of(&SH, &L);
    enum { M = 6 };
    double p[L.count], x[M * 7], w[M * 4], h[M * 9], e[M * 4], n[M], work[M * 13], g[L.count];
    float pf[L.count], xf[M * 7], wf[M * 4], hf[M * 9], ef[M * 4], nf[M], workf[M * 13], gf[L.count];
    double gd[L.count];
    tr_param_init(9, &SH, p);
    fill(x, M * 7, 61, 1.0);
    fill(w, M * 4, 62, 1.0);
    for (size_t i = 0; i < L.count; i++) {
        pf[i] = (float)p[i];
        p[i] = pf[i];
        g[i] = 0;
        gf[i] = 0;
    }
    for (int i = 0; i < M * 7; i++)
        xf[i] = (float)x[i], x[i] = xf[i];
    for (int i = 0; i < M * 4; i++)
        wf[i] = (float)w[i], w[i] = wf[i];
    tr_enc_forward_d(&SH, p, M, x, h, e, n);
    tr_enc_forward_f(&SH, pf, M, xf, hf, ef, nf);
    tr_enc_backward_d(&SH, p, M, x, h, e, n, w, g, work);
    tr_enc_backward_f(&SH, pf, M, xf, hf, ef, nf, wf, gf, workf);
    for (size_t i = 0; i < L.count; i++)
        gd[i] = gf[i];
    ck_assert_double_lt(rel_err(gd, g, L.count), 1e-5);
    double q[NQ * DD], docs[ND * DD], dq[NQ * DD], dd[ND * DD], loss, lossf;
    float qf[NQ * DD], docsf[ND * DD], dqf[NQ * DD], ddf[ND * DD];
    fill(q, NQ * DD, 63, 0.5);
    fill(docs, ND * DD, 64, 0.5);
    for (int i = 0; i < NQ * DD; i++)
        qf[i] = (float)q[i], q[i] = qf[i];
    for (int i = 0; i < ND * DD; i++)
        docsf[i] = (float)docs[i], docs[i] = docsf[i];
    tr_mnrl_d(NQ, ND, DD, q, docs, 0, 20.0, NQ, &loss, dq, dd);
    tr_mnrl_f(NQ, ND, DD, qf, docsf, 0, 20.0, NQ, &lossf, dqf, ddf);
    ck_assert_double_eq_tol(lossf, loss, 1e-4 * fmax(1, loss));
    double tmp[ND * DD];
    for (int i = 0; i < NQ * DD; i++)
        tmp[i] = dqf[i];
    ck_assert_double_lt(rel_err(tmp, dq, NQ * DD), 1e-4);
    for (int i = 0; i < ND * DD; i++)
        tmp[i] = ddf[i];
    ck_assert_double_lt(rel_err(tmp, dd, ND * DD), 1e-4);
}
END_TEST

/* ------------------------------------------------------------- optimizers */

START_TEST(sgd_and_adam_steps)
{
    double p[2] = {1.0, -2.0}, g[2] = {0.5, -4.0}, v[2] = {0, 0}, m[2] = {0, 0}, s[2] = {0, 0};
    tr_sgd_d(2, p, g, v, 0.1, 0.9);
    ck_assert_double_eq_tol(p[0], 1.0 - 0.1 * 0.5, 1e-15);
    ck_assert_double_eq_tol(p[1], -2.0 + 0.1 * 4.0, 1e-15);
    tr_sgd_d(2, p, g, v, 0.1, 0.9); /* v = 0.9 * g + g */
    ck_assert_double_eq_tol(p[0], 1.0 - 0.1 * 0.5 - 0.1 * 1.9 * 0.5, 1e-15);
    double a[2] = {1.0, -2.0};
    tr_adam_d(2, a, g, m, s, 0.01, 0.9, 0.999, 1e-8, 1);
    /* first step: m^ = g, v^ = g^2, so p -= lr g / (|g| + eps) */
    ck_assert_double_eq_tol(a[0], 1.0 - 0.01 * 0.5 / (0.5 + 1e-8), 1e-15);
    ck_assert_double_eq_tol(a[1], -2.0 + 0.01 * 4.0 / (4.0 + 1e-8), 1e-15);
}
END_TEST

/* ------------------------------------------------------------------- data */

START_TEST(data_is_a_function_of_its_indices)
{
    double a[8], b[8], c[8];
    tr_data_row(1, 2, 3, 1, 8, a);
    tr_data_row(1, 2, 3, 1, 8, b);
    ck_assert_mem_eq(a, b, sizeof a);
    tr_data_row(1, 2, 4, 1, 8, c);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    tr_data_row(2, 2, 3, 1, 8, c);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    /* the positive is correlated with its anchor, the anchor of another row is not */
    double anc[64], pos[64], other[64], cp = 0, co = 0;
    tr_data_row(7, 0, 10, 0, 64, anc);
    tr_data_row(7, 0, 10, 1, 64, pos);
    tr_data_row(7, 0, 11, 0, 64, other);
    for (int k = 0; k < 64; k++) {
        cp += anc[(k + 1) % 64] * pos[k];
        co += anc[(k + 1) % 64] * other[k];
    }
    ck_assert_double_gt(cp, 20.0);
    ck_assert_double_lt(fabs(co), 30.0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trainer-math");
    TCase *t = tcase_create("kernels");
    tcase_add_test(t, l2norm_backward_matches_fd);
    tcase_add_test(t, encoder_backward_matches_fd);
    tcase_add_test(t, mnrl_value_and_gradient);
    tcase_add_test(t, mnrl_uniform_scores_give_log_n);
    tcase_add_test(t, siglip_value_and_gradient);
    tcase_add_test(t, siglip_blocks_add_up);
    tcase_add_test(t, float_kernels_follow_double);
    tcase_add_test(t, sgd_and_adam_steps);
    tcase_add_test(t, data_is_a_function_of_its_indices);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed;
}
