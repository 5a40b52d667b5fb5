/*
 * coalesce_complete.c - completing deferred reductions before an optimizer
 * step, so that no step ever reads a buffer that coalescing left holding a
 * rank-local value.
 *
 * A deferred call answers with what the reduction would return if every
 * member held what this rank holds; docs/coalescing.md proves that the mean
 * over the members of those local answers is the true reduction.  So when
 * a step ends before an identity's real call (a short last batch, an
 * every:N that does not divide the step, a bucket rebuilt mid-cycle), one
 * real SUM of the buffer followed by a division by W gives every rank the
 * value it would have had without coalescing, and leaves a buffer that was
 * already reduced (identical on every rank) unchanged.
 *
 * The torch helper averages the parameters' .grad itself (DDP copied the
 * bucket there, out of ccshim's reach) and only tells ccshim it did
 * (ccshim_coalesce_complete(CCSHIM_COMPLETE_BY_CALLER)).
 */
#include "ccs_config.h"
#include "ccshim.h"
#include "coalesce.h"
#include "log.h"
#include "process.h"
#include <stdlib.h>
#include <string.h>

ccs_coalesce_complete_fn ccs_coalesce_completer[CCS_COALESCE_BACKENDS];

#define MAX_PENDING 1024 /* = CCS_COALESCE_SLOTS: every identity fits */

struct pending_list {
    size_t n;
    uint64_t calls;
    struct ccs_coal_id *id[MAX_PENDING];
};

static void collect_one(struct ccs_coal_id *id, void *arg)
{
    struct pending_list *l = arg;
    uint32_t p = atomic_load_explicit(&id->pending, memory_order_relaxed);
    if (!p || l->n == MAX_PENDING)
        return;
    l->id[l->n++] = id;
    l->calls += p;
}

static void count_one(struct ccs_coal_id *id, void *arg)
{
    *(uint64_t *)arg += atomic_load_explicit(&id->pending, memory_order_relaxed);
}

uint64_t ccs_coalesce_pending_calls(void)
{
    uint64_t n = 0;
    if (ccs_coalesce_policy()->mode != CCS_COALESCE_OFF)
        ccs_coalesce_foreach(count_one, &n);
    return n;
}

/* Completions are collectives: every rank must make them in one order.
 * Communicator identities and per-communicator agreed places
 * (ccs_coal_id.agreed_ord) are the same on every member, table slots and
 * addresses are not. */
static int by_comm_then_ordinal(const void *a, const void *b)
{
    const struct ccs_coal_id *x = *(struct ccs_coal_id *const *)a, *y = *(struct ccs_coal_id *const *)b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    return x->agreed_ord < y->agreed_ord ? -1 : x->agreed_ord > y->agreed_ord;
}

static int completions_logged;

int64_t ccs_coalesce_complete(int by_caller)
{
    static struct pending_list l; /* optimizer steps come one at a time */
    l.n = 0;
    l.calls = 0;
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF)
        return 0;
    ccs_coalesce_foreach(collect_one, &l);
    if (!l.n)
        return 0;
    /* A real reduction is a collective: never issued unless every member
     * ended the step alike (a caller that averaged by itself asked first). */
    if (!by_caller && ccs_coalesce_boundary() != 0)
        return -1;
    qsort(l.id, l.n, sizeof l.id[0], by_comm_then_ordinal);
    int failed = 0;
    for (size_t i = 0; i < l.n; i++) {
        struct ccs_coal_id *id = l.id[i];
        if (!by_caller) {
            ccs_coalesce_complete_fn fn = id->backend < CCS_COALESCE_BACKENDS ? ccs_coalesce_completer[id->backend] : NULL;
            if (!fn || fn(id) != 0) {
                char d[256];
                ccs_coalesce_describe(id, d, sizeof d);
                CCS_LOG(ERROR, "coalescing: could not complete %s: its buffer holds this rank's own value", d);
                failed++;
                continue;
            }
        }
        atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
        id->completions++;
    }
    /* One line for the first few, then only the summary at the end counts
     * them: a wrong every:N completes every step. */
    if (completions_logged < 3) {
        completions_logged++;
        CCS_LOG(INFO, "coalescing: step %u ended with %llu deferred all-reduce(s) on %zu buffer(s) before their "
                      "real one; completed %s before the optimizer step%s",
                ccs_step_now(), (unsigned long long)l.calls, l.n,
                by_caller ? "by the caller (mean of the values over the ranks)" : "by a real reduction",
                completions_logged == 3 ? " (further completions are counted in the summary)" : "");
    }
    if (failed) {
        ccs_coalesce_disable("a deferred reduction could not be completed");
        return -1;
    }
    return (int64_t)l.n;
}

/* ---------------------------------------------------------- public API */

uint64_t ccshim_coalesce_pending(void) { return ccs_coalesce_pending_calls(); }

int64_t ccshim_coalesce_complete(int how)
{
    if (how != CCSHIM_COMPLETE_REDUCE && how != CCSHIM_COMPLETE_BY_CALLER) {
        CCS_LOG(ERROR, "ccshim_coalesce_complete(%d): expected CCSHIM_COMPLETE_REDUCE (0) or "
                       "CCSHIM_COMPLETE_BY_CALLER (1); nothing done",
                how);
        return -1;
    }
    return ccs_coalesce_complete(how == CCSHIM_COMPLETE_BY_CALLER);
}
