/*
 * sig_canon.c - canonical form of an MPI type signature (the sequence of
 * basic types a (count, datatype) pair describes), independent of how the
 * datatype was built: 1 x contiguous(4, MPI_INT) and 4 x MPI_INT give the
 * same form.  Pure logic on run-length-encoded signatures, so the unit
 * tests drive it without MPI (mpi_sig.c feeds it from
 * MPI_Type_get_envelope/contents, once per datatype handle).
 *
 * A signature w is written uniquely as Q^r with Q primitive (not itself a
 * power).  Two (count, datatype) pairs have equal signatures iff their
 * primitive roots are equal and their repetition counts are equal, so the
 * canonical form is (hash of Q, r) and, for the common single-type case,
 * (basic type, number of elements).
 */
#include "sig_canon.h"
#include "fingerprint.h"
#include <stdlib.h>
#include <string.h>

int ccs_sig_append(struct ccs_sig_runs *s, uint32_t code, uint64_t n)
{
    if (n == 0)
        return 0;
    if (s->n && s->run[s->n - 1].code == code) {
        s->run[s->n - 1].n += n;
        return 0;
    }
    if (s->n >= CCS_SIG_MAX_RUNS)
        return -1;
    s->run[s->n].code = code;
    s->run[s->n].n = n;
    s->n++;
    return 0;
}

int ccs_sig_append_pow(struct ccs_sig_runs *s, const struct ccs_sig_runs *q, uint64_t reps)
{
    if (reps == 0 || q->n == 0)
        return 0;
    if (q->n == 1)
        return ccs_sig_append(s, q->run[0].code, q->run[0].n * reps);
    if (reps > CCS_SIG_MAX_RUNS)
        return -1;
    for (uint64_t k = 0; k < reps; k++)
        for (size_t i = 0; i < q->n; i++)
            if (ccs_sig_append(s, q->run[i].code, q->run[i].n) != 0)
                return -1;
    return 0;
}

static int run_eq(const struct ccs_sig_run *a, const struct ccs_sig_run *b)
{
    return a->code == b->code && a->n == b->n;
}

/* Smallest period P of V[0..N) (KMP failure function); N when none smaller
 * divides N.  F is scratch of N entries. */
static size_t min_period(const struct ccs_sig_run *v, size_t n, size_t *f)
{
    if (n == 0)
        return 0;
    f[0] = 0;
    for (size_t i = 1, k = 0; i < n; i++) {
        while (k && !run_eq(&v[i], &v[k]))
            k = f[k - 1];
        if (run_eq(&v[i], &v[k]))
            k++;
        f[i] = k;
    }
    size_t p = n - f[n - 1];
    return n % p == 0 ? p : n;
}

int ccs_sig_primitive(const struct ccs_sig_runs *w, struct ccs_sig_runs *q, uint64_t *reps)
{
    q->n = 0;
    *reps = 0;
    if (w->n == 0)
        return 0;
    if (w->n == 1) {
        /* t^n = (t)^n */
        q->run[0].code = w->run[0].code;
        q->run[0].n = 1;
        q->n = 1;
        *reps = w->run[0].n;
        return 0;
    }
    size_t *f = malloc(w->n * sizeof *f);
    if (!f)
        return -1;
    if (w->run[0].code != w->run[w->n - 1].code) {
        /* No merge at the boundaries of Q^r: RLE(w) = RLE(Q)^r. */
        size_t p = min_period(w->run, w->n, f);
        memcpy(q->run, w->run, p * sizeof *q->run);
        q->n = p;
        *reps = w->n / p;
        free(f);
        return 0;
    }
    /* w starts with t^x and ends with t^y: w = Q^r with Q = t^x M t^y, and
     * the interior runs are (M, t^(x+y))^(r-1) M.  So v = interior + t^(x+y)
     * is (M t^(x+y))^r and its period gives Q.  The first and last runs of
     * every copy of Q are the same t^x and t^y, so x and y must match. */
    size_t m = w->n;
    const struct ccs_sig_run *first = &w->run[0], *last = &w->run[m - 1];
    struct ccs_sig_run *v = malloc((m - 1) * sizeof *v);
    if (!v) {
        free(f);
        return -1;
    }
    memcpy(v, w->run + 1, (m - 2) * sizeof *v);
    v[m - 2].code = first->code;
    v[m - 2].n = first->n + last->n;
    size_t p = min_period(v, m - 1, f);
    size_t r = (m - 1) / p;
    q->run[0] = *first;
    memcpy(q->run + 1, v, (p - 1) * sizeof *v);
    q->run[p] = *last;
    q->n = p + 1;
    *reps = r;
    free(v);
    free(f);
    return 0;
}

uint32_t ccs_sig_hash(const struct ccs_sig_runs *q)
{
    uint64_t h = 0x7369676e6174ULL; /* "signat" */
    for (size_t i = 0; i < q->n; i++)
        h = ccs_hash_mix(ccs_hash_mix(h, q->run[i].code), q->run[i].n);
    return (uint32_t)(h ^ (h >> 32)) | 1u; /* never 0: 0 means "not known" */
}
