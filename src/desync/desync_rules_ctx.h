/*
 * desync_rules_ctx.h - what the rule files (desync_rules.c, desync_rule_*.c)
 * share while one pass of ccs_dsx_rules_run applies the rules: the view as
 * members grouped by communicator, and the helpers every rule uses
 * (desync_rules_ctx.c).  Private to the rules.
 */
#ifndef CCS_DESYNC_RULES_CTX_H
#define CCS_DESYNC_RULES_CTX_H

#include "desync_rules.h"
#include <stddef.h>
#include <stdint.h>

/* Private classes for timers in the seen set. */
#define SUSPECT_HASH 100
#define CANDIDATE 101
#define CANDIDATE_MISMATCH 102
#define SKEW 103
#define CANDIDATE_FOREIGN 104

/* One member's entry for one communicator, and the members of a
 * communicator (a range of the sorted entries). */
struct ent {
    uint64_t comm;
    int32_t wrank, crank;
    const struct ccs_dsx_comm *e;
};

struct grp {
    size_t lo, hi; /* [lo, hi) in ents */
    int32_t size;
    int complete; /* every member known */
    /* Members not in view that the tree's folds count (view->unseen), each
     * known to have issued UNSEEN_ISSUED (UINT64_MAX: none); with them the
     * group is whole for ccs_dsx_rules_holds only. */
    size_t unseen_n;
    uint64_t unseen_issued;
    uint64_t memo_s; /* memo of the last (s -> result) evaluated this pass */
    int memo_r;
};

struct ctx {
    const struct ccs_dsx_view *v;
    const struct ccs_dsx_thresholds *t;
    struct ccs_dsx_seen *seen;
    const struct ccs_dsx_sink *sink;
    struct ent *ents;
    size_t nents;
    struct grp *g;
    size_t ng;
    uint8_t *term, *stuck;
    const struct ccs_dsx_comm **be; /* entry a rank is blocked in, or NULL */
    int emitted;
};

/* snprintf through a va_list: texts here are cut to their buffers on
 * purpose, which the compiler's truncation warnings cannot know. */
__attribute__((format(printf, 3, 4))) int ccs_dsx_rules_fmt(char *dst, size_t n, const char *fmt, ...);
/* First time (CLS, COMM, SEQ) was noted in S; notes NOW if never (desync_seen.c). */
uint64_t ccs_dsx_seen_since(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq, uint64_t now);
/* The same, for a condition that must hold without a break: since when
 * (CLS, COMM, SEQ) was noted on every pass, a pass that noted it more than
 * GAP_MS after the one before starting it again (desync_seen.c). */
uint64_t ccs_dsx_seen_held(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq, uint64_t now,
                           uint64_t gap_ms);
/* The most frequent of N values (ties: the larger); sorts V.  *COUNT: how often. */
uint64_t ccs_dsx_mode_u64(uint64_t *v, size_t n, size_t *count);

/* The group of COMM, or NULL. */
struct grp *ccs_dsx_rules_group(struct ctx *c, uint64_t comm);
/* M's rank has ended, or freed M's communicator with its final count
 * known. */
int ccs_dsx_rules_gone(struct ctx *c, const struct ent *m);
/* M freed its communicator, its final count not known. */
int ccs_dsx_rules_unknown(const struct ent *m);
/* M died having issued S without finishing it (see desync_rules_ctx.c). */
int ccs_dsx_rules_died_in(const struct ctx *c, const struct ent *m, uint64_t s);
/* The members of G that have not issued S are all stuck or gone (MODE 0) or
 * all gone (MODE 1); memoised per group for one pass. */
int ccs_dsx_rules_holds(struct ctx *c, struct grp *g, uint64_t s, int mode);
void ccs_dsx_rules_reset_memo(struct ctx *c);
/* M's rank waits at its step boundary; *S: the step. */
int ccs_dsx_rules_at_boundary(const struct ctx *c, const struct ent *m, uint32_t *s);

/* Adds M to V's parties in ROLE; hands V to the sink; sorts R and formats
 * its N ranks into BUF. */
void ccs_dsx_rules_party(struct ctx *c, struct ccs_dsx_verdict *v, const struct ent *m, uint32_t role);
void ccs_dsx_rules_emit(struct ctx *c, struct ccs_dsx_verdict *v);
void ccs_dsx_rules_ranks(int32_t *r, size_t n, char *buf, size_t cap);

/* The rules, in the order a pass applies them. */
void ccs_dsx_rule_boundary(struct ctx *c); /* desync_rule_boundary.c */
void ccs_dsx_rule_mismatch(struct ctx *c); /* desync_rule_mismatch.c */
void ccs_dsx_rule_blocked(struct ctx *c);  /* desync_rule_blocked.c */
void ccs_dsx_rule_foreign(struct ctx *c);  /* desync_rule_foreign.c */

#endif
