/*
 * process.c - what this process is: whether interception is on, whether
 * records carry times, the step, the world rank and size (from MPI, else
 * from the launcher's environment), the host and the job.  Everything in
 * ccshim that names the rank, host or job asks here, and so does what reads
 * the launcher's other integers (ccs_env_int).
 */
#include "ccs_config.h"
#include "process.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

atomic_int ccs_active;
int ccs_timing;
_Atomic uint64_t ccs_step;

static int world_rank = -1, world_size = -1;
static char host[256] = "?";
static char job[256] = "local";

int ccs_env_int(const char *name, int min)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return -1;
    long x = strtol(v, &end, 10);
    return *end == 0 && x >= min && x < (1L << 30) ? (int)x : -1;
}

/* The first of NAMES that is set to a decimal integer, or -1. */
static int env_int_first(const char *const *names)
{
    for (; *names; names++) {
        int x = ccs_env_int(*names, 0);
        if (x >= 0)
            return x;
    }
    return -1;
}

static void detect_world(void)
{
    static const char *const ranks[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                                        NULL};
    static const char *const sizes[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
    world_rank = env_int_first(ranks);
    world_size = env_int_first(sizes);
}

static void detect_job(void)
{
    static const char *const vars[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
                                       "PMIX_NAMESPACE", NULL};
    const char *v = ccs_cfg.job_id && *ccs_cfg.job_id ? ccs_cfg.job_id : NULL;
    for (const char *const *n = vars; !v && *n; n++) {
        const char *e = getenv(*n);
        if (e && *e)
            v = e;
    }
    snprintf(job, sizeof job, "%s", v ? v : "local");
}

void ccs_process_detect(void)
{
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    detect_world();
}

void ccs_process_detect_job(void) { detect_job(); }

void ccs_process_forked(void)
{
    /* A forked child is a different process and not the parent's rank: it
     * has no rank of its own (its trace, if it records anything, is named
     * rx and its pid; a child that records nothing says nothing). */
    world_rank = -1;
}

void ccs_process_set_world(int rank, int size)
{
    world_rank = rank;
    world_size = size;
}

int ccs_world_rank(void) { return world_rank; }
int ccs_world_size(void) { return world_size; }
const char *ccs_hostname(void) { return host; }
const char *ccs_job_id(void) { return job; }

uint32_t ccs_step_now(void) { return (uint32_t)atomic_load_explicit(&ccs_step, memory_order_relaxed); }
