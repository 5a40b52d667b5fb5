/*
 * ccs_trace_dump.c - prints traces as tab-separated lines for the tests' awk
 * checks (independent of ccshim-audit's formats on purpose: the tests check
 * what the library wrote, field by field).
 *
 *   ccs_trace_dump FILE...
 *
 *   C  trace_rank  id  parent  rank  size  how  color  backend
 *   R  trace_rank  comm  seq  kind  step  flags  group_depth  root  count
 *      dtype  op  fingerprint  backend  bytes
 *   E  trace_rank  records  dropped  steps  reason  signo   (the last END chunk)
 *
 * ids and fingerprints in hex, names from the kind/dtype/op lists, flags as
 * a comma-separated list of names ("-" for none).  Exit 1 on an unreadable
 * or truncated file.
 */
#include "ccs_kinds.h"
#include "trace_reader.h"
#include <stdio.h>
#include <string.h>

static void flag_names(unsigned flags, char *buf, size_t n)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {
#define CCS_X(e, b, s) {b, s},
        CCS_FLAG_LIST(CCS_X)
#undef CCS_X
    };
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (flags & names[i].bit)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "," : "", names[i].name);
    if (!o)
        snprintf(buf, n, "-");
}

static int dump(const char *path)
{
    char err[512], flags[128];
    struct ccs_item it;
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rank = ccs_trace_hdr(r)->rank, rc;
    while ((rc = ccs_trace_next(r, &it, err, sizeof err)) == 1) {
        if (it.type == CCS_ITEM_COMM) {
            const struct ccs_trace_comm *c = &it.u.comm;
            printf("C\t%d\t%016llx\t%016llx\t%d\t%d\t%s\t%d\t%s\n", rank, (unsigned long long)c->id,
                   (unsigned long long)c->parent, c->rank, c->size, ccs_kind_name(c->how), c->color,
                   ccs_backend_name(c->backend));
        } else if (it.type == CCS_ITEM_RECORD) {
            const struct ccs_record *x = &it.u.record;
            flag_names(x->flags, flags, sizeof flags);
            printf("R\t%d\t%016llx\t%llu\t%s\t%u\t%s\t%u\t%d\t%llu\t%s\t%s\t%016llx\t%s\t%llu\n", rank,
                   (unsigned long long)x->comm, (unsigned long long)x->seq, ccs_kind_name(x->kind), x->step, flags,
                   x->group_depth, x->root, (unsigned long long)x->count, ccs_dtype_name(x->dtype),
                   ccs_op_name(x->op), (unsigned long long)x->fingerprint, ccs_backend_name(x->backend),
                   (unsigned long long)x->bytes);
        } else if (it.type == CCS_ITEM_END) {
            static const char *reasons[] = {"flush", "finalize", "exit", "signal"};
            const struct ccs_trace_end *e = &it.u.end;
            printf("E\t%d\t%llu\t%llu\t%llu\t%s\t%d\n", rank, (unsigned long long)e->records,
                   (unsigned long long)e->dropped, (unsigned long long)e->steps,
                   e->reason >= 0 && e->reason <= 3 ? reasons[e->reason] : "?", e->signo);
        }
    }
    if (rc < 0 || ccs_trace_truncated(r)) {
        fprintf(stderr, "%s: %s\n", path, rc < 0 ? err : "truncated (no END chunk)");
        ccs_trace_close(r);
        return 1;
    }
    ccs_trace_close(r);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        bad |= dump(argv[i]);
    return bad;
}
