/* test_fingerprint.c - which fields enter a collective's fingerprint. */
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "record.h"
#include "trace_format.h"
#include "sig_canon.h"
#include "unit_main.h"
#include <stdlib.h>
#include <string.h>

START_TEST(deterministic_and_sensitive)
{
    uint64_t a = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
    ck_assert_uint_eq(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 101, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT64, CCS_OP_SUM, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_MAX, -1));
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_REDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, 0));
    /* blocking and nonblocking collectives never match each other in MPI */
    ck_assert_uint_ne(a, ccs_fingerprint(CCS_KIND_ALLREDUCE, CCS_F_NONBLOCKING, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1));
}
END_TEST

START_TEST(irrelevant_fields_ignored)
{
    /* in-place or not, buffers, group depth: local choices */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLREDUCE, CCS_F_IN_PLACE, 8, CCS_DT_INT32, CCS_OP_SUM, -1),
                      ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, -1));
    /* the op of a non-reduction, the root of a rootless kind */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 1),
                      ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 1));
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLGATHER, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 3),
                      ccs_fingerprint(CCS_KIND_ALLGATHER, 0, 8, CCS_DT_INT32, CCS_OP_NONE, -1));
    /* gatherv/scatterv/alltoallv: per-rank counts legitimately differ */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_GATHERV, 0, 3, CCS_DT_INT32, CCS_OP_NONE, 0),
                      ccs_fingerprint(CCS_KIND_GATHERV, 0, 5, CCS_DT_FLOAT64, CCS_OP_NONE, 0));
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_ALLTOALLV, 0, 3, CCS_DT_INT32, CCS_OP_NONE, -1),
                      ccs_fingerprint(CCS_KIND_ALLTOALLV, 0, 0, CCS_DT_NONE, CCS_OP_NONE, -1));
    /* allgatherv: the whole every member receives agrees */
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_ALLGATHERV, 0, 3, CCS_DT_INT32, CCS_OP_NONE, -1),
                      ccs_fingerprint(CCS_KIND_ALLGATHERV, 0, 5, CCS_DT_INT32, CCS_OP_NONE, -1));
    /* a barrier carries nothing but its kind */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_BARRIER, 0, 0, CCS_DT_NONE, CCS_OP_NONE, -1),
                      ccs_fingerprint(CCS_KIND_BARRIER, 0, 7, CCS_DT_INT8, CCS_OP_SUM, 2));
}
END_TEST

START_TEST(root_matters_for_rooted)
{
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 0),
                      ccs_fingerprint(CCS_KIND_BCAST, 0, 8, CCS_DT_INT32, CCS_OP_NONE, 1));
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_REDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 0),
                      ccs_fingerprint(CCS_KIND_REDUCE, 0, 8, CCS_DT_INT32, CCS_OP_SUM, 2));
}
END_TEST

/* Data movement compares the signature's size (MPI_PACKED may stand for any
 * signature of those bytes) and the basic types beside it (ccs_sig_key). */
START_TEST(data_movement_by_size)
{
    /* 4 int32 and 16 bytes of a derived multi-type signature: same size */
    ck_assert_uint_eq(ccs_fingerprint(CCS_KIND_BCAST, 0, 4, CCS_DT_INT32, CCS_OP_NONE, 0),
                      ccs_fingerprint_sig(CCS_KIND_BCAST, 0, 16, CCS_DT_DERIVED, CCS_OP_NONE, 0, 0x1234));
    ck_assert_uint_ne(ccs_fingerprint(CCS_KIND_BCAST, 0, 4, CCS_DT_INT32, CCS_OP_NONE, 0),
                      ccs_fingerprint(CCS_KIND_BCAST, 0, 4, CCS_DT_FLOAT64, CCS_OP_NONE, 0));
    ck_assert_uint_eq(ccs_sig_key(CCS_KIND_BCAST, CCS_DT_INT32, 0), CCS_DT_INT32);
    ck_assert_uint_eq(ccs_sig_key(CCS_KIND_BCAST, CCS_DT_DERIVED, 0x1234), 0x1234);
    ck_assert_uint_eq(ccs_sig_key(CCS_KIND_BCAST, CCS_DT_DERIVED, 0), 0); /* not known: left out */
    ck_assert_uint_eq(ccs_sig_key(CCS_KIND_BCAST, CCS_DT_NONE, 0), 0);    /* empty matches anything */
    ck_assert_uint_eq(ccs_sig_key(CCS_KIND_ALLREDUCE, CCS_DT_INT32, 0), 0); /* in the fingerprint */
    /* reductions: the whole signature */
    ck_assert_uint_ne(ccs_fingerprint_sig(CCS_KIND_ALLREDUCE, 0, 16, CCS_DT_DERIVED, CCS_OP_USER, -1, 7),
                      ccs_fingerprint_sig(CCS_KIND_ALLREDUCE, 0, 16, CCS_DT_DERIVED, CCS_OP_USER, -1, 9));
}
END_TEST

