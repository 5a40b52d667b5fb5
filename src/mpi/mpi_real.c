/*
 * mpi_real.c - the MPI hot path's helpers: the real PMPI functions, the
 * datatype and op of a call in ccshim's terms, its size in bytes, and the
 * communicator entry of a handle.  Used by the wrappers (mpi_wrap.c), the
 * set-up (mpi_setup.c) and the features' MPI glue (coalesce_mpi.c,
 * desync_mpi.c).
 */
#include "log.h"
#include "mpi_shim.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "real.h"
#include "ring.h"

static int missing_logged;

#define CCS_X(name, ...) __typeof__(PMPI_##name) *ccs_real_##name;
CCS_MPI_FUNCS(CCS_X)
#undef CCS_X

int ccs_mpi_resolve(void)
{
    int missing = 0;
#define CCS_X(name, ...)                                                                                   \
    if (!ccs_real_##name) {                                                                                \
        ccs_real_##name = (__typeof__(PMPI_##name) *)ccs_real_symbol("PMPI_" #name, NULL);                 \
        if (!ccs_real_##name) {                                                                            \
            ccs_log_once(&missing_logged, CCS_LOG_ERROR, "the MPI library has no PMPI_" #name              \
                                                         "; calls to it fail with MPI_ERR_INTERN");         \
            missing++;                                                                                     \
        }                                                                                                  \
    }
    CCS_MPI_FUNCS(CCS_X)
#undef CCS_X
    return missing ? -1 : 0;
}

__attribute__((constructor)) static void mpi_ctor(void) { ccs_mpi_resolve(); }

/* ---------------------------------------------------- datatypes and ops */

/* The predefined datatype DT in ccshim's terms, by comparison with each
 * (slow path: types missing from the table, derived types). */
static uint8_t classify(MPI_Datatype dt)
{
    if (dt == MPI_FLOAT) return CCS_DT_FLOAT32;
    if (dt == MPI_DOUBLE) return CCS_DT_FLOAT64;
    if (dt == MPI_INT) return CCS_DT_INT32;
    if (dt == MPI_INT64_T || dt == MPI_LONG_LONG || (dt == MPI_LONG && sizeof(long) == 8)) return CCS_DT_INT64;
    if (dt == MPI_BYTE) return CCS_DT_BYTE;
    if (dt == MPI_CHAR) return CCS_DT_CHAR;
    if (dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT64_T || (dt == MPI_UNSIGNED_LONG && sizeof(long) == 8))
        return CCS_DT_UINT64;
    if (dt == MPI_LONG) return CCS_DT_INT32;
    if (dt == MPI_UNSIGNED_LONG) return CCS_DT_UINT32;
    if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) return CCS_DT_UINT32;
    if (dt == MPI_INT32_T) return CCS_DT_INT32;
    if (dt == MPI_SHORT || dt == MPI_INT16_T) return CCS_DT_INT16;
    if (dt == MPI_UNSIGNED_SHORT || dt == MPI_UINT16_T) return CCS_DT_UINT16;
    if (dt == MPI_SIGNED_CHAR || dt == MPI_INT8_T) return CCS_DT_INT8;
    if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UINT8_T) return CCS_DT_UINT8;
    if (dt == MPI_LONG_DOUBLE) return CCS_DT_LONG_DOUBLE;
    if (dt == MPI_C_FLOAT_COMPLEX || dt == MPI_C_COMPLEX) return CCS_DT_COMPLEX64;
    if (dt == MPI_C_DOUBLE_COMPLEX) return CCS_DT_COMPLEX128;
    if (dt == MPI_FLOAT_INT || dt == MPI_DOUBLE_INT || dt == MPI_LONG_INT || dt == MPI_2INT ||
        dt == MPI_SHORT_INT || dt == MPI_LONG_DOUBLE_INT)
        return CCS_DT_PAIR;
    if (dt == MPI_DATATYPE_NULL) return CCS_DT_NONE;
    return CCS_DT_DERIVED;
}

/* Handle -> (normalised type, size), one slot per predefined type at the
 * slot its handle hashes to; written once by the constructor below, before
 * any wrapper runs, and only read afterwards.  A type whose slot another
 * took first (the most used are entered first) takes the slow path, which
 * answers the same. */
struct ccs_mpi_dt_slot ccs_mpi_dt_table[1u << CCS_MPI_DT_BITS];

