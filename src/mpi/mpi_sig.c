/*
 * mpi_sig.c - type signatures of MPI datatypes for the fingerprints
 * (docs/desync.md, "What must agree").  MPI matches collectives by type
 * signature, not by (count, datatype): a derived datatype's signature is
 * worked out once per handle from MPI_Type_get_envelope/contents, reduced
 * to its canonical form (sig_canon.c) and cached; MPI_Type_free drops the
 * entry, so a handle reused for another type is worked out again.
 *
 * The cache is an open-addressing table like the communicator table:
 * lock-free lookups, a mutex for inserts and removals (first use and
 * MPI_Type_free only).  Predefined basic types never reach it.
 */
#include "log.h"
#include "mpi_shim.h"
#include "sig_canon.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIG_BITS 12
#define SIG_SLOTS (1u << SIG_BITS)
#define TOMBSTONE ((uintptr_t)1)
#define MAX_DEPTH 16
#define NAMED_FLAG 0x80000000u

struct sig_entry {
    _Atomic uintptr_t handle; /* 0 free, 1 tombstone */
    uint8_t dtype;            /* basic type when the signature is one type; DERIVED; NONE when empty */
    uint32_t sig;             /* DERIVED: hash of the primitive root, 0 when not known */
    uint64_t per;             /* basic: elements per datatype; DERIVED: bytes per datatype */
};

static struct sig_entry table[SIG_SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int full_logged;

static inline size_t slot_of(uintptr_t h) { return ccs_slot_hash((uint64_t)h, SIG_BITS); }

static inline uintptr_t key_of(MPI_Datatype dt) { return (uintptr_t)dt; }

static struct sig_entry *lookup(uintptr_t key)
{
    size_t i = slot_of(key);
    for (size_t n = 0; n < SIG_SLOTS; n++, i = (i + 1) & (SIG_SLOTS - 1)) {
        uintptr_t h = atomic_load_explicit(&table[i].handle, memory_order_acquire);
        if (h == 0)
            return NULL;
        if (h == key)
            return &table[i];
    }
    return NULL;
}

/* Size in bytes (MPI_Type_size_x: a type may exceed 2 GiB); -1 when unknown. */
static int64_t type_size(MPI_Datatype dt)
{
    MPI_Count s = 0;
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size_x(dt, &s) != MPI_SUCCESS || s < 0 || s == MPI_UNDEFINED)
        return -1;
    return (int64_t)s;
}

/* Frees a datatype returned by MPI_Type_get_contents (derived ones only),
 * through the real function: our MPI_Type_free wrapper takes the lock. */
static void free_contents_type(MPI_Datatype t)
{
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) == MPI_SUCCESS && comb != MPI_COMBINER_NAMED &&
        CCS_REAL(Type_free))
        ccs_real_Type_free(&t);
}

