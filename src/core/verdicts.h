/*
 * verdicts.h - services: the verdict classes' names, and the count of the
 * verdicts whose policy is STOP (ccs_kinds.h's CCS_VERDICT_LIST), which a
 * wait (a step boundary, an agreement) watches to end (verdicts.c).
 */
#ifndef CCS_VERDICTS_H
#define CCS_VERDICTS_H

#include "attributes.h"
#include "ccs_kinds.h"
#include <stdint.h>

/* The verdict classes' names (ccs_kinds.h's CCS_VERDICT_LIST, in its
 * order), as the logs and the verdict hook name them. */
extern CCS_HIDDEN const char *const ccs_verdict_class[CCS_VERDICT_CLASSES];

/* Desync counts here every verdict it reports whose class's policy is STOP
 * (CCS_VERDICT_LIST); a rank waiting at its step boundary stops waiting
 * when the count moves (the job is desynchronised: nothing it waits for
 * comes). */
CCS_HIDDEN void ccs_verdict_note(void);
CCS_HIDDEN uint64_t ccs_verdicts_seen(void);

#endif