static void runs(struct ccs_sig_runs *w, const uint32_t *codes, const uint64_t *ns, size_t n)
{
    w->n = 0;
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ccs_sig_append(w, codes[i], ns[i]), 0);
}

/* The primitive root of a signature does not depend on how it was built. */
START_TEST(signature_primitive_root)
{
    static struct ccs_sig_runs w, q, q2;
    uint64_t r = 0, r2 = 0;
    /* int^12 = (int)^12 */
    runs(&w, (uint32_t[]){5}, (uint64_t[]){12}, 1);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_eq(q.n, 1);
    ck_assert_uint_eq(r, 12);
    /* (int double)^3 against (int double int double) x 1 then appended once more */
    runs(&w, (uint32_t[]){5, 12, 5, 12, 5, 12}, (uint64_t[]){1, 1, 1, 1, 1, 1}, 6);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_eq(q.n, 2);
    ck_assert_uint_eq(r, 3);
    runs(&w, (uint32_t[]){5, 12}, (uint64_t[]){1, 1}, 2);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q2, &r2), 0);
    ck_assert_uint_eq(ccs_sig_hash(&q), ccs_sig_hash(&q2));
    ck_assert_uint_eq(r2, 1);
    /* boundaries that merge: (int double int)^2 = int double int^2 double int */
    runs(&w, (uint32_t[]){5, 12, 5, 12, 5}, (uint64_t[]){1, 1, 2, 1, 1}, 5);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_eq(r, 2);
    runs(&w, (uint32_t[]){5, 12, 5}, (uint64_t[]){1, 1, 1}, 3);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q2, &r2), 0);
    ck_assert_uint_eq(r2, 1);
    ck_assert_uint_eq(ccs_sig_hash(&q), ccs_sig_hash(&q2));
    /* not a power: int double int^2 double (runs differ) */
    runs(&w, (uint32_t[]){5, 12, 5, 12}, (uint64_t[]){1, 1, 2, 1}, 4);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_eq(r, 1);
    ck_assert_uint_eq(q.n, 4);
    /* a power through ccs_sig_append_pow gives the same root back */
    runs(&w, (uint32_t[]){5, 12, 5}, (uint64_t[]){2, 1, 1}, 3);
    static struct ccs_sig_runs big;
    big.n = 0;
    ck_assert_int_eq(ccs_sig_append_pow(&big, &w, 5), 0);
    ck_assert_int_eq(ccs_sig_primitive(&big, &q, &r), 0);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q2, &r2), 0);
    ck_assert_uint_eq(r, 5);
    ck_assert_uint_eq(ccs_sig_hash(&q), ccs_sig_hash(&q2));
    /* different types: different roots */
    runs(&w, (uint32_t[]){5, 11}, (uint64_t[]){1, 1}, 2);
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_ne(ccs_sig_hash(&q), ccs_sig_hash(&q2));
    /* empty */
    w.n = 0;
    ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
    ck_assert_uint_eq(q.n, 0);
    ck_assert_uint_eq(r, 0);
}
END_TEST

