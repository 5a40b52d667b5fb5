/* names.c - number-to-name tables expanded from ccs_kinds.h.  One function
 * per list and column, alike in shape on purpose: each is the list's own
 * expansion (a switch the compiler makes a table of), and the lists differ
 * in their columns. */
#include "ccs_kinds.h"
#include <string.h>

const char *ccs_kind_name(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, ...) case n: return s;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

int ccs_kind_class(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, ...) case n: return c;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

int ccs_kind_parse(const char *name)
{
#define CCS_X(e, n, s, ...) if (strcmp(name, s) == 0) return n;
    CCS_KIND_LIST(CCS_X)
#undef CCS_X
    return -1;
}

const char *ccs_dtype_name(unsigned dtype)
{
    switch (dtype) {
#define CCS_X(e, n, s, z) case n: return s;
        CCS_DTYPE_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

unsigned ccs_dtype_size(unsigned dtype)
{
    switch (dtype) {
#define CCS_X(e, n, s, z) case n: return z;
        CCS_DTYPE_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

const char *ccs_op_name(unsigned op)
{
    switch (op) {
#define CCS_X(e, n, s) case n: return s;
        CCS_OP_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

const char *ccs_backend_name(unsigned backend)
{
    switch (backend) {
#define CCS_X(e, n, s) case n: return s;
        CCS_BACKEND_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}
