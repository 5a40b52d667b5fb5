/*
 * coalesce_step.c - what coalescing does at step markers and at the end.
 *
 * Verification (every policy, every marker): an identity with deferred
 * calls still pending when a step ends never had its real reduction, so
 * this rank's buffer holds a rank-local value.  That is never let pass: it
 * is reported with the identities and the number of calls, then the job
 * ends (CCSHIM_ON_DESYNC=abort) or coalescing is switched off (warn).
 *
 * Learning (auto): during the first CCSHIM_COALESCE_LEARN_STEPS steps every
 * call is real and counted per identity and step.  An identity qualifies
 * with N when it was called N >= 2 times in each learning step since it was
 * first seen.  At the marker that ends learning the members of every
 * communicator agree on the qualified identities (a digest of ordinal,
 * count, datatype, op and N; over desync's side channel, else through
 * ccs_coalesce_agree, MPI's) before anything is deferred; a communicator
 * whose members disagree coalesces nothing.
 */
#include "ccs_config.h"
#include "coalesce.h"
#include "agree.h"
#include "abort.h"
#include "registry.h"
#include "runtime.h"
#include "log.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ccs_coalesce_agree_fn ccs_coalesce_agree;

#define MAX_COMMS 64 /* communicators with candidates, per agreement */
#define EMPTY_DIGEST 0x6469676573740000ULL /* a communicator's digest with no candidate */

static int overflow_logged, no_agreement_logged;

/* ------------------------------------------------------------ verification */

struct check {
    uint64_t step;
    int bad;           /* identities with calls pending */
    uint64_t calls;    /* deferred calls pending, in all */
};

static void check_one(struct ccs_coal_id *id, void *arg)
{
    struct check *k = arg;
    uint32_t pending = atomic_load_explicit(&id->pending, memory_order_relaxed);
    if (!pending)
        return;
    char d[256];
    ccs_coalesce_describe(id, d, sizeof d);
    if (k->bad++ < 16)
        CCS_LOG(ERROR, "coalescing:   %s: %u deferred call(s) without their real reduction (%u call(s) this step, "
                       "a real one expected every %u)",
                d, pending, atomic_load_explicit(&id->in_step, memory_order_relaxed),
                atomic_load_explicit(&id->period, memory_order_relaxed));
    k->calls += pending;
    atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
}

/* Reports identities left with deferred calls; returns how many. */
static int verify(uint64_t step, const char *when)
{
    struct check k = {.step = step};
    ccs_coalesce_foreach(check_one, &k);
    if (!k.bad)
        return 0;
    CCS_LOG(ERROR,
            "coalescing: %s ended with %llu deferred all-reduce(s) on %d identit%s never completed for real "
            "(listed above): the values in those buffers are this rank's own, not the reduction. A last step "
            "shorter than the others or a changed schedule does this; use drop_last (equal steps) or a fixed "
            "every:N, see docs/coalescing.md",
            when, (unsigned long long)k.calls, k.bad, k.bad == 1 ? "y" : "ies");
    if (ccs_coalesce_abort_on_error()) {
        CCS_LOG(ERROR, "coalescing: CCSHIM_ON_DESYNC=abort: ending the job");
        ccs_abort_job(0); /* MPI_Abort or ncclCommAbort, as registered */
        abort();
    }
    ccs_coalesce_disable("CCSHIM_ON_DESYNC is not abort; reductions are all real from now on");
    return k.bad;
}

/* ---------------------------------------------------------------- learning */

/* auto learns each identity on its own, from the counts of its calls per
 * step: it qualifies with N once CCSHIM_COALESCE_LEARN_STEPS consecutive
 * counted steps each called it N >= 2 times.  The step it first appears in
 * may be partial (DDP rebuilds its buckets in the middle of step 0, so the
 * new buffers see m-1 calls there and m in every later step): a count that
 * differs from the previous one restarts the run, so such an identity
 * qualifies one step later than one seen whole from the start.  A step in
 * which it was not called at all (a second optimizer's marker, a bucket
 * that moved) is not counted. */
struct learn {
    uint32_t step;     /* the step that just ended */
    int broken;        /* coalesced identities whose count changed */
};

