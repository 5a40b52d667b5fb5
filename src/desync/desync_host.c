/*
 * desync_host.c - what this rank does for its host beside its own status:
 * the host's own search when no coordinator sees the job (one rank runs it
 * for all), and the coordinator's messages (verdicts, agreements, requests
 * for records, BYE) posted into the host's shared memory, where every rank
 * here reads them.
 */
#include "clock.h"
#include "desync_collect.h"
#include "desync_state.h"
#include <string.h>

/* ------------------------------------------------ the coordinator's messages */

static void post_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_verdict(ccs_ds.shm, v);
}

/* The coordinator asks for the records of (COMM, SEQ): every rank of this
 * host publishes what it kept around SEQ. */
static void post_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ccs_ds.shm, comm, seq, ccs_clock_mono_ms());
}

static void post_bye(void *arg)
{
    (void)arg;
    ccs_dsx_shm_set_bye(ccs_ds.shm);
}

static void post_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_agreed(ccs_ds.shm, a);
}

uint64_t ccs_dsx_wanted_seq(uint64_t comm, int probe, void *arg)
{
    (void)arg;
    return ccs_ds.shm ? ccs_dsx_shm_wanted(ccs_ds.shm, comm, probe, ccs_clock_mono_ms()) : 0;
}

struct ccs_dsx_client *ccs_dsx_host_client(const char *host, int port)
{
    struct ccs_dsx_client_cb cb = {
        .verdict = post_verdict, .agreed = post_agreed, .want = post_want, .bye = post_bye};
    return ccs_dsx_client_new_cred(host, port, ccs_ds.world_size, ccs_ds.world_rank, ccs_ds.cred, ccs_ds.hostkey,
                                   &cb);
}

/* ------------------------------------------------ the host's own search
 *
 * Without a coordinator (every rank of the job on this host) the search for
 * the seq where a communicator's members differ (desync_search.c) runs
 * here, in one rank: the lowest whose process is still there (also while
 * it lingers at its exit).  Its probes and requests for records go into
 * shared memory, where every rank here reads them, and every rank's rules
 * then compare the records it asked for.  Before, a silent MISMATCH (a
 * count the collective lets complete) was named only where one rank's view
 * happened to hold every member's record of the odd seq, or 2 s later from
 * the hashes alone, without the operations, or not at all in a shorter job
 * (the test NCCL's 1000-step job: 4 runs in 10). */
static void local_probe(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ccs_ds.shm, comm, seq | CCS_DSX_PROBE_BIT, ccs_clock_mono_ms());
}

/* The search runs in the lowest rank here whose process is still there. */
void ccs_dsx_host_search(uint64_t now)
{
    int32_t owner = -1;
    for (int32_t r = 0; r < ccs_ds.world_size; r++) {
        const struct ccs_dsx_status *o = ccs_ds.view[r];
        ccs_ds.search_gone[r] = !o || (r != ccs_ds.world_rank && ccs_dsx_peer_gone(r, now));
        if (owner < 0 && o && !ccs_ds.search_gone[r])
            owner = r;
    }
    if (owner != ccs_ds.world_rank) {
        memset(ccs_ds.srch, 0, sizeof ccs_ds.srch); /* (a search this rank ran is the new owner's to start again) */
        return;
    }
    struct ccs_dsx_search_out out = {.probe = local_probe, .want = post_want};
    ccs_dsx_search_pass(ccs_ds.srch, ccs_ds.world_size, ccs_ds.view, ccs_ds.search_gone, ccs_ds.seen, now, &out);
    ccs_dsx_shm_set_search(ccs_ds.shm, now, ccs_dsx_search_settled(ccs_ds.srch, now));
}
