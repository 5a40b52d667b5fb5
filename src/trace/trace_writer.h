/*
 * trace_writer.h - the trace writer, a feature of the core (registry.h):
 * its background thread drains the rings into CCSHIM_TRACE_DIR.  The core
 * reaches it only through its hooks; these are for its tests.
 */
#ifndef CCS_TRACE_WRITER_H
#define CCS_TRACE_WRITER_H

#include "attributes.h"

/* Starts the background writer if tracing is on (idempotent; slow path). */
CCS_HIDDEN void ccs_writer_start(void);
/* Drains every ring and writes pending comms and sites now. REASON >= 0 also
 * writes an END chunk.  Returns 0, or -1 when tracing is off or failed. */
CCS_HIDDEN int ccs_writer_flush(int reason, int signo);
/* Path of this process's trace file, or NULL when tracing is off. */
CCS_HIDDEN const char *ccs_writer_path(void);
/* Prepares the trace file's name and metadata for the current identity, so
 * that a fatal-signal flush needs only open(2) and write(2). */
CCS_HIDDEN void ccs_writer_prepare(void);

#endif
