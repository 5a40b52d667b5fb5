/*
 * process.h - the process's identity and state (process.c): whether
 * interception is on, whether records carry times, world rank and size,
 * host, job, the step.
 */
#ifndef CCS_PROCESS_H
#define CCS_PROCESS_H

#include "attributes.h"
#include <stdatomic.h>
#include <stdint.h>

/* Nonzero while interception is on; a wrapper that sees 0 just forwards.
 * Set once when the shim starts and never cleared: the wrappers' fast paths
 * rely on it (record.h, ccs_call_ring). */
extern CCS_HIDDEN atomic_int ccs_active;

/* Nonzero when records carry times (a trace is written): reading the clock
 * is most of the hot path's cost, so it is skipped when nothing would read
 * the times. */
extern CCS_HIDDEN int ccs_timing;

/* World rank and size: from MPI after MPI_Init, else from the launcher's
 * environment (torchrun, Open MPI, PMI, Slurm), else -1. */
CCS_HIDDEN int ccs_world_rank(void);
CCS_HIDDEN int ccs_world_size(void);
CCS_HIDDEN const char *ccs_hostname(void);
CCS_HIDDEN const char *ccs_job_id(void);

/* The launcher's variable NAME (LOCAL_WORLD_SIZE, MASTER_PORT, ...) when it
 * is set to a decimal integer from MIN (>= 0) to 2^30 - 1; else -1. */
CCS_HIDDEN int ccs_env_int(const char *name, int min);

/* The step: ccshim_step_mark increments it; records carry it. */
extern CCS_HIDDEN _Atomic uint64_t ccs_step;

/* Current step (relaxed load). */
CCS_HIDDEN uint32_t ccs_step_now(void);

/* At start-up: host name and world from the environment; the job id once
 * the configuration (CCSHIM_JOB_ID) is read; in a forked child, the world
 * again; from MPI after MPI_Init (ccs_runtime_set_world). */
CCS_HIDDEN void ccs_process_detect(void);
CCS_HIDDEN void ccs_process_detect_job(void);
CCS_HIDDEN void ccs_process_forked(void);
CCS_HIDDEN void ccs_process_set_world(int rank, int size);

#endif