static void dt_table_fill(void)
{
    const MPI_Datatype predefined[] = {
        MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_INT64_T, MPI_LONG_LONG, MPI_LONG, MPI_BYTE, MPI_CHAR,
        MPI_UNSIGNED_LONG_LONG, MPI_UINT64_T, MPI_UNSIGNED_LONG, MPI_UNSIGNED, MPI_UINT32_T, MPI_INT32_T,
        MPI_SHORT, MPI_INT16_T, MPI_UNSIGNED_SHORT, MPI_UINT16_T, MPI_SIGNED_CHAR, MPI_INT8_T,
        MPI_UNSIGNED_CHAR, MPI_UINT8_T, MPI_LONG_DOUBLE, MPI_C_FLOAT_COMPLEX, MPI_C_COMPLEX,
        MPI_C_DOUBLE_COMPLEX, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT,
        MPI_LONG_DOUBLE_INT};
    for (size_t i = 0; i < sizeof predefined / sizeof predefined[0]; i++) {
        MPI_Datatype dt = predefined[i];
        struct ccs_mpi_dt_slot *s = &ccs_mpi_dt_table[ccs_slot_hash((uint64_t)(uintptr_t)dt, CCS_MPI_DT_BITS)];
        if (dt == MPI_DATATYPE_NULL || s->dt != MPI_DATATYPE_NULL)
            continue; /* an alias already entered, or the slot is taken */
        uint8_t norm = classify(dt);
        s->norm = norm;
        s->size = (uint8_t)ccs_dtype_size(norm);
        s->dt = dt;
    }
}

__attribute__((constructor)) static void dt_ctor(void)
{
    for (size_t i = 0; i < sizeof ccs_mpi_dt_table / sizeof ccs_mpi_dt_table[0]; i++)
        ccs_mpi_dt_table[i].dt = MPI_DATATYPE_NULL;
    dt_table_fill();
}

uint8_t ccs_mpi_dtype_slow(MPI_Datatype dt) { return classify(dt); }

uint8_t ccs_mpi_op_slow(MPI_Op op)
{
    if (op == MPI_SUM) return CCS_OP_SUM;
    if (op == MPI_MAX) return CCS_OP_MAX;
    if (op == MPI_MIN) return CCS_OP_MIN;
    if (op == MPI_PROD) return CCS_OP_PROD;
    if (op == MPI_BAND) return CCS_OP_BAND;
    if (op == MPI_BOR) return CCS_OP_BOR;
    if (op == MPI_BXOR) return CCS_OP_BXOR;
    if (op == MPI_LAND) return CCS_OP_LAND;
    if (op == MPI_LOR) return CCS_OP_LOR;
    if (op == MPI_LXOR) return CCS_OP_LXOR;
    if (op == MPI_MINLOC) return CCS_OP_MINLOC;
    if (op == MPI_MAXLOC) return CCS_OP_MAXLOC;
    if (op == MPI_REPLACE) return CCS_OP_REPLACE;
    if (op == MPI_NO_OP) return CCS_OP_NO_OP;
    if (op == MPI_OP_NULL) return CCS_OP_NONE;
    return CCS_OP_USER;
}

uint64_t ccs_mpi_bytes_slow(int64_t count, MPI_Datatype dt)
{
    if (count <= 0)
        return 0;
    unsigned sz = ccs_dtype_size(classify(dt));
    if (sz == 0) {
        int s = 0;
        if (dt == MPI_DATATYPE_NULL || PMPI_Type_size(dt, &s) != MPI_SUCCESS || s < 0)
            return 0;
        sz = (unsigned)s;
    }
    return (uint64_t)count * sz;
}

/* ------------------------------------------------------- communicators */

int ccs_mpi_remote_size(MPI_Comm comm)
{
    int inter = 0, rsize = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || !inter ||
        PMPI_Comm_remote_size(comm, &rsize) != MPI_SUCCESS || rsize < 1)
        return 0;
    return rsize;
}

struct ccs_comm *ccs_mpi_comm_slow(MPI_Comm comm)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_MPI, (uintptr_t)comm);
    if (CCS_LIKELY(c != NULL)) {
        ccs_ring_set_last_comm(c);
        return c;
    }
    if (comm == MPI_COMM_NULL)
        return NULL;
    int rank = -1, size = -1, init = 0;
    PMPI_Initialized(&init);
    if (!init)
        return NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    return ccs_comm_adopt_inter(CCS_BE_MPI, (uintptr_t)comm, rank, size, ccs_mpi_remote_size(comm));
}
