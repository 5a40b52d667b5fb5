/*
 * uncovered.c - communication ccshim does not intercept (uncovered.h).
 *
 * ccshim sees MPI and NCCL.  A PyTorch job on the CPU runs its
 * torch.distributed collectives through gloo, which is compiled into
 * libtorch: nothing of it reaches ccshim, and without a word the job
 * looked covered (no trace, no line; under --torch the audit found steps
 * and no calls, and gave an all-clear).  The PyTorch helper names the
 * backend when the job initialises its process group; without the helper a
 * rank that loaded libtorch, belongs to a job of several ranks and recorded
 * no collective at all is noted at exit as "torch".  Either way the trace
 * says so (META uncovered=) and rank 0 says so at exit.
 */
#include <config.h>
#include "ccs_config.h"
#include "ccshim.h"
#include "log.h"
#include "process.h"
#include "uncovered.h"
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#define WHAT_MAX 32
static char meta[sizeof "uncovered=\n" + WHAT_MAX];
static size_t meta_len;
static atomic_int noted; /* 0 none, 1 being written, 2 set */

/* Sets WHAT (letters, digits, '.', '_', '-'; at most WHAT_MAX), first one wins.  0 or -1. */
static int note(const char *what)
{
    size_t n = 0;
    while (what[n] && n < WHAT_MAX) {
        char c = what[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return -1;
        n++;
    }
    if (n == 0 || what[n])
        return -1;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&noted, &expect, 1))
        return 0; /* the first one stays */
    memcpy(meta, "uncovered=", 10);
    memcpy(meta + 10, what, n);
    meta[10 + n] = '\n';
    meta_len = 11 + n;
    atomic_store_explicit(&noted, 2, memory_order_release);
    return 0;
}

int ccshim_uncovered(const char *what)
{
    if (!what || note(what) != 0) {
        CCS_LOG(WARN, "ccshim_uncovered: '%.40s' is not a backend name (letters, digits, '.', '_', '-'; at most %d)",
                what ? what : "(null)", WHAT_MAX);
        return -1;
    }
    return 0;
}

const char *ccs_uncovered_meta(size_t *len)
{
    if (atomic_load_explicit(&noted, memory_order_acquire) != 2)
        return NULL;
    *len = meta_len;
    return meta;
}

static const char *what(void)
{
    size_t len;
    const char *m = ccs_uncovered_meta(&len);
    return m ? m + 10 : NULL; /* "gloo\n" */
}

static int has_libtorch(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    return info->dlpi_name && strstr(info->dlpi_name, "/libtorch_cpu.so") != NULL;
}

void ccs_uncovered_at_exit(uint64_t collectives)
{
    if (collectives || what() || ccs_world_size() < 2 || ccs_world_rank() < 0)
        return;
    if (dl_iterate_phdr(has_libtorch, NULL))
        note("torch");
}

void ccs_uncovered_say(uint64_t collectives)
{
    static atomic_int said;
    const char *w = what();
    if (!w || ccs_world_rank() > 0 || atomic_exchange(&said, 1))
        return;
    size_t n = strcspn(w, "\n");
    if (n == 5 && strncmp(w, "torch", 5) == 0)
        CCS_LOG(WARN, "no collective of this PyTorch job reached ccshim: ccshim intercepts MPI (mpi4py, torch's mpi "
                      "backend) and NCCL (torch's nccl backend), not torch.distributed's gloo (its CPU backend), so "
                      "nothing was recorded, checked for desync or coalesced (ccshim-run --torch names the backend; "
                      "docs/coalescing.md, \"CPU jobs\")");
    else if (!collectives)
        CCS_LOG(WARN, "this job's torch.distributed process group runs on %.*s, which ccshim does not intercept: no "
                      "collective reached ccshim, so nothing was recorded, checked for desync or coalesced but what "
                      "the torch helper sees of torch.distributed's Python API (its calls counted, the one a rank "
                      "waits in named); ccshim covers MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl "
                      "backend) (docs/coalescing.md, \"CPU jobs\")",
                (int)n, w);
    else if (ccs_cfg.summary) /* a note beside the summary, which CCSHIM_SUMMARY=0 silences too */
        CCS_LOG(NOTE,
                "this job's torch.distributed process group runs on %.*s, which ccshim does not intercept: its "
                "collectives were not recorded, checked for desync or coalesced, only those through MPI and "
                "NCCL (the torch helper counts the calls of torch.distributed's Python API in the trace, and "
                "names the one a rank waits in)",
                (int)n, w);
}
