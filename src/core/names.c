/* names.c - number-to-name tables expanded from ccs_kinds.h.  One function
 * per list and column, alike in shape on purpose: each is the list's own
 * expansion (a switch the compiler makes a table of), and the lists differ
 * in their columns.  Then the text of a call and of a list of ranks, as the
 * library's logs and the tools print them (both link this file). */
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "trace_format.h"
#include <stdarg.h>
#include <stdio.h>
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
#define CCS_X(e, n, s, ...) case n: return s;
        CCS_BACKEND_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

__attribute__((format(printf, 3, 4))) static int sfmt(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    return r;
}

void ccs_call_str(unsigned kind, uint64_t count, unsigned dtype, unsigned op, int root, unsigned flags, char *buf,
                  size_t n)
{
    int o = sfmt(buf, n, "%s", ccs_kind_name(kind));
    if (o < 0 || (size_t)o >= n)
        return;
    if (ccs_kind_class(kind) != CCS_CLASS_COLL || kind == CCS_KIND_BARRIER) {
        if (flags & CCS_F_DEFERRED)
            sfmt(buf + o, n - (size_t)o, "(deferred)");
        return;
    }
    int m = sfmt(buf + o, n - (size_t)o, "(count=%llu, %s", (unsigned long long)count, ccs_dtype_name(dtype));
    if (m < 0 || (size_t)(o += m) >= n)
        return;
    if (op)
        o += sfmt(buf + o, n - (size_t)o, ", %s", ccs_op_name(op));
    if ((size_t)o < n && root >= 0)
        o += sfmt(buf + o, n - (size_t)o, ", root=%d", root);
    if ((size_t)o < n && (flags & CCS_F_NONBLOCKING))
        o += sfmt(buf + o, n - (size_t)o, ", nonblocking");
    if ((size_t)o < n && (flags & CCS_F_DEFERRED))
        o += sfmt(buf + o, n - (size_t)o, ", deferred");
    if ((size_t)o < n)
        sfmt(buf + o, n - (size_t)o, ")");
}

void ccs_ranks_str(const int32_t *r, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap)
        buf[0] = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        char part[32];
        if (j > i)
            sfmt(part, sizeof part, "%s%d-%d", i ? "," : "", r[i], r[j]);
        else
            sfmt(part, sizeof part, "%s%d", i ? "," : "", r[i]);
        size_t l = strlen(part);
        if (o + l + 4 >= cap) {
            if (o + 4 < cap)
                sfmt(buf + o, cap - o, "...");
            return;
        }
        memcpy(buf + o, part, l + 1);
        o += l;
        i = j + 1;
    }
}