/* Against brute force: random words of runs, repeated, expanded; the
 * primitive root must be the expanded word's shortest period. */
static int expand(const struct ccs_sig_runs *w, int *out, int cap)
{
    int n = 0;
    for (size_t i = 0; i < w->n; i++)
        for (uint64_t k = 0; k < w->run[i].n; k++) {
            if (n >= cap)
                return -1;
            out[n++] = (int)w->run[i].code;
        }
    return n;
}

START_TEST(signature_primitive_root_brute_force)
{
    static struct ccs_sig_runs x, w, q;
    static int a[1024], b[1024];
    unsigned seed = 7;
    for (int it = 0; it < 20000; it++) {
        x.n = 0;
        int nr = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 5;
        for (int i = 0; i < nr; i++) {
            seed = seed * 1103515245u + 12345u;
            ccs_sig_append(&x, 1 + (seed >> 16) % 3, 1 + (seed >> 20) % 3);
        }
        seed = seed * 1103515245u + 12345u;
        w.n = 0;
        ck_assert_int_eq(ccs_sig_append_pow(&w, &x, 1 + (seed >> 16) % 4), 0);
        uint64_t r = 0;
        ck_assert_int_eq(ccs_sig_primitive(&w, &q, &r), 0);
        int n = expand(&w, a, 1024), m = expand(&q, b, 1024), p = n;
        for (int d = 1; d <= n; d++) {
            int ok = n % d == 0;
            for (int i = d; i < n && ok; i++)
                ok = a[i] == a[i - d];
            if (ok) {
                p = d;
                break;
            }
        }
        ck_assert_int_eq(m, p);
        ck_assert_int_eq(memcmp(a, b, (size_t)p * sizeof *a), 0);
        ck_assert_uint_eq(r, (uint64_t)(n / p));
    }
}
END_TEST

