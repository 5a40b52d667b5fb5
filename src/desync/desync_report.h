/*
 * desync_report.h - diagnostics of a verdict: the greppable line and the
 * block (last operations side by side, call sites) in this rank's log, the
 * same text in CCSHIM_TRACE_DIR/ccshim-desync-<job>-r<rank>.txt, and this
 * rank's flight recorder in CCSHIM_TRACE_DIR/ccshim-flight-<job>-r<rank>.flight.
 */
#ifndef CCS_DESYNC_REPORT_H
#define CCS_DESYNC_REPORT_H

#include "desync_proto.h"

/* Formats V as seen by rank MYRANK at AT_MS (CLOCK_MONOTONIC ms, shown as
 * "at=..." so latencies can be measured) into BUF: the line, then the
 * block.  Returns the length.  Pure (no I/O): the unit tests check it. */
size_t ccs_dsx_format(const struct ccs_dsx_verdict *v, int32_t myrank, double at_ms, char *buf, size_t cap);

/* What a rank writes of a verdict into its log (issue 45): one rank of
 * each host the line, one rank of the job the full report (line and
 * block).  Every rank still writes its own file and acts on the verdict. */
struct ccs_dsx_say {
    int line;              /* this rank logs the verdict's line for its host */
    int full;              /* this rank writes the full report (line and block) */
    int32_t full_rank;     /* the rank that writes the full report */
    const char *host;      /* this rank's host identity */
    const char *full_host; /* FULL_RANK's host identity, or NULL when not known here */
};

/* What the line of a rank that logs it says after "seen by rank R", into
 * BUF: for whom it speaks and where the full report is, " for host 'H';
 * full report below" (SAY->full) or " for host 'H'; full report: rank F
 * on host 'G'" ("rank 0, on the coordinator's host" where G is not known),
 * then "; each rank's: TRACE_DIR/ccshim-desync-JOB-r<rank>.txt" when
 * TRACE_DIR is set, and ";".  Returns the length.  Pure. */
size_t ccs_dsx_where(const struct ccs_dsx_say *say, const char *trace_dir, const char *job, char *buf, size_t cap);

/* ccs_dsx_format with WHERE (ccs_dsx_where's text, or "") after "seen by
 * rank R". */
size_t ccs_dsx_format_where(const struct ccs_dsx_verdict *v, int32_t myrank, const char *where, double at_ms,
                            char *buf, size_t cap);

/* What happens next after a DESYNC or DEAD verdict V in warn mode, for the
 * rank that reports it in full, into BUF (lines ending in newlines, without
 * the log prefix): where the evidence shows a member left the call out (it
 * finished before the seq the others are blocked in), that; then the call
 * the job waits in, where, how to end it at once, and where each rank's
 * report is (TRACE_DIR, JOB as the file names have it).  0 for another
 * class.  Pure: the unit tests check it. */
size_t ccs_dsx_next_words(const struct ccs_dsx_verdict *v, const char *trace_dir, const char *job, char *buf,
                          size_t cap);

/* Writes V's diagnostics, with this process's own call-site stack, to the
 * files above when tracing, and to the log as SAY says: all of it when
 * SAY->full (the one rank that reports the verdict in full), the line only
 * when SAY->line, else nothing. */
void ccs_dsx_report(const struct ccs_dsx_verdict *v, const struct ccs_dsx_say *say);

/* Writes the last N records of every ring of this process to the flight
 * file (when tracing).  Returns 0, or -1 when not written. */
int ccs_dsx_dump_flight(unsigned n);

#endif
