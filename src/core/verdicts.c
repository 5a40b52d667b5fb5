/*
 * verdicts.c - the verdict classes' names and the count of STOP verdicts
 * (verdicts.h), and a language helper's own verdict (ccshim_verdict).
 */
#include "verdicts.h"
#include "ccshim.h"
#include "log.h"
#include "registry.h"
#include <stdatomic.h>
#include <string.h>

static _Atomic uint64_t verdicts;

void ccs_verdict_note(void) { atomic_fetch_add(&verdicts, 1); }

const char *const ccs_verdict_class[CCS_VERDICT_CLASSES] = {
#define CCS_X(e, n, s, ...) s,
    CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
};

/* The classes' policies, in the same order. */
static const enum ccs_verdict_policy verdict_policy[CCS_VERDICT_CLASSES] = {
#define CCS_X(e, n, s, policy, ...) CCS_VERDICT_##policy,
    CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
};

/* "MISMATCH, DESYNC, ...": the classes as a message lists them. */
#define CCS_X(e, n, s, ...) s ", "
static const char verdict_names[] = CCS_VERDICT_LIST(CCS_X);
#undef CCS_X

/* A language helper's own verdict (ccshim.h): passed on and counted as the
 * detector's are (the features' verdict hooks: metrics). */
int ccshim_verdict(const char *cls, const char *line)
{
    for (size_t i = 0; cls && i < CCS_VERDICT_CLASSES; i++)
        if (strcmp(cls, ccs_verdict_class[i]) == 0) {
            ccs_features_verdict(ccs_verdict_class[i], 0, 0, line ? line : "");
            if (verdict_policy[i] == CCS_VERDICT_STOP)
                ccs_verdict_note();
            return 0;
        }
    CCS_LOG(WARN, "ccshim_verdict: class '%s' is not one of %.*s; not counted", cls ? cls : "(null)",
            (int)sizeof verdict_names - 3, verdict_names);
    return -1;
}

uint64_t ccs_verdicts_seen(void) { return atomic_load(&verdicts); }