START_TEST(hash_bytes)
{
    ck_assert_uint_eq(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghij", 10, 1));
    ck_assert_uint_ne(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghik", 10, 1));
    ck_assert_uint_ne(ccs_hash_bytes("abcdefghij", 10, 1), ccs_hash_bytes("abcdefghij", 10, 2));
    ck_assert_uint_ne(ccs_hash_bytes("abc", 3, 0), ccs_hash_bytes("abc\0", 4, 0));
}
END_TEST

/* The running hash's guarantees (fingerprint.h): from one hash, calls whose
 * words differ (or that differ only in being deferred) never give the same
 * next hash; and a differing call keeps every later hash different.  Over
 * every sequenced kind with the fields its fingerprint takes varied across
 * a grid of the values jobs use (counts below 64, powers of two and their
 * neighbours up to 2^45, common types and ops, low roots, sigs). */
struct hashed {
    uint64_t h, w, c;
};

static int by_hash(const void *a, const void *b)
{
    const struct hashed *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h;
}

static int by_words(const void *a, const void *b)
{
    const struct hashed *x = a, *y = b;
    if (x->w != y->w)
        return x->w < y->w ? -1 : 1;
    return x->c < y->c ? -1 : x->c > y->c;
}

START_TEST(running_hash_tells_calls_apart)
{
    static const unsigned dtypes[] = {CCS_DT_INT32, CCS_DT_FLOAT32, CCS_DT_FLOAT64, CCS_DT_BFLOAT16, CCS_DT_DERIVED};
    static const unsigned ops[] = {CCS_OP_SUM, CCS_OP_MAX, CCS_OP_MIN, CCS_OP_USER};
    static const int roots[] = {-1, 0, 1, 3};
    static const uint32_t sigs[] = {0, 0x9e3779b9u};
    uint64_t counts[64 + 3 * 40];
    size_t ncount = 0;
    for (uint64_t n = 0; n < 64; n++)
        counts[ncount++] = n;
    for (unsigned k = 6; k < 46; k++) {
        counts[ncount++] = (1ull << k) - 1;
        counts[ncount++] = 1ull << k;
        counts[ncount++] = (1ull << k) + 1;
    }
    size_t cap = 1u << 20, n = 0;
    struct hashed *v = malloc(cap * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (unsigned kind = 1; kind < CCS_KIND_MAX; kind++) {
        if (!ccs_kind_sequenced(kind))
            continue;
        for (unsigned nb = 0; nb < 2; nb++)
            for (size_t ci = 0; ci < ncount; ci++)
                for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++)
                    for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++)
                        for (size_t ri = 0; ri < sizeof roots / sizeof *roots; ri++)
                            for (size_t si = 0; si < sizeof sigs / sizeof *sigs; si++) {
                                struct ccs_fp_words k =
                                    ccs_fp_words(kind, nb ? CCS_F_NONBLOCKING : 0, counts[ci], dtypes[di], ops[oi],
                                                 roots[ri], dtypes[di] == CCS_DT_DERIVED ? sigs[si] : 0);
                                if (n == cap) {
                                    cap *= 2;
                                    v = realloc(v, cap * sizeof *v);
                                    ck_assert_ptr_nonnull(v);
                                }
                                v[n++] = (struct hashed){0, k.w, k.c};
                            }
    }
    /* Distinct words only (a kind ignores fields), then each also deferred. */
    qsort(v, n, sizeof *v, by_words);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || by_words(&v[u - 1], &v[i]) != 0)
            v[u++] = v[i];
    ck_assert_uint_gt(u, 50000);
    v = realloc(v, 2 * u * sizeof *v);
    ck_assert_ptr_nonnull(v);
    static const uint64_t from[] = {0, ~0ull, 0x0123456789abcdefull, 1ull << 63};
    for (size_t f = 0; f < sizeof from / sizeof *from; f++) {
        for (size_t i = 0; i < u; i++) {
            struct ccs_fp_words k = {v[i].w, v[i].c};
            v[i].h = ccs_running_hash(from[f], k, 0);
            v[u + i] = (struct hashed){ccs_running_hash(from[f], k, 1), v[i].w, v[i].c};
        }
        qsort(v, 2 * u, sizeof *v, by_hash);
        for (size_t i = 1; i < 2 * u; i++)
            ck_assert_msg(v[i].h != v[i - 1].h, "calls (w %#llx c %#llx) and (w %#llx c %#llx) hash alike from %#llx",
                          (unsigned long long)v[i - 1].w, (unsigned long long)v[i - 1].c,
                          (unsigned long long)v[i].w, (unsigned long long)v[i].c, (unsigned long long)from[f]);
        qsort(v, 2 * u, sizeof *v, by_words); /* back in order of words: v[0..u) the undeferred */
        size_t w = 0;
        for (size_t i = 0; i < 2 * u; i += 2)
            v[w++] = v[i];
    }
    free(v);

    /* One differing call (a count off by one), then the same 1000 calls. */
    struct ccs_fp_words same = ccs_fp_words(CCS_KIND_ALLREDUCE, 0, 4096, CCS_DT_FLOAT32, CCS_OP_SUM, -1, 0);
    uint64_t a = ccs_running_hash(7, ccs_fp_words(CCS_KIND_ALLREDUCE, 0, 100, CCS_DT_FLOAT32, CCS_OP_SUM, -1, 0), 0);
    uint64_t b = ccs_running_hash(7, ccs_fp_words(CCS_KIND_ALLREDUCE, 0, 101, CCS_DT_FLOAT32, CCS_OP_SUM, -1, 0), 0);
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_ne(a, b);
        a = ccs_running_hash(a, same, 0);
        b = ccs_running_hash(b, same, 0);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fingerprint");
    TCase *t = tcase_create("fields");
    tcase_add_test(t, deterministic_and_sensitive);
    tcase_add_test(t, irrelevant_fields_ignored);
    tcase_add_test(t, root_matters_for_rooted);
    tcase_add_test(t, hash_bytes);
    tcase_add_test(t, data_movement_by_size);
    tcase_add_test(t, signature_primitive_root);
    tcase_add_test(t, signature_primitive_root_brute_force);
    tcase_add_test(t, running_hash_tells_calls_apart);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
