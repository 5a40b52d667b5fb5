/*
 * mpi_handles.c - the tables from an MPI handle to what ccshim keeps about
 * it (mpi_shim.h): persistent collective requests and the neighbour counts
 * of communicators with a topology.  Lookups are lock-free (the hot path
 * of MPI_Start and of the neighbourhood collectives); insertion and
 * removal take the table's mutex and happen where the MPI itself creates
 * or frees the handle.
 */
#include "log.h"
#include "mpi_shim.h"
#include <pthread.h>
#include <stdlib.h>

struct ccs_mpi_htab ccs_mpi_requests = {.what = "persistent collective requests"};
struct ccs_mpi_htab ccs_mpi_topos = {.what = "communicators with a topology"};

/* One mutex for both tables: they change only where the MPI creates or
 * frees a handle. */
static pthread_mutex_t htab_mu = PTHREAD_MUTEX_INITIALIZER;

#define HTAB_MIN 64u

static struct ccs_mpi_harr *harr_new(size_t slots)
{
    struct ccs_mpi_harr *a = calloc(1, sizeof *a + slots * sizeof a->slot[0]);
    if (a)
        a->mask = slots - 1;
    return a;
}

/* Places KEY, V in A (a slot known free of KEY), before A is published or
 * under the mutex: the value first, then the key with release. */
static void harr_place(struct ccs_mpi_harr *a, uintptr_t key, const union ccs_mpi_hval *v, int *was_empty)
{
    size_t i = ccs_mpi_hfirst(key, a->mask);
    for (;;) {
        uintptr_t k = atomic_load_explicit(&a->slot[i].key, memory_order_relaxed);
        if (k < 2) {
            a->slot[i].v = *v;
            atomic_store_explicit(&a->slot[i].key, key, memory_order_release);
            *was_empty = k == 0;
            return;
        }
        i = (i + 1) & a->mask;
    }
}

/* A table with room for one more handle, under the mutex: the array as it
 * is while used + 1 stays under 3/4 of it, else a copy of the live handles
 * into one with room for twice them, published; the old array is kept. */
static struct ccs_mpi_harr *room(struct ccs_mpi_htab *t)
{
    struct ccs_mpi_harr *a = atomic_load_explicit(&t->arr, memory_order_relaxed);
    if (a && (t->used + 1) * 4 < (a->mask + 1) * 3)
        return a;
    size_t slots = HTAB_MIN;
    while (slots < (t->live + 1) * 4)
        slots *= 2;
    struct ccs_mpi_harr *b = harr_new(slots);
    if (!b)
        return NULL;
    size_t live = 0;
    for (size_t i = 0; a && i <= a->mask; i++) {
        uintptr_t k = atomic_load_explicit(&a->slot[i].key, memory_order_relaxed);
        int e;
        if (k >= 2) {
            harr_place(b, k, &a->slot[i].v, &e);
            live++;
        }
    }
    b->older = a;
    t->used = t->live = live;
    atomic_store_explicit(&t->arr, b, memory_order_release);
    return b;
}

int ccs_mpi_hput(struct ccs_mpi_htab *t, uintptr_t key, const union ccs_mpi_hval *v)
{
    if (key < 2)
        return -1;
    pthread_mutex_lock(&htab_mu);
    union ccs_mpi_hval *old = ccs_mpi_hget(t, key);
    int rc = 0;
    if (old) {
        *old = *v; /* a handle the MPI reused without ccshim seeing it freed */
    } else {
        struct ccs_mpi_harr *a = room(t);
        if (a) {
            int was_empty = 0;
            harr_place(a, key, v, &was_empty);
            t->used += was_empty;
            t->live++;
        } else {
            rc = -1;
        }
    }
    pthread_mutex_unlock(&htab_mu);
    if (rc)
        ccs_log_once(&t->logged, CCS_LOG_ERROR, "out of memory for the table of %s; a handle is not tracked",
                     t->what);
    return rc;
}

void ccs_mpi_hdel(struct ccs_mpi_htab *t, uintptr_t key)
{
    if (key < 2)
        return;
    pthread_mutex_lock(&htab_mu);
    struct ccs_mpi_harr *a = atomic_load_explicit(&t->arr, memory_order_relaxed);
    if (a) {
        size_t i = ccs_mpi_hfirst(key, a->mask);
        for (size_t n = 0; n <= a->mask; n++, i = (i + 1) & a->mask) {
            uintptr_t k = atomic_load_explicit(&a->slot[i].key, memory_order_relaxed);
            if (k == key) {
                atomic_store_explicit(&a->slot[i].key, (uintptr_t)1, memory_order_release);
                t->live--;
                break;
            }
            if (k == 0)
                break;
        }
    }
    pthread_mutex_unlock(&htab_mu);
}

struct ccs_mpi_topo ccs_mpi_topo_slow(MPI_Comm comm)
{
    struct ccs_mpi_topo d = {0, 0};
    int status = MPI_UNDEFINED, n = 0, weighted = 0, rank = 0;
    if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &status) != MPI_SUCCESS)
        return d;
    if (status == MPI_CART && PMPI_Cartdim_get(comm, &n) == MPI_SUCCESS) {
        d.in = d.out = 2 * n; /* two neighbours a dimension, MPI_PROC_NULL ones included */
    } else if (status == MPI_GRAPH && PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS &&
               PMPI_Graph_neighbors_count(comm, rank, &n) == MPI_SUCCESS) {
        d.in = d.out = n;
    } else if (status == MPI_DIST_GRAPH) {
        int in = 0, out = 0;
        if (PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted) == MPI_SUCCESS)
            d.in = in, d.out = out;
    }
    union ccs_mpi_hval v = {.topo = d};
    ccs_mpi_hput(&ccs_mpi_topos, CCS_MPI_HKEY(comm), &v);
    return d;
}