static void learn_one(struct ccs_coal_id *id, void *arg)
{
    struct learn *l = arg;
    uint32_t n = atomic_load_explicit(&id->in_step, memory_order_relaxed);
    uint32_t period = atomic_load_explicit(&id->period, memory_order_relaxed);
    if (n == 0)
        return;
    id->seen_step1 = l->step + 1;
    if (period >= 2) {
        if (n == period)
            return;
        /* The schedule changed under a coalesced identity: every call of
         * the step was either real or completed (verify() has run), so it
         * goes back to learning, all real, and is agreed on again. */
        char d[256];
        ccs_coalesce_describe(id, d, sizeof d);
        CCS_LOG(INFO, "coalescing auto: %s: %u call(s) in step %u instead of %u; learning it again", d, n, l->step,
                period);
        atomic_store_explicit(&id->period, 0, memory_order_relaxed);
        id->learned = n;
        id->learn_run = 1;
        l->broken++;
        return;
    }
    if (n == id->learned)
        id->learn_run++;
    else {
        id->learned = n;
        id->learn_run = 1;
        id->agree_waits = 0;
    }
}

struct digest {
    size_t n;
    uint64_t comm[MAX_COMMS];
    uintptr_t handle[MAX_COMMS];
    uint8_t backend[MAX_COMMS];
    int32_t size[MAX_COMMS];
    uint64_t dig[MAX_COMMS];
    uint64_t hi[MAX_COMMS], lo[MAX_COMMS]; /* the members' largest and smallest digest (side channel) */
    uint8_t agreed[MAX_COMMS];
    int overflow;
};

/* An identity ready to be agreed on now: learned, not coalesced yet, and
 * not refused by its communicator before with the same count. */
static int qualifies(const struct ccs_coal_id *id)
{
    return atomic_load_explicit(&id->period, memory_order_relaxed) == 0 && id->learned >= 2 &&
           id->learn_run >= (uint32_t)ccs_cfg.coalesce_learn_steps && id->agree_failed != id->learned;
}

static int comm_slot(struct digest *d, const struct ccs_coal_id *id)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->comm[i] == id->comm)
            return (int)i;
    if (d->n == MAX_COMMS) {
        d->overflow = 1;
        return -1;
    }
    d->comm[d->n] = id->comm;
    d->handle[d->n] = id->handle;
    d->backend[d->n] = id->backend;
    d->size[d->n] = id->size;
    d->dig[d->n] = EMPTY_DIGEST;
    return (int)d->n++;
}

/* X was called in the step that ID was last called in. */
static int same_step(const struct ccs_coal_id *x, const struct ccs_coal_id *id)
{
    return x->seen_step1 == id->seen_step1;
}

/* Order-independent digest per communicator: the sum of one hash per
 * qualified identity (table order differs between ranks, places do not). */
static void digest_one(struct ccs_coal_id *id, void *arg)
{
    struct digest *d = arg;
    if (!qualifies(id))
        return;
    int i = comm_slot(d, id);
    if (i < 0)
        return;
    id->agreed_ord = ccs_coalesce_place(id, same_step); /* among those the step called (ccs_coalesce_place); kept when agreed */
    uint64_t h = ccs_hash_mix(id->comm, id->agreed_ord);
    h = ccs_hash_mix(h, id->count);
    h = ccs_hash_mix(h, (uint64_t)id->dtype << 8 | id->op);
    h = ccs_hash_mix(h, id->scalar);
    h = ccs_hash_mix(h, id->learned);
    d->dig[i] += h;
}

/* The members differ only in that some had no candidate there yet (their
 * empty digest against this rank's): an identity they first saw a step
 * later (a bucket rebuilt at a new address on one rank only) qualifies
 * there a marker later.  Asked again at the next AGREE_WAIT_MARKERS
 * markers before it counts as refused. */
#define AGREE_WAIT_MARKERS 4
static int not_learned_yet(const struct digest *d, size_t i)
{
    return !d->agreed[i] && ((d->lo[i] == EMPTY_DIGEST && d->hi[i] == d->dig[i]) ||
                             (d->hi[i] == EMPTY_DIGEST && d->lo[i] == d->dig[i]));
}