/* Appends a predefined datatype's signature.  0, or -1 when not known. */
static int named(MPI_Datatype dt, struct ccs_sig_runs *out)
{
    uint8_t d = ccs_mpi_dtype(dt);
    if (d != CCS_DT_DERIVED && d != CCS_DT_PAIR && d != CCS_DT_NONE && ccs_dtype_size(d))
        return ccs_sig_append(out, d, 1);
    /* The pair types of MINLOC/MAXLOC are defined by the standard as structs. */
    struct {
        MPI_Datatype t;
        MPI_Datatype a;
    } pairs[] = {{MPI_FLOAT_INT, MPI_FLOAT}, {MPI_DOUBLE_INT, MPI_DOUBLE},      {MPI_LONG_INT, MPI_LONG},
                 {MPI_2INT, MPI_INT},       {MPI_SHORT_INT, MPI_SHORT},        {MPI_LONG_DOUBLE_INT, MPI_LONG_DOUBLE}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (dt == pairs[i].t)
            return ccs_sig_append(out, ccs_mpi_dtype(pairs[i].a), 1) | ccs_sig_append(out, CCS_DT_INT32, 1);
    /* MPI_PACKED matches any signature of the same bytes: not a type to compare. */
    if (dt == MPI_PACKED)
        return -1;
    int64_t sz = type_size(dt);
    if (sz < 0)
        return -1;
    if (sz == 0)
        return 0; /* (MPI_LB/MPI_UB of old MPIs) */
    /* Another predefined type (MPI_WCHAR, MPI_C_BOOL, MPI_AINT...): its name
     * identifies it the same way in every process of the job. */
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    if (PMPI_Type_get_name(dt, name, &len) != MPI_SUCCESS || len <= 0)
        return -1;
    uint32_t code = (uint32_t)ccs_hash_bytes(name, (size_t)len, (uint64_t)sz) | NAMED_FLAG;
    return ccs_sig_append(out, code, 1);
}

static int walk(MPI_Datatype dt, struct ccs_sig_runs *out, int depth);

/* Appends SUB's signature REPS times, through its primitive root so that a
 * long repetition stays one run or a few. */
static int append_type(MPI_Datatype sub, uint64_t reps, struct ccs_sig_runs *out, int depth)
{
    if (reps == 0)
        return 0;
    struct ccs_sig_runs *w = malloc(sizeof *w), *q = malloc(sizeof *q);
    uint64_t r = 0;
    int rc = -1;
    if (w && q) {
        w->n = 0;
        if (walk(sub, w, depth + 1) == 0 && ccs_sig_primitive(w, q, &r) == 0)
            rc = ccs_sig_append_pow(out, q, r * reps);
    }
    free(w);
    free(q);
    return rc;
}

static int walk(MPI_Datatype dt, struct ccs_sig_runs *out, int depth)
{
    int ni = 0, na = 0, nd = 0, comb = 0;
    if (depth > MAX_DEPTH || PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return -1;
    if (comb == MPI_COMBINER_NAMED)
        return named(dt, out);
    if (ni < 0 || na < 0 || nd <= 0)
        return -1;
    int *ints = malloc(((size_t)ni + 1) * sizeof *ints);
    MPI_Aint *aints = malloc(((size_t)na + 1) * sizeof *aints);
    MPI_Datatype *types = malloc((size_t)nd * sizeof *types);
    int rc = -1;
    if (!ints || !aints || !types ||
        PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, types) != MPI_SUCCESS) {
        free(ints), free(aints), free(types);
        return -1;
    }
    switch (comb) {
    case MPI_COMBINER_STRUCT:
        /* ints: count, blocklengths[count]; types[count] */
        rc = 0;
        for (int i = 0; i < ints[0] && i < nd && rc == 0; i++)
            rc = ints[1 + i] < 0 ? -1 : append_type(types[i], (uint64_t)ints[1 + i], out, depth);
        break;
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_CONTIGUOUS:
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
    case MPI_COMBINER_SUBARRAY:
    case MPI_COMBINER_DARRAY:
    case MPI_COMBINER_RESIZED: {
        /* One old type: the signature is the old type's, repeated as many
         * times as the sizes say, whatever the layout. */
        int64_t s = type_size(dt), so = type_size(types[0]);
        if (s >= 0 && so == 0)
            rc = 0;
        else if (s >= 0 && so > 0 && s % so == 0)
            rc = append_type(types[0], (uint64_t)(s / so), out, depth);
        break;
    }
    default:
        break; /* Fortran parameterised types and anything newer: not known */
    }
    for (int i = 0; i < nd; i++)
        free_contents_type(types[i]);
    free(ints), free(aints), free(types);
    return rc;
}

/* Works out DT's entry (slow path, allocates). */
static void compute(MPI_Datatype dt, struct sig_entry *e)
{
    struct ccs_sig_runs *w = malloc(sizeof *w), *q = malloc(sizeof *q);
    uint64_t r = 0;
    int64_t sz = type_size(dt);
    e->dtype = CCS_DT_DERIVED;
    e->sig = 0;
    e->per = sz > 0 ? (uint64_t)sz : 0;
    if (w && q) {
        w->n = 0;
        if (walk(dt, w, 0) == 0 && ccs_sig_primitive(w, q, &r) == 0) {
            if (q->n == 0) {
                e->dtype = CCS_DT_NONE;
                e->per = 0;
            } else if (q->n == 1 && q->run[0].code < CCS_DT_MAX && ccs_dtype_size(q->run[0].code)) {
                e->dtype = (uint8_t)q->run[0].code;
                e->per = r;
            } else {
                e->sig = ccs_sig_hash(q);
            }
        }
    }
    if (sz == 0) {
        e->dtype = CCS_DT_NONE;
        e->per = 0;
        e->sig = 0;
    }
    free(w);
    free(q);
}

static void insert(uintptr_t key, const struct sig_entry *e)
{
    pthread_mutex_lock(&lock);
    if (lookup(key)) {
        pthread_mutex_unlock(&lock);
        return;
    }
    size_t i = slot_of(key);
    for (size_t n = 0; n < SIG_SLOTS; n++, i = (i + 1) & (SIG_SLOTS - 1)) {
        uintptr_t h = atomic_load_explicit(&table[i].handle, memory_order_relaxed);
        if (h == 0 || h == TOMBSTONE) {
            table[i].dtype = e->dtype;
            table[i].sig = e->sig;
            table[i].per = e->per;
            atomic_store_explicit(&table[i].handle, key, memory_order_release);
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    pthread_mutex_unlock(&lock);
    ccs_log_once(&full_logged, CCS_LOG_WARN,
                 "more than %u derived datatypes alive; signatures of new ones are worked out at every call",
                 SIG_SLOTS);
}

void ccs_mpi_sig_slow(int64_t count, MPI_Datatype dt, struct ccs_mpi_sig *o)
{
    memset(o, 0, sizeof *o);
    o->dtype = CCS_DT_NONE;
    if (count <= 0 || dt == MPI_DATATYPE_NULL)
        return;
    uintptr_t key = key_of(dt);
    struct sig_entry local, *e = key > TOMBSTONE ? lookup(key) : NULL;
    if (!e) {
        compute(dt, &local);
        if (key > TOMBSTONE)
            insert(key, &local);
        e = &local;
    }
    uint64_t n = (uint64_t)count * e->per;
    o->dtype = e->dtype;
    if (e->dtype == CCS_DT_NONE || n == 0) {
        o->dtype = CCS_DT_NONE;
        return;
    }
    o->count = n;
    o->sig = e->dtype == CCS_DT_DERIVED ? e->sig : 0;
    o->bytes = e->dtype == CCS_DT_DERIVED ? n : n * ccs_dtype_size(e->dtype);
}

void ccs_mpi_sig_forget(MPI_Datatype dt)
{
    uintptr_t key = key_of(dt);
    if (key <= TOMBSTONE || !lookup(key))
        return;
    pthread_mutex_lock(&lock);
    struct sig_entry *e = lookup(key);
    if (e)
        atomic_store_explicit(&e->handle, TOMBSTONE, memory_order_release);
    pthread_mutex_unlock(&lock);
}

static int w_Type_free(MPI_Datatype *t, void *ra)
{
    (void)ra;
    if (t)
        ccs_mpi_sig_forget(*t);
    return CCS_REAL(Type_free) ? ccs_real_Type_free(t) : MPI_ERR_INTERN;
}
CCS_MPI_ENTRY(Type_free, (MPI_Datatype * t), t)
