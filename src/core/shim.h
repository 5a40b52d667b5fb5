/*
 * shim.h - the whole of the core's internal API in one include, for the
 * interposers (src/mpi, src/nccl) and the features built on the core
 * (src/trace, src/desync, src/coalesce).  Each module of the core has its
 * own header, named by its concern; a file that needs one module may
 * include that header alone.  They include each other without a cycle
 * (docs/design.md, "The core's headers"):
 *
 *   record.h       the hot path: ccs_call_begin ... ccs_call_end (inline),
 *                  markers, snapshots                  (record.c)
 *   ring.h         per-thread rings of records, cursors (ring.c)
 *   comm.h         the communicator table              (comm.c)
 *   fingerprint.h  hashes, fingerprints, signature keys (fingerprint.c)
 *   callsite.h     call sites, symbolization           (callsite.c, symbolize_dw.c)
 *   pysite.h       annotated (language) call sites     (pysite.c)
 *   clock.h        ticks, monotonic time, sleep        (clock.c)
 *   process.h      on/off, timing, world, host, job, step (process.c)
 *   runtime.h      start-up, end of run, signals       (runtime.c)
 *   real.h         the intercepted library's functions (real.c)
 *   attributes.h   CCS_HIDDEN, CCS_INLINE, CCS_LIKELY ...
 *   ccs_kinds.h, trace_format.h: the names and the record (shared with the tools)
 */
#ifndef CCS_SHIM_H
#define CCS_SHIM_H

#include "attributes.h"
#include "callsite.h"
#include "ccs_kinds.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "pysite.h"
#include "real.h"
#include "record.h"
#include "ring.h"
#include "runtime.h"
#include "trace_format.h"

#endif