static void enable_one(struct ccs_coal_id *id, void *arg)
{
    struct digest *d = arg;
    if (!qualifies(id))
        return;
    for (size_t i = 0; i < d->n; i++) {
        if (d->comm[i] != id->comm)
            continue;
        char desc[256];
        ccs_coalesce_describe(id, desc, sizeof desc);
        if (!d->agreed[i]) {
            if (not_learned_yet(d, i) && id->agree_waits < AGREE_WAIT_MARKERS) {
                id->agree_waits++; /* asked again at the next marker */
                return;
            }
            if (not_learned_yet(d, i))
                CCS_LOG(WARN, "coalescing auto: %s: the other members had no candidate for it at %d markers in a "
                              "row; not coalesced",
                        desc, AGREE_WAIT_MARKERS + 1);
            id->agree_failed = id->learned; /* not again with the same count */
            return;
        }
        CCS_LOG(INFO, "coalescing auto: %s: %u calls per step, the last real", desc, id->learned);
        atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
        atomic_store_explicit(&id->period, id->learned, memory_order_relaxed);
    }
}

/* Every communicator this rank has identities on (their digests unused). */
static void comm_of_one(struct ccs_coal_id *id, void *arg) { (void)comm_slot(arg, id); }

/* Agreement over desync's side channel: one ccs_desync_agree_u64 per
 * communicator, in increasing identity order on every rank (so two ranks
 * never wait for each other on different communicators); agreed when the
 * largest and the smallest digest of the members are equal.  First, on
 * every communicator where this rank has identities but no candidate, it
 * puts its empty digest without waiting: a member with candidates there
 * then finds the two differ at once (its candidates are refused, once per
 * count) instead of waiting AGREE_TIMEOUT_MS for an answer that never came
 * (under load, one rank's DDP bucket reused its buffer's address after the
 * rebuild and the other's did not: 1 identity against 2, and the job
 * stalled until a STRAGGLER warning 10 s later ended the wait). */
#define AGREE_TIMEOUT_MS 30000
static uint64_t agree_key(void) { return ccs_hash_mix(0x636f616c65736365ULL /* "coalesce" */, ccs_step_now()); }

/* On the communicators of ALL without a candidate in D: the empty digest. */
static void desync_answer(const struct digest *all, const struct digest *d, uint64_t key)
{
    for (size_t i = 0; i < all->n; i++) {
        int cand = 0;
        for (size_t k = 0; k < d->n; k++)
            cand |= d->comm[k] == all->comm[i];
        struct ccs_comm *c = cand ? NULL : ccs_comm_lookup(all->backend[i], all->handle[i]);
        uint64_t hi = 0, lo = 1;
        if (c && c->agreed)
            (void)ccs_agree_u64(c, key, EMPTY_DIGEST, &hi, &lo, 0); /* put, look once, go on */
    }
}

