/*
 * registry.c - the registry of feature hooks (registry.h says why).
 *
 * Registration happens in constructors and at MPI_Init/communicator
 * creation, before or beside the first calls: entries are appended and
 * published with a release store of the count, and read without a lock.
 */
#include "registry.h"
#include "log.h"
#include <stddef.h>

#define MAX_FEATURES 8

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

int ccs_features_query(const char *fact, uint64_t *value)
{
    FOR_EACH_FEATURE(f)
    if (f->query && f->query(fact, value) == 0)
        return 0;
    return -1;
}
