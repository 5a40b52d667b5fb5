/*
 * registry.c - the registry of feature hooks and of the services the
 * backends and features offer each other (registry.h says why).
 *
 * Registration happens in constructors and at MPI_Init/communicator
 * creation, before or beside the first calls: entries are appended and
 * published with a release store of the count, and read without a lock.
 */
#include "registry.h"
#include "clock.h"
#include "log.h"
#include "ccshim.h"
#include "comm.h"
#include <string.h>

#define MAX_FEATURES 8
#define MAX_ABORTS 4

static const struct ccs_feature *features[MAX_FEATURES];
static atomic_int nfeatures;
static atomic_int signal_prepared; /* ccs_features_prepare_signal ran */
atomic_int ccs_features_started;

int ccs_feature_register(const struct ccs_feature *f)
{
    static atomic_int claimed;
    int i = atomic_fetch_add(&claimed, 1);
    if (i >= MAX_FEATURES) {
        CCS_LOG(ERROR, "internal: more than %d features; '%s' is not hooked", MAX_FEATURES, f->name);
        return -1;
    }
    features[i] = f;
    /* Publish in order: a slot is visible once every earlier one is. */
    int expect = i;
    while (!atomic_compare_exchange_weak(&nfeatures, &expect, i + 1))
        expect = i;
    /* Constructors run in no set order: a feature that registers after the
     * signal handlers went in prepares now. */
    if (atomic_load(&signal_prepared) && f->prepare_signal)
        f->prepare_signal();
    return 0;
}

#define FOR_EACH_FEATURE(f)                                                                                        \
    for (int i_ = 0, n_ = atomic_load_explicit(&nfeatures, memory_order_acquire); i_ < n_; i_++)                 \
        for (const struct ccs_feature *f = features[i_]; f; f = NULL)

void ccs_features_first_call(void)
{
    if (atomic_exchange(&ccs_features_started, 1))
        return;
    FOR_EACH_FEATURE(f)
    if (f->first_call)
        f->first_call();
}

void ccs_features_step(uint64_t step)
{
    FOR_EACH_FEATURE(f)
    if (f->step)
        f->step(step);
}

void ccs_features_finish(int reason)
{
    /* Last registered, first finished (registry.h). */
    for (int i = atomic_load_explicit(&nfeatures, memory_order_acquire) - 1; i >= 0; i--)
        if (features[i]->finish)
            features[i]->finish(reason);
}

int ccs_features_flush(int reason, int signo)
{
    int rc = -1;
    FOR_EACH_FEATURE(f)
    if (f->flush && f->flush(reason, signo) == 0)
        rc = 0;
    return rc;
}

void ccs_features_fork_child(void)
{
    atomic_store(&ccs_features_started, 0); /* the child's first call starts its own */
    FOR_EACH_FEATURE(f)
    if (f->fork_child)
        f->fork_child();
}

void ccs_features_prepare_signal(void)
{
    atomic_store(&signal_prepared, 1);
    FOR_EACH_FEATURE(f)
    if (f->prepare_signal)
        f->prepare_signal();
}

void ccs_features_verdict(const char *cls, uint64_t comm, uint64_t seq, const char *line)
{
    FOR_EACH_FEATURE(f)
    if (f->verdict)
        f->verdict(cls, comm, seq, line);
}

const char *ccs_features_trace_path(void)
{
    FOR_EACH_FEATURE(f)
    if (f->trace_path && f->trace_path())
        return f->trace_path();
    return NULL;
}

/* ------------------------------------------------------------ agreement */

static _Atomic(ccs_agree_fn) agree_service;

void ccs_agree_register(ccs_agree_fn fn) { atomic_store(&agree_service, fn); }

int ccs_agree_available(void) { return atomic_load(&agree_service) != NULL; }

int ccs_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max, uint64_t *agreed_min,
                  int timeout_ms)
{
    ccs_agree_fn fn = atomic_load(&agree_service);
    return fn ? fn(c, key, mine, agreed_max, agreed_min, timeout_ms) : -1;
}

/* --------------------------------------------------------- step boundary */

/* A seqlock of one writer: odd while the communicators are being written. */
static _Atomic uint32_t boundary_gen;
static _Atomic uint32_t boundary_step1;
static _Atomic uint64_t boundary_comm[CCS_BOUNDARY_COMMS];
static _Atomic uint32_t boundary_n;

void ccs_boundary_enter(uint32_t step, const uint64_t *comms, uint32_t n)
{
    if (n > CCS_BOUNDARY_COMMS)
        n = CCS_BOUNDARY_COMMS;
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_acq_rel);
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&boundary_comm[i], comms[i], memory_order_relaxed);
    atomic_store_explicit(&boundary_n, n, memory_order_relaxed);
    atomic_store_explicit(&boundary_step1, step + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_release);
}

void ccs_boundary_leave(void)
{
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_acq_rel);
    atomic_store_explicit(&boundary_step1, 0, memory_order_relaxed);
    atomic_store_explicit(&boundary_n, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_release);
}

uint32_t ccs_boundary_get(uint64_t *comms, uint32_t *n)
{
    for (int tries = 0; tries < 100; tries++) {
        uint32_t g = atomic_load_explicit(&boundary_gen, memory_order_acquire);
        if (g & 1)
            continue;
        uint32_t s = atomic_load_explicit(&boundary_step1, memory_order_relaxed);
        uint32_t k = atomic_load_explicit(&boundary_n, memory_order_relaxed);
        k = k > CCS_BOUNDARY_COMMS ? CCS_BOUNDARY_COMMS : k;
        for (uint32_t i = 0; i < k; i++)
            comms[i] = atomic_load_explicit(&boundary_comm[i], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&boundary_gen, memory_order_relaxed) == g) {
            *n = s ? k : 0;
            return s;
        }
    }
    *n = 0;
    return 0;
}

/* ------------------------------------------------------------- verdicts */

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

static _Atomic uint64_t detector_pass_ms;

void ccs_detector_pass_note(void)
{
    atomic_store_explicit(&detector_pass_ms, ccs_clock_mono_ms(), memory_order_relaxed);
}

uint64_t ccs_detector_last_pass_ms(void) { return atomic_load_explicit(&detector_pass_ms, memory_order_relaxed); }

/* ---------------------------------------------------------------- abort */

static struct {
    int (*fn)(void *, uint64_t);
    void *arg;
    int job_wide;
} aborts[MAX_ABORTS];
static atomic_int naborts;

int ccs_abort_register(int (*fn)(void *, uint64_t), void *arg, int job_wide)
{
    static atomic_int claimed;
    int i = atomic_fetch_add(&claimed, 1);
    if (i >= MAX_ABORTS)
        return -1;
    aborts[i].fn = fn;
    aborts[i].arg = arg;
    aborts[i].job_wide = job_wide;
    int expect = i;
    while (!atomic_compare_exchange_weak(&naborts, &expect, i + 1))
        expect = i;
    return 0;
}

int ccs_abort_job_wide(void)
{
    int n = atomic_load(&naborts), wide = 0;
    for (int i = 0; i < n; i++)
        wide |= aborts[i].job_wide;
    return wide;
}

int ccs_abort_job(uint64_t comm)
{
    int n = atomic_load(&naborts), rc = -1;
    for (int i = 0; i < n; i++) {
        int r = aborts[i].fn(aborts[i].arg, comm);
        if (r == 0)
            return 0;
        if (r == 1)
            rc = 1;
    }
    return rc;
}