static void desync_agree(struct digest *d)
{
    size_t order[MAX_COMMS];
    for (size_t i = 0; i < d->n; i++)
        order[i] = i;
    for (size_t i = 1; i < d->n; i++) /* insertion sort by identity */
        for (size_t j = i; j > 0 && d->comm[order[j]] < d->comm[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t k = 0; k < d->n; k++) {
        size_t i = order[k];
        uint64_t hi = 0, lo = 1;
        struct ccs_comm *c = ccs_comm_lookup(d->backend[i], d->handle[i]);
        uint64_t key = agree_key();
        d->agreed[i] = c && c->agreed &&
                       ccs_agree_u64(c, key, d->dig[i], &hi, &lo, AGREE_TIMEOUT_MS) == 0 && hi == lo &&
                       hi == d->dig[i];
        d->hi[i] = hi;
        d->lo[i] = lo;
    }
}

/* The MPI fallback agrees through a collective on a private communicator,
 * so every rank must hold the round at the same marker whether or not it
 * has candidates: at each of the first MPI_ROUNDS_EARLY markers since the
 * policy was put in force, then at every MPI_ROUNDS_EVERY-th (the same
 * markers on every rank, as their steps are). */
#define MPI_ROUNDS_EARLY 16
#define MPI_ROUNDS_EVERY 16
static uint64_t markers;         /* since the policy was put in force */
static uint32_t markers_policy;  /* the policy generation they count under */

static int mpi_round_due(void)
{
    return markers <= MPI_ROUNDS_EARLY || markers % MPI_ROUNDS_EVERY == 0;
}

static void agree_and_enable(uint64_t step)
{
    static struct digest d; /* the marker path is single-threaded per process */
    memset(&d, 0, sizeof d);
    ccs_coalesce_foreach(digest_one, &d);
    if (d.overflow)
        ccs_log_once(&overflow_logged, CCS_LOG_WARN,
                     "coalescing auto: candidates on more than %d communicators; the others stay uncoalesced",
                     MAX_COMMS);
    const char *how;
    if (ccs_agree_available()) {
        static struct digest all;
        memset(&all, 0, sizeof all);
        ccs_coalesce_foreach(comm_of_one, &all);
        desync_answer(&all, &d, agree_key());
        if (d.n == 0)
            return;
        how = "the side channel";
        desync_agree(&d);
    } else if (ccs_coalesce_agree) {
        if (!mpi_round_due())
            return;
        how = "a private MPI communicator";
        if (ccs_coalesce_agree(d.n, d.comm, d.size, d.dig, d.agreed) != 0) {
            CCS_LOG(WARN, "coalescing auto: the agreement between ranks failed; nothing more is coalesced");
            ccs_coalesce_agree = NULL;
            return;
        }
        if (d.n == 0)
            return;
    } else {
        if (d.n)
            ccs_log_once(&no_agreement_logged, CCS_LOG_WARN,
                         "coalescing auto: no way to agree with the other ranks in this process (no side channel: "
                         "CCSHIM_DESYNC=0 or not started, and no MPI); nothing is coalesced");
        return;
    }
    size_t ok = 0;
    for (size_t i = 0; i < d.n; i++) {
        ok += d.agreed[i];
        if (d.agreed[i])
            continue;
        if (not_learned_yet(&d, i))
            CCS_LOG(INFO, "coalescing auto: communicator %016llx: a member has no candidate there yet; asked again "
                          "at the next marker (at most %d times)",
                    (unsigned long long)d.comm[i], AGREE_WAIT_MARKERS);
        else
            CCS_LOG(WARN, "coalescing auto: the members of communicator %016llx learned different schedules; "
                          "its new candidates are not coalesced",
                    (unsigned long long)d.comm[i]);
    }
    CCS_LOG(INFO, "coalescing auto: agreed on %zu of %zu communicator(s) through %s at step %llu", ok, d.n, how,
            (unsigned long long)step);
    ccs_coalesce_foreach(enable_one, &d);
}

static void reset_step(struct ccs_coal_id *id, void *arg)
{
    (void)arg;
    atomic_store_explicit(&id->in_step, 0, memory_order_relaxed);
    /* every:N restarts its cycle at each step: a completion or a short
     * step never shifts the real call of the next one. */
    atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
}

void ccs_coalesce_step_end(uint64_t step)
{
    const struct ccs_coalesce_policy *p = ccs_coalesce_policy();
    if (p->mode == CCS_COALESCE_OFF || !atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed))
        return;
    char when[64];
    snprintf(when, sizeof when, "step %llu", (unsigned long long)(step ? step - 1 : 0));
    /* Calls left pending: first make sure the ranks ended the step alike (a
     * rank that skipped a mini-batch is a DESYNC, docs/coalescing.md). */
    if (ccs_coalesce_pending_calls())
        ccs_coalesce_boundary_of((uint32_t)(step ? step - 1 : 0));
    verify(step, when);
    uint32_t gen = ccs_coalesce_policy_generation();
    if (gen != markers_policy) { /* a new policy: its rounds count from here */
        markers_policy = gen;
        markers = 0;
    }
    markers++;
    if (p->mode == CCS_COALESCE_AUTO && atomic_load(&ccs_coalesce_on) && !atomic_load(&ccs_coalesce_helper_on)) {
        struct learn l = {.step = (uint32_t)(step ? step - 1 : 0)};
        ccs_coalesce_foreach(learn_one, &l);
        agree_and_enable(step);
    }
    ccs_coalesce_foreach(reset_step, NULL);
}

