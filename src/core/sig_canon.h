/*
 * sig_canon.h - canonical type signatures (sig_canon.c): run-length-encoded
 * sequences of basic-type codes, their primitive root and its hash.
 */
#ifndef CCS_SIG_CANON_H
#define CCS_SIG_CANON_H

#include <stddef.h>
#include <stdint.h>

/* Longest signature handled, in runs; longer ones are "not known" (the
 * comparison then leaves the type out rather than guess). */
#define CCS_SIG_MAX_RUNS 512

struct ccs_sig_run {
    uint32_t code; /* basic type (enum ccs_dtype, or a hashed name | 1<<31) */
    uint64_t n;    /* how many in a row */
};

struct ccs_sig_runs {
    size_t n;
    struct ccs_sig_run run[CCS_SIG_MAX_RUNS];
};

/* Appends N elements of CODE (merging with the last run).  0, or -1 when
 * the signature grows beyond CCS_SIG_MAX_RUNS. */
int ccs_sig_append(struct ccs_sig_runs *s, uint32_t code, uint64_t n);

/* Appends Q repeated REPS times.  0 or -1 (too long). */
int ccs_sig_append_pow(struct ccs_sig_runs *s, const struct ccs_sig_runs *q, uint64_t reps);

/* Writes W as Q^REPS with Q primitive (Q and REPS empty/0 for an empty W).
 * 0, or -1 when out of memory. */
int ccs_sig_primitive(const struct ccs_sig_runs *w, struct ccs_sig_runs *q, uint64_t *reps);

/* Hash of a primitive root, never 0. */
uint32_t ccs_sig_hash(const struct ccs_sig_runs *q);

#endif