/* ------------------------------------------------------------------- finish */

struct totals {
    uint64_t deferred, real, helper_avoided, helper_real;
    int ids, active;
};

static void total_one(struct ccs_coal_id *id, void *arg)
{
    struct totals *t = arg;
    t->deferred += atomic_load_explicit(&id->deferred, memory_order_relaxed);
    t->real += atomic_load_explicit(&id->real, memory_order_relaxed);
    t->helper_avoided += atomic_load_explicit(&id->helper_avoided, memory_order_relaxed);
    t->helper_real += atomic_load_explicit(&id->helper_real, memory_order_relaxed);
    t->ids++;
    t->active += atomic_load_explicit(&id->period, memory_order_relaxed) >= 2 || id->helper_gen;
}

void ccs_coalesce_finish(void)
{
    static atomic_int done;
    const struct ccs_coalesce_policy *p = ccs_coalesce_policy();
    if (p->mode == CCS_COALESCE_OFF || atomic_exchange(&done, 1))
        return;
    if (atomic_load(&ccs_coalesce_on))
        verify(ccs_step_now(), "the run");
    /* auto in a job that never marked a step learned nothing (it counts
     * calls per step): said once, by rank 0 (the lowest; or a process whose
     * rank is not known), with how to mark steps; no count line.  Only by
     * a process that issued a collective: the launcher's processes under
     * the preload (a pyenv shim's bash, torchrun's agent, a wrapper
     * script: rank -1) have nothing to say about coalescing. */
    if (p->mode == CCS_COALESCE_AUTO && ccs_step_now() == 0) {
        if (ccs_world_rank() <= 0 && ccs_process_collectives() > 0)
            CCS_LOG(WARN, "coalescing auto: no step was marked in this run, so nothing was coalesced (auto learns "
                          "each all-reduce's calls per step from step marks); mark steps with ccshim-run --torch "
                          "(PyTorch optimizer steps), or call ccshim_step_mark() once per step (CCSHIM_STEP_MARK() "
                          "in C, ccshim.h), or use CCSHIM_COALESCE=every:N");
        return;
    }
    struct totals t = {0};
    ccs_coalesce_foreach(total_one, &t);
    if (ccs_cfg.summary && !t.helper_avoided)
        CCS_LOG(NOTE, "coalescing: %llu all-reduces answered locally, %llu real ones carrying them, %d of %d "
                      "identities coalesced",
                (unsigned long long)t.deferred, (unsigned long long)t.real, t.active, t.ids);
    else if (ccs_cfg.summary)
        CCS_LOG(NOTE, "coalescing: %llu all-reduces answered locally, %llu real ones carrying them, %d of %d "
                      "identities coalesced; %llu of them avoided by the torch helper (DDP skipped its "
                      "per-mini-batch work, %llu real), %llu answered by ccshim (%llu real)",
                (unsigned long long)(t.deferred + t.helper_avoided), (unsigned long long)(t.real + t.helper_real),
                t.active, t.ids, (unsigned long long)t.helper_avoided, (unsigned long long)t.helper_real,
                (unsigned long long)t.deferred, (unsigned long long)t.real);
}

/* ---------------------------------------------------------- registration */

static void finish_hook(int reason)
{
    (void)reason;
    ccs_coalesce_finish();
}

static const struct ccs_feature coalescing = {
    .name = "coalescing",
    .step = ccs_coalesce_step_end,
    .finish = finish_hook,
};

/* Coalescing joins the core as a feature with step and finish hooks.  The
 * library's constructor order is not defined: make sure the runtime (and
 * with it the configuration) is up before reading the policy. */
__attribute__((constructor)) static void coalesce_ctor(void)
{
    if (ccs_runtime_init() == 0) {
        ccs_coalesce_init();
        ccs_feature_register(&coalescing);
    }
}
